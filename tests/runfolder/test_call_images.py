"""`call_images/`: a kept file is found by the digest of its bytes, never by its name alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from veriharness._util.hashing import sha256_bytes
from veriharness.runfolder.call_images import CALL_IMAGES, holds_digest, image_name, kept_image

DATA = b"\x89PNG\r\n\x1a\n the bytes a call attached"
DIGEST = sha256_bytes(DATA)
HEX = DIGEST.removeprefix("sha256:")


def test_a_name_is_the_digest_and_the_media_types_extension() -> None:
    assert image_name(DIGEST, "image/png") == f"{CALL_IMAGES}/{HEX}.png"
    assert image_name(DIGEST, "image/jpeg") == f"{CALL_IMAGES}/{HEX}.jpg"
    assert image_name(DIGEST, "image/webp").endswith(".webp")
    assert image_name(DIGEST, "image/gif").endswith(".gif")


@pytest.mark.parametrize(
    ("digest", "media", "named"),
    [
        (DIGEST, "image/bmp", "media_type: 'image/bmp'"),
        (HEX, "image/png", f"attached_sha256: not a sha256:<64 hex digits> digest (got '{HEX}')"),
        ("sha256:../../etc/passwd", "image/png", "'sha256:../../etc/passwd'"),
        (DIGEST.upper(), "image/png", "attached_sha256"),
    ],
)
def test_a_bad_digest_or_media_type_is_refused_naming_it(
    digest: str, media: str, named: str
) -> None:
    with pytest.raises(ValueError) as raised:
        image_name(digest, media)
    assert named in str(raised.value)


def _keep(run_dir: Path, data: bytes, name: str) -> Path:
    path = run_dir / CALL_IMAGES / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_file_whose_bytes_hash_to_its_name_is_found(tmp_path: Path) -> None:
    _keep(tmp_path, DATA, f"{HEX}.jpg")
    errors: list[str] = []
    assert kept_image(tmp_path, DIGEST, errors) == f"{CALL_IMAGES}/{HEX}.jpg"
    assert errors == []


def test_nothing_kept_is_none_and_no_error(tmp_path: Path) -> None:
    errors: list[str] = []
    assert kept_image(tmp_path, DIGEST, errors) is None
    (tmp_path / CALL_IMAGES).mkdir()
    assert kept_image(tmp_path, DIGEST, errors) is None
    assert errors == []


def test_a_file_of_other_bytes_under_the_name_is_not_used_and_named(tmp_path: Path) -> None:
    _keep(tmp_path, b"planted", f"{HEX}.png")
    errors: list[str] = []
    assert kept_image(tmp_path, DIGEST, errors) is None
    assert errors == [
        f"{CALL_IMAGES}/{HEX}.png: its bytes do not hash to its name's digest; not used"
    ]


def test_a_good_file_is_found_beside_a_planted_one(tmp_path: Path) -> None:
    _keep(tmp_path, b"planted", f"{HEX}.png")
    _keep(tmp_path, DATA, f"{HEX}.webp")
    errors: list[str] = []
    assert kept_image(tmp_path, DIGEST, errors) == f"{CALL_IMAGES}/{HEX}.webp"
    assert len(errors) == 1 and f"{HEX}.png" in errors[0]


def test_a_symlink_or_a_folder_of_the_name_is_not_trusted(tmp_path: Path) -> None:
    outside = tmp_path / "outside.png"
    outside.write_bytes(DATA)
    (tmp_path / CALL_IMAGES).mkdir()
    (tmp_path / CALL_IMAGES / f"{HEX}.png").symlink_to(outside)
    (tmp_path / CALL_IMAGES / f"{HEX}.gif").mkdir()
    (tmp_path / CALL_IMAGES / f"{HEX}.jpg").symlink_to(tmp_path / "nowhere")
    errors: list[str] = []
    assert kept_image(tmp_path, DIGEST, errors) is None
    assert sorted(e.split(":")[0] for e in errors) == [
        f"{CALL_IMAGES}/{HEX}.{ext}" for ext in ("gif", "jpg", "png")
    ]
    assert holds_digest(outside, DIGEST) and not holds_digest(tmp_path / "absent", DIGEST)


def test_a_malformed_digest_from_a_trace_is_named_not_looked_up(tmp_path: Path) -> None:
    errors: list[str] = []
    assert kept_image(tmp_path, "sha256:../../x", errors) is None
    assert errors == [
        f"{CALL_IMAGES}: digest: not a sha256:<64 hex digits> digest (got 'sha256:../../x')"
    ]
