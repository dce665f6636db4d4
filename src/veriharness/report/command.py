"""`veriharness report`: plots and static per-run pages for people to look at.

Design notes:

- Reads the collected tables (run `veriharness collect` first) and the run folders; writes only
  under --out. Plots are PNG (matplotlib Agg), each with a caption `.rst` beside it for
  `snakemake --report`; `report_plots` draws them.
- Answer sets no session wrote (`external:<name>`) get a table of every metric per task; the
  reference set's row is each metric's ceiling on that task.
- The first screen names each condition's prompt modules (from experiment.json), so what the
  agent was told in each condition is read beside the verdict.
- Declared vs inferred capability tags: the tag_agreement table (per code, per family, overall)
  with the annotator named and a rule-based one marked as such.
- When comparison.csv is there, each (baseline, treatment) pair gets a section: its table
  (difference, interval, p-values) and a plot of the differences.
- The index lists per condition its runs' count and a page of them all (`runs-<n>.html`), and
  every run that is not ok, each with a link to its page; `run_page` writes one page per run folder.
  Run pages are written by worker processes (--jobs), which with pages that decode no image keeps
  a report of 10,000 runs to about the time of reading them.
"""

from __future__ import annotations

import json
import os
import re
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import pandas as pd

from veriharness.collect.caveats import caveat_lines, run_caveats, scoring_line
from veriharness.collect.compare import SAME, shown_rows
from veriharness.experiment.analysis import AnalysisSettings
from veriharness.experiment.record import RecordError
from veriharness.report.plots import (
    plot_capability_tags,
    plot_comparison,
    plot_cost_vs_fidelity,
    plot_metrics_by_condition,
    plot_trajectory,
)
from veriharness.report.run_page import CSS, PageJob, esc, run_page
from veriharness.report.start_times import start_times_plot, timing_flag
from veriharness.report.status import experiment_record, money
from veriharness.spend.ledger import ledger_path, newest_entry

__all__ = [
    "missing_tables",
    "write_report",
]

_PARALLEL_FROM = 50  # run pages; below this, starting worker processes costs more than it saves


def _write_pages(jobs: list[PageJob], workers: int) -> None:
    if workers > 1 and len(jobs) >= _PARALLEL_FROM:
        with Pool(workers) as pool:
            for _ in pool.imap_unordered(run_page, jobs, chunksize=16):
                pass
    else:
        for job in jobs:
            run_page(job)


def _scrolled(table: str) -> str:
    """A table that may be wider than the screen scrolls in its own box, never the page."""
    return f"<div style='overflow-x:auto;max-width:100%'>{table}</div>"


def _table(rows: list[list[str]], head: list[str]) -> str:
    cells = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return _scrolled(f"<table><tr>{cells}</tr>{body}</table>")


