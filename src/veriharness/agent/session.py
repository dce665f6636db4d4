"""One `claude -p` session for one prepared run: the run loop.

`run_session` starts the process in its own process group, writes the stream-json transcript line
by line as it arrives (a crash keeps what came before), kills the whole group at the wall-clock
limit, and `outcome.json` records what happened. What the session is (plan, command line,
environment) is `plan.py`, what it spends `charges.py`, what its transcript says `transcript.py`.
A session that ends in `infra_error` (`outcome.py`) is attempted again, up to
`execution.infra_retries` more times; the files of each earlier attempt (and any found from an
interrupted job) are moved, never deleted, into `attempts/<n>/`, and `outcome.json` lists every
attempt with its status and cause. Agent outcomes are never retried.

One attempt: the monitor's stop and the spending gate admit it (`_not_started` otherwise), its
private folder and tokens are made (`_SessionFolder`), the helpers start and claude runs
(`_run_claude`, which fills in the `SessionFacts` as it goes), and the outcome is built from the
facts, the transcript and the classification (`_ended_outcome`), or from the facts and the
error when something raised (`_failed_outcome`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple
from urllib.parse import urlsplit

from pydantic import BaseModel

from veriharness._util import atomic
from veriharness._util.containment import Limit
from veriharness._util.lifetime import cpu_seconds
from veriharness._util.programs import claude_version, find_bwrap
from veriharness._util.redaction import Redactor
from veriharness.agent.attempts import keep_earlier_attempt, keep_finished
from veriharness.agent.bridge import UnixToTcp, bridge_command
from veriharness.agent.charges import AgentCharges, budget_admit, each_record
from veriharness.agent.isolation import claude_installation, sandboxed
from veriharness.agent.limits import SessionLimitsInForce, describe_hit
from veriharness.agent.outcome import Waiting, classify
from veriharness.agent.plan import (
    USER_MESSAGE,
    SessionPlan,
    command_line,
    mcp_config,
    session_environment,
    session_secrets,
    upstream_for,
)
from veriharness.agent.proxy import Admit, OnArrival, running_proxy
from veriharness.agent.request_record import (
    REQUESTS_FILE,
    AgentRequest,
    longest_unanswered_s,
    read_requests,
    server_tools_refused,
)
from veriharness.agent.snapshots import AnswerSnapshots
from veriharness.agent.transcript import TranscriptSummary, summarize_transcript
from veriharness.agent.workspace import (
    copy_answer,
    create_workspace,
    limited_folder,
    remove_workspace,
)
from veriharness.experiment.catalog import OFFLINE_URL_ENV
from veriharness.experiment.environment import software_paths
from veriharness.mllm import MLLM_HTTP_PATH, MLLM_TOKEN_ENV
from veriharness.offline.server import running_offline_server
from veriharness.pace.provider_pace import WAITING, ProviderPace, pace_dir
from veriharness.runfolder.call_images import CALL_IMAGES
from veriharness.runfolder.mllm_trace import CallCompleted, CallFailed, CallStarted, read_trace
from veriharness.runfolder.outcome import (
    AGENT_OUTCOME,
    AgentOutcome,
    AppliedLimits,
    Attempt,
    SessionSlot,
    SessionUsage,
    Spend,
    Status,
)
from veriharness.spend.early_stop import early_stop_for
from veriharness.spend.ledger import (
    STOP_NAME,
    BudgetExhausted,
    SpendGate,
    note_stopped,
    read_stop,
)

__all__ = [
    "MLLM_SERVER_LOG",
    "SessionFacts",
    "end_session_on_sigterm",
    "running_mllm_server",
    "run_session",
]

_KILL_GRACE_SECONDS = 5.0
# How long the mllm server may take to listen. Its start is mostly imports (about a CPU-second),
# so it is bounded by the CPU time it uses, not by the clock: sixty-four sessions starting at once
# on two cores queue for the CPU for minutes, and are slow, not failed. The wall bound only ends a
# server that is never given the CPU at all.
_MLLM_START_CPU_SECONDS = 30.0
_MLLM_START_WALL_SECONDS = 900.0
MLLM_SERVER_LOG = "mllm_server.log"

_STOP_POLL_SECONDS = 0.5


class SessionFacts(BaseModel):
    """What `outcome.json` says of a session however it ended: known before it starts, then the
    command and environment once built (None: the session was never started, so whatever
    failed was the set-up), and how long the claude process ran."""

    offline: bool
    model: str
    claude_version: str
    sandboxed: bool
    session_network: Literal["none", "open"]
    enforced_limits: AppliedLimits | None = None
    workspace: str
    workspace_kept: bool
    started_at: str
    user_message: str
    admission_wait_seconds: float | None = None
    paced_seconds: float | None = None
    command: list[str] | None = None
    environment: dict[str, str] = {}
    session_seconds: float | None = None


class _ProcessEnd(NamedTuple):
    exit_code: int | None
    timed_out: bool
    limit: Limit | None  # the limit the session passed (it was stopped then)


@dataclass(frozen=True)
class _SessionFolder:
    """Private to one session, outside the run folder, and discarded afterwards: Claude Code's
    config and home, the two files it reads at start (it cannot see the run folder), and the
    session's two tokens."""

    path: Path
    tokens: dict[str, str]

    @classmethod
    def create(cls, disk_mib: int) -> _SessionFolder:
        """Made as a tmpfs of `disk_mib` where the machine allows it (the session writes into
        Claude Code's config folder)."""
        folder = cls(
            Path(tempfile.mkdtemp(prefix="veriharness-session-")),
            {"session token": secrets.token_urlsafe(32), "mllm token": secrets.token_urlsafe(32)},
        )
        limited_folder(folder.path, disk_mib)
        folder.config_dir.mkdir()
        return folder

    @property
    def config_dir(self) -> Path:
        return self.path / "claude-config"

    @property
    def mcp_config(self) -> Path:
        return self.path / "mcp_config.json"

    @property
    def sockets(self) -> Path:
        """The unix sockets bridged into a sandbox of `network: none`."""
        return self.path / "net"


