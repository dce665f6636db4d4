"""Shared fixtures: a provider stub, a workspace with test images, a catalog, and one real
``veriharness mllm-server`` process reached through the MCP SDK's stdio client."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mllm.mllm_mcp_client import BlockingMcpClient, server_parameters
from mllm.mllm_provider_stub import ProviderStub
from mllm.mllm_test_data import ANTHROPIC_KEY_VALUE, closed_port, header_only_png, noise_image


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
  - name: overloaded
    description: answers HTTP 529
    provider: {{api_style: anthropic-messages, base_url: "{stub.base}/status529", model: m}}
  - name: limited
    description: answers HTTP 429 with retry-after
    provider: {{api_style: openai-chat, base_url: "{stub.base}/status429/v1", model: m}}
  - name: truncated
    description: closes the connection halfway through its reply
    provider: {{api_style: openai-chat, base_url: "{stub.base}/truncated/v1", model: m}}
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
