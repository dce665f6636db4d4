"""The mllm server driven by an MCP client that is not the project's own: the official MCP
Inspector's CLI, pinned in pyproject.toml ([tool.veriharness] mcp-inspector-version) and
installed by ``./setup.sh --test`` under .tools/mcp-inspector, against the real server process
over streamable HTTP, in both protocol eras the CLI speaks. What it does not run is listed with
reasons in inspector_baseline.yaml."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mllm.mllm_mcp_client import http_server
from mllm.mllm_provider_stub import ProviderStub
from veriharness import __version__
from veriharness._util.programs import project_root

TOKEN = "mllm-session-token-inspector-0123456789"
INSPECTOR = project_root() / ".tools" / "mcp-inspector" / "node_modules" / ".bin" / "mcp-inspector"
BASELINE = Path(__file__).with_name("inspector_baseline.yaml")
RUN_METHODS = {"initialize", "tools/list", "tools/call", "prompts/get", "resources/read"}
ERAS = ["legacy", "modern"]
# The CLI's exit codes for the outcomes checked here (its --help and error envelopes).
TOOL_ERROR_EXIT, AUTH_REQUIRED_EXIT = 5, 3

GOOD = {
    "instruction": "Describe the screenshot.",
    "inputs": [
        {
            "kind": "image",
            "label": "screen",
            "path": "shots/screen.png",
            "region": {"x": 17, "y": 13, "width": 81, "height": 57},
        }
    ],
    "capability_tags": ["E1"],
    "output": {"kind": "text"},
}
TEXT_ONLY_REPEATED_TAGS = GOOD | {
    "inputs": [{"kind": "text", "label": "t", "content": "What colour is the sky?"}],
    "capability_tags": ["E1", "E1"],
}


@dataclass
class Outcome:
    exit_code: int
    result: dict[str, Any] | None  # stdout's {"result": ...}
    error: dict[str, Any] | None  # stderr's {"error": ...} envelope
    stderr: str


@dataclass
class Served:
    url: str
    log: Path
    trace: Path
    home: Path


def inspector(
    served: Served, *args: str, era: str = "legacy", token: str | None = TOKEN
) -> Outcome:
    if not INSPECTOR.exists():
        pytest.fail(f"the MCP Inspector CLI is not installed at {INSPECTOR}: run ./setup.sh --test")
    command = [str(INSPECTOR), "--cli", served.url, "--format", "json", "--protocol-era", era]
    if token is not None:
        command += ["--header", f"Authorization: Bearer {token}"]
    # HOME: the CLI keeps a server catalog and OAuth state there; the test's own, not the user's.
    env = dict(os.environ) | {"HOME": str(served.home)}
    proc = subprocess.run(
        command + list(args), capture_output=True, text=True, timeout=120, env=env
    )
    result = json.loads(proc.stdout)["result"] if proc.stdout.strip() else None
    envelopes = [line for line in proc.stderr.splitlines() if line.startswith('{"error"')]
    error = json.loads(envelopes[-1])["error"] if envelopes else None
    return Outcome(proc.returncode, result, error, proc.stderr)


def call(served: Served, arguments: dict[str, Any], era: str = "legacy") -> Outcome:
    return inspector(
        served,
        "--method", "tools/call", "--tool-name", "call",
        "--tool-args-json", json.dumps(arguments),
        era=era,
    )  # fmt: skip


@pytest.fixture(scope="module")
def served(
    stub: ProviderStub,
    workspace: Path,
    catalog_file: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("inspector")
    (root / "home").mkdir()
    env = dict(os.environ) | {"VH_STUB_URL": stub.base}
    trace, log = root / "trace.jsonl", root / "server.log"
    with http_server(workspace, catalog_file, trace, env, TOKEN, log) as url:
        yield Served(url, log, trace, root / "home")
    assert "Traceback" not in log.read_text(), log.read_text()


def test_the_pinned_inspector_runs_and_each_of_its_methods_is_run_or_listed(served) -> None:
    pin = tomllib.loads((project_root() / "pyproject.toml").read_text())["tool"]["veriharness"]
    version = subprocess.run([str(INSPECTOR), "--cli", "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == pin["mcp-inspector-version"], "run ./setup.sh --test"
    unsupported = inspector(served, "--method", "no/such-method")
    assert unsupported.error is not None
    offered = unsupported.error["message"].split("Supported --cli methods: ", 1)[1]
    methods = {m.strip() for m in offered.rstrip(".").split(",")}
    listed = set(yaml.safe_load(BASELINE.read_text())["methods"])
    assert not RUN_METHODS & listed
    assert methods == RUN_METHODS | listed, "a method is neither run nor in the baseline"


@pytest.mark.parametrize("era", ERAS)
def test_handshake_and_tool_list_as_the_inspector_sees_them(served, era: str) -> None:
    hello = inspector(served, "--method", "initialize", era=era)
    assert hello.exit_code == 0, hello.stderr
    assert hello.result is not None
    assert hello.result["serverInfo"] == {"name": "mllm", "version": __version__}
    assert set(hello.result["capabilities"]) == {"tools"}
    # --strict: the CLI's tool-schema portability check; any finding would be in the envelope.
    listing = inspector(served, "--method", "tools/list", "--strict", era=era)
    assert listing.exit_code == 0, listing.stderr
    assert listing.result is not None and "schemaFindings" not in listing.result
    [tool] = listing.result["tools"]
    assert tool["name"] == "call"
    properties = tool["inputSchema"]["properties"]
    assert properties["inputs"]["contains"]["properties"]["kind"] == {"const": "image"}
    assert properties["capability_tags"]["uniqueItems"] is True


@pytest.mark.parametrize("era", ERAS)
def test_a_call_is_answered_and_a_bad_one_refused_naming_its_fields(
    served, stub: ProviderStub, era: str
) -> None:
    before = len(stub.received)
    answered = call(served, GOOD, era)
    assert answered.exit_code == 0, answered.stderr
    assert answered.result is not None
    assert answered.result["content"] == [{"type": "text", "text": "stub reply"}]
    assert answered.result["isError"] is False
    assert len(stub.received) == before + 1
    refused = call(served, TEXT_ONLY_REPEATED_TAGS, era)
    assert refused.exit_code == TOOL_ERROR_EXIT and refused.result is not None
    assert refused.result["isError"] is True
    message = refused.result["content"][0]["text"]
    assert "inputs = " in message and "at least one input must be an image" in message
    assert "capability_tags = " in message and "tags repeated: ['E1']" in message
    assert len(stub.received) == before + 1
    last = json.loads(served.trace.read_text().splitlines()[-1])
    assert last["event"] == "mllm_call_rejected" and last["error"] == message


@pytest.mark.parametrize("era", ERAS)
def test_methods_the_server_does_not_have_are_method_not_found(served, era: str) -> None:
    for args in (["--method", "prompts/get", "--prompt-name", "any"],
                 ["--method", "resources/read", "--uri", "file:///etc/hostname"]):  # fmt: skip
        outcome = inspector(served, *args, era=era)
        assert outcome.exit_code != 0 and outcome.error is not None, args
        assert "Method not found" in outcome.error["message"], outcome.error
        if era == "modern":  # this era's CLI passes the server's JSON-RPC error on verbatim
            assert '"code":-32601' in outcome.error["message"], outcome.error
    assert "Traceback" not in served.log.read_text()


def test_without_the_session_token_the_inspector_is_refused_not_sent_to_a_login(served) -> None:
    for token in (None, "not-the-session-token"):
        outcome = inspector(served, "--method", "tools/list", "--stored-auth-only", token=token)
        assert outcome.exit_code == AUTH_REQUIRED_EXIT and outcome.error is not None, token
        assert outcome.error["code"] == "auth_required"
        assert "missing or wrong session token" in outcome.error["message"]


def test_twenty_calls_ten_at_a_time_all_answered(served, stub: ProviderStub) -> None:
    before = len(stub.received)
    load = inspector(
        served,
        "--method", "tools/call", "--tool-name", "call", "--tool-args-json", json.dumps(GOOD),
        "--load", "--load-requests", "20", "--load-concurrency", "10",
    )  # fmt: skip
    assert load.exit_code == 0, load.stderr
    assert load.result is not None
    assert (load.result["requests"], load.result["ok"]) == (20, 20), load.result
    assert (load.result["toolErrors"], load.result["errors"]) == (0, 0), load.result
    assert len(stub.received) == before + 20
