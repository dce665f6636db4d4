"""The whole matrix through Snakemake, the real claude CLI, the real mllm server, the embedded
offline model, Chromium and tesseract: 2 tasks x 2 conditions x 1 replicate in a copy of the
project that is its own git repository, with contamination markers planted in it. One task is
made screenshot-only (no reference.html), as a task from a screenshot dataset would be."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from support.hostile import bomb_png
from support.project_copy import ROOT, copy_project
from veriharness._util.programs import find_claude
from veriharness.offline.server import FAULTS_ENV
from veriharness.score import SCORER_VERSION

TASKS = ["landing-page", "pricing-table"]
SCREENSHOT_ONLY = "pricing-table"
CONDITIONS = ["b3-absent", "b3-present"]
ALLOWED_TOOLS = ["Read", "Write", "Edit", "Bash", "Glob", "Grep", "mcp__mllm__call"]
MARKER_FILE = f"CLAUDE-MD-MARKER-{uuid.uuid4().hex}"
MARKER_COMMIT = f"COMMIT-MARKER-{uuid.uuid4().hex}"
RUN_FILES = [
    "run.json",
    "system_prompt.md",
    "transcript.jsonl",
    "agent_requests.jsonl",
    "mllm_server.log",
    "mllm_trace.jsonl",
    "outcome.json",
    "model_requests.jsonl",
    "answer/answer.html",
    "render/render.png",
    "render/dom.json",
    "render/render.json",
    "audit.json",
    "metrics.json",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {
        "CLAUDE.md": f"Project notes. {MARKER_FILE}\n",
        "config/test.yaml": f"tasks: {json.dumps(TASKS)}\nexecution:\n  debug: true\n",
    }
    return copy_project(
        tmp_path_factory.mktemp("project"),
        TASKS,
        files,
        f"Initial import {MARKER_COMMIT}",
        without=[
            f"tasks/{SCREENSHOT_ONLY}/{name}" for name in ("reference.html", "reference_dom.json")
        ],
    )


def snakemake(
    project: Path, *args: str, extra_config: str | None = None, package: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Snakemake in the copy; `extra_config` is YAML layered over config/test.yaml; `package`
    is a folder whose veriharness package is used instead of the installed one."""
    configs = ["config/test.yaml"]
    if extra_config is not None:
        (project / "config" / "extra.yaml").write_text(extra_config)
        configs.append("config/extra.yaml")
    env = {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args, "--configfile", *configs],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


@pytest.fixture(scope="module")
def finished(project: Path) -> Path:
    result = snakemake(project, "--cores", "4", "all")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return project / "results" / "example"


def _run_dir(experiment: Path, condition: str, task: str) -> Path:
    return experiment / condition / task / "r1"