def _mllm_spend_json(plan: SessionPlan) -> str:
    prices = {
        name: price.model_dump() if price else None for name, price in plan.profile_prices.items()
    }
    return json.dumps(
        {"prices": prices, "ledger": plan.ledger.model_dump(mode="json"), "paced": plan.pace}
    )


@contextmanager
def _model_endpoint(plan: SessionPlan) -> Iterator[str | None]:
    """The offline model, started when the agent or any CallMLLM profile uses it."""
    if not (plan.offline or plan.offline_profiles):
        yield None
        return
    log = plan.run_dir / "model_requests.jsonl" if plan.log_model_requests else None
    with running_offline_server(request_log=log) as url:
        yield url


@contextmanager
def running_mllm_server(
    plan: SessionPlan, workspace: Path, offline_url: str | None, token: str, port_file: Path
) -> Iterator[str]:
    """The `mllm` server for one session, outside the sandbox, on a loopback port; yields the
    URL the session's MCP config names. It runs with the caller's environment (the catalog's
    keys) and writes the trace, and with `keep_call_images` each attached image, into the run
    folder."""
    env = dict(os.environ) | {MLLM_TOKEN_ENV: token}
    if offline_url is not None:
        env[OFFLINE_URL_ENV] = offline_url
    command = [
        sys.executable, "-m", "veriharness", "mllm-server", "--transport", "http",
        "--workspace", str(workspace),
        "--catalog", str(plan.catalog),
        "--taxonomy", str(plan.taxonomy),
        "--trace", str(plan.run_dir / "mllm_trace.jsonl"),
        "--spend-json", _mllm_spend_json(plan),
        "--port-file", str(port_file),
        # Its own session (so its group can be ended), yet never outliving this process.
        "--parent-pid", str(os.getpid()),
    ]  # fmt: skip
    if plan.keep_call_images:
        command += ["--call-images", str(plan.run_dir / CALL_IMAGES)]
    log_path = plan.run_dir / MLLM_SERVER_LOG
    with open(log_path, "w", encoding="utf-8") as log:
        server = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        _wait_until_listening(server, port_file, log_path)
        yield f"http://127.0.0.1:{int(port_file.read_text())}{MLLM_HTTP_PATH}"
    finally:
        _kill_group(server)


