"""Turning a request's image inputs into the exact bytes the model will see.

Paths are confined to the workspace: a relative path may not climb with ``..``, an absolute path
must lie inside the workspace, and the resolved file (after following symlinks) must still be
inside it. The file is read once; its digest, size and format come from those bytes.

Without a region the original bytes are attached unchanged, so what the model sees is exactly the
file the agent named. With a region exactly that rectangle is cropped and encoded as PNG; a region
that does not fit inside the image is refused, never clamped.

Images above ``MAX_PIXELS`` are refused from the header alone, before any pixel is decoded, which
also stops decompression bombs (Pillow's own, higher limit is kept as a second guard).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from veriharness._util.hashing import sha256_bytes
from veriharness.experiment.tool_contract import ImageInput, Region, RequestRefused

__all__ = [
    "MAX_PIXELS",
    "ACCEPTED_FORMATS",
    "PreparedImage",
    "resolve_image_path",
    "prepare_image",
]

# 40 megapixels: well above any screenshot (8K is 33 MP), far below what would exhaust memory.
MAX_PIXELS = 40_000_000
# Formats that both provider APIs take as image content; a region is always sent as PNG.
ACCEPTED_FORMATS = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}


@dataclass(frozen=True)
class PreparedImage:
    """An image input ready to attach, with what the trace records about it."""

    label: str
    path: str
    file_sha256: str
    region: Region | None
    data: bytes
    attached_sha256: str
    media_type: str
    width: int
    height: int

    @property
    def attached_bytes(self) -> int:
        return len(self.data)


def _refuse(label: str, path: str, reason: str) -> RequestRefused:
    return RequestRefused(f"image input {label!r} (path {path!r}): {reason}")


def resolve_image_path(workspace: Path, label: str, path: str) -> Path:
    """The file an image input names, or a refusal saying why it is not allowed."""
    root = workspace.resolve()
    given = Path(path)
    if ".." in given.parts:
        raise _refuse(label, path, "'..' is not allowed; give a path inside the workspace")
    candidate = given if given.is_absolute() else root / given
    if given.is_absolute() and given.is_relative_to(workspace.absolute()):
        candidate = root / given.relative_to(workspace.absolute())
    if not candidate.is_relative_to(root):
        raise _refuse(label, path, f"absolute path outside the workspace {root}")
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        raise _refuse(label, path, "a symlink that leads outside the workspace")
    if not resolved.exists():
        raise _refuse(label, path, "no such file in the workspace")
    if not resolved.is_file():
        raise _refuse(label, path, "not a regular file")
    return resolved


def _open(label: str, path: str, data: bytes) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise _refuse(label, path, f"image exceeds the {MAX_PIXELS:,} pixel limit") from None
    except UnidentifiedImageError:
        raise _refuse(label, path, "not an image file Pillow can identify") from None
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise _refuse(
            label,
            path,
            f"image is {width}x{height} = {width * height:,} pixels, over the "
            f"{MAX_PIXELS:,} pixel limit",
        )
    return image


def _check_region(label: str, path: str, region: Region, width: int, height: int) -> None:
    right, bottom = region.x + region.width, region.y + region.height
    if right > width or bottom > height:
        raise _refuse(
            label,
            path,
            f"region {region.model_dump()} reaches x={right}, y={bottom}, outside the "
            f"{width}x{height} image (regions are never clamped)",
        )


def _crop_png(image: Image.Image, region: Region) -> bytes:
    box = (region.x, region.y, region.x + region.width, region.y + region.height)
    crop = image.crop(box)
    if crop.mode not in ("1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"):
        crop = crop.convert("RGBA" if "A" in crop.mode else "RGB")  # e.g. CMYK JPEGs
    out = io.BytesIO()
    crop.save(out, format="PNG")
    return out.getvalue()


def prepare_image(workspace: Path, item: ImageInput) -> PreparedImage:
    """Read, check and (for a region) crop one image input."""
    resolved = resolve_image_path(workspace, item.label, item.path)
    data = resolved.read_bytes()
    image = _open(item.label, item.path, data)
    width, height = image.size
    if item.region is None:
        media_type = ACCEPTED_FORMATS.get(image.format or "")
        if media_type is None:
            raise _refuse(
                item.label,
                item.path,
                f"format {image.format} is not accepted by model APIs "
                f"({', '.join(ACCEPTED_FORMATS)}); convert it, or give a region (sent as PNG)",
            )
        attached = data
    else:
        _check_region(item.label, item.path, item.region, width, height)
        try:
            attached = _crop_png(image, item.region)
        except (OSError, ValueError) as error:
            raise _refuse(item.label, item.path, f"cannot decode the image: {error}") from None
        media_type = "image/png"
    file_sha256 = sha256_bytes(data)
    return PreparedImage(
        label=item.label,
        path=item.path,
        file_sha256=file_sha256,
        region=item.region,
        data=attached,
        attached_sha256=file_sha256 if attached is data else sha256_bytes(attached),
        media_type=media_type,
        width=width,
        height=height,
    )
