"""The experiment configuration, conditions and tasks, as pydantic models.

A config file states only what differs from the defaults; the models fill in every default so the
experiment record can write every value out. The models are the one place a key, its default, its
constraints and its description (the field's docstring) are written:
the JSON schema ``load_config`` applies (``config_schema``) is generated from them, and
``experiment.config_schema`` writes it to ``workflow/schemas/config.schema.yaml``, which Snakemake
validates at workflow load.

An experiment record (``experiment.json``) is accepted as a config: its ``config`` member is the
fully resolved config it was made from.

Design choices worth knowing:

- Every model forbids unknown keys, so a misspelt key is an error naming it, not a silent default.
- Placeholder model names (``your-model``, ``TODO``, ...) are refused when the config loads.
- ``agent.base_url`` may only be a ``${ENV_NAME}`` reference or a loopback URL: records write the
  config out, and a private endpoint URL must never appear in them.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from veriharness._util.yaml_text import load_yaml
from veriharness.experiment.analysis import AnalysisSettings
from veriharness.experiment.interactions import (
    ACTIONS,
    ExtraViewport,
    Interaction,
    check_reference_states,
)
from veriharness.experiment.json_schema import plain_schema
from veriharness.experiment.kinds import EFFECTIVE_CONFIG, EXPERIMENT_RECORD
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL
from veriharness.experiment.prices import PriceSettings
from veriharness.experiment.taxonomy import DEFAULT_TAXONOMY_PATH

__all__ = [
    "ConfigError",
    "AgentSettings",
    "SessionLimits",
    "CompareSettings",
    "AnnotationSettings",
    "ScoringSettings",
    "EXTERNAL_PREFIX",
    "ExternalAnswers",
    "ExecutionSettings",
    "ExecutionRecord",
    "ExperimentConfig",
    "config_schema",
    "Viewport",
    "TaskSpec",
    "TaskSource",
    "SourceInteraction",
    "ConditionSpec",
    "is_placeholder_model",
    "load_config",
    "deep_merge",
    "task_ids",
    "config_from_mapping",
    "parse_json_overrides",
    "load_task",
    "read_task_spec",
    "resolve_task_ids",
    "load_condition",
]

_PLACEHOLDER_MODELS = {"", "your-model", "todo", "<model>", "changeme", "change-me", "tbd"}
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}(/.*)?$")
_LOOPBACK = re.compile(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/.*)?$")
# Lists of ids must name something, and each id once (the validators below say which).
_NON_EMPTY: dict[str, Any] = {"minItems": 1, "uniqueItems": True}


# Files that carry a config under "config": an experiment record (to rerun it), and the merged
# config the workflow hands its verbs (which also names the files it was merged from).
WRAPPED_CONFIG_KINDS = (EXPERIMENT_RECORD, EFFECTIVE_CONFIG)


class ConfigError(ValueError):
    """The experiment definition is not usable; the message names the field and the value."""


def is_placeholder_model(name: str) -> bool:
    """True for names that stand in for a model someone forgot to choose."""
    text = name.strip().lower()
    return text in _PLACEHOLDER_MODELS or (text.startswith("<") and text.endswith(">"))


def _repeated(values: tuple[str, ...]) -> list[str]:
    return sorted({v for v in values if values.count(v) > 1})


_Id = Annotated[str, StringConstraints(pattern=_ID)]
_SERVER_TOOL = r"^[a-z][a-z0-9_]*$"  # a server tool's type, or its type without the date


class _Strict(BaseModel):
    # A field's docstring is its description in the generated config schema.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class SessionLimits(_Strict):
    """Per-session limits on memory, processes and disk (docs/decisions.md, P-37). A session
    that passes one is stopped and ends `resource_limit`, naming the limit."""

    memory_mib: int = Field(default=2048, ge=64)
    """Memory of all the session's processes together, files in its /tmp included (a cgroup)."""
    processes: int = Field(default=512, ge=16)
    """Processes and threads of the session at once (a cgroup's pids limit); Claude Code and a
    headless Chromium need about 100."""
    disk_mib: int = Field(default=1024, ge=16)
    """Size of the workspace and of Claude Code's own folder, each (a size-limited tmpfs)."""
    allow_unavailable: bool = False
    """Where this machine offers no mechanism for a limit, sessions of the embedded offline
    model run without it and say so; a real model's session is refused unless this is true."""


