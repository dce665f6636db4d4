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
        "article": "sha256:598e80d4dc7d7e44ac5965aaae7e06383cbb9703a44e246cd179749ca2303572",  # noqa: E501
        "dashboard-chart": "sha256:8befce47942ba65dce5ae6097ad579659790c4d9c9f7efddd9cc9b96afb2c67c",  # noqa: E501
        "landing-page": "sha256:866a59dddbb6dd1aa2538b0171ceee9811e4e8b0cd5641d700260b95cfeaf4da",  # noqa: E501
        "pricing-table": "sha256:7e587ada25735201d82844160a2d493bb9bb7c44f748fe85a57f8995ac1d9980",  # noqa: E501
        "settings-page": "sha256:8fffe941a761cc5e0aa91514e7f9aac5ba1ab244251418ad290bd9e9a8f4368d",  # noqa: E501
        "signup-form": "sha256:46ae72a0b229245ccc27ac583f4fa32fa442de161c1bc846981f92ac94572caf",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:21b97993a1c6c07e254702d949eadd861c1c1027b8bf38ad563216630721087f",  # noqa: E501
        "dashboard-chart": "sha256:b9213f96bc20c46b91544d38675a0de8771a332943e5e450ebf3e91e6f41b245",  # noqa: E501
        "landing-page": "sha256:1ff6308c1a47bea6c700c4ab241ce89e9309a82bbe7baf12c5af834e1dd0a703",  # noqa: E501
        "pricing-table": "sha256:c7b86e594f9feffa2d4ab60af6280a11be1542da6eb91e0181baad9b77044195",  # noqa: E501
        "settings-page": "sha256:93b7db9cbb635b39d1bd900e3dea8f526f19f95837a36556942d0f24e2a80786",  # noqa: E501
        "signup-form": "sha256:338162ead80ea9e263330990b2dce2bf201e8835d620797ee4fa2d4582342dd5",  # noqa: E501
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
