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
        "article": "sha256:2b1d8d930ca61b0cfa78f2107bb0d8d78536f97228930b3921fd63e8794829bd",  # noqa: E501
        "dashboard-chart": "sha256:17200b3ce342407955965b73c3c255575ca1239bc403a7a77b226aca70c782e0",  # noqa: E501
        "landing-page": "sha256:dfab3d607c9be9784cc5c972f1a8d947504b8ebbdaf185ba7432903fb13136a9",  # noqa: E501
        "pricing-table": "sha256:c5abba66ce8d1ba7692a517259a8f9ad8b8beb3813dc0dd9331611e1a1d0f4b1",  # noqa: E501
        "settings-page": "sha256:a0bd3d004c99b4d7c548260c52046d7b343026aac1ddfcab8650fdc18d550294",  # noqa: E501
        "signup-form": "sha256:ab49b32253f849082821aaac08505fe193dd711a265b5e252495df0a0d6be40c",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:4c9e94bebad075497b81c5fabbe63c403205f8e8824c59ad659cdbbd4f3a4406",  # noqa: E501
        "dashboard-chart": "sha256:2ee406b64a8211f0bd5ad11d8c6c624db7624b5b6baaee8d6222c27c585bb56d",  # noqa: E501
        "landing-page": "sha256:c39680032105ed0947ce275596ca245a4fb8a9c42a5d74bf82e1a849a6b6c49c",  # noqa: E501
        "pricing-table": "sha256:ed0f4ab79dcaf2bca78ce5eca589cd0e3083d6e027d5099d6dc46ba3e996f79c",  # noqa: E501
        "settings-page": "sha256:94a8e351356442c052e149946397095715e00000e13c276dc77a82c1a5a60ae7",  # noqa: E501
        "signup-form": "sha256:d56fb61c12429a8f2829a4c4e8f156800a3abdf609222857df31d391c6e0c3bc",  # noqa: E501
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
