"""The collect stage's verbs, `collect`, `compare` and `power`: their arguments, and the calls to
the typed functions of `tables`, `matrix`, `compare` and `power`. Each verb imports its modules
when it runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = [
    "add_collect_arguments",
    "add_compare_arguments",
    "add_monitor_look_arguments",
    "add_power_arguments",
    "run_collect",
    "run_compare",
    "run_monitor_look",
    "run_power",
]


def add_collect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment-dir", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--expected", type=Path, help="JSON list of {condition, task, replicate}")
    parser.add_argument("--condition", help="only the runs of this condition (with --summary)")
    parser.add_argument(
        "--task", help="only the runs of this task, across conditions (with --summary)"
    )
    parser.add_argument(
        "--summary", type=Path, help="write one row per run of --condition or --task here"
    )
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores)")
    parser.add_argument(
        "--include-superseded",
        action="store_true",
        help="add the runs moved to superseded/ (column superseded true; never compared)",
    )


def _collect_argument_error(args: argparse.Namespace) -> str | None:
    slices = [f"--{n} {v!r}" for n, v in (("condition", args.condition), ("task", args.task)) if v]
    if args.summary is not None and len(slices) != 1:
        given = " and ".join(slices) or "neither"
        return f"--summary needs exactly one of --condition or --task, got {given}"
    if args.summary is None and slices:
        return f"{slices[0]} only applies with --summary FILE"
    for name in ("condition", "task"):
        value = getattr(args, name)
        if value is not None and (not value or "/" in value or value.startswith(".")):
            return f"--{name} must name a folder of the experiment, got {value!r}"
    if args.jobs is not None and args.jobs < 1:
        return f"--jobs must be at least 1, got {args.jobs}"
    return None


def run_collect(args: argparse.Namespace) -> int:
    from veriharness.collect.matrix import MatrixError, collect_runs, load_expected
    from veriharness.collect.tables import TableWriteError, runs_df, write_summary, write_tables

    problem = _collect_argument_error(args)
    if problem is not None:
        print(f"collect: {problem}", file=sys.stderr)
        return 2
    try:
        expected = load_expected(args.expected) if args.expected else None
        extraction = collect_runs(
            args.experiment_dir,
            expected,
            args.condition,
            args.jobs,
            task=args.task,
            include_superseded=args.include_superseded,
        )
    except (MatrixError, FileNotFoundError) as exc:
        print(f"collect: {exc}", file=sys.stderr)
        return 2
    if args.summary is not None and not extraction.extracts:
        # An empty slice is almost always a misspelt id; an empty summary would hide it.
        flag = f"--condition {args.condition!r}" if args.condition else f"--task {args.task!r}"
        print(
            f"collect: {flag} matches no run folder under {args.experiment_dir} "
            "and no run of the expected matrix",
            file=sys.stderr,
        )
        return 2
    if args.summary is not None:
        runs = runs_df(extraction)
        write_summary(runs, args.summary)
        what = f"condition {args.condition}" if args.condition else f"task {args.task}"
        print(f"collect: {len(runs)} runs of {what} -> {args.summary}")
    else:
        try:
            runs = write_tables(args.experiment_dir, extraction)
        except TableWriteError as exc:
            print(f"collect: {exc}", file=sys.stderr)
            return 1
    counts = runs["status"].value_counts().to_dict()
    print("collect: status " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    if extraction.missing:
        print(
            f"collect: {len(extraction.missing)} expected runs have no folder "
            "(listed in tables/missing.csv):",
            file=sys.stderr,
        )
        for key in extraction.missing:
            print(f"  missing {key.condition}/{key.task}/r{key.replicate}", file=sys.stderr)
    return 0


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.collect.compare import DEFAULT_RESAMPLES

    parser.add_argument("--experiment-dir", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--baseline", help="baseline condition id (with --treatment)")
    parser.add_argument("--treatment", help="treatment condition id (with --baseline)")
    parser.add_argument(
        "--pair",
        nargs=2,
        action="append",
        default=[],
        metavar=("BASELINE", "TREATMENT"),
        help="a (baseline, treatment) pair; repeat for several comparisons",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument(
        "--resamples", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples"
    )
    parser.add_argument("--runs", type=Path, help="runs table (default <exp>/tables/runs.parquet)")


def _pairs(args: argparse.Namespace) -> list[tuple[str, str]]:
    from veriharness.collect.compare import ComparisonError

    if (args.baseline is None) != (args.treatment is None):
        given = "--baseline" if args.baseline is not None else "--treatment"
        raise ComparisonError(f"{given} needs its partner (--baseline with --treatment)")
    single = [(args.baseline, args.treatment)] if args.baseline is not None else []
    return single + [(b, t) for b, t in args.pair]


def run_compare(args: argparse.Namespace) -> int:
    import pandas as pd

    from veriharness.collect.compare import (
        ComparisonError,
        add_registered_verdicts,
        compare_pairs,
        recorded_analysis,
        write_comparison,
    )
    from veriharness.collect.monitor import monitor_verdicts
    from veriharness.collect.registration import registration_check

    runs_path = args.runs or args.experiment_dir / "tables" / "runs.parquet"
    if not runs_path.is_file():
        print(f"compare: {runs_path} not found; run `veriharness collect` first", file=sys.stderr)
        return 2
    try:
        cells, settings = recorded_analysis(args.experiment_dir / "experiment.json")
        runs = pd.read_parquet(runs_path)
        pairs = _pairs(args)
        tables = compare_pairs(runs, pairs, args.seed, args.resamples, cells, settings)
    except ComparisonError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    check = registration_check(args.experiment_dir, settings, pairs, runs)
    add_registered_verdicts(tables, runs, check, args.seed, args.resamples, cells)
    monitor_verdicts(tables, runs, args.experiment_dir, settings)
    csv = write_comparison(args.experiment_dir, tables, check)
    for line in check.lines:
        print(f"compare: {line}")
    for table in tables:
        print(
            f"compare: {table.attrs['treatment']} vs {table.attrs['baseline']}: "
            f"{table.attrs['paired']} tasks paired, "
            f"{len(table.attrs['left_out'])} runs excluded -> {csv}"
        )
        for line in table.attrs["verdict"]:
            print(f"  {line}")
    return 0


def add_power_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.collect.power import DEFAULT_SIMS

    parser.add_argument("--experiment-dir", type=Path, required=True, help="a finished pilot")
    parser.add_argument("--baseline", required=True, help="baseline condition id")
    parser.add_argument("--treatment", required=True, help="treatment condition id")
    parser.add_argument(
        "--effect",
        type=float,
        required=True,
        help="the difference (treatment minus baseline, in the measure's units) to detect",
    )
    parser.add_argument("--measure", help="the outcome (default: the first declared primary)")
    parser.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    parser.add_argument("--alpha", type=float, help="default: the pilot's declared alpha")
    parser.add_argument("--sims", type=int, default=DEFAULT_SIMS, help="simulated studies per n")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    parser.add_argument("--max-tasks", type=int, default=2000, help="largest study considered")
    parser.add_argument(
        "--json", action="store_true", help="print the estimate as one JSON object (for machines)"
    )


def run_power(args: argparse.Namespace) -> int:
    import pandas as pd

    from veriharness.collect.compare import ComparisonError, recorded_analysis, task_differences
    from veriharness.collect.power import (
        PowerError,
        check_power_arguments,
        pilot_sampler,
        power_sentence,
        required_tasks,
    )

    runs_path = args.experiment_dir / "tables" / "runs.parquet"
    if not runs_path.is_file():
        print(f"power: {runs_path} not found; run `veriharness collect` first", file=sys.stderr)
        return 2
    try:
        check_power_arguments(args.power, args.alpha, args.effect, args.sims)
        cells, settings = recorded_analysis(args.experiment_dir / "experiment.json")
        measure = args.measure or settings.primary[0]
        runs = pd.read_parquet(runs_path)
        family = (
            settings.primary
            if measure in settings.primary
            else settings.secondary_present(runs.columns)
        )
        alpha = args.alpha if args.alpha is not None else settings.alpha
        diffs = task_differences(runs, args.baseline, args.treatment, measure, settings, cells)
        if len(diffs) < 2:
            raise PowerError(f"the pilot has {len(diffs)} paired task(s) for {measure}; need 2+")
        estimate = required_tasks(
            pilot_sampler(diffs, args.effect),
            alpha,
            args.power,
            max(len(family), 1),
            args.sims,
            args.seed,
            args.max_tasks,
        )
    except (ComparisonError, PowerError) as exc:
        print(f"power: {exc}", file=sys.stderr)
        return 2
    result = {
        "measure": measure,
        "pilot_tasks": int(len(diffs)),
        "pilot_mean_difference": float(diffs.mean()),
        "pilot_sd_difference": float(diffs.std(ddof=1)),
        "effect": args.effect,
        "alpha": alpha,
        "family_size": max(len(family), 1),
        **estimate._asdict(),
        "target_power": args.power,
        "baseline": args.baseline,
        "treatment": args.treatment,
    }
    print(json.dumps(result) if args.json else power_sentence(result, args.max_tasks))
    if estimate.tasks is None:
        print(
            f"power: {args.max_tasks} tasks reach only power {estimate.power:.3f} for an effect "
            f"of {args.effect:g} on {measure}",
            file=sys.stderr,
        )
        return 1
    return 0


def add_monitor_look_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Look at a task whose every compared run has been scored: add its paired differences to "
        "the study's confidence sequence (analysis.monitor), write monitor/state.json, and "
        "monitor/stop.json once every primary outcome's answer is known"
    )
    parser.add_argument("--experiment-dir", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--task", required=True, help="the task whose runs are all scored")


def run_monitor_look(args: argparse.Namespace) -> int:
    from veriharness.collect.monitor import look_at_task
    from veriharness.collect.monitor_state import MonitorError

    try:
        state = look_at_task(args.experiment_dir, args.task)
    except MonitorError as error:
        print(f"monitor-look: {error}", file=sys.stderr)
        return 2
    print(
        f"monitor-look: {args.task}: {state.tasks_looked} of {state.tasks_total} tasks looked "
        f"at, {len(state.sequence)} in the sequence ({state.order})"
    )
    for line in state.lines():
        print(f"  {line}")
    return 0