def _with_code(text: str) -> str:
    """Escaped text, its Markdown `code` spans as <code> (the verdict is worded for Markdown)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(text))


def _per_task_html(pair: dict[str, Any]) -> str:
    """Each primary outcome's per-task differences with each task's ceiling (comparison.json)."""
    rows = pair.get("per_task") or []
    parts = []
    for measure in dict.fromkeys(str(r.get("measure")) for r in rows):
        mine = [
            [
                str(r.get("task")),
                *(_number(r.get(k)) for k in ("baseline", "treatment", "diff", "ceiling")),
            ]
            for r in rows
            if r.get("measure") == measure
        ]
        parts.append(
            f"<p>Per task, {esc(measure)} (intention to treat); the ceiling is the task's own "
            "reference scored as an answer (<code>external:reference</code>), what a perfect "
            "answer reaches on that task:</p>"
            + _table(mine, ["task", "baseline", "treatment", "diff", "ceiling"])
        )
    return "".join(parts)


def _number(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return "–"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _primary(exp_dir: Path) -> str:
    """The experiment's first declared primary outcome (the analysis defaults' for a record
    without an `analysis` section, as the comparison reads it)."""
    declared = (_record(exp_dir).get("config") or {}).get("analysis")
    return AnalysisSettings.model_validate(declared or {}).primary[0]


def _record(exp_dir: Path) -> dict[str, Any]:
    try:
        return experiment_record(exp_dir)
    except RecordError:
        return {}


def _comparison_summary(exp_dir: Path) -> dict[str, Any]:
    """comparison.json as `compare` wrote it; empty without a comparison."""
    try:
        value = json.loads((exp_dir / "comparison.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _verdict_html(summary: dict[str, Any], exp_dir: Path) -> str:
    """The answer first: per compared pair, the verdict's sentences, then its primary outcome(s)
    with the intention-to-treat and per-protocol figures side by side."""
    path = exp_dir / "comparison.csv"
    if not summary or not path.is_file():
        return "<p>No comparison (compare: null, or not written yet).</p>"
    table = pd.read_csv(path)
    parts = []
    for pair in summary.get("pairs", []):
        baseline, treatment = pair.get("baseline"), pair.get("treatment")
        mine = table[(table["baseline"] == baseline) & (table["treatment"] == treatment)]
        shown, merged = shown_rows(mine[mine["family"] == "primary"])
        rows = [
            [
                str(r["measure"]),
                population,
                str(r["n_pairs"]),
                f"{_number(r['baseline_mean'])} / {_number(r['treatment_mean'])}",
                _number(r["mean_diff"]),
                f"[{_number(r['ci_low'])}, {_number(r['ci_high'])}]",
                _number(r["p_value"]),
                _number(r["p_holm"]),
                f"{r['n_floor_b']}/{r['n_floor_t']}",
            ]
            for population, r in shown
        ]
        same = (
            f"<p><code>{SAME}</code>: the intention-to-treat (itt) and per-protocol (pp) figures "
            "are identical (every counted run had a scored answer, none flagged), so they are "
            "shown once.</p>"
            if merged
            else ""
        )
        counted = pair.get("runs_counted", {})
        head = ["primary outcome", "analysis", "tasks", "baseline / treatment", "diff", "95% CI"]
        sentences = "".join(f"<li>{_with_code(line)}</li>" for line in pair.get("verdict", []))
        registered = pair.get("registered_verdict") or []
        if registered:
            primary = ", ".join(map(str, pair.get("registered_primary") or [])) or "–"
            listed = "".join(f"<li>{_with_code(line)}</li>" for line in registered)
            sentences += (
                "<li>Under the analysis registered before the first session (primary "
                f"<code>{esc(primary)}</code>):<ul>{listed}</ul></li>"
            )
        design = "; ".join(
            f"{d['family']}: {d['outcomes']} outcome(s), smallest p(Holm) "
            f"{_number(float(d['smallest_p_holm']))}"
            for d in pair.get("design", [])
        )
        parts.append(
            f"<h3>{esc(str(treatment))} vs {esc(str(baseline))}</h3><ul>{sentences}</ul>"
            + _table(rows, [*head, "p", "p (Holm)", "at floor b/t"])
            + same
            + f"<p>Runs counted: {esc(str(baseline))} {counted.get(baseline, '?')}, "
            f"{esc(str(treatment))} {counted.get(treatment, '?')} (intention to treat: every run "
            "of a condition counts, an unscored or rule-flagged answer at the measure's floor; "
            "per-protocol: runs with a scored answer only). What this design can show at best, "
            f"with {pair.get('paired', '?')} paired tasks: {esc(design)} (alpha "
            f"{pair.get('alpha', '?')}).</p>" + _per_task_html(pair)
        )
    return "".join(parts) + "<p>Every measure and family: <code>comparison.md</code>.</p>"


def _flag_rates_html(exp_dir: Path) -> str:
    path = exp_dir / "comparison.csv"
    if not path.is_file():
        return ""
    table = pd.read_csv(path)
    audit = table[table["family"] == "audit"]
    rows = [
        [
            f"{r.treatment} vs {r.baseline}",
            str(r.measure).removeprefix("audit_"),
            _number(r.baseline_mean),
            _number(r.treatment_mean),
            _number(r.mean_diff),
            _number(r.p_holm),
        ]
        for r in audit.itertuples()
    ]
    if not rows:
        return ""
    head = ["pair", "audit flag", "baseline rate", "treatment rate", "diff", "p (Holm)"]
    return "<h2>Audit flag rates</h2>" + _table(rows, head)


def _modules_text(record: dict[str, Any]) -> str:
    """Each condition's prompt modules, as the experiment record lists them."""
    conditions = record.get("conditions")
    if not isinstance(conditions, dict) or not conditions:
        return "not recorded"
    return "; ".join(
        f"{name}: {', '.join(map(str, part.get('modules', [])))}"
        for name, part in conditions.items()
        if isinstance(part, dict)
    )


