"""The prepare stage's verbs, `check`, `check-experiment`, `hash-files` and `prepare`: their
arguments, and the calls to the typed functions of `experiment.check`, `experiment_check`,
`input_digests` and `run_folder`.
Each verb imports its module when it runs, so `hash-files`, run for every task and condition,
does not load the experiment definition."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from veriharness.experiment.record import ExperimentRecord

__all__ = [
    "add_check_arguments",
    "add_check_experiment_arguments",
    "add_hash_files_arguments",
    "add_prepare_arguments",
    "run_check",
    "run_check_experiment",
    "run_hash_files",
    "run_prepare",
]


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--configfile",
        type=Path,
        nargs="+",
        action="extend",
        default=[],
        help="config files laid over the project's config/config.yaml in order, as "
        "`snakemake --configfile` lays them (an experiment.json too)",
    )
    parser.add_argument("--config-json", help="JSON object merged over the config files")
    parser.add_argument("--project-root", type=Path, help="default: the VeriHarness checkout")


def run_check(args: argparse.Namespace) -> int:
    from veriharness._util.programs import project_root
    from veriharness.experiment.check import check_definition, project_layers, report
    from veriharness.experiment.config import ConfigError, parse_json_overrides

    root = (args.project_root or project_root()).resolve()
    try:
        overrides = parse_json_overrides(args.config_json)
    except ConfigError as error:
        print(f"check: {error}", file=sys.stderr)
        return 2
    layers, problems = project_layers(args.configfile, root, overrides)
    problems += check_definition(layers, root)
    if problems:
        report(problems, "check")
        return 2
    print(f"check: no problem in {', '.join(name for name, _ in layers)} and what they name")
    return 0


def add_check_experiment_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.experiment.definition import add_common_arguments

    add_common_arguments(parser)
    parser.add_argument(
        "--skip-model-check",
        action="store_true",
        help="do not look model names up with their provider (dry runs)",
    )
    parser.add_argument("--out", type=Path, required=True, help="where to write experiment.json")


def run_check_experiment(args: argparse.Namespace) -> int:
    from veriharness.experiment.analysis import design_warnings
    from veriharness.experiment.definition import load_from_args, stated_counts
    from veriharness.experiment.record import write_experiment_record
    from veriharness.experiment.task_set import manifest_warnings
    from veriharness.prepare.experiment_check import START_ERRORS, check_experiment

    try:
        config, root = load_from_args(args)
        defn, record = check_experiment(config, root, args.config, args.out.parent)
    except START_ERRORS as error:
        print(f"check-experiment: {error}", file=sys.stderr)
        return 2
    kept = write_experiment_record(args.out, record.model_dump(mode="json"))
    cells = sum(len(v) for v in record.cells.values())
    print(
        f"experiment {record.experiment}: {len(record.conditions)} condition(s) x "
        f"{len(record.task_ids)} task(s), {cells} cell(s), identity {record.identity_hash}"
        f"{' (uncommitted inputs)' if defn.uncommitted else ''} -> {args.out}"
    )
    if kept is not None:
        print(
            f"check-experiment: the record changed; the earlier one is kept as {kept} "
            f"(`veriharness record diff {kept} {args.out}` shows what changed)"
        )
    _registration_lines(record, args.out.parent)
    for line in manifest_warnings(defn.root / config.tasks_dir):
        print(f"check-experiment: WARNING: {line}", file=sys.stderr)
    for line in design_warnings(config.analysis, len(defn.selected_task_ids), stated_counts(defn)):
        print(f"check-experiment: WARNING: {line}", file=sys.stderr)
    return 0


def _registration_lines(record: ExperimentRecord, exp_dir: Path) -> None:
    """Register the analysis at the first start (preregistration.json), or say how this start
    differs from the registration; and warn of a claude CLI other than the finished runs'."""
    from veriharness.prepare.preregistration import claude_drift, register

    found = register(record, exp_dir)
    value = found.value
    if found.written and value is not None and value.before_sessions:
        print(
            f"check-experiment: the analysis and the run matrix are registered before any "
            f"session in {found.path} (digest {value.digest})"
        )
    elif found.written and value is not None:
        print(
            f"check-experiment: WARNING: {value.sessions_found} session(s) had started before "
            f"this experiment was first registered, so {found.path} registers no analysis and "
            "says so (compare will say the analysis was not locked before the sessions)",
            file=sys.stderr,
        )
    elif found.differences and value is not None:
        print(
            f"check-experiment: the registration {found.path} ({value.digest}, "
            f"{value.created_at}) stands, never rewritten: "
            + "; ".join(found.differences)
            + "; compare names the change beside the verdict"
        )
    for problem in found.problems:
        print(f"check-experiment: WARNING: {found.path}: {problem}", file=sys.stderr)
    drift = claude_drift(record, exp_dir)
    if drift is not None:
        print(f"check-experiment: WARNING: {drift}", file=sys.stderr)


def add_hash_files_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="where to write the digests")
    parser.add_argument("files", type=Path, nargs="+", help="files to hash")


def run_hash_files(args: argparse.Namespace) -> int:
    from veriharness.prepare.input_digests import write_digests

    write_digests(args.files, args.out)
    return 0


def add_prepare_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.experiment.definition import add_common_arguments

    add_common_arguments(parser)
    parser.add_argument("--condition", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--replicate", type=int, required=True, help="1-based replicate index")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument(
        "--experiment-record",
        type=Path,
        help="experiment.json whose cell hash this run must match (default: the "
        "--config file when it is an experiment record)",
    )


def run_prepare(args: argparse.Namespace) -> int:
    from veriharness.experiment.config import ConfigError
    from veriharness.experiment.definition import (
        DEFINITION_ERRORS,
        load_definition,
        load_from_args,
    )
    from veriharness.prepare.run_folder import prepare_run, recorded_experiment, write_run

    try:
        config, root = load_from_args(args)
        defn = load_definition(config, root, args.config)
        recorded = recorded_experiment(args.experiment_record or args.config)
        if args.experiment_record is not None and recorded is None:
            raise ConfigError(
                f"--experiment-record {args.experiment_record} is not a readable experiment record"
            )
        record, prompt = prepare_run(defn, args.condition, args.task, args.replicate, recorded)
    except DEFINITION_ERRORS as error:
        print(f"prepare: {error}", file=sys.stderr)
        return 2
    write_run(args.run_dir, record, prompt)
    print(f"prepared {args.condition}/{args.task}/r{args.replicate}: {record.identity_hash}")
    return 0
