"""The `veriharness` command: one verb per pipeline stage.

Each verb lives in the module of its stage and exposes two functions, `add_arguments(parser)` and
`run(args) -> int`. This file only names them, so a stage module is imported only when its verb
runs (a Snakemake job pays for the stage it runs, not for all of them).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NamedTuple

__all__ = ["main", "VERBS"]


class Verb(NamedTuple):
    module: str
    help: str


VERBS: dict[str, Verb] = {
    "check-setup": Verb(
        "veriharness._util.programs", "report which external programs are installed"
    ),
    "mllm-server": Verb("veriharness.mllm.server", "serve the CallMLLM MCP tool (stdio or HTTP)"),
    "serve-offline": Verb("veriharness.offline.server", "serve the embedded offline model"),
    "check-experiment": Verb(
        "veriharness.experiment.check", "validate an experiment and write its experiment.json"
    ),
    "hash-files": Verb(
        "veriharness.prepare.input_digests", "write the sha256 digests of some files"
    ),
    "prepare": Verb("veriharness.prepare.run_folder", "write one run's record and prompt snapshot"),
    "run-agent": Verb("veriharness.agent.session", "run one claude -p session for a prepared run"),
    "redo-session": Verb(
        "veriharness.agent.attempts", "keep a finished session aside so the workflow runs it again"
    ),
    "import-answer": Verb(
        "veriharness.external.answers", "import one task's answer of an external answer set"
    ),
    "render": Verb("veriharness.render.command", "render answer.html of one or more runs"),
    "render-reference": Verb("veriharness.render.command", "re-render a task's reference.png"),
    "score": Verb("veriharness.score.command", "audit and score one or more rendered runs"),
    "annotate": Verb(
        "veriharness.annotate.command", "label one run's CallMLLM calls with inferred tags"
    ),
    "collect": Verb("veriharness.collect.tables", "collect run folders into tables"),
    "compare": Verb("veriharness.collect.compare", "compare pairs of conditions, paired by task"),
    "power": Verb(
        "veriharness.collect.power", "tasks a study needs, estimated from a pilot's differences"
    ),
    "report": Verb("veriharness.report.command", "write plots and per-run transcript pages"),
    "status": Verb(
        "veriharness.spend.status", "runs done, running and left, and the spend, per condition"
    ),
    "record": Verb("veriharness.experiment.record", "inspect experiment and run records (diff)"),
}


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
    # Parse the verb first, then let its module declare its own arguments.
    known, _ = parser.parse_known_args(argv[:1] or ["--help"])
    verb = VERBS[known.verb]
    module = importlib.import_module(verb.module)
    sub = argparse.ArgumentParser(prog=f"veriharness {known.verb}", description=verb.help)
    suffix = known.verb.replace("-", "_")
    add = getattr(module, f"add_{suffix}_arguments", None) or module.add_arguments
    add(sub)
    args = sub.parse_args(argv[1:])
    run = getattr(module, f"run_{suffix}", None) or module.run
    return int(run(args) or 0)
