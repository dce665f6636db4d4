"""The spend package's verb, `status` (its entries call the verb functions `status` holds)."""

from __future__ import annotations

import argparse

__all__ = ["add_status_arguments", "run_status"]


def add_status_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.spend.status import add_arguments

    add_arguments(parser)


def run_status(args: argparse.Namespace) -> int:
    from veriharness.spend.status import run

    return run(args)
