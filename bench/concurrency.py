"""Concurrency scaling of agent sessions: real `claude -p` sessions (bubblewrap sandbox, mllm
server) against the offline model, which waits `--latency` seconds before each answer.

For each concurrency level, `--sessions` sessions run through `run_session` in a pool of that
many worker processes (one session at a time per worker, as each Snakemake job is its own
process). Printed per level: wall time; the latency-bound ideal (every session's model answers
times the latency, packed onto the concurrent slots: sum / concurrency, never less than the
longest single session); their ratio; the CPU the level used per session (this process and every
descendant), split by kind of process as far as sampling sees it (`cpu_other` and the rest up to
the total are short-lived processes such as the offline stand-in's tesseract readings); the CPU
floor (all CPU spread over the machine's cores) against the ideal; and the peak proportional
set size (PSS) of all session processes, overall and per concurrent session.

    python3 bench/concurrency.py --sessions 64 --concurrency 1 8 16 32 --latency 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

sys.path.insert(0, str(ROOT / "tests"))
from support.sessions import offline_plan  # noqa: E402
from veriharness._util.lifetime import cpu_seconds  # noqa: E402
from veriharness.agent.plan import SessionPlan  # noqa: E402
from veriharness.agent.session import run_session  # noqa: E402
from veriharness.offline.server import FAULTS_ENV  # noqa: E402
from veriharness.render.guard import descendants  # noqa: E402

SYSTEM_PROMPT = (
    "Recreate the reference screenshot reference.png as a single self-contained answer.html "
    "in the current directory. Use mcp__mllm__call to look at the reference."
)


def _plan(base: Path, index: int) -> SessionPlan:
    """One session as the tests build it (support.sessions), its run in the bench's one
    experiment folder, so the sessions share the providers' pace as a matrix's do."""
    plan = offline_plan(
        base / f"s{index}", SYSTEM_PROMPT, max_turns=12, wall_clock_seconds=900,
        allowed_tools=["Read", "Write", "Edit", "Bash", "mcp__mllm__call"],
        workspace_root=base / "workspaces", label=f"bench-r{index}",
    )  # fmt: skip
    shared = plan.ledger.model_copy(update={"experiment_dir": base / "experiment"})
    return plan.model_copy(update={"spend": shared})


def _pss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


_KINDS = {"claude.exe": "claude CLI", "mllm-server": "mllm server", "bwrap": "bwrap"}


def _kind(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    for marker, kind in _KINDS.items():
        if marker in text:
            return kind
    return "worker" if "multiprocessing" in text else "other"


def _cpu_of(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except OSError:
        return 0.0


class _Sampler(threading.Thread):
    """Peak summed PSS of this process's descendants (the sessions), sampled every 2 s, and the
    CPU each kind of process used (last value seen per process), sampled every 0.25 s.
    Processes shorter than that (tesseract readings of the offline stand-in) are mostly
    missed: the bench reports them as the rest of the measured total."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0.0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        rounds = 0
        while not self.stop.wait(0.25):
            pids = descendants(os.getpid())
            # Reading PSS walks every page table: about 3 ms per session process, so every 2 s
            # only (every 0.25 s it cost this process half a core at 32 sessions).
            if rounds % 8 == 0:
                self.peak = max(self.peak, sum(_pss_mb(p) for p in pids))
            rounds += 1
            for pid in pids:
                kind = self.cpu[pid][0] if pid in self.cpu else _kind(pid)
                if kind is not None:
                    self.cpu[pid] = (kind, _cpu_of(pid))

    def cpu_by_kind(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for kind, seconds in self.cpu.values():
            totals[kind] = totals.get(kind, 0.0) + seconds
        return totals


def _answers(run_dir: Path) -> int:
    log = run_dir / "model_requests.jsonl"
    if not log.is_file():
        return 0
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return sum(1 for r in lines if r.get("method") == "POST" and "/v1/messages" in r["path"])


def _cpu_seconds() -> tuple[float, float]:
    """CPU of every descendant already waited for (the pool's workers, and through them each
    session's processes), and of this process itself (the sampler, kept apart)."""
    times = os.times()
    return times.children_user + times.children_system, times.user + times.system


def level(sessions: int, concurrency: int, latency: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="vh-bench-concurrency-") as tmp:
        plans = [_plan(Path(tmp), i) for i in range(sessions)]
        sampler = _Sampler()
        sampler.start()
        start, cpu_start = time.monotonic(), _cpu_seconds()
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=concurrency, mp_context=context) as pool:
            outcomes = list(pool.map(run_session, plans))
        wall = time.monotonic() - start
        (children, own), (children_0, own_0) = _cpu_seconds(), cpu_start
        by_kind = sampler.cpu_by_kind()
        # claude's CPU never reaches this process's rusage: it runs under bubblewrap's own init
        # in a PID namespace, which is not waited for in a way that carries it up. It is added
        # from sampling (an undercount by up to 0.25 s of each claude process's last CPU).
        cpu, own = children - children_0 + by_kind.get("claude CLI", 0.0), own - own_0
        sampler.stop.set()
        sampler.join()
        answers = [_answers(p.run_dir) for p in plans]
    waits = [n * latency for n in answers]
    ideal = max(sum(waits) / concurrency, max(waits))
    statuses = sorted({o.status for o in outcomes})
    return {
        "concurrency": concurrency,
        "sessions": sessions,
        "wall_s": round(wall, 1),
        "ideal_s": round(ideal, 1),
        "ratio": round(wall / ideal, 2) if ideal else float("nan"),
        "cpu_s_per_session": round(cpu / sessions, 2),
        "cpu_floor_s": round(cpu / (os.cpu_count() or 1), 1),
        "cpu_bench_process_s": round(own, 1),
        **{
            f"cpu_{kind.replace(' ', '_')}": round(seconds / sessions, 2)
            for kind, seconds in sorted(by_kind.items())
        },
        "answers_per_session": round(sum(answers) / sessions, 1),
        "session_wall_mean_s": round(sum(o.wall_seconds or 0 for o in outcomes) / sessions, 1),
        "claude_process_mean_s": round(sum(o.session_seconds or 0 for o in outcomes) / sessions, 1),
        "peak_pss_mb": round(sampler.peak),
        "pss_per_session_mb": round(sampler.peak / min(concurrency, sessions)),
        "statuses": ",".join(statuses),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 16, 32])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds before each answer")
    args = parser.parse_args()
    os.environ[FAULTS_ENV] = json.dumps({"latency_s": args.latency})
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f} latency={args.latency}s")
    for concurrency in args.concurrency:
        print(json.dumps(level(args.sessions, concurrency, args.latency)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