def _wait_until_listening(server: subprocess.Popen[bytes], port_file: Path, log: Path) -> None:
    """Return once the server has written its port; raise, saying why, if it ended first or used
    its start's CPU or wall bound without listening."""
    began = time.monotonic()
    while not port_file.exists():
        why = None
        if server.poll() is not None:
            why = f"it ended with exit code {server.returncode}"
        elif time.monotonic() - began > _MLLM_START_WALL_SECONDS:
            why = f"it was not listening after {_MLLM_START_WALL_SECONDS:.0f} s"
        else:
            try:
                used = cpu_seconds(server.pid)
            except OSError:
                used = 0.0  # ended between the poll and the read: the next poll says how
            if used > _MLLM_START_CPU_SECONDS:
                why = f"it used {used:.1f} CPU-seconds without listening"
        if why:
            tail = log.read_text(encoding="utf-8", errors="replace")[-500:].strip()
            raise RuntimeError(f"the mllm server did not start: {why}: {tail or 'no output'}")
        time.sleep(0.02)


def run_session(
    plan: SessionPlan,
    admit: Admit | None = None,
    on_record: Callable[[AgentRequest], None] | None = None,
    slot: SessionSlot | None = None,
) -> AgentOutcome:
    """Run the session, again after an infra_error (up to `plan.infra_retries` times), and write
    transcript, trace, answer and outcome into the run folder.

    `admit`, when given, sees every model request before it goes upstream and may refuse it;
    `on_record` gets each request's record once it is written (both for spending caps); `slot`
    is the session slot the caller holds for it (session_slots.py), recorded in the outcome."""
    keep_earlier_attempt(plan.run_dir)
    attempts: list[Attempt] = []
    while True:
        outcome = _run_attempt(plan, admit, on_record)
        attempt = Attempt(
            attempt=len(attempts) + 1,
            status=outcome.status,
            cause=outcome.error,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
        )
        if outcome.status != "infra_error" or len(attempts) >= plan.infra_retries:
            break
        kept = keep_earlier_attempt(plan.run_dir)
        attempt.files = kept.relative_to(plan.run_dir).as_posix() if kept else None
        attempts.append(attempt)
    outcome.attempts = [*attempts, attempt]
    outcome.session_slot = slot
    AGENT_OUTCOME.write(plan.run_dir, outcome)
    if outcome.status != "not_started":
        try:
            keep_finished(plan.run_dir)
        except OSError as error:  # the outcome stands; only its restorable copy is missing
            print(f"finished/ not written: {error}", file=sys.stderr)
    return outcome


