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
        "article": "sha256:6393f10d6c551504b6d8f7afddbf18326b8cda502d97e9adaf2eecf50b1daabc",  # noqa: E501
        "dashboard-chart": "sha256:4f271ee41914987eb035d4b9e6e63931b7f46b518b07735246ff1d1ba6ea03db",  # noqa: E501
        "landing-page": "sha256:1ccfa06ae7875922afaa673f6133268ee8561aef5a751462ad0fa972cc423653",  # noqa: E501
        "pricing-table": "sha256:77b9c6507564abbc6845678f1e3abb1235006551dd7494f2a0fb779fe5d498dc",  # noqa: E501
        "settings-page": "sha256:f1385fbb772bf9ae90a0985c0add57c01e8d859c676aaa4ca7d136a9368758a7",  # noqa: E501
        "signup-form": "sha256:9437c2b1d332aacea6127ab17af2986cdb2235901e1421c0a5278c775387a42b",  # noqa: E501
    },
    "b3-present": {
        "article": "sha256:2273342706d74df728f2e89d768843fe852a076fafe91ef31fff5f345f4cc123",  # noqa: E501
        "dashboard-chart": "sha256:2c2c87c408558700192a1a505a02306cff9237041fdce99433169298a6e1fc90",  # noqa: E501
        "landing-page": "sha256:d6105a5dc56af1c6e802ac2af9969a9bba6ac1ca0ddf1f51dd73fbaabd08fcf7",  # noqa: E501
        "pricing-table": "sha256:820f8213adda168c26ff1b1b10482e2cb066950a866b236394a8e5fffcb1ce1e",  # noqa: E501
        "settings-page": "sha256:8bbe23e61c6fa3011f1fb87142b69b9a1ca324e3c9e943fb9ed35c9fca352967",  # noqa: E501
        "signup-form": "sha256:ded74e3a9d7183898afe380a6782e86f92ea67c318fc8411bb0448e714c1ca85",  # noqa: E501
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
