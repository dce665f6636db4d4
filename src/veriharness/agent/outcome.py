"""What a finished `claude -p` process means: an agent outcome, or an infrastructure error.

An agent outcome (`ok`, `failed`, `max_turns`, `timeout`) is a property of the condition under
study and is never retried. `infra_error` means the session could not run for reasons outside the
agent, and says which:

- the upstream model answered HTTP 5xx, 529 or 429 until Claude Code's own retries ran out (the
  result event carries `api_error_status`), or could not be reached at all ("API Error" with a
  connection problem);
- claude was ended by a signal VeriHarness did not send (exit code -N, or 128+N through the
  sandbox, and no result event);
- claude exited before its session started (no init event): the sandbox or the CLI itself did not
  start;
- the `mllm` MCP server did not connect, so CallMLLM was not there;
- the provider refused the session's credentials or model (HTTP 401, 403, 404): the experiment's
  set-up, not anything the agent sent;
- claude ended during the session without its closing result event (it crashed, or its output
  stopped): the CLI failed, whatever the agent was doing;
- the wall clock ran out while a request to the agent's model or a CallMLLM call had waited
  without any answer for at least `hung_upstream_s(limit)`: a provider hung and held the agent's
  time (P-31). One that had waited less, or an answer still arriving, leaves it `timeout`.

`failed` is left for a session that ended in error on what the agent itself did: the provider
rejected a request the agent built (HTTP 400 "prompt is too long", 413, an image it cannot take)
or the result event reports an error of the session. It is an agent outcome, counted in the
comparison (docs/metrics.md), never retried.

The classification reads only the exit code, whether the wall clock ran out, the facts of the
transcript summary, the tail of Claude Code's stderr and what was still waiting at the end (from
the model proxy's record and the CallMLLM trace).
"""

from __future__ import annotations

import signal
from typing import NamedTuple

from veriharness.agent.transcript import TranscriptSummary
from veriharness.runfolder.outcome import Status

__all__ = ["Status", "Waiting", "classify", "hung_upstream_s"]


_UPSTREAM_STATUSES = {429, 529} | set(range(500, 600))
_SETUP_REFUSALS = {401, 403, 404}  # credentials, access, model name: the experiment's set-up
_UNREACHABLE_HINTS = ("connection error", "econnrefused", "econnreset", "fetch failed", "timed out")
_HUNG_SECONDS = 60.0
_HUNG_SHARE = 0.25


class Waiting(NamedTuple):
    """The longest wait still open when the session ended: whose answer, and for how long."""

    provider: str  # e.g. "the model provider", "the CallMLLM provider"
    seconds: float


def hung_upstream_s(wall_clock_seconds: float) -> float:
    """How long a model request must have waited with no answer at the wall clock for the run
    to be an `infra_error`: a minute, or a quarter of a shorter limit."""
    return min(_HUNG_SECONDS, _HUNG_SHARE * wall_clock_seconds)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _killed_by(exit_code: int | None, summary: TranscriptSummary) -> int | None:
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    # bwrap reports a child ended by signal N as exit status 128 + N.
    if 128 < exit_code < 128 + 65 and summary.result is None:
        return exit_code - 128
    return None


def classify(
    exit_code: int | None,
    timed_out: bool,
    summary: TranscriptSummary,
    stderr_tail: str = "",
    waiting: Waiting | None = None,
    wall_clock_s: float | None = None,
) -> tuple[Status, str | None]:
    """The run's status and, unless it is `ok`, why. `waiting`: the longest request still open
    at the end without any answer (`wall_clock_s` is the limit it is weighed against)."""
    if timed_out:
        if (
            waiting is not None
            and wall_clock_s is not None
            and waiting.seconds >= hung_upstream_s(wall_clock_s)
        ):
            return "infra_error", (
                f"{waiting.provider} hung: a request had no answer after {waiting.seconds:.1f} s "
                f"when the wall-clock limit of {wall_clock_s:g} s was reached"
            )
        return "timeout", None  # the caller names the limit
    killed = _killed_by(exit_code, summary)
    if killed is not None:
        return "infra_error", f"claude was killed by {_signal_name(killed)}, not by VeriHarness"
    ended, started = summary.result, summary.init
    api_status = ended.api_error_status if ended else None
    result = (ended.result_text if ended else None) or ""
    if api_status is not None and api_status in _UPSTREAM_STATUSES:
        return "infra_error", (
            f"the model provider answered HTTP {api_status} after Claude Code's own retries: "
            f"{result[:300]}"
        )
    if api_status is not None and api_status in _SETUP_REFUSALS:
        return "infra_error", (
            f"the model provider refused the session's credentials or model (HTTP {api_status}): "
            f"{result[:300]}"
        )
    is_error = bool(ended and ended.is_error)
    if is_error and result.startswith("API Error"):
        if api_status is None and any(h in result.lower() for h in _UNREACHABLE_HINTS):
            return "infra_error", f"the model provider could not be reached: {result[:300]}"
    if started is None and ended is None and exit_code != 0:
        tail = stderr_tail.strip()[-400:]
        return "infra_error", (
            f"claude exited with code {exit_code} before its session started "
            f"(the sandbox or the CLI did not start): {tail or 'no stderr'}"
        )
    if started is not None and not started.mllm_connected:
        return "infra_error", (
            "the mllm MCP server did not connect: CallMLLM was not available to the session"
        )
    if ended is not None and ended.result_subtype == "error_max_turns":
        return "max_turns", None
    if ended is None:
        tail = stderr_tail.strip()[-400:]
        return "infra_error", (
            f"claude ended with code {exit_code} during the session without its result event "
            f"(the CLI failed): {tail or 'no stderr'}"
        )
    if exit_code != 0 or is_error:
        return "failed", (result[:300] or None) if is_error else None
    return "ok", None