def _run_attempt(
    plan: SessionPlan,
    admit: Admit | None,
    on_record: Callable[[AgentRequest], None] | None,
) -> AgentOutcome:
    started, clock = _now(), time.monotonic()
    (plan.run_dir / STOP_NAME).unlink(missing_ok=True)  # a cap's stop of an earlier attempt
    # The monitor's known answer stops sessions as the spending cap does: before any is made.
    if plan.early_stop is not None:
        known = early_stop_for(plan.ledger.experiment_dir, plan.early_stop)
        if known is not None:
            return _not_started(plan, started, clock, "stopped_early", known.message)
    gate = SpendGate(plan.ledger)
    try:
        gate.admit()
    except BudgetExhausted as refused:
        return _not_started(plan, started, clock, "budget", str(refused))
    charges = AgentCharges(gate, plan.model, plan.agent_price, plan.model_prices)
    pace = ProviderPace(pace_dir(plan.ledger.experiment_dir), AGENT_PACE) if plan.pace else None
    waited = _wait_for_pace(pace, plan.label) if pace else None
    disk = plan.limits.disk_mib
    workspace = create_workspace(
        plan.workspace_root, plan.project, plan.reference, plan.label, disk, plan.task_images
    )
    folder = _SessionFolder.create(disk)
    redact = Redactor(folder.tokens)
    snapshots = AnswerSnapshots(
        workspace, plan.run_dir, plan.snapshots.max_count, plan.snapshots.max_mib
    )
    facts = SessionFacts(
        offline=plan.offline,
        model=plan.model,
        claude_version=claude_version(plan.claude),
        sandboxed=plan.isolation == "bwrap",
        session_network=plan.network,
        workspace=str(workspace),
        workspace_kept=plan.keep_workspace,
        started_at=started,
        user_message=USER_MESSAGE,
        admission_wait_seconds=waited,
    )
    limits: SessionLimitsInForce | None = None
    try:
        try:
            redact = session_secrets(plan, folder.tokens)
            disks = [p for p in (workspace, folder.path) if os.path.ismount(p)]
            limits = SessionLimitsInForce(plan.limits, disks if len(disks) == 2 else [])
            facts.enforced_limits = limits.applied
            limits.refuse_unless_allowed(plan.offline)
            admit_all = budget_admit(gate, admit)
            record_all = each_record(charges.charge, on_record)
            end = _run_claude(
                plan,
                workspace,
                folder,
                facts,
                limits,
                pace,
                redact,
                _Hooks(admit_all, record_all, snapshots.at_request),
            )
            outcome = _ended_outcome(plan, workspace, facts, end, charges, redact, clock)
            try:
                snapshots.at_end(plan.run_dir / "answer")
            except OSError as error:  # the outcome stands; the index lacks the final capture
                print(f"answer snapshot at the session's end not kept: {error}", file=sys.stderr)
        except Exception as error:  # recorded as a failed run; the pipeline goes on
            outcome = _failed_outcome(plan, facts, error, redact, clock)
        # Written before the clean-up, which a loaded machine can make fail: the session is paid.
        AGENT_OUTCOME.write(plan.run_dir, outcome)
    finally:
        if limits is not None:
            limits.close()
        remove_workspace(workspace, keep=plan.keep_workspace)
        remove_workspace(folder.path)
    if outcome.reason == "budget":
        note_stopped(plan.ledger, outcome.status)
    return outcome


class _Hooks(NamedTuple):
    """What the proxy calls for each request: the admission check, the record's callback and
    the answer snapshots."""

    admit: Admit
    on_record: Callable[[AgentRequest], None]
    on_arrival: OnArrival


def _run_claude(
    plan: SessionPlan,
    workspace: Path,
    folder: _SessionFolder,
    facts: SessionFacts,
    limits: SessionLimitsInForce,
    pace: ProviderPace | None,
    redact: Redactor,
    hooks: _Hooks,
) -> _ProcessEnd:
    """Start the offline model (if used), the proxy and the `mllm` server, run claude (in the
    sandbox, unless `isolation: none`; behind the bridge, under `network: none`; in the
    session's cgroup where there is one) until it ends, the wall clock runs out or it passes a
    limit, and stop them."""
    prompt = Path(shutil.copyfile(plan.system_prompt, folder.path / "system_prompt.md"))
    session_token, mllm_token = folder.tokens["session token"], folder.tokens["mllm token"]
    with ExitStack() as stack:
        offline_url = stack.enter_context(_model_endpoint(plan))
        upstream = upstream_for(plan, offline_url)
        requests = plan.run_dir / REQUESTS_FILE
        proxy_url = stack.enter_context(
            running_proxy(
                upstream,
                session_token,
                requests,
                hooks.admit,
                hooks.on_record,
                pace,
                hooks.on_arrival,
                plan.allow_server_tools,
            )
        )
        port_file = folder.path / "mllm.port"
        mllm_url = stack.enter_context(
            running_mllm_server(plan, workspace, offline_url, mllm_token, port_file)
        )
        atomic.write_json(folder.mcp_config, mcp_config(mllm_url, mllm_token), indent=None)
        env, recorded_env = session_environment(plan, folder.config_dir, proxy_url, session_token)
        command = command_line(plan, folder.mcp_config, prompt)
        readable = [*software_paths(plan.project), claude_installation(plan.claude)]
        readable_files = [prompt, folder.mcp_config]
        if plan.network == "none":
            command, bridged = _behind_bridge(stack, folder, command, [proxy_url, mllm_url])
            readable, readable_files = [*readable, folder.sockets], [*readable_files, bridged]
        if plan.isolation == "bwrap":
            command = sandboxed(
                command,
                bwrap=find_bwrap(),
                readable=readable,
                readable_files=readable_files,
                writable=[workspace, folder.config_dir],
                workdir=workspace,
                home=folder.config_dir,
                own_network=plan.network == "none",
            )
        command = limits.joined(command)
        facts.command, facts.environment = command, recorded_env
        session_clock = time.monotonic()
        end = _run_process(command, env, workspace, plan, redact, limits, pace)
        facts.session_seconds = round(time.monotonic() - session_clock, 3)
        facts.paced_seconds = round(pace.held_s, 3) if pace else None
    return end


