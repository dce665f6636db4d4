"""Artifact audit: does an answer page follow the task's rules, with the evidence for each flag.

Six flags, each computed from files of the run folder only (answer/, render/) plus the task's
reference.png and its OCR words (computed once by the caller):

- remote_dependencies: the render blocked requests to http/https/ws/wss URLs. The references the
  page declares remotely (parsed from its HTML/CSS) are listed as evidence too.
- files_outside_assets: a local reference resolves outside answer/assets/ (answer.html excepted)
  or outside the answer folder.
- screenshot_substitution: an image file the page uses has a DCT hash within
  `phash_max_distance` bits of reference.png, or one image box covers at least
  `large_image_share` of the viewport.
- text_in_images: at least `text_in_images_min_words` OCR words of render.png lie inside image
  boxes and are not words of the page's DOM text. Icons are skipped (boxes narrower than
  `text_image_min_width` or lower than `text_image_min_height`), and a word counts only with
  tesseract confidence >= `text_word_min_confidence` and at least two letters or digits, because
  OCR of pictograms yields fragments such as "fe)". Only the image boxes are read (the rest of the
  capture is painted white first), which keeps OCR cheap and confines it to what it tests.
- absolute_pinning: more than `pinned_share` of the DOM text characters are absolutely or fixed
  positioned.
- low_text_volume: DOM text characters in the viewport are under `text_volume_ratio` times the
  characters tesseract reads on reference.png.
- oversized_images: an image the page uses (a file of the answer folder or an inline data: URL)
  has more than `max_image_pixels` pixels, or is a file over `max_image_bytes`. Such an image is
  never decoded (a 1 MB PNG can unpack to gigabytes), so it takes no part in the substitution
  check; the evidence lists each with its size.

A flag that could not be checked (no render) is false, and its evidence says `checked: false`.
"""

from __future__ import annotations

import base64
import binascii
import io
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from PIL import Image, UnidentifiedImageError

from veriharness._util.hashing import sha256_bytes
from veriharness._util.ocr import OcrWord
from veriharness.experiment.analysis import AUDIT_FLAGS
from veriharness.runfolder.audit import AuditRecord, AuditThresholds
from veriharness.runfolder.render import DomRecord, ImageBox, RenderRecord
from veriharness.score.metrics.ocrwords import masked, ocr_words
from veriharness.score.metrics.phash import hamming, phash
from veriharness.score.metrics.refs import classify, page_references, resolve_local
from veriharness.score.metrics.text import char_count, words_of

__all__ = ["FLAGS", "audit_run", "in_viewport"]

# The flags are named once, where the analysis declares which of them break a rule of the task.
FLAGS = AUDIT_FLAGS
_REMOTE = {"http", "https", "ws", "wss"}


def in_viewport(box: Any, width: int, height: int) -> bool:
    """True when a box (x, y, width, height) overlaps the viewport by a positive area."""
    return bool(
        box.x < width and box.y < height and box.x + box.width > 0 and box.y + box.height > 0
    )


def _viewport_share(image: ImageBox, width: int, height: int) -> float:
    w = max(0.0, min(image.x + image.width, width) - max(image.x, 0.0))
    h = max(0.0, min(image.y + image.height, height) - max(image.y, 0.0))
    return w * h / (width * height) if width and height else 0.0


def _remote(render: RenderRecord | None, answer_dir: Path) -> tuple[bool, dict[str, Any]]:
    blocked = [] if render is None else [r.url for r in render.blocked_requests]
    remote = [url for url in blocked if urlsplit(url).scheme.lower() in _REMOTE]
    html = answer_dir / "answer.html"
    declared = (
        sorted({r.value for r in page_references(html, answer_dir) if r.kind == "remote"})
        if html.is_file()
        else []
    )
    return bool(remote), {"checked": render is not None, "urls": remote, "declared": declared}


def _outside(answer_dir: Path) -> tuple[bool, dict[str, Any]]:
    html = answer_dir / "answer.html"
    if not html.is_file():
        return False, {"checked": False, "files": []}
    root, assets = answer_dir.resolve(), (answer_dir / "assets").resolve()
    found = []
    for ref in page_references(html, answer_dir):
        if ref.path is None or ref.path == html.resolve() or ref.path.is_relative_to(assets):
            continue
        where = "outside_assets" if ref.path.is_relative_to(root) else "outside_answer_folder"
        found.append(
            {"in": ref.source, "ref": ref.value, "resolved": str(ref.path), "where": where}
        )
    return bool(found), {"checked": True, "files": found}


