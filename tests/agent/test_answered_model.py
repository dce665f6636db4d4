"""The model the provider answered with, through the real boundary. A real `claude` session names
`claude-sonnet-4-5`; a gateway stand-in serves it with the offline model and answers as the
snapshot `claude-sonnet-4-5-20250929`, as Anthropic's API answers an alias. The model proxy
records both names on each request, and collect puts the snapshot in the agent_requests table
and in the run's row of the runs table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from support.gateway import GATEWAY_KEY_ENV, gateway_plan, renaming_gateway
from veriharness import cli
from veriharness.agent.request_record import REQUESTS_FILE, read_requests
from veriharness.agent.session import run_session
from veriharness.experiment.prices import TokenPrice
from veriharness.offline.server import running_offline_server

pytestmark = pytest.mark.slow

NAMED = "claude-sonnet-4-5"
SNAPSHOT = "claude-sonnet-4-5-20250929"


def test_a_session_answered_by_another_snapshot_has_it_in_its_records_and_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GATEWAY_KEY_ENV, "gateway-key")
    price = TokenPrice(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)
    with (
        running_offline_server() as offline,
        renaming_gateway(offline, NAMED, SNAPSHOT) as gateway,
    ):
        plan = gateway_plan(tmp_path, gateway, NAMED, price)
        outcome = run_session(plan)
    assert outcome.status == "ok", outcome.error
    answered = [r for r in read_requests(plan.run_dir / REQUESTS_FILE) if r.input_tokens]
    assert answered and {(r.model, r.response_model) for r in answered} == {(NAMED, SNAPSHOT)}

    exp_dir = tmp_path / "results" / "exp"
    # The plan's placeholder is no experiment record; without one collect finds the run folder.
    (exp_dir / "experiment.json").unlink()
    assert cli.main(["collect", "--experiment-dir", str(exp_dir)]) == 0
    requests = pd.read_parquet(exp_dir / "tables" / "agent_requests.parquet")
    rows = requests[requests.input_tokens.notna()]
    assert len(rows) == len(answered)
    assert set(rows.model) == {NAMED} and set(rows.response_model) == {SNAPSHOT}
    (run,) = pd.read_parquet(exp_dir / "tables" / "runs.parquet").itertuples()
    assert list(run.agent_response_models) == [SNAPSHOT]
    assert run.agent_response_model_count == 1