def _behind_bridge(
    stack: ExitStack, folder: _SessionFolder, command: list[str], urls: list[str]
) -> tuple[list[str], Path]:
    """`command` run behind the inside half of the bridge, the outside half listening on a
    unix socket per loopback port of `urls`; returns the command and the bridge's path,
    which the sandbox must show."""
    folder.sockets.mkdir()
    forwards: dict[int, Path] = {}
    for url in urls:
        port = urlsplit(url).port
        assert port is not None, url  # both endpoints are started on a loopback port
        outside = UnixToTcp(folder.sockets / f"{port}.sock", port)
        stack.callback(outside.close)
        forwards[port] = outside.path
    script = Path(shutil.copyfile(_BRIDGE_SCRIPT, folder.path / "bridge.py"))
    return bridge_command(sys.executable, script, forwards, command), script


_BRIDGE_SCRIPT = Path(__file__).with_name("bridge.py")


AGENT_PACE = "agent"


def _wait_for_pace(pace: ProviderPace, label: str) -> float:
    """Before a session starts: wait while the agent's provider is saturated (a 429's
    retry-after, or its stated per-minute limit reached), which costs nothing; a marker under
    `pace/waiting/` lets `status` count the waiting sessions. Returns the seconds waited."""
    began = time.monotonic()
    marker = pace.state_path.parent / WAITING / label
    try:
        while (wait := pace.saturated_for()[0]) > 0:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            time.sleep(min(wait, 5.0))
    finally:
        marker.unlink(missing_ok=True)
    return round(time.monotonic() - began, 3)


def _ended_outcome(
    plan: SessionPlan,
    workspace: Path,
    facts: SessionFacts,
    end: _ProcessEnd,
    charges: AgentCharges,
    redact: Redactor,
    clock: float,
) -> AgentOutcome:
    """The outcome of a session that ran: classified from its exit, its transcript and what
    still waited at the wall clock, unless a spending cap stopped it or it passed a limit (its
    transcript, trace and answer are kept all the same)."""
    run_dir = plan.run_dir
    stop = read_stop(run_dir)
    limit = None if stop else end.limit
    _redact_files(run_dir, redact)
    refused_links = copy_answer(workspace, run_dir / "answer")
    answer_present = (run_dir / "answer" / "answer.html").is_file()
    summary = summarize_transcript(run_dir / "transcript.jsonl")
    status, cause = classify(
        end.exit_code,
        end.timed_out,
        summary,
        _tail(run_dir / "claude_stderr.log"),
        _longest_wait(run_dir) if end.timed_out else None,
        plan.wall_clock_seconds,
    )
    error: str | None
    if stop:
        status, error = "budget_exhausted", stop.message
    elif limit:
        status, error = "resource_limit", describe_hit(limit, plan.limits)
    else:
        error = _error(plan, end.timed_out, status, cause)
    outcome = _outcome(
        facts,
        summary,
        status=status,
        reason="budget" if stop else None,
        limit=limit,
        spend=charges.spend(run_dir),
        exit_code=end.exit_code,
        answer_present=answer_present,
        answer_links_refused=refused_links,
        clock=clock,
        error=error,
    )
    outcome.server_tools_refused = server_tools_refused(read_requests(run_dir / REQUESTS_FILE))
    return outcome


