"""Cost of rendering hostile answers: wall time and peak memory of one `veriharness render`.

Each answer is rendered by the real verb in a subprocess; its whole process tree (Python, the
Playwright driver, every Chromium process) is sampled every 0.1 s and the peak of the summed
proportional set size (PSS) is printed with the status render.json records.

    python3 bench/render_memory.py [--answers NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from veriharness.render.guard import descendants  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from support.hostile import bomb_png  # noqa: E402

MARK = "<body><h1>Hostile answer</h1>"
ANSWERS = {
    "plain page": MARK + "<p>nothing special</p>",
    "30,000 x 30,000 PNG in assets/": MARK + "<img src='assets/big.png' style='width:300px'>",
    "200,000 text rows": MARK + "".join(f"<div>row {i} text</div>" for i in range(200_000)),
    "300,000 px tall element": MARK + "<div style='height:300000px;background:red'></div>",
    "navigates away after load": MARK
    + "<script>onload = () => { location.href = 'https://example.org/' }</script>",
    "alert() loop at load": MARK + "<script>onload = () => { for (;;) alert(1) }</script>",
    "50 x window.open": MARK + "<script>for (let i = 0; i < 50; i++) open('answer.html')</script>",
    "allocates without end": MARK
    + "<script>const a = []; onload = () => { for (;;) a.push(new Uint8Array(1 << 24).fill(1)) }"
    "</script>",
}


def _pss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def measure(answer: Path, reference: Path, out: Path) -> tuple[float, float]:
    start = time.monotonic()
    command = [sys.executable, "-m", "veriharness", "render", "--answer-dir", str(answer)]
    command += ["--reference", str(reference), "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0.0
    while process.poll() is None:
        tree = [process.pid, *descendants(process.pid)]
        peak = max(peak, sum(_pss_mb(pid) for pid in tree))
        time.sleep(0.1)
    return time.monotonic() - start, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--answers", nargs="+", choices=list(ANSWERS), default=list(ANSWERS), metavar="NAME",
        help=f"the answers to render, of: {', '.join(map(repr, ANSWERS))} (default: all)",
    )  # fmt: skip
    args = parser.parse_args()
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="vh-bench-render-") as tmp:
        base = Path(tmp)
        reference = base / "reference.png"
        Image.new("RGB", (1280, 800), "white").save(reference)
        for index, name in enumerate(args.answers):
            html = ANSWERS[name]
            answer = base / f"a{index}" / "answer"
            (answer / "assets").mkdir(parents=True)
            (answer / "answer.html").write_text(html)
            if "PNG" in name:
                bomb_png(answer / "assets" / "big.png", 30_000, 30_000)
            out = base / f"a{index}" / "render"
            wall, peak = measure(answer, reference, out)
            record = json.loads((out / "render.json").read_text())
            row = {
                "answer": name,
                "wall_s": round(wall, 1),
                "peak_pss_mb": round(peak),
                "status": record["status"],
                "failed_step": record.get("failed_step"),
                "capped": record.get("capped"),
            }
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