def _describe(src: str) -> str:
    """A source as evidence: data: URLs by media type, length and digest, not their payload."""
    if src.strip().lower().startswith("data:"):
        header = src.strip().partition(",")[0]
        return f"{header},<{len(src)} characters, {sha256_bytes(src.encode())}>"
    return src


def _image_bytes(src: str, answer_dir: Path) -> bytes | None:
    """The bytes of an image the page used, when it is inline or inside the answer folder."""
    text = src.strip()
    if text.lower().startswith("url(") and text.endswith(")"):
        text = text[4:-1].strip().strip("'\"")
    if text.lower().startswith("data:"):
        header, _, payload = text.partition(",")
        try:
            if header.lower().endswith(";base64"):
                return base64.b64decode(payload, validate=False)
            return unquote_to_bytes(payload)
        except (binascii.Error, ValueError):
            return None
    if classify(text) != "local":
        return None
    return _inside_file(resolve_local(text, answer_dir), answer_dir)


class _TooLarge(bytes):
    """Stands for a file too large to read: only its size is known."""

    size: int


def _inside_file(path: Path, answer_dir: Path) -> bytes | None:
    if not (path.is_relative_to(answer_dir.resolve()) and path.is_file()):
        return None
    size = path.stat().st_size
    if size > AuditThresholds().max_image_bytes:
        marker = _TooLarge()
        marker.size = size
        return marker
    return path.read_bytes()


def _hash_of(data: bytes, limits: AuditThresholds) -> tuple[int | None, dict[str, Any] | None]:
    """The DCT hash of a raster image, or what makes it too large to decode."""
    if isinstance(data, _TooLarge) or len(data) > limits.max_image_bytes:
        return None, {"bytes": getattr(data, "size", len(data))}
    pillow_limit = Image.MAX_IMAGE_PIXELS
    try:
        # Pillow's own bomb check would refuse at open without the size; this one reads the
        # header, and decodes only images within the audit's limit.
        Image.MAX_IMAGE_PIXELS = None
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > limits.max_image_pixels:
                return None, {"width": width, "height": height}
            image.load()
            return phash(image), None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None, None  # not a raster image (e.g. SVG): nothing to compare pixel-wise
    finally:
        Image.MAX_IMAGE_PIXELS = pillow_limit


def _candidates(dom: DomRecord | None, answer_dir: Path) -> dict[str, bytes | None]:
    """Every image the page uses that can be read: its DOM images and the files and inline
    images its HTML and CSS name."""
    images = dom.images if dom is not None else []
    candidates = {im.src: _image_bytes(im.src, answer_dir) for im in images if im.src}
    html = answer_dir / "answer.html"
    if html.is_file():
        for ref in page_references(html, answer_dir):
            if ref.kind == "inline":
                candidates[ref.value] = _image_bytes(ref.value, answer_dir)
            elif ref.kind == "local" and ref.path is not None:
                candidates[ref.value] = _inside_file(ref.path, answer_dir)
    return candidates