def _failed_outcome(
    plan: SessionPlan, facts: SessionFacts, error: Exception, redact: Redactor, clock: float
) -> AgentOutcome:
    (plan.run_dir / "answer").mkdir(exist_ok=True)
    _redact_files(plan.run_dir, redact)
    return _outcome(
        facts,
        TranscriptSummary(),
        # A session that could not be set up (its mllm server, proxy or workspace) never
        # reached the agent: infrastructure, retried like any other infra_error.
        status="infra_error" if facts.command is None else "failed",
        clock=clock,
        error=redact(f"{type(error).__name__}: {error}"),
    )


def _outcome(
    facts: SessionFacts,
    summary: TranscriptSummary,
    *,
    status: Status,
    clock: float,
    error: str | None,
    reason: Literal["budget"] | None = None,
    limit: Limit | None = None,
    spend: Spend | None = None,
    exit_code: int | None = None,
    answer_present: bool = False,
    answer_links_refused: list[str] | None = None,
) -> AgentOutcome:
    init, result = summary.init, summary.result
    return AgentOutcome(
        status=status,
        reason=reason,
        limit=limit,
        spend=spend or Spend(),
        exit_code=exit_code,
        answer_present=answer_present,
        answer_links_refused=answer_links_refused or [],
        wall_seconds=round(time.monotonic() - clock, 3),
        finished_at=_now(),
        error=error,
        offline=facts.offline,
        model=facts.model,
        claude_version=facts.claude_version,
        sandboxed=facts.sandboxed,
        session_network=facts.session_network,
        enforced_limits=facts.enforced_limits,
        workspace=facts.workspace,
        workspace_kept=facts.workspace_kept,
        started_at=facts.started_at,
        user_message=facts.user_message,
        admission_wait_seconds=facts.admission_wait_seconds,
        paced_seconds=facts.paced_seconds,
        command=facts.command or [],
        environment=facts.environment,
        session_seconds=facts.session_seconds,
        mllm_connected=init.mllm_connected if init else None,
        session_tools=init.session_tools if init else None,
        result_subtype=result.result_subtype if result else None,
        is_error=result.is_error if result else None,
        num_turns=result.num_turns if result else None,
        total_cost_usd=result.total_cost_usd if result else None,
        duration_ms=result.duration_ms if result else None,
        duration_api_ms=result.duration_api_ms if result else None,
        session_id=result.session_id if result else None,
        api_error_status=result.api_error_status if result else None,
        usage=result.usage if result else SessionUsage(),
    )


def _longest_wait(run_dir: Path) -> Waiting:
    """What had waited longest without an answer when the session ended: a model request the
    proxy still held, or a CallMLLM call the trace started and never ended."""
    agent = longest_unanswered_s(read_requests(run_dir / REQUESTS_FILE))
    events = read_trace(run_dir, []) or []
    ended = {e.call_id for e in events if isinstance(e, CallCompleted | CallFailed)}
    now, calls = datetime.now(UTC), [0.0]
    for event in events:
        if isinstance(event, CallStarted) and event.call_id not in ended:
            try:
                calls.append((now - datetime.fromisoformat(event.time)).total_seconds())
            except (TypeError, ValueError):
                continue
    if max(calls) > agent:
        return Waiting("the CallMLLM provider", max(calls))
    return Waiting("the model provider", agent)


