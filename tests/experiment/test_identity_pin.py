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
        "article": "sha256:dbd3b108894293a3c9d93c8b37dcbd61a6544ae3c69087258fe12b10618308ea",  # noqa: E501
        "dashboard-chart": "sha256:78a0ea538ff2d70828606e4ce4cd4c47f78db5bfd1dea4298c252c207ab2ff20",  # noqa: E501
        "landing-page": "sha256:44a26e4aac4bd41ee69f6a730e51122c180a15173c113e4172e202171b967139",  # noqa: E501
        "pricing-table": "sha256:4639c91408236e7c939a42c2dbfd9277d242daf1a3676c86b8585f8806b59be4",  # noqa: E501
        "settings-page": "sha256:ecee35c7b94f0fe2e6bb770f6ce7cbd0f3926182e202dfa770976c0ddba4e649",  # noqa: E501
        "signup-form": "sha256:fb7b9269c7fe49863f944972d7cef16b41af4ef91cad75240960d4be516549aa",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:0d35c55dee144829ffb8f56c7e1afc99b13916baab6bf016801002b3c2ee7002",  # noqa: E501
        "dashboard-chart": "sha256:d71e268e43d13120c6893fd409b5548befa3f4ec39d3dba3d0576d34b98a50d9",  # noqa: E501
        "landing-page": "sha256:194a744ab9bf8783746dfaee88ce897e7ecf8d25620f2bce41d7aa2365a29c0d",  # noqa: E501
        "pricing-table": "sha256:02010b7238f53eac3621b6adbf9fbd03e735879321a13cdf194eec7dd3370629",  # noqa: E501
        "settings-page": "sha256:c9ebb90410863170490820b5273223e7f2e320ca8ef1b87bce2e257ed6e0600e",  # noqa: E501
        "signup-form": "sha256:15256f1369aa91fdd9bd0dd56f818eb269ecf12bed99c6f279b28af326e19729",  # noqa: E501
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
