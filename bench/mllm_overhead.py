"""What the CallMLLM server adds to a model request, against the least any client must do.

Runs ``veriharness mllm-server`` as a real MCP server in front of the local provider stub from
``tests/mllm``, twice: over stdio (the transport sessions used before the server moved out of the
sandbox) and over streamable HTTP on loopback with the session token (what ``run-agent`` uses
now), each reached with the MCP SDK's client, and sends ``--calls`` requests per case to each.

Images: real Chromium screenshots at 1920x1080 (Debian's chromium through playwright, the
project's ``Renderer``). ``flat`` is ``tasks/landing-page/reference.html`` alone; ``photo`` puts
that page beside a column with two photograph-like JPEGs (1/f noise, the spectrum of natural
images), the kind of screenshot whose PNG runs to megabytes. Each image is sent whole and as an
800x600 region.

Per call, "added" is the MCP client's wall time minus the stub's own handling time. The floor,
measured in the same run against the same stub, interleaved call by call with the server's, is
what a bare client must do: read the file, crop and PNG-encode a region, base64, build the JSON
body (image bytes spliced in, as the server does) and POST it once with a reused ``httpx.Client``,
then parse the reply (again minus the stub's time). The floor hashes nothing and writes no trace.

Two baselines show the irreducible part: the MCP stdio round trip of a no-op tool served by the
same SDK (this script re-run as a server with ``--serve-noop``), and of a call the real server
refuses at validation (no HTTP; one trace line).

    python3 bench/mllm_overhead.py [--calls 100] [--image PNG ...] [--profile server.prof]

The same ``CallService`` is also driven in this process (no MCP, no second process), which
splits the added time into the server's own work and the MCP stdio hop. (The stub runs in this
process, so the floor and the in-process call reach it without crossing processes while the
server does; with a remote provider every client pays that crossing.) ``--profile`` writes
cProfile statistics of those in-process calls. On a shared machine the medians move with the
load; the ratio of the minima shows the undisturbed cost.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "mllm"))
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mllm_mcp_client import BlockingMcpClient, HttpEndpoint, http_server  # noqa: E402
from mllm_provider_stub import ProviderStub  # noqa: E402

REGION = {"x": 1000, "y": 200, "width": 800, "height": 600}
WARMUP = 5
SIZE = (1920, 1080)
PHOTO_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {margin: 0; display: flex; font-family: "DejaVu Sans", sans-serif; background: #fff}
iframe {border: 0; width: 1280px; height: 1080px}
aside {width: 640px; height: 1080px; overflow: hidden}
aside img {display: block; width: 640px; height: 430px}
aside p {margin: 16px 24px; font-size: 15px; line-height: 1.5; color: #334155}
</style></head><body><iframe src="landing/reference.html"></iframe><aside>
<img src="photo1.jpg"><p>Field notes from the spring survey: the upper meadow after rain, the
ridge still in cloud, taken on the second morning.</p><img src="photo2.jpg">
<p>The shore path at low tide.</p></aside></body></html>"""


