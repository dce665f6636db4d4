"""The example experiment's run identities, pinned.

A change that only moves code (a refactor, an upgrade of the harness) must not change what a run
is, or every researcher's finished runs would be redone. A change that does alter a run's inputs
updates these hashes in the same commit and says why in its message. The interactive and
responsive example tasks (pricing-toggle, settings-tabs, landing-responsive) were added beside the
six without moving them. The six static tasks moved once when their task.yaml lost the obsolete
`interaction: null` (issue 39).

The environment facts name the Chromium program in every example condition, so the pins hold
for the machine setup.sh makes: Debian's `chromium` at /usr/bin/chromium.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import ROOT, veriharness

PINNED_CELLS = {
    "b3-absent": {
        "article": "sha256:67014d42b660b8cc529bb9dd73ad67d317459b994f5c51d54256f3e3cafc495f",  # noqa: E501
        "dashboard-chart": "sha256:64ce6d4985a51f1c5d3bdd7d18e7727bef2f4bf1bbc4f0defdf9207911805c41",  # noqa: E501
        "landing-page": "sha256:7f3cba9e4526ed03cabb23d6915f91dc5d7658613395c37fe73d8bf47463a0e6",  # noqa: E501
        "landing-responsive": "sha256:0806dd7743ccf44b3213a11147e8e1e18ca2b8d923c573bbf23a5739e4cb4b03",  # noqa: E501
        "pricing-table": "sha256:d30513e8d72c72737e934f0ea36eb76af9a8ce825fadb2b7c7bff2777a3e51b5",  # noqa: E501
        "pricing-toggle": "sha256:f127727f3c4efc91be2f13b20c92b8a36e4f48cb1b907fdb7d427b26de720ef0",  # noqa: E501
        "settings-page": "sha256:f992d1caf5768a13f1622421a4fd78c3221f3ae591a53ebc9b25b5e8edccb977",  # noqa: E501
        "settings-tabs": "sha256:037d59ab3316a84010d5470537d51e3e9305ff43fefaf4e859d9bcaec6d2c33b",  # noqa: E501
        "signup-form": "sha256:a37f6e3e2cb2adef7f634e9cfb64c4d32d9a4085f1f9ac644fee819004e4e6a2",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:db85bcc943531d0cd32f6ba154da129a853f2d03dce8bb0f08ddf53339a8acf1",  # noqa: E501
        "dashboard-chart": "sha256:b60216f831e9deed53433e34b369d20d919e56bec0f1b6e280839c43dd3f9d38",  # noqa: E501
        "landing-page": "sha256:63bf41938d535087724d1a3c43a1c20ebcad7a97c20b2d3c6ff24c4b5cbf1a1e",  # noqa: E501
        "landing-responsive": "sha256:a3de7d4df5809379438a37592875e9cc26e22342c8f7efdc554748d096eb17eb",  # noqa: E501
        "pricing-table": "sha256:9aa4f18c00eec563a63c0be6b68c90dffa5f522ccf0354761444e62eac2851a5",  # noqa: E501
        "pricing-toggle": "sha256:baac3d197e461ec6053c9145819764cb89bbe0ef9f4b2547b74f3a09e1b648d0",  # noqa: E501
        "settings-page": "sha256:f813669f07f81eae267cf1529199e2dbcadb18808524d79819c46c1f472576ba",  # noqa: E501
        "settings-tabs": "sha256:20d2531ae8c6aec01cba6133c48fd488ff39d501703d06005b2530625c3da429",  # noqa: E501
        "signup-form": "sha256:2f3151d0f3a6ca9cbe7377a9516f65696afdb80a9d268db7cba74fae91b607eb",  # noqa: E501
    },
}


CHROMIUM = "/usr/bin/chromium"


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
        env={"VERIHARNESS_CHROMIUM": CHROMIUM},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text())
    assert record["cells"] == PINNED_CELLS
