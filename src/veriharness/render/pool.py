"""Chromium kept open across render jobs (`veriharness render --browser-pool`).

Each render job of the workflow is its own `veriharness render` process. With a pool it does not
launch Chromium itself: it hands its run to a small server that keeps one `Renderer` open
(`pool_server`; this module is its client). The first render starts the server; it ends when told
to, or after `IDLE_SECONDS` without a request.

- `slurm-job`: inside a SLURM job (`SLURM_JOB_ID`), one browser for the job; a group job runs its
  render jobs one after another, so one server serves them all. Outside a job: the verb's own
  browser, as without the option.
- `workflow`: inside a SLURM job, as `slurm-job`; elsewhere the pool of the Snakemake run that
  started the render (`WORKFLOW_POOL_ENV`, a folder the workflow names at its start and stops at
  its end, `new_workflow_pool`/`stop_pools`). Local render jobs run side by side, so this pool
  has slots: a render takes the first slot no other render holds, each slot with a server and a
  browser of its own, so renders never wait for each other and at most as many browsers run as
  renders ran at once. Without the variable (a render run by hand): the verb's own browser.
  The folder's name holds its owner, the workflow's main process (`_util.lifetime`): a server
  whose owner has ended (a Snakemake killed with SIGKILL, which runs no `onerror`) leaves within
  `OWNER_POLL_S` of the moment no render holds its slot, not after `IDLE_SECONDS`.

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
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from veriharness._util.lifetime import process_identity
from veriharness.render.setup import DEFAULT_LOAD_TIMEOUT_S, RenderSetupError

POOL_MODES = ("none", "slurm-job", "workflow")
WORKFLOW_POOL_ENV = "VERIHARNESS_BROWSER_POOL"
_SLOT_LIMIT = 1024  # far above any machine's cores: with every slot busy, wait on the last
IDLE_SECONDS = 90.0
OWNER_POLL_S = 1.0  # how often a server with an owner looks whether it still runs
START_TIMEOUT_S = 60.0
# A reply can take as long as one page load plus its capture.
REPLY_MARGIN_S = 60.0


def pool_dir(job_id: str) -> Path:
    """Node-local folder of one cluster job's pool (short: a socket path has a length limit)."""
    return Path(tempfile.gettempdir()) / f"veriharness-browser-{os.getuid()}-{job_id}"


class Pool(NamedTuple):
    """Where a render's pool lives, whether it has slots (`workflow`) or one server, and the
    process whose end ends its servers (`_util.lifetime.process_identity`), if it names one."""

    directory: Path
    slotted: bool
    owner: str | None = None


# A workflow pool's folder name: ...-wf-<owner pid>-<owner start>-<random>.
_OWNED = re.compile(r"-wf-(\d+)-(\d+)-[0-9a-f]+$")


def pool_for(mode: str) -> Pool | None:
    """The pool `mode` asks for here, or None for a browser of the verb's own."""
    if mode not in POOL_MODES:
        choices = ", ".join(POOL_MODES)
        raise RenderSetupError(f"--browser-pool must be one of {choices}, got {mode!r}")
    if mode == "none":
        return None
    job_id = os.environ.get("SLURM_JOB_ID", "")
    if job_id:
        if not job_id.isdigit():
            raise RenderSetupError(f"SLURM_JOB_ID must be a job number, got {job_id!r}")
        return Pool(pool_dir(job_id), slotted=False)
    folder = os.environ.get(WORKFLOW_POOL_ENV, "") if mode == "workflow" else ""
    if not folder:
        return None
    if not os.path.isabs(folder):
        raise RenderSetupError(f"{WORKFLOW_POOL_ENV} must be an absolute path, got {folder!r}")
    owned = _OWNED.search(folder)
    return Pool(Path(folder), slotted=True, owner=f"{owned[1]}:{owned[2]}" if owned else None)


def new_workflow_pool() -> str:
    """The folder of a new workflow run's pool, owned by this process and made by its first
    render (short: a socket path has a length limit). The owner is in the name, not in a file:
    a run that renders nothing, or ends before it starts, leaves nothing behind."""
    pid, start = process_identity(os.getpid()).split(":")
    name = f"veriharness-browser-{os.getuid()}-wf-{pid}-{start}-{secrets.token_hex(4)}"
    return str(Path(tempfile.gettempdir()) / name)


def stop_workflow_pool() -> None:
    """Stop the pool this process's workflow run set up, if a render started one."""
    folder = os.environ.pop(WORKFLOW_POOL_ENV, "")
    if folder:
        stop_pools(Path(folder))


def stop_pools(directory: Path) -> None:
    """Stop every server of a pool folder (each closes its browser) and remove the folder. A
    server busy with a render is waited for: it takes the stop once the render is answered."""
    if not Path(directory).is_dir():
        return
    for socket_path in sorted(Path(directory).glob("**/socket")):
        folder = socket_path.parent
        with _locked(folder):
            client = _connect(socket_path, START_TIMEOUT_S)
            if client is None:
                continue
            with client, client.makefile("rwb") as stream:
                stream.write(json.dumps({"stop": True}).encode() + b"\n")
                stream.flush()
                stream.readline()
    shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(mode=0o700, exist_ok=True)
    with open(directory / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextmanager
def _free_slot(pool: Pool) -> Iterator[Path]:
    """The pool's one folder, or the first of its slots no other render holds, locked."""
    if not pool.slotted:
        with _locked(pool.directory):
            yield pool.directory
        return
    pool.directory.mkdir(mode=0o700, exist_ok=True)
    for k in range(_SLOT_LIMIT):
        folder = pool.directory / f"slot-{k}"
        folder.mkdir(mode=0o700, exist_ok=True)
        with open(folder / "lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (fcntl.LOCK_NB if k < _SLOT_LIMIT - 1 else 0))
            except BlockingIOError:
                continue
            yield folder
            return


def _connect(path: Path, timeout: float) -> socket.socket | None:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout)
    try:
        client.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        client.close()
        return None
    return client


def _start_server(
    directory: Path, load_timeout_s: float, chromium: str | None, owner: str | None
) -> None:
    """Start the pool's server and wait until it listens (it binds only once Chromium runs)."""
    path = directory / "socket"
    path.unlink(missing_ok=True)  # left by a server that was killed
    command = [sys.executable, "-m", "veriharness.render.pool_server", "--dir", str(directory),
               "--load-timeout", str(load_timeout_s)]  # fmt: skip
    if chromium:
        command += ["--chromium", chromium]
    if owner:
        command += ["--owner", owner]
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
    pool: Pool,
    request: dict[str, str],
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S,
    chromium: str | None = None,
) -> str:
    """Render one run in the pool's browser, starting its server if none runs; its status."""
    with _free_slot(pool) as directory:
        client = _connect(directory / "socket", load_timeout_s + REPLY_MARGIN_S)
        if client is None:
            _start_server(directory, load_timeout_s, chromium, pool.owner)
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