def _overview_html(exp_dir: Path, runs: pd.DataFrame) -> str:
    """The first screen: warnings, the comparison, the models, the commit, the spend and the
    runs left out, before any plot."""
    record = _record(exp_dir)
    current = runs[~runs["superseded"].fillna(False).astype(bool)] if "superseded" in runs else runs
    caveats = run_caveats(current)
    warnings = "".join(
        f"<p class='caveat'><b>{esc(line)}</b></p>"
        for line in [*caveat_lines(caveats), *filter(None, [timing_flag(current)])]
    )
    config = record.get("config", {})
    agent = config.get("agent", {})
    profiles = record.get("shared", {}).get("model_catalog", {}).get("public", [])
    provenance = record.get("provenance", {})
    harness = provenance.get("harness") or {}
    execution = config.get("execution", {})
    ledger = newest_entry(ledger_path(exp_dir))

    def spend(column: str) -> object:
        return current[column].sum(min_count=1) if column in current else None

    estimated = (
        current[current["cost_estimated"].fillna(False).astype(bool)]
        if "cost_estimated" in current
        else current.iloc[0:0]
    )
    unpriced = (
        f"; {len(estimated)} run(s) not in these sums: a reply reported no usage, so their cost "
        f"is unknown (the caps counted an estimate of {money(estimated['charged_usd'].sum())})"
        if len(estimated)
        else ""
    )

    facts = [
        ["agent model", f"{agent.get('model', '?')} (endpoint {agent.get('endpoint', '?')})"],
        ["sessions could reach", _network_text(agent, current)],
        ["prompt modules", _modules_text(record)],
        ["session limits", _limits_text(current)],
        ["scoring", scoring_line(caveats)],
        ["CallMLLM profiles", ", ".join(p.get("name", "?") for p in profiles) or "–"],
        [
            "inputs commit",
            f"{provenance.get('git_commit') or '–'}"
            + (" + uncommitted changes" if provenance.get("uncommitted_changes") else ""),
        ],
        [
            "VeriHarness",
            f"{harness.get('version') or '?'} at {harness.get('git_commit') or 'no git commit'}"
            + (" + uncommitted changes" if harness.get("git_dirty") else ""),
        ],
        [
            "spend (our prices)",
            f"{money(spend('cost_usd'))}: agent {money(spend('agent_cost_usd'))}, "
            f"CallMLLM {money(spend('mllm_cost_usd'))}; ledger "
            f"{money(ledger.total_usd if ledger else None)} of max_usd "
            f"{money(execution.get('max_usd'))}{unpriced}",
        ],
    ]
    if not caveats["runs_offline"]:
        # Offline runs: Claude Code prices a stand-in model with its own list; not a spend.
        facts.append(["spend (Claude Code's own)", money(spend("claude_cost_usd"))])
    summary = _comparison_summary(exp_dir)
    left = [
        [str(x.get("condition")), str(x.get("task")), str(x.get("replicate")), str(x.get("reason"))]
        for x in summary.get("left_out", [])
    ]
    if not summary:
        left_html = "<p>No comparison, so none.</p>"
    elif left:
        left_html = _table(left, ["condition", "task", "rep", "reason"])
    else:
        left_html = "<p>None: every run of both conditions counts.</p>"
    registration = "".join(
        f"<p class='caveat'><b>{_with_code(str(line))}</b></p>"
        for line in summary.get("registration") or []
    )
    note = summary.get("registration_note")
    registered = f"<p>{_with_code(str(note))}</p>" if note else ""
    return (
        f"{registration}{warnings}<h2>Verdict</h2>{registered}{_verdict_html(summary, exp_dir)}"
        f"<h2>Runs excluded from the comparison: {len(left)} (not the agent's doing)</h2>"
        f"{left_html}{_flag_rates_html(exp_dir)}"
        f"<h2>Experiment</h2>{_table(facts, ['', ''])}"
    )


_NETWORK = {
    "none": "only their model proxy and mllm server (agent.network: none)",
    "open": "the machine's whole network, and so the web (agent.network: open)",
}


def _network_text(agent: dict[str, Any], runs: pd.DataFrame) -> str:
    """What the sessions could reach: the config's setting, and the runs' own where they differ
    (runs recorded before the setting existed say nothing)."""
    stated = str(agent.get("network", "open"))
    seen = sorted(set(runs["network"].dropna())) if "network" in runs else []
    text = _NETWORK.get(stated, stated)
    others = [value for value in seen if value != stated]
    return text + (f"; some runs had {', '.join(others)}" if others else "")


