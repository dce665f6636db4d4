"""Measure the spending ledger: how far racing requesters overshoot a cap, and charges per second.

Run: python3 bench/spend_ledger.py [--writers 2 4 8 16] [--trials 5] [--cap 1.0]

Each trial starts W processes that each loop: check the cap (`SpendGate.admit`), wait 0-4 ms (the
request in flight), charge a cost drawn from 0.01-0.05 USD. The overshoot is the final total minus
the cap; the bound stated in docs/decisions.md (P-21) is one request in flight per writer, so the
script prints it also in units of the largest request (0.05) and of W requests. A second part
times uncontended charges (lock, read the tail, append, fsync) on one process.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from veriharness.runfolder.spend import TokenCounts  # noqa: E402
from veriharness.spend.ledger import (  # noqa: E402
    BudgetExhausted,
    SpendGate,
    SpendSettings,
    ledger_path,
    newest_entry,
)

MAX_COST = 0.05


def _gate(exp: Path, index: int, cap: float | None) -> SpendGate:
    run_dir = exp / "c" / "t" / f"r{index}"
    run_dir.mkdir(parents=True, exist_ok=True)
    settings = SpendSettings(
        experiment_dir=exp, run_dir=run_dir, condition="c", task="t", replicate=index, max_usd=cap
    )
    return SpendGate(settings)


def _writer(exp: str, index: int, seed: int, cap: float) -> None:
    rng, gate = random.Random(seed), _gate(Path(exp), index, cap)
    for request in range(100_000):
        try:
            gate.admit()
        except BudgetExhausted:
            return
        time.sleep(rng.uniform(0, 0.004))
        gate.charge("mllm", "m", f"{index}-{request}", TokenCounts(), rng.uniform(0.01, MAX_COST))


def _trial(writers: int, seed: int, cap: float) -> float:
    with tempfile.TemporaryDirectory() as exp:
        context = multiprocessing.get_context("spawn")
        procs = [
            context.Process(target=_writer, args=(exp, i, seed * 1000 + i, cap))
            for i in range(writers)
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        entry = newest_entry(ledger_path(Path(exp)))
        return (entry.total_usd if entry else 0.0) - cap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--cap", type=float, default=1.0)
    parser.add_argument("--charges", type=int, default=2000, help="uncontended charges timed")
    args = parser.parse_args()
    print(f"cap ${args.cap}, requests $0.01-${MAX_COST}, {args.trials} trials per row")
    print("writers | worst overshoot $ | in largest requests | bound (writers x largest) | ratio")
    for writers in args.writers:
        worst = max(_trial(writers, seed, args.cap) for seed in range(args.trials))
        bound = writers * MAX_COST
        print(f"{writers:7d} | {worst:17.4f} | {worst / MAX_COST:19.2f} | {bound:25.2f} | "
              f"{worst / bound:.2f}")  # fmt: skip
    with tempfile.TemporaryDirectory() as exp:
        gate = _gate(Path(exp), 1, None)
        count = args.charges
        begun = time.perf_counter()
        for i in range(count):
            gate.charge("mllm", "m", str(i), TokenCounts(), 0.01)
        elapsed = time.perf_counter() - begun
        capped = _gate(Path(exp), 2, 1e9)
        begun = time.perf_counter()
        for _ in range(count):
            capped.admit()
        checked = time.perf_counter() - begun
    print(f"uncontended: {count / elapsed:.0f} charges/s ({elapsed / count * 1000:.2f} ms each, "
          f"fsync included); {count / checked:.0f} cap checks/s "
          f"({checked / count * 1000:.3f} ms each)")  # fmt: skip


if __name__ == "__main__":
    main()
