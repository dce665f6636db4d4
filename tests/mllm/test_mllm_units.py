"""In-process unit tests of the CallMLLM modules; the stdio tests cover them end to end."""

from __future__ import annotations

import base64
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from mllm_test_data import noise_image, read_trace

from veriharness.experiment.catalog import CatalogError, ProviderSettings
from veriharness.experiment.tool_contract import (
    CallRequest,
    ImageInput,
    JsonOutput,
    RequestRefused,
    TextOutput,
    check_reply,
)
from veriharness.mllm.backends import (
    AnthropicMessagesBackend,
    ModelRequest,
    OpenAIChatBackend,
    PreparedText,
    contract_text,
    splice_images,
)
from veriharness.mllm.images import prepare_image, resolve_image_path
from veriharness.mllm.trace import TraceWriter
from veriharness.runfolder.mllm_trace import CallRejected

MODULES = [
    "experiment.tool_contract",
    "mllm.images",
    "mllm.backends",
    "mllm.trace",
    "mllm.server",
    "experiment.catalog",
]


@pytest.mark.parametrize("name", MODULES)
def test_each_module_exports_what_it_declares(name: str) -> None:
    module = importlib.import_module(f"veriharness.{name}")
    assert module.__all__ and all(hasattr(module, item) for item in module.__all__)


def test_check_reply_statuses() -> None:
    assert check_reply(TextOutput(kind="text"), "{oops") == ("not_applicable", None)
    assert check_reply(JsonOutput(kind="json"), "[1, 2]") == ("ok", None)
    status, diagnostic = check_reply(JsonOutput(kind="json"), "\n  nope")
    assert status == "invalid_json" and "line 2 column 3" in diagnostic
    schema = {"type": "object", "properties": {"a": {"type": "object", "required": ["b"]}}}
    status, diagnostic = check_reply(JsonOutput(kind="json", schema=schema), '{"a": {}}')
    assert status == "schema_invalid" and "$.a" in diagnostic and "'b'" in diagnostic


def test_a_schema_ref_must_point_inside_the_schema() -> None:
    from pydantic import ValidationError

    defs = {"$defs": {"pt": {"type": "object", "required": ["x"]}, "anchored": {"$anchor": "n"}}}
    for ref in ("#/$defs/pt", "#n", "#"):
        JsonOutput(kind="json", schema={**defs, "items": {"$ref": ref}})
    schema = {**defs, "type": "array", "items": {"$ref": "#/$defs/pt"}}
    status, diagnostic = check_reply(JsonOutput(kind="json", schema=schema), '[{"y": 1}]')
    assert status == "schema_invalid" and "'x'" in diagnostic
    for ref, where in (
        ("#/$defs/missing", "/items"),
        ("https://example.org/point.json", "/items"),
        ("#nowhere", "/items"),
        ("other.json#/a", "/items"),
    ):
        with pytest.raises(ValidationError, match="must point inside the schema") as caught:
            JsonOutput(kind="json", schema={**defs, "items": {"$ref": ref}})
        assert f"at {where}: $ref {ref!r}" in str(caught.value)


