"""What the model proxy adds to an agent's requests: each request sent straight to an upstream
and through the proxy to the same upstream, interleaved, with the same HTTP client.

Two upstreams:

- ``offline``: the embedded offline model, sent the request bodies a real session made. One
  session of the real ``claude`` CLI (offline, B3 present) runs first with request logging on;
  its Messages API bodies (the whole conversation each time, growing turn by turn) are replayed.
- ``stream``: a stub that streams ``--events`` server-sent events ``--gap-ms`` apart, the way a
  provider streams tokens, so the first byte comes well before the last.

Per request: time to the first response byte and to the end, as the client sees them (httpx,
one kept-alive connection to each side). "Added" is proxied minus direct, paired request by
request; its median is the figure the issue bounds (2 ms p50, total and first byte). On a
loaded machine every extra process hop waits for a core, so two load-independent figures are
printed too: minimum proxied minus minimum direct, and the proxy process's CPU time per request
(user + system, from /proc). Client,
proxy and upstream each run in their own process, as the session, run-agent and a provider do,
so no two of them share an interpreter lock.

    python3 bench/agent_proxy.py [--rounds 20] [--events 40] [--gap-ms 2]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from veriharness._util.lifetime import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-session-token-0123456789abcdef"


class _Stream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    events = 40
    gap = 0.002

    def setup(self) -> None:
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as providers do

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index in range(self.events):
            data = {"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": f"token {index} "}}  # fmt: skip
            event = f"event: content_block_delta\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%b\r\n" % (len(event), event))
            time.sleep(self.gap)
        self.wfile.write(b"0\r\n\r\n")


def session_bodies(folder: Path) -> list[bytes]:
    """The Messages API bodies one real offline session (B3 present) sent its model."""

    from veriharness.agent.session import run_session

    sys.path.insert(0, str(ROOT / "tests"))
    from support.sessions import offline_plan

    prompt = "Recreate the screenshot `reference.png` as answer.html in the working directory.\n"
    prompt += "<verification_policy>\nRender and compare.\n</verification_policy>\n"
    plan = offline_plan(folder, prompt, workspace_root=None, label="bench-proxy")
    run_dir = plan.run_dir
    outcome = run_session(plan)
    if outcome.status != "ok":
        raise SystemExit(f"the recording session ended {outcome.status}: {outcome.error}")
    bodies = []
    for line in (run_dir / "model_requests.jsonl").read_text().splitlines():
        request = json.loads(line)
        if request["path"].startswith("/v1/messages") and "count_tokens" not in request["path"]:
            bodies.append(json.dumps(request["body"]).encode())
    return bodies


def timed(client: httpx.Client, url: str, body: bytes) -> tuple[float, float]:
    """(first byte, total) in ms for one streamed POST."""
    begun = time.perf_counter()
    first = None
    headers = {"x-api-key": TOKEN, "content-type": "application/json"}
    with client.stream("POST", url, content=body, headers=headers) as response:
        for _ in response.iter_raw():
            if first is None:
                first = time.perf_counter()
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")
    end = time.perf_counter()
    return ((first or end) - begun) * 1000, (end - begun) * 1000


def serve(args: list[str], folder: Path, name: str) -> tuple[subprocess.Popen[bytes], str]:
    """This script (or a verb) as a server process that writes its port to a file."""
    port_file = folder / f"{name}.port"
    process = subprocess.Popen([*args, "--port-file", str(port_file)])
    deadline = time.monotonic() + 60
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{name} did not start")
        time.sleep(0.05)
    time.sleep(0.1)  # the port file of serve-offline is written just before it serves
    return process, f"http://127.0.0.1:{int(port_file.read_text())}"


def compare(name: str, upstream: str, bodies: list[bytes], rounds: int, folder: Path) -> None:
    proxy_server, proxy = serve(
        [sys.executable, __file__, "--serve-proxy", upstream, "--records", str(folder / "r.jsonl")],
        folder,
        "proxy",
    )
    (folder / "proxy.port").unlink()
    direct_ttfb, direct_total, proxied_ttfb, proxied_total = [], [], [], []
    added_ttfb, added_total = [], []
    with (
        httpx.Client(timeout=60, trust_env=False) as straight,
        httpx.Client(timeout=60, trust_env=False) as through,
    ):
        for round_ in range(rounds + 1):
            for index, body in enumerate(bodies):
                path = "/v1/messages"
                # Alternate which goes first, so neither always meets a warmer upstream.
                if (round_ + index) % 2:
                    d = timed(straight, upstream + path, body)
                    p = timed(through, proxy + path, body)
                else:
                    p = timed(through, proxy + path, body)
                    d = timed(straight, upstream + path, body)
                if round_ == 0:
                    cpu_before = cpu_seconds(proxy_server.pid)
                    continue  # warm-up
                direct_ttfb.append(d[0])
                direct_total.append(d[1])
                proxied_ttfb.append(p[0])
                proxied_total.append(p[1])
                added_ttfb.append(p[0] - d[0])
                added_total.append(p[1] - d[1])
    cpu_ms = (cpu_seconds(proxy_server.pid) - cpu_before) * 1000 / len(added_total)
    proxy_server.terminate()
    proxy_server.wait()
    med = statistics.median
    print(
        f"| {name} | {len(added_total)} | {med(direct_ttfb):.2f} | {med(proxied_ttfb):.2f} "
        f"| {med(added_ttfb):.2f} | {min(proxied_ttfb) - min(direct_ttfb):.2f} "
        f"| {med(direct_total):.2f} | {med(proxied_total):.2f} | {med(added_total):.2f} "
        f"| {min(proxied_total) - min(direct_total):.2f} "
        f"| {med(proxied_total) / med(direct_total):.3f} | {cpu_ms:.2f} |",
        flush=True,
    )


def serve_proxy(upstream: str, records: Path, port_file: Path) -> None:
    from veriharness.agent.proxy import ModelProxy, Upstream

    proxy = ModelProxy(Upstream(upstream, "real-key"), TOKEN, records)
    port_file.write_text(str(proxy.server_address[1]))
    proxy.serve_forever()


def serve_stream(events: int, gap_ms: float, port_file: Path) -> None:
    _Stream.events, _Stream.gap = events, gap_ms / 1000
    stub = ThreadingHTTPServer(("127.0.0.1", 0), _Stream)
    stub.daemon_threads = True
    port_file.write_text(str(stub.server_address[1]))
    stub.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="replays of each request")
    parser.add_argument("--events", type=int, default=40, help="events the stream stub sends")
    parser.add_argument("--gap-ms", type=float, default=2.0, help="time between its events")
    parser.add_argument("--serve-proxy", help=argparse.SUPPRESS)
    parser.add_argument("--serve-stream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--records", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_proxy:
        serve_proxy(args.serve_proxy, args.records, args.port_file)
        return
    if args.serve_stream:
        serve_stream(args.events, args.gap_ms, args.port_file)
        return
    if args.rounds < 5:
        parser.error(f"--rounds {args.rounds}: need at least 5")
    with tempfile.TemporaryDirectory(prefix="vh-bench-proxy-") as tmp:
        folder = Path(tmp)
        bodies = session_bodies(folder)
        sizes = sorted(len(b) for b in bodies)
        print(
            f"session bodies: {len(bodies)} requests, {sizes[0] / 1024:.0f}-{sizes[-1] / 1024:.0f}"
            f" KiB; load average at start {os.getloadavg()[0]:.1f}; times in ms, medians\n"
        )
        print(
            "| upstream | requests | direct first byte | proxied first byte | added first byte "
            "| min added first byte | direct total | proxied total | added total "
            "| min added total | ratio total | proxy CPU per request |\n"
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        )
        offline, url = serve(
            [sys.executable, "-m", "veriharness", "serve-offline"], folder, "offline"
        )
        compare("offline model", url, bodies, args.rounds, folder)
        offline.terminate()
        stream, url = serve(
            [sys.executable, __file__, "--serve-stream", "--events", str(args.events),
             "--gap-ms", str(args.gap_ms)],
            folder,
            "stream",
        )  # fmt: skip
        label = f"stream stub ({args.events} events, {args.gap_ms:g} ms apart)"
        compare(label, url, bodies[:3], args.rounds, folder)
        stream.terminate()
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.exit(main())