def _hashes(
    candidates: dict[str, bytes | None], limits: AuditThresholds
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    hashes, oversized = {}, []
    for src, data in sorted(candidates.items()):
        if data is None:
            continue
        digest, too_large = _hash_of(data, limits)
        if digest is not None:
            hashes[src] = digest
        if too_large is not None:
            oversized.append({"src": _describe(src), **too_large})
    return hashes, oversized


def _substitution(
    dom: DomRecord, hashes: dict[str, int], reference_png: Path, limits: AuditThresholds
) -> tuple[bool, dict[str, Any]]:
    reference_hash = phash(reference_png)
    matches = []
    for src, digest in hashes.items():
        if hamming(digest, reference_hash) <= limits.phash_max_distance:
            matches.append({"src": _describe(src), "distance": hamming(digest, reference_hash)})
    vw, vh = dom.viewport.width, dom.viewport.height
    large = [
        {"kind": im.kind, "src": _describe(im.src or ""), "share": share}
        for im in dom.images
        if not (im.kind == "background" and not im.src)
        and (share := _viewport_share(im, vw, vh)) >= limits.large_image_share
    ]
    return bool(matches or large), {"checked": True, "hash_matches": matches, "large": large}


def _text_in_images(
    dom: DomRecord, render_png: Path, limits: AuditThresholds
) -> tuple[bool, dict[str, Any]]:
    vw, vh = dom.viewport.width, dom.viewport.height
    boxes = [
        im
        for im in dom.images
        if in_viewport(im, vw, vh)
        and im.width >= limits.text_image_min_width
        and im.height >= limits.text_image_min_height
    ]
    if not boxes:
        return False, {"checked": True, "ocr_run": False, "words": []}
    dom_words = set(words_of(t.text for t in dom.texts))
    baked = []
    with Image.open(render_png) as shot:
        only_images = masked(shot, [(b.x, b.y, b.width, b.height) for b in boxes])
    for word in ocr_words(only_images):
        cx, cy = word.box.x + word.box.width / 2, word.box.y + word.box.height / 2
        inside = any(b.x <= cx <= b.x + b.width and b.y <= cy <= b.y + b.height for b in boxes)
        normalised = words_of([word.text])
        readable = word.confidence >= limits.text_word_min_confidence and any(
            len(n) >= 2 for n in normalised
        )
        if inside and readable and not set(normalised) <= dom_words:
            baked.append({"text": word.text, "box": list(word.box)})
    flagged = len(baked) >= limits.text_in_images_min_words
    return flagged, {"checked": True, "ocr_run": True, "count": len(baked), "words": baked}


def _pinning(dom: DomRecord, limits: AuditThresholds) -> tuple[bool, dict[str, Any]]:
    total = char_count(t.text for t in dom.texts)
    pinned = char_count(t.text for t in dom.texts if t.pinned)
    share = pinned / total if total else None
    flagged = share is not None and share > limits.pinned_share
    return flagged, {"checked": True, "pinned_chars": pinned, "total_chars": total, "share": share}


def _volume(
    dom: DomRecord, reference_words: list[OcrWord], limits: AuditThresholds
) -> tuple[bool, dict[str, Any]]:
    vw, vh = dom.viewport.width, dom.viewport.height
    mine = char_count(t.text for t in dom.texts if in_viewport(t, vw, vh))
    theirs = char_count(w.text for w in reference_words)
    ratio = mine / theirs if theirs else None
    flagged = ratio is not None and ratio < limits.text_volume_ratio
    evidence = {"checked": True, "dom_chars": mine, "reference_ocr_chars": theirs, "ratio": ratio}
    return flagged, evidence


def audit_run(
    *,
    answer_dir: Path,
    render: RenderRecord | None,
    dom: DomRecord | None,
    render_png: Path | None,
    reference_png: Path,
    reference_words: list[OcrWord],
    limits: AuditThresholds | None = None,
) -> AuditRecord:
    """All six flags of one run. `dom`/`render_png` are None when there is no usable render."""
    limits = limits or AuditThresholds()
    results: dict[str, tuple[bool | None, dict[str, Any]]] = {
        "remote_dependencies": _remote(render, answer_dir),
        "files_outside_assets": _outside(answer_dir),
    }
    usable = dom is not None and render_png is not None
    hashes, oversized = _hashes(_candidates(dom if usable else None, answer_dir), limits)
    results["oversized_images"] = (
        bool(oversized),
        {"checked": True, "images": oversized, "max_pixels": limits.max_image_pixels},
    )
    if dom is None or render_png is None:
        for name in FLAGS[2:-1]:
            results[name] = (None, {"checked": False})
    else:
        results["screenshot_substitution"] = _substitution(dom, hashes, reference_png, limits)
        results["text_in_images"] = _text_in_images(dom, render_png, limits)
        results["absolute_pinning"] = _pinning(dom, limits)
        results["low_text_volume"] = _volume(dom, reference_words, limits)
    return AuditRecord(
        flags={name: results[name][0] for name in FLAGS},
        evidence={name: results[name][1] for name in FLAGS},
        thresholds=limits,
    )