def _limits_text(runs: pd.DataFrame) -> str:
    """Each limit as the runs had it enforced: value and mechanism, every distinct one."""
    parts = []
    for label, by, value, unit in (
        ("memory", "memory_limit_by", "memory_limit_mib", " MiB"),
        ("processes", "processes_limit_by", "processes_limit", ""),
        ("disk", "disk_limit_by", "disk_limit_mib", " MiB"),
    ):
        if by not in runs:
            continue
        kinds = runs[[by, value]].dropna(subset=[by]).drop_duplicates()
        shown = [
            f"{_number(v)}{unit} ({b})" if b != "unavailable" else "unavailable"
            for b, v in kinds.itertuples(index=False)
        ]
        if shown:
            parts.append(f"{label} " + " / ".join(shown))
    hit = runs["limit"].dropna().value_counts() if "limit" in runs else pd.Series(dtype=int)
    passed = ", ".join(f"{n} run(s) past {name}" for name, n in hit.items())
    return ("; ".join(parts) or "not recorded") + (f"; {passed}" if passed else "")


_COMPARISON_COLUMNS = (
    ("family", "family"),
    ("population", "analysis"),
    ("measure", "measure"),
    ("n_pairs", "tasks"),
    ("baseline_mean", "baseline"),
    ("treatment_mean", "treatment"),
    ("mean_diff", "diff"),
    ("ci_low", "95% CI low"),
    ("ci_high", "95% CI high"),
    ("p_value", "p"),
    ("p_holm", "p (Holm)"),
)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "–" if pd.isna(value) else f"{value:.4g}"
    return esc(str(value))


def _ceiling_section(runs: pd.DataFrame) -> str:
    """Every metric of every task for answer sets no session wrote (the reference set's values
    are each metric's ceiling on that task)."""
    external = runs[runs.get("answer_source", pd.Series(dtype=str)) == "external"]
    if external.empty:
        return ""
    metrics = sorted(c for c in runs.columns if c.startswith("metric_"))
    head = "".join(f"<th>{esc(m.removeprefix('metric_'))}</th>" for m in metrics)
    rows = "".join(
        f"<tr><td>{esc(r['condition'])}</td><td>{esc(r['task'])}</td><td>{esc(r['status'])}</td>"
        + "".join(
            f"<td>{_cell(float(r[m]) if pd.notna(r[m]) else float('nan'))}</td>" for m in metrics
        )
        + "</tr>"
        for _, r in external.sort_values(["condition", "task"]).iterrows()
    )
    return (
        "<h2>External answers</h2><p>Answers no session wrote, scored by the same render, audit "
        "and metrics. <code>external:reference</code> is each task's own reference.html: its "
        "values are the ceiling of each metric on that task.</p>"
        + _scrolled(f"<table><tr><th>set</th><th>task</th><th>status</th>{head}</tr>{rows}</table>")
    )


def _agreement_section(exp_dir: Path) -> str:
    """Declared vs inferred capability tags (tables/tag_agreement.parquet, when collected)."""
    path = exp_dir / "tables" / "tag_agreement.parquet"
    inferred_path = exp_dir / "tables" / "inferred_tags.parquet"
    if not path.is_file() or not inferred_path.is_file():
        return ""
    table = pd.read_parquet(path)
    inferred = pd.read_parquet(inferred_path)
    if inferred.empty:
        return "<h2>Declared vs inferred capability tags</h2><p>no annotated call</p>"
    annotators = inferred.drop_duplicates("annotator")
    who = "; ".join(
        f"{esc(str(a.annotator))} ({esc(str(a.annotator_kind))} {esc(str(a.annotator_version))}"
        + (", rule-based: a weak baseline, no model" if a.annotator_kind == "rule-based" else "")
        + ")"
        for a in annotators.itertuples()
    )
    statuses = ", ".join(f"{k} {v}" for k, v in inferred["status"].value_counts().items())
    parts = [
        "<h2>Declared vs inferred capability tags</h2>",
        f"<p>Annotator: {who}. Annotations: {esc(statuses)}. Declared tags are read as the guess, "
        "inferred ones as the reference.</p>",
    ]
    for level, columns in (
        ("all", ("n_calls", "mean_jaccard")),
        ("family", ("n_calls", "n_declared", "n_inferred", "n_both", "kappa")),
        ("code", ("n_calls", "n_declared", "n_inferred", "n_both", "precision", "recall")),
    ):
        rows = table[table["level"] == level]
        head = "".join(f"<th>{esc(c)}</th>" for c in ("annotator", "key", *columns))
        body = "".join(
            "<tr>"
            + "".join(
                f"<td>{_cell(float(r[c]) if isinstance(r[c], float | int) else r[c])}</td>"
                for c in ("annotator", "key", *columns)
            )
            + "</tr>"
            for _, r in rows.iterrows()
        )
        parts.append(f"<h3>{esc(level)}</h3>" + _scrolled(f"<table><tr>{head}</tr>{body}</table>"))
    return "".join(parts)


