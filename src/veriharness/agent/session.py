"""One `claude -p` session for one prepared run.

`plan_session` turns the experiment config and the prepared run folder into a `SessionPlan`;
`command_line` and `session_environment` are the only places the command and its environment are
built; `run_session` starts the process in its own process group, writes the stream-json
transcript line by line as it arrives (a crash keeps what came before), kills the whole group at
the wall-clock limit, and `outcome.json` records what happened. A session that ends in
`infra_error` (`outcome.py`) is attempted again, up to `execution.infra_retries` more times; the
files of each earlier attempt (and any found from an interrupted job) are moved, never deleted,
into `attempts/<n>/`, and `outcome.json` lists every attempt with its status and cause. Agent
outcomes are never retried.
"""

from __future__ import annotations

import argparse
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from veriharness._util import atomic
from veriharness._util.programs import claude_version, find_bwrap, find_claude, project_root
from veriharness._util.redaction import Redactor
from veriharness.agent.attempts import keep_earlier_attempt, keep_finished, restore_finished
from veriharness.agent.isolation import claude_installation, sandboxed, software_paths
from veriharness.agent.outcome import Waiting, classify
from veriharness.agent.proxy import ANTHROPIC_URL, Admit, Upstream, running_proxy
from veriharness.agent.request_record import (
    REQUESTS_FILE,
    AgentRequest,
    Refusal,
    RequestFacts,
    longest_unanswered_s,
    read_requests,
)
from veriharness.agent.workspace import copy_answer, create_workspace, remove_workspace
from veriharness.experiment.catalog import OFFLINE_URL_ENV, expand_env_refs, load_catalog
from veriharness.experiment.config import ExperimentConfig, load_config
from veriharness.experiment.prices import TokenPrice
from veriharness.mllm import MLLM_HTTP_PATH, MLLM_TOKEN_ENV
from veriharness.offline.server import running_offline_server
from veriharness.runfolder._files import read_object_lines as read_jsonl
from veriharness.runfolder.outcome import (
    AGENT_OUTCOME,
    AgentOutcome,
    Attempt,
    SessionUsage,
    Spend,
    Status,
)
from veriharness.runfolder.spend import TokenCounts
from veriharness.spend.ledger import (
    STOP_NAME,
    BudgetExhausted,
    SpendGate,
    SpendSettings,
    note_stopped,
    read_stop,
)
from veriharness.spend.prices import cost_usd

__all__ = [
    "USER_MESSAGE",
    "SessionPlan",
    "plan_session",
    "command_line",
    "session_environment",
    "run_session",
    "summarize_transcript",
]

# The user turn of every session; the task itself is in the appended system prompt (B2).
USER_MESSAGE = (
    "Carry out the image-to-code task described in your instructions. "
    "Work in the current directory."
)
_KILL_GRACE_SECONDS = 5.0
_MLLM_START_SECONDS = 60.0
_MASK = "***"
MLLM_SERVER_LOG = "mllm_server.log"
# The caller's variables a session gets (plus LC_*); everything else stays outside.
_PASSED_VARIABLES = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL")

_STOP_POLL_SECONDS = 0.5


class SessionPlan(BaseModel):
    """Everything one session needs, resolved to absolute paths."""

    run_dir: Path
    reference: Path
    system_prompt: Path
    catalog: Path
    taxonomy: Path
    claude: Path
    endpoint: Literal["offline", "anthropic", "gateway"]
    base_url: str | None
    api_key_env: str | None
    model: str
    max_turns: int
    wall_clock_seconds: float
    allowed_tools: list[str]
    tool_search: bool
    isolation: Literal["bwrap", "none"] = "bwrap"
    offline_profiles: bool = False  # a CallMLLM profile is served by the offline model
    workspace_root: Path | None
    keep_workspace: bool
    log_model_requests: bool
    project: Path
    label: str
    infra_retries: int = 0
    api_retries: int | None = None  # Claude Code's own retries of a failed API request
    spend: SpendSettings | None = None  # None: this run's ledger settings, without caps
    agent_price: TokenPrice | None = None
    model_prices: dict[str, TokenPrice] = Field(default_factory=dict)  # by request model name
    profile_prices: dict[str, TokenPrice | None] = Field(default_factory=dict)

    @property
    def offline(self) -> bool:
        return self.endpoint == "offline"

    @property
    def ledger(self) -> SpendSettings:
        assert self.spend is not None  # filled in by the validator below
        return self.spend

    @model_validator(mode="after")
    def _spend_of_the_run(self) -> SessionPlan:
        if self.spend is None:
            self.spend = _spend_settings(self.run_dir)
        return self


