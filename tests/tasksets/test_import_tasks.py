"""`veriharness import-tasks` on fixtures in each published layout, through real Chromium, and
`check-experiment` on the set it writes (the manifest's checksums verified, the set recorded)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from PIL import Image

from support.cli import ROOT, veriharness
from tasksets.published_layouts import (
    BEACON_URL,
    D2C_REMOTE_URL,
    D2C_SCREENSHOT,
    write_design2code,
    write_html_folder,
)
from tasksets.set_checks import check_set, hashed_files, read_manifest, run_import, sha256_of
from veriharness.experiment.config import load_task
from veriharness.runfolder.render import DomRecord


@pytest.fixture(scope="module")
def d2c(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("d2c")
    source, dest = write_design2code(base / "testset"), base / "sets" / "d2c-sample"
    return run_import("design2code", source, dest, "--set-version", "2024-03 sample"), source, dest


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("plain")
    source, dest = write_html_folder(base / "site"), base / "sets" / "site"
    options = ("--width", "800", "--height", "600", "--name", "bike-shop")
    return (
        run_import("html-folder", source, dest, *options, "--description", "The shop's pages."),
        source,
        dest,
    )


def test_design2code_pages_become_tasks_and_every_refusal_is_listed(d2c) -> None:
    proc, source, dest = d2c
    assert proc.returncode == 1, proc.stderr
    assert "2 of 6 page(s) imported" in proc.stdout
    assert (
        "4 skipped (1 no_screenshot, 1 no_text, 1 remote_resources, 1 render_failed)" in proc.stdout
    )
    manifest = read_manifest(dest)
    assert manifest["tasks"] == ["1", "5"]
    skipped = {s["page"]: s for s in manifest["skipped"]}
    assert {page: s["reason"] for page, s in skipped.items()} == {
        "2.html": "remote_resources",
        "3.html": "no_text",
        "4.html": "render_failed",
        "6.html": "no_screenshot",
    }
    assert D2C_REMOTE_URL in skipped["2.html"]["detail"]
    assert "fixture page fails" in skipped["4.html"]["detail"]
    for page in skipped:
        assert f"skipped {page}: {skipped[page]['reason']}" in proc.stderr
    # Nothing of a skipped page, and no staging folder, is left in the set.
    assert sorted(p.name for p in dest.iterdir()) == ["1", "5", "manifest.yaml"]


def test_design2code_task_folders_hold_the_page_its_assets_and_its_render(d2c) -> None:
    _, source, dest = d2c
    task = yaml.safe_load((dest / "1" / "task.yaml").read_text())
    assert task["title"] == "Harbour tours" and "interaction" not in task
    assert task["viewport"] == {"width": D2C_SCREENSHOT[0], "height": D2C_SCREENSHOT[1]}
    assert task["source"] == {
        "layout": "design2code",
        "page": "1.html",
        "page_sha256": sha256_of(source / "1.html"),
        "screenshot": "1.png",
        "screenshot_sha256": sha256_of(source / "1.png"),
    }
    assert (dest / "1" / "reference.html").read_bytes() == (source / "1.html").read_bytes()
    assert (dest / "1" / "rick.jpg").read_bytes() == (source / "rick.jpg").read_bytes()
    for task_id in ("1", "5"):
        spec = load_task(dest, task_id)
        with Image.open(dest / task_id / "reference.png") as png:
            assert png.size == (spec.viewport.width, spec.viewport.height)
        dom = DomRecord.model_validate_json((dest / task_id / "reference_dom.json").read_text())
        # The reference shows the whole page.
        assert (dom.page.width, dom.page.height) == (spec.viewport.width, spec.viewport.height)
        assert dom.texts
    # The long page is taller than its screenshot: it got its own height.
    assert load_task(dest, "5").viewport.height > D2C_SCREENSHOT[1]


def test_design2code_manifest_names_the_set_its_source_and_every_file(d2c) -> None:
    _, source, dest = d2c
    manifest = read_manifest(dest)
    assert manifest["name"] == "d2c-sample" and manifest["version"] == "2024-03 sample"
    assert manifest["description"]
    assert manifest["source"] == {"layout": "design2code", "path": str(source), "pages": 6}
    assert manifest["importer"]["version"] == "2"
    assert manifest["files"] == hashed_files(dest)
    # The source files each task was made from, by their own checksums.
    used = ("1.html", "1.png", "5.html", "5.png", "rick.jpg")
    assert manifest["source_files"] == {name: sha256_of(source / name) for name in used}


def test_a_plain_folder_keeps_nested_assets_and_refuses_what_only_the_render_sees(plain) -> None:
    proc, source, dest = plain
    assert proc.returncode == 1, proc.stderr
    assert "2 of 8 page(s) imported" in proc.stdout
    manifest = read_manifest(dest)
    assert manifest["name"] == "bike-shop" and manifest["description"] == "The shop's pages."
    assert manifest["tasks"] == ["Contact-Us", "about"]
    skipped = {s["page"]: (s["reason"], s["detail"]) for s in manifest["skipped"]}
    assert skipped.keys() == {
        "beacon.html", "blank.html", "broken.html", "grows.html", "missing.html", "outside.html"
    }  # fmt: skip
    # The beacon's request is made by a script: the render blocked it.
    assert skipped["beacon.html"][0] == "remote_resources"
    assert BEACON_URL in skipped["beacon.html"][1]
    assert skipped["blank.html"][0] == "no_text"
    assert skipped["broken.html"] == ("render_failed", "console error fixture console failure")
    # Rendered again at its own height, it is taller still.
    assert skipped["grows.html"][0] == "too_tall"
    assert "grows with the viewport" in skipped["grows.html"][1]
    assert "at a 600 px viewport" in skipped["grows.html"][1]
    assert skipped["missing.html"][0] == "missing_asset"
    assert "'img/nowhere.png'" in skipped["missing.html"][1]
    assert skipped["outside.html"] == (
        "asset_outside_folder",
        f"'../elsewhere.png' resolves to {source.parent / 'elsewhere.png'}",
    )
    for asset in ("css/site.css", "img/bg.png", "img/logo.png"):
        assert (dest / "about" / asset).read_bytes() == (source / asset).read_bytes()
    assert load_task(dest, "about").viewport.width == 800
    assert load_task(dest, "Contact-Us").title == "Contact"
    assert manifest["files"] == hashed_files(dest)


def test_a_set_is_never_written_into_a_folder_that_holds_files(tmp_path: Path) -> None:
    source = write_html_folder(tmp_path / "site")
    dest = tmp_path / "set"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    proc = veriharness("import-tasks", "html-folder", source, dest)
    assert proc.returncode == 2
    assert f"destination {dest} exists and is not an empty folder" in proc.stderr
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]


def test_a_source_with_no_usable_page_exits_2_and_says_why(tmp_path: Path) -> None:
    source = tmp_path / "site"
    source.mkdir()
    (source / "blank.html").write_text("<!doctype html><div style='height:50px'></div>")
    proc = run_import("html-folder", source, tmp_path / "set")
    assert proc.returncode == 2
    assert "0 of 1 page(s) imported" in proc.stdout
    assert "skipped blank.html: no_text" in proc.stderr
    assert f"no page of {source} could be imported" in proc.stderr
    assert read_manifest(tmp_path / "set")["tasks"] == []


def test_check_experiment_records_the_set_and_refuses_a_changed_file(d2c, tmp_path) -> None:
    dest = tmp_path / "d2c-sample"
    shutil.copytree(d2c[2], dest)
    code, stderr, record = check_set(tmp_path, dest)
    assert code == 0, stderr
    assert record is not None and record["task_ids"] == ["1", "5"]
    assert record["task_set"] == {
        "name": "d2c-sample",
        "version": "2024-03 sample",
        "manifest": str(dest / "manifest.yaml"),
        "manifest_sha256": sha256_of(dest / "manifest.yaml"),
        "files_verified": len(hashed_files(dest)),
        "source_layout": "design2code",
        "importer_version": "2",
    }

    page = dest / "1" / "reference.html"
    page.write_text(page.read_text() + "<!-- edited -->\n")
    (dest / "1" / "rick.jpg").unlink()
    (dest / "5" / "notes.txt").write_text("added after import")
    code, stderr, record = check_set(tmp_path, dest)
    assert code == 2 and record is None
    assert "changed since import: 1/reference.html" in stderr
    assert "missing: 1/rick.jpg" in stderr
    assert "not in the manifest: 5/notes.txt" in stderr


def test_the_example_set_is_recorded_with_its_manifest_and_no_checksums(tmp_path) -> None:
    code, stderr, record = check_set(tmp_path, None)
    assert code == 0, stderr
    assert record is not None
    assert record["task_set"] == {
        "name": "veriharness-examples",
        "version": "0.2",
        "manifest": "tasks/manifest.yaml",
        "manifest_sha256": sha256_of(ROOT / "tasks" / "manifest.yaml"),
        "files_verified": None,
        "source_layout": None,
        "importer_version": None,
    }


def test_a_bad_manifest_is_refused_naming_the_field(tmp_path) -> None:
    dest = tmp_path / "set"
    shutil.copytree(ROOT / "tasks", dest)
    manifest = yaml.safe_load((dest / "manifest.yaml").read_text())
    (dest / "manifest.yaml").write_text(yaml.safe_dump(manifest | {"version": 3}))
    code, stderr, _ = check_set(tmp_path, dest)
    assert code == 2
    assert "manifest.yaml: version: Input should be a valid string (got 3)" in stderr
