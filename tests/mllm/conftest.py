"""Shared fixtures: a provider stub, a workspace with test images, a catalog, and one real
``veriharness mllm-server`` process reached through the MCP SDK's stdio client."""

from __future__ import annotations

import os
import socket
import struct
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from mcp.client.stdio import StdioServerParameters
from mllm_mcp_client import BlockingMcpClient
from mllm_provider_stub import ProviderStub
from PIL import Image

ANTHROPIC_KEY_VALUE = "sk-stub-secret-0123456789abcdef"


def header_only_png(width: int, height: int) -> bytes:
    """A PNG that declares a size but holds no pixels: enough for Pillow to read the header."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def noise_image(width: int, height: int, seed: int, mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(seed)
    channels = len(mode)
    pixels = rng.integers(0, 256, size=(height, width, channels), dtype=np.uint8)
    return Image.fromarray(pixels, mode)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def stub() -> Iterator[ProviderStub]:
    server = ProviderStub().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mllm")
    ws = root / "workspace"
    (ws / "shots").mkdir(parents=True)
    (ws / "folder.png").mkdir()
    noise_image(320, 200, seed=1).save(ws / "shots" / "screen.png")
    noise_image(120, 90, seed=2, mode="RGBA").save(ws / "alpha.png")
    noise_image(100, 80, seed=3).save(ws / "photo.jpg", quality=80)
    noise_image(40, 30, seed=4).save(ws / "old.bmp")
    (ws / "notes.txt").write_text("not an image")
    (ws / "huge.png").write_bytes(header_only_png(9000, 5000))
    outside = root / "outside"
    outside.mkdir()
    noise_image(10, 10, seed=5).save(outside / "secret.png")
    (ws / "link.png").symlink_to(outside / "secret.png")
    noise_image(12, 12, seed=6).save(ws / "inner.png")
    (ws / "shots" / "ok-link.png").symlink_to(ws / "inner.png")
    return ws


@pytest.fixture(scope="session")
def catalog_file(tmp_path_factory: pytest.TempPathFactory, stub: ProviderStub) -> Path:
    down = f"http://127.0.0.1:{closed_port()}"
    text = f"""
profiles:
  - name: default
    description: stub OpenAI-style model
    provider: {{api_style: openai-chat, base_url: "${{VH_STUB_URL}}/ok/v1", model: stub-vision}}
  - name: native
    description: stub with native JSON mode
    provider: {{api_style: openai-chat, base_url: "{stub.base}/ok/v1", model: stub-vision,
                native_json: true}}
  - name: claude
    description: stub Anthropic-style model
    provider: {{api_style: anthropic-messages, base_url: "${{VH_STUB_URL}}/ok", model: stub-claude,
                api_key_env: VH_TEST_ANTHROPIC_KEY, max_output_tokens: 256}}
  - name: broken
    description: answers HTTP 500
    provider: {{api_style: openai-chat, base_url: "{stub.base}/status500/v1", model: m}}
  - name: slow
    description: never answers in time
    provider: {{api_style: openai-chat, base_url: "{stub.base}/hang/v1", model: m,
                timeout_seconds: 0.5}}
  - name: patient
    description: never answers, and waits a while before giving up
    provider: {{api_style: openai-chat, base_url: "{stub.base}/hang/v1", model: m,
                timeout_seconds: 2}}
  - name: garbled
    description: answers in no known shape
    provider: {{api_style: anthropic-messages, base_url: "{stub.base}/malformed", model: m}}
  - name: down
    description: nothing listens
    provider: {{api_style: openai-chat, base_url: "{down}/v1", model: m}}
  - name: cut-openai
    description: stops at its output token limit
    provider: {{api_style: openai-chat, base_url: "{stub.base}/cut/v1", model: m,
                max_output_tokens: 5}}
  - name: cut-anthropic
    description: stops at its output token limit
    provider: {{api_style: anthropic-messages, base_url: "{stub.base}/cut", model: m,
                max_output_tokens: 7}}
  - name: nokey
    description: key variable not set
    provider: {{api_style: openai-chat, base_url: "{stub.base}/ok/v1", model: m,
                api_key_env: VH_TEST_UNSET_KEY}}
"""
    path = tmp_path_factory.mktemp("catalog") / "catalog.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trace") / "mllm_trace.jsonl"


@pytest.fixture(scope="session")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stderr") / "server.log"


def server_parameters(
    workspace: Path, catalog: Path, trace: Path, env: dict[str, str]
) -> StdioServerParameters:
    """The real `veriharness mllm-server` process, as Claude Code would start it."""
    args = ["-m", "veriharness", "mllm-server", "--workspace", str(workspace),
            "--catalog", str(catalog), "--trace", str(trace)]  # fmt: skip
    return StdioServerParameters(command=sys.executable, args=args, env=env)


@pytest.fixture(scope="session")
def mllm(
    stub: ProviderStub, workspace: Path, catalog_file: Path, trace_path: Path, server_log: Path
) -> Iterator[BlockingMcpClient]:
    env = {k: v for k, v in os.environ.items() if k != "VH_TEST_UNSET_KEY"}
    env |= {"VH_STUB_URL": stub.base, "VH_TEST_ANTHROPIC_KEY": ANTHROPIC_KEY_VALUE}
    params = server_parameters(workspace, catalog_file, trace_path, env)
    errlog = open(server_log, "w")  # noqa: SIM115
    with BlockingMcpClient(params, errlog) as client:
        yield client
    errlog.close()