def _spend_settings(
    run_dir: Path, max_usd: float | None = None, max_usd_per_run: float | None = None
) -> SpendSettings:
    """The ledger settings of a run folder ``<experiment>/<condition>/<task>/r<k>``."""
    condition, task, replicate = run_dir.parts[-3:]
    return SpendSettings(
        experiment_dir=run_dir.parents[2],
        run_dir=run_dir,
        condition=condition,
        task=task,
        replicate=int(replicate.removeprefix("r")),
        max_usd=max_usd,
        max_usd_per_run=max_usd_per_run,
    )


def plan_session(config: ExperimentConfig, run_dir: Path, task_dir: Path) -> SessionPlan:
    project = project_root()
    agent, execution = config.agent, config.execution
    run_dir = run_dir.resolve()
    catalog = (project / config.model_catalog).resolve()
    profiles = load_catalog(catalog).profiles
    spend = _spend_settings(run_dir, execution.max_usd, execution.max_usd_per_run)
    return SessionPlan(
        run_dir=run_dir,
        reference=(task_dir / "reference.png").resolve(),
        system_prompt=run_dir / "system_prompt.md",
        catalog=catalog,
        taxonomy=(project / config.taxonomy).resolve(),
        claude=find_claude(),
        endpoint=agent.endpoint,
        base_url=agent.base_url,
        api_key_env=agent.api_key_env,
        model=agent.model,
        max_turns=agent.max_turns,
        wall_clock_seconds=agent.wall_clock_seconds,
        allowed_tools=list(agent.allowed_tools),
        tool_search=agent.tool_search,
        isolation=agent.isolation,
        offline_profiles=any(p.provider.offline for p in profiles),
        workspace_root=Path(execution.workspace_root) if execution.workspace_root else None,
        keep_workspace=execution.keep_workspaces,
        log_model_requests=execution.debug,
        project=project,
        label="-".join(run_dir.parts[-3:]),
        infra_retries=execution.infra_retries,
        api_retries=execution.api_retries,
        spend=spend,
        agent_price=config.prices.agent(agent.model, agent.endpoint == "offline"),
        model_prices=dict(config.prices.models),
        profile_prices={
            p.name: config.prices.profile(p.name, p.provider.offline) for p in profiles
        },
    )


def mcp_config(mllm_url: str, token: str) -> dict[str, Any]:
    """The session's MCP config: the address of the `mllm` server, which runs outside the
    sandbox, and the per-session token it checks. Nothing else of the run reaches the session."""
    server = {"type": "http", "url": mllm_url, "headers": {"Authorization": f"Bearer {token}"}}
    return {"mcpServers": {"mllm": server}}


def _mllm_spend_json(plan: SessionPlan) -> str:
    prices = {
        name: price.model_dump() if price else None for name, price in plan.profile_prices.items()
    }
    return json.dumps({"prices": prices, "ledger": plan.ledger.model_dump(mode="json")})


def command_line(plan: SessionPlan, mcp_config_path: Path, system_prompt: Path) -> list[str]:
    """The claude command. `--tools` makes the built-in tools of `allowed_tools` the only ones
    the session has (`--allowedTools` alone only pre-approves them, and bypassPermissions
    approves everything anyway: WebSearch, WebFetch, Task and some twenty more would be there)."""
    built_in = [tool for tool in plan.allowed_tools if not tool.startswith("mcp__")]
    return [
        str(plan.claude),
        "-p", USER_MESSAGE,
        "--output-format", "stream-json",
        "--verbose",
        "--append-system-prompt-file", str(system_prompt),
        "--mcp-config", str(mcp_config_path),
        "--strict-mcp-config",
        "--max-turns", str(plan.max_turns),
        "--model", plan.model,
        "--tools", ",".join(built_in),
        "--allowedTools", ",".join(plan.allowed_tools),
        "--permission-mode", "bypassPermissions",
    ]  # fmt: skip


