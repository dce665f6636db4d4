"""The collected tables, declared as typed rows.

Each table's row is a `TypedDict` and each of its fields a column: its type gives the column's
pandas dtype (str: string, int: Int64, float: Float64, bool: boolean, list[str]: list<string>;
every column may hold nulls), and its `Col` says where the value comes from and what it means. A
`source` of the form ``file:dotted.path`` is read generically from that file of the run folder
(`run_rows` walks the path); ``derived:`` columns are computed there too, from several files. The
`Column` tuples (`RUNS`, `MLLM_CALLS`, ...) are derived from the rows, in field order, so the
rows the collect modules build and the tables' columns are one declaration. Some column
families only exist once the data names them (one column per agent tool, metric or audit flag
seen); they are declared as `ColumnFamily` prefixes.

`schema_markdown()` renders these declarations; docs/tables.md embeds its output, and a test keeps
the two in step, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import types
from typing import Annotated, NamedTuple, TypedDict, get_args, get_origin, get_type_hints

from veriharness.runfolder.outcome import Status

__all__ = [
    "Col",
    "Column",
    "ColumnFamily",
    "RunKeys",
    "RunFields",
    "RunRow",
    "ToolUseFields",
    "AgentToolCallRow",
    "CallFields",
    "MllmCallRow",
    "RequestFields",
    "AgentRequestRow",
    "CapabilityTagRow",
    "InteractionFields",
    "InteractionRow",
    "InferredFields",
    "InferredTagRow",
    "TagAgreementRow",
    "CapabilityCombinationRow",
    "columns_of",
    "RUN_KEYS",
    "RUNS",
    "RUNS_FAMILIES",
    "AGENT_TOOL_CALLS",
    "MLLM_CALLS",
    "AGENT_REQUESTS",
    "AGENT_REQUEST_SUMS",
    "CAPABILITY_TAGS",
    "INTERACTIONS",
    "CAPABILITY_COMBINATIONS",
    "INFERRED_TAGS",
    "TAG_AGREEMENT",
    "SnapshotFields",
    "TrajectoryRow",
    "CallEffectFields",
    "CallEffectRow",
    "CallEffectCombinationRow",
    "TRAJECTORY",
    "CALL_EFFECTS",
    "CALL_EFFECTS_BY_COMBINATION",
    "TRAJECTORY_FAMILIES",
    "CALL_EFFECT_FAMILIES",
    "COMBINATION_FAMILIES",
    "FAMILIES",
    "TABLES",
    "RUN_STATUSES",
    "schema_markdown",
]


class Col(NamedTuple):
    """A row field's column: where its value comes from, and a one-line meaning."""

    source: str
    doc: str


class Column(NamedTuple):
    name: str
    dtype: str
    source: str
    doc: str


class ColumnFamily(NamedTuple):
    prefix: str
    dtype: str
    source: str
    doc: str


# A run's status in the tables: the session's own (outcome.json), or what a later stage found.
RUN_STATUSES = (
    *get_args(Status),
    "missing_answer",
    "render_failed",
    "score_failed",
    "collect_failed",
    "missing",
)


class RunKeys(TypedDict):
    """The keys of a run, first in every per-run table."""

    experiment: Annotated[str, Col("derived:experiment", "experiment id (the results folder name)")]
    condition: Annotated[str, Col("derived:condition", "condition id (from the run folder path)")]
    task: Annotated[str, Col("derived:task", "task id (from the run folder path)")]
    replicate: Annotated[int, Col("derived:replicate", "replicate number k of r<k>")]


