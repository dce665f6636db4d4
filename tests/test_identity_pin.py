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
        "article": "sha256:7cc9ed00897764fc176e0dd870da5c32668ca1d61622cf4706824af7e4c4b7ca",  # noqa: E501
        "dashboard-chart": "sha256:5c98de3c6bb08558d4e3dae1bf300d8f6ed705426d5e52b5ecba3a47c6b62aed",  # noqa: E501
        "landing-page": "sha256:5bbe1ababcc42fb18fc2b7f8cd156cc889b917bf28f9a63608ae4422e617f884",  # noqa: E501
        "pricing-table": "sha256:3ac14663558bfdee1ac0d89b3075561de9facf0cf973e093c5ca8b780e9b230d",  # noqa: E501
        "settings-page": "sha256:e81b92105849aaa5a47cf47142ba1655b506ebdf9a41adc2fb8ce1566e4fdbd4",  # noqa: E501
        "signup-form": "sha256:341a447a2b3d58a149942f4e95036f58d9b8c3961edae0d59d55b9d4ecea104b",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:e6d66ae183edea1d20e511199f6d689c5fd6d09cbccb12c8feda0ee87b46a993",  # noqa: E501
        "dashboard-chart": "sha256:e10afdd71c033021c2dff0c7f86ee3f810aea3a01501e0331ecefb1c386d0e78",  # noqa: E501
        "landing-page": "sha256:7213d16b78d72f9d1b7ad8a90aa6ca37867435ca48f7741e7ea1a7e072314447",  # noqa: E501
        "pricing-table": "sha256:cc1a8f318be14243b55ed12a892e65e007622a16abd90f41422e469ad0414b17",  # noqa: E501
        "settings-page": "sha256:ea36bc53722381b7ee75d8371c5b7b312447e9bf6b8ab4cf96fac0e95dc376fb",  # noqa: E501
        "signup-form": "sha256:e0ce9c6ec290ab7ee3239aeb8229fad496cbdd18ed07c9295cffa78d4d3e133e",  # noqa: E501
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
