"""The tesseract output cache, with the real tesseract behind a wrapper that counts its runs."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from veriharness._util import tesseract_cache
from veriharness._util.ocr import read_lines, read_words
from veriharness._util.tesseract_cache import CACHE_ENV, TesseractCacheError

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
REAL = shutil.which("tesseract")


def _sign(text: str) -> Image.Image:
    image = Image.new("RGB", (360, 60), "white")
    ImageDraw.Draw(image).text((10, 15), text, font=ImageFont.truetype(FONT, 24), fill=0)
    return image


def _forget_the_program() -> None:
    tesseract_cache.program_identity.cache_clear()
    tesseract_cache.version_text.cache_clear()


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A `tesseract` on PATH that logs each page it reads, then runs the real one; a fresh
    cache folder. Yields the log."""
    assert REAL is not None
    bin_dir, log = tmp_path / "bin", tmp_path / "reads.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "tesseract"
    wrapper.write_text(
        f'#!/bin/sh\ncase "$1" in --*) ;; *) echo "$1" >> {log} ;; esac\nexec {REAL} "$@"\n'
    )
    wrapper.chmod(0o755)
    log.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    _forget_the_program()
    yield log
    _forget_the_program()


def _reads(log: Path) -> int:
    return len(log.read_text().splitlines())


def test_the_same_pixels_are_read_once_and_give_the_same_words(counted: Path) -> None:
    first = read_words(_sign("Quiet harbour lights"))
    assert [w.text for w in first] == ["Quiet", "harbour", "lights"] and _reads(counted) == 1
    assert read_words(_sign("Quiet harbour lights")) == first
    assert read_lines(_sign("Quiet harbour lights"))[0].text == "Quiet harbour lights"
    assert _reads(counted) == 1  # the same pixels and arguments: from the cache
    read_words(_sign("Quiet harbour lights"), psm=6)  # other arguments
    read_words(_sign("Quiet harbour light"))  # other pixels
    read_words(_sign("Quiet harbour lights"), upscale=2)  # other pixels handed to tesseract
    assert _reads(counted) == 4
    assert len(list((Path(tesseract_cache.cache_root()) / "tesseract").glob("*.tsv"))) == 4


def test_another_tesseract_misses_the_cache(counted: Path, tmp_path: Path) -> None:
    read_words(_sign("Quiet harbour lights"))
    wrapper = tmp_path / "bin" / "tesseract"
    # The same binary reporting another version: another program as far as the cache knows.
    wrapper.write_text(
        wrapper.read_text().replace("exec ", 'case "$1" in --version) echo 9.9;; esac\nexec ')
    )
    _forget_the_program()
    assert [w.text for w in read_words(_sign("Quiet harbour lights"))][0] == "Quiet"
    assert _reads(counted) == 2


def test_a_cache_folder_that_cannot_be_written_is_named(
    counted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv(CACHE_ENV, str(blocked))
    with pytest.raises(TesseractCacheError, match=f"{blocked}/tesseract.*set {CACHE_ENV}"):
        read_words(_sign("Quiet harbour lights"))