class RunFields(TypedDict, total=False):
    """The `runs` columns after the run keys: one run folder read by `run_rows`."""

    identity_hash: Annotated[
        str | None, Col("run.json:identity_hash", "hash of the run's identity")
    ]
    offline: Annotated[
        bool | None, Col("run.json:offline", "ran against the embedded offline model")
    ]
    status: Annotated[str, Col("derived:status", "one of " + ", ".join(RUN_STATUSES))]
    reason: Annotated[str, Col("derived:reason", "why the status is not ok (empty when ok)")]
    read_errors: Annotated[
        str,
        Col(
            "derived:read_errors",
            "files of the run that were missing or unreadable, '; '-separated (empty when none)",
        ),
    ]
    in_matrix: Annotated[bool | None, Col("derived:in_matrix", "the run is in the expected matrix")]
    answer_source: Annotated[
        str,
        Col(
            "derived:answer_source",
            "session (a claude -p run) or external (an imported answer set, condition "
            "external:<name>)",
        ),
    ]
    external_answer_sha256: Annotated[
        str | None,
        Col(
            "outcome.json:answer_sha256",
            "external answers: digest of the imported files' sha256 (outcome.json files)",
        ),
    ]
    outcome_status: Annotated[str | None, Col("outcome.json:status", "status written by run-agent")]
    exit_code: Annotated[int | None, Col("outcome.json:exit_code", "claude exit code")]
    result_subtype: Annotated[
        str | None, Col("outcome.json:result_subtype", "stream-json result subtype")
    ]
    turns: Annotated[int | None, Col("outcome.json:num_turns", "agent turns reported by claude")]
    cost_usd: Annotated[
        float | None,
        Col(
            "derived:cost_usd",
            "the run's cost at the experiment's prices: agent plus CallMLLM (null when a model is "
            "unpriced, or when part of it is an estimate: see cost_estimated, P-36)",
        ),
    ]
    agent_cost_usd: Annotated[
        float | None,
        Col("derived:cost_usd", "the agent's part of cost_usd (null when cost_usd is)"),
    ]
    mllm_cost_usd: Annotated[
        float | None, Col("derived:cost_usd", "CallMLLM's part of cost_usd (null when cost_usd is)")
    ]
    cost_estimated: Annotated[
        bool | None,
        Col(
            "outcome.json:spend.cost_estimated",
            "some request's reply reported no usage: the run's cost is unknown, and the caps "
            "counted a conservative estimate for it (P-36)",
        ),
    ]
    charged_usd: Annotated[
        float | None,
        Col(
            "outcome.json:spend.total_usd",
            "what the spending caps counted for the run: cost_usd, or with cost_estimated the "
            "priced part plus the estimates (an overestimate, not a cost)",
        ),
    ]
    estimated_usd: Annotated[
        float | None,
        Col("outcome.json:spend.estimated_usd", "the part of charged_usd that is an estimate"),
    ]
    claude_cost_usd: Annotated[
        float | None,
        Col(
            "outcome.json:total_cost_usd",
            "the cost Claude Code itself reported (its own price list), kept beside ours",
        ),
    ]
    stopped_by: Annotated[
        str | None,
        Col(
            "outcome.json:reason",
            "budget when a spending cap kept the session from starting or ended it; "
            "stopped_early when the monitor's known answer kept it from starting "
            "(analysis.monitor.stop)",
        ),
    ]
    attempts: Annotated[
        int | None,
        Col(
            "derived:attempts",
            "session attempts of the run: each earlier one kept under attempts/<n>/ (an "
            "infra_error retried, a job lost mid-session, a session redone on request) plus the "
            "one reported (null: no session ran)",
        ),
    ]
    attempt_causes: Annotated[
        str | None,
        Col(
            "derived:attempts",
            "why each earlier attempt was redone, as 'attempts/<n>: <status or lost>: <cause>', "
            "'; '-separated, from its attempt.json and outcome.json (empty when none)",
        ),
    ]
    uncommitted: Annotated[
        bool | None,
        Col(
            "run.json:provenance.uncommitted_changes",
            "the run's inputs differed from the last commit (allow_uncommitted)",
        ),
    ]
    harness_dirty: Annotated[
        bool | None,
        Col(
            "run.json:provenance.harness.git_dirty",
            "the VeriHarness code had uncommitted changes when the run was prepared",
        ),
    ]
    superseded: Annotated[
        bool,
        Col(
            "derived:superseded",
            "a run moved to superseded/ when it was redone (only with collect --include-"
            "superseded)",
        ),
    ]
    input_tokens: Annotated[
        int | None, Col("outcome.json:usage.input_tokens", "agent input tokens")
    ]
    output_tokens: Annotated[
        int | None, Col("outcome.json:usage.output_tokens", "agent output tokens")
    ]
    cache_read_tokens: Annotated[
        int | None,
        Col(
            "outcome.json:usage.cache_read_input_tokens", "agent tokens read from the prompt cache"
        ),
    ]
    cache_write_tokens: Annotated[
        int | None,
        Col(
            "outcome.json:usage.cache_creation_input_tokens",
            "agent tokens written to the prompt cache",
        ),
    ]
    duration_ms: Annotated[
        int | None, Col("outcome.json:duration_ms", "session duration from claude")
    ]
    wall_seconds: Annotated[
        float | None, Col("outcome.json:wall_seconds", "wall time measured by run-agent")
    ]
    started_at: Annotated[
        str | None,
        Col(
            "outcome.json:started_at",
            "when the reported attempt of the session started (UTC, ISO 8601, to the second); "
            "for an external answer, when it was imported",
        ),
    ]
    finished_at: Annotated[
        str | None,
        Col("outcome.json:finished_at", "when that attempt ended (UTC, ISO 8601, to the second)"),
    ]
    admission_wait_seconds: Annotated[
        float | None,
        Col(
            "outcome.json:admission_wait_seconds",
            "seconds the session waited to start while the agent's provider was saturated "
            "(not in wall_seconds' session time; null: not paced)",
        ),
    ]
    paced_seconds: Annotated[
        float | None,
        Col(
            "outcome.json:paced_seconds",
            "seconds the proxy held the session's requests to the provider's pace (they "
            "extended its wall-clock limit; not the model's time)",
        ),
    ]
    slot_wait_seconds: Annotated[
        float | None,
        Col(
            "outcome.json:session_slot.waited_seconds",
            "seconds run-agent waited for a free slot of agent_sessions before the session "
            "(before started_at; null: run without the cap, outside Snakemake; P-67)",
        ),
    ]
    mllm_connected: Annotated[
        bool | None, Col("outcome.json:mllm_connected", "mllm server connected")
    ]
    sandboxed: Annotated[
        bool | None,
        Col(
            "outcome.json:sandboxed",
            "the session ran in the bubblewrap sandbox (null: recorded before this was)",
        ),
    ]
    network: Annotated[
        str | None,
        Col(
            "outcome.json:session_network",
            "agent.network of the session: none (only its model and tool) or open (the "
            "machine's network); null: recorded before the setting",
        ),
    ]
    limit: Annotated[
        str | None,
        Col(
            "outcome.json:limit",
            "the limit a resource_limit session passed (memory, processes, disk)",
        ),
    ]
    memory_limit_by: Annotated[
        str | None,
        Col(
            "outcome.json:enforced_limits.memory.by",
            "what enforced the memory limit (cgroup-v1, cgroup-v2, slurm-job) or unavailable",
        ),
    ]
    memory_limit_mib: Annotated[
        int | None, Col("outcome.json:enforced_limits.memory.value", "memory limit in MiB")
    ]
    processes_limit_by: Annotated[
        str | None,
        Col("outcome.json:enforced_limits.processes.by", "what enforced the process limit"),
    ]
    processes_limit: Annotated[
        int | None,
        Col("outcome.json:enforced_limits.processes.value", "processes and threads at once"),
    ]
    disk_limit_by: Annotated[
        str | None,
        Col("outcome.json:enforced_limits.disk.by", "what enforced the disk limit (tmpfs)"),
    ]
    disk_limit_mib: Annotated[
        int | None,
        Col("outcome.json:enforced_limits.disk.value", "workspace and home size limit in MiB"),
    ]
    server_tools_refused: Annotated[
        list[str] | None,
        Col(
            "outcome.json:server_tools_refused",
            "the server tools (types) the model proxy refused the session's requests for, "
            "sorted; empty: none; null: recorded before the refusal (P-66)",
        ),
    ]
    answer_present: Annotated[
        bool | None, Col("outcome.json:answer_present", "answer.html was produced")
    ]
    claude_version: Annotated[str | None, Col("outcome.json:claude_version", "claude CLI version")]
    harness_version: Annotated[
        str | None,
        Col(
            "run.json:provenance.harness.version",
            "the VeriHarness package version that prepared the run",
        ),
    ]
    harness_commit: Annotated[
        str | None,
        Col(
            "run.json:provenance.harness.git_commit",
            "the git commit of the VeriHarness checkout that prepared the run (null: not a "
            "checkout)",
        ),
    ]
    session_id: Annotated[str | None, Col("outcome.json:session_id", "claude session id")]
    agent_tool_calls: Annotated[int, Col("derived:agent_tool_calls", "tool uses in the transcript")]
    mllm_calls: Annotated[
        int,
        Col(
            "derived:mllm_calls",
            "CallMLLM calls in mllm_trace.jsonl (started, plus rejected before start)",
        ),
    ]
    mllm_calls_failed: Annotated[int, Col("derived:mllm_calls_failed", "calls that failed")]
    mllm_calls_rejected: Annotated[int, Col("derived:mllm_calls_rejected", "calls rejected")]
    agent_requests: Annotated[
        int,
        Col(
            "derived:agent_requests",
            "requests the model proxy received (null: the run has no agent_requests.jsonl)",
        ),
    ]
    agent_request_errors: Annotated[
        int,
        Col(
            "derived:agent_requests",
            "of those, requests with an error (refused, HTTP error, connection failed, stream cut)",
        ),
    ]
    agent_request_seconds: Annotated[
        float, Col("derived:agent_requests", "sum of the requests' total_ms, in seconds")
    ]
    agent_requests_unpriced: Annotated[
        int,
        Col(
            "derived:agent_requests",
            "of those, answered requests whose reply reported no usage (their tokens are not "
            "in the proxy_*_tokens sums; P-36)",
        ),
    ]
    proxy_input_tokens: Annotated[
        int, Col("derived:agent_requests", "sum of requests' input_tokens")
    ]
    proxy_output_tokens: Annotated[
        int, Col("derived:agent_requests", "sum of requests' output_tokens")
    ]
    proxy_cache_read_tokens: Annotated[
        int, Col("derived:agent_requests", "sum of requests' cache_read_tokens")
    ]
    proxy_cache_write_tokens: Annotated[
        int, Col("derived:agent_requests", "sum of requests' cache_write_tokens")
    ]
    agent_request_bytes: Annotated[
        int, Col("derived:agent_requests", "sum of requests' request_bytes")
    ]
    agent_response_bytes: Annotated[
        int, Col("derived:agent_requests", "sum of requests' response_bytes")
    ]
    agent_response_models: Annotated[
        list[str],
        Col(
            "derived:agent_requests",
            "the distinct models the provider answered the run's requests with (their "
            "response_model), sorted",
        ),
    ]
    agent_response_model_count: Annotated[
        int,
        Col(
            "derived:agent_requests",
            "how many: above 1, the provider answered one run with more than one snapshot",
        ),
    ]
    mllm_response_models: Annotated[
        list[str] | None,
        Col(
            "derived:mllm_calls",
            "each CallMLLM profile's answered model, as '<profile>: <model>' (the trace's "
            "provider_model of the run's completed calls), sorted; empty when no call was "
            "answered, null without a trace",
        ),
    ]
    render_status: Annotated[
        str | None, Col("render/render.json:status", "status written by render")
    ]
    render_failed_step: Annotated[
        str | None,
        Col(
            "render/render.json:failed_step",
            "the render step that failed (load, capture, dom, full_capture, memory: the page's "
            "doing; browser, internal: the renderer's)",
        ),
    ]
    metrics_status: Annotated[str | None, Col("metrics.json:status", "status written by score")]
    scorer_version: Annotated[
        str | None, Col("metrics.json:scorer_version", "scorer that wrote metrics.json")
    ]
    block_detection: Annotated[
        str | None,
        Col(
            "metrics.json:details.blocks.detection",
            "how the text blocks of block_match, text_similarity, position and color were found: "
            "dom or design2code (config scoring.block_detection)",
        ),
    ]
    interactions_stated: Annotated[
        int | None,
        Col(
            "metrics.json:interactions_stated",
            "interactions the task states (0: static; the interaction metrics apply above 0)",
        ),
    ]
    viewports_stated: Annotated[
        int | None,
        Col(
            "metrics.json:viewports_stated",
            "extra viewports the task states (the viewport metrics apply above 0)",
        ),
    ]
    answer_snapshots: Annotated[
        int | None,
        Col("derived:answer_snapshots", "versions of the answer the session left (trajectory)"),
    ]
    answer_revisions: Annotated[
        int | None,
        Col("derived:answer_revisions", "changes of the answer after its first version"),
    ]
    snapshots_skipped: Annotated[
        int | None,
        Col("derived:snapshots_skipped", "captures not kept (a limit; snapshots/index.jsonl)"),
    ]
    calls_followed_by_change: Annotated[
        float | None,
        Col(
            "derived:calls_followed_by_change",
            "share of the CallMLLM calls made while an answer existed after which it changed",
        ),
    ]
    run_record: Annotated[str, Col("derived:run_record", "path of run.json, relative to results/")]


