"""Sessions against a rate-limited provider: paced (execution.pace) against a fixed number of
concurrent sessions without pacing (issue 27).

Run: python3 bench/rate_limits.py [--sessions 64] [--fixed 8] [--rpm 300] [--tpm 600000]
     [--runs paced,fixed]

The provider is a stand-in on loopback in front of the embedded offline model. Like a real
provider it counts, over a rolling minute, the requests and the tokens of `/v1/messages` (request
bytes / 4 when a request arrives, replaced by the input, output and cache-write tokens of the
answer's usage once answered, as Anthropic's limits count them), answers 429 with
`retry-after` (the seconds until the oldest counted request leaves the minute) when a request
would pass either limit, and states its limits and what remains in `anthropic-ratelimit-*`
headers on every answer.

Two runs of `--sessions` sessions of the real `claude` CLI (offline agent, B3 absent, each in
its sandbox), through `run_session` with the stand-in as the agent's gateway:

- `paced`: all sessions started at once, `pace: true`: each waits to start while the provider
  is saturated, and its proxy holds requests to the stated limits and any 429's retry-after;
- `fixed`: `pace: false`, at most `--fixed` sessions at a time (the `agent_sessions` a
  researcher would have to guess), every request sent as it comes.

Printed per run: wall time, tokens per minute achieved (counted by the stand-in) as a share of
its limit, 429 answers as a share of the requests it received, and the sessions' outcomes
(`infra_error` after Claude Code gave up on its own retries would be the failure to avoid).
Targets: tokens per minute >= 85% of the limit; no infra_error from 429; 429s <= 10% of requests.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from veriharness.agent.session import run_session
from veriharness.offline.server import running_offline_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.sessions import TASK, offline_plan  # noqa: E402

WINDOW_S = 60.0


class RateLimitedProvider(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, rpm: int, tpm: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rpm, self.tpm = rpm, tpm
        self.lock = threading.Lock()
        self.window: collections.deque[list[float]] = collections.deque()  # [time, tokens]
        self.counts: collections.Counter[str] = collections.Counter()
        self.tokens_served = 0
        self.first_at: float | None = None
        self.last_at: float | None = None

    def admit(self, tokens: int) -> tuple[list[float] | None, float, dict[str, str]]:
        """The window entry of an admitted request, or None with the seconds to wait."""
        with self.lock:
            now = time.time()
            while self.window and self.window[0][0] <= now - WINDOW_S:
                self.window.popleft()
            used = sum(e[1] for e in self.window)
            headers = {
                "anthropic-ratelimit-requests-limit": str(self.rpm),
                "anthropic-ratelimit-requests-remaining": str(max(0, self.rpm - len(self.window))),
                "anthropic-ratelimit-tokens-limit": str(self.tpm),
                "anthropic-ratelimit-tokens-remaining": str(max(0, int(self.tpm - used))),
            }
            if len(self.window) + 1 > self.rpm or used + tokens > self.tpm:
                need, freed, wait = used + tokens - self.tpm, 0.0, 1.0
                for at, spent in self.window:
                    freed += spent
                    wait = at + WINDOW_S - now
                    if freed >= need:
                        break
                self.counts["429"] += 1
                return None, max(1.0, wait), headers
            entry = [now, float(tokens)]
            self.window.append(entry)
            self.counts["200"] += 1
            self.first_at = self.first_at or now
            return entry, 0.0, headers

    def served(self, entry: list[float], tokens: int | None) -> None:
        with self.lock:
            if tokens is not None:
                entry[1] = float(tokens)
            self.tokens_served += int(entry[1])
            self.last_at = time.time()


class _Handler(BaseHTTPRequestHandler):
    server: RateLimitedProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._forward(b"", None, {})

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        self._forward(b"", None, {})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not urlsplit(self.path).path.endswith("/messages"):
            self._forward(body, None, {})
            return
        entry, wait, headers = self.server.admit(len(body) // 4)
        if entry is None:
            payload = (b'{"type":"error","error":{"type":"rate_limit_error",'
                       b'"message":"rate limit exceeded (stand-in)"}}')  # fmt: skip
            self.send_response(429)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("retry-after", f"{wait:.0f}")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self._forward(body, entry, headers)

    def _forward(self, body: bytes, entry: list[float] | None, headers: dict[str, str]) -> None:
        conn = http.client.HTTPConnection(*self.server.upstream, timeout=600)
        keep = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body, keep)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if entry is not None:
            self.server.served(entry, _usage_tokens(data))


def _usage_tokens(answer: bytes) -> int | None:
    """Input, output and cache-write tokens of a Messages answer, JSON or event stream (its
    message_delta carries the final output count), or None when it states no usage."""
    names = (b"input_tokens", b"output_tokens", b"cache_creation_input_tokens")
    counts = {
        name: max((int(n) for n in re.findall(rb'"%s":\s*(\d+)' % name, answer)), default=0)
        for name in names
    }
    if not counts[b"input_tokens"] and not counts[b"output_tokens"]:
        return None
    return sum(counts.values())


@contextmanager
def provider(rpm: int, tpm: int) -> Iterator[RateLimitedProvider]:
    with running_offline_server() as offline:
        server = RateLimitedProvider(offline, rpm, tpm)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.server_close()


def run(name: str, sessions: int, workers: int, paced: bool, rpm: int, tpm: int) -> None:
    # A held request whose session has ended may still write its pace event into the folder
    # while it is being removed: the figures are printed all the same.
    with (
        tempfile.TemporaryDirectory(prefix=f"vh-rate-{name}-", ignore_cleanup_errors=True) as tmp,
        provider(rpm, tpm) as up,
    ):
        work = Path(tmp)
        plans = [
            offline_plan(
                work / f"s{n:03d}", TASK, endpoint="gateway",
                base_url=f"http://127.0.0.1:{up.server_address[1]}",
                api_key_env="VH_BENCH_KEY", pace=paced, infra_retries=0,
                workspace_root=work / "workspaces", wall_clock_seconds=1800,
            )
            for n in range(sessions)
        ]  # fmt: skip
        # The sessions share one experiment folder (and so one pace), as a matrix does.
        plans = [p.model_copy(update={"spend": p.ledger.model_copy(
            update={"experiment_dir": work / "experiment"})}) for p in plans]  # fmt: skip
        began = time.time()
        with ThreadPoolExecutor(workers) as pool:
            outcomes = list(pool.map(run_session, plans))
        wall = time.time() - began
    statuses = collections.Counter(o.status for o in outcomes)
    sent = up.counts["200"] + up.counts["429"]
    span = (up.last_at or began) - (up.first_at or began)
    per_minute = up.tokens_served / max(span, 1e-9) * 60
    print(
        f"{name:6}  sessions {sessions:3d} (at once {workers:3d})  wall {wall:7.1f} s  "
        f"tokens/min {per_minute:9.0f} = {per_minute / tpm:5.1%} of the limit  "
        f"429s {up.counts['429']:4d} of {sent:4d} requests = "
        f"{up.counts['429'] / max(sent, 1):5.1%}  "
        f"outcomes {dict(statuses)}"
    )
    for outcome in outcomes:
        if outcome.status != "ok":
            print(f"        {outcome.status}: {outcome.error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--fixed", type=int, default=8)
    parser.add_argument("--rpm", type=int, default=300)
    parser.add_argument("--tpm", type=int, default=600_000)
    parser.add_argument(
        "--runs", default="paced,fixed", help="which of the two runs, comma-separated"
    )
    args = parser.parse_args()
    runs = args.runs.split(",")
    if unknown := set(runs) - {"paced", "fixed"}:
        parser.error(f"--runs: unknown run(s) {sorted(unknown)}; choose from paced, fixed")
    os.environ.setdefault("VH_BENCH_KEY", "bench-key")
    if "paced" in runs:
        run("paced", args.sessions, args.sessions, True, args.rpm, args.tpm)
    if "fixed" in runs:
        run("fixed", args.sessions, args.fixed, False, args.rpm, args.tpm)


if __name__ == "__main__":
    main()