def test_every_run_folder_is_complete(finished: Path) -> None:
    for condition in CONDITIONS:
        for task in TASKS:
            run = _run_dir(finished, condition, task)
            missing = [f for f in RUN_FILES if not (run / f).is_file()]
            assert not missing, f"{run}: missing {missing}"
            outcome = json.loads((run / "outcome.json").read_text())
            assert outcome["status"] == "ok", outcome
            assert outcome["mllm_connected"] is True
            # Only the configured tools exist in the session: no WebSearch, WebFetch, Task, ...
            assert outcome["session_tools"] == sorted(ALLOWED_TOOLS), outcome["session_tools"]
            assert Path(outcome["command"][0]).name == "bwrap"  # sandboxed by default
            assert outcome["sandboxed"] is True and outcome["offline"] is True
            # The session's model and its mllm server are outside, on loopback: the proxy
            # recorded every request, and the session was told only the proxy's address.
            assert outcome["environment"]["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
            assert not (run / "mcp_config.json").exists()
            record = json.loads((run / "run.json").read_text())
            assert (record["condition"], record["task"]) == (condition, task)


def _mllm_calls(run: Path) -> int:
    events = [json.loads(line) for line in (run / "mllm_trace.jsonl").read_text().splitlines()]
    return sum(1 for e in events if e["event"] == "mllm_call_completed")


def test_a_screenshot_only_task_is_scored_without_block_metrics(finished: Path) -> None:
    blocks = ("block_match", "text_similarity", "position", "color")
    for condition in CONDITIONS:
        for task in TASKS:
            record = json.loads((_run_dir(finished, condition, task) / "metrics.json").read_text())
            metrics = record["metrics"]
            assert record["status"] == "ok"
            assert metrics["ssim"] is not None and metrics["ocr_word_f1"] is not None
            if task == SCREENSHOT_ONLY:
                assert all(metrics[name] is None for name in blocks), metrics
                assert record["details"]["blocks"]["computed"] is False
                assert record["details"]["ocr_words"]["f1_ceiling"] is None
            else:
                assert all(metrics[name] is not None for name in blocks), metrics


def test_b3_present_runs_make_more_callmllm_calls(finished: Path) -> None:
    for task in TASKS:
        absent = _mllm_calls(_run_dir(finished, "b3-absent", task))
        present = _mllm_calls(_run_dir(finished, "b3-present", task))
        assert absent >= 1
        assert present > absent, (task, absent, present)


def test_no_request_the_model_received_holds_the_repository_markers(finished: Path) -> None:
    requests = 0
    for log in finished.glob("*/*/r1/model_requests.jsonl"):
        text = log.read_text()
        requests += text.count("\n")
        assert MARKER_FILE not in text, f"CLAUDE.md leaked into {log}"
        assert MARKER_COMMIT not in text, f"a commit message leaked into {log}"
    assert requests >= 8  # 4 sessions, each several agent and CallMLLM requests


def test_tables_comparison_and_report(finished: Path) -> None:
    runs = pd.read_csv(finished / "tables" / "runs.csv")
    assert len(runs) == 6
    sessions = runs[runs["answer_source"] == "session"]
    assert set(sessions["condition"]) == set(CONDITIONS) and len(sessions) == 4
    assert (finished / "comparison.csv").is_file()
    assert (finished / "report" / "index.html").is_file()
    for condition in CONDITIONS:
        assert len(pd.read_csv(finished / condition / "summary.csv")) == 2
    requests = pd.read_parquet(finished / "tables" / "agent_requests.parquet")
    messages = requests[requests["path"] == "/v1/messages"]
    assert len(messages) >= 8 and (messages["http_status"] == 200).all()
    assert messages["output_tokens"].notna().all() and sessions["sandboxed"].all()
    per_run = requests.groupby(["condition", "task"]).size()
    assert (sessions.set_index(["condition", "task"])["agent_requests"] == per_run).all()


def test_the_reference_set_is_imported_and_scored_through_the_workflow(finished: Path) -> None:
    runs = pd.read_csv(finished / "tables" / "runs.csv").set_index(["condition", "task"])
    for task in TASKS:
        run = runs.loc[("external:reference", task)]
        assert run.answer_source == "external" and run.in_matrix
        assert pd.isna(run.mllm_calls) and pd.isna(run.cost_usd)
        folder = finished / "external:reference" / task / "r1"
        assert json.loads((folder / "outcome.json").read_text())["kind"] == "external_answer"
        assert not (folder / "transcript.jsonl").exists()
        if task == SCREENSHOT_ONLY:  # no reference.html in this copy: listed, not scored
            assert run.status == "missing_answer" and "reference.html" in run.reason
        else:
            assert run.status == "ok" and run.metric_ssim >= 0.99 and run.metric_block_match >= 0.99
    index = (finished / "report" / "index.html").read_text()
    assert "<h2>External answers</h2>" in index


def test_every_call_gets_inferred_tags_and_the_agreement_is_reported(finished: Path) -> None:
    for condition in CONDITIONS:
        for task in TASKS:
            run = _run_dir(finished, condition, task)
            record = json.loads((run / "inferred_tags.json").read_text())
            assert record["annotator"]["kind"] == "rule-based"
            assert len(record["calls"]) >= _mllm_calls(run) >= 1  # rejected calls too
    tags = pd.read_csv(finished / "tables" / "capability_tags.csv")
    assert set(tags["source"]) == {"declared", "inferred"}
    agreement = pd.read_csv(finished / "tables" / "tag_agreement.csv")
    assert "all" in set(agreement["level"])
    index = (finished / "report" / "index.html").read_text()
    assert "<h2>Declared vs inferred capability tags</h2>" in index


def _planned(result: subprocess.CompletedProcess[str], rule: str) -> int:
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(rf"^{rule}\s+(\d+)\s*$", result.stdout + result.stderr, re.MULTILINE)
    return int(match.group(1)) if match else 0


def test_changing_the_annotator_reruns_annotation_only(finished: Path, project: Path) -> None:
    assert _planned(snakemake(project, "-n", "all"), "annotate_calls") == 0
    model = snakemake(project, "-n", "all", extra_config="annotation: {profile: default}\n")
    assert _planned(model, "annotate_calls") == 4
    assert _planned(model, "run_agent") == 0 and _planned(model, "render_answer") == 0


def test_every_callmllm_call_is_linked_by_the_id_claude_code_sent(finished: Path) -> None:
    calls = pd.read_parquet(finished / "tables" / "mllm_calls.parquet")
    uses = pd.read_parquet(finished / "tables" / "agent_tool_calls.parquet")
    assert len(calls) >= 4
    assert set(calls["tool_use_link"]) == {"tool_use_id"}
    # The recorded id is the one in the transcript's tool use, in the same run.
    mllm_uses = uses[uses["tool"] == "mcp__mllm__call"]
    keys = ["condition", "task", "replicate", "tool_use_id"]
    linked = calls.merge(mllm_uses, on=keys, how="left", indicator=True)
    assert (linked["_merge"] == "both").all(), linked[keys]


def test_snakemake_report_holds_the_tables_renders_and_run_pages(
    finished: Path, project: Path
) -> None:
    result = snakemake(project, "--report", "results/example/report.zip")
    assert result.returncode == 0, result.stderr[-3000:]
    with zipfile.ZipFile(project / "results" / "example" / "report.zip") as archive:
        names = archive.namelist()
    assert any(n.endswith("report.html") for n in names)
    assert any(n.endswith("comparison.csv") for n in names)
    # Each run's render is its own report item; the run pages carry one more copy each.
    items = [n for n in names if re.fullmatch(r"report/data/raw/[0-9a-f]+/render\.png", n)]
    assert len(items) == 4 + len(TASKS)  # the sessions', and the reference set's
    for condition in CONDITIONS:
        for task in TASKS:
            page_render = f"/runs/{condition}/{task}/r1/render.png"
            assert any(n.endswith(page_render) for n in names), page_render
    assert any(n.endswith("index.html") and "report" in n for n in names)


def test_targets_for_one_task_one_run_and_a_forced_session(finished: Path, project: Path) -> None:
    by_task = snakemake(project, "--cores", "2", "results/example/by-task/landing-page.csv")
    assert by_task.returncode == 0, by_task.stderr[-3000:]
    rows = pd.read_csv(finished / "by-task" / "landing-page.csv")
    conditions = sorted([*CONDITIONS, "external:reference"])  # the reference set is on by default
    assert sorted(rows["condition"]) == conditions and set(rows["task"]) == {"landing-page"}
    one_run = "results/example/b3-present/landing-page/r1/metrics.json"
    assert _planned_agent_jobs(snakemake(project, "-n", one_run)) == 0
    forced = snakemake(project, "-n", one_run, "--forcerun", "run_agent")
    assert _planned_agent_jobs(forced) == 1


def test_failed_sessions_are_recorded_and_the_others_go_on(finished: Path, project: Path) -> None:
    # One turn is too few to write an answer: every session stops at its turn limit.
    short = snakemake(
        project, "--cores", "4", "all",
        extra_config="experiment: short\nagent: {max_turns: 1}\nallow_uncommitted: true\n",
    )  # fmt: skip
    assert short.returncode == 0, short.stderr[-3000:]
    experiment = project / "results" / "short"
    runs = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    assert len(runs) == 4
    assert set(runs["status"]) == {"max_turns"}, runs[["status", "reason"]]
    for metrics in experiment.glob("b3-*/*/r1/metrics.json"):
        assert json.loads(metrics.read_text())["status"] == "no_render"
    record = json.loads((experiment / "experiment.json").read_text())
    assert record["provenance"]["uncommitted_changes"] is True
    assert "config/extra.yaml" in json.dumps(record["provenance"]["git_dirty_files"])


def test_hostile_answers_still_yield_tables_comparison_and_report(project: Path) -> None:
    extra = "experiment: hostile\nallow_uncommitted: true\n"
    assert snakemake(project, "--cores", "4", "all", extra_config=extra).returncode == 0
    experiment = project / "results" / "hostile"
    spinning = _run_dir(experiment, "b3-present", "landing-page")
    bomb = _run_dir(experiment, "b3-absent", "pricing-table")
    garbled = _run_dir(experiment, "b3-absent", "landing-page")
    # What an agent could have written: a page that never finishes loading, an image bomb in
    # assets/, and a transcript cut into bytes that are not JSON and not UTF-8.
    (spinning / "answer" / "answer.html").write_text(
        "<h1>Spins</h1><script>onload = () => { for (;;) alert('again') }</script>"
    )
    (bomb / "answer" / "assets").mkdir(exist_ok=True)
    bomb_png(bomb / "answer" / "assets" / "huge.png", 30_000, 30_000)
    (bomb / "answer" / "answer.html").write_text("<h1>Bomb</h1><img src='assets/huge.png'>")
    with open(garbled / "transcript.jsonl", "ab") as transcript:
        transcript.write(b'{"type": "assistant", "mess\xff\xfe\n\x00\x00[not json\n')
    # Snakemake redoes a missing intermediate file only when something downstream is missing too.
    for run in (spinning, bomb):
        for name in ("render/render.json", "render/render.png", "render/dom.json", "metrics.json"):
            (run / name).unlink()
    for summary in experiment.glob("*/summary.csv"):
        summary.unlink()
    again = snakemake(project, "--cores", "4", "all", extra_config=extra)
    assert again.returncode == 0, again.stderr[-4000:]
    table = pd.read_csv(experiment / "tables" / "runs.csv")
    runs = table[table["answer_source"] == "session"].set_index(["condition", "task"])
    assert len(runs) == 4
    spun = runs.loc[("b3-present", "landing-page")]
    assert spun["status"] == "render_failed" and spun["reason"].startswith("render_failed: load")
    assert runs.loc[("b3-absent", "pricing-table"), "audit_oversized_images"] == True  # noqa: E712
    assert "transcript.jsonl" in runs.loc[("b3-absent", "landing-page"), "read_errors"]
    comparison = (experiment / "comparison.md").read_text()
    # A page that broke its own render counts for its condition, at the floor (P-33).
    assert "## Runs excluded: 0 (not the agent's doing)" in comparison
    csv = pd.read_csv(experiment / "comparison.csv")
    ssim = csv[(csv.measure == "metric_ssim") & (csv.population == "itt")].iloc[0]
    assert (ssim.n_floor_b, ssim.n_floor_t) == (0, 1) and ssim.n_pairs == 2
    assert "## Run statuses by condition" in comparison
    assert (experiment / "report" / "index.html").is_file()


def test_an_interrupted_matrix_resumes_with_only_its_unfinished_runs(
    finished: Path, project: Path
) -> None:
    # One task in both conditions: one run finished and one not when the matrix is interrupted.
    extra = "experiment: interrupted\nallow_uncommitted: true\ntasks: [landing-page]\n"
    runs_in_matrix = len(CONDITIONS)
    (project / "config" / "extra.yaml").write_text(extra)
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "all",
        "--cores",
        "2",
        "--resources",
        "agent_sessions=1",
        "--configfile",
        "config/test.yaml",
        "config/extra.yaml",
    ]
    env = {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}
    experiment = project / "results" / "interrupted"
    process = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        # A render that has started means its run's session job is complete for Snakemake.
        while not list(experiment.glob("b3-*/*/r1/render/render.json")):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=120)
    assert not _sessions_alive(experiment), "an interrupted job left its claude session running"
    completed = {p.parent.parent for p in experiment.glob("b3-*/*/r1/render/render.json")}
    stamps = {run: (run / "outcome.json").stat().st_mtime_ns for run in completed}
    planned = _planned_agent_jobs(snakemake(project, "-n", "all", extra_config=extra))
    assert 1 <= planned <= runs_in_matrix - len(completed)
    assert snakemake(project, "--cores", "2", "all", extra_config=extra).returncode == 0
    for run, stamp in stamps.items():
        assert (run / "outcome.json").stat().st_mtime_ns == stamp, f"{run} was run again"
    runs = pd.read_csv(experiment / "tables" / "runs.csv")
    assert len(runs.query("status == 'ok' and answer_source == 'session'")) == runs_in_matrix