class RunRow(RunKeys, RunFields):
    """`runs`: one row per run (its column families are kept apart, `RunExtract.families`)."""


class ToolUseFields(TypedDict, total=False):
    """One tool use of transcript.jsonl, as `calls.transcript_tool_uses` reads it."""

    seq: Annotated[int, Col("derived:seq", "0-based order of the tool use within the run")]
    turn: Annotated[int, Col("derived:turn", "0-based index of the assistant message holding it")]
    tool_use_id: Annotated[str | None, Col("transcript:tool_use.id", "id of the tool use")]
    tool: Annotated[str, Col("transcript:tool_use.name", "tool name, e.g. Write, mcp__mllm__call")]
    input_summary: Annotated[
        str,
        Col(
            "derived:input_summary",
            "the input as JSON; long strings cut with '…[N chars]' giving the original length",
        ),
    ]
    is_error: Annotated[
        bool | None, Col("transcript:tool_result.is_error", "its result was an error")
    ]
    has_result: Annotated[bool, Col("derived:has_result", "a tool_result answered it")]
    timestamp: Annotated[
        str | None, Col("transcript:timestamp", "event timestamp when the event has one")
    ]


class AgentToolCallRow(RunKeys, ToolUseFields):
    """`agent_tool_calls`: one row per tool use of a transcript."""


