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
    "Unpriced",
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


class Unpriced(BaseModel):
    """The fields of a ledger line whose request could not be priced (P-36): its reply reported
    no usage, so its cost is unknown (`cost_usd` null) and the caps count a conservative
    estimate instead (`spend/prices.py: estimate_tokens`)."""

    cost_usd: float | None = Field(
        description="the request's cost at its price; null when the reply reported no usage"
    )
    cost_unpriced_reason: str | None = Field(
        default=None, description="why `cost_usd` is null, e.g. the provider reported no usage"
    )
    estimated_tokens: TokenCounts | None = Field(
        default=None, description="the tokens the caps counted in place of the unreported usage"
    )
    estimated_usd: float | None = Field(
        default=None, description="what the caps counted for an unpriced request (in total_usd)"
    )

    @property
    def charged_usd(self) -> float:
        """What this line added to the running totals: its cost, or its estimate."""
        return self.cost_usd if self.cost_usd is not None else (self.estimated_usd or 0.0)


class RunEntry(Unpriced):
    """One line of a run's spend.jsonl."""

    model_config = ConfigDict(extra="forbid")
    time: str
    source: Source
    model: str
    request_id: str
    tokens: TokenCounts
    total_usd: float = Field(
        description="the run's total after this request, estimates of unpriced requests included"
    )


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
