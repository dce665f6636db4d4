"""What containment adds to a session's start: its own network namespace with the bridge, the
cgroup and the two size-limited tmpfs (issue 24 bounds it at 0.2 s of wall time).

Run: python3 bench/containment.py [--rounds 20] [--sessions 4]

Three measurements, interleaved round by round so machine load falls on both sides alike:

- `start`: the sandbox's start-up alone. The same bwrap sandbox a session gets runs a command
  that connects once to a loopback port outside and exits, without containment (network
  shared, no cgroup) and with it (`--unshare-net`, the bridge's inside half, the cgroup's
  joining shell, the outside half listening on a unix socket). The command stands in for
  `claude` reaching its proxy, so the bridge's first connection is inside the figure.
- `limits`: making and removing the limits of one session (cgroup with its two limits, two
  tmpfs mounts and unmounts).
- `session`: whole sessions of the real `claude` CLI with the offline model, `network: none`
  against `open` (limits in force for both; they cannot be turned off), median wall seconds.

The added start-up is `start` (contained minus bare) plus `limits`; it is printed in seconds
and as a ratio to the median wall time of an uncontained session.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from veriharness._util.containment import SessionCgroup, mount_tmpfs, unmount
from veriharness._util.programs import find_bwrap
from veriharness.agent.bridge import UnixToTcp, bridge_command
from veriharness.agent.isolation import sandboxed
from veriharness.agent.session import run_session
from veriharness.experiment.config import SessionLimits
from veriharness.experiment.environment import software_paths

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.sessions import TASK, offline_plan  # noqa: E402

CONNECT = "import socket; socket.create_connection(('127.0.0.1', {port}), 5).close()"


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)

    def accept() -> None:
        while True:
            try:
                server.accept()[0].close()
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server


def _sandbox(
    command: list[str], scratch: Path, readable: list[Path], own_network: bool
) -> list[str]:
    return sandboxed(
        command,
        bwrap=find_bwrap(),
        readable=[*software_paths(ROOT), *readable],
        writable=[scratch],
        workdir=scratch,
        home=scratch,
        own_network=own_network,
    )


def _timed(command: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - began


def start_once(scratch: Path, port: int, contained: bool) -> float:
    probe = [sys.executable, "-I", "-S", "-c", CONNECT.format(port=port)]
    if not contained:
        return _timed(_sandbox(probe, scratch, [], own_network=False))
    group = SessionCgroup.create(2048, 512)  # made and removed in `limits`, not timed here
    began = time.perf_counter()
    sockets = Path(tempfile.mkdtemp(dir=scratch))
    outside = UnixToTcp(sockets / f"{port}.sock", port)
    script = ROOT / "src" / "veriharness" / "agent" / "bridge.py"
    command = bridge_command(sys.executable, script, {port: outside.path}, probe)
    try:
        subprocess.run(
            group.joined(_sandbox(command, scratch, [sockets, script.parent], own_network=True)),
            check=True,
            capture_output=True,
        )
        outside.close()
        return time.perf_counter() - began
    finally:
        group.close()


def limits_once(scratch: Path) -> float:
    began = time.perf_counter()
    group = SessionCgroup.create(2048, 512)
    disks = [Path(tempfile.mkdtemp(dir=scratch)) for _ in range(2)]
    for disk in disks:
        mount_tmpfs(disk, 1024)
    for disk in disks:
        unmount(disk)
        disk.rmdir()
    group.close()
    return time.perf_counter() - began


def session_once(work: Path, network: str, n: int) -> float:
    plan = offline_plan(
        work / f"{network}-{n}",
        TASK,
        network=network,
        limits=SessionLimits(),
        workspace_root=work / "workspaces",
    )
    outcome = run_session(plan)
    assert outcome.status == "ok", outcome.error
    return outcome.wall_seconds


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms (min {min(values) * 1000:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vh-bench-") as tmp:
        scratch = Path(tmp)
        server = _listener()
        port = server.getsockname()[1]
        bare, contained, limits = [], [], []
        for _ in range(args.rounds):
            bare.append(start_once(scratch, port, contained=False))
            contained.append(start_once(scratch, port, contained=True))
            limits.append(limits_once(scratch))
        server.close()
        sessions: dict[str, list[float]] = {"open": [], "none": []}
        for n in range(args.sessions):
            for network in ("open", "none"):
                sessions[network].append(session_once(scratch, network, n))
    added = statistics.median(contained) - statistics.median(bare) + statistics.median(limits)
    session = statistics.median(sessions["open"])
    print(f"start, bare sandbox:        {_ms(bare)}")
    print(f"start, contained:           {_ms(contained)}")
    print(f"limits, make and remove:    {_ms(limits)}")
    print(f"added start-up per session: {added * 1000:7.1f} ms (bound: 200 ms)")
    print(f"session wall, network open: {session:7.2f} s (median of {args.sessions})")
    print(f"session wall, network none: {statistics.median(sessions['none']):7.2f} s")
    print(f"added start-up / session:   {added / session:.4f}")
    print(f"session none / open:        {statistics.median(sessions['none']) / session:.3f}")


if __name__ == "__main__":
    main()