def photo_like(width: int, height: int, seed: int) -> Image.Image:
    """Colour 1/f noise with a little sensor grain: compresses like a photograph, not a UI."""
    rng = np.random.default_rng(seed)
    freq = np.hypot(np.fft.fftfreq(height)[:, None], np.fft.rfftfreq(width)[None, :])
    freq[0, 0] = 1.0
    channels = []
    for _ in range(3):
        spectrum = (rng.normal(size=freq.shape) + 1j * rng.normal(size=freq.shape)) / freq**1.1
        spectrum[0, 0] = 0
        plane = np.fft.irfft2(spectrum, s=(height, width))
        channels.append(plane / plane.std())
    mix = np.array([[1.0, 0.6, 0.3], [0.5, 1.0, 0.4], [0.2, 0.5, 1.0]])
    pixels = np.tensordot(np.stack(channels, -1), mix, axes=([2], [1]))
    pixels = 128 + 40 * pixels / pixels.std() + rng.normal(0, 4, size=pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def render_screenshots(folder: Path) -> dict[str, Path]:
    """The two benchmark screenshots, rendered by Chromium at 1920x1080."""
    from veriharness.render.browser import Renderer
    from veriharness.runfolder.render import Size

    site = folder / "site"
    shutil.copytree(ROOT / "tasks" / "landing-page", site / "landing")
    for seed in (1, 2):
        photo_like(640, 430, seed).save(site / f"photo{seed}.jpg", quality=88)
    (site / "photo.html").write_text(PHOTO_PAGE)
    pages = {"flat": site / "landing" / "reference.html", "photo": site / "photo.html"}
    shots = {}
    with Renderer() as renderer:
        for name, page in pages.items():
            capture = renderer.capture(page, site, Size(width=SIZE[0], height=SIZE[1]))
            if capture.status != "ok" or capture.viewport_png is None or capture.blocked_requests:
                raise SystemExit(
                    f"rendering {page} failed: {capture.error} "
                    f"(blocked: {capture.blocked_requests})"
                )
            shots[name] = folder / f"{name}.png"
            shots[name].write_bytes(capture.viewport_png)
    return shots


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def floor_call(
    http: httpx.Client, stub: ProviderStub, path: Path, region: dict[str, int] | None
) -> float:
    """One bare client request; returns its time minus the stub's handling time, in ms."""
    begun = time.perf_counter()
    data = path.read_bytes()
    media = "image/png"
    if region is not None:
        box = (
            region["x"],
            region["y"],
            region["x"] + region["width"],
            region["y"] + region["height"],
        )
        out = io.BytesIO()
        Image.open(io.BytesIO(data)).crop(box).save(out, format="PNG")
        data = out.getvalue()
    skeleton = json.dumps(
        {
            "model": "m",
            "max_tokens": 1024,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Describe."},
                        {"type": "image_url", "image_url": {"url": "@"}},
                    ],
                }
            ],
        }
    )
    before, after = skeleton.split('"@"')
    body = b"".join(
        [
            before.encode(),
            f'"data:{media};base64,'.encode(),
            base64.b64encode(data),
            b'"',
            after.encode(),
        ]
    )
    response = http.post(
        f"{stub.base}/ok/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    response.json()["choices"][0]["message"]["content"]
    return (time.perf_counter() - begun) * 1000 - stub.received[-1].handling_ms


def server_call(client: BlockingMcpClient, stub: ProviderStub, args: dict[str, Any]) -> float:
    begun = time.perf_counter()
    result = client.call(args)
    elapsed = (time.perf_counter() - begun) * 1000
    if result.is_error:
        raise SystemExit(f"call failed: {result.content[0].text}")
    return elapsed - stub.received[-1].handling_ms


def round_trips(
    client: BlockingMcpClient, args: dict[str, Any], n: int, tool: str = "call"
) -> list[float]:
    times = []
    for i in range(n + WARMUP):
        begun = time.perf_counter()
        client.call(args, tool)
        if i >= WARMUP:
            times.append((time.perf_counter() - begun) * 1000)
    return times


def service_call(
    service: Any, stub: ProviderStub, args: dict[str, Any], profiler: cProfile.Profile | None
) -> float:
    """The server's own ``CallService.call`` in this process: everything but the MCP hop."""
    begun = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    service.call(args)
    if profiler is not None:
        profiler.disable()
    return (time.perf_counter() - begun) * 1000 - stub.received[-1].handling_ms


def make_service(ws: Path, catalog: Path, trace: Path) -> Any:
    from veriharness.experiment.catalog import load_catalog
    from veriharness.experiment.taxonomy import load_taxonomy
    from veriharness.mllm.server import CallService
    from veriharness.mllm.trace import TraceWriter

    taxonomy = load_taxonomy(ROOT / "prompts" / "taxonomy" / "capabilities-v0.1.yaml")
    return CallService(ws.resolve(), load_catalog(catalog), taxonomy, TraceWriter(trace))


HEADER = (
    "| case | MCP added p50 | MCP added p95 | in-process p50 | floor p50 | floor p95 "
    "| MCP-floor p50 | ratio p50 | ratio p95 | in-process ratio p50 | ratio of minima "
    "| HTTP added p50 | HTTP added p95 | HTTP-stdio p50 |\n"
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
    "| ---: | ---: | ---: |"
)


def row(
    name: str, added: list[float], local: list[float], floor: list[float], http: list[float]
) -> str:
    a50, a95, f50, f95 = (
        statistics.median(added),
        percentile(added, 95),
        statistics.median(floor),
        percentile(floor, 95),
    )
    l50 = statistics.median(local)
    return (
        f"| {name} | {a50:.2f} | {a95:.2f} | {l50:.2f} | {f50:.2f} | {f95:.2f} "
        f"| {a50 - f50:.2f} | {a50 / f50:.2f} | {a95 / f95:.2f} | {l50 / f50:.2f} "
        f"| {min(added) / min(floor):.2f} "
        f"| {statistics.median(http):.2f} | {percentile(http, 95):.2f} "
        f"| {statistics.median(http) - a50:.2f} |"
    )


def run_case(
    client: BlockingMcpClient,
    over_http: BlockingMcpClient,
    service: Any,
    http: httpx.Client,
    stub: ProviderStub,
    image: Path,
    region: dict[str, int] | None,
    calls: int,
    profiler: cProfile.Profile | None,
) -> tuple[list[float], ...]:
    """MCP call (stdio), MCP call (HTTP), in-process call and floor, interleaved call by call."""
    item: dict[str, Any] = {"kind": "image", "label": "page", "path": image.name}
    if region is not None:
        item["region"] = region
    args = {
        "instruction": "Describe.",
        "inputs": [item],
        "capability_tags": ["E1"],
        "output": {"kind": "text"},
    }
    added: list[float] = []
    local: list[float] = []
    floor: list[float] = []
    by_http: list[float] = []
    for i in range(calls + WARMUP):
        a = server_call(client, stub, args)
        h = server_call(over_http, stub, args)
        s = service_call(service, stub, args, profiler)
        f = floor_call(http, stub, image, region)
        if i >= WARMUP:
            added.append(a)
            by_http.append(h)
            local.append(s)
            floor.append(f)
    return added, local, floor, by_http


REFUSED = {"instruction": "x", "inputs": [], "capability_tags": ["E1"], "output": {"kind": "text"}}


def baselines(server: StdioServerParameters, over_http: BlockingMcpClient, calls: int) -> None:
    """MCP round trips that do no model work: no-op tools and a refused call."""
    noop = StdioServerParameters(
        command=sys.executable, args=[__file__, "--serve-noop"], env=dict(os.environ)
    )
    with open(os.devnull, "w") as quiet, BlockingMcpClient(noop, quiet) as client:
        nothing = round_trips(client, {}, calls)
        hopped = round_trips(client, {}, calls, "threaded")
    with open(os.devnull, "w") as quiet, BlockingMcpClient(server, quiet) as client:
        refused = round_trips(client, REFUSED, calls)
    refused_http = round_trips(over_http, REFUSED, calls)
    print()
    for what, times in (
        ("no-op tool (same MCP SDK, stdio)", nothing),
        ("no-op tool run in a worker thread, as the server runs a call", hopped),
        ("refused call on the real server (validation + trace line)", refused),
        ("refused call on the real server over streamable HTTP", refused_http),
    ):
        print(
            f"MCP round trip, {what}: p50 {statistics.median(times):.2f} ms, "
            f"p95 {percentile(times, 95):.2f} ms"
        )


def measure(
    shots: dict[str, Path], calls: int, regions: bool, profile: Path | None, tmp: Path
) -> None:
    cases: list[tuple[str, dict[str, int] | None]] = [("full", None)]
    if regions:
        cases.append(("region 800x600", REGION))
    ws = tmp / "ws"
    ws.mkdir()
    for name, shot in shots.items():
        shutil.copy(shot, ws / f"{name}.png")
        size = (ws / f"{name}.png").stat().st_size
        print(f"image {name}: 1920x1080 PNG, {size / 1024:.0f} KiB")
    stub = ProviderStub().start()
    catalog = tmp / "catalog.yaml"
    catalog.write_text(
        "profiles:\n  - name: default\n    description: stub\n    provider:\n"
        f"      api_style: openai-chat\n      base_url: {stub.base}/ok/v1\n      model: m\n"
    )
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "veriharness",
            "mllm-server",
            "--workspace",
            str(ws),
            "--catalog",
            str(catalog),
            "--trace",
            str(tmp / "trace.jsonl"),
        ],
        env=dict(os.environ),
    )
    print(
        f"{calls} calls per case after {WARMUP} warm-up calls; MCP call, in-process call "
        f"and floor interleaved; times in ms; load average at start {os.getloadavg()[0]:.1f}\n"
    )
    print(HEADER)
    service = make_service(ws, catalog, tmp / "trace-inprocess.jsonl")
    profiler = cProfile.Profile() if profile else None
    token = "bench-session-token-0123456789"
    with (
        open(os.devnull, "w") as quiet,
        BlockingMcpClient(server, quiet) as client,
        http_server(
            ws, catalog, tmp / "trace-http.jsonl", dict(os.environ), token, tmp / "http.log"
        ) as url,
        BlockingMcpClient(HttpEndpoint(url, token)) as over_http,
        httpx.Client(transport=httpx.HTTPTransport(retries=0), trust_env=False) as http,
    ):
        for name in shots:
            for label, region in cases:
                times = run_case(
                    client,
                    over_http,
                    service,
                    http,
                    stub,
                    ws / f"{name}.png",
                    region,
                    calls,
                    profiler,
                )
                print(row(f"{name} {label}", *times), flush=True)
        baselines(server, over_http, calls)
    service.close()
    if profiler is not None and profile is not None:
        profiler.dump_stats(profile)
    stub.stop()
    print(f"load average at end {os.getloadavg()[0]:.1f}")


