"""Fixtures of the offline model's tests: a server running in this process, with a request log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from veriharness.offline.server import running_offline_server


@pytest.fixture()
def request_log(tmp_path: Path) -> Path:
    return tmp_path / "requests.jsonl"


@pytest.fixture()
def base_url(request_log: Path) -> Iterator[str]:
    with running_offline_server(request_log) as url:
        yield url
