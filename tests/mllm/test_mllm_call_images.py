"""The images a CallMLLM call attached, kept as attached: through the real server process over
streamable HTTP and the provider stub that records every byte it receives, the files under the
run folder's call_images/ are exactly the bytes the provider got (a region: its PNG), one per
digest; a planted file of a digest's name is replaced, not trusted; and a session's server keeps
them only when `execution.keep_call_images` is true."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mllm.mllm_mcp_client import BlockingMcpClient, HttpEndpoint, http_server
from mllm.mllm_provider_stub import ProviderStub
from mllm.mllm_test_data import read_trace, request
from mllm.test_mllm_server import one_new, openai_images, text_of
from support.sessions import TASK, offline_plan
from veriharness._util.hashing import sha256_bytes
from veriharness.agent.session import running_mllm_server
from veriharness.runfolder.call_images import CALL_IMAGES, image_name, kept_image
from veriharness.runfolder.mllm_trace import CallStarted, TracedImage

TOKEN = "mllm-session-token-images-0123456789"
REGION = {"x": 17, "y": 13, "width": 81, "height": 57}


class Served:
    """A real server keeping images in `run_dir`/call_images/, and a client of it."""

    def __init__(self, run_dir: Path, client: BlockingMcpClient, stub: ProviderStub) -> None:
        self.run_dir, self.client, self.stub = run_dir, client, stub

    def sent(self, inputs: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
        """Call with `inputs`; the images the provider received, with their media types."""
        before = len(self.stub.received)
        result = self.client.call(request(inputs=inputs, model_profile="native"))
        assert not result.is_error, text_of(result)
        return openai_images(one_new(self.stub, before).json())

    def kept(self) -> dict[str, bytes]:
        folder = self.run_dir / CALL_IMAGES
        return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


@contextmanager
def _serve(
    stub: ProviderStub, workspace: Path, catalog: Path, run_dir: Path, keep: bool
) -> Iterator[Served]:
    env = dict(os.environ) | {"VH_STUB_URL": stub.base}
    extra = ("--call-images", str(run_dir / CALL_IMAGES)) if keep else ()
    log = run_dir.parent / "server.log"
    with http_server(
        workspace, catalog, run_dir / "mllm_trace.jsonl", env, TOKEN, log, extra
    ) as url:
        with BlockingMcpClient(HttpEndpoint(url, TOKEN)) as client:
            yield Served(run_dir, client, stub)


@pytest.fixture
def served(
    stub: ProviderStub, workspace: Path, catalog_file: Path, tmp_path: Path
) -> Iterator[Served]:
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    with _serve(stub, workspace, catalog_file, run_dir, keep=True) as server:
        yield server


def _name(data: bytes, media: str) -> str:
    return image_name(sha256_bytes(data), media).removeprefix(f"{CALL_IMAGES}/")


def test_each_kept_file_is_the_bytes_the_provider_received(served: Served, workspace) -> None:
    full = served.sent([{"kind": "image", "label": "a", "path": "shots/screen.png"}])
    crops = served.sent(
        [
            {"kind": "image", "label": "b", "path": "photo.jpg"},
            {"kind": "image", "label": "c", "path": "alpha.png", "region": REGION},
            {"kind": "text", "label": "t", "content": "<p>hi</p>"},
        ]
    )
    assert full[0][1] == (workspace / "shots/screen.png").read_bytes()
    assert [media for media, _ in crops] == ["image/jpeg", "image/png"]
    sent = full + crops
    assert served.kept() == {_name(data, media): data for media, data in sent}
    assert sorted(served.kept()) == sorted(
        [
            _name(sent[0][1], "image/png"),
            _name(sent[1][1], "image/jpeg"),
            _name(sent[2][1], "image/png"),
        ]
    )
    events = read_trace(served.run_dir / "mllm_trace.jsonl")
    traced = [
        i
        for e in events
        if isinstance(e, CallStarted)
        for i in e.inputs
        if isinstance(i, TracedImage)
    ]
    for item, (_, data) in zip(traced, sent, strict=True):
        errors: list[str] = []
        name = kept_image(served.run_dir, item.attached_sha256, errors)
        assert name is not None and errors == []
        assert (served.run_dir / name).read_bytes() == data


def test_a_digest_is_kept_once_however_many_calls_attach_it(served: Served) -> None:
    crop = {"kind": "image", "label": "c", "path": "shots/screen.png", "region": REGION}
    [(_, first)] = served.sent([crop])
    [path] = (served.run_dir / CALL_IMAGES).iterdir()
    written = path.stat()
    for label in ("again", "once more"):
        [(_, data)] = served.sent([crop | {"label": label}])
        assert data == first
    both = served.sent([crop, crop | {"label": "twin"}])
    assert [data for _, data in both] == [first, first]
    assert list((served.run_dir / CALL_IMAGES).iterdir()) == [path]
    now = path.stat()
    assert (now.st_ino, now.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert not [p for p in (served.run_dir / CALL_IMAGES).iterdir() if p.name.startswith(".")]


def test_a_planted_file_of_a_digests_name_is_replaced_not_trusted(
    stub: ProviderStub, workspace: Path, catalog_file: Path, tmp_path: Path
) -> None:
    screen = (workspace / "shots/screen.png").read_bytes()
    run_dir = tmp_path / "r1"
    folder = run_dir / CALL_IMAGES
    folder.mkdir(parents=True)
    junk = folder / _name(screen, "image/png")
    junk.write_bytes(b"not the image the model saw")
    jpeg = (workspace / "photo.jpg").read_bytes()
    linked = folder / _name(jpeg, "image/jpeg")
    linked.symlink_to(workspace / "photo.jpg")  # the right bytes, but not a file of its own
    errors: list[str] = []
    assert kept_image(run_dir, sha256_bytes(screen), errors) is None
    assert kept_image(run_dir, sha256_bytes(jpeg), errors) is None
    assert len(errors) == 2 and all("do not hash to its name" in e for e in errors)
    with _serve(stub, workspace, catalog_file, run_dir, keep=True) as served:
        sent = served.sent(
            [
                {"kind": "image", "label": "a", "path": "shots/screen.png"},
                {"kind": "image", "label": "b", "path": "photo.jpg"},
            ]
        )
    assert [data for _, data in sent] == [screen, jpeg]
    assert junk.read_bytes() == screen and not linked.is_symlink() and linked.read_bytes() == jpeg
    assert (workspace / "photo.jpg").read_bytes() == jpeg  # the link's target is untouched
    errors = []
    assert kept_image(run_dir, sha256_bytes(screen), errors) == f"{CALL_IMAGES}/{junk.name}"
    assert errors == []


@pytest.mark.parametrize("keep", [True, False])
def test_a_sessions_server_keeps_images_only_with_keep_call_images(
    stub: ProviderStub,
    workspace: Path,
    catalog_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    keep: bool,
) -> None:
    """The server as run-agent starts it from the session's plan (`execution.keep_call_images`)."""
    monkeypatch.setenv("VH_STUB_URL", stub.base)
    plan = offline_plan(tmp_path, TASK, catalog=catalog_file, keep_call_images=keep)
    with running_mllm_server(plan, workspace, None, TOKEN, tmp_path / "port") as url:
        with BlockingMcpClient(HttpEndpoint(url, TOKEN)) as client:
            served = Served(plan.run_dir, client, stub)
            crop = {"kind": "image", "label": "c", "path": "shots/screen.png", "region": REGION}
            [(_, data)] = served.sent([crop])
    assert served.kept() == ({_name(data, "image/png"): data} if keep else {})
    assert (plan.run_dir / CALL_IMAGES).exists() is keep
