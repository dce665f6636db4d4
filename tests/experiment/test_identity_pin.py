"""The example experiment's run identities, pinned.

A change that only moves code (a refactor, an upgrade of the harness) must not change what a run
is, or every researcher's finished runs would be redone. A change that does alter a run's inputs
updates these hashes in the same commit and says why in its message. The interactive and
responsive example tasks (pricing-toggle, settings-tabs, landing-responsive) were added beside the
six without moving them.

The environment facts name the Chromium program in every example condition, so the pins hold
for the machine setup.sh makes: Debian's `chromium` at /usr/bin/chromium.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import ROOT, veriharness

PINNED_CELLS = {
    "b3-absent": {
        "article": "sha256:0c70cd94f3af06db6fc09070279458e8e2827244a9179229a622a5c26c6ed738",  # noqa: E501
        "dashboard-chart": "sha256:d6770583a917866cb301afec9dbd75751183cad1e097559739db1928027e45df",  # noqa: E501
        "landing-page": "sha256:9d6b2b4e7bc85ff1efa31267bfd2cce88c97b40f91f1aea3f909dae59013577a",  # noqa: E501
        "landing-responsive": "sha256:0806dd7743ccf44b3213a11147e8e1e18ca2b8d923c573bbf23a5739e4cb4b03",  # noqa: E501
        "pricing-table": "sha256:2735b33915f87beffc86ffc84a3f2c986d9a6a6e69b9ca09081e4127ac21b143",  # noqa: E501
        "pricing-toggle": "sha256:f127727f3c4efc91be2f13b20c92b8a36e4f48cb1b907fdb7d427b26de720ef0",  # noqa: E501
        "settings-page": "sha256:194e07b524198d8f61ec031bc8d061468ad760e798d0c8de00c6250495651af8",  # noqa: E501
        "settings-tabs": "sha256:037d59ab3316a84010d5470537d51e3e9305ff43fefaf4e859d9bcaec6d2c33b",  # noqa: E501
        "signup-form": "sha256:283c5b43637f8261571f13c6b5e5972d468eec1df08a66232902ac5d6cdd6e23",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:67849ade5faa6d59db1307f78ecc9fb3b20711fcf185801b3a3c8e0ab80018ad",  # noqa: E501
        "dashboard-chart": "sha256:220cf82db3e984a47282b1d8ced5d63706cf626d7bddff9df7320738e60a408c",  # noqa: E501
        "landing-page": "sha256:52b2ca3f4bc4487cfb36ffabd748caf84fc75aedc7dfb3105735dfdab1f811df",  # noqa: E501
        "landing-responsive": "sha256:a3de7d4df5809379438a37592875e9cc26e22342c8f7efdc554748d096eb17eb",  # noqa: E501
        "pricing-table": "sha256:1343534e8ff36d11dc3f4f26390dee63e95a8ebaad0cdd7b68199b4076840bdb",  # noqa: E501
        "pricing-toggle": "sha256:baac3d197e461ec6053c9145819764cb89bbe0ef9f4b2547b74f3a09e1b648d0",  # noqa: E501
        "settings-page": "sha256:55d0cc96b93b2ad11e256eb86d231f17a3a33a68d5ce847cbdaadbb3ac38f3ae",  # noqa: E501
        "settings-tabs": "sha256:20d2531ae8c6aec01cba6133c48fd488ff39d501703d06005b2530625c3da429",  # noqa: E501
        "signup-form": "sha256:e03f287650eafa1b36ab7e4197a643ad7885f8adfe4aa567bcefce2eaa88e94f",  # noqa: E501
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
