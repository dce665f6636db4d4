"""A call the client cancels while the provider's pace holds it is never sent, through the real
server process and the SDK's client: Claude Code cancels a tool call when its tool timeout
passes, and a call sent after that would be paid for with an answer nobody reads."""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TypeVar

import pytest
from mcp.client.stdio import StdioServerParameters

from mllm.mllm_mcp_client import BlockingMcpClient, HttpEndpoint, http_server, server_parameters
from mllm.mllm_provider_stub import ProviderStub
from mllm.mllm_test_data import read_trace, request
from veriharness.pace.provider_pace import PaceState, pace_dir
from veriharness.runfolder.mllm_trace import CallCompleted, CallFailed, CallStarted

Event = TypeVar("Event", CallStarted, CallFailed)
PROFILE_PACE = "mllm-default"  # the pace of the catalog's `default` profile
TOKEN = "mllm-session-token-0123456789"


def _block(experiment: Path, blocked: bool) -> None:
    """The experiment's shared pace state for the profile: every request held, or none."""
    state = PaceState(blocked_until=time.time() + 600 if blocked else 0.0, answered=1)
    folder = pace_dir(experiment)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{PROFILE_PACE}.json").write_text(state.model_dump_json())


def _wait_for(trace: Path, kind: type[Event]) -> Event:
    for _ in range(200):
        found = [e for e in read_trace(trace) if isinstance(e, kind)] if trace.is_file() else []
        if found:
            return found[-1]
        time.sleep(0.05)
    raise AssertionError(f"no {kind.__name__} in {trace} after 10 s")


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_call_cancelled_while_held_by_the_pace_is_never_sent(
    tmp_path: Path, stub: ProviderStub, workspace: Path, catalog_file: Path, transport: str
) -> None:
    experiment, run_dir = tmp_path / "exp", tmp_path / "exp" / "c" / "t" / "r1"
    run_dir.mkdir(parents=True)
    trace = run_dir / "mllm_trace.jsonl"
    ledger = {"experiment_dir": str(experiment), "run_dir": str(run_dir), "condition": "c",
              "task": "t", "replicate": 1}  # fmt: skip
    spend = {"prices": {"default": None}, "ledger": ledger, "paced": True}
    _block(experiment, blocked=True)
    spend_args = ("--spend-json", json.dumps(spend))
    env = {**os.environ, "VH_STUB_URL": stub.base}
    before = len(stub.received)
    with ExitStack() as stack:
        errlog = stack.enter_context(open(tmp_path / "stderr.log", "w"))
        params: StdioServerParameters | HttpEndpoint
        if transport == "http":  # as run-agent serves it to a session
            url = stack.enter_context(http_server(
                workspace, catalog_file, trace, env, TOKEN, tmp_path / "server.log", spend_args
            ))  # fmt: skip
            params = HttpEndpoint(url, TOKEN)
        else:
            params = server_parameters(workspace, catalog_file, trace, env)
            params.args += list(spend_args)
        mllm = stack.enter_context(BlockingMcpClient(params, errlog))
        pending = mllm.start_call(request())
        started = _wait_for(trace, CallStarted)
        time.sleep(1.0)  # held by the blocked pace
        assert pending.cancel()
        failed = _wait_for(trace, CallFailed)
        _block(experiment, blocked=False)  # a call still held would now be sent
        time.sleep(2.0)
        answered = mllm.call(request())  # the server serves on, and the pace lets calls through
    assert len(stub.received) == before + 1
    assert not answered.is_error
    assert failed.call_id == started.call_id and failed.error_type == "cancelled"
    assert "not sent" in failed.error and failed.latency_ms >= 900
    calls = [e.call_id for e in read_trace(trace) if isinstance(e, CallCompleted)]
    assert started.call_id not in calls and len(calls) == 1
