"""A memory fence around Chromium: a renderer that grows past its limit is killed.

Chromium has no setting that caps a renderer's memory as a whole (V8's heap limit leaves out
array buffers, decoded images and layout), and an address-space limit breaks its large
reservations. So while a capture is under way, a thread samples the resident size of every
Chromium renderer below this process every few milliseconds and kills one that passes the limit
with SIGKILL. Between captures no page is open and the thread sleeps: a scan of /proc costs about
2 ms per hundred processes on the machine, and a pool's browsers live as long as the workflow.
Playwright then reports the page as crashed, and the capture records `memory` as the failed
step. The thread only reads /proc and sends signals, so it never touches Playwright from a
second thread.

Playwright does not always answer a call that was in flight when its page's renderer died: the
capture then waited for ever (seen on Chromium 156 with a page of 200,000 rows). So when a
capture is still under way `STALL_S` after a kill, the thread also kills the browser itself;
every pending call then fails, the capture records the memory kill, and the next capture starts
a new browser.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

__all__ = ["MemoryGuard", "STALL_S", "descendants"]

STALL_S = 15.0

_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def descendants(root: int) -> list[int]:
    """The process ids below `root` (not `root` itself), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _renderer_rss_mb(pid: int) -> float | None:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"--type=renderer" not in cmdline:
            return None
        resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident * _PAGE_KB / 1024


class MemoryGuard:
    """Kills any Chromium renderer below this process whose resident size passes `limit_mb`."""

    def __init__(self, limit_mb: int, interval_s: float = 0.05, stall_s: float = STALL_S):
        self.limit_mb = limit_mb
        self.interval_s = interval_s
        self.stall_s = stall_s
        self.killed: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._watching = threading.Event()  # set while a capture is under way
        self._renderers: list[int] = []
        self._sent_kill: set[int] = set()
        self._scans = 0
        self._capturing = False
        self._killed_at: float | None = None
        self._thread = threading.Thread(target=self._watch, name="render-memory-guard", daemon=True)

    def __enter__(self) -> MemoryGuard:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._watching.set()  # wakes the thread if it is waiting for a capture
        self._thread.join(timeout=2)

    def capturing(self, busy: bool) -> None:
        """Mark a capture as started (True: kills of earlier captures are dropped) or ended."""
        self._capturing = busy
        self._killed_at = None
        if busy:
            self.killed = []
            self._scans = 0  # the capture's page has a renderer of its own: look for it first
            self._sent_kill.clear()  # the last capture's killed renderers are gone by now
            self._watching.set()
        else:
            self._watching.clear()

    def take_kills(self) -> list[tuple[int, float]]:
        """Renderers killed since the last call, as (pid, resident MB when killed)."""
        kills, self.killed = self.killed, []
        return kills

    def _stalled(self) -> bool:
        killed = self._killed_at
        return self._capturing and killed is not None and time.monotonic() - killed > self.stall_s

    def _kill_browser(self) -> None:
        """SIGKILL to the browser process (the Chromium below this one with no --type)."""
        self._killed_at = None
        for pid in descendants(os.getpid()):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"chrom" in cmdline.split(b"\0")[0] and b"--type=" not in cmdline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue

    def _watch(self) -> None:
        while self._watching.wait() and not self._stop.wait(self.interval_s):
            if self._stalled():
                self._kill_browser()
            # The full process scan is dearer than reading a few statm files: refresh the list
            # of renderers every fourth round, and when one has gone.
            if self._scans % 4 == 0:
                self._renderers = [
                    pid
                    for pid in descendants(os.getpid())
                    if pid not in self._sent_kill and _renderer_rss_mb(pid) is not None
                ]
            self._scans += 1
            for pid in list(self._renderers):
                size = _renderer_rss_mb(pid)
                if size is None:
                    self._renderers.remove(pid)
                    self._scans = 0
                elif size > self.limit_mb:
                    # A killed process can still be listed a few scans later on a busy machine:
                    # it is killed, and recorded, once.
                    self._renderers.remove(pid)
                    self._sent_kill.add(pid)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed.append((pid, round(size)))
                    self._killed_at = time.monotonic()