def _sessions_alive(experiment: Path) -> list[str]:
    """Command lines of live processes that belong to this experiment's sessions (after a
    short grace period for them to end)."""
    for _ in range(50):
        alive = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(experiment) in text and "claude" in text and "snakemake" not in text:
                alive.append(text)
        if not alive:
            return []
        time.sleep(0.2)
    return alive


def _planned_agent_jobs(result: subprocess.CompletedProcess[str]) -> int:
    return _planned_jobs(result, "run_agent")


def _planned_jobs(result: subprocess.CompletedProcess[str], rule: str) -> int:
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(rf"^{rule}\s+(\d+)\s*$", result.stdout + result.stderr, re.MULTILINE)
    return int(match.group(1)) if match else 0


def test_a_record_reruns_under_a_new_name_but_is_never_rewritten(
    finished: Path, project: Path
) -> None:
    record = finished / "experiment.json"
    before = record.read_bytes()
    env = {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}

    def dry_run(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "snakemake", "-n", "all", "--configfile", str(record)]
        return subprocess.run(
            [*command, *extra], cwd=project, env=env, capture_output=True, text=True, timeout=300
        )

    same = dry_run()
    assert same.returncode != 0
    assert "is the record this experiment would rewrite" in same.stdout + same.stderr
    renamed = dry_run("--config", "experiment=example-rerun")
    assert renamed.returncode == 0, renamed.stderr[-3000:]
    assert _planned_agent_jobs(renamed) == 4  # the record's whole matrix, under the new name
    assert "results/example-rerun/" in renamed.stdout + renamed.stderr
    assert record.read_bytes() == before


