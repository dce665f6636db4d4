"""CallMLLM keeps to its provider's pace: a 429's retry-after holds the next call of every
requester of the experiment before it is sent, and nothing is sent twice (D-0011)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mllm.mllm_provider_stub import ProviderStub
from veriharness.experiment.catalog import ProviderSettings
from veriharness.experiment.tool_contract import TextOutput
from veriharness.mllm.backends import (
    ModelRequest,
    PreparedText,
    ProviderError,
    backend_for,
    make_client,
)
from veriharness.pace.provider_pace import ProviderPace


@pytest.fixture
def stub() -> Iterator[ProviderStub]:
    server = ProviderStub().start()
    yield server
    server.stop()


def _settings(base: str) -> ProviderSettings:
    return ProviderSettings(api_style="openai-chat", base_url=base, model="m")


def test_a_429_holds_the_next_call_until_its_retry_after(
    stub: ProviderStub, tmp_path: Path
) -> None:
    request = ModelRequest("Describe.", (PreparedText("notes", "abc"),), TextOutput(kind="text"))
    refused, ok = _settings(f"{stub.base}/status429"), _settings(f"{stub.base}/ok")
    pace = ProviderPace(tmp_path, "mllm-default")
    with make_client(refused) as client, pytest.raises(ProviderError) as error:
        backend_for(refused).send(client, request, pace)
    assert error.value.status == 429
    # Another session's server, sharing the experiment's pace folder, is held too.
    other = ProviderPace(tmp_path, "mllm-default")
    began = time.monotonic()
    with make_client(ok) as client:
        reply = backend_for(ok).send(client, request, other)
    assert time.monotonic() - began >= 0.8  # the stub's retry-after is 1 s
    assert reply.held_ms is not None and reply.held_ms >= 800
    assert [r.path for r in stub.received] == [
        "/status429/chat/completions",
        "/ok/chat/completions",
    ]
    events = (tmp_path / "mllm-default.jsonl").read_text().splitlines()
    assert len(events) == 2 and '"status":429' in events[0] and '"status":200' in events[1]