def _comparison_sections(exp_dir: Path, out: Path) -> str:
    """One section per compared pair of comparison.csv (empty when there is none)."""
    path = exp_dir / "comparison.csv"
    if not path.is_file():
        return ""
    table = pd.read_csv(path)
    sections = []
    for number, ((baseline, treatment), pair) in enumerate(
        table.groupby(["baseline", "treatment"], sort=False), start=1
    ):
        itt = pair[(pair["population"] == "itt") & (pair["family"] != "audit")]
        plot = plot_comparison(itt, baseline, treatment, out / f"comparison_{number}.png")
        head = "".join(f"<th>{esc(label)}</th>" for _, label in _COMPARISON_COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{_cell(row[c])}</td>" for c, _ in _COMPARISON_COLUMNS) + "</tr>"
            for _, row in pair.iterrows()
        )
        sections.append(
            f"<h3>{esc(treatment)} vs {esc(baseline)}</h3>"
            + _scrolled(f"<table><tr>{head}</tr>{body}</table>")
            + f"<p>{esc(plot.with_suffix('.rst').read_text())}</p>"
            f"<img src='{esc(plot.name)}' style='max-width:100%'>"
        )
    return "<h2>Comparisons</h2>" + "".join(sections)


def _run_facts(row: Any, offline: bool) -> tuple[tuple[str, str], ...]:
    """The runs table's view of one run for its page: status and reason, what it cost at our
    prices (Claude Code's own price only for a real model), every metric and audit flag."""
    values = row._asdict()
    facts = [
        ("status (tables)", str(values.get("status"))),
        ("reason", str(values.get("reason") or "")),
        ("network", "not recorded" if pd.isna(network := values.get("network")) else network),
    ]
    facts.append(("spend (our prices)", money(values.get("cost_usd"))))
    if not offline:
        facts.append(("spend (Claude Code's own)", money(values.get("claude_cost_usd"))))
    for prefix in ("metric_", "audit_"):
        facts += [
            (name, _number(values[name])) for name in sorted(values) if name.startswith(prefix)
        ]
    return tuple(facts)