class CallFields(TypedDict, total=False):
    """One call of mllm_trace.jsonl, as `calls.linked_call_rows` reads it."""

    call_id: Annotated[str, Col("mllm_trace:call_id", "id of the call")]
    seq: Annotated[int, Col("derived:seq", "0-based order of the call within the run")]
    tool_use_id: Annotated[
        str | None,
        Col(
            "derived:tool_use_id",
            "the transcript's mcp__mllm__call tool use this call answers (join to "
            "agent_tool_calls)",
        ),
    ]
    tool_use_link: Annotated[
        str,
        Col(
            "derived:tool_use_link",
            "how tool_use_id was found: tool_use_id (recorded in the trace), tool_use_id_unknown "
            "(recorded, but absent from the transcript), order, order_instruction_differs, or "
            "unmatched; null when the transcript is unreadable",
        ),
    ]
    outcome: Annotated[
        str,
        Col(
            "derived:outcome",
            "completed, failed, rejected, or unfinished (started without an end event)",
        ),
    ]
    started_at: Annotated[str | None, Col("mllm_trace:mllm_call_started.time", "start time")]
    tags: Annotated[
        list[str] | None, Col("mllm_trace:declared_capability_tags", "tags as declared")
    ]
    combination: Annotated[
        str | None, Col("derived:combination", "sorted unique tags joined by '+'")
    ]
    n_tags: Annotated[int, Col("derived:n_tags", "number of distinct tags")]
    taxonomy_version: Annotated[str | None, Col("mllm_trace:taxonomy.version", "taxonomy version")]
    instruction_chars: Annotated[int, Col("derived:instruction_chars", "length of the instruction")]
    image_count: Annotated[int, Col("derived:image_count", "image inputs")]
    region_count: Annotated[int, Col("derived:region_count", "image inputs with a region")]
    text_count: Annotated[int, Col("derived:text_count", "text inputs")]
    call_images: Annotated[
        list[str] | None,
        Col(
            "derived:call_images",
            "the kept files of the bytes the call sent for its image inputs (call_images/<sha256>"
            ".<ext>, run-folder relative, in input order, each once); empty when none was kept "
            "(execution.keep_call_images false), null for a call never sent",
        ),
    ]
    output_kind: Annotated[str | None, Col("mllm_trace:output.kind", "text or json")]
    schema_present: Annotated[
        bool | None, Col("derived:schema_present", "json output with a schema")
    ]
    requested_profile: Annotated[str | None, Col("mllm_trace:requested_model_profile", "as asked")]
    resolved_profile: Annotated[str | None, Col("mllm_trace:resolved_model_profile", "as resolved")]
    provider_model: Annotated[
        str | None, Col("mllm_trace:provider_model", "model the provider named")
    ]
    stop_reason: Annotated[str | None, Col("mllm_trace:stop_reason", "why the provider stopped")]
    truncated: Annotated[
        bool | None,
        Col("mllm_trace:truncated", "the reply stopped at the profile's output token limit"),
    ]
    latency_ms: Annotated[float | None, Col("mllm_trace:latency_ms", "latency of the end event")]
    held_ms: Annotated[
        float | None,
        Col(
            "mllm_trace:held_ms",
            "how long the call was held to keep to its provider's pace (part of latency_ms)",
        ),
    ]
    cost_usd: Annotated[
        float | None,
        Col(
            "mllm_trace:cost_usd",
            "the call's cost at its profile's price (null: unpriced, see cost_unpriced_reason)",
        ),
    ]
    cost_unpriced_reason: Annotated[
        str | None,
        Col(
            "mllm_trace:cost_unpriced_reason",
            "why a priced profile's call has no cost, e.g. the provider reported no usage",
        ),
    ]
    estimated_usd: Annotated[
        float | None,
        Col("mllm_trace:estimated_usd", "what the caps counted for a call without usage (P-36)"),
    ]
    budget: Annotated[
        bool | None, Col("mllm_trace:budget", "a rejected call was refused by a spending cap")
    ]
    input_tokens: Annotated[int | None, Col("mllm_trace:usage.input_tokens", "model input tokens")]
    output_tokens: Annotated[
        int | None, Col("mllm_trace:usage.output_tokens", "model output tokens")
    ]
    parse_status: Annotated[
        str | None,
        Col(
            "mllm_trace:parse_status",
            "not_applicable (text output), ok, invalid_json, schema_invalid, or check_failed (the "
            "reply could not be checked; it is kept as received)",
        ),
    ]
    error_type: Annotated[str | None, Col("mllm_trace:error_type", "error class of a failed call")]
    error: Annotated[str | None, Col("mllm_trace:error", "error text of a failed or rejected call")]


