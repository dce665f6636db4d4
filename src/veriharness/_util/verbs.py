"""The verb of the shared helpers, `check-setup`: which external programs are installed, and
which of a session's containment this machine offers."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

__all__ = ["add_check_setup_arguments", "run_check_setup"]


def add_check_setup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="print only problems")


def run_check_setup(args: argparse.Namespace) -> int:
    from veriharness._util.programs import MissingTool, external_programs

    problems = 0
    bwrap = None
    for label, found in external_programs():
        if isinstance(found, MissingTool):
            problems += 1
            print(f"missing  {label}: {found}")
        else:
            bwrap = found if label == "bwrap" else bwrap
            if not args.quiet:
                print(f"ok       {label}: {found}")
    _report_containment(bwrap, args.quiet)
    return 1 if problems else 0


def _report_containment(bwrap: Path | None, quiet: bool) -> None:
    """What a session can be held to here. Not a setup failure: an offline session runs
    without a missing part and says so; a real model's session is refused without it unless
    the config allows it (agent.network: open, agent.limits.allow_unavailable)."""
    from veriharness._util.containment import (
        limits_unavailable,
        network_namespace_unavailable_reason,
    )

    if bwrap is not None:
        reason = network_namespace_unavailable_reason(bwrap)
        if reason:
            print(f"limited  network: {reason}; agent.network: none cannot run here")
        elif not quiet:
            print("ok       network: sessions get a network namespace of their own")
    missing = limits_unavailable(Path(tempfile.gettempdir()))
    for limit in ("memory", "processes", "disk"):
        if limit in missing:
            print(
                f"limited  {limit} limit: {missing[limit]}; a real model's session is refused "
                "unless agent.limits.allow_unavailable is true"
            )
        elif not quiet:
            print(f"ok       {limit} limit: enforced per session")
