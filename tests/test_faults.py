"""Infrastructure faults through the real boundaries: the real `claude` CLI against the offline
model server made to fail (refused connections, HTTP 500/529/429, a stream cut in the middle),
and claude killed with SIGKILL mid-session. Each ends in `infra_error` with its cause, and a
retry after it succeeds; the files of the failed attempt are kept."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from veriharness._util.programs import find_claude
from veriharness.agent.outcome import classify
from veriharness.agent.session import AgentOutcome, SessionPlan, run_session
from veriharness.offline import OFFLINE_AGENT_MODEL
from veriharness.offline.server import FAULTS_ENV
from veriharness.render.guard import descendants

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _plan(tmp_path: Path, **overrides: object) -> SessionPlan:
    run_dir = tmp_path / "results" / "exp" / "cond" / "task" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "system_prompt.md").write_text("Write answer.html for the reference image.")
    reference = tmp_path / "reference.png"
    reference.write_bytes((ROOT / "tasks" / "landing-page" / "reference.png").read_bytes())
    (tmp_path / "project").mkdir()
    fields: dict[str, object] = dict(
        run_dir=run_dir,
        reference=reference,
        system_prompt=run_dir / "system_prompt.md",
        catalog=ROOT / "config" / "model-catalog.offline.yaml",
        taxonomy=ROOT / "prompts" / "taxonomy" / "capabilities-v0.1.yaml",
        claude=find_claude(),
        endpoint="offline",
        base_url=None,
        api_key_env=None,
        model=OFFLINE_AGENT_MODEL,
        max_turns=6,
        wall_clock_seconds=120,
        allowed_tools=["Read", "Write", "mcp__mllm__call"],
        tool_search=False,
        isolation="bwrap",
        offline_profiles=True,
        workspace_root=tmp_path / "workspaces",
        keep_workspace=False,
        log_model_requests=False,
        project=tmp_path / "project",
        label="cond-task-r1",
        infra_retries=0,
        api_retries=0,
    )
    fields.update(overrides)
    return SessionPlan(**fields)  # type: ignore[arg-type]


def _faults(monkeypatch: pytest.MonkeyPatch, **faults: object) -> None:
    # A unique marker keeps the per-process fault count of each test apart.
    faults.setdefault("hang_s", 3600.0 - len(os.environ.get("PYTEST_CURRENT_TEST", "")) / 1000)
    monkeypatch.setenv(FAULTS_ENV, json.dumps(faults))


@pytest.mark.parametrize(
    ("faults", "cause"),
    [
        ({"kind": "status", "status": 500}, "answered HTTP 500"),
        ({"kind": "status", "status": 529}, "answered HTTP 529"),
        ({"kind": "status", "status": 429, "retry_after_s": 1}, "answered HTTP 429"),
        ({"kind": "refuse"}, "could not be reached"),
        ({"kind": "cut"}, "model provider"),
    ],
)
def test_an_upstream_fault_is_an_infra_error_with_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faults: dict, cause: str
) -> None:
    _faults(monkeypatch, **faults)
    outcome = run_session(_plan(tmp_path))
    assert outcome.status == "infra_error", outcome.error
    assert cause in (outcome.error or ""), outcome.error
    assert [a.status for a in outcome.attempts] == ["infra_error"]


def test_a_fault_that_passes_is_retried_and_the_retry_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _faults(monkeypatch, kind="status", status=529, first=1)
    plan = _plan(tmp_path, infra_retries=2)
    outcome = run_session(plan)
    assert outcome.status == "ok", outcome.error
    first, second = outcome.attempts
    assert first.status == "infra_error" and "HTTP 529" in (first.cause or "")
    assert (second.status, first.files) == ("ok", "attempts/1")
    kept = plan.run_dir / "attempts" / "1"
    assert json.loads((kept / "outcome.json").read_text())["status"] == "infra_error"
    assert (kept / "transcript.jsonl").stat().st_size > 0
    recorded = AgentOutcome.model_validate_json((plan.run_dir / "outcome.json").read_text())
    assert [a.status for a in recorded.attempts] == ["infra_error", "ok"]


def _claude_processes() -> list[int]:
    found = []
    for pid in descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"claude.exe") and b"--version" not in cmdline:
            found.append(pid)
    return found


def test_claude_killed_mid_session_keeps_its_transcript_and_the_retry_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each model answer takes a second, so the session is still running when it is killed.
    _faults(monkeypatch, latency_s=1.0)
    plan = _plan(tmp_path, infra_retries=1)
    transcript = plan.run_dir / "transcript.jsonl"
    killed: list[int] = []

    def kill_once() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if transcript.is_file() and transcript.stat().st_size > 0:
                for pid in _claude_processes():
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                if killed:
                    return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_once, daemon=True)
    killer.start()
    outcome = run_session(plan)
    killer.join()
    assert killed
    first, second = outcome.attempts
    assert first.status == "infra_error" and "SIGKILL" in (first.cause or ""), first.cause
    assert second.status == "ok" and outcome.status == "ok", outcome.error
    partial = (plan.run_dir / "attempts" / "1" / "transcript.jsonl").read_text()
    assert '"subtype":"init"' in partial.replace(" ", "")


def test_agent_outcomes_are_not_infra_errors() -> None:
    init = {"mllm_connected": True}
    turns = {**init, "result_subtype": "error_max_turns", "is_error": True}
    assert classify(1, False, turns)[0] == "max_turns"
    assert classify(None, True, init)[0] == "timeout"
    refused = {**init, "result_subtype": "success", "is_error": True, "result_text": "no"}
    assert classify(1, False, refused)[0] == "failed"
    assert classify(0, False, {**init, "result_subtype": "success", "is_error": False}) == (
        "ok",
        None,
    )
