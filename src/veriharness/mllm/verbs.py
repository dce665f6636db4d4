"""The mllm package's verb, `mllm-server`: its arguments, and the calls to `server`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from veriharness.mllm import MLLM_TOKEN_ENV

__all__ = ["add_mllm_server_arguments", "run_mllm_server"]


def add_mllm_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace", required=True, type=Path, help="folder that image paths are confined to"
    )
    parser.add_argument("--catalog", required=True, type=Path, help="model profile catalog YAML")
    parser.add_argument("--trace", required=True, type=Path, help="JSONL file events append to")
    parser.add_argument(
        "--spend-json",
        help="prices per profile and the run's ledger settings (MllmSpend as JSON)",
    )
    parser.add_argument(
        "--call-images",
        type=Path,
        default=None,
        help="keep the bytes sent for each image input in this folder (the run folder's "
        "call_images/), one file per digest (default: none kept)",
    )
    parser.add_argument(
        "--taxonomy",
        type=Path,
        default=None,
        help="capability taxonomy YAML (default: the config's default taxonomy in the checkout)",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help=f"stdio, or streamable HTTP on 127.0.0.1 (needs ${MLLM_TOKEN_ENV})",
    )
    parser.add_argument("--port", type=int, default=0, help="HTTP port (default 0: a free one)")
    parser.add_argument("--port-file", type=Path, help="HTTP: write the chosen port to this file")
    parser.add_argument(
        "--parent-pid",
        type=int,
        help="end (SIGKILL from the kernel) when this process, the server's parent, ends",
    )


def run_mllm_server(args: argparse.Namespace) -> int:
    from veriharness._util.lifetime import end_with_parent
    from veriharness.experiment.catalog import CatalogError
    from veriharness.mllm.server import open_service, serve

    if args.parent_pid is not None:
        end_with_parent(args.parent_pid)
    token = os.environ.pop(MLLM_TOKEN_ENV, "")
    if args.transport == "http" and len(token) < 16:
        message = f"mllm-server: --transport http needs ${MLLM_TOKEN_ENV} (16+ characters)"
        print(message, file=sys.stderr)
        return 2
    if not args.workspace.is_dir():
        print(f"mllm-server: --workspace {args.workspace} is not a directory", file=sys.stderr)
        return 2
    try:
        service = open_service(
            args.workspace,
            args.catalog,
            args.trace,
            args.taxonomy,
            args.spend_json,
            args.call_images,
        )
    except (CatalogError, OSError, ValueError) as error:
        print(f"mllm-server: {error}", file=sys.stderr)
        return 2
    serve(service, args.transport, token, args.port, args.port_file)
    return 0