def serve_noop() -> None:
    """The SDK's floor: the low-level Server the mllm server is built on, with two tools that
    do nothing, one answered on the event loop and one after a worker-thread hop."""
    import anyio
    import anyio.to_thread
    import mcp_types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        empty: dict[str, Any] = {"type": "object", "properties": {}}
        tools = [mcp_types.Tool(name=name, input_schema=empty) for name in ("call", "threaded")]
        return mcp_types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> mcp_types.CallToolResult:
        text = "ok" if params.name == "call" else await anyio.to_thread.run_sync(str, "ok")
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])

    server: Server[Any] = Server("noop", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument(
        "--image",
        type=Path,
        nargs="*",
        default=None,
        help="use these PNGs instead of rendering the two screenshots",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="profile the in-process calls, cProfile statistics to this file",
    )
    parser.add_argument("--no-region", action="store_true", help="only send whole images")
    parser.add_argument("--serve-noop", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_noop:
        serve_noop()
        return
    if args.calls < 20:
        parser.error(f"--calls {args.calls}: need at least 20 for a p95")
    with tempfile.TemporaryDirectory() as tmp:
        if args.image:
            shots = {path.stem: path for path in args.image}
        else:
            shots = render_screenshots(Path(tmp))
        measure(shots, args.calls, not args.no_region, args.profile, Path(tmp))


if __name__ == "__main__":
    main()
