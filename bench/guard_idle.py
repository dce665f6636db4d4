"""What a running `Renderer` costs between captures, and what its memory guard costs during one.

A pool's browsers live as long as the workflow, and a test module's renderer as long as the
module, while most of that time no page is open. This starts one `Renderer`, puts `--processes`
idle processes on the machine (the guard's scan of /proc grows with them), and prints the
renderer process's own CPU seconds per wall second while idle, and per capture of a plain page.

    python3 bench/guard_idle.py [--processes 300] [--seconds 10] [--captures 10]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from veriharness.render.browser import Renderer  # noqa: E402
from veriharness.runfolder.render import Size  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--captures", type=int, default=10)
    args = parser.parse_args()
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(args.processes)]
    try:
        with tempfile.TemporaryDirectory() as tmp, Renderer() as renderer:
            page = Path(tmp) / "answer.html"
            page.write_text("<h1>A plain page</h1><p>text</p>")
            renderer.capture(page, Path(tmp), Size(width=1280, height=800))  # warm
            time.sleep(1.0)
            start = time.process_time()
            time.sleep(args.seconds)
            idle = (time.process_time() - start) / args.seconds
            start = time.process_time()
            for _ in range(args.captures):
                renderer.capture(page, Path(tmp), Size(width=1280, height=800))
            per_capture = (time.process_time() - start) / args.captures
            processes = len([p for p in Path("/proc").iterdir() if p.name.isdigit()])
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
    print(f"processes on the machine: {processes}")
    print(f"idle renderer (this process): {idle:.4f} CPU-s per second over {args.seconds:.0f} s")
    print(f"one capture of a plain page (this process only): {per_capture:.3f} CPU-s")


if __name__ == "__main__":
    main()
