"""The real `claude -p` against the offline model, with the real `mllm` MCP server.

Each session is the documented command line: a fresh CLAUDE_CONFIG_DIR, the workspace under
the system temp dir (outside any repository) holding only reference.png, the appended system
prompt in a file, and `mllm-server` attached over stdio with the offline catalog.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from offline_images import BODY, TITLE, screenshot

from veriharness._util.programs import find_claude, project_root
from veriharness.experiment.catalog import OFFLINE_URL_ENV
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL
from veriharness.offline.server import running_offline_server

pytestmark = pytest.mark.slow

TASK = "Recreate the screenshot `reference.png` as a single answer.html in the working directory.\n"
B3 = (
    "<verification_policy>\nRender your page and compare it with the reference.\n"
    "</verification_policy>\n"
)


class Session(NamedTuple):
    workspace: Path
    returncode: int
    events: list[dict]
    trace: list[dict]
    requests: list[dict]
    stderr: str


def _tool_uses(events: list[dict]) -> Counter[str]:
    names: Counter[str] = Counter()
    for event in events:
        if event.get("type") == "assistant":
            for block in event["message"]["content"]:
                if block.get("type") == "tool_use":
                    names[block["name"]] += 1
    return names


def _run_session(system_prompt: str, scratch: Path) -> Session:
    root = project_root()
    workspace = Path(tempfile.mkdtemp(prefix="vh-offline-ws-"))
    screenshot().save(workspace / "reference.png")
    log, trace = scratch / "requests.jsonl", scratch / "mllm_trace.jsonl"
    prompt_file = scratch / "system_prompt.md"
    prompt_file.write_text(system_prompt, encoding="utf-8")
    with running_offline_server(log) as base_url:
        server = [
            sys.executable,
            "-m",
            "veriharness",
            "mllm-server",
            "--workspace",
            str(workspace),
            "--catalog",
            str(root / "config/model-catalog.offline.yaml"),
            "--trace",
            str(trace),
        ]
        mcp = {"mcpServers": {"mllm": {"type": "stdio", "command": server[0], "args": server[1:]}}}
        (scratch / "mcp.json").write_text(json.dumps(mcp), encoding="utf-8")
        env = dict(
            os.environ,
            ANTHROPIC_BASE_URL=base_url,
            ANTHROPIC_API_KEY="offline",
            IS_SANDBOX="1",
            CLAUDE_CONFIG_DIR=str(scratch / "claude-config"),
            ENABLE_TOOL_SEARCH="false",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            **{OFFLINE_URL_ENV: base_url},
        )
        command = [
            str(find_claude()),
            "-p",
            "Do the task described in the system prompt.",
            "--output-format",
            "stream-json",
            "--verbose",
            "--append-system-prompt-file",
            str(prompt_file),
            "--mcp-config",
            str(scratch / "mcp.json"),
            "--strict-mcp-config",
            "--max-turns",
            "20",
            "--model",
            OFFLINE_AGENT_MODEL,
            "--allowedTools",
            "Read,Write,Edit,Bash,Glob,Grep,mcp__mllm__call",
            "--permission-mode",
            "bypassPermissions",
        ]
        done = subprocess.run(
            command,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def lines(path: Path) -> list[dict]:
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    events = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    return Session(workspace, done.returncode, events, lines(trace), lines(log), done.stderr)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Session]]:
    runs = {
        "b3-absent": _run_session(TASK, tmp_path_factory.mktemp("absent")),
        "b3-present": _run_session(TASK + B3, tmp_path_factory.mktemp("present")),
    }
    yield runs
    for run in runs.values():
        shutil.rmtree(run.workspace)


@pytest.mark.parametrize("condition", ["b3-absent", "b3-present"])
def test_session_writes_answer_from_the_reference(
    sessions: dict[str, Session], condition: str
) -> None:
    run = sessions[condition]
    assert run.returncode == 0, run.stderr[-2000:]
    result = run.events[-1]
    assert result["type"] == "result" and result["subtype"] == "success", result
    page = (run.workspace / "answer.html").read_text()
    assert TITLE in page and BODY in page  # read by tesseract from reference.png's pixels
    completed = [e for e in run.trace if e["event"] == "mllm_call_completed"]
    assert completed and all(json.loads(e["raw_response"]) for e in completed)
    # The model was sent the workspace, and nothing of the project checkout.
    sent = "\n".join(json.dumps(r["body"]) for r in run.requests)
    assert f"Primary working directory: {run.workspace}" in sent
    assert str(project_root()) not in sent


def test_b3_makes_more_callmllm_and_tool_calls(sessions: dict[str, Session]) -> None:
    absent, present = sessions["b3-absent"], sessions["b3-present"]
    calls = {
        name: sum(e["event"] == "mllm_call_completed" for e in run.trace)
        for name, run in sessions.items()
    }
    assert calls["b3-absent"] == 1 and calls["b3-present"] >= 2
    uses_absent, uses_present = _tool_uses(absent.events), _tool_uses(present.events)
    assert uses_absent == Counter({"mcp__mllm__call": 1, "Write": 1})
    assert uses_present["Bash"] >= 1 and uses_present["mcp__mllm__call"] == calls["b3-present"]
    assert sum(uses_present.values()) > sum(uses_absent.values())
    assert (present.workspace / "draft.png").stat().st_size > 0
    assert not (absent.workspace / "draft.png").exists()


def test_b3_rewrites_the_page_from_what_the_comparison_measured(
    sessions: dict[str, Session],
) -> None:
    absent, present = sessions["b3-absent"], sessions["b3-present"]
    replies = [json.loads(e["raw_response"]) for e in present.trace if "raw_response" in e]
    first_review = replies[1]
    assert {pair["text"] for pair in first_review["line_offsets"]} == {TITLE, BODY}
    writes = [
        block["input"]["content"]
        for event in present.events
        if event.get("type") == "assistant"
        for block in event["message"]["content"]
        if block.get("type") == "tool_use" and block["name"] == "Write"
    ]
    assert len(writes) == 2 and writes[0] != writes[1]
    assert writes[0] == (absent.workspace / "answer.html").read_text()
    assert (present.workspace / "answer.html").read_text() == writes[1]
