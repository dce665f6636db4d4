"""The answer over a real session: a scripted agent (the offline model, through the real claude
CLI in its sandbox, the proxy and the mllm server) writes four versions of its answer with a
CallMLLM call between each two. run-agent keeps each version; `score-trajectory` scores each as
render + score score it alone; `collect` places every call between the versions it separates, so
the planted improvement and regression show in call_effects. The session also tries to forge
the snapshots, and a kept file altered afterwards is named, never scored."""

from __future__ import annotations

import base64
import json
import shlex
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from support.cli import veriharness
from support.sessions import ROOT, TASK, offline_plan
from veriharness.agent.session import run_session
from veriharness.offline.agent_policy import ONLY_FIRST, calls_first, runs_first
from veriharness.runfolder.snapshots import INDEX, SNAPSHOT_INDEX, blob_path

pytestmark = pytest.mark.slow

TASK_DIR = ROOT / "tasks" / "landing-page"
REFERENCE_HTML = (TASK_DIR / "reference.html").read_text()
GOOD = REFERENCE_HTML
WORSE = REFERENCE_HTML.replace("</head>", "<style>body{filter:invert(1)}</style></head>")
VERSIONS = ["<!doctype html><html><body><p>Draft</p></body></html>", GOOD, WORSE, GOOD]
CALL = {
    "instruction": "How does my draft differ from the reference?",
    "inputs": [{"kind": "image", "label": "reference", "path": "reference.png"}],
    "capability_tags": ["G1"],
    "output": {"kind": "text"},
}


def _write(html: str) -> str:
    return f"printf %s {shlex.quote(html)} > answer.html"


def _assets() -> str:
    parts = ["mkdir -p assets"]
    for asset in sorted((TASK_DIR / "assets").iterdir()):
        data = base64.b64encode(asset.read_bytes()).decode()
        parts.append(f"echo {data} | base64 -d > assets/{asset.name}")
    return " && ".join(parts)


def _script(run_dir: Path) -> str:
    forge = (
        f"mkdir -p {run_dir}/snapshots/blobs; echo forged >> {run_dir}/{INDEX}; "
        "find / -path /proc -prune -o -name index.jsonl -print 2>/dev/null "
        "| xargs -r -I{} sh -c 'echo forged >> {}'; true"
    )
    steps = [runs_first(forge), runs_first(_assets())]
    for number, html in enumerate(VERSIONS):
        steps.append(runs_first(_write(html)))
        if number < len(VERSIONS) - 1:
            steps.append(calls_first(CALL))
    return TASK + "".join(steps) + ONLY_FIRST + "\n"


def _metrics(folder: Path) -> dict[str, Any]:
    metrics: dict[str, Any] = json.loads((folder / "metrics.json").read_text())["metrics"]
    return metrics


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("trajectory")
    run_dir = tmp / "results" / "exp" / "cond" / "task" / "r1"
    plan = offline_plan(tmp, _script(run_dir), reference=TASK_DIR / "reference.png")
    outcome = run_session(plan)
    assert outcome.status == "ok", outcome.error
    scored = veriharness("score-trajectory", "--run-dir", run_dir, "--task-dir", TASK_DIR)
    assert scored.returncode == 0, scored.stderr
    return run_dir


def test_each_version_is_kept_in_order_outside_the_sessions_reach(session: Path) -> None:
    index = SNAPSHOT_INDEX.path(session).read_text()
    assert "forged" not in index  # the sandbox showed the session no run folder
    entries = [json.loads(line) for line in index.splitlines()]
    assert [e["n"] for e in entries] == [1, 2, 3, 4]
    kept = [blob_path(session, e["files"]["answer.html"]).read_text() for e in entries]
    assert kept == VERSIONS
    assert set(entries[1]["files"]) == {"answer.html", "assets/hero.png", "assets/logo.svg"}
    # A version is taken at the request after the Write that made it, the calls between.
    assert [e["tool_uses_since"][-1] for e in entries] == ["Bash"] * 4
    assert [e["tool_uses_since"].count("mcp__mllm__call") for e in entries] == [0, 1, 1, 1]
    assert (session / "answer" / "answer.html").read_text() == VERSIONS[-1]


