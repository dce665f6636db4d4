"""Infrastructure faults through the real boundaries: the real `claude` CLI in the real sandbox
against the offline model server made to fail (refused connections, HTTP 500/529/429, a stream cut
in the middle, a hang past the wall clock), and claude killed with SIGKILL mid-session. Each ends
in `infra_error` with its cause, and a retry after it succeeds; the files of the failed attempt
are kept. A CallMLLM provider failing the same ways is a tool error the agent sees, traced by
name, and the session goes on to its own end."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from veriharness._util.programs import find_claude
from veriharness.agent.outcome import Waiting, classify
from veriharness.agent.plan import SessionPlan
from veriharness.agent.request_record import REQUESTS_FILE, read_requests
from veriharness.agent.session import _KILL_GRACE_SECONDS, run_session
from veriharness.agent.transcript import SessionInit, SessionResult, TranscriptSummary
from veriharness.experiment.config import SessionLimits, SnapshotLimits
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL
from veriharness.offline.server import FAULTS_ENV
from veriharness.render.guard import descendants
from veriharness.runfolder.outcome import AgentOutcome

ROOT = Path(__file__).resolve().parents[2]
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
        api_key_env="ANTHROPIC_API_KEY",
        model=OFFLINE_AGENT_MODEL,
        max_turns=6,
        wall_clock_seconds=120,
        allowed_tools=["Read", "Write", "mcp__mllm__call"],
        tool_search=False,
        isolation="bwrap",
        network="none",
        allow_server_tools=(),
        limits=SessionLimits(),
        offline_profiles=True,
        workspace_root=tmp_path / "workspaces",
        keep_workspace=False,
        snapshots=SnapshotLimits(),
        keep_call_images=True,
        log_model_requests=False,
        project=tmp_path / "project",
        label="cond-task-r1",
        infra_retries=0,
        api_retries=0,
        pace=True,
    )
    fields.update(overrides)
    return SessionPlan(**fields)


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


_EARLIER: set[int] = set()


@pytest.fixture(autouse=True)
def _earlier_processes() -> None:
    """Session-part processes that were already below pytest when the test began (an earlier
    test file's own stdio mllm server, say): not this test's to account for."""
    _EARLIER.clear()
    _EARLIER.update(int(line.split(":")[0]) for line in _session_processes())


def _session_processes() -> list[str]:
    """Processes below pytest still running a session's parts (claude, bwrap, the mllm server),
    leaving out those already there when the test began."""
    found = []
    for pid in descendants(os.getpid()):
        if pid in _EARLIER:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(part in cmdline for part in ("claude", "bwrap", "mllm-server")):
            found.append(f"{pid}: {cmdline[:200]}")
    return found


def test_an_upstream_hanging_past_the_wall_clock_is_an_infra_error_and_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The upstream accepts the first model request and never answers it; the retry is answered.
    _faults(monkeypatch, kind="hang", first=1)
    plan = _plan(tmp_path, wall_clock_seconds=30, infra_retries=1)
    outcome = run_session(plan)
    first, second = outcome.attempts
    assert first.status == "infra_error", first.cause
    assert "the model provider hung" in (first.cause or "") and "30 s" in (first.cause or "")
    assert second.status == "ok" and outcome.status == "ok", outcome.error
    kept = plan.run_dir / "attempts" / "1"
    hung = json.loads((kept / "outcome.json").read_text())
    # Ended at its limit: the process group gets SIGTERM, then SIGKILL, each with a grace period.
    assert hung["session_seconds"] < plan.wall_clock_seconds + 3 * _KILL_GRACE_SECONDS
    assert '"subtype":"init"' in (kept / "transcript.jsonl").read_text().replace(" ", "")
    [open_request] = [r for r in read_requests(kept / REQUESTS_FILE) if r.open_at_end]
    assert open_request.status is None and "no answer from the model provider" in (
        open_request.error or ""
    )
    assert read_requests(plan.run_dir / REQUESTS_FILE), "the retry's requests are its own"
    assert not any(r.open_at_end for r in read_requests(plan.run_dir / REQUESTS_FILE))
    assert not _session_processes()


def _catalog_with_timeout(tmp_path: Path, seconds: float) -> Path:
    text = (ROOT / "config" / "model-catalog.offline.yaml").read_text()
    assert "timeout_seconds: 120" in text
    path = tmp_path / "catalog.yaml"
    path.write_text(text.replace("timeout_seconds: 120", f"timeout_seconds: {seconds:g}"))
    return path


@pytest.mark.parametrize(
    ("faults", "error_type", "named"),
    [
        ({"kind": "status", "status": 500}, "http_status", "HTTP 500"),
        ({"kind": "status", "status": 529}, "http_status", "HTTP 529"),
        ({"kind": "status", "status": 429, "retry_after_s": 1}, "http_status", "HTTP 429"),
        ({"kind": "refuse"}, "connection", "Connection reset by peer"),
        ({"kind": "cut"}, "connection", "without sending complete message body"),
        ({"kind": "hang"}, "timeout", "did not answer in time"),
    ],
    ids=["500", "529", "429", "refuse", "cut", "hang"],
)
def test_a_callmllm_provider_fault_is_a_named_tool_error_and_the_session_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faults: dict, error_type: str, named: str
) -> None:
    _faults(monkeypatch, api="chat", **faults)
    # A hang meets the profile's own timeout, made short; the others answer at once.
    catalog = _catalog_with_timeout(tmp_path, 2) if faults["kind"] == "hang" else None
    plan = _plan(tmp_path, catalog=catalog or ROOT / "config" / "model-catalog.offline.yaml")
    # Naming the reference makes the offline agent call CallMLLM on it first.
    plan.system_prompt.write_text("Write answer.html reproducing the screenshot reference.png.")
    outcome = run_session(plan)
    # CallMLLM's errors are the agent's to handle (D-0011): no infra_error, no retry, and the
    # session ends by itself, not at its wall clock.
    assert outcome.status == "ok" and [a.status for a in outcome.attempts] == ["ok"], outcome
    trace = [json.loads(line) for line in (plan.run_dir / "mllm_trace.jsonl").open()]
    failed = [e for e in trace if e["event"] == "mllm_call_failed"]
    assert failed and failed[0]["error_type"] == error_type, trace
    assert named in failed[0]["error"], failed[0]["error"]
    results = [
        block
        for line in (plan.run_dir / "transcript.jsonl").open()
        for block in (json.loads(line).get("message") or {}).get("content") or []
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert any(r.get("is_error") and named in json.dumps(r) for r in results), results
    assert not _session_processes()


def test_a_callmllm_provider_hanging_past_the_wall_clock_is_an_infra_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The profile waits 120 s for its provider, longer than this session's wall clock.
    _faults(monkeypatch, api="chat", kind="hang")
    plan = _plan(tmp_path, wall_clock_seconds=30)
    plan.system_prompt.write_text("Write answer.html reproducing the screenshot reference.png.")
    outcome = run_session(plan)
    assert outcome.status == "infra_error", outcome.error
    assert "the CallMLLM provider hung" in (outcome.error or ""), outcome.error
    assert outcome.session_seconds is not None
    assert outcome.session_seconds < plan.wall_clock_seconds + 3 * _KILL_GRACE_SECONDS
    trace = [json.loads(line) for line in (plan.run_dir / "mllm_trace.jsonl").open()]
    assert [e["event"] for e in trace] == ["mllm_call_started"]
    assert not _session_processes()


def test_agent_outcomes_are_not_infra_errors() -> None:
    started = SessionInit(mllm_connected=True)
    init = TranscriptSummary(init=started)

    def ended(**result: object) -> TranscriptSummary:
        return TranscriptSummary(init=started, result=SessionResult.model_validate(result))

    turns = ended(result_subtype="error_max_turns", is_error=True)
    assert classify(1, False, turns)[0] == "max_turns"
    assert classify(None, True, init)[0] == "timeout"
    # At the wall clock, a request open for less than a quarter of the limit is the agent's time.
    for waited, limit, status in [(20, 100, "timeout"), (25, 100, "infra_error"),
                                  (59, 3600, "timeout"), (60, 3600, "infra_error")]:  # fmt: skip
        waiting = Waiting("the model provider", waited)
        assert classify(None, True, init, "", waiting, limit)[0] == status, (waited, limit)
    refused = ended(result_subtype="success", is_error=True, result_text="no")
    assert classify(1, False, refused)[0] == "failed"
    too_long = ended(
        result_subtype="success",
        is_error=True,
        api_error_status=400,
        result_text="API Error: 400 prompt is too long",
    )
    assert classify(1, False, too_long) == ("failed", "API Error: 400 prompt is too long")
    assert classify(0, False, ended(result_subtype="success", is_error=False)) == ("ok", None)


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_provider_refusing_the_set_up_is_not_the_agents_failure(status: int) -> None:
    result = SessionResult(
        result_subtype="success",
        is_error=True,
        api_error_status=status,
        result_text=f"API Error: {status} no",
    )
    refused = TranscriptSummary(init=SessionInit(mllm_connected=True), result=result)
    outcome, cause = classify(1, False, refused)
    assert outcome == "infra_error"
    refusal = f"the model provider refused the session's credentials or model (HTTP {status})"
    assert cause == f"{refusal}: API Error: {status} no"


def test_claude_ending_mid_session_without_a_result_is_the_clis_failure() -> None:
    started = TranscriptSummary(init=SessionInit(mllm_connected=True))
    for code in (0, 1):
        outcome, cause = classify(code, False, started, "TypeError: x is undefined\n")
        assert outcome == "infra_error"
        assert cause == (
            f"claude ended with code {code} during the session without its result event "
            "(the CLI failed): TypeError: x is undefined"
        )
