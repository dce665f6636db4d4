"""spend.jsonl and budget_stop.json through their run-folder module, as the ledger writes them."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.runfolder.spend import (
    BUDGET_STOP,
    SPEND,
    BudgetStop,
    RunEntry,
    TokenCounts,
    read_budget_stop,
    read_spend,
)
from veriharness.spend.ledger import read_stop


def _entries() -> list[RunEntry]:
    tokens = TokenCounts.of(input_tokens=100, output_tokens=5)
    return [
        RunEntry(time="t0", source="agent", model="m", request_id="r1", tokens=tokens,
                 cost_usd=0.25, total_usd=0.25),
        RunEntry(time="t1", source="mllm", model="p", request_id="c1", tokens=tokens,
                 cost_usd=0.5, total_usd=0.75),
    ]  # fmt: skip


def _stop() -> BudgetStop:
    return BudgetStop(cap="max_usd_per_run", limit_usd=0.5, spent_usd=0.75, time="t2", message="x")


def test_what_the_ledger_wrote_reads_back_equal(tmp_path: Path) -> None:
    for entry in _entries():
        SPEND.append(tmp_path, entry)
    BUDGET_STOP.write(tmp_path, _stop())
    errors: list[str] = []
    assert read_spend(tmp_path, errors) == _entries()
    assert read_budget_stop(tmp_path, errors) == _stop() == read_stop(tmp_path)
    assert errors == []


def test_a_field_of_the_wrong_type_is_dropped_and_named(tmp_path: Path) -> None:
    lines = [e.model_dump(mode="json") for e in _entries()]
    lines[1]["tokens"]["output_tokens"] = "five"
    (tmp_path / "spend.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    stop = _stop().model_dump(mode="json") | {"cap": "max_usd_forever"}
    (tmp_path / "budget_stop.json").write_text(json.dumps(stop))
    errors: list[str] = []
    read = read_spend(tmp_path, errors)
    assert read is not None and read[1].tokens.output_tokens == 0  # its default
    assert read_budget_stop(tmp_path, errors) is None  # which cap is required
    assert errors[0].startswith("spend.jsonl object 2: tokens.output_tokens: ")
    assert errors[1].startswith("budget_stop.json: cap: ")
    assert errors[2].startswith("budget_stop.json: unusable (cap: Field required")


def test_absent_and_broken_files_are_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_spend(tmp_path, errors) is None
    (tmp_path / "budget_stop.json").write_text("{")
    assert read_budget_stop(tmp_path, errors) is None
    assert errors[0] == "spend.jsonl: absent"
    assert errors[1].startswith("budget_stop.json: invalid JSON")
