"""Sessions contained, with the real `claude` CLI in the real bubblewrap sandbox.

Six sessions of one matrix run side by side, each an offline agent scripted to run shell
commands before its task (`runs_first`):

- `probe`: reaches for a canary HTTP server on the machine's loopback and on its own address
  with curl, Python's urllib, a raw socket and bash's /dev/tcp, and leaves a process behind
  with `setsid nohup`;
- `open`: the same probes under `agent.network: open`, the control that shows they do reach
  the canary when the network is shared;
- `hog`: allocates 1.5 GiB under a 768 MiB memory limit;
- `forks`: starts 400 sleeping processes under a limit of 256;
- `filler`: writes 3 GiB into its workspace under a 64 MiB disk limit;
- `plain`: does its task.

Each bound is small enough that the test machine is never at risk even if a limit failed.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from support.sessions import TASK, offline_plan, tool_results
from veriharness.agent.plan import SessionPlan
from veriharness.agent.request_record import REQUESTS_FILE, read_requests
from veriharness.agent.session import run_session
from veriharness.experiment.config import SessionLimits
from veriharness.offline.agent_policy import runs_first
from veriharness.runfolder.outcome import AgentOutcome

pytestmark = pytest.mark.slow

LIMITS = SessionLimits(memory_mib=768, processes=256, disk_mib=64)
LEFT_BEHIND = "sleep 7777"
CGROUPS = ("cgroup-v1", "cgroup-v2")


class Canary(ThreadingHTTPServer):
    """An HTTP server standing in for any host outside: it records every path it is asked for."""

    def __init__(self) -> None:
        super().__init__(("0.0.0.0", 0), _CanaryHandler)
        self.hits: list[str] = []


class _CanaryHandler(BaseHTTPRequestHandler):
    server: Canary

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self.server.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"canary page\n")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


def _machine_address() -> str | None:
    listed = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"],
                            capture_output=True, text=True).stdout  # fmt: skip
    for line in listed.splitlines():
        return line.split()[3].split("/")[0]
    return None


def _probes(tag: str, port: int) -> list[str]:
    """Shell commands that each try to reach the canary, naming themselves in the path."""
    hosts = ["127.0.0.1"] + ([address] if (address := _machine_address()) else [])
    commands = []
    for n, host in enumerate(hosts):
        url = f"http://{host}:{port}/{tag}"
        commands += [
            f"curl -s -m 5 {url}-curl-{n} && echo REACHED curl || echo BLOCKED curl",
            f"python3 -c \"import urllib.request as u; print(u.urlopen('{url}-urllib-{n}', "
            'timeout=5).read())" && echo REACHED urllib || echo BLOCKED urllib',
            f"python3 -c \"import socket; s = socket.create_connection(('{host}', {port}), 5); "
            f"s.sendall(b'GET /{tag}-socket-{n} HTTP/1.0\\r\\n\\r\\n'); print(s.recv(64))\" "
            "&& echo REACHED socket || echo BLOCKED socket",
            f"bash -c 'exec 3<>/dev/tcp/{host}/{port} && printf \"GET /{tag}-devtcp-{n} "
            "HTTP/1.0\\r\\n\\r\\n\" >&3 && cat <&3' && echo REACHED devtcp || echo BLOCKED devtcp",
        ]
    return ["; ".join(commands) + f"; setsid nohup {LEFT_BEHIND} >/dev/null 2>&1 &"]


SCRIPTS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "hog": (["python3 -c \"b = b'x' * (1536 << 20); print(len(b))\""], {}),
    "forks": (["for i in $(seq 400); do sleep 120 & done; wait"], {}),
    "filler": (["dd if=/dev/zero of=fill bs=1M count=3072"], {}),
}


class Run(NamedTuple):
    plan: SessionPlan
    outcome: AgentOutcome

    def first_result(self) -> str:
        return next(iter(tool_results(self.plan.run_dir)), "")


class Matrix(NamedTuple):
    runs: dict[str, Run]
    canary_hits: list[str]
    workspaces: Path


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    canary = Canary()
    threading.Thread(target=canary.serve_forever, daemon=True).start()
    port = canary.server_address[1]
    scripts: dict[str, tuple[list[str], dict[str, Any]]] = {
        "probe": (_probes("none", port), {}),
        "open": (_probes("open", port), {"network": "open"}),
        "plain": ([], {}),
        **SCRIPTS,
    }
    workspaces = tmp_path_factory.mktemp("workspaces")
    plans = {}
    for name, (commands, overrides) in scripts.items():
        prompt = TASK + "".join(runs_first(c) + "\n" for c in commands)
        plans[name] = offline_plan(
            tmp_path_factory.mktemp(name), prompt, limits=LIMITS, wall_clock_seconds=300,
            workspace_root=workspaces, **overrides,
        )  # fmt: skip
    try:
        with ThreadPoolExecutor(len(plans)) as pool:
            outcomes = dict(zip(plans, pool.map(run_session, plans.values()), strict=True))
    finally:
        canary.shutdown()
    yield Matrix(
        {name: Run(plans[name], outcomes[name]) for name in plans}, canary.hits, workspaces
    )


def test_a_session_without_network_reaches_nothing_but_its_model_and_tool(matrix: Matrix) -> None:
    probe = matrix.runs["probe"]
    assert (probe.outcome.status, probe.outcome.error) == ("ok", None)
    assert probe.outcome.session_network == "none" and probe.outcome.mllm_connected is True
    assert not [hit for hit in matrix.canary_hits if hit.startswith("/none")]
    looked = probe.first_result()
    assert looked.count("BLOCKED") >= 4 and "REACHED" not in looked, looked[-2000:]
    # Its model and its tool did work, through the bridge, and the proxy recorded each request.
    records = read_requests(probe.plan.run_dir / REQUESTS_FILE)
    assert records and all(r.status == 200 for r in records)
    trace = (probe.plan.run_dir / "mllm_trace.jsonl").read_text()
    assert '"mllm_call_completed"' in trace


def test_the_same_probes_reach_the_canary_when_the_network_is_open(matrix: Matrix) -> None:
    run = matrix.runs["open"]
    assert (run.outcome.status, run.outcome.session_network) == ("ok", "open")
    reached = {hit.split("-")[1] for hit in matrix.canary_hits if hit.startswith("/open")}
    assert reached == {"curl", "urllib", "socket", "devtcp"}, matrix.canary_hits


@pytest.mark.parametrize(("name", "limit"), [("hog", "memory"), ("forks", "processes"),
                                              ("filler", "disk")])  # fmt: skip
def test_a_session_past_a_limit_ends_resource_limit_and_keeps_its_record(
    matrix: Matrix, name: str, limit: str
) -> None:
    run = matrix.runs[name]
    assert (run.outcome.status, run.outcome.limit) == ("resource_limit", limit), run.outcome.error
    assert run.outcome.error and limit in run.outcome.error
    # Stopped at the limit, long before its wall clock, with its transcript and records kept.
    assert run.outcome.wall_seconds < 200
    transcript = (run.plan.run_dir / "transcript.jsonl").read_text()
    assert json.dumps(SCRIPTS[name][0][0])[1:-1] in transcript  # its command, as it called it
    assert read_requests(run.plan.run_dir / REQUESTS_FILE)
    assert (run.plan.run_dir / "outcome.json").exists()


def test_every_limit_is_enforced_and_recorded(matrix: Matrix) -> None:
    for run in matrix.runs.values():
        limits = run.outcome.enforced_limits
        assert limits is not None
        assert limits.memory.by in CGROUPS and limits.processes.by in CGROUPS
        assert (limits.memory.value, limits.processes.value) == (
            LIMITS.memory_mib,
            LIMITS.processes,
        )
        assert (limits.disk.by, limits.disk.value) == ("tmpfs", LIMITS.disk_mib)


def test_the_other_sessions_of_the_matrix_end_ok(matrix: Matrix) -> None:
    plain = matrix.runs["plain"].outcome
    assert (plain.status, plain.answer_present, plain.mllm_connected) == ("ok", True, True)


def _session_paths(outcome: AgentOutcome) -> set[Path]:
    """The session's cgroups and private folder, as its command line names them."""
    text = " ".join(outcome.command)
    groups = re.findall(r"(/sys/fs/cgroup/[^\s'\";]+)/cgroup\.procs", text)
    folders = re.findall(r"(/[^\s'\";=]*/veriharness-session-[A-Za-z0-9_]+)", text)
    return {Path(p) for p in groups + folders}


def test_nothing_of_any_session_remains(matrix: Matrix) -> None:
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert LEFT_BEHIND not in processes and "sleep 120" not in processes
    assert list(matrix.workspaces.iterdir()) == []
    mounts = _every_mount_table()
    for run in matrix.runs.values():
        paths = _session_paths(run.outcome)
        # Two cgroups (memory and pids) and the private folder, all gone.
        assert len(paths) == 3 and not [p for p in paths if p.exists()], paths
        assert not [p for p in paths if str(p) in mounts]
        assert str(run.outcome.workspace) not in mounts


def _every_mount_table() -> str:
    """The mount tables of every thread of every process: a session's tmpfs lives in a mount
    namespace of its own thread, so no single table would show one left behind."""
    tables = []
    for table in Path("/proc").glob("[0-9]*/task/[0-9]*/mountinfo"):
        try:
            tables.append(table.read_text())
        except OSError:
            continue
    return "".join(tables)
