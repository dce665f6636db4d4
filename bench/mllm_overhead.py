"""What the CallMLLM server adds to a model request, against the least any client must do.

Runs ``veriharness mllm-server`` as a real stdio MCP server in front of the local provider stub
from ``tests/mllm``, and sends ``--calls`` requests with a 1920x1080 screenshot-like PNG, first
the full image, then a region. For each call the tool's added time is the client's wall time
minus the stub's own handling time. The floor, measured in the same run against the same stub,
is what a bare client does: read the file, crop and encode the region as PNG, base64, build the
JSON body and POST it once with httpx (again minus the stub's handling time).

    python3 bench/mllm_overhead.py [--calls 100]

Prints p50/p95 in milliseconds and the ratio of medians added/floor (target <= 1.5), and the
round trip of a refused call (validation only, no HTTP), which is the MCP stdio hop itself.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "mllm"))
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mllm_mcp_client import BlockingMcpClient  # noqa: E402
from mllm_provider_stub import ProviderStub  # noqa: E402

REGION = {"x": 400, "y": 200, "width": 800, "height": 600}
WARMUP = 5


def screenshot_like(path: Path) -> None:
    """Flat panels, text lines and a gradient banner, like a rendered web page."""
    image = Image.new("RGB", (1920, 1080), (248, 249, 251))
    draw = ImageDraw.Draw(image)
    for x in range(1920):
        draw.line([(x, 0), (x, 120)], fill=(40 + x * 60 // 1920, 90, 180 - x * 60 // 1920))
    for column in range(3):
        left = 80 + column * 600
        draw.rounded_rectangle([left, 200, left + 540, 1000], radius=16, fill=(255, 255, 255),
                               outline=(220, 224, 230))
        for line in range(30):
            draw.text((left + 24, 230 + line * 25), f"Row {line}: value {line * 37 % 101} units",
                      fill=(30, 30, 30))
    image.save(path, format="PNG")


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def through_server(
    client: BlockingMcpClient, stub: ProviderStub, args: dict, n: int
) -> list[float]:
    added = []
    for i in range(n + WARMUP):
        begun = time.perf_counter()
        result = client.call(args)
        elapsed = (time.perf_counter() - begun) * 1000
        if result.is_error:
            raise SystemExit(f"call failed: {result.content[0].text}")
        if i >= WARMUP:
            added.append(elapsed - stub.received[-1].handling_ms)
    return added


def direct(http: httpx.Client, stub: ProviderStub, path: Path, region: dict | None,
           n: int) -> list[float]:
    floor = []
    for i in range(n + WARMUP):
        begun = time.perf_counter()
        data = path.read_bytes()
        if region is not None:
            box = (region["x"], region["y"], region["x"] + region["width"],
                   region["y"] + region["height"])
            out = io.BytesIO()
            Image.open(io.BytesIO(data)).crop(box).save(out, format="PNG")
            data = out.getvalue()
        url = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        body = {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Describe."},
            {"type": "image_url", "image_url": {"url": url}}]}]}
        response = http.post(f"{stub.base}/ok/v1/chat/completions",
                              content=json.dumps(body).encode())
        response.json()["choices"][0]["message"]["content"]
        elapsed = (time.perf_counter() - begun) * 1000
        if i >= WARMUP:
            floor.append(elapsed - stub.received[-1].handling_ms)
    return floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        screenshot_like(ws / "page.png")
        stub = ProviderStub().start()
        catalog = Path(tmp) / "catalog.yaml"
        catalog.write_text(
            "profiles:\n  - name: default\n    description: stub\n    provider:\n"
            f"      api_style: openai-chat\n      base_url: {stub.base}/ok/v1\n      model: m\n")
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "veriharness", "mllm-server", "--workspace", str(ws),
                  "--catalog", str(catalog), "--trace", str(Path(tmp) / "trace.jsonl")],
            env=dict(os.environ))
        size = (ws / "page.png").stat().st_size
        print(f"image 1920x1080 PNG, {size / 1024:.0f} KiB; {calls} calls per case "
              f"(+{WARMUP} warm-up)")
        print(f"{'case':<8} {'added p50':>10} {'added p95':>10} {'floor p50':>10} "
              f"{'floor p95':>10} {'ratio p50':>10}")
        with open(os.devnull, "w") as quiet, BlockingMcpClient(params, quiet) as client, \
                httpx.Client() as http:
            for name, region in (("full", None), ("region", REGION)):
                image = {"kind": "image", "label": "page", "path": "page.png"}
                if region is not None:
                    image["region"] = region
                args = {"instruction": "Describe.", "inputs": [image],
                        "capability_tags": ["E1"], "output": {"kind": "text"}}
                added = through_server(client, stub, args, calls)
                floor = direct(http, stub, ws / "page.png", region, calls)
                ratio = statistics.median(added) / statistics.median(floor)
                print(f"{name:<8} {statistics.median(added):>10.2f} {percentile(added, 95):>10.2f}"
                      f" {statistics.median(floor):>10.2f} {percentile(floor, 95):>10.2f}"
                      f" {ratio:>10.2f}")
            refused = []
            for _ in range(calls):
                begun = time.perf_counter()
                client.call({"instruction": "x", "inputs": [], "capability_tags": ["E1"],
                             "output": {"kind": "text"}})
                refused.append((time.perf_counter() - begun) * 1000)
            print(f"MCP stdio round trip of a refused call (no HTTP): p50 "
                  f"{statistics.median(refused):.2f} ms, p95 {percentile(refused, 95):.2f} ms")
        stub.stop()


if __name__ == "__main__":
    main()
