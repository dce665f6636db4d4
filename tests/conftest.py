"""The order in which the test files are handed out.

`--dist loadfile` gives each file whole to one pytest-xdist worker, in collection order
(`--no-loadscope-reorder` in pyproject.toml: xdist's own order, most tests first, would start the
one- and two-test files that take minutes last, and one of them would be the suite's tail). The
files below take minutes each; they go first, longest first, and the many short files fill in
whatever time is left on each worker. Within a file the order stays the file's own.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from veriharness._util.tesseract_cache import CACHE_ENV

# This machine kind sets PYTHONDONTWRITEBYTECODE, so pytest kept none of its assertion-rewritten
# test modules and every process that collected (each xdist worker collects every file) rewrote
# all of them again: about 6 of a worker's 10.5 CPU s. From here on this process writes them to
# tests' __pycache__ folders (git ignores them), as setup.sh writes src's bytecode; a later
# collection, and a worker that comes to a file another one has written, reads them instead.
sys.dont_write_bytecode = False

HERE = Path(__file__).resolve().parent
# Every file that took 40 s or more, longest first: the sum of its setups, calls and teardowns
# in the --durations of fresh clones' runs and of the files run alone (2 December 2026; from
# about 450 s for the recovery tests down). A file renamed or removed must leave this list too.
LONGEST_FIRST = [
    "workflow/test_recovery.py",
    "cluster/test_slurm.py",
    "workflow/test_pipeline.py",
    "workflow/test_guide.py",
    "workflow/test_monitor_pipeline.py",
    "bench/test_workflow_benches.py",
    "bench/test_benches.py",
    "spend/test_spend_pipeline.py",
    "agent/test_faults.py",
    "render/test_hostile_answers.py",
    "report/test_report.py",
    "bench/test_session_benches.py",
    "report/test_inspect_export.py",
    "score/test_score.py",
    "tasksets/test_imported_set_runs.py",
    "external/test_external.py",
    "agent/test_proxy.py",
    "render/test_render_pool.py",
    "workflow/test_foundation.py",
    "spend/test_unpriced_pipeline.py",
    "workflow/test_failed_runs.py",
    "experiment/test_experiment.py",
    "tasksets/test_import_tasks.py",
]


_SUITE_CACHE: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """One tesseract cache for the whole run, shared by the xdist workers (they inherit the
    environment) and by every process the tests start: the suite neither reads nor fills the
    cache of the machine's user, and a reference image is read once per run instead of once per
    experiment (`_util.tesseract_cache`)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or CACHE_ENV in os.environ:
        return
    folder = Path(tempfile.mkdtemp(prefix="veriharness-test-cache-"))
    _SUITE_CACHE.append(folder)
    os.environ[CACHE_ENV] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _SUITE_CACHE:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(CACHE_ENV, None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = [name for name in LONGEST_FIRST if not (HERE / name).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py: LONGEST_FIRST names no file: {missing}")
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}

    def place(item: pytest.Item) -> int:
        try:
            name = item.path.relative_to(HERE).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=place)  # stable: the other files, and each file's tests, keep their order
