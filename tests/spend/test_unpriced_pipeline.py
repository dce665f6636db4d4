"""A gateway that drops usage cannot make the spending cap ineffective, through the whole
workflow: Snakemake, the real claude CLI and proxy, the offline model answering without
``usage`` (P-36). The first request is charged at its estimate, which crosses the cap: that
session ends `budget_exhausted`, every later one is `not_started`, and the runs table marks the
charged run's cost as estimated instead of giving it a cost."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from spend.test_spend_pipeline import run_capped
from veriharness.offline.server import FAULTS_ENV
from veriharness.spend.prices import NO_USAGE

pytestmark = pytest.mark.slow


def test_a_cap_stops_the_matrix_when_the_provider_reports_no_usage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULTS_ENV, json.dumps({"kind": "no_usage", "api": "all"}))
    # At $1000 per million tokens, one request's estimate (its max_tokens alone) is over $1.
    _, experiment, runs = run_capped(tmp_path, 1.0)
    counts = runs["status"].value_counts().to_dict()
    assert counts == {"budget_exhausted": 1, "not_started": 3}, counts
    ledger = [
        json.loads(x) for x in (experiment / "spend" / "ledger.jsonl").read_text().splitlines()
    ]
    assert len(ledger) == 1 and ledger[0]["source"] == "agent"
    assert ledger[0]["cost_usd"] is None and ledger[0]["cost_unpriced_reason"] == NO_USAGE
    assert ledger[0]["total_usd"] == ledger[0]["estimated_usd"] > 1.0
    (charged,) = runs[runs["status"] == "budget_exhausted"].itertuples()
    assert charged.cost_estimated and pd.isna(charged.cost_usd)
    assert charged.charged_usd == pytest.approx(ledger[0]["total_usd"])
    assert charged.agent_requests_unpriced == 1
