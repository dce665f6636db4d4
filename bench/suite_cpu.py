"""Where the test suite's CPU time goes: per program, and per `veriharness` verb.

Run: python3 bench/suite_cpu.py [--markdown FILE] [--cgroup] [-- PYTEST ARGUMENTS]

The suite keeps a 2-core machine's cores busy, so its wall time follows the CPU seconds that its
processes use. This runs `python3 -m pytest` here (the arguments after `--`, by default the whole
suite) and prints:

- the machine's busy CPU seconds over the run (`/proc/stat`, every process of the machine) and how
  busy that kept its cores;
- the Python processes the run started, grouped by what they were (the pytest workers, Snakemake,
  each `veriharness` verb, the render pool's server), with count, CPU seconds and seconds per
  process. A `sitecustomize` put first on PYTHONPATH appends each process's command line and
  CPU time when it exits, and one line with its pid when it starts;
- with BSD process accounting (Debian's `acct`: `accton`, `dump-acct`; root only), every process
  of the machine by program: Chromium, the claude CLI, Node.js, tesseract, Python and the rest.
  Accounting names a process after the last of its threads to end, so the programs are told
  apart by their thread names too, and a process started by Chromium counts as Chromium. The
  start lines' pids then name every Python process in it, those ended by a signal included (the
  mllm servers, killed pool servers), which the exit lines miss.

On a machine shared with other work, `--cgroup` measures the run alone instead: pytest starts in
a control group of its own (cgroup v2, or v1's cpuacct), which every process it starts stays in,
those that leave their parent included (the pool servers and their browsers, a SLURM the test
starts), and the script prints that group's CPU seconds. It then leaves process accounting alone:
accounting is the machine's, and switching it off would end another run's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]

# Appends one JSON line per Python process at its normal exit; inert without the variable.
SITECUSTOMIZE = """\
import os as _os
if _os.environ.get("SUITE_CPU_LOG"):
    import atexit as _atexit, json as _json, resource as _resource, sys as _sys

    def _suite_cpu_write(record):
        with open(_os.environ["SUITE_CPU_LOG"], "a", encoding="utf-8") as log:
            log.write(_json.dumps(record) + "\\n")

    def _suite_cpu_line():
        used = _resource.getrusage(_resource.RUSAGE_SELF)
        _suite_cpu_write({"argv": _sys.argv[:3], "cpu": used.ru_utime + used.ru_stime})

    # sys.argv is not set yet while site runs: the start line names the process by /proc.
    with open("/proc/self/cmdline", "rb") as _cmdline:
        _argv = [a.decode(errors="replace") for a in _cmdline.read().split(b"\\0")[1:6] if a]
    _suite_cpu_write({"pid": _os.getpid(), "argv": _argv})
    _atexit.register(_suite_cpu_line)
