"""The start check registers the analysis before the first session (preregistration.json),
through the real `check-experiment` command: written once with every run's identity and its own
digest, never rewritten by a later start with another analysis or matrix, a record that says so
when sessions had started before it, and the claude CLI drift warned of before any session."""

from __future__ import annotations

import json
from pathlib import Path

from experiment.test_config import make_project
from experiment.test_experiment import check
from veriharness.runfolder.preregistration import (
    PREREGISTRATION,
    Preregistration,
    content_digest,
    write_once,
)


def _folder(root: Path) -> Path:
    return root / "results" / "t"


def _plant(run_dir: Path, name: str, content: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / name).write_text(content)


def test_the_first_start_registers_and_a_later_one_with_another_analysis_leaves_it_be(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path)
    first = check(root)
    assert first.returncode == 0, first.stderr
    path = PREREGISTRATION.path(_folder(root))
    data = json.loads(path.read_text())
    record = json.loads((_folder(root) / "experiment.json").read_text())
    assert data["digest"] == content_digest(data)
    assert (
        f"check-experiment: the analysis and the run matrix are registered before any session "
        f"in {path} (digest {data['digest']})"
    ) in first.stdout
    assert data["before_sessions"] is True and data["sessions_found"] == 0
    declared = {
        "primary": ["metric_ssim"],
        "secondary": None,
        "floor_flags": record["config"]["analysis"]["floor_flags"],
        "alpha": 0.05,
    }
    assert {k: data["analysis"][k] for k in declared} == declared
    assert data["pairs"] == [{"baseline": "b3-absent", "treatment": "b3-present"}]
    runs = {
        (r["condition"], r["task"], r["replicate"]): r["identity_hash"]
        for r in data["matrix"]["runs"]
    }
    assert runs == {
        (c, t, 1): record["cells"][c][t]
        for c in ("b3-absent", "b3-present")
        for t in ("alpha", "beta")
    }
    assert data["matrix"]["external"] == ["external:reference"]
    assert data["experiment_identity_hash"] == record["identity_hash"]
    # The start order's seed as experiment.json records it (null while it records none).
    assert data["order_seed"] == (record.get("start_order") or {}).get("seed")
    assert data["harness"] == record["provenance"]["harness"]
    assert data["claude_version"] == record["provenance"]["claude_version"]
    assert data["created_at"] == record["provenance"]["created_at"]

    before = path.read_bytes()
    changed = check(
        root, "--config-json", '{"analysis": {"primary": ["metric_mae"]}, "tasks": ["alpha"]}'
    )
    assert changed.returncode == 0, changed.stderr
    assert path.read_bytes() == before
    assert (
        f"check-experiment: the registration {path} ({data['digest']}, {data['created_at']}) "
        "stands, never rewritten: the primary outcome was registered as `metric_ssim`, is now "
        "`metric_mae`; the run matrix shrank: it was registered as 4 runs"
    ) in changed.stdout, changed.stdout
    assert "tasks removed: `beta`; 2 run(s) removed (b3-absent/beta/r1, b3-present/beta/r1)" in (
        changed.stdout
    )
    swapped = '{"compare": {"baseline": "b3-present", "treatment": "b3-absent"}}'
    pairs = check(root, "--config-json", swapped)
    assert (
        "stands, never rewritten: the compared pairs were registered as `b3-present` vs "
        "`b3-absent`, are now `b3-absent` vs `b3-present`; compare names the change"
    ) in pairs.stdout, pairs.stdout
    assert path.read_bytes() == before
    same = check(root)  # back as registered: nothing to say
    assert same.returncode == 0 and "registration" not in same.stdout, same.stdout


def test_sessions_before_the_first_registration_are_said_so_and_nothing_is_registered(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path)
    folder = _folder(root)
    # A session that never started leaves nothing a registration would come after.
    _plant(folder / "b3-absent" / "beta" / "r1", "outcome.json", '{"status": "not_started"}')
    _plant(folder / "b3-present" / "alpha" / "r1", "transcript.jsonl", "{}\n")
    _plant(folder / "external:reference" / "alpha" / "r1", "outcome.json", '{"status": "ok"}')
    started = check(root)
    assert started.returncode == 0, started.stderr
    path = PREREGISTRATION.path(folder)
    data = json.loads(path.read_text())
    assert (data["before_sessions"], data["sessions_found"]) == (False, 1)
    assert data["analysis"] is None and data["matrix"] is None and data["pairs"] is None
    assert data["digest"] == content_digest(data)
    assert (
        f"check-experiment: WARNING: 1 session(s) had started before this experiment was first "
        f"registered, so {path} registers no analysis and says so"
    ) in started.stderr
    before = path.read_bytes()
    assert check(root).returncode == 0 and path.read_bytes() == before


def test_a_session_that_never_started_does_not_stop_the_registration(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    _plant(_folder(root) / "b3-absent" / "beta" / "r1", "outcome.json", '{"status": "not_started"}')
    assert check(root).returncode == 0
    assert json.loads(PREREGISTRATION.path(_folder(root)).read_text())["before_sessions"] is True


def test_a_start_whose_claude_differs_from_the_finished_runs_warns_once(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    assert check(root).returncode == 0
    version = json.loads((_folder(root) / "experiment.json").read_text())["provenance"][
        "claude_version"
    ]
    outcome = {"kind": "agent_outcome", "status": "ok", "claude_version": "1.0.0"}
    for task in ("alpha", "beta"):
        _plant(_folder(root) / "b3-absent" / task / "r1", "outcome.json", json.dumps(outcome))
    again = check(root)
    assert again.returncode == 0, again.stderr
    warned = [line for line in again.stderr.splitlines() if "claude CLI" in line]
    assert warned == [
        f"check-experiment: WARNING: this start's claude CLI is {version or 'unknown'}, the "
        "finished runs' "
        "1.0.0 (2 run(s)): the sessions it starts will run another version (the comparison "
        "names the mix)"
    ]
    outcome["claude_version"] = version
    for task in ("alpha", "beta"):
        _plant(_folder(root) / "b3-absent" / task / "r1", "outcome.json", json.dumps(outcome))
    assert "claude CLI" not in check(root).stderr


def test_a_registration_is_created_once_under_its_name(tmp_path: Path) -> None:
    fields = {
        "experiment": "t", "created_at": "2026-12-01T00:00:00+00:00", "before_sessions": True,
        "sessions_found": 0, "analysis": None, "pairs": None, "matrix": None,
        "experiment_identity_hash": None, "order_seed": None, "harness": None,
        "claude_version": None, "digest": "sha256:one",
    }  # fmt: skip
    assert write_once(tmp_path, Preregistration.model_validate(fields))
    before = PREREGISTRATION.path(tmp_path).read_bytes()
    other = Preregistration.model_validate(fields | {"digest": "sha256:two"})
    assert not write_once(tmp_path, other)
    assert PREREGISTRATION.path(tmp_path).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["preregistration.json"]
