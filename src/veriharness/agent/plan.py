"""What one `claude -p` session is: its plan, command line, environment and upstream.

`plan_session` turns the experiment config and the prepared run folder into a `SessionPlan`,
every value resolved (absolute paths, prices, the ledger settings); the config's settings enter
only through it, so a plan has no defaults of its own. `command_line` and `session_environment`
are the only places the command and its environment are built, `upstream_for` where the proxy
sends the agent's requests, and `session_secrets` what must never reach a file of the run folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue, model_validator

from veriharness._util.programs import find_claude, project_root
from veriharness._util.redaction import Redactor
from veriharness.agent.charges import spend_settings
from veriharness.agent.proxy import ANTHROPIC_URL, Upstream
from veriharness.experiment.analysis import monitor_key
from veriharness.experiment.catalog import expand_env_refs, load_catalog
from veriharness.experiment.config import (
    ExperimentConfig,
    SessionLimits,
    SnapshotLimits,
    load_task,
)
from veriharness.experiment.interactions import workspace_files
from veriharness.experiment.prices import TokenPrice
from veriharness.spend.ledger import SpendSettings

__all__ = [
    "USER_MESSAGE",
    "SessionPlan",
    "command_line",
    "mcp_config",
    "plan_session",
    "session_environment",
    "session_secrets",
    "upstream_for",
]

# The user turn of every session; the task itself is in the appended system prompt (B2).
USER_MESSAGE = (
    "Carry out the image-to-code task described in your instructions. "
    "Work in the current directory."
)
_MASK = "***"
# The caller's variables a session gets (plus LC_*); everything else stays outside.
_PASSED_VARIABLES = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL")


class SessionPlan(BaseModel):
    """Everything one session needs, resolved to absolute paths. The settings of the config
    (`agent.*`, `execution.*`) are required fields: `plan_session` fills them from the config,
    whose models hold the one default of each."""

    run_dir: Path
    reference: Path
    # An interactive or responsive task's state images: workspace-relative name -> file (P-41).
    task_images: dict[str, Path] = Field(default_factory=dict)
    system_prompt: Path
    catalog: Path
    taxonomy: Path
    claude: Path
    endpoint: Literal["offline", "anthropic", "gateway"]
    base_url: str | None
    api_key_env: str
    model: str
    max_turns: int
    wall_clock_seconds: float
    allowed_tools: list[str]
    tool_search: bool
    isolation: Literal["bwrap", "none"]
    network: Literal["none", "open"]
    # The server tools the proxy lets through (agent/server_tools.py); the config's default,
    # none, refuses every server tool.
    allow_server_tools: tuple[str, ...]
    limits: SessionLimits
    offline_profiles: bool = False  # a CallMLLM profile is served by the offline model
    workspace_root: Path | None
    keep_workspace: bool
    snapshots: SnapshotLimits  # the answer snapshots' bounds (agent/snapshots.py)
    keep_call_images: bool  # the mllm server keeps each attached image in call_images/
    log_model_requests: bool
    project: Path
    label: str
    infra_retries: int
    api_retries: int | None  # Claude Code's own retries of a failed API request
    pace: bool  # hold requests to the provider's shared pace (pace/)
    spend: SpendSettings | None = None  # None: this run's ledger settings, without caps
    # The monitor settings (monitor_key) whose known answer keeps this session from starting
    # (analysis.monitor.stop: true; spend/early_stop.py); None: the monitor stops nothing.
    early_stop: dict[str, JsonValue] | None = None
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
    def _network_needs_sandbox(self) -> SessionPlan:
        if self.network == "none" and self.isolation != "bwrap":
            raise ValueError("network 'none' needs isolation 'bwrap'")
        return self

    @model_validator(mode="after")
    def _spend_of_the_run(self) -> SessionPlan:
        if self.spend is None:
            self.spend = spend_settings(self.run_dir)
        return self


def _task_images(task_dir: Path) -> dict[str, Path]:
    task = load_task(task_dir.parent, task_dir.name)
    names = workspace_files(task.interactions, task.viewports)
    return {name: (task_dir / name).resolve() for name in names}


def _early_stop_key(config: ExperimentConfig) -> dict[str, JsonValue] | None:
    monitor = config.analysis.monitor
    if monitor is None or not monitor.stop:
        return None
    return monitor_key(config.analysis, config.comparison_pairs())


def plan_session(config: ExperimentConfig, run_dir: Path, task_dir: Path) -> SessionPlan:
    project = project_root()
    agent, execution = config.agent, config.execution
    run_dir = run_dir.resolve()
    catalog = (project / config.model_catalog).resolve()
    profiles = load_catalog(catalog).profiles
    spend = spend_settings(run_dir, execution.max_usd, execution.max_usd_per_run)
    return SessionPlan(
        run_dir=run_dir,
        reference=(task_dir / "reference.png").resolve(),
        task_images=_task_images(task_dir),
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
        network=agent.network,
        allow_server_tools=agent.allow_server_tools,
        limits=agent.limits,
        offline_profiles=any(p.provider.offline for p in profiles),
        workspace_root=Path(execution.workspace_root) if execution.workspace_root else None,
        keep_workspace=execution.keep_workspaces,
        snapshots=execution.snapshots,
        keep_call_images=execution.keep_call_images,
        log_model_requests=execution.debug,
        project=project,
        label="-".join(run_dir.parts[-3:]),
        infra_retries=execution.infra_retries,
        api_retries=execution.api_retries,
        pace=execution.pace,
        spend=spend,
        early_stop=_early_stop_key(config),
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
        # The mllm server already listens when the CLI starts, yet on a loaded machine (64
        # sessions starting together on 2 cores) its MCP handshake passed the CLI's default 30 s.
        # 60 s is the most the pinned CLI honours (its initialize request's own timeout).
        "MCP_TIMEOUT": "60000",
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
    key = os.environ.get(plan.api_key_env)
    if not key:
        raise RuntimeError(f"agent.api_key_env names {plan.api_key_env}, which is not set")
    if plan.endpoint == "anthropic":
        return Upstream(ANTHROPIC_URL, key)
    if not plan.base_url:
        raise RuntimeError("agent.endpoint is 'gateway' but agent.base_url is empty")
    return Upstream(expand_env_refs(plan.base_url, "agent.base_url"), key)


def session_secrets(plan: SessionPlan, tokens: dict[str, str]) -> Redactor:
    """Every value that must not reach a file of the run folder: the catalog's keys and private
    addresses, the agent's key and gateway address, and the session's tokens."""
    values = dict(load_catalog(plan.catalog).secrets(os.environ))
    key_name = plan.api_key_env
    if plan.endpoint != "offline" and os.environ.get(key_name):
        values[key_name] = os.environ[key_name]
    if plan.endpoint == "gateway" and plan.base_url:
        try:
            values["agent.base_url"] = expand_env_refs(plan.base_url, "agent.base_url")
        except ValueError:
            pass  # unset: reported when the upstream is built
    return Redactor(values | tokens)