def write_report(exp_dir: Path, out: Path, tasks_dir: Path, jobs: int | None = None) -> Path:
    runs = pd.read_parquet(exp_dir / "tables" / "runs.parquet")
    tags = pd.read_parquet(exp_dir / "tables" / "capability_tags.parquet")
    out.mkdir(parents=True, exist_ok=True)
    primary = _primary(exp_dir)
    left_out = _constant_plots(runs, out)
    plots = [
        plot_metrics_by_condition(runs, out / "metrics_by_condition.png"),
        *([] if left_out else [plot_cost_vs_fidelity(runs, out / "cost_vs_fidelity.png")]),
        plot_capability_tags(runs, tags, out / "capability_tags.png"),
    ]
    trajectory_table = exp_dir / "tables" / "trajectory.parquet"
    if trajectory_table.is_file():
        over_session = plot_trajectory(
            pd.read_parquet(trajectory_table), primary, out / "fidelity_over_session.png"
        )
        plots += [over_session] if over_session is not None else []
    # When each condition's sessions started, and how balanced that was (P-60).
    starts = start_times_plot(runs, out / "start_times.png")
    plots += [starts] if starts is not None else []
    rows: dict[str, list[str]] = {}
    attention, pages = [], []
    for r in runs.itertuples():
        rel = f"runs/{r.condition}/{r.task}/r{r.replicate}"
        run_dir = exp_dir / r.condition / r.task / f"r{r.replicate}"
        link = "–"
        if run_dir.is_dir():
            reference = tasks_dir / r.task / "reference.png"
            title = f"{r.condition} / {r.task} / r{r.replicate}"
            flag = getattr(r, "offline", None)
            offline = flag is not None and flag is not pd.NA and bool(flag)
            pages.append(
                PageJob(
                    run_dir, reference, out, rel, title, _run_facts(r, offline), offline, primary
                )  # fmt: skip
            )
            link = f"<a href='{esc(rel)}/index.html'>page</a>"
        row = (
            f"<tr><td>{esc(r.condition)}</td><td>{esc(r.task)}</td>"
            f"<td>{r.replicate}</td><td>{esc(r.status)}</td>"
            f"<td>{esc(str(r.reason or ''))}</td><td>{link}</td></tr>"
        )
        rows.setdefault(str(r.condition), []).append(row)
        if r.status != "ok":
            attention.append(row)
    _write_pages(pages, jobs or os.cpu_count() or 1)
    images = "".join(
        f"<h2>{esc(p.stem)}</h2><p>{esc(p.with_suffix('.rst').read_text())}</p>"
        f"<img src='{esc(p.name)}' style='max-width:100%'>"
        for p in plots
    ) + "".join(f"<p>{esc(note)}</p>" for note in left_out)
    comparisons = (
        _ceiling_section(runs) + _agreement_section(exp_dir) + _comparison_sections(exp_dir, out)
    )
    index = out / "index.html"
    index.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(exp_dir.name)}</title>"
        f"<style>{CSS}</style>"
        f"</head><body><h1>{esc(exp_dir.name)}</h1>{_overview_html(exp_dir, runs)}"
        f"<h2>Plots</h2>{images}{comparisons}{_runs_section(exp_dir.name, rows, attention, out)}"
        "</body></html>",
        encoding="utf-8",
    )
    return index


_RUNS_HEAD = (
    "<table><tr><th>condition</th><th>task</th><th>rep</th><th>status</th><th>reason</th>"
    "<th></th></tr>"
)


def _constant_plots(runs: pd.DataFrame, out: Path) -> list[str]:
    """A note for each plot left out because it would plot a constant (cost_vs_fidelity when
    every run's agent cost is one value, as offline), its stale file removed."""
    costs = runs["cost_usd"].dropna().unique() if "cost_usd" in runs else []
    if len(costs) > 1:
        return []
    for stale in (out / "cost_vs_fidelity.png", out / "cost_vs_fidelity.rst"):
        stale.unlink(missing_ok=True)
    value = money(float(costs[0])) if len(costs) else "unknown"
    return [
        f"cost_vs_fidelity: left out, every run's agent cost is {value}, so it would plot a "
        "constant."
    ]


def _runs_section(name: str, rows: dict[str, list[str]], attention: list[str], out: Path) -> str:
    """The index's runs: per condition a count and a page listing all its runs (runs-<n>.html,
    beside the index, so its links are the index's), then every run that is not ok. The index
    does not list every run: at 20,000 runs one table of them made it take seconds to open."""
    counts = []
    for number, (condition, mine) in enumerate(rows.items(), start=1):
        page = out / f"runs-{number}.html"
        page.write_text(
            f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(name)}: "
            f"{esc(condition)}</title><style>{CSS}</style></head><body><h1>{esc(name)}: "
            f"{esc(condition)}, {len(mine)} runs</h1><p><a href='index.html'>index</a></p>"
            f"{_RUNS_HEAD}{''.join(mine)}</table></body></html>",
            encoding="utf-8",
        )
        counts.append(
            f"<tr><td>{esc(condition)}</td><td>{len(mine)}</td>"
            f"<td><a href='{page.name}'>every run</a></td></tr>"
        )
    return (
        "<h2>Runs</h2><table><tr><th>condition</th><th>runs</th><th></th></tr>"
        f"{''.join(counts)}</table><h2>Runs that are not ok: {len(attention)}</h2>"
        + (
            _scrolled(f"{_RUNS_HEAD}{''.join(attention)}</table>")
            if attention
            else "<p>None: every run is ok.</p>"
        )
    )


def missing_tables(exp_dir: Path) -> list[Path]:
    """The tables the report is built from that `collect` has not written yet."""
    wanted = [exp_dir / "tables" / f"{name}.parquet" for name in ("runs", "capability_tags")]
    return [path for path in wanted if not path.is_file()]
