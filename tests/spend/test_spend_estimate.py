"""The conservative estimate a request without reported usage is charged at (P-36)."""

from __future__ import annotations

from pathlib import Path

from veriharness.experiment.prices import TokenPrice
from veriharness.runfolder.spend import TokenCounts, read_spend
from veriharness.spend.ledger import SpendGate, SpendSettings, ledger_path, newest_entry
from veriharness.spend.prices import NO_USAGE, cost_usd, estimate_tokens, unpriced_reason


def test_the_estimate_is_the_output_limit_and_a_token_per_four_request_bytes() -> None:
    assert estimate_tokens(4000, 512) == TokenCounts(input_tokens=1000, output_tokens=512)
    assert estimate_tokens(4001, 512).input_tokens == 1001  # rounded up
    assert estimate_tokens(0, None) == TokenCounts()
    price = TokenPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    assert cost_usd(price, estimate_tokens(4000, 512)) == (1000 * 3.0 + 512 * 15.0) / 1e6


def test_a_missing_count_is_a_reason_never_zero_tokens() -> None:
    assert unpriced_reason(None, None) == NO_USAGE
    assert unpriced_reason(10, None) == "the provider reported no output tokens"
    assert unpriced_reason(None, 10) == "the provider reported no input tokens"
    assert unpriced_reason(0, 0) is None  # reported zeros are a price: $0


def test_an_estimated_charge_counts_in_the_totals_and_says_so(tmp_path: Path) -> None:
    run_dir = tmp_path / "c" / "t" / "r1"
    run_dir.mkdir(parents=True)
    settings = SpendSettings(
        experiment_dir=tmp_path, run_dir=run_dir, condition="c", task="t", replicate=1
    )
    gate = SpendGate(settings)
    gate.charge("mllm", "p", "a", TokenCounts.of(10, 10), 0.25)
    gate.charge("agent", "m", "b", TokenCounts.of(100, 50), 1.0, NO_USAGE)
    entry = newest_entry(ledger_path(tmp_path))
    assert entry is not None
    assert entry.cost_usd is None and entry.cost_unpriced_reason == NO_USAGE
    assert entry.estimated_usd == 1.0 and entry.estimated_tokens == TokenCounts.of(100, 50)
    assert entry.tokens == TokenCounts()  # nothing was reported
    assert entry.total_usd == 1.25 and entry.charged_usd == 1.0
    run = read_spend(run_dir, [])
    assert run is not None and [r.cost_usd for r in run] == [0.25, None]
    assert run[-1].total_usd == 1.25