class MllmCallRow(RunKeys, CallFields):
    """`mllm_calls`: one row per CallMLLM call, linked to its tool use."""


class RequestFields(TypedDict, total=False):
    """One line of agent_requests.jsonl, as `run_rows` reads it."""

    seq: Annotated[int, Col("derived:seq", "0-based order of the request within the run")]
    time: Annotated[str | None, Col("agent_requests:time", "when the proxy received it (UTC)")]
    method: Annotated[str | None, Col("agent_requests:method", "HTTP method")]
    path: Annotated[str | None, Col("agent_requests:path", "request path, e.g. /v1/messages")]
    model: Annotated[str | None, Col("agent_requests:model", "the model the request named")]
    response_model: Annotated[
        str | None,
        Col(
            "agent_requests:response_model",
            "the model the provider answered with, its snapshot id (message_start's "
            "message.model, or a JSON answer's model); null: the answer named none",
        ),
    ]
    http_status: Annotated[
        int | None,
        Col(
            "agent_requests:status",
            "status the agent got; null when no HTTP answer reached it (connection failed)",
        ),
    ]
    time_to_first_byte_ms: Annotated[
        float | None,
        Col(
            "agent_requests:time_to_first_byte_ms",
            "from the request read to the first response byte sent on",
        ),
    ]
    total_ms: Annotated[
        float | None, Col("agent_requests:total_ms", "from the request read to the end")
    ]
    streamed: Annotated[
        bool | None, Col("agent_requests:streamed", "the answer was an event stream")
    ]
    input_tokens: Annotated[int | None, Col("agent_requests:input_tokens", "input tokens (usage)")]
    output_tokens: Annotated[
        int | None, Col("agent_requests:output_tokens", "output tokens (usage)")
    ]
    cache_read_tokens: Annotated[
        int | None,
        Col("agent_requests:cache_read_input_tokens", "tokens read from the prompt cache"),
    ]
    cache_write_tokens: Annotated[
        int | None,
        Col("agent_requests:cache_creation_input_tokens", "tokens written to the prompt cache"),
    ]
    stop_reason: Annotated[str | None, Col("agent_requests:stop_reason", "why the model stopped")]
    request_bytes: Annotated[int | None, Col("agent_requests:request_bytes", "request body size")]
    response_bytes: Annotated[
        int | None, Col("agent_requests:response_bytes", "response body size sent")
    ]
    error: Annotated[
        str | None,
        Col(
            "agent_requests:error",
            "refused by the proxy, upstream error (type: message), connection failed, or stream "
            "cut",
        ),
    ]
    cost_unpriced_reason: Annotated[
        str | None,
        Col(
            "agent_requests:cost_unpriced_reason",
            "why an answered request has no cost, e.g. the provider reported no usage (P-36)",
        ),
    ]
    max_tokens: Annotated[
        int | None,
        Col(
            "agent_requests:max_tokens",
            "the request's max_tokens, recorded when its reply reported no usage (the caps "
            "counted it as output tokens)",
        ),
    ]
    request_id: Annotated[
        str | None,
        Col(
            "agent_requests:request_id",
            "the provider's id of its answer (its request-id header); null: no answer from "
            "the provider, or one without the header",
        ),
    ]
    server_tools_refused: Annotated[
        list[str] | None,
        Col(
            "agent_requests:server_tools_refused",
            "the server tools (types) the proxy refused the request for (P-66); null: none",
        ),
    ]
    held_ms: Annotated[
        float | None,
        Col(
            "agent_requests:held_ms",
            "how long the proxy held the request to keep to the provider's pace before sending "
            "it (part of total_ms; null: not paced)",
        ),
    ]


class AgentRequestRow(RunKeys, RequestFields):
    """`agent_requests`: one row per request the model proxy received."""