def test_each_version_scores_as_render_and_score_score_it_alone(
    session: Path, tmp_path: Path
) -> None:
    trajectory = json.loads((session / "trajectory.json").read_text())["snapshots"]
    assert [s["status"] for s in trajectory] == ["ok"] * 4
    assert trajectory[3]["scored_as"] == 2  # the same files as version 2: scored once
    for number in (1, 2, 3):
        alone = tmp_path / f"v{number}"
        answer = alone / "answer"
        answer.mkdir(parents=True)
        (answer / "answer.html").write_text(VERSIONS[number - 1])
        (answer / "assets").mkdir()
        for asset in (TASK_DIR / "assets").iterdir():
            (answer / "assets" / asset.name).write_bytes(asset.read_bytes())
        rendered = veriharness("render", "--answer-dir", answer, "--reference",
                               TASK_DIR / "reference.png", "--out", alone / "render")  # fmt: skip
        assert rendered.returncode == 0, rendered.stderr
        scored = veriharness("score", "--render-dir", alone / "render", "--answer-dir", answer,
                             "--task-dir", TASK_DIR, "--out-dir", alone)  # fmt: skip
        assert scored.returncode == 0, scored.stderr
        assert trajectory[number - 1]["metrics"] == pytest.approx(_metrics(alone), abs=1e-12)


def _collect(experiment_dir: Path) -> Path:
    """Collect the experiment's runs as found (the session plan's experiment.json is a stub)."""
    (experiment_dir / "experiment.json").unlink(missing_ok=True)
    listed = veriharness("collect", "--experiment-dir", experiment_dir)
    assert listed.returncode == 0, listed.stderr
    return experiment_dir / "tables"


def test_the_call_effects_show_the_planted_improvement_and_regression(session: Path) -> None:
    tables = _collect(session.parents[2])
    trajectory = pd.read_parquet(tables / "trajectory.parquet")
    assert list(trajectory["snapshot"]) == [1, 2, 3, 4]
    assert list(trajectory["final"]) == [False, False, False, True]
    ssim = list(trajectory["metric_ssim"])
    assert ssim[0] < ssim[1] and ssim[2] < ssim[1] and ssim[3] == ssim[1]
    effects = pd.read_parquet(tables / "call_effects.parquet")
    calls = pd.read_parquet(tables / "mllm_calls.parquet")
    assert len(effects) == len(calls) == 3
    assert list(effects["snapshot_at_call"]) == [1, 2, 3]
    assert list(effects["next_snapshot"]) == [2, 3, 4]
    assert list(effects["tool_uses_between"]) == [1, 1, 1]  # the Write after the call
    assert list(effects["next_tool"]) == ["Bash"] * 3
    change = list(effects["change_ssim"])
    assert change[0] > 0.05 and change[1] < -0.05 and change[2] > 0.05
    assert change == pytest.approx([ssim[1] - ssim[0], ssim[2] - ssim[1], ssim[3] - ssim[2]])
    runs = pd.read_parquet(tables / "runs.parquet")
    assert runs.loc[0, "answer_revisions"] == 3
    assert runs.loc[0, "calls_followed_by_change"] == 1.0
    assert runs.loc[0, "gain_ssim"] == pytest.approx(ssim[3] - ssim[0])
    assert runs.loc[0, "call_change_ssim"] == pytest.approx(sum(change) / 3)


def test_a_kept_file_altered_after_the_session_is_named_never_scored(
    session: Path, tmp_path: Path
) -> None:
    import shutil

    copy = tmp_path / "results" / "exp" / "cond" / "task" / "r1"
    shutil.copytree(session, copy)
    entries = [json.loads(line) for line in SNAPSHOT_INDEX.path(copy).read_text().splitlines()]
    blob_path(copy, entries[2]["files"]["answer.html"]).write_text(GOOD)  # v3 made to look good
    forged = {**entries[0], "n": 9}
    with SNAPSHOT_INDEX.path(copy).open("a") as index:
        index.write(json.dumps(forged) + "\n")  # a line out of order
    scored = veriharness("score-trajectory", "--run-dir", copy, "--task-dir", TASK_DIR)
    assert scored.returncode == 0, scored.stderr
    assert "snapshot 9 out of order" in scored.stderr
    trajectory = json.loads((copy / "trajectory.json").read_text())["snapshots"]
    assert [s["status"] for s in trajectory] == ["ok", "ok", "tampered", "ok"]
    assert "no longer have the digest" in trajectory[2]["error"]
    effects = pd.read_parquet(_collect(copy.parents[2]) / "call_effects.parquet")
    assert effects["change_ssim"].isna().tolist() == [False, True, True]


def _final_render_and_score(run_dir: Path) -> None:
    """The run's own render and score of its answer, as the workflow makes them."""
    rendered = veriharness("render", "--answer-dir", run_dir / "answer", "--reference",
                           TASK_DIR / "reference.png", "--task-dir", TASK_DIR,
                           "--out", run_dir / "render")  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    scored = veriharness("score", "--render-dir", run_dir / "render",
                         "--answer-dir", run_dir / "answer", "--task-dir", TASK_DIR,
                         "--out-dir", run_dir)  # fmt: skip
    assert scored.returncode == 0, scored.stderr


