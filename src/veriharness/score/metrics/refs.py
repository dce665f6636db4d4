"""Which files an answer page refers to, found by reading its HTML and its local CSS.

The page is parsed with the standard library's HTML parser (no browser): `src` of img, script,
source, input, video, audio, iframe, embed and track, `srcset` candidates, `href` of link, `poster`
of video, `data` of object, `url(...)` in style attributes and style elements, and `@import`.
Local stylesheets (link href, @import) that resolve inside the answer folder are read in turn,
their references resolved against their own folder.

Each reference is classified: `inline` (data:, blob:, about:, fragment-only, javascript:),
`remote` (http, https, ws, wss, or protocol-relative //host), or `local` with the absolute path
it resolves to (symlinks followed, so a link out of the folder counts as outside).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Literal, NamedTuple
from urllib.parse import unquote, urlsplit

__all__ = ["Reference", "page_references", "css_references", "classify", "resolve_local"]

_URL_ATTRS = {"src", "href", "poster", "data"}
_CSS_URL = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)", re.IGNORECASE | re.DOTALL)
_CSS_IMPORT = re.compile(r"@import\s+(['\"])(.*?)\1", re.IGNORECASE)
_INLINE_SCHEMES = {"data", "blob", "about", "javascript", "mailto", "tel"}
_REMOTE_SCHEMES = {"http", "https", "ws", "wss", "ftp"}


class Reference(NamedTuple):
    """One reference: where it was found, what it said, and what it is."""

    source: str
    value: str
    kind: Literal["inline", "remote", "local"]
    path: Path | None
    stylesheet: bool


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, bool]] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value for name, value in attrs if value is not None}
        rel = values.get("rel", "").lower()
        if tag == "a":
            return  # a hyperlink is navigation, not something the page loads
        for name in _URL_ATTRS & values.keys():
            is_sheet = tag == "link" and ("stylesheet" in rel or values[name].endswith(".css"))
            self.found.append((values[name], is_sheet))
        for name in ("srcset", "imagesrcset"):
            for candidate in values.get(name, "").split(","):
                if candidate.strip():
                    self.found.append((candidate.split()[0], False))
        if "style" in values:
            self.found.extend(css_references(values["style"]))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.found.extend(css_references(data))


def css_references(css: str) -> list[tuple[str, bool]]:
    """References in CSS text; @import targets are stylesheets."""
    imports = [(m.group(2), True) for m in _CSS_IMPORT.finditer(css)]
    urls = [m.group(2).strip() for m in _CSS_URL.finditer(css)]
    return imports + [(url, url.endswith(".css")) for url in urls]


def classify(value: str) -> Literal["inline", "remote", "local"]:
    text = value.strip()
    if not text or text.startswith("#") or text.startswith("//"):
        return "remote" if text.startswith("//") else "inline"
    scheme = urlsplit(text).scheme.lower()
    if scheme in _INLINE_SCHEMES:
        return "inline"
    if scheme in _REMOTE_SCHEMES:
        return "remote"
    return "local"


def resolve_local(value: str, base: Path) -> Path:
    """The absolute path a local reference names, relative to the folder `base`."""
    parts = urlsplit(value.strip())
    if parts.scheme.lower() == "file":
        return Path(unquote(parts.path)).resolve()
    if len(parts.scheme) == 1:  # a Windows drive letter, never inside a POSIX answer folder
        return Path(value).resolve()
    return (base / unquote(parts.path)).resolve()


def page_references(html_file: Path, answer_dir: Path) -> list[Reference]:
    """Every reference of an HTML file and of the local stylesheets it loads, once each."""
    html_file, answer_dir = html_file.resolve(), answer_dir.resolve()
    collector = _Collector()
    collector.feed(html_file.read_text(encoding="utf-8", errors="replace"))
    pending = [(html_file, value, sheet) for value, sheet in collector.found]
    seen_sheets: set[Path] = set()
    references: list[Reference] = []
    while pending:
        origin, value, sheet = pending.pop(0)
        kind = classify(value)
        path = resolve_local(value, origin.parent) if kind == "local" else None
        source = (
            str(origin.relative_to(answer_dir))
            if origin.is_relative_to(answer_dir)
            else str(origin)
        )
        references.append(Reference(source, value, kind, path, sheet))
        if (
            path is not None
            and sheet
            and path not in seen_sheets
            and path.is_relative_to(answer_dir)
            and path.is_file()
        ):
            seen_sheets.add(path)
            css = path.read_text(encoding="utf-8", errors="replace")
            pending.extend((path, v, s) for v, s in css_references(css))
    return references