class InteractionFields(TypedDict, total=False):
    """One interaction of an interactive task's run, as score judged it (P-41)."""

    interaction: Annotated[str, Col("metrics.json:interactions.id", "the interaction's id")]
    implemented: Annotated[
        bool,
        Col(
            "metrics.json:interactions.implemented",
            "one element carries data-interaction=<id> and acting on it changed the page",
        ),
    ]
    trigger_matches: Annotated[
        int | None,
        Col(
            "metrics.json:interactions.trigger_matches",
            "elements carrying the trigger's attribute (null: the page did not get that far)",
        ),
    ]
    state_ssim: Annotated[
        float | None,
        Col("metrics.json:interactions.state_ssim", "SSIM of the after-state vs the reference's"),
    ]
    state_text: Annotated[
        float | None,
        Col(
            "metrics.json:interactions.state_text",
            "character BLEU of the after-states' OCR text (Interaction2Code's text score)",
        ),
    ]
    region_ssim: Annotated[
        float | None,
        Col(
            "metrics.json:interactions.region_ssim",
            "SSIM of the changed regions (null: not implemented)",
        ),
    ]
    region_text: Annotated[
        float | None,
        Col("metrics.json:interactions.region_text", "character BLEU of the changed regions"),
    ]
    trigger_position: Annotated[
        float | None,
        Col("metrics.json:interactions.trigger_position", "1 - offset of the triggers' centres"),
    ]
    region_position: Annotated[
        float | None,
        Col(
            "metrics.json:interactions.region_position",
            "1 - offset of the changed regions' centres",
        ),
    ]
    state_mae: Annotated[
        float | None, Col("metrics.json:interactions.state_mae", "pixel MAE of the after-states")
    ]
    state_block_match: Annotated[
        float | None,
        Col("metrics.json:interactions.state_block_match", "block match of the after-states"),
    ]


class InteractionRow(RunKeys, InteractionFields):
    """`interactions`: one row per interaction of a run of an interactive task."""


class CapabilityTagFields(TypedDict, total=False):
    """One tag of one call, declared or inferred."""

    call_id: Annotated[str, Col("mllm_calls:call_id", "id of the call")]
    source: Annotated[
        str,
        Col(
            "derived:source",
            "declared (by the agent, in the trace) or inferred (by the annotator, "
            "inferred_tags.json)",
        ),
    ]
    annotator: Annotated[
        str | None, Col("inferred_tags:annotator.id", "inferred: the annotator's id")
    ]
    tag: Annotated[str, Col("mllm_calls:tags", "one tag (declared, or inferred and valid)")]
    family: Annotated[str, Col("derived:family", "the tag's family letter (A-H, Z)")]
    combination: Annotated[
        str | None, Col("derived:combination", "the call's combination key (this source)")
    ]
    n_tags: Annotated[int, Col("derived:n_tags", "tags on the call (this source)")]
    outcome: Annotated[str, Col("mllm_calls:outcome", "the call's outcome")]


class CapabilityTagRow(RunKeys, CapabilityTagFields):
    """`capability_tags`: one row per tag of a call."""


class InferredFields(TypedDict, total=False):
    """One call annotation of inferred_tags.json, with the call's declared tags."""

    call_id: Annotated[str | None, Col("inferred_tags:calls.call_id", "id of the call")]
    annotator_kind: Annotated[
        str | None,
        Col("inferred_tags:annotator.kind", "rule-based (deterministic, no model) or model"),
    ]
    annotator: Annotated[str | None, Col("inferred_tags:annotator.id", "annotator id")]
    annotator_version: Annotated[str | None, Col("inferred_tags:annotator.version", "its version")]
    annotator_prompt_sha256: Annotated[
        str | None,
        Col(
            "inferred_tags:annotator.prompt_sha256",
            "sha256 of the resolved annotator prompt (model annotator)",
        ),
    ]
    annotator_profile: Annotated[
        str | None, Col("inferred_tags:annotator.profile", "catalog profile")
    ]
    status: Annotated[
        str | None,
        Col(
            "inferred_tags:calls.status",
            "ok, invalid (reply not JSON, off the schema or naming codes outside the taxonomy; "
            "kept), or failed (the model request failed)",
        ),
    ]
    codes: Annotated[list[str], Col("inferred_tags:calls.codes", "inferred codes in the taxonomy")]
    invalid_codes: Annotated[
        list[str],
        Col(
            "inferred_tags:calls.invalid_codes",
            "codes the annotator gave that are not in the taxonomy",
        ),
    ]
    declared: Annotated[list[str], Col("mllm_calls:tags", "the call's declared tags")]
    jaccard: Annotated[
        float | None,
        Col(
            "derived:jaccard",
            "|declared ∩ inferred| / |declared ∪ inferred| (status ok and tags on both sides)",
        ),
    ]
    error: Annotated[str | None, Col("inferred_tags:calls.error", "why the status is not ok")]


class InferredTagRow(RunKeys, InferredFields):
    """`inferred_tags`: one row per annotated call."""


class TagAgreementRow(TypedDict, total=False):
    """`tag_agreement`: declared vs inferred tags, per code, per family and overall."""

    level: Annotated[str, Col("derived:level", "code, family or all")]
    key: Annotated[str, Col("derived:key", "the code, the family letter, or 'all'")]
    annotator: Annotated[
        str | None, Col("inferred_tags:annotator.id", "the annotator compared with")
    ]
    n_calls: Annotated[int, Col("derived:count", "calls compared (status ok, declared tags)")]
    n_declared: Annotated[int, Col("derived:count", "calls declaring the code / family")]
    n_inferred: Annotated[int, Col("derived:count", "calls inferred with the code / family")]
    n_both: Annotated[int, Col("derived:count", "calls with it on both sides")]
    precision: Annotated[
        float, Col("derived:precision", "code: n_both / n_declared (declared as guess)")
    ]
    recall: Annotated[float, Col("derived:recall", "code: n_both / n_inferred")]
    kappa: Annotated[
        float,
        Col(
            "derived:kappa",
            "family: Cohen's kappa of 'the call uses this family', declared vs inferred",
        ),
    ]
    mean_jaccard: Annotated[float, Col("derived:jaccard", "all: mean per-call Jaccard")]


