"""One Chromium for all the renders of one cluster job (`veriharness render --browser-pool`).

On SLURM, a group job runs its render jobs one after another, each as its own `veriharness render`
process. With `--browser-pool slurm-job` the verb does not launch Chromium itself: it hands its
run to a small server of the same cluster job that keeps one `Renderer` open (`pool_server`; this
module is its client). The first render of
the job starts the server; it ends after `IDLE_SECONDS` without a request, or with the job.
Outside a SLURM job (no `SLURM_JOB_ID`) the verb launches its own browser, as without the option.

Why the output is the same as one browser per run: the server calls the batch mode's
`render_answer`, and each page gets its own browser context (render.browser), so nothing one
answer does reaches the next. Only `render.json`'s timings differ, as they do between any two
renders; `timings.launch_ms` appears in the first render of each browser only.

Protocol: one request per connection, a JSON line (answer_dir, reference, out) answered by a JSON
line, either {"status": ...} or {"setup_error": ...}. A client holds the pool's lock file while
it checks for the server, starts it and talks to it; the server exits only if it can take that
lock, so it never leaves while a client is between connecting and being answered.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from veriharness.render.browser import DEFAULT_LOAD_TIMEOUT_S, RenderSetupError

POOL_MODES = ("none", "slurm-job")
IDLE_SECONDS = 90.0
START_TIMEOUT_S = 60.0
# A reply can take as long as one page load plus its capture.
REPLY_MARGIN_S = 60.0


def pool_dir(job_id: str) -> Path:
    """Node-local folder of one cluster job's pool (short: a socket path has a length limit)."""
    return Path(tempfile.gettempdir()) / f"veriharness-browser-{os.getuid()}-{job_id}"


def pool_for(mode: str) -> Path | None:
    """The pool folder `mode` asks for here, or None for a browser of the verb's own."""
    if mode not in POOL_MODES:
        choices = ", ".join(POOL_MODES)
        raise RenderSetupError(f"--browser-pool must be one of {choices}, got {mode!r}")
    job_id = os.environ.get("SLURM_JOB_ID", "")
    if mode == "none" or not job_id:
        return None
    if not job_id.isdigit():
        raise RenderSetupError(f"SLURM_JOB_ID must be a job number, got {job_id!r}")
    return pool_dir(job_id)


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(mode=0o700, exist_ok=True)
    with open(directory / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _connect(path: Path, timeout: float) -> socket.socket | None:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout)
    try:
        client.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        client.close()
        return None
    return client


def _start_server(directory: Path, load_timeout_s: float, chromium: str | None) -> None:
    """Start the pool's server and wait until it listens (it binds only once Chromium runs)."""
    path = directory / "socket"
    path.unlink(missing_ok=True)  # left by a server that was killed
    command = [sys.executable, "-m", "veriharness.render.pool_server", "--dir", str(directory),
               "--load-timeout", str(load_timeout_s)]  # fmt: skip
    if chromium:
        command += ["--chromium", chromium]
    with open(directory / "server.log", "ab") as log:
        server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if path.exists():
            return
        if server.poll() is not None:
            tail = (directory / "server.log").read_text(errors="replace")[-2000:]
            raise RenderSetupError(f"browser pool server exited with {server.returncode}: {tail}")
        time.sleep(0.05)
    server.kill()
    raise RenderSetupError(f"browser pool server in {directory} did not listen within "
                           f"{START_TIMEOUT_S:.0f} s")  # fmt: skip


def render_in_pool(
    directory: Path,
    request: dict[str, str],
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S,
    chromium: str | None = None,
) -> str:
    """Render one run in the pool's browser, starting its server if none runs; its status."""
    with _locked(directory):
        client = _connect(directory / "socket", load_timeout_s + REPLY_MARGIN_S)
        if client is None:
            _start_server(directory, load_timeout_s, chromium)
            client = _connect(directory / "socket", load_timeout_s + REPLY_MARGIN_S)
            if client is None:
                raise RenderSetupError(f"browser pool server in {directory} refused the connection")
        with client, client.makefile("rwb") as stream:
            stream.write(json.dumps(request).encode() + b"\n")
            stream.flush()
            line = stream.readline()
    if not line:
        raise RenderSetupError(f"browser pool server in {directory} closed without an answer; "
                               f"see {directory / 'server.log'}")  # fmt: skip
    reply = json.loads(line)
    if "setup_error" in reply:
        raise RenderSetupError(reply["setup_error"])
    return str(reply["status"])
