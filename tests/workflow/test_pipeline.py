"""The whole matrix through Snakemake, the real claude CLI, the real mllm server, the embedded
offline model, Chromium and tesseract: 2 tasks x 2 conditions x 1 replicate in a copy of the
project that is its own git repository, with contamination markers planted in it. One task is
made screenshot-only (no reference.html), as a task from a screenshot dataset would be.

The tests here read, plan against or extend the one finished experiment (`finished`); the last
one breaks three of its answers as an agent could and runs the workflow again. The runs that
crash, resume or fail are in test_recovery.py and test_failed_runs.py, each file with its own copy
of the project (conftest.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from support.cli import veriharness
from support.hostile import bomb_png
from support.pipeline import (
    CONDITIONS,
    MARKER_COMMIT,
    MARKER_FILE,
    SCREENSHOT_ONLY,
    TASKS,
    default_sigint,
    planned_agent_jobs,
    planned_jobs,
    run_dir,
    snakemake,
    snakemake_env,
)
from support.project_copy import ROOT
from veriharness.score import SCORER_VERSION

ALLOWED_TOOLS = ["Read", "Write", "Edit", "Bash", "Glob", "Grep", "mcp__mllm__call"]
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
def finished(project: Path) -> Path:
    result = snakemake(project, "--cores", "4", "all")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return project / "results" / "example"


@pytest.fixture(scope="module")
def unchanged_plan(finished: Path, project: Path) -> subprocess.CompletedProcess[str]:
    """A dry run of `all` on the finished experiment, nothing changed: the baseline the tests of
    what a change reruns compare against (one Snakemake start for all of them)."""
    return snakemake(project, "-n", "all")


def _pool_servers_in(project: Path) -> list[int]:
    """Live browser pool servers started by render jobs of this project's workflow runs."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"veriharness.render.pool_server" not in cmdline.read_bytes():
                continue
            if Path(os.readlink(cmdline.parent / "cwd")) == project.resolve():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_the_renders_shared_browsers_which_the_end_of_the_run_stopped(
    finished: Path, project: Path
) -> None:
    records = [json.loads(p.read_text()) for p in finished.glob("*/*/r1/render/render.json")]
    assert len(records) == len(CONDITIONS) * len(TASKS) + len(TASKS)  # and the reference set
    launched = sum("launch_ms" in record["timings"] for record in records)
    # --cores 4: at most four renders at once, so at most four browsers for six renders.
    assert 1 <= launched <= 4, launched
    assert _pool_servers_in(project) == []