"""

# Thread names that accounting can report for a Chromium process (the name of the last thread to
# exit); a child of a Chromium process is Chromium too.
CHROMIUM_THREADS = ("ThreadPool", "HangWatcher", "sandbox_ipc", "Perfetto", "Compositor",
                    "ANGLE-GC", "Chrome_", "chrome_crashpad", "VizCompositor", "MemoryInfra",
                    "DevToolsPipe", "CrShutdown", "inotify_reader", "Thread<", "gmain",
                    "dconf")  # fmt: skip
# The claude CLI is a Bun executable; Playwright's driver (and the MCP Inspector) run on Node.js.
CLAUDE_THREADS = ("claude", "JSCWarmUp", "mi-scavenger", "JITWorker", "HeapHelper", "HTTP Client",
                  "Bun Pool", "fs.watch")  # fmt: skip
NODE_THREADS = ("node", "libuv-worker", "SignalInspector", "DelayedTaskSche")
PYTHON_NAMES = ("python3", "python", "jemalloc_bg_thd")  # pyarrow's allocator thread


class Share(NamedTuple):
    name: str
    processes: int
    cpu_s: float


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (user, nice, system, irq...)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle, iowait = fields[3], fields[4]
    return (sum(fields) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def python_kind(argv: list[str]) -> str:
    """What a Python process was, from the start of its command line."""
    first = argv[0] if argv else ""
    if "snakemake" in first or argv[:2] == ["-m", "snakemake"]:
        return "snakemake"
    if first.endswith("veriharness/__main__.py") and len(argv) > 1:
        return f"veriharness {argv[1]}"
    if first.endswith("pytest/__main__.py"):
        return "pytest (the run's own process)"
    if first.endswith("pool_server.py"):
        return "render pool server"
    if first.endswith("mypy/__main__.py") or first.endswith("/mypy"):
        return "mypy"
    if first == "-c" and len(argv) == 1:
        return "python -c (pytest-xdist workers and small helpers)"
    return Path(first).name or "python (other)"


def _records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]


def started_kind(arguments: list[str]) -> str:
    """What a Python process was, from its command line's arguments after the interpreter (the
    start line: before Python has set sys.argv). Interpreter flags (-u, -B...) are skipped."""
    rest = list(arguments)
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        rest.pop(0)
    if rest[:2] == ["-m", "veriharness"] and len(rest) > 2:
        return f"veriharness {rest[2]}"
    if rest and rest[0].endswith("/bin/veriharness") and len(rest) > 1:
        return f"veriharness {rest[1]}"
    if rest[:1] == ["-m"] and len(rest) > 1:
        module = rest[1]
        script = module.replace(".", "/") + ".py" if "." in module else f"{module}/__main__.py"
        return python_kind([script, *rest[2:]])
    return python_kind(rest[:1] if rest[:1] == ["-c"] else rest)


def python_shares_by_accounting(log: Path, processes: Iterable[Process]) -> list[Share]:
    """Every Python process the run started, normal exit or not, by what it was: the start
    lines name each pid, process accounting gives its CPU."""
    kinds = {r["pid"]: started_kind(r["argv"]) for r in _records(log) if "pid" in r}
    count: Counter[str] = Counter()
    cpu: dict[str, float] = {}
    for process in processes:
        if process.name in PYTHON_NAMES and process.pid in kinds:
            kind = kinds[process.pid]
            count[kind] += 1
            cpu[kind] = cpu.get(kind, 0.0) + process.cpu_s
    return _by_cpu(count, cpu)


def python_shares(log: Path) -> list[Share]:
    count: Counter[str] = Counter()
    cpu: dict[str, float] = {}
    for record in _records(log):
        if "pid" in record:
            continue
        kind = python_kind(record["argv"])
        count[kind] += 1
        cpu[kind] = cpu.get(kind, 0.0) + float(record["cpu"])
    return _by_cpu(count, cpu)


class Process(NamedTuple):
    name: str
    cpu_s: float
    pid: int
    ppid: int


def accounted(dump: str) -> list[Process]:
    """`dump-acct` lines: name | version | utime | stime | elapsed | uid | gid | mem | io | pid |
    ppid | ... with times in clock ticks."""
    tick = os.sysconf("SC_CLK_TCK")
    processes = []
    for line in dump.splitlines():
        fields = [x.strip() for x in line.split("|")]
        if len(fields) > 10:
            cpu = (float(fields[2]) + float(fields[3])) / tick
            processes.append(Process(fields[0], cpu, int(fields[9]), int(fields[10])))
    return processes


def family(process: Process, by_pid: dict[int, Process]) -> str:
    seen = 0
    current: Process | None = process
    while current is not None and seen < 50:
        name = current.name
        if name == "chromium" or name.startswith(CHROMIUM_THREADS):
            return "Chromium"
        if name.startswith(CLAUDE_THREADS):
            return "claude CLI"
        if name.startswith(NODE_THREADS):
            return "Node.js (Playwright's driver, MCP Inspector)"
        if name == "tesseract":
            return "tesseract"
        if name in PYTHON_NAMES:
            return "Python" if current is process else "other"
        current = by_pid.get(current.ppid)
        seen += 1
    return "other"


def program_shares(processes: Iterable[Process]) -> list[Share]:
    listed = list(processes)
    by_pid = {p.pid: p for p in listed}
    count: Counter[str] = Counter()
    cpu: dict[str, float] = {}
    for process in listed:
        name = family(process, by_pid)
        count[name] += 1
        cpu[name] = cpu.get(name, 0.0) + process.cpu_s
    return _by_cpu(count, cpu)


def _by_cpu(count: Counter[str], cpu: dict[str, float]) -> list[Share]:
    return sorted((Share(n, count[n], s) for n, s in cpu.items()), key=lambda x: -x.cpu_s)


class OwnGroup:
    """A control group for one run: its CPU seconds (user, system) once the run has ended."""

    def __init__(self) -> None:
        v2 = next((p for p in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
                   if (p / "cgroup.procs").is_file() and (p / "cgroup.controllers").is_file()),
                  None)  # fmt: skip
        root = v2 if v2 is not None else Path("/sys/fs/cgroup/cpuacct")
        self.v2 = v2 is not None
        self.path = root / f"suite-cpu-{os.getpid()}"
        try:
            self.path.mkdir()
        except OSError as error:
            raise SystemExit(f"suite_cpu.py --cgroup: cannot make {self.path}: {error}") from None

    def join(self) -> None:
        """For preexec_fn: the new process (and all it starts) joins the group."""
        name = "cgroup.procs" if self.v2 else "tasks"
        (self.path / name).write_text(str(os.getpid()))

    def members(self) -> list[str]:
        return (self.path / "cgroup.procs").read_text().split()

    def cpu(self, settle_s: float = 60.0) -> tuple[float, float, float]:
        """(total, user, system) CPU seconds, after waiting up to `settle_s` for the run's last
        processes (servers that end shortly after their owner) to end."""
        deadline = time.monotonic() + settle_s
        while self.members() and time.monotonic() < deadline:
            time.sleep(0.5)
        if self.v2:
            stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
            user, system = int(stat["user_usec"]) / 1e6, int(stat["system_usec"]) / 1e6
            total = int(stat["usage_usec"]) / 1e6
        else:
            tick = os.sysconf("SC_CLK_TCK")
            ticks = (self.path / "cpuacct.stat").read_text().splitlines()
            stat = dict(line.split() for line in ticks)
            user, system = int(stat["user"]) / tick, int(stat["system"]) / tick
            total = int((self.path / "cpuacct.usage").read_text()) / 1e9
        if not self.members():
            self.path.rmdir()
        return total, user, system


def accounting_available() -> str | None:
    """Why BSD process accounting cannot be used here, or None."""
    if os.geteuid() != 0:
        return "not root"
    missing = [tool for tool in ("accton", "dump-acct") if shutil.which(tool) is None]
    return f"{', '.join(missing)} not installed (Debian package acct)" if missing else None


def table(title: str, shares: list[Share], total: float) -> list[str]:
    lines = [f"### {title}", "", "| what | processes | CPU s | s each | share |",
             "| --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for share in shares:
        each = share.cpu_s / share.processes if share.processes else 0.0
        lines.append(f"| {share.name} | {share.processes:,} | {share.cpu_s:,.1f} | {each:.2f} | "
                     f"{share.cpu_s / total:.1%} |")  # fmt: skip
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--cgroup", action="store_true",
                        help="measure the run's own processes in a control group (root), not "
                        "the machine, and leave process accounting alone")  # fmt: skip
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    (work / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    log, pacct = work / "python.jsonl", work / "pacct"
    env = dict(os.environ, SUITE_CPU_LOG=str(log))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work), env.get("PYTHONPATH")]))
    group = OwnGroup() if args.cgroup else None
    no_accounting = "--cgroup: the machine's accounting is left alone" if group else None
    no_accounting = no_accounting or accounting_available()
    if no_accounting is None:
        pacct.touch()
        subprocess.run(["accton", str(pacct)], check=True, capture_output=True)
    began_busy, began = busy_seconds(), time.monotonic()
    try:
        tests = subprocess.run([sys.executable, "-m", "pytest", *args.pytest_args], cwd=ROOT,
                               env=env, check=False,
                               preexec_fn=group.join if group else None)  # fmt: skip
    finally:
        if no_accounting is None:
            subprocess.run(["accton", "off"], check=True, capture_output=True)
    wall, busy = time.monotonic() - began, busy_seconds() - began_busy
    cores = os.cpu_count() or 1
    load = busy / (wall * cores)
    lines = [f"pytest exit code {tests.returncode}; wall {wall:,.1f} s; the machine busy "
             f"{busy:,.1f} CPU s on {cores} cores ({load:.0%} busy)", ""]  # fmt: skip
    if group is not None:
        total, user, system = group.cpu()
        lines[-1:-1] = [f"the run's own processes (control group): {total:,.1f} CPU s "
                        f"(user {user:,.1f}, system {system:,.1f})"]  # fmt: skip
    if no_accounting is None:
        dump = subprocess.run(["dump-acct", str(pacct)], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
        processes = accounted(dump)
        seen = sum(p.cpu_s for p in processes)
        lines += table(f"Every process, by program ({seen:,.1f} CPU s accounted)",
                       program_shares(processes), busy)  # fmt: skip
        by_kind = python_shares_by_accounting(log, processes)
        named = sum(x.cpu_s for x in by_kind)
        lines += table(f"Every Python process, by what it was ({named:,.1f} CPU s)", by_kind, busy)
    else:
        lines += [f"(no per-program table: process accounting unavailable: {no_accounting})", ""]
    shares = python_shares(log)
    logged = sum(s.cpu_s for s in shares)
    lines += table(f"Python processes that exited normally ({logged:,.1f} CPU s)", shares, busy)
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return tests.returncode


if __name__ == "__main__":
    raise SystemExit(main())
