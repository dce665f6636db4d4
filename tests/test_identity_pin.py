"""The example experiment's run identities, pinned.

A change that only moves code (a refactor, an upgrade of the harness) must not change what a run
is, or every researcher's finished runs would be redone. A change that does alter a run's inputs
updates these hashes in the same commit and says why in its message.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import ROOT, veriharness

PINNED_CELLS = {
    "b3-absent": {
        "article": "sha256:86cc9bf9a07d91060ba95d577e1e30d1824a97f5a85fe554843dcdde0089c29a",  # noqa: E501
        "dashboard-chart": "sha256:818f40ae1737728116e4e3e2ba28954314490331d41cc7d4aabcf81fb1c8c252",  # noqa: E501
        "landing-page": "sha256:49c7390db604717506b1cc37e5a51fe131beb480f81a2412ccb83a9bdbd45097",  # noqa: E501
        "pricing-table": "sha256:2ae8af7dab430f1886b5406b677a32fb706b70aa8b697028dc154ae0152fb235",  # noqa: E501
        "settings-page": "sha256:30a6072aa2f7f0827b6356ce1cdb5bc174f9b22de4090a2fc9fcd1209a03bf66",  # noqa: E501
        "signup-form": "sha256:f4ab7f06fdb870ab45a8c000b306e61a790647a0ef5fb2562ab4d8754a33df2a",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:9be611828195299ad6bfed2bf79161f24ff9ffd252d82f8b33bd3d7d74d9b038",  # noqa: E501
        "dashboard-chart": "sha256:56f5b8248c3ef50f54f8abea75365cb0e8a060c5036a7b07f447b674799c3652",  # noqa: E501
        "landing-page": "sha256:946c8ae623cf4e5f98025ecbeaf5ad12dc9543c5ffd1e5d3161c646fa67dfd69",  # noqa: E501
        "pricing-table": "sha256:95c20101a3974b85c7d86323a3e6a5fcadeccea9c0fd2b30ccf6f47cb5a2bd11",  # noqa: E501
        "settings-page": "sha256:143aff5cd35eed6a2a005e484e0b437135cd1b58ae0e98466d17a4764f11d1e5",  # noqa: E501
        "signup-form": "sha256:329aa023b546b3a0da14515db385e6adfdde743f1428ee5e413a12003d6a5b42",  # noqa: E501
    },
}


def test_example_experiment_identities_are_pinned(tmp_path: Path) -> None:
    out = tmp_path / "experiment.json"
    proc = veriharness(
        "check-experiment",
        "--config",
        ROOT / "config" / "config.yaml",
        "--project-root",
        ROOT,
        "--out",
        out,
        "--allow-uncommitted",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["cells"] == PINNED_CELLS