def session_environment(
    plan: SessionPlan, config_dir: Path, proxy_url: str, token: str
) -> tuple[dict[str, str], dict[str, str]]:
    """The session's whole environment, and the part VeriHarness set with the token masked.

    Built from an allow-list, never from the caller's environment as a whole: the session gets
    the locale, PATH and the like, its model's address (the loopback proxy) and its own token as
    API key, and nothing that holds a key, another token or a private address."""
    passed = {
        k: v
        for k, v in os.environ.items()
        if k in _PASSED_VARIABLES or (k.startswith("LC_") and k.isupper())
    }
    ours: dict[str, str] = {
        "HOME": str(config_dir),
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "IS_SANDBOX": "1",  # lets root use bypassPermissions; the workspace is the sandbox
        "ENABLE_TOOL_SEARCH": "true" if plan.tool_search else "false",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "ANTHROPIC_BASE_URL": proxy_url,
        "ANTHROPIC_API_KEY": token,
    }
    if plan.api_retries is not None:
        ours["CLAUDE_CODE_MAX_RETRIES"] = str(plan.api_retries)
    recorded = {k: (_MASK if k == "ANTHROPIC_API_KEY" else v) for k, v in sorted(ours.items())}
    return {**passed, **ours}, recorded


def upstream_for(plan: SessionPlan, offline_url: str | None) -> Upstream:
    """Where the proxy sends the agent's requests, with the real key (read here, outside)."""
    if plan.endpoint == "offline":
        assert offline_url is not None
        return Upstream(offline_url, None)
    key_name = plan.api_key_env or "ANTHROPIC_API_KEY"
    key = os.environ.get(key_name)
    if not key:
        raise RuntimeError(f"agent.api_key_env names {key_name}, which is not set")
    if plan.endpoint == "anthropic":
        return Upstream(ANTHROPIC_URL, key)
    if not plan.base_url:
        raise RuntimeError("agent.endpoint is 'gateway' but agent.base_url is empty")
    return Upstream(expand_env_refs(plan.base_url, "agent.base_url"), key)


