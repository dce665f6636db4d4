"""`mllm_calls.call_images`: the kept files of each call's attached images, by digest, only
those whose bytes hash to their name."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from support.call_images import CROP, DRAFT, kept_call_run
from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness._util.hashing import sha256_bytes
from veriharness.runfolder.call_images import CALL_IMAGES, image_name


def test_each_call_names_its_kept_images_and_a_planted_one_is_a_read_error(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "results", conditions=("base", "treat"), tasks=1)
    kept_call_run(exp.exp_dir / "base" / "task-000" / "r1")
    proc = veriharness("collect", "--experiment-dir", str(exp.exp_dir))
    assert proc.returncode == 0, proc.stderr
    calls = pd.read_parquet(exp.exp_dir / "tables" / "mllm_calls.parquet")
    mine = calls[calls.condition == "base"]
    assert mine.call_id.tolist() == ["c1"]
    expected = [image_name(sha256_bytes(d), "image/png") for d in (DRAFT, CROP)]
    assert list(mine.call_images.iloc[0]) == expected
    for name, data in zip(expected, (DRAFT, CROP), strict=True):
        assert (exp.exp_dir / "base" / "task-000" / "r1" / name).read_bytes() == data
    # The synthetic runs of the other condition kept nothing: an empty list, not an error.
    others = calls[calls.condition == "treat"]
    assert len(others) and all(len(v) == 0 for v in others.call_images)
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet").set_index("condition")
    assert f"{CALL_IMAGES}/" in runs.loc["base", "read_errors"]
    assert "do not hash to its name" in runs.loc["base", "read_errors"]
    assert CALL_IMAGES not in runs.loc["treat", "read_errors"]
