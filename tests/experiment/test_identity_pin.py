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
        "article": "sha256:c94df6e4e1b2b6e01296ec75409ea3f12a04fd94afed61135ec53ca25f6620eb",  # noqa: E501
        "dashboard-chart": "sha256:23ddc83d5fb9be6ec71014fc3d462bfdab9e1fd6a981d08191a078799e1b52c6",  # noqa: E501
        "landing-page": "sha256:2b49a242ee00fab13ec5ccd3eb0b85862d695fa8fff9bd3d87c1ab71e1abeca1",  # noqa: E501
        "pricing-table": "sha256:6f233c384783aa16a7f041d5ec2cfeaac05ba839cbce48cb14fff810b139c77a",  # noqa: E501
        "settings-page": "sha256:6c593da0ecd76424be7a4d2cd5379ca783a6b24462b3c29ea083493275bdc81a",  # noqa: E501
        "signup-form": "sha256:d67108fcc71936ff7fdd73b8549cc09846fd552f21a4afe5e8a448806ef78af3",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:ce71e47c8e70ff2d5ecc199a01218fff473c2806989b731888a3d5e3c15de6af",  # noqa: E501
        "dashboard-chart": "sha256:da08242a1ed21f88e4d62e75fc91698c0bed4b4cdc2eb036ccfc9d3f26009a34",  # noqa: E501
        "landing-page": "sha256:f40861a2d03ee4d3cd003143949c354300855211df16a928251da953c8fb315d",  # noqa: E501
        "pricing-table": "sha256:885a5f2f900070774d56739760fac6a9961c12ce957e5e38c40f0c99031117c3",  # noqa: E501
        "settings-page": "sha256:7522df780f34068e9adb75dcf8aefa42f789664cd1ab0acd925ed752fcb8f775",  # noqa: E501
        "signup-form": "sha256:ed810d4b8dc87eb5421630f80f3925ce7c1ef02d3e9863d24714bdf7d1f3545e",  # noqa: E501
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