class SnapshotLimits(_Strict):
    """The answer snapshots run-agent keeps of a session (docs/decisions.md, P-56): how many,
    and how large each may be. A capture past a limit is not kept, and the snapshot index says
    so with the limit's name."""

    max_count: int = Field(default=50, ge=0)
    """Snapshots taken at the agent's model requests; the one at the session's end is always
    attempted, so the last snapshot is the run's answer."""
    max_mib: float = Field(default=20.0, gt=0)
    """Size of one snapshot's files (answer.html and assets/) in MiB."""


class AgentSettings(_Strict):
    """The orchestrating claude -p agent. Every key except api_key_env is hashed."""

    endpoint: Literal["offline", "anthropic", "gateway"] = "offline"
    """Where the agent's model is served."""
    base_url: str | None = Field(default=None, pattern=_ENV_REF.pattern + "|" + _LOOPBACK.pattern)
    """For endpoint gateway only: an Anthropic-compatible base URL, written as a ${ENV_NAME}
    reference or a loopback URL (records never hold a private address)."""
    api_key_env: str = Field(default="ANTHROPIC_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable holding the API key (never the key itself)."""
    model: str = OFFLINE_AGENT_MODEL
    """Agent model name, checked with the provider at experiment start. Placeholders (your-model,
    TODO, <model>, changeme, empty) are refused."""
    max_turns: int = Field(default=40, ge=1)
    """Upper bound on agent turns per session (claude --max-turns)."""
    wall_clock_seconds: int = Field(default=900, ge=1)
    """Wall-clock limit of one agent session, in seconds."""
    allowed_tools: tuple[Annotated[str, StringConstraints(min_length=1)], ...] = (
        "Read",
        "Write",
        "Edit",
        "Bash",
        "Glob",
        "Grep",
        "mcp__mllm__call",
    )
    """The only tools the session has. Built-in tools go to claude --tools (no other built-in
    tool exists in the session); all of them to --allowedTools."""
    tool_search: bool = False
    """false lists mcp__mllm__call with its full schema in every condition
    (ENABLE_TOOL_SEARCH=false); true defers it behind ToolSearch."""
    isolation: Literal["bwrap", "none"] = "bwrap"
    """bwrap runs each session in a bubblewrap sandbox that shows it only what it needs (not the
    project's tasks, other runs or the home folder); none runs it with the calling user's full
    view. Hashed: it changes what a session can read."""
    network: Literal["none", "open"] = "none"
    """none runs each session in its own network namespace: claude reaches its model proxy and
    its mllm server through sockets VeriHarness bridges in, and nothing else (no other host, no
    other service of the machine). open shares the machine's network (the agent's Bash can reach
    any host the machine can, and so copy a page from the web). none needs isolation bwrap.
    Hashed: it changes what a session can reach."""
    allow_server_tools: tuple[Annotated[str, StringConstraints(pattern=_SERVER_TOOL)], ...] = ()
    """Server tools a session may have: tools the model provider runs itself, outside the
    sandbox and agent.network (web_search, web_fetch, code_execution, mcp_toolset, ...). The
    model proxy refuses every request naming any other (P-66), whatever agent.network says.
    Each entry is a tool type (web_search_20250305) or the type without its date (web_search:
    every version). Hashed when set: it changes what a session can reach."""
    limits: SessionLimits = Field(default_factory=lambda: SessionLimits())
    """What one session may use of the machine. Recorded in every run record and outcome, not
    hashed: a limit changes how a run may end, not what it is asked."""

    def identity(self) -> dict[str, Any]:
        """The settings that define a run: all but the key's variable name, which only says
        where the key is read from. `tool_set: exclusive` says `allowed_tools` is the whole
        tool set (claude --tools), which sets these runs apart from runs that had Claude Code's
        default tools as well. `session_boundary` says the model proxy and the `mllm` server
        ran outside the sandbox (docs/decisions.md, P-19): such a session sees less than one
        before it, so earlier runs are redone rather than mixed with these."""
        # An empty allow_server_tools (the default) is left out, so the runs made before the
        # setting keep their identities: under the default tool set Claude Code sends no
        # server tool, so the refusal changes nothing of them (P-66).
        unset = set() if self.allow_server_tools else {"allow_server_tools"}
        return self.model_dump(mode="json", exclude={"api_key_env", "limits", *unset}) | {
            "tool_set": "exclusive",
            "session_boundary": "proxy-and-mllm-outside",
        }

    @field_validator("model")
    @classmethod
    def _not_placeholder(cls, value: str) -> str:
        if is_placeholder_model(value):
            raise ValueError(f"agent.model is a placeholder ({value!r}); name a real model")
        return value

    @field_validator("base_url", mode="before")
    @classmethod
    def _no_private_url(cls, value: Any) -> Any:
        if isinstance(value, str) and not (_ENV_REF.match(value) or _LOOPBACK.match(value)):
            raise ValueError(
                f"agent.base_url {value!r} must be a ${{ENV_NAME}} reference or a loopback URL; "
                "put a private endpoint in an environment variable so records never hold it"
            )
        return value

    @model_validator(mode="after")
    def _network_needs_sandbox(self) -> AgentSettings:
        if self.network == "none" and self.isolation != "bwrap":
            raise ValueError(
                f"agent.network 'none' needs agent.isolation 'bwrap' (got {self.isolation!r}): "
                "only the sandbox has a network namespace of its own; set agent.network: open "
                "to run without it"
            )
        return self

    @model_validator(mode="after")
    def _gateway_needs_url(self) -> AgentSettings:
        if self.endpoint == "gateway" and self.base_url is None:
            raise ValueError("agent.base_url is required when agent.endpoint is 'gateway'")
        if self.endpoint != "gateway" and self.base_url is not None:
            raise ValueError(
                f"agent.base_url is only used with endpoint 'gateway', not {self.endpoint!r}"
            )
        return self


class CompareSettings(_Strict):
    """Two conditions a comparison pairs, treatment minus baseline. Analysis only; not hashed."""

    baseline: str
    """Condition id of the baseline."""
    treatment: str
    """Condition id of the treatment."""


EXTERNAL_PREFIX = "external:"


class ExternalAnswers(_Strict):
    """A set of answers no session wrote, scored as the condition external:<name>."""

    name: str = Field(pattern=_ID)
    """The set's name; its condition is external:<name>."""
    source: Literal["folder", "task_references"] = "folder"
    """folder (dir/<task>/answer.html plus assets/) or task_references (each task's own
    reference.html and assets/: every metric's ceiling)."""
    dir: str | None = None
    """For source folder, the folder holding one <task>/ subfolder per task."""

    @model_validator(mode="after")
    def _dir_with_folder_only(self) -> ExternalAnswers:
        if self.source == "folder" and not self.dir:
            raise ValueError(f"external answers {self.name!r}: source 'folder' needs dir")
        if self.source == "task_references" and self.dir is not None:
            raise ValueError(
                f"external answers {self.name!r}: source 'task_references' takes no dir "
                f"(got {self.dir!r}); it reads tasks_dir"
            )
        return self

    @property
    def condition(self) -> str:
        return EXTERNAL_PREFIX + self.name


class AnnotationSettings(_Strict):
    """Who labels CallMLLM calls with inferred capability tags (analysis only; not hashed)."""

    profile: str | None = None
    """null: the deterministic rule-based annotator (no model, no keys). A catalog profile name:
    that model, with the annotator prompt module, answering through a JSON Schema of the
    taxonomy's codes (its key must be set)."""
    prompt: str = Field(default="annotator-v0.1", pattern=_ID)
    """The annotator prompt module in prompts_dir (model annotator only)."""


class ScoringSettings(_Strict):
    """How answers are scored. Analysis only; not hashed: a change rescores, never reruns a
    session (P-43)."""

    block_detection: Literal["dom", "design2code"] = "dom"
    """Where the block metrics' text blocks come from. "dom": one block per visible text node of
    the rendered page's DOM (docs/metrics.md). "design2code": detected from recoloured
    screenshots as Design2Code's published code does, for figures comparable with papers that
    report its metrics; each page is then captured three more times."""
    trajectory: bool = True
    """Render and score every answer snapshot of a session (its static metrics), for the
    trajectory and call_effects tables. Turned on later, it scores the snapshots the sessions
    kept and reruns none of them."""


class ExecutionSettings(_Strict):
    """How runs are executed. Recorded in every record, never hashed."""

    retries: int = Field(default=0, ge=0)
    """Snakemake retries of a failed job."""
    infra_retries: int = Field(default=2, ge=0)
    """Further attempts of a session that ended in infra_error (provider unreachable or answering
    5xx/529, sandbox or MCP server not started, claude killed by a signal it did not ask for).
    Agent outcomes (failed, max_turns, timeout) are never retried. Each earlier attempt's files
    are kept under attempts/<n>/ of the run folder."""
    api_retries: int | None = Field(default=None, ge=0)
    """How often Claude Code itself retries a failed model request before the session gives up
    (CLAUDE_CODE_MAX_RETRIES); null keeps Claude Code's default (10, minutes of back-off)."""
    workspace_root: str | None = None
    """Folder for agent workspaces; null is the system temp dir. Never inside a git repository."""
    keep_workspaces: bool = False
    """Keep each agent workspace after its run."""
    snapshots: SnapshotLimits = SnapshotLimits()
    """The answer over the session, captured outside the sandbox at each model request when it
    changed (snapshots/ of the run folder)."""
    keep_call_images: bool = True
    """Keep the exact bytes each CallMLLM call sent the model for an image input (the file, or
    the PNG of its region) in the run folder's call_images/, one file per digest, so the report
    shows what the model saw after the workspace is gone. false keeps none."""
    debug: bool = False
    """Log every request the embedded offline model receives to the run's model_requests.jsonl
    (secret values redacted). No effect with real providers."""
    sample: int | None = Field(default=None, ge=1)
    """null, or run only the first N tasks of the experiment."""
    results_dir: str = Field(default="results", min_length=1)
    """Where results/<experiment>/ is written, relative to the project root."""
    max_usd: float | None = Field(default=None, ge=0)
    """Spending cap of the whole experiment in USD (agent and CallMLLM together), checked before
    every priced request against results/<experiment>/spend/ledger.jsonl; null for none. At the
    cap, requests are refused, sessions end as budget_exhausted and no new session starts. Raise
    it and run again to go on with exactly the runs left."""
    max_usd_per_run: float | None = Field(default=None, ge=0)
    """Spending cap of one run in USD, checked like max_usd; null for none."""
    pace: bool = True
    """Hold each model request (agent and CallMLLM) until its provider's pace allows it: a 429
    or 529's retry-after blocks every session of the experiment, and stated per-minute limits
    are kept to; new sessions wait while the provider is saturated. Nothing is ever re-sent.
    false sends each request as it comes (to compare)."""
    order_seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    """Seed of the order sessions start in: blocks of one task and replicate (a run of every
    condition each, adjacent), the blocks and the conditions in each shuffled from the seed
    (P-60). null: the first start chooses one, experiment.json records it (start_order) and
    later starts of the experiment reuse it. Recorded, never hashed."""


class ExecutionRecord(ExecutionSettings):
    """`execution` of every record: the execution settings, the start checks' switches, and the
    scheduler's cores and resource caps when Snakemake ran it. Recorded, never hashed."""

    allow_uncommitted: bool
    """The experiment was allowed to start with uncommitted inputs."""
    check_models: bool
    """Every model name was looked up with its provider before the start."""
    scheduler: JsonValue = None
    """Snakemake's cores and resource caps (config.effective.json); null outside Snakemake."""
    limits: SessionLimits
    """agent.limits: what each session may use; outcome.json says how each was enforced."""


class ExperimentConfig(_Strict):
    """One experiment: which tasks and conditions form the run matrix, how many replicates,
    which agent model and model catalog, and how the runs are executed."""

    experiment: str = Field(default="example", pattern=_ID)
    """Name of the experiment; results go to <results_dir>/<experiment>/. Not hashed."""
    tasks: Literal["all"] | tuple[_Id, ...] = Field(default="all", json_schema_extra=_NON_EMPTY)
    """"all" (every folder of tasks_dir holding a task.yaml, sorted by name) or a list of task
    ids."""
    conditions: tuple[_Id, ...] = Field(
        default=("b3-absent", "b3-present"), json_schema_extra=_NON_EMPTY
    )
    """Condition ids; each names conditions_dir/<id>.yaml listing its prompt modules."""
    replicates: int = Field(default=1, ge=1)
    """Runs per task and condition (r1..rN). The index is recorded, not hashed."""
    tasks_dir: str = Field(default="tasks", min_length=1)
    """Folder of task folders (task.yaml, reference.png, reference.html), relative to the project
    root: the task set the experiment uses (tasks: the nine examples; tasks/<set>: a set written
    by import-tasks). Its manifest.yaml, when present, is recorded in experiment.json and its
    checksums verified at the start."""
    conditions_dir: str = Field(default="conditions", min_length=1)
    """Folder of condition files, relative to the project root."""
    prompts_dir: str = Field(default="prompts", min_length=1)
    """Folder of prompt module sources (<module-id>.md), relative to the project root."""
    taxonomy: str = Field(default=DEFAULT_TAXONOMY_PATH.as_posix(), min_length=1)
    """Capability taxonomy file whose id, version and sha256 are hashed into every run."""
    model_catalog: str = Field(default="config/model-catalog.offline.yaml", min_length=1)
    """Model profile catalog for CallMLLM. Its public part (names, descriptions) is hashed and
    injected into B1; its private part (provider settings) is hashed only."""
    agent: AgentSettings = AgentSettings()
    """The orchestrating claude -p agent. Every key except api_key_env is hashed."""
    compare: CompareSettings | tuple[CompareSettings, ...] | None = CompareSettings(
        baseline="b3-absent", treatment="b3-present"
    )
    """What the comparison pairs (treatment minus baseline): one {baseline, treatment} pair, a
    list of such pairs (each compared on its own, with its own section in comparison.md and the
    report), or null for none. Every condition named must be listed in conditions or be an
    external answer set. Analysis only; not hashed."""
    external_answers: tuple[ExternalAnswers, ...] = (
        ExternalAnswers(name="reference", source="task_references"),
    )
    """Sets of answers no session wrote, each scored as the condition external:<name> (one run
    per task, replicate 1) through the same render, audit and score stages. Analysis only; not
    hashed."""
    analysis: AnalysisSettings = AnalysisSettings()
    """The outcomes the comparison declares before any session runs: the primary family (the
    verdict's, corrected on its own), the secondary family, the audit flags scored at the floor,
    and alpha. Analysis only; not hashed."""
    annotation: AnnotationSettings = AnnotationSettings()
    """Who labels every CallMLLM call with inferred capability tags (kept apart from the declared
    ones). Analysis only; not hashed: a change reruns annotation, never a session."""
    scoring: ScoringSettings = ScoringSettings()
    """How answers are scored: where the block metrics' text blocks come from, and whether each
    answer snapshot of a session is scored too. Analysis only; not hashed (P-43)."""
    check_models: bool = True
    """Look model names up with their provider at experiment start (false for dry runs). Not
    hashed."""
    allow_uncommitted: bool = False
    """true runs even with uncommitted changes under prompts, conditions, tasks or the config and
    catalog files, or in the VeriHarness code itself; records then say so. Not hashed."""
    supersede_paid_runs: bool = False
    """true lets a changed input redo finished runs that used a real model (paid sessions): their
    folders are first moved to <experiment>/superseded/<identity_hash>/, never deleted. false
    refuses to start, naming the runs and the input that changed. Not hashed."""
    prices: PriceSettings = PriceSettings()
    """Prices in USD per million tokens of the agent model (models, by model name) and of each
    model catalog profile (profiles, by profile name). A real-model experiment with a spending cap
    must price all its models; the offline model costs 0 unless priced here. Recorded, never
    hashed."""
    execution: ExecutionSettings = ExecutionSettings()
    """How runs are executed. Recorded in every record, never hashed."""

    @field_validator("conditions")
    @classmethod
    def _conditions_unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("conditions must list at least one condition id")
        if repeated := _repeated(value):
            raise ValueError(f"conditions lists {repeated} more than once")
        return value

    @field_validator("tasks")
    @classmethod
    def _tasks_unique(cls, value: Any) -> Any:
        if isinstance(value, tuple):
            if not value:
                raise ValueError("tasks must be 'all' or a non-empty list of task ids")
            if repeated := _repeated(value):
                raise ValueError(f"tasks lists {repeated} more than once")
        return value

    @field_validator("external_answers")
    @classmethod
    def _external_names_unique(
        cls, value: tuple[ExternalAnswers, ...]
    ) -> tuple[ExternalAnswers, ...]:
        if repeated := _repeated(tuple(s.name for s in value)):
            raise ValueError(f"external_answers names {repeated} more than once")
        return value

    def compared_conditions(self) -> list[str]:
        """What a comparison may name: the conditions and the external answer sets."""
        return [*self.conditions, *(s.condition for s in self.external_answers)]

    @model_validator(mode="after")
    def _compare_names_listed_conditions(self) -> ExperimentConfig:
        pairs = self.comparison_pairs()
        if isinstance(self.compare, tuple) and not pairs:
            raise ValueError("compare: an empty list; use null for no comparison")
        known = self.compared_conditions()
        for index, (baseline, treatment) in enumerate(pairs):
            where = f"compare[{index}]" if isinstance(self.compare, tuple) else "compare"
            for role, name in (("baseline", baseline), ("treatment", treatment)):
                if name not in known:
                    raise ValueError(
                        f"{where}.{role} {name!r} is not one of conditions "
                        f"(or external answer sets) {known}"
                    )
            if baseline == treatment:
                raise ValueError(f"{where}.baseline and {where}.treatment must differ")
        if repeated := sorted({p for p in pairs if pairs.count(p) > 1}):
            raise ValueError(f"compare lists the pair(s) {repeated} more than once")
        return self

    def comparison_pairs(self) -> tuple[tuple[str, str], ...]:
        """The (baseline, treatment) pairs to compare, in the order given; () for none."""
        if self.compare is None:
            return ()
        listed = self.compare if isinstance(self.compare, tuple) else (self.compare,)
        return tuple((c.baseline, c.treatment) for c in listed)

    def resolved(self) -> dict[str, Any]:
        """Every value, defaults included, as plain JSON-able data."""
        return self.model_dump(mode="json")


@cache
def config_schema() -> dict[str, Any]:
    """The experiment config's JSON schema (draft 2020-12), self-contained (no `$ref`): what
    `load_config` validates with and `experiment.config_schema` writes for Snakemake."""
    body = plain_schema(ExperimentConfig, ExperimentConfig().resolved())
    body["properties"] = {
        "kind": {
            "description": "Present only when an experiment record (experiment.json) is given "
            "as the config.",
            "type": "string",
            "enum": [EXPERIMENT_RECORD],
        },
        **body["properties"],
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "VeriHarness experiment configuration",
        **body,
    }


def _schema_errors(data: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(config_schema())
    messages = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        if error.context:  # anyOf (e.g. compare): the deepest problem names the real mistake
            error = max(error.context, key=lambda e: len(e.absolute_path))
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        messages.append(f"{where}: {error.message}")
    return messages


def config_from_mapping(data: dict[str, Any], source: str = "config") -> ExperimentConfig:
    """Validate a config mapping (a file's content or Snakemake's merged config)."""
    if data.get("kind") in WRAPPED_CONFIG_KINDS:
        data = data.get("config") or {}
    problems = _schema_errors(data)
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
    try:
        return ExperimentConfig(**data)
    except ValidationError as error:
        raise ConfigError(f"{source}: {_describe(error)}") from None


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        value = item.get("input")
        shown = "" if isinstance(value, dict) else f" (value {value!r})"
        parts.append(f"{where}: {item['msg']}{shown}")
    return "; ".join(parts)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Load a YAML or JSON config file (or an experiment.json), then apply deep overrides."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        # JSON through the JSON parser: YAML 1.1 reads JSON's 1e-09 as a string.
        data = (json.loads(text) if path.suffix == ".json" else load_yaml(text)) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"config file {path} is not valid JSON: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML/JSON: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(data).__name__}")
    if data.get("kind") in WRAPPED_CONFIG_KINDS:
        data = dict(data.get("config") or {})
    if overrides:
        data = deep_merge(data, overrides)
    return config_from_mapping(data, source=str(path))


def deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `extra` laid over it: mappings merge key by key, anything else replaces.
    Neither argument is changed; the result shares no mutable value with them."""
    merged = copy.deepcopy(dict(base))
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)
    return merged


def parse_json_overrides(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"--config-json is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ConfigError("--config-json must be a JSON object")
    return value


class Viewport(BaseModel):
    """A size in CSS pixels, written `{width: 1280, height: 800}`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    width: int = Field(ge=1)
    """Width in CSS pixels."""
    height: int = Field(ge=1)
    """Height in CSS pixels."""


class SourceInteraction(BaseModel):
    """Which published interaction an imported task's interaction came from (Interaction2Code:
    its key in action.json, the screenshots before and after it, the action text read)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    id: str
    """The task's interaction id it became."""
    key: str
    """Its key in action.json."""
    action: str | None
    """The action text read from action.json."""
    before: str
    """The published screenshot before the interaction."""
    before_sha256: str
    """Its sha256."""
    after: str
    """The published screenshot after it."""
    after_sha256: str
    """Its sha256."""


class TaskSource(BaseModel):
    """Where an imported task's page came from (`import-tasks`): its layout, file names and
    checksums as published (paths relative to the source folder)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    layout: str
    """The published collection's layout (`import-tasks --layout`)."""
    page: str
    """The page's file in the source folder."""
    page_sha256: str
    """Its sha256."""
    screenshot: str | None = None
    """The published screenshot, when the layout has one."""
    screenshot_sha256: str | None = None
    """Its sha256."""
    actions: str | None = None
    """The published action.json (Interaction2Code)."""
    actions_sha256: str | None = None
    """Its sha256."""
    interactions: tuple[SourceInteraction, ...] = ()
    """The published interactions the task's interactions came from."""


class TaskSpec(BaseModel):
    """``tasks/<id>/task.yaml``. ``interactions`` and ``viewports`` are the explicit requirements
    of an interactive or responsive task (`experiment.interactions`, P-41); a task without them
    is static. ``interaction`` is the field that preceded them: only its null is accepted (the
    example tasks state it), since a free-text requirement there would reach nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    id: str = Field(pattern=_ID)
    """The task's id: the name of its folder in tasks_dir, and the id the config's tasks list."""
    title: str = Field(min_length=1)
    """A short name for people; no prompt includes it."""
    kind: str = Field(min_length=1)
    """A label of the kind of interface, any non-empty text, for people: no prompt, table or
    metric reads it (it is hashed with the task's files like every field). The examples use
    landing_page, form, pricing_table, dashboard, article and settings_page; import-tasks writes
    web_page."""
    description: str = ""
    """What the page shows, for people; no prompt includes it (the agent sees reference.png)."""
    viewport: Viewport
    """The size the reference was rendered at and every answer is rendered and scored at."""
    interaction: None = None
    """Obsolete: the field that preceded interactions. Only null is accepted; leave it out."""
    interactions: tuple[Interaction, ...] = ()
    """Interaction requirements, each replayed on reference.html by render-reference and on
    every answer (P-41). A task with none is static."""
    viewports: tuple[ExtraViewport, ...] = ()
    """Further named sizes a responsive answer is rendered and scored at, besides viewport."""
    source: TaskSource | None = None
    """Where an imported task's page came from; written by import-tasks, not by hand."""

    @property
    def interactive(self) -> bool:
        """Whether the task states an interaction or an extra viewport."""
        return bool(self.interactions or self.viewports)


_TASK_FILES = ("task.yaml", "reference.png")


def _refuse_task_fields(task_id: str, where: Path, data: dict[str, Any]) -> None:
    """Refusals that must name the interaction by its id rather than by its list index."""
    if data.get("interaction") is not None:
        raise ConfigError(
            f"task {task_id!r} ({where}): 'interaction' (value {data['interaction']!r}) is not "
            "read; state each requirement under 'interactions:' with id, requirement, action "
            "and trigger"
        )
    raw = data.get("interactions") or []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and item.get("action") not in ACTIONS:
            raise ConfigError(
                f"task {task_id!r} interaction {item.get('id')!r}: unknown action "
                f"{item.get('action')!r}; one of {list(ACTIONS)}"
            )
    for field, key in (("interactions", "id"), ("viewports", "name")):
        items = data.get(field)
        listed = items if isinstance(items, list) else []
        names = [i.get(key) for i in listed if isinstance(i, dict)]
        repeated = sorted({str(n) for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(f"task {task_id!r}: {field} repeat the {key}(s) {repeated}")


def read_task_spec(folder: Path, task_id: str) -> TaskSpec:
    """A task folder's ``task.yaml`` alone, checked (what `render-reference` needs before the
    files it writes exist)."""
    path = folder / "task.yaml"
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"task {task_id!r}: {path} cannot be read: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"task {task_id!r}: {path} must hold a mapping")
    _refuse_task_fields(task_id, path, data)
    try:
        spec = TaskSpec(**data)
    except ValidationError as error:
        detail = _describe(error)
        raise ConfigError(f"task {task_id!r} ({path}): {detail}") from None
    if spec.id != task_id:
        raise ConfigError(f"task folder {folder} declares id {spec.id!r}; it must be {task_id!r}")
    return spec


def load_task(tasks_dir: Path, task_id: str) -> TaskSpec:
    """A task folder's spec. `task.yaml` and `reference.png` are required; `reference.html` is
    optional (a screenshot-only task gets no block metrics), but when it is there its rendered
    `reference_dom.json` must be too, or scoring would fail after the paid sessions. A task with
    interactions or viewports must have them replayed on its reference (`states/states.json`)."""
    folder = Path(tasks_dir) / task_id
    missing = [name for name in _TASK_FILES if not (folder / name).is_file()]
    if missing:
        raise ConfigError(f"task {task_id!r}: missing {', '.join(missing)} in {folder}")
    if (folder / "reference.html").is_file() and not (folder / "reference_dom.json").is_file():
        raise ConfigError(
            f"task {task_id!r}: {folder} has reference.html but no reference_dom.json; write it "
            f"with `veriharness render-reference {folder}`"
        )
    spec = read_task_spec(folder, task_id)
    if spec.interactive and not (folder / "reference.html").is_file():
        raise ConfigError(
            f"task {task_id!r}: interactions and viewports are replayed on reference.html, "
            f"which {folder} does not have"
        )
    problems = check_reference_states(folder, task_id, spec.interactions, spec.viewports)
    if problems:
        raise ConfigError("; ".join(problems))
    return spec


def task_ids(tasks_dir: Path, tasks: str | Sequence[str]) -> tuple[str, ...]:
    """The experiment's task ids: every task folder (sorted) for ``all``, else the listed ids in
    order, each of which must have a ``task.yaml``."""
    if not tasks_dir.is_dir():
        raise ConfigError(f"tasks_dir {str(tasks_dir)!r} is not a folder")
    if tasks == "all":
        found = tuple(sorted(p.name for p in tasks_dir.iterdir() if (p / "task.yaml").is_file()))
        if not found:
            raise ConfigError(f"tasks: 'all' found no task folder with task.yaml in {tasks_dir}")
        return found
    unknown = [t for t in tasks if not (tasks_dir / t / "task.yaml").is_file()]
    if unknown:
        raise ConfigError(f"tasks: no task.yaml for {unknown} in {tasks_dir}")
    return tuple(tasks)


def resolve_task_ids(config: ExperimentConfig, root: Path) -> tuple[str, ...]:
    return task_ids(root / config.tasks_dir, config.tasks)


class ConditionSpec(BaseModel):
    """``conditions/<id>.yaml``: the prompt modules a condition appends, nothing else."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=_ID)
    description: str = Field(min_length=1)
    modules: tuple[str, ...] = Field(min_length=1)


def load_condition(conditions_dir: Path, condition_id: str) -> ConditionSpec:
    path = Path(conditions_dir) / f"{condition_id}.yaml"
    if not path.is_file():
        raise ConfigError(f"condition {condition_id!r}: no file {path}")
    data = load_yaml(path.read_text(encoding="utf-8"))
    try:
        spec = ConditionSpec(**(data or {}))
    except (ValidationError, TypeError) as error:
        detail = _describe(error) if isinstance(error, ValidationError) else str(error)
        raise ConfigError(f"condition {condition_id!r} ({path}): {detail}") from None
    if spec.id != condition_id:
        raise ConfigError(
            f"condition file {path} declares id {spec.id!r}; it must be {condition_id!r}"
        )
    return spec
