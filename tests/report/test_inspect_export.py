"""`veriharness export inspect`: one Inspect AI eval log per condition, read back with
inspect_ai's own reader against the runs table, and opened by `inspect view` in Chromium."""

from __future__ import annotations

import base64
import io
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness._util.programs import find_chromium

# Inspect AI (and the export module, which imports it) are imported where they are used: every
# xdist worker imports this file to collect it, and the package takes about 2 CPU-s to import.
if TYPE_CHECKING:
    from inspect_ai.log import EvalLog

FAULTS = {
    ("base", "task-000", 1): "timeout",
    ("treat", "task-001", 1): "missing",
    ("treat", "task-002", 2): "not_started",
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    from inspect_ai.log import read_eval_log

    from veriharness.report.inspect_log import log_name

    root = tmp_path_factory.mktemp("export")
    exp = write_experiment(
        root / "results", tasks=3, replicates=2, faults=FAULTS, images=True, seed=5
    )
    expected = str(exp.write_expected(root / "expected.json"))
    collect = veriharness("collect", "--experiment-dir", str(exp.exp_dir), "--expected", expected)
    assert collect.returncode == 0, collect.stderr
    out = root / "logs"
    proc = veriharness(
        "export", "inspect", str(exp.exp_dir), "--out", str(out), "--tasks-dir", str(exp.tasks_dir)
    )
    assert proc.returncode == 0, proc.stderr
    logs = {
        c: read_eval_log(str(out / log_name("exp", c)), resolve_attachments=True)
        for c in ("base", "treat")
    }
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet")
    calls = pd.read_parquet(exp.exp_dir / "tables" / "mllm_calls.parquet")
    return exp, out, logs, runs, calls


def _sample(log: EvalLog, task: str, replicate: int):
    assert log.samples is not None
    return next(s for s in log.samples if s.id == task and s.epoch == replicate)


def test_one_log_per_condition_with_a_sample_for_every_run_of_the_table(exported) -> None:
    _, out, logs, runs, _ = exported
    assert sorted(p.name for p in out.iterdir()) == ["exp_base.eval", "exp_treat.eval"]
    for condition, log in logs.items():
        mine = runs[runs["condition"] == condition]
        assert log.samples is not None and log.eval.task == f"exp/{condition}"
        assert sorted((s.id, s.epoch) for s in log.samples) == sorted(
            zip(mine["task"], mine["replicate"], strict=True)
        )
        assert log.results is not None and log.results.total_samples == len(mine)
        assert log.results.completed_samples == int((mine["status"] == "ok").sum())


def test_scores_metadata_and_usage_are_the_runs_tables(exported) -> None:
    _, _, logs, runs, calls = exported
    metrics = [c for c in runs.columns if c.startswith("metric_")]
    for row in runs.itertuples():
        sample = _sample(logs[row.condition], row.task, row.replicate)
        values = {m.removeprefix("metric_"): getattr(row, m) for m in metrics}
        scored = {k: float(v) for k, v in values.items() if pd.notna(v)}
        assert {k: s.value for k, s in (sample.scores or {}).items()} == scored
        assert sample.metadata["unscored"] == sorted(set(values) - set(scored))
        assert sample.metadata["status"] == row.status
        assert sample.metadata["identity_hash"] == (
            None if pd.isna(row.identity_hash) else row.identity_hash
        )
        assert (sample.error is None) == (row.status == "ok")
        if row.status != "ok":
            assert sample.error is not None and sample.error.message.startswith(row.status)
        if pd.isna(row.input_tokens):
            assert sample.model_usage == {}
            continue
        assert sample.metadata["cost_usd"] == pytest.approx(row.cost_usd)
        assert sample.metadata["offline"] is True
        flags = {c.removeprefix("audit_"): getattr(row, c) for c in runs if c.startswith("audit_")}
        assert sample.metadata["flags"] == flags
        agent = sample.model_usage["veriharness-offline-agent-1"]
        assert (agent.input_tokens, agent.output_tokens) == (row.input_tokens, row.output_tokens)
        assert (agent.input_tokens_cache_read, agent.input_tokens_cache_write) == (
            row.cache_read_tokens,
            row.cache_write_tokens,
        )
        mine = calls[
            (calls["condition"] == row.condition)
            & (calls["task"] == row.task)
            & (calls["replicate"] == row.replicate)
            & (calls["outcome"] == "completed")
        ]
        mllm = sample.model_usage.get("offline-vision-1")
        assert (mllm.input_tokens if mllm else 0) == int(mine["input_tokens"].sum())
        assert (mllm.output_tokens if mllm else 0) == int(mine["output_tokens"].sum())


def test_the_headline_score_is_the_declared_primary_outcome(exported) -> None:
    """Inspect shows a log's first score as its headline: the primary outcome (metric_ssim by
    default), not the alphabetically first metric."""
    for log in exported[2].values():
        assert log.results is not None and log.results.scores[0].name == "ssim"
        assert log.eval.metadata["primary_outcome"] == ["ssim"]
        assert log.samples is not None
        for sample in log.samples:
            if sample.scores:
                assert next(iter(sample.scores)) == "ssim"


def test_messages_are_the_transcripts_tool_calls_and_results_in_order(exported) -> None:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool

    exp, _, logs, _, _ = exported
    for (condition, task, rep), spec in exp.runs.items():
        if spec.fault in ("missing", "not_started"):
            assert _sample(logs[condition], task, rep).messages[-1].role == "user"
            continue
        messages = _sample(logs[condition], task, rep).messages
        calls = [
            call
            for m in messages
            if isinstance(m, ChatMessageAssistant)
            for call in m.tool_calls or []
        ]
        assert [c.function for c in calls] == spec.tool_names
        results = [m for m in messages if isinstance(m, ChatMessageTool)]
        assert [r.tool_call_id for r in results] == [c.id for c in calls]
        assert [r.function for r in results] == spec.tool_names
        # The synthetic runs keep no system_prompt.md, so the session's user turn opens them.
        assert messages[0].role == "user"
        assert messages[0].text.startswith("Carry out the image-to-code task")


def test_each_callmllm_call_is_a_model_event_with_the_image_it_sent(exported) -> None:
    from inspect_ai.model import ContentImage

    exp, _, logs, _, _ = exported
    regions = 0
    for (condition, task, rep), spec in exp.runs.items():
        if not spec.mllm_calls:
            continue
        events = [e for e in _sample(logs[condition], task, rep).events if e.event == "model"]
        assert [e.metadata["call_id"] for e in events] == [c["call_id"] for c in spec.mllm_calls]
        for event, call in zip(events, spec.mllm_calls, strict=True):
            assert event.role == "CallMLLM"
            assert (event.error is not None) == call["failed"]
            assert event.metadata["tool_use_link"] == "order"
            images = [c for c in event.input[0].content if isinstance(c, ContentImage)]
            wanted = [i for i in call["inputs"] if i["kind"] == "image"]
            # The synthetic trace digests only reference.png to a file that exists.
            assert len(images) == sum(1 for i in wanted if i["path"] == "reference.png")
            for image, item in zip(images, wanted, strict=False):
                data = base64.b64decode(image.image.split(",", 1)[1])
                with Image.open(io.BytesIO(data)) as shown:
                    size = shown.size
                region = item.get("region")
                regions += region is not None
                assert size == ((region["width"], region["height"]) if region else (64, 48))
    assert regions > 0


def test_export_without_collected_tables_says_what_to_run(tmp_path: Path) -> None:
    (tmp_path / "exp").mkdir()
    proc = veriharness("export", "inspect", str(tmp_path / "exp"))
    assert proc.returncode == 2
    assert "runs.parquet not found; run `veriharness collect` first" in proc.stderr


def test_a_list_cell_of_the_runs_table_is_a_list_in_the_log(tmp_path: Path) -> None:
    # Parquet gives a list column's cell back as an array, of any length (agent_response_models).
    from veriharness.report.inspect_log import _plain

    frame = pd.DataFrame({"names": [["b-1", "a-1"], [], None]}).astype(object)
    frame.to_parquet(tmp_path / "runs.parquet")
    cells = [_plain(v) for v in pd.read_parquet(tmp_path / "runs.parquet")["names"]]
    assert cells == [["b-1", "a-1"], [], None]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(url: str, server: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, "inspect view exited"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"inspect view did not answer at {url} within {seconds} s")


def test_inspect_view_lists_every_run_of_each_condition(exported) -> None:
    from veriharness.report.inspect_log import log_name

    _, out, logs, _, _ = exported
    port = _free_port()
    inspect = shutil.which("inspect")
    assert inspect is not None, "the inspect CLI of inspect_ai is not on PATH"
    server = subprocess.Popen(
        [inspect, "view", "--log-dir", str(out), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for(f"http://127.0.0.1:{port}/", server, 90)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(find_chromium()), args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1200})
            for condition, log in logs.items():
                assert log.samples is not None
                page.goto(f"http://127.0.0.1:{port}/#/tasks/{log_name('exp', condition)}")
                page.get_by_text(f"{len(log.samples)} rows").wait_for(timeout=60_000)
                rows = page.locator("[role=row]").all_inner_texts()[1:]  # after the header
                shown = [tuple(row.split("\n")[:2]) for row in rows]
                assert sorted(shown) == sorted((str(s.id), str(s.epoch)) for s in log.samples)
                for sample in log.samples:
                    if sample.error is not None:
                        row = rows[shown.index((str(sample.id), str(sample.epoch)))]
                        assert sample.error.message[:40] in row
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
