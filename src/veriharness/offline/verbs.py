"""The offline package's verb, `serve-offline`: its arguments, and the calls to `server`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_serve_offline_arguments", "run_serve_offline"]


def add_serve_offline_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.offline.server import FAULTS_ENV

    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: a free port)")
    parser.add_argument("--port-file", type=Path, help="write the chosen port to this file")
    parser.add_argument("--request-log", type=Path, help="append every request as a JSON line")
    parser.add_argument(
        "--faults", help=f"JSON of the faults to inject (default: ${FAULTS_ENV}, else none)"
    )


def run_serve_offline(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from veriharness.offline.server import Faults, OfflineServer, serve_until_ended

    if not 0 <= args.port <= 65535:
        print(f"serve-offline: --port must be 0..65535, got {args.port}", file=sys.stderr)
        return 2
    try:
        faults = Faults.model_validate_json(args.faults) if args.faults else None
        server = OfflineServer((args.host, args.port), args.request_log, faults)
    except (ValidationError, ValueError) as bad:
        print(f"serve-offline: --faults: {bad}", file=sys.stderr)
        return 2
    serve_until_ended(server, args.port_file)
    return 0
