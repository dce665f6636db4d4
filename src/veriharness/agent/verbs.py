"""The agent stage's verbs, `run-agent` and `redo-session`: their arguments, and the calls to
`plan`, `session` and `attempts`. Each verb imports its modules when it runs."""

from __future__ import annotations

import argparse
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
    outcome = run_session(plan)
    print(f"{args.run_dir}: {outcome.status}" + (f" ({outcome.error})" if outcome.error else ""))
    # A failed session is a recorded outcome, not a pipeline failure.
    return 0


def add_redo_session_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
        help="a finished run folder, such as results/example/b3-present/landing-page/r1",
    )  # fmt: skip


def run_redo_session(args: argparse.Namespace) -> int:
    from veriharness.agent.attempts import not_redoable, redo_session

    refusals = [r for r in map(not_redoable, args.run_dirs) if r is not None]
    if refusals:  # all checked before any is moved
        raise SystemExit("redo-session: " + "; ".join(refusals))
    for run_dir in args.run_dirs:
        kept = redo_session(run_dir)
        print(f"{run_dir}: session kept under {kept.relative_to(run_dir)}; the next run of the "
              "workflow runs it again")  # fmt: skip
    return 0
