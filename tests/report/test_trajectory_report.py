"""The report shows the answer over the session: a plot of the declared primary outcome by
version and by time per condition, and on each run page a strip of the versions with the calls
between them. Built by the verbs a user runs (collect, report) on synthetic runs."""

from __future__ import annotations

from pathlib import Path

from support.cli import veriharness
from support.synthetic_runs import write_experiment


def _report(tmp_path: Path, snapshots: int) -> Path:
    exp = write_experiment(tmp_path / "results", tasks=2, images=True, snapshots=snapshots)
    assert veriharness("collect", "--experiment-dir", exp.exp_dir).returncode == 0
    out = exp.exp_dir / "report"
    made = veriharness("report", "--experiment-dir", exp.exp_dir, "--out", out,
                       "--tasks-dir", exp.tasks_dir)  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out


def test_the_fidelity_over_the_session_is_plotted_and_each_page_has_its_versions(
    tmp_path: Path,
) -> None:
    out = _report(tmp_path, snapshots=3)
    index = (out / "index.html").read_text()
    assert "fidelity_over_session.png" in index and (out / "fidelity_over_session.png").is_file()
    assert "ssim over the session" in (out / "fidelity_over_session.rst").read_text()
    page = (out / "runs" / "treat" / "task-000" / "r1" / "index.html").read_text()
    strip = page[page.index("The answer over the session") : page.index("<h2>Steps")]
    assert strip.count("<figure>") == 3
    assert "version 3 (final)" in strip and "CallMLLM" in strip


def test_a_study_without_versions_has_no_such_plot_or_strip(tmp_path: Path) -> None:
    out = _report(tmp_path, snapshots=0)
    assert "fidelity_over_session" not in (out / "index.html").read_text()
    page = (out / "runs" / "treat" / "task-000" / "r1" / "index.html").read_text()
    assert "The answer over the session" not in page
