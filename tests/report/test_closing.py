"""What the main Snakemake job ends on (report/closing.py); the workflow's own ending is in
tests/workflow/test_pipeline.py."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.report.closing import closing_lines, refreshed

EXP = Path("results/example")


def test_only_targets_that_refresh_the_comparison_or_report_show_them() -> None:
    assert refreshed([], EXP) == (True, True)  # the default target, all
    assert refreshed(["all"], EXP) == (True, True)
    assert refreshed(["results/example/report"], EXP) == (True, True)
    assert refreshed(["analysis"], EXP) == (True, False)
    assert refreshed(["./results/example/comparison.md"], EXP) == (True, False)
    assert refreshed(["results/example/b3-present/summary.csv"], EXP) == (False, False)
    assert refreshed(["results/other/comparison.md"], EXP) == (False, False)


def _experiment(tmp_path: Path, summary: object) -> Path:
    exp = tmp_path / "example"
    (exp / "report").mkdir(parents=True)
    (exp / "report" / "index.html").write_text("<html></html>")
    text = summary if isinstance(summary, str) else json.dumps(summary)
    (exp / "comparison.json").write_text(text)
    return exp


def test_the_verdicts_first_line_of_each_pair_and_the_paths(tmp_path: Path) -> None:
    pair = {"baseline": "b3-absent", "treatment": "b3-present"}
    one = {"pairs": [pair | {"verdict": ["`b3-present` did not detectably change x.", "More."]}]}
    exp = _experiment(tmp_path, one)
    assert closing_lines(exp, comparison=True, report=True) == [
        "Verdict: b3-present did not detectably change x.",
        f"Comparison: {exp / 'comparison.md'}",
        f"Report: {exp / 'report' / 'index.html'}",
    ]
    two = {"pairs": [pair | {"verdict": ["First."]}, {"baseline": "a", "treatment": "b"}]}
    exp = _experiment(tmp_path / "two", two)
    assert closing_lines(exp, comparison=True, report=True)[:2] == [
        "Verdict, b3-present vs b3-absent: First.",
        "Verdict, b vs a: none stated; read comparison.md",
    ]


def test_an_unreadable_comparison_is_named_and_stale_answers_are_not_shown(tmp_path: Path) -> None:
    exp = _experiment(tmp_path, "{not json")
    lines = closing_lines(exp, comparison=True, report=True)
    assert lines[0].startswith(f"Verdict: {exp / 'comparison.json'} cannot be read (")
    assert lines[0].endswith("; read comparison.md")
    assert closing_lines(exp, comparison=False, report=False) == [
        "The comparison and the report are refreshed by `snakemake --cores 4 all` (not by these "
        "targets)"
    ]
    assert closing_lines(exp, comparison=True, report=True, compares=False) == [
        f"Tables: {exp / 'tables'} (no comparison: `compare` is null)",
        f"Report: {exp / 'report' / 'index.html'}",
    ]
    analysis = closing_lines(exp, comparison=True, report=False)
    assert analysis[-1] == (
        "The report is refreshed by `snakemake --cores 4 all` (not by these targets)"
    )
