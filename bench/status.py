"""Benchmark `veriharness status` on a synthetic experiment of 20,000 runs in progress.

Run: python3 bench/status.py [--work DIR] [--runs 20000] [--ledger-lines 200000]

Writes (once, kept under --work) 2 conditions x N/10 tasks x 5 replicates: run.json and
outcome.json for finished, failed and cap-stopped runs, a transcript for running ones, nothing
for runs to go, and a ledger of --ledger-lines priced requests. Then times the real command in a
subprocess (Python start-up and imports included) and `read_status` in this process, three times
each, and prints the figures. Target: <= 2 s at 20,000 runs.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from veriharness.report.status import format_status, read_status  # noqa: E402
from veriharness.runfolder.outcome import AgentOutcome  # noqa: E402
from veriharness.runfolder.spend import TokenCounts  # noqa: E402
from veriharness.spend.ledger import LedgerEntry  # noqa: E402

CONDITIONS = ("b3-absent", "b3-present")
STATES = (("ok", 0.78), ("running", 0.02), ("failed", 0.03), ("budget", 0.05), ("to_go", 0.12))


def _outcome(status: str, reason: str | None) -> str:
    outcome = AgentOutcome(
        status=status,  # type: ignore[arg-type]
        reason=reason,  # type: ignore[arg-type]
        offline=False,
        model="claude-sonnet-4-5",
        started_at="2026-12-01T00:00:00+00:00",
        finished_at="2026-12-01T00:10:00+00:00",
    )
    return outcome.model_dump_json(indent=2) + "\n"


def _write(exp: Path, runs: int, ledger_lines: int) -> None:
    rng = random.Random(0)
    tasks = [f"task-{i:05d}" for i in range(runs // 10)]
    matrix = {"conditions": list(CONDITIONS), "tasks": tasks, "replicates": 5}
    record = {"kind": "experiment_record", "matrix": matrix, "config": {"execution": {}}}
    record["config"]["execution"] = {"max_usd": 5000.0, "max_usd_per_run": 1.0}
    exp.mkdir(parents=True)
    texts = {s: _outcome(s, None) for s in ("ok", "failed")}
    texts["budget"] = _outcome("not_started", "budget")
    for condition in CONDITIONS:
        for task in tasks:
            for rep in range(1, 6):
                state = rng.choices([s for s, _ in STATES], [w for _, w in STATES])[0]
                run = exp / condition / task / f"r{rep}"
                if state == "to_go":
                    continue
                run.mkdir(parents=True)
                (run / "run.json").write_text('{"kind": "run_record"}')
                if state == "running":
                    (run / "transcript.jsonl").write_text("{}\n")
                else:
                    (run / "outcome.json").write_text(texts[state])
    total, lines = 0.0, []
    by_condition = {c: {"agent": 0.0, "mllm": 0.0} for c in CONDITIONS}
    for i in range(ledger_lines):
        condition, source = CONDITIONS[i % 2], ("agent", "mllm")[i % 3 == 0]
        cost = 0.01 + (i % 7) / 1000
        total += cost
        by_condition[condition][source] += cost
        lines.append(
            LedgerEntry(
                time=f"2026-12-01T{i * 86399 // ledger_lines // 3600:02d}:"
                f"{i * 86399 // ledger_lines // 60 % 60:02d}:"
                f"{i * 86399 // ledger_lines % 60:02d}+00:00",
                run=f"{condition}/task-00000/r1",
                condition=condition,
                source=source,
                model="m",
                request_id=str(i),
                tokens=TokenCounts.of(20000, 800, 15000, 2000),
                cost_usd=cost,
                total_usd=total,
                by_condition=by_condition,
            ).model_dump_json()
        )
    (exp / "spend").mkdir()
    (exp / "spend" / "ledger.jsonl").write_text("\n".join(lines) + "\n")
    (exp / "experiment.json").write_text(json.dumps(record))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/veriharness-bench-status"))
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--ledger-lines", type=int, default=200_000)
    args = parser.parse_args()
    exp = args.work / f"runs-{args.runs}"
    if not exp.exists():
        begun = time.perf_counter()
        _write(exp, args.runs, args.ledger_lines)
        print(f"wrote {args.runs} runs and {args.ledger_lines} ledger lines in "
              f"{time.perf_counter() - begun:.1f} s")  # fmt: skip
    ledger_mb = (exp / "spend" / "ledger.jsonl").stat().st_size / 1e6
    command = [sys.executable, "-m", "veriharness", "status", str(exp)]
    walls = []
    for _ in range(3):
        begun = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
        walls.append(time.perf_counter() - begun)
    inner = []
    for _ in range(3):
        begun = time.perf_counter()
        status = read_status(exp)
        inner.append(time.perf_counter() - begun)
    print(done.stdout)
    print(format_status(status).splitlines()[-3])
    print(f"runs {args.runs}, ledger {ledger_mb:.0f} MB")
    print("veriharness status (subprocess): " + ", ".join(f"{w:.2f} s" for w in walls))
    print("read_status (in process):         " + ", ".join(f"{w:.3f} s" for w in inner))
    print(f"target <= 2 s: {'met' if max(walls) <= 2 else 'NOT met'} "
          f"(worst {max(walls):.2f} s, {max(walls) / 2:.2f} of the target)")  # fmt: skip


if __name__ == "__main__":
    main()