class CapabilityCombinationRow(TypedDict, total=False):
    """`capability_combinations`: how often each combination of tags is asked for."""

    condition: Annotated[str, Col("mllm_calls:condition", "condition id")]
    combination: Annotated[str, Col("mllm_calls:combination", "combination key")]
    n_tags: Annotated[int, Col("mllm_calls:n_tags", "tags in the combination")]
    calls: Annotated[int, Col("derived:count", "calls with exactly this combination")]
    runs: Annotated[int, Col("derived:count", "runs with at least one such call")]
    share_of_calls: Annotated[float, Col("derived:share", "calls / all calls of the condition")]


class SnapshotFields(TypedDict, total=False):
    """One answer snapshot of snapshots/index.jsonl, with its score from trajectory.json."""

    snapshot: Annotated[int, Col("snapshots:n", "1, 2, ...: the answer's versions in order")]
    at: Annotated[
        str,
        Col("snapshots:at", "request (taken as a model request arrived) or session_end"),
    ]
    request_seq: Annotated[
        int | None,
        Col("snapshots:request_seq", "arrival number of the model request it was taken at"),
    ]
    turn: Annotated[
        int | None, Col("snapshots:turn", "assistant messages in the conversation by then")
    ]
    tool_uses: Annotated[
        int | None, Col("snapshots:tool_uses", "tool uses in the conversation by then")
    ]
    tool_uses_since: Annotated[
        list[str] | None,
        Col("snapshots:tool_uses_since", "the tools used since the previous snapshot, in order"),
    ]
    seconds: Annotated[float, Col("snapshots:seconds", "seconds since the session's start")]
    time: Annotated[str, Col("snapshots:time", "when it was taken (UTC, ISO 8601)")]
    answer_sha256: Annotated[
        str | None, Col("snapshots:answer_sha256", "answer.html's digest (null: none there)")
    ]
    answer_digest: Annotated[
        str | None, Col("snapshots:answer_digest", "digest of every file of the answer")
    ]
    bytes: Annotated[int, Col("snapshots:bytes", "size of the answer's files")]
    final: Annotated[bool, Col("derived:final", "the last snapshot: the run's answer")]
    score_status: Annotated[
        str | None,
        Col(
            "trajectory.json:snapshots.status",
            "ok, no_render, score_failed, no_answer, tampered (a kept file lost its digest); "
            "null: not scored (scoring.trajectory off)",
        ),
    ]
    scored_as: Annotated[
        int | None,
        Col("trajectory.json:snapshots.scored_as", "an earlier snapshot with the same files"),
    ]
    reused_final: Annotated[
        bool | None,
        Col(
            "trajectory.json:snapshots.reused_final",
            "its files are the run's answer: scored by the run's own render and metrics.json",
        ),
    ]


class TrajectoryRow(RunKeys, SnapshotFields):
    """`trajectory`: one row per answer snapshot (its metric columns: `TRAJECTORY_FAMILIES`)."""


class CallEffectFields(TypedDict, total=False):
    """One CallMLLM call and what the answer did after it."""

    call_id: Annotated[str, Col("mllm_calls:call_id", "the call (mllm_calls)")]
    tool_use_id: Annotated[str | None, Col("mllm_calls:tool_use_id", "its tool use")]
    outcome: Annotated[str, Col("mllm_calls:outcome", "completed, failed or rejected")]
    combination: Annotated[
        str | None, Col("mllm_calls:combination", "its declared capability tags")
    ]
    tool_use_seq: Annotated[
        int | None,
        Col("derived:tool_use_seq", "0-based place of its tool use among the run's tool uses"),
    ]
    snapshot_at_call: Annotated[
        int | None,
        Col("derived:snapshot_at_call", "the latest snapshot before the call (null: no answer)"),
    ]
    next_snapshot: Annotated[
        int | None,
        Col("derived:next_snapshot", "the first snapshot after the call (null: none)"),
    ]
    tool_uses_between: Annotated[
        int | None,
        Col("derived:tool_uses_between", "tool uses after the call, before the next snapshot"),
    ]
    seconds_between: Annotated[
        float | None,
        Col("derived:seconds_between", "seconds from the call's start to the next snapshot"),
    ]
    changed_before_end: Annotated[
        bool | None,
        Col("derived:changed_before_end", "the answer changed after the call (null: unknown)"),
    ]
    next_tool: Annotated[
        str | None, Col("derived:next_tool", "the next tool the agent used after the call")
    ]


class CallEffectRow(RunKeys, CallEffectFields):
    """`call_effects`: one row per mllm_calls row (its metric columns: `CALL_EFFECT_FAMILIES`)."""


class CallEffectCombinationRow(TypedDict, total=False):
    """`call_effects_by_combination`: the calls of one condition with one tag combination."""

    condition: Annotated[str, Col("call_effects:condition", "condition id")]
    combination: Annotated[str, Col("call_effects:combination", "combination key")]
    calls: Annotated[int, Col("derived:count", "calls with this combination")]
    runs: Annotated[int, Col("derived:count", "runs with at least one")]
    share_followed_by_change: Annotated[
        float | None,
        Col("derived:share", "calls after which the answer changed / calls with an answer"),
    ]


_DTYPES: dict[object, str] = {
    str: "string",
    int: "Int64",
    float: "Float64",
    bool: "boolean",
    list[str]: "list<string>",
}


def _dtype(hint: object, where: str) -> str:
    """The pandas dtype of a row field's type (`X` or `X | None`)."""
    options = get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    kinds = [o for o in options if o is not type(None)]
    if len(kinds) != 1 or kinds[0] not in _DTYPES:
        raise TypeError(f"{where}: no column dtype for the type {hint!r}")
    return _DTYPES[kinds[0]]