def test_the_readmes_rerun_from_a_record_that_git_ignores_starts_for_real(
    finished: Path, project: Path
) -> None:
    """README: `snakemake --cores 4 all --configfile results/<exp>/experiment.json --config
    experiment=<exp>-rerun`. The record sits in results/, which git does not track: it is an
    output whose every value is recorded, not an input to commit. Run for real (the start check
    runs only outside dry runs) and stopped once the rerun's own record is written."""
    tracked = ["git", "ls-files", "--error-unmatch", "results/example/experiment.json"]
    assert subprocess.run(tracked, cwd=project, capture_output=True).returncode != 0
    rerun = project / "results" / "example-rerun"
    command = [
        sys.executable, "-m", "snakemake", "--cores", "1", "all",
        "--configfile", "results/example/experiment.json", "--config", "experiment=example-rerun",
    ]  # fmt: skip
    env = {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}
    with subprocess.Popen(
        command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as started:
        deadline = time.monotonic() + 300
        while started.poll() is None and not (rerun / "experiment.json").is_file():
            assert time.monotonic() < deadline, "the rerun wrote no experiment.json in 300 s"
            time.sleep(0.5)
        if started.poll() is None:
            started.send_signal(signal.SIGINT)
        output, _ = started.communicate(timeout=300)
    assert "refusing to start" not in output, output[-3000:]
    record = json.loads((rerun / "experiment.json").read_text())
    original = json.loads((finished / "experiment.json").read_text())
    assert record["cells"] == original["cells"]  # the same runs, under the new name
    assert record["provenance"]["uncommitted_changes"] is False


def test_compare_null_plans_no_comparison(project: Path) -> None:
    planned = snakemake(project, "-n", "all", extra_config="experiment: nocompare\ncompare: null\n")
    assert planned.returncode == 0, planned.stderr[-3000:]
    text = planned.stdout + planned.stderr
    assert re.search(r"^write_report\s+1\s*$", text, re.MULTILINE), text[-2000:]
    assert "compare_conditions" not in text and "comparison.csv" not in text


def test_a_list_of_compare_pairs_plans_one_comparison_with_every_pair(project: Path) -> None:
    pairs = (
        "compare:\n"
        "  - {baseline: b3-absent, treatment: b3-present}\n"
        "  - {baseline: b3-present, treatment: b3-absent}\n"
    )
    planned = snakemake(project, "-n", "-p", "all", extra_config=f"experiment: pairs\n{pairs}")
    assert planned.returncode == 0, planned.stderr[-3000:]
    text = planned.stdout + planned.stderr
    assert re.search(r"^compare_conditions\s+1\s*$", text, re.MULTILINE), text[-2000:]
    assert "--pair b3-absent b3-present --pair b3-present b3-absent" in text


def test_execution_settings_do_not_rerun_sessions(finished: Path, project: Path) -> None:
    assert _planned_agent_jobs(snakemake(project, "-n", "all")) == 0
    changed = snakemake(
        project, "-n", "all",
        extra_config="execution: {keep_workspaces: true, debug: false, retries: 2}\n",
    )  # fmt: skip
    assert _planned_agent_jobs(changed) == 0


def test_identity_changes_rerun_exactly_the_affected_sessions(
    finished: Path, project: Path
) -> None:
    longer = snakemake(project, "-n", "all", extra_config="agent: {max_turns: 41}\n")
    assert _planned_agent_jobs(longer) == 4
    b3 = project / "prompts" / "b3-verification-v0.1.md"
    original = b3.read_bytes()
    try:
        b3.write_bytes(original + b"\n")
        assert _planned_agent_jobs(snakemake(project, "-n", "all")) == 2
    finally:
        b3.write_bytes(original)


def _kill_the_job_of(run: Path) -> None:
    """What a scheduler's kill does to a job: its processes (the job's shell, run-agent, the
    claude session and its mllm server, all naming the run folder) end at once, no clean-up."""
    names = [f"{run}{end}".encode() for end in ("/", " ", "\0")]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if any(name in cmdline.read_bytes() + b"\0" for name in names):
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _start_two_runs(
    project: Path, name: str
) -> tuple[str, Path, list[Path], subprocess.Popen[bytes]]:
    """Start Snakemake, one job at a time, on a one-task, two-replicate experiment `name`; its
    extra config, results folder, run folders and process."""
    extra = (
        f"experiment: {name}\nallow_uncommitted: true\ntasks: [landing-page]\n"
        "conditions: [b3-absent]\nreplicates: 2\ncompare: null\n"
    )
    (project / "config" / "extra.yaml").write_text(extra)
    experiment = project / "results" / name
    runs = [experiment / "b3-absent" / "landing-page" / f"r{k}" for k in (1, 2)]
    command = [sys.executable, "-m", "snakemake", "all", "--cores", "1", "--configfile",
               "config/test.yaml", "config/extra.yaml"]  # fmt: skip
    env = {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}
    process = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    return extra, experiment, runs, process


def _one_done_one_busy(
    runs: list[Path], process: subprocess.Popen[bytes], busy: Callable[[Path], bool]
) -> tuple[Path, Path]:
    """Wait until one run has its outcome and the other is `busy`; (done, busy)."""
    deadline = time.monotonic() + 600
    while True:
        done = [r for r in runs if (r / "outcome.json").exists()]
        running = [r for r in runs if r not in done and busy(r)]
        if len(done) == 1 and running:
            return done[0], running[0]
        assert time.monotonic() < deadline and process.poll() is None, (done, running)
        time.sleep(0.1)


def test_a_session_lost_mid_job_is_redone_and_its_attempt_kept(project: Path) -> None:
    extra, experiment, runs, process = _start_two_runs(project, "lost")

    def mid_session(run: Path) -> bool:
        transcript = run / "transcript.jsonl"
        return transcript.exists() and transcript.stat().st_size > 0

    try:
        kept, lost = _one_done_one_busy(runs, process, mid_session)
        _kill_the_job_of(lost.relative_to(project))
        # Snakemake sees the job fail, removes its declared outputs and finishes the other run.
        assert process.wait(timeout=600) != 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    lost_transcript = (lost / "transcript.jsonl").read_bytes()
    assert lost_transcript and not (lost / "outcome.json").exists()
    assert (kept / "metrics.json").exists()
    stamp = (kept / "outcome.json").stat().st_mtime_ns

    resumed = snakemake(project, "--cores", "2", "all", extra_config=extra)

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _planned_agent_jobs(resumed) == 1
    assert (kept / "outcome.json").stat().st_mtime_ns == stamp, "a finished run was redone"
    assert not (kept / "attempts").exists()
    assert json.loads((lost / "outcome.json").read_text())["status"] == "ok"
    attempt = lost / "attempts" / "1"
    assert sorted(p.name for p in lost.joinpath("attempts").iterdir()) == ["1"]
    record = json.loads((attempt / "attempt.json").read_text())
    assert (record["attempt"], record["finished"], record["status"]) == (1, False, None)
    assert "transcript.jsonl" in record["files"] and "outcome.json" not in record["files"]
    assert (attempt / "transcript.jsonl").read_bytes() == lost_transcript
    assert (lost / "transcript.jsonl").read_bytes() != lost_transcript
    runs_table = pd.read_csv(experiment / "tables" / "runs.csv")
    runs_table = runs_table[runs_table["answer_source"] == "session"]  # not the reference set
    assert len(runs_table) == 2 and set(runs_table["status"]) == {"ok"}
    rows = runs_table.set_index("replicate")
    lost_row, kept_row = rows.loc[int(lost.name[1:])], rows.loc[int(kept.name[1:])]
    assert (lost_row["attempts"], kept_row["attempts"]) == (2, 1)
    assert lost_row["attempt_causes"].startswith("attempts/1: lost: no outcome.json")
    assert pd.isna(kept_row["attempt_causes"])


def _run_agent_of(run: Path) -> list[int]:
    """The live `run-agent` processes of a run folder (what `pgrep -af 'veriharness run-agent'`
    shows a researcher)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"run-agent" in argv and str(run).encode() in argv:
            found.append(int(cmdline.parent.name))
    return found


def test_after_snakemake_is_killed_the_readme_steps_resume_it(project: Path) -> None:
    """README, "After a crash": Snakemake alone is SIGKILLed mid-session; its session goes on to
    its end; the restart meets the stale lock; `--unlock`, then the same command finishes. Neither
    session is paid for twice: the one Snakemake did not see finish is restored from finished/.
    Then `veriharness redo-session` makes the next run redo exactly one session, kept aside."""
    extra, experiment, runs, process = _start_two_runs(project, "crashed")
    try:
        # One job at a time: a session running means the other's job finished before it.
        kept, orphaned = _one_done_one_busy(
            runs, process, lambda run: bool(_run_agent_of(run.relative_to(project)))
        )
        deadline = time.monotonic() + 600
        os.kill(process.pid, signal.SIGKILL)  # Snakemake alone; its running job goes on
        process.wait(timeout=60)
        while _run_agent_of(orphaned.relative_to(project)):  # the README: let them end
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    orphan_outcome = (orphaned / "outcome.json").read_bytes()
    assert json.loads(orphan_outcome)["status"] == "ok"
    orphan_transcript = (orphaned / "transcript.jsonl").read_bytes()
    stamp = (kept / "outcome.json").stat().st_mtime_ns

    locked = snakemake(project, "--cores", "1", "all", extra_config=extra)
    assert locked.returncode != 0 and "LockException" in locked.stdout + locked.stderr
    unlocked = snakemake(project, "--unlock", "--cores", "1", "all", extra_config=extra)
    assert unlocked.returncode == 0, unlocked.stderr[-3000:]
    resumed = snakemake(project, "--cores", "1", "all", extra_config=extra)

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (kept / "outcome.json").stat().st_mtime_ns == stamp, "a finished run was redone"
    # Snakemake reran the orphaned run's job (it was incomplete); run-agent restored its session.
    assert _planned_agent_jobs(resumed) == 1
    log = experiment / "logs" / "run_agent"
    assert any("restored" in path.read_text() for path in log.rglob("*.log"))
    assert (orphaned / "outcome.json").read_bytes() == orphan_outcome
    assert (orphaned / "transcript.jsonl").read_bytes() == orphan_transcript
    assert not (kept / "attempts").exists() and not (orphaned / "attempts").exists()
    table = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    assert set(table["status"]) == {"ok"} and set(table["attempts"]) == {1}

    redo = subprocess.run(
        [sys.executable, "-m", "veriharness", "redo-session", str(orphaned)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert redo.returncode == 0, redo.stderr
    again = snakemake(project, "--cores", "1", "all", extra_config=extra)

    assert again.returncode == 0, again.stderr[-3000:]
    assert _planned_agent_jobs(again) == 1
    assert (kept / "outcome.json").stat().st_mtime_ns == stamp
    record = json.loads((orphaned / "attempts" / "1" / "attempt.json").read_text())
    assert record["finished"] is True and "researcher's request" in record["reason"]
    assert (orphaned / "attempts" / "1" / "outcome.json").read_bytes() == orphan_outcome
    table = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    rows = table.set_index("replicate")
    assert set(rows["status"]) == {"ok"}
    assert rows.loc[int(orphaned.name[1:]), "attempts"] == 2
    assert "researcher's request" in rows.loc[int(orphaned.name[1:]), "attempt_causes"]
    assert rows.loc[int(kept.name[1:]), "attempts"] == 1


def test_a_retried_infra_error_shows_in_the_runs_table(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's first model request is answered 529 (overloaded); the retry goes through.
    faults = {"kind": "status", "status": 529, "first": 1}
    monkeypatch.setenv(FAULTS_ENV, json.dumps(faults))
    extra = (
        "experiment: retried\nallow_uncommitted: true\ntasks: [landing-page]\n"
        "conditions: [b3-absent]\ncompare: null\n"
        "execution: {debug: true, infra_retries: 1, api_retries: 0}\n"
    )
    result = snakemake(project, "--cores", "2", "all", extra_config=extra)
    assert result.returncode == 0, result.stderr[-3000:]
    experiment = project / "results" / "retried"
    runs = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    [row] = runs.to_dict("records")
    assert (row["status"], row["attempts"]) == ("ok", 2), row
    assert row["attempt_causes"].startswith("attempts/1: infra_error: ")
    assert "HTTP 529" in row["attempt_causes"]
    kept = experiment / "b3-absent" / "landing-page" / "r1" / "attempts" / "1"
    assert json.loads((kept / "outcome.json").read_text())["status"] == "infra_error"


def test_a_new_scorer_version_rescores_every_run_and_reruns_no_session(
    finished: Path, project: Path, tmp_path: Path
) -> None:
    # Last in this file: it leaves the experiment scored by the next version.
    package = tmp_path / "next"
    shutil.copytree(
        ROOT / "src" / "veriharness",
        package / "veriharness",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    version_file = package / "veriharness" / "score" / "__init__.py"
    current = f'SCORER_VERSION = "{SCORER_VERSION}"'
    assert current in version_file.read_text()
    version_file.write_text(version_file.read_text().replace(current, 'SCORER_VERSION = "next"'))
    assert _planned_jobs(snakemake(project, "-n", "all"), "score_answer") == 0
    planned = snakemake(project, "-n", "all", package=package)
    assert _planned_jobs(planned, "score_answer") == 4 + len(TASKS)  # and the reference set
    assert _planned_jobs(planned, "run_agent") == _planned_jobs(planned, "render_answer") == 0
    runs = sorted(finished.glob("b3-*/*/r1"))
    kept = {
        path: path.stat().st_mtime_ns
        for run in runs
        for path in (run / "outcome.json", run / "transcript.jsonl", run / "render" / "dom.json")
    }
    tables = (finished / "tables" / "runs.csv").stat().st_mtime_ns
    rescored = snakemake(project, "--cores", "2", "all", package=package)
    assert rescored.returncode == 0, rescored.stderr[-3000:]
    assert {path: path.stat().st_mtime_ns for path in kept} == kept
    for run in runs:
        assert json.loads((run / "metrics.json").read_text())["scorer_version"] == "next"
    assert (finished / "tables" / "runs.csv").stat().st_mtime_ns != tables
    table = pd.read_csv(finished / "tables" / "runs.csv")
    assert len(table) == 4 + len(TASKS) and set(table["scorer_version"]) == {"next"}