def _secrets(plan: SessionPlan, tokens: dict[str, str]) -> Redactor:
    """Every value that must not reach a file of the run folder: the catalog's keys and private
    addresses, the agent's key and gateway address, and the session's tokens."""
    values = dict(load_catalog(plan.catalog).secrets(os.environ))
    key_name = plan.api_key_env or "ANTHROPIC_API_KEY"
    if plan.endpoint != "offline" and os.environ.get(key_name):
        values[key_name] = os.environ[key_name]
    if plan.endpoint == "gateway" and plan.base_url:
        try:
            values["agent.base_url"] = expand_env_refs(plan.base_url, "agent.base_url")
        except ValueError:
            pass  # unset: reported when the upstream is built
    return Redactor(values | tokens)


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
    keys) and writes the trace into the run folder."""
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
        deadline = time.monotonic() + _MLLM_START_SECONDS
        while not port_file.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(encoding="utf-8", errors="replace")[-500:]
                raise RuntimeError(f"the mllm server did not start: {tail.strip()}")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{int(port_file.read_text())}{MLLM_HTTP_PATH}"
    finally:
        _kill_group(server)


def run_session(
    plan: SessionPlan,
    admit: Admit | None = None,
    on_record: Callable[[AgentRequest], None] | None = None,
) -> AgentOutcome:
    """Run the session, again after an infra_error (up to `plan.infra_retries` times), and write
    transcript, trace, answer and outcome into the run folder.

    `admit`, when given, sees every model request before it goes upstream and may refuse it;
    `on_record` gets each request's record once it is written (both for spending caps)."""
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
    run_dir = plan.run_dir
    (run_dir / STOP_NAME).unlink(missing_ok=True)  # a cap's stop of an earlier attempt
    gate = SpendGate(plan.ledger)
    try:
        gate.admit()
    except BudgetExhausted as refused:
        return _not_started_for_budget(plan, started, clock, str(refused))
    charges = AgentCharges(plan, gate)
    workspace = create_workspace(plan.workspace_root, plan.project, plan.reference, plan.label)
    # Private to this session, outside the run folder, and discarded afterwards: Claude Code's
    # config and home, and the two files it reads at start (it cannot see the run folder).
    session_dir = Path(tempfile.mkdtemp(prefix="veriharness-session-"))
    config_dir = session_dir / "claude-config"
    config_dir.mkdir()
    mcp_path = session_dir / "mcp_config.json"
    tokens = {"session token": secrets.token_urlsafe(32), "mllm token": secrets.token_urlsafe(32)}
    redact = Redactor(tokens)
    base: dict[str, Any] = {
        "offline": plan.offline,
        "model": plan.model,
        "claude_version": claude_version(plan.claude),
        "sandboxed": plan.isolation == "bwrap",
        "workspace": str(workspace),
        "workspace_kept": plan.keep_workspace,
        "started_at": started,
        "user_message": USER_MESSAGE,
    }
    try:
        prompt = Path(shutil.copyfile(plan.system_prompt, session_dir / "system_prompt.md"))
        redact = _secrets(plan, tokens)
        with ExitStack() as stack:
            offline_url = stack.enter_context(_model_endpoint(plan))
            proxy_url = stack.enter_context(
                running_proxy(
                    upstream_for(plan, offline_url),
                    tokens["session token"],
                    run_dir / REQUESTS_FILE,
                    _budget_admit(gate, admit),
                    _both(charges.charge, on_record),
                )
            )
            mllm_url = stack.enter_context(
                running_mllm_server(
                    plan, workspace, offline_url, tokens["mllm token"], session_dir / "mllm.port"
                )
            )
            atomic.write_json(mcp_path, mcp_config(mllm_url, tokens["mllm token"]), indent=None)
            env, recorded_env = session_environment(
                plan, config_dir, proxy_url, tokens["session token"]
            )
            command = command_line(plan, mcp_path, prompt)
            if plan.isolation == "bwrap":
                command = sandboxed(
                    command,
                    bwrap=find_bwrap(),
                    readable=[*software_paths(plan.project), claude_installation(plan.claude)],
                    readable_files=[prompt, mcp_path],
                    writable=[workspace, config_dir],
                    workdir=workspace,
                    home=config_dir,
                )
            base.update(command=command, environment=recorded_env)
            session_clock = time.monotonic()
            exit_code, timed_out = _run_process(command, env, workspace, plan, redact)
            base["session_seconds"] = round(time.monotonic() - session_clock, 3)
        stop = read_stop(run_dir)
        _redact_files(run_dir, redact)
        answer_present = copy_answer(workspace, run_dir / "answer")
        summary = summarize_transcript(run_dir / "transcript.jsonl")
        status, cause = classify(
            exit_code,
            timed_out,
            summary,
            _tail(run_dir / "claude_stderr.log"),
            _longest_wait(run_dir) if timed_out else None,
            plan.wall_clock_seconds,
        )
        summary.pop("result_text", None)
        outcome = AgentOutcome(
            **base,
            **summary,
            status="budget_exhausted" if stop else status,
            reason="budget" if stop else None,
            spend=charges.spend(run_dir / "mllm_trace.jsonl"),
            exit_code=exit_code,
            answer_present=answer_present,
            wall_seconds=round(time.monotonic() - clock, 3),
            finished_at=_now(),
            error=stop.message if stop else _error(plan, timed_out, status, cause),
        )
    except Exception as error:  # recorded as a failed run; the pipeline goes on with the others
        (run_dir / "answer").mkdir(exist_ok=True)
        _redact_files(run_dir, redact)
        outcome = AgentOutcome(
            **base,
            # A session that could not be set up (its mllm server, proxy or workspace) never
            # reached the agent: infrastructure, retried like any other infra_error.
            status="infra_error" if "command" not in base else "failed",
            wall_seconds=round(time.monotonic() - clock, 3),
            finished_at=_now(),
            error=redact(f"{type(error).__name__}: {error}"),
        )
    finally:
        if not plan.keep_workspace:
            remove_workspace(workspace)
        remove_workspace(session_dir)
    AGENT_OUTCOME.write(run_dir, outcome)
    if outcome.reason == "budget":
        note_stopped(plan.ledger, outcome.status)
    return outcome


