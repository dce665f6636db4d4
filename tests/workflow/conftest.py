from __future__ import annotations

from pathlib import Path

import pytest

from support.pipeline import pipeline_project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project for one test file alone (support.pipeline): the tests of a file
    share it and run in their file's order; no other file sees what they change."""
    return pipeline_project(tmp_path_factory.mktemp("project"))