def columns_of(row: type) -> tuple[Column, ...]:
    """The columns a row type declares, in field order (inherited fields first)."""
    columns = []
    for name, hint in get_type_hints(row, include_extras=True).items():
        where = f"{row.__name__}.{name}"
        if get_origin(hint) is not Annotated:
            raise TypeError(f"{where}: a column needs Annotated[type, Col(source, doc)]")
        base, *extras = get_args(hint)
        col = next((x for x in extras if isinstance(x, Col)), None)
        if col is None:
            raise TypeError(f"{where}: a column needs Annotated[type, Col(source, doc)]")
        columns.append(Column(name, _dtype(base, where), col.source, col.doc))
    return tuple(columns)


RUN_KEYS = columns_of(RunKeys)
RUNS = columns_of(RunRow)
AGENT_TOOL_CALLS = columns_of(AgentToolCallRow)
MLLM_CALLS = columns_of(MllmCallRow)
AGENT_REQUESTS = columns_of(AgentRequestRow)
CAPABILITY_TAGS = columns_of(CapabilityTagRow)
INTERACTIONS = columns_of(InteractionRow)
INFERRED_TAGS = columns_of(InferredTagRow)
TAG_AGREEMENT = columns_of(TagAgreementRow)
CAPABILITY_COMBINATIONS = columns_of(CapabilityCombinationRow)
TRAJECTORY = columns_of(TrajectoryRow)
CALL_EFFECTS = columns_of(CallEffectRow)
CALL_EFFECTS_BY_COMBINATION = columns_of(CallEffectCombinationRow)

RUNS_FAMILIES: tuple[ColumnFamily, ...] = (
    ColumnFamily(
        "tool_calls_", "Int64", "transcript.jsonl", "tool uses of that tool (one per tool)"
    ),
    ColumnFamily("metric_", "Float64", "metrics.json:metrics", "each fidelity metric score names"),
    ColumnFamily("audit_", "boolean", "audit.json:flags", "each artifact-rule flag audit names"),
    ColumnFamily(
        "gain_",
        "Float64",
        "derived:gain",
        "each static metric of the last snapshot minus the first's (trajectory)",
    ),
    ColumnFamily(
        "call_change_",
        "Float64",
        "derived:call_change",
        "mean change_<metric> of the run's call_effects rows (null: no call with an answer)",
    ),
)

# Each static metric of a snapshot, and its change from the previous snapshot.
TRAJECTORY_FAMILIES: tuple[ColumnFamily, ...] = (
    ColumnFamily(
        "metric_", "Float64", "trajectory.json:snapshots.metrics", "each static metric score names"
    ),
    ColumnFamily(
        "change_", "Float64", "derived:change", "that metric minus the previous snapshot's"
    ),
)
CALL_EFFECT_FAMILIES: tuple[ColumnFamily, ...] = (
    ColumnFamily("at_call_", "Float64", "derived:at_call", "each metric of the answer at the call"),
    ColumnFamily(
        "change_",
        "Float64",
        "derived:change",
        "that metric at the next snapshot minus at the call (0: the answer did not change "
        "again; null: no answer at the call)",
    ),
)
COMBINATION_FAMILIES: tuple[ColumnFamily, ...] = (
    ColumnFamily(
        "mean_change_", "Float64", "derived:mean", "mean change_<metric> of the calls with one"
    ),
)
# A table's column families, named by the data (one column per metric seen).
FAMILIES: dict[str, tuple[ColumnFamily, ...]] = {
    "trajectory": TRAJECTORY_FAMILIES,
    "call_effects": CALL_EFFECT_FAMILIES,
    "call_effects_by_combination": COMBINATION_FAMILIES,
}

# The runs columns summed from AGENT_REQUESTS: runs column -> agent_requests column.
AGENT_REQUEST_SUMS = {
    "proxy_input_tokens": "input_tokens",
    "proxy_output_tokens": "output_tokens",
    "proxy_cache_read_tokens": "cache_read_tokens",
    "proxy_cache_write_tokens": "cache_write_tokens",
    "agent_request_bytes": "request_bytes",
    "agent_response_bytes": "response_bytes",
}

TABLES: dict[str, tuple[Column, ...]] = {
    "runs": RUNS,
    "interactions": INTERACTIONS,
    "agent_tool_calls": AGENT_TOOL_CALLS,
    "mllm_calls": MLLM_CALLS,
    "agent_requests": AGENT_REQUESTS,
    "capability_tags": CAPABILITY_TAGS,
    "capability_combinations": CAPABILITY_COMBINATIONS,
    "inferred_tags": INFERRED_TAGS,
    "tag_agreement": TAG_AGREEMENT,
    "trajectory": TRAJECTORY,
    "call_effects": CALL_EFFECTS,
    "call_effects_by_combination": CALL_EFFECTS_BY_COMBINATION,
}


def schema_markdown() -> str:
    """Every table's columns as markdown (the generated part of docs/tables.md)."""
    parts: list[str] = []
    for table, columns in TABLES.items():
        parts.append(
            f"### `{table}`\n\n| column | type | source | meaning |\n| --- | --- | --- | --- |"
        )
        for col in columns:
            parts.append(f"| `{col.name}` | {col.dtype} | `{col.source}` | {col.doc} |")
        families = RUNS_FAMILIES if table == "runs" else FAMILIES.get(table, ())
        for fam in families:
            parts.append(f"| `{fam.prefix}<name>` | {fam.dtype} | `{fam.source}` | {fam.doc} |")
        parts.append("")
    return "\n".join(parts)
