"""The example experiment's run identities, pinned.

A change that only moves code (a refactor, an upgrade of the harness) must not change what a run
is, or every researcher's finished runs would be redone. A change that does alter a run's inputs
updates these hashes in the same commit and says why in its message.

The environment facts name the Chromium program in every example condition, so the pins hold
for the machine setup.sh makes: Debian's `chromium` at /usr/bin/chromium.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import ROOT, veriharness

PINNED_CELLS = {
    "b3-absent": {
        "article": "sha256:e36b3a91e55c5694e44aefcf60ac7da06f912f8c9e724e74636d1e7cf0a2ccee",  # noqa: E501
        "dashboard-chart": "sha256:770f7bd49a5bd5f8f67217e124ba1de319a87bcdd2919765f478ea088e8ad4d6",  # noqa: E501
        "landing-page": "sha256:94026833f3b28c1d0750fa41172b52b9179c2b9036e939eed53cf5e043631015",  # noqa: E501
        "pricing-table": "sha256:a3b319416fa1e27cb01d334fa54f3bcdb47abd8275d16edbd66b6a371020fa9c",  # noqa: E501
        "settings-page": "sha256:bfd31c4adfe313a636d4d6268b4c18fa34aba9133173d05b3ecf427aa0637805",  # noqa: E501
        "signup-form": "sha256:91b5437edb385b5d76d71cc15e6e6911b4735e5464fa9799bc5e74bb4d3c34a3",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:8b959e919ed110928977d135bc4bec0fe31f7acf2a1ff55a1f766b40a55983a7",  # noqa: E501
        "dashboard-chart": "sha256:0cea2f6dfe7d214d6ccb1bf3baf4534425834f74e0ffc99760f113d571d67057",  # noqa: E501
        "landing-page": "sha256:57782f23a9ca1cc622d167043444f007df410b310702ddcd71af8594d0c4a97c",  # noqa: E501
        "pricing-table": "sha256:a1df6569d0539d9c4e599381ddd40dafd9cf4b246e0fba0f1334f45569d3667b",  # noqa: E501
        "settings-page": "sha256:6e3067bfd0ceb566f81417736e64feed2ee07f68a8a50556c815f774402d6f4f",  # noqa: E501
        "signup-form": "sha256:322db1c3f2c03647e6a6a2e59b605cd6c3e34b79950c1933d367c58c86976b9f",  # noqa: E501
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
