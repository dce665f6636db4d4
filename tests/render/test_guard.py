"""The memory guard's escape from a capture its killed renderer left hanging, on real processes
whose command lines read as Chromium's (the guard only reads /proc and sends signals)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from veriharness.render.guard import MemoryGuard


def _chromium_like(*args: str) -> subprocess.Popen[bytes]:
    """A process below this one whose argv[0] names Chromium, with `args` after it."""
    code = "import time; time.sleep(60)"
    command = f"exec -a chromium-stand-in {sys.executable} -c '{code}' {' '.join(args)}"
    return subprocess.Popen(["bash", "-c", command])


def test_a_capture_still_under_way_after_a_renderer_kill_has_its_browser_killed() -> None:
    browser, renderer = _chromium_like(), _chromium_like("--type=renderer")
    try:
        time.sleep(0.5)  # both exec'd
        with MemoryGuard(limit_mb=0, interval_s=0.02, stall_s=0.5) as guard:
            guard.capturing(True)
            assert renderer.wait(timeout=20) == -signal.SIGKILL
            assert browser.wait(timeout=20) == -signal.SIGKILL
            assert [pid for pid, _ in guard.take_kills()] == [renderer.pid]
    finally:
        for process in (browser, renderer):
            process.kill()
            process.wait()


def test_a_capture_that_ended_after_the_kill_leaves_the_browser_running() -> None:
    browser, renderer = _chromium_like(), _chromium_like("--type=renderer")
    try:
        time.sleep(0.5)
        with MemoryGuard(limit_mb=0, interval_s=0.02, stall_s=0.5) as guard:
            guard.capturing(True)
            assert renderer.wait(timeout=20) == -signal.SIGKILL
            guard.capturing(False)
            time.sleep(1.5)
            assert browser.poll() is None
    finally:
        for process in (browser, renderer):
            process.kill()
            process.wait()