def _longest_wait(run_dir: Path) -> Waiting:
    """What had waited longest without an answer when the session ended: a model request the
    proxy still held, or a CallMLLM call the trace started and never ended."""
    agent = longest_unanswered_s(read_requests(run_dir / REQUESTS_FILE))
    events = read_jsonl(run_dir / "mllm_trace.jsonl", "mllm_trace.jsonl", []) or []
    ended = {
        e.get("call_id")
        for e in events
        if e.get("event") in ("mllm_call_completed", "mllm_call_failed")
    }
    now, calls = datetime.now(UTC), [0.0]
    for event in events:
        if event.get("event") == "mllm_call_started" and event.get("call_id") not in ended:
            try:
                calls.append((now - datetime.fromisoformat(event["time"])).total_seconds())
            except (KeyError, TypeError, ValueError):
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


def _not_started_for_budget(
    plan: SessionPlan, started: str, clock: float, message: str
) -> AgentOutcome:
    """The cap is reached before the session: no session, and every output the workflow
    expects, empty, so the run still gets its row in the tables."""
    run_dir = plan.run_dir
    (run_dir / "answer").mkdir(exist_ok=True)
    for name in ("transcript.jsonl", "mllm_trace.jsonl"):
        (run_dir / name).write_text("", encoding="utf-8")
    outcome = AgentOutcome(
        status="not_started",
        reason="budget",
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


def _trace_cost(path: Path) -> float | None:
    """The sum of the CallMLLM trace's call costs; None when a completed call has none."""
    total = 0.0
    for event in read_jsonl(path, path.name, []) or []:
        if event.get("event") == "mllm_call_completed":
            cost = event.get("cost_usd")
            if not isinstance(cost, int | float):
                return None
            total += cost
    return total


def _both(
    first: Callable[[AgentRequest], None], then: Callable[[AgentRequest], None] | None
) -> Callable[[AgentRequest], None]:
    def each(request: AgentRequest) -> None:
        first(request)
        if then is not None:
            then(request)

    return each


def _budget_admit(gate: SpendGate, also: Admit | None) -> Admit:
    """The proxy's admission check: refuse a request once a spending cap is reached (the gate
    leaves the stop file that ends the session), then ask `also`, if given."""

    def admit(facts: RequestFacts) -> Refusal | None:
        try:
            gate.admit()
        except BudgetExhausted as refused:
            return Refusal(status=400, error_type="invalid_request_error", message=str(refused))
        return also(facts) if also is not None else None

    return admit


class AgentCharges:
    """Prices each agent request the proxy recorded and charges it to the ledger."""

    def __init__(self, plan: SessionPlan, gate: SpendGate) -> None:
        self.plan = plan
        self.gate = gate
        self.total = 0.0
        self._lock = threading.Lock()

    def charge(self, request: AgentRequest) -> None:
        tokens = TokenCounts.of(
            request.input_tokens,
            request.output_tokens,
            request.cache_read_input_tokens,
            request.cache_creation_input_tokens,
        )
        # A request names its model; Claude Code may use another than the agent's for a side
        # task. Priced by that name when listed, else at the agent model's price.
        price = self.plan.model_prices.get(request.model or "") or self.plan.agent_price
        if price is None or tokens == TokenCounts():
            return  # unpriced, or nothing was used (refused, failed before an answer)
        cost = cost_usd(price, tokens)
        request_id = f"{request.time} {request.method} {request.path}"
        self.gate.charge("agent", request.model or self.plan.model, request_id, tokens, cost)
        with self._lock:
            self.total += cost

    def spend(self, trace: Path) -> Spend:
        agent = self.total if self.plan.agent_price is not None else None
        mllm = _trace_cost(trace)
        total = None if agent is None or mllm is None else agent + mllm
        return Spend(agent_usd=agent, mllm_usd=mllm, total_usd=total, agent_source="proxy")


def _redact_files(run_dir: Path, redact: Redactor) -> None:
    for written_by_others in ("claude_stderr.log", "model_requests.jsonl", MLLM_SERVER_LOG):
        redact.rewrite(run_dir / written_by_others)


def _run_process(
    command: list[str], env: dict[str, str], workspace: Path, plan: SessionPlan, redact: Redactor
) -> tuple[int | None, bool]:
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
        timed_out = False
        try:
            # Inside the try: starting a thread can take a while on a busy machine, and an
            # interrupt arriving then must end the session as well.
            pump = threading.Thread(
                target=_copy_lines, args=(process.stdout, transcript, redact), daemon=True
            )
            pump.start()
            timed_out = _wait(process, plan)
            if process.returncode is None:  # out of time, or a spending cap was reached
                _kill_group(process)
        except BaseException:
            # Interrupted (Ctrl-C, Snakemake stopping its jobs): the session runs in its own
            # process group, so it would outlive this job, and keep spending, unless ended here.
            _kill_group(process)
            raise
        pump.join(timeout=_KILL_GRACE_SECONDS)
    return process.returncode, timed_out


def _wait(process: subprocess.Popen[str], plan: SessionPlan) -> bool:
    """Wait for the session to end; True when the wall clock ran out first. Returns early when
    a spending cap refused one of the run's requests (``budget_stop.json`` appeared)."""
    deadline = time.monotonic() + plan.wall_clock_seconds
    stop_file = plan.run_dir / STOP_NAME
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        try:
            process.wait(timeout=min(left, _STOP_POLL_SECONDS))
            return False
        except subprocess.TimeoutExpired:
            if stop_file.exists():
                return False


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


def summarize_transcript(path: Path) -> dict[str, Any]:
    """Facts for outcome.json from the init and result events of a stream-json transcript."""
    summary: dict[str, Any] = {}
    if not path.exists():
        return summary
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill; the transcript file keeps it as it came
        if event.get("type") == "system" and event.get("subtype") == "init":
            servers = {s.get("name"): s.get("status") for s in event.get("mcp_servers", [])}
            summary["mllm_connected"] = servers.get("mllm") == "connected"
            tools = event.get("tools")
            if isinstance(tools, list):
                summary["session_tools"] = sorted(str(tool) for tool in tools)
        elif event.get("type") == "result":
            summary.update(
                result_subtype=event.get("subtype"),
                is_error=event.get("is_error"),
                num_turns=event.get("num_turns"),
                total_cost_usd=event.get("total_cost_usd"),
                duration_ms=event.get("duration_ms"),
                duration_api_ms=event.get("duration_api_ms"),
                session_id=event.get("session_id"),
                api_error_status=event.get("api_error_status"),
                result_text=event.get("result") if isinstance(event.get("result"), str) else None,
                usage=SessionUsage(
                    **{
                        k: v
                        for k, v in (event.get("usage") or {}).items()
                        if k in SessionUsage.model_fields
                    }
                ),
            )
    return summary


def _error(plan: SessionPlan, timed_out: bool, status: Status, cause: str | None) -> str | None:
    if timed_out and status == "timeout":
        return f"wall-clock limit of {plan.wall_clock_seconds} s reached"
    return cause


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="experiment config (YAML/JSON)")
    parser.add_argument("--run-dir", required=True, type=Path, help="a prepared run folder")
    parser.add_argument("--task-dir", required=True, type=Path, help="the task's folder")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # end the session too, as for Ctrl-C

    config = load_config(args.config)
    plan = plan_session(config, args.run_dir, args.task_dir)
    if restore_finished(plan.run_dir):
        errors: list[str] = []
        restored = AGENT_OUTCOME.read(plan.run_dir, errors)
        if restored is None:
            print(f"{args.run_dir}: restored outcome unreadable: {'; '.join(errors)}")
            return 1
        print(
            f"{args.run_dir}: {restored.status}, restored: this session finished at "
            f"{restored.finished_at} and is not run again (`veriharness redo-session "
            f"{args.run_dir}` makes the workflow redo it)"
        )
        return 0
    outcome = run_session(plan)
    print(f"{args.run_dir}: {outcome.status}" + (f" ({outcome.error})" if outcome.error else ""))
    # A failed session is a recorded outcome, not a pipeline failure.
    return 0