def test_every_run_folder_is_complete(finished: Path) -> None:
    for condition in CONDITIONS:
        for task in TASKS:
            run = run_dir(finished, condition, task)
            missing = [f for f in RUN_FILES if not (run / f).is_file()]
            assert not missing, f"{run}: missing {missing}"
            outcome = json.loads((run / "outcome.json").read_text())
            assert outcome["status"] == "ok", outcome
            assert outcome["mllm_connected"] is True
            # Only the configured tools exist in the session: no WebSearch, WebFetch, Task, ...
            assert outcome["session_tools"] == sorted(ALLOWED_TOOLS), outcome["session_tools"]
            # Sandboxed by default, after the shell that joins the session's cgroup, with a
            # network of its own and every limit enforced (P-37).
            assert Path(outcome["command"][4]).name == "bwrap", outcome["command"][:6]
            assert "--unshare-net" in outcome["command"] and outcome["session_network"] == "none"
            limits = outcome["enforced_limits"]
            assert limits["memory"]["by"] in ("cgroup-v1", "cgroup-v2"), limits
            assert limits["processes"]["by"] == limits["memory"]["by"], limits
            assert limits["disk"]["by"] == "tmpfs", limits
            assert outcome["sandboxed"] is True and outcome["offline"] is True
            # The session's model and its mllm server are outside, on loopback: the proxy
            # recorded every request, and the session was told only the proxy's address.
            assert outcome["environment"]["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
            assert not (run / "mcp_config.json").exists()
            record = json.loads((run / "run.json").read_text())
            assert (record["condition"], record["task"]) == (condition, task)


def test_each_runs_last_version_takes_the_runs_own_render_and_score(finished: Path) -> None:
    # Before the tests that change the finished runs. The last version is the run's answer:
    # score-trajectory took the run's render and score for it, linked the render as its
    # picture, and the run's page shows it.
    for condition in CONDITIONS:
        for task in TASKS:
            run = run_dir(finished, condition, task)
            *_, last = json.loads((run / "trajectory.json").read_text())["snapshots"]
            assert last["reused_final"] is True, (run, last)
            metrics = json.loads((run / "metrics.json").read_text())["metrics"]
            assert last["metrics"] == {k: metrics[k] for k in last["metrics"]}
            picture = run / "trajectory" / str(last["n"]) / "render" / "render.png"
            assert picture.read_bytes() == (run / "render" / "render.png").read_bytes()
            page = finished / "report" / "runs" / condition / task / "r1" / "index.html"
            strip = page.read_text().split("The answer over the session", 1)[1]
            strip = strip.split("<h2>", 1)[0]
            assert "(final)" in strip and "not available" not in strip, strip


def _mllm_calls(run: Path) -> int:
    events = [json.loads(line) for line in (run / "mllm_trace.jsonl").read_text().splitlines()]
    return sum(1 for e in events if e["event"] == "mllm_call_completed")


def test_a_screenshot_only_task_is_scored_without_block_metrics(finished: Path) -> None:
    blocks = ("block_match", "text_similarity", "position", "color")
    for condition in CONDITIONS:
        for task in TASKS:
            record = json.loads((run_dir(finished, condition, task) / "metrics.json").read_text())
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
        absent = _mllm_calls(run_dir(finished, "b3-absent", task))
        present = _mllm_calls(run_dir(finished, "b3-present", task))
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
            run = run_dir(finished, condition, task)
            record = json.loads((run / "inferred_tags.json").read_text())
            assert record["annotator"]["kind"] == "rule-based"
            assert len(record["calls"]) >= _mllm_calls(run) >= 1  # rejected calls too
    tags = pd.read_csv(finished / "tables" / "capability_tags.csv")
    assert set(tags["source"]) == {"declared", "inferred"}
    agreement = pd.read_csv(finished / "tables" / "tag_agreement.csv")
    assert "all" in set(agreement["level"])
    index = (finished / "report" / "index.html").read_text()
    assert "<h2>Declared vs inferred capability tags</h2>" in index


def test_changing_the_annotator_reruns_annotation_only(
    unchanged_plan: subprocess.CompletedProcess[str], project: Path
) -> None:
    assert planned_jobs(unchanged_plan, "annotate_calls") == 0
    model = snakemake(project, "-n", "all", extra_config="annotation: {profile: default}\n")
    assert planned_jobs(model, "annotate_calls") == 4
    assert planned_jobs(model, "run_agent") == 0 and planned_jobs(model, "render_answer") == 0


def test_changing_the_block_detection_rerenders_and_rescores_only(
    finished: Path, project: Path
) -> None:
    changed = snakemake(
        project, "-n", "all", extra_config="scoring: {block_detection: design2code}\n"
    )
    assert planned_jobs(changed, "run_agent") == 0
    assert planned_jobs(changed, "render_answer") == planned_jobs(changed, "score_answer") > 0


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


def test_the_inspect_export_holds_each_sessions_messages_calls_and_images(
    finished: Path, project: Path
) -> None:
    # Imported here: every xdist worker imports this file, and Inspect AI takes about 2 CPU-s.
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import ContentImage

    from veriharness.report.inspect_log import log_name

    out = finished / "inspect"
    tasks = project / "tasks"
    proc = veriharness("export", "inspect", finished, "--out", out, "--tasks-dir", tasks)
    assert proc.returncode == 0, proc.stderr
    runs = pd.read_parquet(finished / "tables" / "runs.parquet")
    calls = pd.read_parquet(finished / "tables" / "mllm_calls.parquet")
    for condition in CONDITIONS:
        log = read_eval_log(str(out / log_name("example", condition)), resolve_attachments=True)
        assert log.samples is not None and sorted(s.id for s in log.samples) == TASKS
        for sample in log.samples:
            row = runs.set_index(["condition", "task"]).loc[(condition, sample.id)]
            assert sample.messages[0].role == "system" and sample.messages[1].role == "user"
            uses = [c for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
            results = [m.tool_call_id for m in sample.messages if m.role == "tool"]
            assert len(uses) == row.agent_tool_calls and results == [c.id for c in uses]
            mine = calls[(calls["condition"] == condition) & (calls["task"] == sample.id)]
            mine = mine.sort_values("seq")
            events = [e for e in sample.events if e.event == "model"]
            linked = [(e.metadata or {}).get("tool_use_id") for e in events]
            assert linked == list(mine["tool_use_id"])
            for event, images in zip(events, mine["image_count"], strict=True):
                content = event.input[0].content
                assert not isinstance(content, str)
                shown = [c for c in content if isinstance(c, ContentImage)]
                # An image the agent made in its workspace (its own screenshot) is gone unless
                # kept under answer/; the export names it instead. The reference always shows.
                gone = [c for c in content if c.type == "text" and "is not available" in c.text]
                assert len(shown) + len(gone) == images and len(shown) >= 1
                assert all(c.image.startswith("data:image/png;base64,") for c in shown)
            agent = sample.model_usage[str(sample.output.model)]
            assert (
                agent.input_tokens == row.input_tokens and agent.output_tokens == row.output_tokens
            )
            assert sample.scores is not None and set(sample.scores) == {
                c.removeprefix("metric_")
                for c in runs
                if c.startswith("metric_") and pd.notna(row[c])
            }


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
    assert by_task.stderr.rstrip().splitlines()[-1] == (
        "The comparison and the report are refreshed by `snakemake --cores 4 all` (not by these "
        "targets)"
    )
    rows = pd.read_csv(finished / "by-task" / "landing-page.csv")
    conditions = sorted([*CONDITIONS, "external:reference"])  # the reference set is on by default
    assert sorted(rows["condition"]) == conditions and set(rows["task"]) == {"landing-page"}
    one_run = "results/example/b3-present/landing-page/r1/metrics.json"
    assert planned_agent_jobs(snakemake(project, "-n", one_run)) == 0
    forced = snakemake(project, "-n", one_run, "--forcerun", "run_agent")
    assert planned_agent_jobs(forced) == 1


def test_a_record_reruns_under_a_new_name_but_is_never_rewritten(
    finished: Path, project: Path
) -> None:
    record = finished / "experiment.json"
    before = record.read_bytes()
    env = snakemake_env()

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
    assert planned_agent_jobs(renamed) == 4  # the record's whole matrix, under the new name
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
    env = snakemake_env()
    with subprocess.Popen(
        command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, preexec_fn=default_sigint,
    ) as started:  # fmt: skip
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


def test_execution_settings_do_not_rerun_sessions(
    unchanged_plan: subprocess.CompletedProcess[str], project: Path
) -> None:
    assert planned_agent_jobs(unchanged_plan) == 0
    changed = snakemake(
        project, "-n", "all",
        extra_config="execution: {keep_workspaces: true, debug: false, retries: 2}\n",
    )  # fmt: skip
    assert planned_agent_jobs(changed) == 0


def test_identity_changes_rerun_exactly_the_affected_sessions(
    finished: Path, project: Path
) -> None:
    longer = snakemake(project, "-n", "all", extra_config="agent: {max_turns: 41}\n")
    assert planned_agent_jobs(longer) == 4
    b3 = project / "prompts" / "b3-verification-v0.2.md"  # the module b3-present carries
    original = b3.read_bytes()
    try:
        b3.write_bytes(original + b"\n")
        assert planned_agent_jobs(snakemake(project, "-n", "all")) == 2
    finally:
        b3.write_bytes(original)


def test_one_condition_is_redone_by_one_command_and_all_ends_on_the_verdict(
    finished: Path, project: Path
) -> None:
    """README: `veriharness redo-session --experiment-dir results/example --condition
    b3-present`, then `snakemake --cores 4 all`: exactly that condition's sessions run again,
    the earlier ones kept under attempts/, the comparison and the report refreshed, and the job
    ends on the verdict and where comparison.md and the report are. The start (at another
    --cores) changes the record, so the earlier one is kept for `record diff`."""
    outcomes = {run: (run / "outcome.json").read_bytes() for run in finished.glob("b3-*/*/r1")}
    comparison = (finished / "comparison.json").stat().st_mtime_ns
    report = (finished / "report" / "index.html").stat().st_mtime_ns
    records = finished / "records"
    kept_before = sorted(records.glob("experiment-*.json")) if records.is_dir() else []
    redo = veriharness(
        "redo-session", "--experiment-dir", "results/example", "--condition", "b3-present",
        cwd=project,
    )  # fmt: skip
    assert redo.returncode == 0, redo.stderr
    assert "2 session(s) set aside" in redo.stdout
    again = snakemake(project, "--cores", "3", "all")
    assert planned_agent_jobs(again) == 2, again.stderr[-4000:]
    for run, outcome in outcomes.items():
        redone = run.parents[1].name == "b3-present"
        assert ((run / "outcome.json").read_bytes() != outcome) == redone, run
        assert (run / "attempts" / "1" / "outcome.json").is_file() == redone, run
        if redone:
            assert (run / "attempts" / "1" / "outcome.json").read_bytes() == outcome
    assert (finished / "comparison.json").stat().st_mtime_ns != comparison
    assert (finished / "report" / "index.html").stat().st_mtime_ns != report
    verdict, *paths = again.stderr.rstrip().splitlines()[-3:]
    first = json.loads((finished / "comparison.json").read_text())["pairs"][0]["verdict"][0]
    assert verdict == "Verdict: " + first.replace("`", ""), again.stderr[-2000:]
    assert paths == [
        "Comparison: results/example/comparison.md",
        "Report: results/example/report/index.html",
    ]
    kept = sorted(records.glob("experiment-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    assert len(kept) == len(kept_before) + 1, kept
    diff = veriharness("record", "diff", kept[-1], finished / "experiment.json")
    assert diff.returncode == 1, diff.stderr
    assert "recorded execution.scheduler.resources.cores: " in diff.stdout, diff.stdout


def test_a_new_scorer_version_rescores_every_run_and_reruns_no_session(
    finished: Path,
    project: Path,
    unchanged_plan: subprocess.CompletedProcess[str],
    tmp_path: Path,
) -> None:
    # Next to last in this file: it leaves the experiment scored by the next version.
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
    assert planned_jobs(unchanged_plan, "score_answer") == 0
    planned = snakemake(project, "-n", "all", package=package)
    assert planned_jobs(planned, "score_answer") == 4 + len(TASKS)  # and the reference set
    assert planned_jobs(planned, "score_trajectory") == 4  # the versions, by the same scorer
    assert planned_jobs(planned, "run_agent") == planned_jobs(planned, "render_answer") == 0
    runs = sorted(finished.glob("b3-*/*/r1"))
    kept = {
        path: path.stat().st_mtime_ns
        for run in runs
        for path in (run / "outcome.json", run / "transcript.jsonl", run / "render" / "dom.json")
    }
    tables = (finished / "tables" / "runs.csv").stat().st_mtime_ns
    # `analysis`: everything `all` makes but the report, which this test reads none of.
    rescored = snakemake(project, "--cores", "2", "analysis", package=package)
    assert rescored.returncode == 0, rescored.stderr[-3000:]
    assert {path: path.stat().st_mtime_ns for path in kept} == kept
    for run in runs:
        assert json.loads((run / "metrics.json").read_text())["scorer_version"] == "next"
        assert json.loads((run / "trajectory.json").read_text())["scorer_version"] == "next"
    assert (finished / "tables" / "runs.csv").stat().st_mtime_ns != tables
    table = pd.read_csv(finished / "tables" / "runs.csv")
    assert len(table) == 4 + len(TASKS) and set(table["scorer_version"]) == {"next"}
    # config.yaml's scoring.block_detection, for every run whose block metrics were computed
    # (the reference set's tasks without a reference.html have none).
    blocks = table["metric_block_match"].notna()
    assert blocks.any() and set(table.loc[blocks, "block_detection"]) == {"dom"}
    assert table.loc[table["metrics_status"] != "ok", "block_detection"].isna().all()
    comparison = (finished / "comparison.md").read_text()
    assert "Scored by scorer next (4 runs); block detection dom (" in comparison
    assert "MIXED SCORING" not in comparison


def test_hostile_answers_still_yield_tables_comparison_and_report(
    finished: Path, project: Path
) -> None:
    # Last in this file: it breaks three of the finished experiment's answers.
    experiment = finished
    spinning = run_dir(experiment, "b3-present", "landing-page")
    bomb = run_dir(experiment, "b3-absent", "pricing-table")
    garbled = run_dir(experiment, "b3-absent", "landing-page")
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
    again = snakemake(project, "--cores", "4", "all")
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


def test_a_changed_primary_outcome_is_named_first_beside_the_registered_verdict(
    finished: Path, project: Path
) -> None:
    """Issue 40: the analysis registered at the first start (before any session) stands; a start
    with another primary outcome redoes only the comparison, which names the change first and
    keeps the registered analysis's verdict beside the new one."""
    registration = finished / "preregistration.json"
    before = registration.read_bytes()
    data = json.loads(before)
    assert data["before_sessions"] is True and data["analysis"]["primary"] == ["metric_ssim"]
    recorded = {(r["condition"], r["task"]): r["identity_hash"] for r in data["matrix"]["runs"]}
    assert recorded == {
        (c, t): json.loads((run_dir(finished, c, t) / "run.json").read_text())["identity_hash"]
        for c in CONDITIONS
        for t in TASKS
    }
    changed = snakemake(
        project,
        "--cores",
        "2",
        "analysis",
        # allow_uncommitted: the config file is the test's own, not an input to commit.
        extra_config="analysis: {primary: [metric_mae]}\nallow_uncommitted: true\n",
    )
    assert planned_jobs(changed, "compare_conditions") == 1, changed.stderr[-3000:]
    assert planned_agent_jobs(changed) == 0 and planned_jobs(changed, "score_answer") == 0
    text = (finished / "comparison.md").read_text()
    assert text.splitlines()[0].startswith(
        "> **CHANGED AFTER REGISTRATION: the primary outcome was registered as `metric_ssim` "
        f"before any session; it is now `metric_mae`, after 4 sessions ({registration.name}: "
        f"{data['digest']}"
    ), text[:800]
    verdict = text[text.index("## Verdict") :]
    assert re.search(r"^- `b3-present` .* metric_mae relative to `b3-absent`", verdict, re.M)
    registered = verdict.index(
        "Under the analysis registered before the first session (primary `metric_ssim`):"
    )
    assert re.search(r"^- `b3-present` .* metric_ssim relative to", verdict[registered:], re.M)
    # The main job ends on it too, before the verdict.
    closing = changed.stderr[changed.stderr.rindex("Complete log") :]
    assert (
        "CHANGED AFTER REGISTRATION: the primary outcome was registered as metric_ssim" in closing
    )
    assert registration.read_bytes() == before


def test_a_matrix_with_one_more_task_is_named_as_grown(
    finished: Path, project: Path, tmp_path: Path
) -> None:
    """The start check of a copy of the finished experiment with a third task, and compare on
    it: the registration stays as it was, and the comparison names the runs the matrix grew by."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(project), str(clone)], check=True)
    shutil.copytree(ROOT / "tasks" / "settings-page", clone / "tasks" / "settings-page")
    subprocess.run(["git", "-C", str(clone), "add", "-A"], check=True)
    commit = ["-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "a task"]
    subprocess.run(["git", "-C", str(clone), *commit], check=True)
    experiment = clone / "results" / "example"
    shutil.copytree(finished, experiment, ignore=shutil.ignore_patterns("report", "logs"))
    before = (experiment / "preregistration.json").read_bytes()
    tasks = json.dumps(
        {"tasks": [*TASKS, "settings-page"], "analysis": {"primary": ["metric_ssim"]}}
    )
    started = veriharness(
        "check-experiment", "--config", clone / "config" / "test.yaml", "--config-json", tasks,
        "--project-root", clone, "--out", experiment / "experiment.json",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert "stands, never rewritten: the run matrix grew" in started.stdout, started.stdout
    compared = veriharness(
        "compare", "--experiment-dir", experiment, "--pair", *CONDITIONS, "--resamples", "200"
    )
    assert compared.returncode == 0, compared.stderr
    first = (experiment / "comparison.md").read_text().splitlines()[0]
    assert first.startswith(
        "> **CHANGED AFTER REGISTRATION: the run matrix grew: it was registered as 4 runs "
        "(2 condition(s) x 2 task(s) x 1 replicate(s)) before any session; it is now 6 runs "
        "(2 condition(s) x 3 task(s) x 1 replicate(s)): tasks added: `settings-page`; 2 run(s) "
        "added (b3-absent/settings-page/r1, b3-present/settings-page/r1) (after 4 sessions"
    ), first
    assert (experiment / "preregistration.json").read_bytes() == before


def test_every_b3_present_run_keeps_its_versions_and_each_call_has_its_effect_row(
    finished: Path,
) -> None:
    tables = finished / "tables"
    trajectory = pd.read_parquet(tables / "trajectory.parquet")
    present = trajectory[trajectory["condition"] == "b3-present"]
    scored = present[present["score_status"] == "ok"].groupby("task").size()
    assert sorted(scored.index) == sorted(TASKS) and (scored >= 2).all()
    assert present.groupby("task")["final"].sum().eq(1).all()
    calls = pd.read_parquet(tables / "mllm_calls.parquet")
    effects = pd.read_parquet(tables / "call_effects.parquet")
    keys = ["condition", "task", "replicate", "call_id"]
    assert sorted(map(tuple, effects[keys].to_numpy())) == sorted(
        map(tuple, calls[keys].to_numpy())
    )
    # The review call of a b3-present run sees the agent's own draft, kept as it was sent.
    reviewed = calls[calls["condition"] == "b3-present"]["call_images"]
    assert any(len(images) == 2 for images in reviewed)


def test_turning_the_trajectory_on_later_scores_the_kept_versions_and_reruns_no_session(
    finished: Path, project: Path
) -> None:
    # The summaries made with scoring.trajectory off, as a study that started with it off has them.
    settings = "scoring: {trajectory: false}\nallow_uncommitted: true\n"  # a file of the test's
    summaries = [f"results/example/{c}/summary.csv" for c in CONDITIONS]
    off = snakemake(project, "--cores", "4", *summaries, extra_config=settings)
    assert off.returncode == 0, off.stderr[-3000:]
    assert planned_jobs(off, "score_trajectory") == 0 and planned_jobs(off, "run_agent") == 0
    for path in finished.glob("*/*/r1/trajectory.json"):
        path.unlink()  # its sessions' versions are kept in snapshots/, none scored yet
    on = snakemake(project, "-n", *summaries)
    assert planned_jobs(on, "score_trajectory") == len(CONDITIONS) * len(TASKS)
    assert planned_jobs(on, "run_agent") == 0 and planned_jobs(on, "render_answer") == 0
