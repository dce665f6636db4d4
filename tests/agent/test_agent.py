"""The agent stage: command, environment, transcript capture, timeouts and outcome."""

from __future__ import annotations

import json
import stat
import sys
import time
from pathlib import Path

import pytest

from veriharness.agent.plan import (
    USER_MESSAGE,
    SessionPlan,
    command_line,
    session_environment,
    upstream_for,
)
from veriharness.agent.proxy import ANTHROPIC_URL
from veriharness.agent.session import run_session
from veriharness.agent.transcript import summarize_transcript
from veriharness.experiment.config import SessionLimits, SnapshotLimits

ROOT = Path(__file__).resolve().parents[2]


def _plan(tmp_path: Path, claude: Path, **overrides: object) -> SessionPlan:
    run_dir = tmp_path / "results" / "exp" / "cond" / "task" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "system_prompt.md").write_text("system prompt")
    reference = tmp_path / "reference.png"
    reference.write_bytes(b"png")
    fields: dict[str, object] = dict(
        run_dir=run_dir,
        reference=reference,
        system_prompt=run_dir / "system_prompt.md",
        catalog=tmp_path / "catalog.yaml",
        taxonomy=tmp_path / "taxonomy.yaml",
        claude=claude,
        endpoint="offline",
        base_url=None,
        api_key_env="ANTHROPIC_API_KEY",
        model="veriharness-offline-agent-1",
        max_turns=7,
        wall_clock_seconds=30,
        allowed_tools=["Read", "Write", "mcp__mllm__call"],
        tool_search=False,
        # The scripted stand-ins for claude below write pid files next to themselves; the
        # sandbox has its own test (test_a_sandboxed_session_sees_only_what_it_needs).
        isolation="none",
        network="open",
        allow_server_tools=(),
        limits=SessionLimits(),
        workspace_root=tmp_path / "workspaces",
        keep_workspace=False,
        snapshots=SnapshotLimits(),
        keep_call_images=True,
        log_model_requests=False,
        project=tmp_path / "project",
        label="cond-task-r1",
        infra_retries=0,
        api_retries=None,
        pace=True,
    )
    fields.update(overrides)
    (tmp_path / "project").mkdir(exist_ok=True)
    # The example catalog for real providers: its profiles read OPENAI_*, ANTHROPIC_API_KEY and
    # ANTHROPIC_VISION_BASE_URL.
    (tmp_path / "catalog.yaml").write_text(
        (ROOT / "config" / "model-catalog.example-real.yaml").read_text()
    )
    (tmp_path / "taxonomy.yaml").write_text(
        (ROOT / "prompts" / "taxonomy" / "capabilities-v0.1.yaml").read_text()
    )
    return SessionPlan(**fields)


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fake-claude"
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan may wait for a reaper that never comes here)."""
    for _ in range(20):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.1)
    return True


def test_command_line_has_every_session_setting(tmp_path: Path) -> None:
    plan = _plan(tmp_path, Path("/bin/true"))
    command = command_line(plan, tmp_path / "mcp.json", tmp_path / "prompt.md")
    text = " ".join(command)
    assert command[1:3] == ["-p", USER_MESSAGE]
    for expected in (
        "--output-format stream-json",
        "--verbose",
        f"--append-system-prompt-file {tmp_path / 'prompt.md'}",
        f"--mcp-config {tmp_path / 'mcp.json'}",
        "--strict-mcp-config",
        "--max-turns 7",
        "--model veriharness-offline-agent-1",
        "--tools Read,Write",
        "--allowedTools Read,Write,mcp__mllm__call",
        "--permission-mode bypassPermissions",
    ):
        assert expected in text


def test_the_sessions_environment_is_an_allow_list_with_only_its_own_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://callers-own-proxy.invalid")
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-secret-value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-value")
    monkeypatch.setenv("SOME_PRIVATE_URL", "http://10.1.2.3:9/private")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    plan = _plan(
        tmp_path, Path("/bin/true"), endpoint="gateway", base_url="http://10.1.2.3:9/private",
        api_key_env="MY_GATEWAY_KEY",
    )  # fmt: skip
    env, recorded = session_environment(plan, tmp_path / "cfg", "http://127.0.0.1:4242", "tok-1")
    assert env["ANTHROPIC_API_KEY"] == "tok-1"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4242"
    assert env["CLAUDE_CONFIG_DIR"] == env["HOME"] == str(tmp_path / "cfg")
    assert env["ENABLE_TOOL_SEARCH"] == "false" and env["LC_ALL"] == "C.UTF-8"
    text = json.dumps(env)
    assert "sk-secret" not in text and "sk-openai" not in text and "10.1.2.3" not in text
    assert not any(name.startswith("VERIHARNESS_") for name in env)
    assert recorded["ANTHROPIC_API_KEY"] == "***" and "tok-1" not in json.dumps(recorded)


def test_the_proxy_gets_the_real_key_and_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-secret-value")
    monkeypatch.setenv("GATEWAY_HOST", "10.1.2.3")
    gateway = _plan(
        tmp_path, Path("/bin/true"), endpoint="gateway", base_url="https://${GATEWAY_HOST}:9/gw",
        api_key_env="MY_GATEWAY_KEY",
    )  # fmt: skip
    upstream = upstream_for(gateway, None)
    assert (upstream.host, upstream.port, upstream.prefix) == ("10.1.2.3", 9, "/gw")
    assert upstream.https and upstream.api_key == "sk-secret-value"
    anthropic = gateway.model_copy(update={"endpoint": "anthropic"})
    assert upstream_for(anthropic, None).host == ANTHROPIC_URL.removeprefix("https://")
    offline = gateway.model_copy(update={"endpoint": "offline"})
    assert upstream_for(offline, "http://127.0.0.1:4242").api_key is None


def test_missing_key_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    plan = _plan(tmp_path, Path("/bin/true"), endpoint="anthropic", api_key_env="NOT_SET_ANYWHERE")
    with pytest.raises(RuntimeError, match="NOT_SET_ANYWHERE"):
        upstream_for(plan, None)


def test_summary_reads_init_and_result_events(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    events = [
        {"type": "system", "subtype": "init", "tools": ["Write", "Read", "mcp__mllm__call"],
         "mcp_servers": [{"name": "mllm", "status": "connected"}]},
        {"type": "assistant", "message": {"content": []}},
        {"type": "result", "subtype": "success", "is_error": False, "num_turns": 4,
         "total_cost_usd": 0.5, "duration_ms": 1200, "session_id": "s1",
         "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3,
                   "cache_creation_input_tokens": 2, "server_tool_use": {}}},
    ]  # fmt: skip
    transcript.write_text("\n".join(json.dumps(e) for e in events) + "\n{cut-off line")
    summary = summarize_transcript(transcript)
    assert summary.init is not None and summary.result is not None
    assert summary.init.mllm_connected is True
    assert summary.init.session_tools == ["Read", "Write", "mcp__mllm__call"]
    assert summary.result.num_turns == 4
    assert summary.result.usage.cache_read_input_tokens == 3
    assert summary.result.result_subtype == "success"


def test_wall_clock_limit_kills_the_whole_process_group(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    claude = _script(
        tmp_path,
        'if [ "$1" = --version ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
        'echo \'{"type":"system","subtype":"init","mcp_servers":[]}\'\n'
        f"sleep 300 & echo $! > {child_pid}\n"
        "sleep 300\n",
    )
    plan = _plan(tmp_path, claude, wall_clock_seconds=2)
    outcome = run_session(plan)
    assert outcome.status == "timeout"
    assert "wall-clock" in (outcome.error or "")
    assert outcome.answer_present is False
    lines = (plan.run_dir / "transcript.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["subtype"] == "init"
    assert not _running(int(child_pid.read_text())), "the session's child survived"
    recorded = json.loads((plan.run_dir / "outcome.json").read_text())
    assert recorded["status"] == "timeout" and recorded["offline"] is True
    assert not any((tmp_path / "workspaces").iterdir()), "workspace must be removed"


def test_a_crashing_cli_is_a_recorded_failure(tmp_path: Path) -> None:
    claude = _script(
        tmp_path,
        'if [ "$1" = --version ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
        "echo 'boom' >&2; exit 3\n",
    )
    plan = _plan(tmp_path, claude)
    outcome = run_session(plan)
    # No session ever started: the CLI (or the sandbox) is broken, not the agent.
    assert outcome.status == "infra_error" and outcome.exit_code == 3
    assert outcome.error is not None
    assert "before its session started" in outcome.error and "boom" in outcome.error
    assert "boom" in (plan.run_dir / "claude_stderr.log").read_text()
    assert [a.status for a in outcome.attempts] == ["infra_error"]


def test_an_infra_error_is_attempted_again_and_every_attempt_is_kept(tmp_path: Path) -> None:
    init = {
        "type": "system",
        "subtype": "init",
        "tools": ["Read"],
        "mcp_servers": [{"name": "mllm", "status": "connected"}],
    }
    result = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1}
    count = tmp_path / "count"
    claude = _script(
        tmp_path,
        'if [ "$1" = --version ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
        f'echo x >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -lt 3 ]; then echo "{{\\"partial\\": 1}}"; '
        "echo 'sandbox down' >&2; exit 1; fi\n"
        f"echo '{json.dumps(init)}'; echo '{json.dumps(result)}'\n",
    )  # fmt: skip
    plan = _plan(tmp_path, claude, infra_retries=2)
    outcome = run_session(plan)
    assert outcome.status == "ok"
    assert [a.status for a in outcome.attempts] == ["infra_error", "infra_error", "ok"]
    assert [a.files for a in outcome.attempts] == ["attempts/1", "attempts/2", None]
    for number in (1, 2):
        kept = plan.run_dir / "attempts" / str(number)
        assert "sandbox down" in (kept / "claude_stderr.log").read_text()
        assert (kept / "transcript.jsonl").read_text() == '{"partial": 1}\n'
        assert json.loads((kept / "outcome.json").read_text())["status"] == "infra_error"
    assert json.loads((plan.run_dir / "outcome.json").read_text())["attempts"][2]["status"] == "ok"
    # An agent outcome is never attempted again.
    again = run_session(plan.model_copy(update={"max_turns": 1}))
    assert len(again.attempts) == 1


def test_a_session_without_the_mllm_server_is_an_infra_error(tmp_path: Path) -> None:
    init = {
        "type": "system",
        "subtype": "init",
        "tools": ["Read"],
        "mcp_servers": [{"name": "mllm", "status": "failed"}],
    }
    result = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2}
    claude = _script(
        tmp_path,
        'if [ "$1" = --version ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
        f"echo '{json.dumps(init)}'; echo '{json.dumps(result)}'\n",
    )  # fmt: skip
    outcome = run_session(_plan(tmp_path, claude))
    assert (outcome.status, outcome.exit_code, outcome.mllm_connected) == ("infra_error", 0, False)
    assert outcome.error == (
        "the mllm MCP server did not connect: CallMLLM was not available to the session"
    )


def test_a_session_that_prints_its_environment_leaks_nothing_into_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-gateway-secret-123456")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret-abcdef")
    claude = _script(
        tmp_path,
        'if [ "$1" = --version ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
        'echo "{\\"type\\": \\"user\\", \\"env\\": \\"$ANTHROPIC_API_KEY $OPENAI_API_KEY\\"}"\n'
        "env >&2\n",
    )
    plan = _plan(
        tmp_path, claude, endpoint="gateway", base_url="http://10.1.2.3:9/private",
        api_key_env="MY_GATEWAY_KEY",
    )  # fmt: skip
    run_session(plan)
    transcript = (plan.run_dir / "transcript.jsonl").read_text()
    stderr = (plan.run_dir / "claude_stderr.log").read_text()
    assert '"env": "[redacted:session token] "' in transcript  # its own token, redacted
    for text in (transcript, stderr):
        assert "sk-gateway-secret" not in text and "sk-openai-secret" not in text
        assert "10.1.2.3" not in text
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:" in stderr


def test_a_sandboxed_session_sees_only_what_it_needs(tmp_path: Path) -> None:
    """A stand-in claude, run through bwrap as a real session is, probes what it can reach."""
    project = tmp_path / "project"
    (project / "tasks" / "alpha").mkdir(parents=True)
    (project / "tasks" / "alpha" / "reference.html").write_text("<h1>the answer key</h1>")
    other_run = tmp_path / "results" / "exp" / "cond" / "task" / "r2"
    other_run.mkdir(parents=True)
    (other_run / "outcome.json").write_text("{}")
    (tmp_path / "bin").mkdir()
    probe = (
        f"exec > answer.html 2>&1\n"
        f"cat {project}/tasks/alpha/reference.html && echo LEAK-TASK\n"
        f"ls {other_run} && echo LEAK-RUN\n"
        f"ls {tmp_path}/bin >/dev/null && echo SEES-OWN-INSTALL\n"
        f"test -r {tmp_path / 'catalog.yaml'} && echo SEES-CATALOG\n"
        f"test -r {tmp_path / 'taxonomy.yaml'} && echo SEES-TAXONOMY\n"
        f"ls {tmp_path / 'results' / 'exp' / 'cond' / 'task' / 'r1'} && echo SEES-RUN-DIR\n"
        f"test -r {ROOT / 'docs' / 'decisions.md'} && echo SEES-CHECKOUT\n"
        "echo x > /tmp/scratch && echo WRITES-TMP\n"
        'echo x > "$CLAUDE_CONFIG_DIR/probe" && echo WRITES-CONFIG\n'
        "ls /proc | grep -c '^[0-9]' | sed 's/^/PROCESSES=/'\n"
        f"{sys.executable} -c 'import sys' && echo RUNS-PYTHON\n"
    )
    claude = tmp_path / "bin" / "claude"
    claude.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = --version ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n' + probe
    )
    claude.chmod(0o755)
    plan = _plan(tmp_path, claude, isolation="bwrap", network="none")
    outcome = run_session(plan)
    # The session's first process joins its cgroup, then becomes bwrap.
    assert outcome.command[:2] == ["/bin/sh", "-c"] and "cgroup.procs" in outcome.command[2]
    assert outcome.command[4].endswith("bwrap") and "--unshare-pid" in outcome.command
    seen = (plan.run_dir / "answer" / "answer.html").read_text()
    assert "LEAK-TASK" not in seen and "LEAK-RUN" not in seen, seen
    for hidden in ("SEES-CATALOG", "SEES-TAXONOMY", "SEES-RUN-DIR", "SEES-CHECKOUT"):
        assert hidden not in seen, seen
    assert "SEES-OWN-INSTALL" in seen and "WRITES-TMP" in seen and "WRITES-CONFIG" in seen
    assert "RUNS-PYTHON" in seen, seen
    assert int(seen.split("PROCESSES=")[1].split()[0]) < 10  # its own process tree only
    assert outcome.sandboxed is True


def test_an_interrupted_job_ends_its_session_too(tmp_path: Path) -> None:
    """SIGTERM or SIGINT to `veriharness run-agent` ends the claude process group it started."""
    import signal
    import subprocess
    import sys

    child_pid = tmp_path / "child.pid"
    claude = _script(
        tmp_path,
        'if [ "$1" = --version ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
        f"echo $$ > {child_pid}\n"
        "sleep 300\n",
    )
    plan = _plan(tmp_path, claude)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.model_dump_json())
    code = (
        "import sys; from veriharness.agent.plan import SessionPlan; "
        "from veriharness.agent.session import end_session_on_sigterm, run_session; "
        "end_session_on_sigterm(); "
        "run_session(SessionPlan.model_validate_json(open(sys.argv[1]).read()))"
    )
    job = subprocess.Popen([sys.executable, "-c", code, str(plan_file)])
    deadline = time.monotonic() + 30
    while not child_pid.exists():
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.1)
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=30)
    assert job.returncode != 0
    assert not _running(int(child_pid.read_text())), "the session outlived its job"


def test_no_session_starts_once_the_experiments_cap_is_reached(tmp_path: Path) -> None:
    from veriharness.runfolder.spend import TokenCounts
    from veriharness.spend.ledger import SpendGate, SpendSettings, stopped_runs

    started = tmp_path / "started"
    claude = _script(tmp_path, f"touch {started}\nexit 0\n")
    plan = _plan(tmp_path, claude)
    capped = plan.ledger.model_copy(update={"max_usd": 1.0})
    other = tmp_path / "results" / "exp" / "cond" / "task" / "r2"
    other.mkdir(parents=True)
    earlier = SpendSettings(**(capped.model_dump() | {"run_dir": other, "replicate": 2}))
    SpendGate(earlier).charge("session", "m", "s1", TokenCounts.of(100), 1.25)
    outcome = run_session(plan.model_copy(update={"spend": capped}))
    assert (outcome.status, outcome.reason) == ("not_started", "budget")
    assert "spending cap reached" in (outcome.error or "")
    assert "$1.2500 of its execution.max_usd $1.0000" in (outcome.error or "")
    assert not started.exists(), "a session started beyond the cap"
    for name in ("outcome.json", "transcript.jsonl", "mllm_trace.jsonl", "answer"):
        assert (plan.run_dir / name).exists(), name  # the workflow's outputs, for the tables
    assert [(s.run, s.status) for s in stopped_runs(tmp_path / "results" / "exp")] == [
        ("cond/task/r1", "not_started")
    ]


def test_a_refused_request_ends_the_session_as_budget_exhausted(tmp_path: Path) -> None:
    # A stand-in for a session whose mllm server (or agent proxy) just refused a request: it
    # leaves budget_stop.json and goes on working; the session is ended within a poll.
    from veriharness.runfolder.spend import BudgetStop

    child_pid = tmp_path / "child.pid"
    stop = BudgetStop(
        cap="max_usd", limit_usd=1, spent_usd=1.5, time="t", message="spending cap reached: x"
    )
    stop_file = tmp_path / "results" / "exp" / "cond" / "task" / "r1" / "budget_stop.json"
    claude = _script(
        tmp_path,
        'if [ "$1" = --version ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
        'echo \'{"type":"system","subtype":"init","mcp_servers":[]}\'\n'
        # The child starts before the stop file appears: the session may end the moment it does.
        f"sleep 300 & echo $! > {child_pid}\n"
        f"sleep 1; echo '{stop.model_dump_json()}' > {stop_file}\n"
        "sleep 300\n",
    )
    begun = time.monotonic()
    outcome = run_session(_plan(tmp_path, claude, wall_clock_seconds=120))
    assert (outcome.status, outcome.reason) == ("budget_exhausted", "budget")
    assert outcome.error == "spending cap reached: x"
    assert time.monotonic() - begun < 30
    assert not _running(int(child_pid.read_text())), "the session's child survived"
