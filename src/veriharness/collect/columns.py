"""The collected tables, declared as data.

Each table is a tuple of `Column`s: its name, its pandas dtype, where the value comes from, and a
one-line meaning. A `source` of the form ``file:dotted.path`` is read generically from that file of
the run folder (`trace_reading.py` walks the path); ``derived:`` columns are computed there too,
from several files. Some column families only exist once the data names them (one column per agent
tool, metric or audit flag seen); they are declared as `ColumnFamily` prefixes.

`schema_markdown()` renders these declarations; docs/tables.md embeds its output, and a test keeps
the two in step, so the documentation cannot drift from the code.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "Column",
    "ColumnFamily",
    "RUN_KEYS",
    "RUNS",
    "RUNS_FAMILIES",
    "AGENT_TOOL_CALLS",
    "MLLM_CALLS",
    "AGENT_REQUESTS",
    "AGENT_REQUEST_SUMS",
    "CAPABILITY_TAGS",
    "CAPABILITY_COMBINATIONS",
    "INFERRED_TAGS",
    "TAG_AGREEMENT",
    "TABLES",
    "RUN_STATUSES",
    "schema_markdown",
]


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


RUN_STATUSES = (
    "ok",
    "failed",
    "timeout",
    "max_turns",
    "budget_exhausted",
    "missing_answer",
    "not_started",
    "infra_error",
    "render_failed",
    "score_failed",
    "collect_failed",
    "missing",
)

RUN_KEYS: tuple[Column, ...] = (
    Column("experiment", "string", "derived:experiment", "experiment id (the results folder name)"),
    Column("condition", "string", "derived:condition", "condition id (from the run folder path)"),
    Column("task", "string", "derived:task", "task id (from the run folder path)"),
    Column("replicate", "Int64", "derived:replicate", "replicate number k of r<k>"),
)

RUNS: tuple[Column, ...] = RUN_KEYS + (
    Column("identity_hash", "string", "run.json:identity_hash", "hash of the run's identity"),
    Column("offline", "boolean", "run.json:offline", "ran against the embedded offline model"),
    Column("status", "string", "derived:status", "one of " + ", ".join(RUN_STATUSES)),
    Column("reason", "string", "derived:reason", "why the status is not ok (empty when ok)"),
    Column(
        "read_errors",
        "string",
        "derived:read_errors",
        "files of the run that were missing or unreadable, '; '-separated (empty when none)",
    ),
    Column("in_matrix", "boolean", "derived:in_matrix", "the run is in the expected matrix"),
    Column(
        "answer_source",
        "string",
        "derived:answer_source",
        "session (a claude -p run) or external (an imported answer set, condition external:<name>)",
    ),
    Column(
        "external_answer_sha256",
        "string",
        "outcome.json:answer_sha256",
        "external answers: digest of the imported files' sha256 (outcome.json files)",
    ),
    Column("outcome_status", "string", "outcome.json:status", "status written by run-agent"),
    Column("exit_code", "Int64", "outcome.json:exit_code", "claude exit code"),
    Column("result_subtype", "string", "outcome.json:result_subtype", "stream-json result subtype"),
    Column("turns", "Int64", "outcome.json:num_turns", "agent turns reported by claude"),
    Column(
        "cost_usd",
        "Float64",
        "outcome.json:spend.total_usd",
        "the run's cost at the experiment's prices: agent plus CallMLLM (null when a model "
        "is unpriced)",
    ),
    Column(
        "agent_cost_usd", "Float64", "outcome.json:spend.agent_usd", "the agent's part of cost_usd"
    ),
    Column(
        "mllm_cost_usd", "Float64", "outcome.json:spend.mllm_usd", "CallMLLM's part of cost_usd"
    ),
    Column(
        "claude_cost_usd",
        "Float64",
        "outcome.json:total_cost_usd",
        "the cost Claude Code itself reported (its own price list), kept beside ours",
    ),
    Column(
        "stopped_by",
        "string",
        "outcome.json:reason",
        "budget when a spending cap kept the session from starting or ended it",
    ),
    Column(
        "attempts",
        "Int64",
        "derived:attempts",
        "session attempts of the run: each earlier one kept under attempts/<n>/ (an infra_error "
        "retried, a job lost mid-session) plus the one reported (null: no session ran)",
    ),
    Column(
        "attempt_causes",
        "string",
        "derived:attempts",
        "why each earlier attempt was redone, as 'attempts/<n>: <status or lost>: <cause>', "
        "'; '-separated, from its attempt.json and outcome.json (empty when none)",
    ),
    Column(
        "uncommitted",
        "boolean",
        "run.json:provenance.uncommitted_changes",
        "the run's inputs differed from the last commit (allow_uncommitted)",
    ),
    Column(
        "harness_dirty",
        "boolean",
        "run.json:provenance.harness.git_dirty",
        "the VeriHarness code had uncommitted changes when the run was prepared",
    ),
    Column(
        "superseded",
        "boolean",
        "derived:superseded",
        "a run moved to superseded/ when it was redone (only with collect --include-superseded)",
    ),
    Column("input_tokens", "Int64", "outcome.json:usage.input_tokens", "agent input tokens"),
    Column("output_tokens", "Int64", "outcome.json:usage.output_tokens", "agent output tokens"),
    Column(
        "cache_read_tokens",
        "Int64",
        "outcome.json:usage.cache_read_input_tokens",
        "agent tokens read from the prompt cache",
    ),
    Column(
        "cache_write_tokens",
        "Int64",
        "outcome.json:usage.cache_creation_input_tokens",
        "agent tokens written to the prompt cache",
    ),
    Column("duration_ms", "Int64", "outcome.json:duration_ms", "session duration from claude"),
    Column(
        "wall_seconds", "Float64", "outcome.json:wall_seconds", "wall time measured by run-agent"
    ),
    Column("mllm_connected", "boolean", "outcome.json:mllm_connected", "mllm server connected"),
    Column(
        "sandboxed",
        "boolean",
        "outcome.json:sandboxed",
        "the session ran in the bubblewrap sandbox (null: recorded before this was)",
    ),
    Column("answer_present", "boolean", "outcome.json:answer_present", "answer.html was produced"),
    Column("claude_version", "string", "outcome.json:claude_version", "claude CLI version"),
    Column("session_id", "string", "outcome.json:session_id", "claude session id"),
    Column("agent_tool_calls", "Int64", "derived:agent_tool_calls", "tool uses in the transcript"),
    Column(
        "mllm_calls",
        "Int64",
        "derived:mllm_calls",
        "CallMLLM calls in mllm_trace.jsonl (started, plus rejected before start)",
    ),
    Column("mllm_calls_failed", "Int64", "derived:mllm_calls_failed", "calls that failed"),
    Column("mllm_calls_rejected", "Int64", "derived:mllm_calls_rejected", "calls rejected"),
    Column(
        "agent_requests",
        "Int64",
        "derived:agent_requests",
        "requests the model proxy received (null: the run has no agent_requests.jsonl)",
    ),
    Column(
        "agent_request_errors",
        "Int64",
        "derived:agent_requests",
        "of those, requests with an error (refused, HTTP error, connection failed, stream cut)",
    ),
    Column(
        "agent_request_seconds",
        "Float64",
        "derived:agent_requests",
        "sum of the requests' total_ms, in seconds",
    ),
    Column(
        "proxy_input_tokens", "Int64", "derived:agent_requests", "sum of requests' input_tokens"
    ),
    Column(
        "proxy_output_tokens", "Int64", "derived:agent_requests", "sum of requests' output_tokens"
    ),
    Column(
        "proxy_cache_read_tokens",
        "Int64",
        "derived:agent_requests",
        "sum of requests' cache_read_tokens",
    ),
    Column(
        "proxy_cache_write_tokens",
        "Int64",
        "derived:agent_requests",
        "sum of requests' cache_write_tokens",
    ),
    Column(
        "agent_request_bytes", "Int64", "derived:agent_requests", "sum of requests' request_bytes"
    ),
    Column(
        "agent_response_bytes",
        "Int64",
        "derived:agent_requests",
        "sum of requests' response_bytes",
    ),
    Column("render_status", "string", "render/render.json:status", "status written by render"),
    Column("metrics_status", "string", "metrics.json:status", "status written by score"),
    Column(
        "scorer_version", "string", "metrics.json:scorer_version", "scorer that wrote metrics.json"
    ),
    Column("run_record", "string", "derived:run_record", "path of run.json, relative to results/"),
)

RUNS_FAMILIES: tuple[ColumnFamily, ...] = (
    ColumnFamily(
        "tool_calls_", "Int64", "transcript.jsonl", "tool uses of that tool (one per tool)"
    ),
    ColumnFamily("metric_", "Float64", "metrics.json:metrics", "each fidelity metric score names"),
    ColumnFamily("audit_", "boolean", "audit.json:flags", "each artifact-rule flag audit names"),
)

AGENT_TOOL_CALLS: tuple[Column, ...] = RUN_KEYS + (
    Column("seq", "Int64", "derived:seq", "0-based order of the tool use within the run"),
    Column("turn", "Int64", "derived:turn", "0-based index of the assistant message holding it"),
    Column("tool_use_id", "string", "transcript:tool_use.id", "id of the tool use"),
    Column("tool", "string", "transcript:tool_use.name", "tool name, e.g. Write, mcp__mllm__call"),
    Column(
        "input_summary",
        "string",
        "derived:input_summary",
        "the input as JSON; long strings cut with '…[N chars]' giving the original length",
    ),
    Column("is_error", "boolean", "transcript:tool_result.is_error", "its result was an error"),
    Column("has_result", "boolean", "derived:has_result", "a tool_result answered it"),
    Column("timestamp", "string", "transcript:timestamp", "event timestamp when the event has one"),
)

MLLM_CALLS: tuple[Column, ...] = RUN_KEYS + (
    Column("call_id", "string", "mllm_trace:call_id", "id of the call"),
    Column("seq", "Int64", "derived:seq", "0-based order of the call within the run"),
    Column(
        "tool_use_id",
        "string",
        "derived:tool_use_id",
        "the transcript's mcp__mllm__call tool use this call answers (join to agent_tool_calls)",
    ),
    Column(
        "tool_use_link",
        "string",
        "derived:tool_use_link",
        "how tool_use_id was found: tool_use_id (recorded in the trace), tool_use_id_unknown "
        "(recorded, but absent from the transcript), order, order_instruction_differs, or "
        "unmatched; null when the transcript is unreadable",
    ),
    Column(
        "outcome",
        "string",
        "derived:outcome",
        "completed, failed, rejected, or unfinished (started without an end event)",
    ),
    Column("started_at", "string", "mllm_trace:mllm_call_started.time", "start time"),
    Column("tags", "list<string>", "mllm_trace:declared_capability_tags", "tags as declared"),
    Column("combination", "string", "derived:combination", "sorted unique tags joined by '+'"),
    Column("n_tags", "Int64", "derived:n_tags", "number of distinct tags"),
    Column("taxonomy_version", "string", "mllm_trace:taxonomy.version", "taxonomy version"),
    Column("instruction_chars", "Int64", "derived:instruction_chars", "length of the instruction"),
    Column("image_count", "Int64", "derived:image_count", "image inputs"),
    Column("region_count", "Int64", "derived:region_count", "image inputs with a region"),
    Column("text_count", "Int64", "derived:text_count", "text inputs"),
    Column("output_kind", "string", "mllm_trace:output.kind", "text or json"),
    Column("schema_present", "boolean", "derived:schema_present", "json output with a schema"),
    Column("requested_profile", "string", "mllm_trace:requested_model_profile", "as asked"),
    Column("resolved_profile", "string", "mllm_trace:resolved_model_profile", "as resolved"),
    Column("provider_model", "string", "mllm_trace:provider_model", "model the provider named"),
    Column("stop_reason", "string", "mllm_trace:stop_reason", "why the provider stopped"),
    Column(
        "truncated",
        "boolean",
        "mllm_trace:truncated",
        "the reply stopped at the profile's output token limit",
    ),
    Column("latency_ms", "Float64", "mllm_trace:latency_ms", "latency of the end event"),
    Column("cost_usd", "Float64", "mllm_trace:cost_usd", "the call's cost at its profile's price"),
    Column(
        "budget", "boolean", "mllm_trace:budget", "a rejected call was refused by a spending cap"
    ),
    Column("input_tokens", "Int64", "mllm_trace:usage.input_tokens", "model input tokens"),
    Column("output_tokens", "Int64", "mllm_trace:usage.output_tokens", "model output tokens"),
    Column(
        "parse_status",
        "string",
        "mllm_trace:parse_status",
        "not_applicable (text output), ok, invalid_json, schema_invalid, or check_failed (the "
        "reply could not be checked; it is kept as received)",
    ),
    Column("error_type", "string", "mllm_trace:error_type", "error class of a failed call"),
    Column("error", "string", "mllm_trace:error", "error text of a failed or rejected call"),
)

AGENT_REQUESTS: tuple[Column, ...] = RUN_KEYS + (
    Column("seq", "Int64", "derived:seq", "0-based order of the request within the run"),
    Column("time", "string", "agent_requests:time", "when the proxy received it (UTC)"),
    Column("method", "string", "agent_requests:method", "HTTP method"),
    Column("path", "string", "agent_requests:path", "request path, e.g. /v1/messages"),
    Column("model", "string", "agent_requests:model", "the model the request named"),
    Column(
        "http_status",
        "Int64",
        "agent_requests:status",
        "status the agent got; null when no HTTP answer reached it (connection failed)",
    ),
    Column(
        "time_to_first_byte_ms",
        "Float64",
        "agent_requests:time_to_first_byte_ms",
        "from the request read to the first response byte sent on",
    ),
    Column("total_ms", "Float64", "agent_requests:total_ms", "from the request read to the end"),
    Column("streamed", "boolean", "agent_requests:streamed", "the answer was an event stream"),
    Column("input_tokens", "Int64", "agent_requests:input_tokens", "input tokens (usage)"),
    Column("output_tokens", "Int64", "agent_requests:output_tokens", "output tokens (usage)"),
    Column(
        "cache_read_tokens",
        "Int64",
        "agent_requests:cache_read_input_tokens",
        "tokens read from the prompt cache",
    ),
    Column(
        "cache_write_tokens",
        "Int64",
        "agent_requests:cache_creation_input_tokens",
        "tokens written to the prompt cache",
    ),
    Column("stop_reason", "string", "agent_requests:stop_reason", "why the model stopped"),
    Column("request_bytes", "Int64", "agent_requests:request_bytes", "request body size"),
    Column("response_bytes", "Int64", "agent_requests:response_bytes", "response body size sent"),
    Column(
        "error",
        "string",
        "agent_requests:error",
        "refused by the proxy, upstream error (type: message), connection failed, or stream cut",
    ),
)

# The runs columns summed from AGENT_REQUESTS: runs column -> agent_requests column.
AGENT_REQUEST_SUMS = {
    "proxy_input_tokens": "input_tokens",
    "proxy_output_tokens": "output_tokens",
    "proxy_cache_read_tokens": "cache_read_tokens",
    "proxy_cache_write_tokens": "cache_write_tokens",
    "agent_request_bytes": "request_bytes",
    "agent_response_bytes": "response_bytes",
}

CAPABILITY_TAGS: tuple[Column, ...] = RUN_KEYS + (
    Column("call_id", "string", "mllm_calls:call_id", "id of the call"),
    Column(
        "source",
        "string",
        "derived:source",
        "declared (by the agent, in the trace) or inferred (by the annotator, inferred_tags.json)",
    ),
    Column("annotator", "string", "inferred_tags:annotator.id", "inferred: the annotator's id"),
    Column("tag", "string", "mllm_calls:tags", "one tag (declared, or inferred and valid)"),
    Column("family", "string", "derived:family", "the tag's family letter (A-H, Z)"),
    Column(
        "combination", "string", "derived:combination", "the call's combination key (this source)"
    ),
    Column("n_tags", "Int64", "derived:n_tags", "tags on the call (this source)"),
    Column("outcome", "string", "mllm_calls:outcome", "the call's outcome"),
)

INFERRED_TAGS: tuple[Column, ...] = RUN_KEYS + (
    Column("call_id", "string", "inferred_tags:calls.call_id", "id of the call"),
    Column(
        "annotator_kind",
        "string",
        "inferred_tags:annotator.kind",
        "rule-based (deterministic, no model) or model",
    ),
    Column("annotator", "string", "inferred_tags:annotator.id", "annotator id"),
    Column("annotator_version", "string", "inferred_tags:annotator.version", "its version"),
    Column(
        "annotator_prompt_sha256",
        "string",
        "inferred_tags:annotator.prompt_sha256",
        "sha256 of the resolved annotator prompt (model annotator)",
    ),
    Column("annotator_profile", "string", "inferred_tags:annotator.profile", "catalog profile"),
    Column(
        "status",
        "string",
        "inferred_tags:calls.status",
        "ok, invalid (reply not JSON, off the schema or naming codes outside the taxonomy; "
        "kept), or failed (the model request failed)",
    ),
    Column("codes", "list<string>", "inferred_tags:calls.codes", "inferred codes in the taxonomy"),
    Column(
        "invalid_codes",
        "list<string>",
        "inferred_tags:calls.invalid_codes",
        "codes the annotator gave that are not in the taxonomy",
    ),
    Column("declared", "list<string>", "mllm_calls:tags", "the call's declared tags"),
    Column(
        "jaccard",
        "Float64",
        "derived:jaccard",
        "|declared ∩ inferred| / |declared ∪ inferred| (status ok and tags on both sides)",
    ),
    Column("error", "string", "inferred_tags:calls.error", "why the status is not ok"),
)

TAG_AGREEMENT: tuple[Column, ...] = (
    Column("level", "string", "derived:level", "code, family or all"),
    Column("key", "string", "derived:key", "the code, the family letter, or 'all'"),
    Column("annotator", "string", "inferred_tags:annotator.id", "the annotator compared with"),
    Column("n_calls", "Int64", "derived:count", "calls compared (status ok, declared tags)"),
    Column("n_declared", "Int64", "derived:count", "calls declaring the code / family"),
    Column("n_inferred", "Int64", "derived:count", "calls inferred with the code / family"),
    Column("n_both", "Int64", "derived:count", "calls with it on both sides"),
    Column(
        "precision", "Float64", "derived:precision", "code: n_both / n_declared (declared as guess)"
    ),
    Column("recall", "Float64", "derived:recall", "code: n_both / n_inferred"),
    Column(
        "kappa",
        "Float64",
        "derived:kappa",
        "family: Cohen's kappa of 'the call uses this family', declared vs inferred",
    ),
    Column("mean_jaccard", "Float64", "derived:jaccard", "all: mean per-call Jaccard"),
)

CAPABILITY_COMBINATIONS: tuple[Column, ...] = (
    Column("condition", "string", "mllm_calls:condition", "condition id"),
    Column("combination", "string", "mllm_calls:combination", "combination key"),
    Column("n_tags", "Int64", "mllm_calls:n_tags", "tags in the combination"),
    Column("calls", "Int64", "derived:count", "calls with exactly this combination"),
    Column("runs", "Int64", "derived:count", "runs with at least one such call"),
    Column("share_of_calls", "Float64", "derived:share", "calls / all calls of the condition"),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "runs": RUNS,
    "agent_tool_calls": AGENT_TOOL_CALLS,
    "mllm_calls": MLLM_CALLS,
    "agent_requests": AGENT_REQUESTS,
    "capability_tags": CAPABILITY_TAGS,
    "capability_combinations": CAPABILITY_COMBINATIONS,
    "inferred_tags": INFERRED_TAGS,
    "tag_agreement": TAG_AGREEMENT,
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
        if table == "runs":
            for fam in RUNS_FAMILIES:
                parts.append(f"| `{fam.prefix}<name>` | {fam.dtype} | `{fam.source}` | {fam.doc} |")
        parts.append("")
    return "\n".join(parts)
