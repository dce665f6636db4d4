"""The external stage's verb, `import-answer`: its arguments, and the call to `answers`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_import_answer_arguments", "run_import_answer"]


def add_import_answer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="the experiment's config")
    parser.add_argument("--set", required=True, help="name of the external answer set")
    parser.add_argument("--task", required=True, help="task id")
    parser.add_argument("--run-dir", type=Path, required=True, help="external:<set>/<task>/r1")
    parser.add_argument(
        "--project-root", type=Path, default=Path("."), help="config paths are relative to it"
    )


def run_import_answer(args: argparse.Namespace) -> int:
    from veriharness.experiment.config import ConfigError, load_config
    from veriharness.external.answers import external_set, import_answer

    try:
        config = load_config(args.config)
        answers = external_set(config, args.set)
    except ConfigError as exc:
        print(f"import-answer: {exc}", file=sys.stderr)
        return 2
    root = args.project_root.resolve()
    if answers.source == "folder" and not (root / str(answers.dir)).is_dir():
        print(
            f"import-answer: external_answers {answers.name!r}: dir {answers.dir!r} is not a "
            f"folder under {root}",
            file=sys.stderr,
        )
        return 2
    outcome = import_answer(answers, root, root / config.tasks_dir, args.task, args.run_dir)
    if outcome.status == "ok":
        print(f"import-answer: {len(outcome.files)} files -> {args.run_dir / 'answer'}")
    else:
        print(f"import-answer: {args.task}: {outcome.error}; listed as missing_answer")
    return 0
