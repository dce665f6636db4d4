"""The agent stage's verbs, `run-agent` and `redo-session`: their arguments, and the calls to
`plan`, `session` and `attempts`. Each verb imports its modules when it runs."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path

__all__ = [
    "add_redo_session_arguments",
    "add_run_agent_arguments",
    "run_redo_session",
    "run_run_agent",
]


def add_run_agent_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="experiment config (YAML/JSON)")
    parser.add_argument("--run-dir", required=True, type=Path, help="a prepared run folder")
    parser.add_argument("--task-dir", required=True, type=Path, help="the task's folder")


def run_run_agent(args: argparse.Namespace) -> int:
    from veriharness.agent.attempts import restore_finished
    from veriharness.agent.plan import plan_session
    from veriharness.agent.session import end_session_on_sigterm, run_session
    from veriharness.agent.session_slots import NodeLocalLocks, held_slot, session_cap
    from veriharness.experiment.config import load_config
    from veriharness.runfolder.outcome import AGENT_OUTCOME

    end_session_on_sigterm()
    config = load_config(args.config)
    plan = plan_session(config, args.run_dir, args.task_dir)
    if restore_finished(plan.run_dir):
        errors: list[str] = []
        restored = AGENT_OUTCOME.read(plan.run_dir, errors)
        if restored is None:
            print(f"{args.run_dir}: restored outcome unreadable: {'; '.join(errors)}")
            return 1
        print(
            f"{args.run_dir}: {restored.status}, restored: this session finished at "
            f"{restored.finished_at} and is not run again (`veriharness redo-session "
            f"{args.run_dir}` makes the workflow redo it)"
        )
        return 0
    # The cap on concurrent sessions, held here whatever the executor did (P-67).
    with ExitStack() as held:
        try:
            cap = session_cap(args.config)
            label = "/".join(plan.run_dir.parts[-3:])
            slot = held.enter_context(held_slot(plan.ledger.experiment_dir, cap, label))
        except (ValueError, NodeLocalLocks) as refused:
            print(f"run-agent: {refused}")
            return 2
        outcome = run_session(plan, slot=slot)
    print(f"{args.run_dir}: {outcome.status}" + (f" ({outcome.error})" if outcome.error else ""))
    # A failed session is a recorded outcome, not a pipeline failure.
    return 0


def add_redo_session_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Move finished sessions aside into attempts/<n>/ of their run folders (nothing is "
        "deleted) and remove what the later stages made of them; the next `snakemake --cores 4 "
        "all` runs exactly those sessions again and refreshes the tables, the comparison and "
        "the report. Name run folders, or an experiment folder with a condition, a task and a "
        "replicate, any of them (each narrows the selection)."
    )
    parser.add_argument(
        "run_dirs", nargs="*", type=Path, metavar="RUN_DIR",
        help="a finished run folder, such as results/example/b3-present/landing-page/r1",
    )  # fmt: skip
    parser.add_argument(
        "--experiment-dir", type=Path, metavar="DIR",
        help="the experiment folder (results/<experiment>) whose runs --condition, --task and "
        "--replicate name",
    )  # fmt: skip
    parser.add_argument("--condition", help="every run of this condition")
    parser.add_argument("--task", help="every run of this task")
    parser.add_argument("--replicate", type=int, metavar="K", help="replicate K (r<K>)")
    parser.add_argument(
        "-n", "--dry-run", action="store_true",
        help="list the sessions that would be moved aside, and move nothing",
    )  # fmt: skip


def _named_run_dirs(args: argparse.Namespace) -> list[Path]:
    """The run folders the arguments name: the folders given, or the experiment's selection."""
    from veriharness.agent.redo import RedoSelectionError, named_runs

    selecting = [args.condition, args.task, args.replicate]
    if args.run_dirs and (args.experiment_dir is not None or any(v is not None for v in selecting)):
        raise SystemExit(
            "redo-session: name run folders, or --experiment-dir with --condition, --task or "
            "--replicate, not both"
        )
    if args.run_dirs:
        return list(args.run_dirs)
    if args.experiment_dir is None:
        raise SystemExit(
            "redo-session: name a run folder, or --experiment-dir results/<experiment> with "
            "--condition, --task or --replicate"
        )
    if all(v is None for v in selecting):
        raise SystemExit(
            f"redo-session: --experiment-dir {args.experiment_dir}: name --condition, --task or "
            "--replicate (every session of an experiment is not redone by accident)"
        )
    try:
        return named_runs(args.experiment_dir, args.condition, args.task, args.replicate)
    except RedoSelectionError as error:
        raise SystemExit(f"redo-session: {error}") from None


def run_redo_session(args: argparse.Namespace) -> int:
    from veriharness.agent.attempts import not_redoable, redo_session

    run_dirs = _named_run_dirs(args)
    if not run_dirs:
        print("redo-session: no finished session among the runs named (each is already aside "
              "or has not run yet); `snakemake --cores 4 all` runs them")  # fmt: skip
        return 0
    refusals = [r for r in map(not_redoable, run_dirs) if r is not None]
    if refusals:  # all checked before any is moved
        raise SystemExit("redo-session: " + "; ".join(refusals))
    if args.dry_run:
        for run_dir in run_dirs:
            print(f"{run_dir}: would be kept under attempts/ and run again")
        print(f"{len(run_dirs)} session(s) would be redone (dry run: nothing moved)")
        return 0
    for run_dir in run_dirs:
        kept = redo_session(run_dir)
        print(f"{run_dir}: session kept under {kept.relative_to(run_dir)}")
    print(f"{len(run_dirs)} session(s) set aside; `snakemake --cores 4 all` runs them again and "
          "refreshes the tables, the comparison and the report")  # fmt: skip
    return 0
