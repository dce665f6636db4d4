"""The browser pool's server (`render/pool.py`): one Chromium kept open for one cluster job or
one slot of a workflow's pool.

Started by the first `render --browser-pool ...` of its pool folder as
`python -m veriharness.render.pool_server`; it answers each request with the batch mode's
`render_answer`, and leaves on a `{"stop": true}` request (`pool.stop_pools`), after
`IDLE_SECONDS` without a request, or, given its pool's `--owner`, within `OWNER_POLL_S` of that
process's end; the last two once no client holds the folder's lock.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from pydantic import ValidationError

from veriharness._util.lifetime import is_running
from veriharness.render.browser import DEFAULT_LOAD_TIMEOUT_S, Renderer, RenderSetupError
from veriharness.render.command import BatchItem, reference_size, render_answer, task_spec
from veriharness.render.pool import IDLE_SECONDS, OWNER_POLL_S

__all__ = ["serve", "main"]


def _answer(renderer: Renderer, line: bytes) -> dict[str, str]:
    try:
        item = BatchItem.model_validate_json(line)
        reference_size(item.reference)
        task = None if item.task_dir is None else task_spec(item.task_dir)
        record = render_answer(renderer, item.answer_dir, item.reference, item.out, task)
    except ValidationError as exc:
        return {"setup_error": f"bad pool request {line[:200]!r}: {exc}"}
    except RenderSetupError as exc:
        return {"setup_error": str(exc)}
    return {"status": record.status}


def _is_stop(line: bytes) -> bool:
    try:
        return bool(json.loads(line) == {"stop": True})
    except ValueError:
        return False


def _idle_exit(directory: Path) -> bool:
    """Leave if no client holds the lock; a client that does is about to connect."""
    lock = open(directory / "lock", "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return False
    (directory / "socket").unlink(missing_ok=True)
    return True  # the lock is released when the process ends, after the socket is gone


def serve(
    directory: Path,
    load_timeout_s: float,
    chromium: str | None,
    idle_s: float,
    owner: str | None = None,
) -> None:
    with Renderer(load_timeout_s, chromium) as renderer:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(directory / "socket.new"))
        listener.listen(8)
        (directory / "server.pid").write_text(f"{os.getpid()}\n")
        os.replace(directory / "socket.new", directory / "socket")
        listener.settimeout(idle_s if owner is None else min(idle_s, OWNER_POLL_S))
        last = time.monotonic()
        while True:
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                idle = time.monotonic() - last >= idle_s
                orphaned = owner is not None and not is_running(owner)
                if (idle or orphaned) and _idle_exit(directory):
                    return
                continue
            last = time.monotonic()
            with connection, connection.makefile("rwb") as stream:
                connection.settimeout(None)
                line = stream.readline()
                if _is_stop(line):
                    (directory / "socket").unlink(missing_ok=True)
                    stream.write(b'{"stopped": true}\n')
                    return
                reply = _answer(renderer, line)
                stream.write(json.dumps(reply).encode() + b"\n")


def main() -> int:
    parser = argparse.ArgumentParser(description="browser pool server (started by `render`)")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--load-timeout", type=float, default=DEFAULT_LOAD_TIMEOUT_S)
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS)
    parser.add_argument("--owner", default=None, help="pid:start of the process it ends with")
    args = parser.parse_args()
    serve(args.dir, args.load_timeout, args.chromium, args.idle, args.owner)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
