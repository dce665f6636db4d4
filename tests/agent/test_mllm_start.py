"""How long a session waits for its mllm server to listen: bounded by the CPU the server uses,
so a loaded machine makes the start slow, never failed; a server that ends or spins says so."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from veriharness.agent import session


def _start(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_server_that_ends_before_listening_is_named_with_its_exit_code(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("mllm-server: --catalog: no such file\n")
    server = _start("raise SystemExit(3)")
    with pytest.raises(RuntimeError, match=r"ended with exit code 3: mllm-server: --catalog"):
        session._wait_until_listening(server, tmp_path / "port", log)


def test_a_server_that_spins_without_listening_is_stopped_by_its_cpu_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "_MLLM_START_CPU_SECONDS", 0.3)
    log = tmp_path / "server.log"
    log.write_text("")
    server = _start("while True: pass")
    try:
        with pytest.raises(RuntimeError, match=r"used [0-9.]+ CPU-seconds without listening"):
            session._wait_until_listening(server, tmp_path / "port", log)
    finally:
        server.kill()
        server.wait()


def test_a_server_slower_in_wall_time_than_its_cpu_bound_is_still_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Waiting for the CPU (here: asleep) costs the server no CPU time, so it is not given up on
    # even after the CPU bound has passed in wall time.
    monkeypatch.setattr(session, "_MLLM_START_CPU_SECONDS", 0.3)
    port = tmp_path / "port"
    server = _start(
        f"import time, pathlib; time.sleep(1.5); pathlib.Path({str(port)!r}).write_text('1')"
    )
    began = time.monotonic()
    session._wait_until_listening(server, port, tmp_path / "server.log")
    assert time.monotonic() - began >= 1.0 and port.read_text() == "1"
    server.wait()
