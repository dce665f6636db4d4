"""The VeriHarness code itself: its package version, a digest of the installed source, and the
git commit with a dirty flag of the checkout it runs from.

Recorded in every run and experiment record (provenance, never hashed: an upgrade reruns
nothing) and, version and digest, in metrics.json. The digest covers every file of the imported
package (``__pycache__`` aside), so two installs that differ in one byte differ here even under
the same version number. The git state is that of the repository holding the package, if any:
its HEAD, and the uncommitted files under the package, the workflow and the build files.
"""

from __future__ import annotations

import hashlib
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, ConfigDict

__all__ = ["HarnessVersion", "PACKAGE_DIR", "package_version", "source_digest", "harness_version"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# Besides the package: what else of a checkout is harness code (paths from the repository top).
_HARNESS_PATHS = ("workflow", "Snakefile", "pyproject.toml", "profiles")


class HarnessVersion(BaseModel):
    model_config = ConfigDict(frozen=True)
    version: str | None
    source_sha256: str
    source_path: str
    git_commit: str | None
    git_dirty: bool | None  # None: the package is not in a git checkout
    git_dirty_files: tuple[str, ...] = ()


def package_version() -> str | None:
    try:
        return metadata.version("veriharness")
    except metadata.PackageNotFoundError:
        return None


@cache
def source_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return "sha256:" + digest.hexdigest()


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(PACKAGE_DIR), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def harness_version() -> HarnessVersion:
    common = {
        "version": package_version(),
        "source_sha256": source_digest(),
        "source_path": str(PACKAGE_DIR),
    }
    top = _git("rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return HarnessVersion(**common, git_commit=None, git_dirty=None)
    root = Path(top.stdout.strip())
    head = _git("rev-parse", "HEAD")
    paths = [str(PACKAGE_DIR)] + [str(root / p) for p in _HARNESS_PATHS if (root / p).exists()]
    status = _git("status", "--porcelain=v1", "--untracked-files=all", "--", *paths)
    dirty = tuple(sorted(line[3:] for line in status.stdout.splitlines() if len(line) > 3))
    return HarnessVersion(
        **common,
        git_commit=head.stdout.strip() if head.returncode == 0 else None,
        git_dirty=bool(dirty) or status.returncode != 0,
        git_dirty_files=dirty,
    )