def _tail(path: Path, size: int = 4000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - size))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _not_started(
    plan: SessionPlan,
    started: str,
    clock: float,
    reason: Literal["budget", "stopped_early"],
    message: str,
) -> AgentOutcome:
    """The cap is reached, or the monitor's answer known, before the session: no session, and
    every output the workflow expects, empty, so the run still gets its row in the tables."""
    run_dir = plan.run_dir
    (run_dir / "answer").mkdir(exist_ok=True)
    for name in ("transcript.jsonl", "mllm_trace.jsonl"):
        (run_dir / name).write_text("", encoding="utf-8")
    outcome = AgentOutcome(
        status="not_started",
        reason=reason,
        offline=plan.offline,
        model=plan.model,
        started_at=started,
        finished_at=_now(),
        wall_seconds=round(time.monotonic() - clock, 3),
        error=message,
    )
    AGENT_OUTCOME.write(run_dir, outcome)
    note_stopped(plan.ledger, outcome.status)
    return outcome


def _redact_files(run_dir: Path, redact: Redactor) -> None:
    for written_by_others in ("claude_stderr.log", "model_requests.jsonl", MLLM_SERVER_LOG):
        redact.rewrite(run_dir / written_by_others)


def _run_process(
    command: list[str],
    env: dict[str, str],
    workspace: Path,
    plan: SessionPlan,
    redact: Redactor,
    limits: SessionLimitsInForce,
    pace: ProviderPace | None,
) -> _ProcessEnd:
    stderr_path = plan.run_dir / "claude_stderr.log"
    with (
        open(plan.run_dir / "transcript.jsonl", "w", encoding="utf-8") as transcript,
        open(stderr_path, "w", encoding="utf-8") as stderr,
    ):
        process = subprocess.Popen(
            command,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # its own process group, so a timeout kills every child
        )
        timed_out, limit = False, None
        try:
            # Inside the try: starting a thread can take a while on a busy machine, and an
            # interrupt arriving then must end the session as well.
            pump = threading.Thread(
                target=_copy_lines, args=(process.stdout, transcript, redact), daemon=True
            )
            pump.start()
            timed_out, limit = _wait(process, plan, limits, pace)
            if process.returncode is None:  # out of time, a cap or a limit was reached
                _kill_group(process)
        except BaseException:
            # Interrupted (Ctrl-C, Snakemake stopping its jobs): the session runs in its own
            # process group, so it would outlive this job, and keep spending, unless ended here.
            _kill_group(process)
            raise
        pump.join(timeout=_KILL_GRACE_SECONDS)
    # A limit the kernel enforced may have ended the session by itself (claude OOM-killed).
    return _ProcessEnd(process.returncode, timed_out, limit or limits.hit())


def _wait(
    process: subprocess.Popen[str],
    plan: SessionPlan,
    limits: SessionLimitsInForce,
    pace: ProviderPace | None,
) -> tuple[bool, Limit | None]:
    """Wait for the session to end; (True, None) when the wall clock ran out first. The time
    the proxy held requests to the provider's pace is not the agent's: it extends the wall
    clock. Returns early when a spending cap refused one of the run's requests
    (``budget_stop.json`` appeared), or with the limit the session passed."""
    deadline = time.monotonic() + plan.wall_clock_seconds
    stop_file = plan.run_dir / STOP_NAME
    while True:
        left = deadline + (pace.held_s if pace else 0.0) - time.monotonic()
        if left <= 0:
            return True, None
        try:
            process.wait(timeout=min(left, _STOP_POLL_SECONDS))
            return False, None
        except subprocess.TimeoutExpired:
            if stop_file.exists():
                return False, None
            if limit := limits.hit():
                return False, limit


def _copy_lines(source: Any, sink: Any, redact: Redactor) -> None:
    for line in source:
        sink.write(redact(line))
        sink.flush()


def _kill_group(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=_KILL_GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            continue


def _error(plan: SessionPlan, timed_out: bool, status: Status, cause: str | None) -> str | None:
    if timed_out and status == "timeout":
        return f"wall-clock limit of {plan.wall_clock_seconds} s reached"
    return cause


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def end_session_on_sigterm() -> None:
    """Make SIGTERM (Snakemake stopping its jobs) end a running session as Ctrl-C does."""
    signal.signal(signal.SIGTERM, _interrupt)