def test_the_version_that_is_the_answer_takes_the_runs_own_render_and_score(
    session: Path, tmp_path: Path
) -> None:
    import shutil

    alone = json.loads((session / "trajectory.json").read_text())["snapshots"]
    copy = tmp_path / "results" / "exp" / "cond" / "task" / "r1"
    shutil.copytree(session, copy)
    (copy / "answer" / ".snakemake_timestamp").touch()  # as Snakemake marks a folder output
    _final_render_and_score(copy)
    scored = veriharness("score-trajectory", "--run-dir", copy, "--task-dir", TASK_DIR)
    assert scored.returncode == 0, scored.stderr
    assert "snapshot 2: ok (the run's own render and score: the same files)" in scored.stdout
    trajectory = json.loads((copy / "trajectory.json").read_text())["snapshots"]
    # Version 2 has the answer's files (version 4 is the same again): neither is rendered.
    assert [s["reused_final"] for s in trajectory] == [False, True, False, True]
    assert trajectory[3]["scored_as"] == 2
    # Its picture is the run's render, linked; nothing else of its own.
    picture = copy / "trajectory" / "2" / "render" / "render.png"
    assert sorted(p.name for p in picture.parents[1].rglob("*")) == ["render", "render.png"]
    assert picture.read_bytes() == (copy / "render" / "render.png").read_bytes()
    # Its scores are the ones its own render and static score gave.
    for mine, own in zip(trajectory, alone, strict=True):
        assert mine["metrics"] == pytest.approx(own["metrics"], abs=1e-12)
        assert (mine["status"], mine["render_status"]) == (own["status"], own["render_status"])
    assert trajectory[1]["metrics"] == {
        k: v for k, v in _metrics(copy).items() if k in trajectory[1]["metrics"]
    }
    # The trajectory table names it.
    rows = pd.read_parquet(_collect(copy.parents[2]) / "trajectory.parquet")
    assert list(rows["reused_final"]) == [False, True, False, True]


def test_a_final_score_that_is_not_of_these_files_is_not_reused(
    session: Path, tmp_path: Path
) -> None:
    import shutil

    copy = tmp_path / "results" / "exp" / "cond" / "task" / "r1"
    shutil.copytree(session, copy)
    _final_render_and_score(copy)
    # The render changed after the score (a digest in metrics.json no longer matches): the
    # draft's, kept from the fixture's own scoring.
    shutil.copy(copy / "trajectory" / "1" / "render" / "render.png", copy / "render" / "render.png")
    scored = veriharness("score-trajectory", "--run-dir", copy, "--task-dir", TASK_DIR)
    assert scored.returncode == 0, scored.stderr
    trajectory = json.loads((copy / "trajectory.json").read_text())["snapshots"]
    assert [s["reused_final"] for s in trajectory] == [False] * 4
    assert (copy / "trajectory" / "2" / "render" / "render.png").is_file()


def test_a_page_that_names_snakemakes_mark_is_rendered_on_its_own(tmp_path: Path) -> None:
    """Snakemake's empty mark in answer/ is no file of the answer, unless the answer names it:
    a page that loads it would render differently without it."""
    import shutil

    from veriharness.agent.snapshots import AnswerSnapshots

    workspace, run_dir = tmp_path / "workspace", tmp_path / "results" / "e" / "c" / "t" / "r1"
    shutil.copytree(TASK_DIR / "assets", workspace / "assets")
    marked = GOOD.replace("</body>", "<img src='.snakemake_timestamp' alt=''></body>")
    (workspace / "answer.html").write_text(marked)
    run_dir.mkdir(parents=True)
    AnswerSnapshots(workspace, run_dir, max_count=5, max_mib=20).at_request(1, b"{}")
    shutil.copytree(workspace, run_dir / "answer")
    (run_dir / "answer" / ".snakemake_timestamp").touch()
    _final_render_and_score(run_dir)
    scored = veriharness("score-trajectory", "--run-dir", run_dir, "--task-dir", TASK_DIR)
    assert scored.returncode == 0, scored.stderr
    [only] = json.loads((run_dir / "trajectory.json").read_text())["snapshots"]
    assert (only["status"], only["reused_final"]) == ("ok", False)
    assert (run_dir / "trajectory" / "1" / "metrics.json").is_file()