def test_a_reply_that_cannot_be_checked_still_reaches_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model has answered (and been paid): a crash while checking the reply must not lose it."""
    from mllm_provider_stub import ProviderStub

    from veriharness._util.programs import project_root
    from veriharness.experiment.catalog import load_catalog
    from veriharness.experiment.taxonomy import load_taxonomy
    from veriharness.mllm import server

    stub = ProviderStub().start()
    try:
        stub.replies.append('{"a": 1}')
        catalog = tmp_path / "catalog.yaml"
        catalog.write_text(
            "profiles:\n  - name: default\n    description: stub\n"
            f"    provider: {{api_style: openai-chat, base_url: '{stub.base}/ok/v1', model: m}}\n"
        )
        (tmp_path / "ws").mkdir()
        noise_image(8, 8, seed=1).save(tmp_path / "ws" / "shot.png")
        taxonomy = load_taxonomy(project_root() / "prompts/taxonomy/capabilities-v0.1.yaml")
        service = server.CallService(
            (tmp_path / "ws").resolve(),
            load_catalog(catalog),
            taxonomy,
            TraceWriter(tmp_path / "trace.jsonl"),
        )

        def broken(output: object, text: str) -> object:
            raise RecursionError("maximum recursion depth exceeded")

        monkeypatch.setattr(server, "check_reply", broken)
        request = {
            "instruction": "Give a JSON object.",
            "inputs": [
                {"kind": "image", "label": "shot", "path": "shot.png"},
                {"kind": "text", "label": "note", "content": "x"},
            ],
            "capability_tags": ["B1"],
            "output": {"kind": "json"},
        }
        answer = service.call(request)
    finally:
        stub.stop()
    assert "check_failed" in answer and '{"a": 1}' in answer
    events = read_trace(tmp_path / "trace.jsonl")
    completed = [e for e in events if e.event == "mllm_call_completed"]
    assert len(completed) == 1
    assert completed[0].raw_response == '{"a": 1}'
    assert completed[0].parse_status == "check_failed"
    assert "RecursionError: maximum recursion depth exceeded" in completed[0].diagnostic


def test_tags_are_checked_only_against_the_taxonomy_given() -> None:
    args = {
        "instruction": "x",
        "inputs": [{"kind": "image", "label": "i", "path": "i.png"}],
        "capability_tags": ["NEW1"],
        "output": {"kind": "text"},
    }
    assert CallRequest.model_validate(args).capability_tags == ["NEW1"]
    with pytest.raises(ValueError, match="NEW1"):
        CallRequest.model_validate(args, context={"taxonomy_codes": ("A1",)})


def test_absolute_path_inside_the_workspace_is_accepted(tmp_path: Path) -> None:
    noise_image(8, 8, seed=0).save(tmp_path / "a.png")
    assert resolve_image_path(tmp_path, "a", str(tmp_path / "a.png")) == (tmp_path / "a.png")
    with pytest.raises(RequestRefused, match="outside the workspace"):
        resolve_image_path(tmp_path / "sub", "a", str(tmp_path / "a.png"))


def test_cmyk_jpeg_region_is_sent_as_rgb_png(tmp_path: Path) -> None:
    noise_image(30, 20, seed=9).convert("CMYK").save(tmp_path / "c.jpg")
    region = {"x": 1, "y": 2, "width": 10, "height": 5}
    prepared = prepare_image(
        tmp_path, ImageInput(kind="image", label="c", path="c.jpg", region=region)
    )
    assert prepared.media_type == "image/png" and prepared.data.startswith(b"\x89PNG")
    assert (prepared.width, prepared.height) == (30, 20)


def _settings(style: str, **extra: object) -> ProviderSettings:
    return ProviderSettings(api_style=style, base_url="http://127.0.0.1:9/api", model="m", **extra)


def test_payload_order_instruction_then_labelled_inputs_then_contract() -> None:
    request = ModelRequest(
        "Do it.", (PreparedText("notes", "abc"),), JsonOutput(kind="json", schema={"type": "array"})
    )
    for backend in (
        OpenAIChatBackend(_settings("openai-chat")),
        AnthropicMessagesBackend(_settings("anthropic-messages")),
    ):
        parts = backend.payload(request)["messages"][0]["content"]
        assert [p["text"] for p in parts] == [
            "Do it.",
            'Input "notes" (text):\nabc',
            contract_text(request.output),
        ]
    assert contract_text(TextOutput(kind="text")) is None
    assert '{"type": "array"}' in contract_text(request.output)


def test_encoded_body_is_exactly_the_json_of_the_payload(tmp_path: Path) -> None:
    noise_image(40, 30, seed=11).save(tmp_path / "a.png")
    noise_image(50, 20, seed=12).save(tmp_path / "b.png")
    images = tuple(
        prepare_image(
            tmp_path, ImageInput(kind="image", label=label, path=f"{label}.png", region=region)
        )
        for label, region in (("a", None), ("b", {"x": 3, "y": 4, "width": 20, "height": 10}))
    )
    tricky = 'quotes " and \\ back, <vh-image-00-0>, naïve 画面, \u2028 and \x00'
    request = ModelRequest(
        f"Compare {tricky}",
        (PreparedText("t", tricky), *images),
        JsonOutput(kind="json", schema={"description": tricky}),
    )
    for backend in (
        OpenAIChatBackend(_settings("openai-chat", native_json=True)),
        AnthropicMessagesBackend(_settings("anthropic-messages")),
    ):
        expected = json.dumps(backend.payload(request), ensure_ascii=False).encode("utf-8")
        assert backend.encode(request) == expected
        assert base64.b64encode(images[1].data) in expected


def test_splice_refuses_a_placeholder_that_is_not_unique(tmp_path: Path) -> None:
    noise_image(4, 4, seed=13).save(tmp_path / "a.png")
    image = prepare_image(tmp_path, ImageInput(kind="image", label="a", path="a.png"))
    assert splice_images('["<p>"]', {"<p>": image}) == (
        b'["' + base64.b64encode(image.data) + b'"]'
    )
    with pytest.raises(ValueError, match="occurs 2 times"):
        splice_images('["<p>", "<p>"]', {"<p>": image})


def test_missing_key_variable_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VH_UNIT_KEY", raising=False)
    with pytest.raises(CatalogError, match="VH_UNIT_KEY"):
        OpenAIChatBackend(_settings("openai-chat", api_key_env="VH_UNIT_KEY"))
    monkeypatch.setenv("VH_UNIT_KEY", "secret-value")
    backend = OpenAIChatBackend(_settings("openai-chat", api_key_env="VH_UNIT_KEY"))
    assert backend.headers() == {"authorization": "Bearer secret-value"}


def test_trace_lines_are_readable_before_the_writer_closes(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "deep" / "t.jsonl")
    writer.write(CallRejected(call_id="c1", time="t", error="e", request={"a": 1}))
    assert read_trace(tmp_path / "deep" / "t.jsonl")[0].call_id == "c1"
    writer.close()


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--workspace", "/nonexistent/ws", "is not a directory"),
        ("--catalog", "/nonexistent/catalog.yaml", "catalog file not found"),
    ],
)
def test_verb_refuses_bad_arguments_before_serving(
    tmp_path: Path, catalog_file: Path, flag: str, value: str, fragment: str
) -> None:
    args = {
        "--workspace": str(tmp_path),
        "--catalog": str(catalog_file),
        "--trace": str(tmp_path / "t.jsonl"),
    } | {flag: value}
    argv = [sys.executable, "-m", "veriharness", "mllm-server"]
    for key, item in args.items():
        argv += [key, item]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2 and fragment in done.stderr and value in done.stderr
