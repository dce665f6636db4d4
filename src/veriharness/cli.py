"""The `veriharness` command: one verb per pipeline stage.

Each verb belongs to a package, whose `verbs` module holds, per verb, `add_<verb>_arguments(parser)`
and `run_<verb>(args) -> int` (the verb's name with `-` as `_`). This file only names the package,
so a job imports that one `verbs` module, which imports the verb's own modules when it runs (a
Snakemake job pays for the stage it runs, not for all of them).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple, cast

from veriharness._util.programs import MissingTool

__all__ = ["main", "VERBS", "verb_functions"]


class Verb(NamedTuple):
    package: str
    help: str


VERBS: dict[str, Verb] = {
    "check-setup": Verb("_util", "report which external programs are installed"),
    "mllm-server": Verb("mllm", "serve the CallMLLM MCP tool (stdio or HTTP)"),
    "serve-offline": Verb("offline", "serve the embedded offline model"),
    "check": Verb("prepare", "check the config, tasks, conditions and prompts; every problem"),
    "check-experiment": Verb("prepare", "validate an experiment and write its experiment.json"),
    "hash-files": Verb("prepare", "write the sha256 digests of some files"),
    "prepare": Verb("prepare", "write one run's record and prompt snapshot"),
    "run-agent": Verb("agent", "run one claude -p session for a prepared run"),
    "redo-session": Verb("agent", "keep a finished session aside so the workflow runs it again"),
    "import-answer": Verb("external", "import one task's answer of an external answer set"),
    "render": Verb("render", "render answer.html of one or more runs"),
    "render-reference": Verb("render", "re-render a task's reference.png"),
    "import-tasks": Verb("tasksets", "convert a published page collection into a task set"),
    "score": Verb("score", "audit and score one or more rendered runs"),
    "score-trajectory": Verb("trajectory", "render and score every answer snapshot of a run"),
    "annotate": Verb("annotate", "label one run's CallMLLM calls with inferred tags"),
    "collect": Verb("collect", "collect run folders into tables"),
    "compare": Verb("collect", "compare pairs of conditions, paired by task"),
    "power": Verb("collect", "tasks a study needs, estimated from a pilot's differences"),
    "monitor-look": Verb("collect", "look at a completed task: the study's running answer"),
    "report": Verb("report", "write plots and per-run transcript pages"),
    "status": Verb("report", "runs done, running and left, and the spend, per condition"),
    "export": Verb("report", "write an experiment's runs as another tool's logs (inspect)"),
    "record": Verb("experiment", "inspect experiment and run records (diff)"),
}

AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


def verb_functions(name: str) -> tuple[AddArguments, Run]:
    """`add_<verb>_arguments` and `run_<verb>` of the verb's package's `verbs` module."""
    module: ModuleType = importlib.import_module(f"veriharness.{VERBS[name].package}.verbs")
    suffix = name.replace("-", "_")
    add = cast(AddArguments, getattr(module, f"add_{suffix}_arguments"))
    run = cast(Run, getattr(module, f"run_{suffix}"))
    return add, run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="veriharness", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, verb in VERBS.items():
        sub = verbs.add_parser(name, help=verb.help, description=verb.help)
        sub.set_defaults(_verb=name)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Parse the verb first, then let its package declare the verb's own arguments.
    known, _ = parser.parse_known_args(argv[:1] or ["--help"])
    add, run = verb_functions(known.verb)
    sub = argparse.ArgumentParser(
        prog=f"veriharness {known.verb}", description=VERBS[known.verb].help
    )
    add(sub)
    args = sub.parse_args(argv[1:])
    try:
        return int(run(args) or 0)
    except MissingTool as missing:
        # What is missing and how to get it, in one line: not a traceback to read to its end.
        print(f"veriharness {known.verb}: {missing}", file=sys.stderr)
        return 2
