"""`call_images/<hex>.<ext>`: the exact bytes the mllm server sent the model for an image input
of a CallMLLM call (the file as the agent named it, or the PNG of the region it asked for), one
file per digest however many calls attached it.

A file is named by the sha256 of its bytes, the `attached_sha256` the trace records with the
input (without its `sha256:` prefix), and by the extension of the media type it was sent as. A
name is a claim, never trusted: `kept_image` returns a file only when its bytes hash to the
digest, and the writer (`mllm/call_images.py`) replaces a file of that name whose bytes do not.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

from veriharness._util.hashing import sha256_file

__all__ = [
    "CALL_IMAGES",
    "EXTENSIONS",
    "holds_digest",
    "image_file",
    "image_name",
    "kept_image",
]

CALL_IMAGES = "call_images"
# The media types the server attaches (`mllm/images.py`), each with its file's extension.
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _hex(digest: str, field: str) -> str:
    if not _DIGEST.fullmatch(digest):
        raise ValueError(f"{field}: not a sha256:<64 hex digits> digest (got {digest!r})")
    return digest.removeprefix("sha256:")


def image_file(digest: str, media_type: str) -> str:
    """The file name, inside `call_images/`, of the bytes of `digest` sent as `media_type`;
    raises ValueError naming the field when either is not one the server attaches."""
    extension = EXTENSIONS.get(media_type)
    if extension is None:
        raise ValueError(
            f"media_type: {media_type!r} is not an attached image type ({', '.join(EXTENSIONS)})"
        )
    return f"{_hex(digest, 'attached_sha256')}.{extension}"


def image_name(digest: str, media_type: str) -> str:
    """The run-folder relative name of the kept bytes of `digest` sent as `media_type`."""
    return f"{CALL_IMAGES}/{image_file(digest, media_type)}"


def holds_digest(path: Path, digest: str) -> bool:
    """Whether `path` is a regular file (not a symlink) whose bytes hash to `digest`."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        return sha256_file(path) == digest
    except OSError:
        return False


def kept_image(run_dir: Path, digest: str, errors: list[str]) -> str | None:
    """The run-folder relative name of the kept file whose bytes hash to `digest`, or None when
    none does. A file of the digest's name holding other bytes is named in `errors` and not used;
    a digest of the wrong form is named too."""
    try:
        stem = _hex(digest, "digest")
    except ValueError as error:
        errors.append(f"{CALL_IMAGES}: {error}")
        return None
    for extension in EXTENSIONS.values():
        name = f"{CALL_IMAGES}/{stem}.{extension}"
        path = Path(run_dir) / name
        if not path.exists() and not path.is_symlink():
            continue
        if holds_digest(path, digest):
            return name
        errors.append(f"{name}: its bytes do not hash to its name's digest; not used")
    return None
