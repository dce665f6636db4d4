"""`spend.jsonl` and `budget_stop.json`: what the run paid for and why a cap stopped it.

The spending ledger (`spend/ledger.py`) appends one `RunEntry` per priced request to the run's
`spend.jsonl`, with the run's running total, and writes `budget_stop.json` when a cap refuses a
request of the run (docs/decisions.md P-23, P-24).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from veriharness.runfolder._files import JsonFile, JsonLinesFile

__all__ = [
    "BUDGET_STOP",
    "NAME",
    "SPEND",
    "STOP_NAME",
    "BudgetStop",
    "RunEntry",
    "Source",
    "TokenCounts",
    "read_budget_stop",
    "read_spend",
]

NAME = "spend.jsonl"
STOP_NAME = "budget_stop.json"

Source = Literal["agent", "mllm", "session"]


class TokenCounts(BaseModel):
    """Tokens of one request (or a sum of requests); None counts as 0."""

    model_config = ConfigDict(frozen=True)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @classmethod
    def of(
        cls,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
    ) -> TokenCounts:
        return cls(
            input_tokens=input_tokens or 0,
            output_tokens=output_tokens or 0,
            cache_read_tokens=cache_read_tokens or 0,
            cache_write_tokens=cache_write_tokens or 0,
        )


class RunEntry(BaseModel):
    """One line of a run's spend.jsonl."""

    model_config = ConfigDict(extra="forbid")
    time: str
    source: Source
    model: str
    request_id: str
    tokens: TokenCounts
    cost_usd: float
    total_usd: float = Field(description="the run's total after this request")


class BudgetStop(BaseModel):
    """``budget_stop.json``: why a run's requests were refused."""

    cap: Literal["max_usd", "max_usd_per_run"]
    limit_usd: float
    spent_usd: float
    time: str
    message: str


SPEND = JsonLinesFile(NAME, RunEntry)
BUDGET_STOP = JsonFile(STOP_NAME, BudgetStop)


def read_spend(run_dir: Path, errors: list[str]) -> list[RunEntry] | None:
    """The run's priced requests, leniently (`_files`)."""
    return SPEND.read(run_dir, errors)


def read_budget_stop(run_dir: Path, errors: list[str]) -> BudgetStop | None:
    """Why a cap stopped the run, leniently (`_files`); absent when none did."""
    return BUDGET_STOP.read(run_dir, errors)
