"""CPU time of the block metrics (Design2Code matching with neighbour merging) by page size.

Two page sets:
- the 28 stored Design2Code pairs (tests/score/metrics/design2code): the slowest pair and the total;
- synthetic pages of N one-line blocks, the answer holding the same blocks in another order
  (every other block first), so that merging is tried everywhere and none helps.

For each size it prints the CPU seconds of `block_scores` and the ratio to one plain assignment
on the same pages (the matching without merging or context bonus), i.e. what merging costs.

    python3 bench/blocks.py [--sizes 50 100 200 400]
"""

from __future__ import annotations

import argparse
import csv
import random
import time
from pathlib import Path

from veriharness.runfolder.render import DomRecord, Size, TextBox
from veriharness.score.metrics.blocks import (
    _assign,
    _Ratios,
    block_scores,
    page_blocks,
)
from veriharness.score.metrics.inputs import read_dom

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "tests" / "score" / "metrics" / "design2code"
WORDS = "alpha beta gamma delta orders revenue product price team plan month year".split()

__all__ = ["main"]


def _cpu(fn: object, *args: object) -> float:
    start = time.process_time()
    fn(*args)  # type: ignore[operator]
    return time.process_time() - start


def _plain(reference: DomRecord, answer: DomRecord) -> None:
    refs, anss = page_blocks(reference), page_blocks(answer)
    _assign(_Ratios().matrix(anss, refs), context=False)


def _synthetic(n: int) -> tuple[DomRecord, DomRecord]:
    rng = random.Random(n)
    texts = [
        TextBox(
            text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))),
            source="text",
            x=0,
            y=12 * i,
            width=300,
            height=10,
            font_size_px=10,
            font_weight=400,
            color=(0, 0, 0),
            positioning="static",
            pinned=False,
        )  # fmt: skip
        for i in range(n)
    ]
    size = Size(width=1280, height=12 * n)
    reference = DomRecord(viewport=size, page=size, texts=texts, images=[])
    answer = DomRecord(viewport=size, page=size, texts=texts[::2] + texts[1::2], images=[])
    return reference, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 400])
    args = parser.parse_args()
    with (PAIRS / "design2code_pairs.tsv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader((ln for ln in handle if not ln.startswith("#")), delimiter="\t"))
    times = {}
    for row in rows:
        reference = read_dom(PAIRS / "references" / f"{row['task']}.dom.json")
        answer = read_dom(PAIRS / "answers" / f"{row['pair']}.dom.json")
        times[row["pair"]] = _cpu(block_scores, reference, answer)
    slowest = max(times, key=times.__getitem__)
    print(f"stored pairs: {len(times)}, total {sum(times.values()):.2f} s CPU, "
          f"slowest {slowest} {times[slowest]:.2f} s")  # fmt: skip
    print("blocks  block_scores  plain assignment  ratio")
    for n in args.sizes:
        reference, answer = _synthetic(n)
        full, plain = _cpu(block_scores, reference, answer), _cpu(_plain, reference, answer)
        print(f"{n:6d}  {full:10.2f} s  {plain:14.3f} s  {full / max(plain, 1e-9):6.0f}")


if __name__ == "__main__":
    main()
