"""The verb of the shared helpers, `check-setup`: which external programs are installed."""

from __future__ import annotations

import argparse

__all__ = ["add_check_setup_arguments", "run_check_setup"]


def add_check_setup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="print only problems")


def run_check_setup(args: argparse.Namespace) -> int:
    from veriharness._util.programs import MissingTool, external_programs

    problems = 0
    for label, found in external_programs():
        if isinstance(found, MissingTool):
            problems += 1
            print(f"missing  {label}: {found}")
        elif not args.quiet:
            print(f"ok       {label}: {found}")
    return 1 if problems else 0
