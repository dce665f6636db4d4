"""The offline agent's page builder: a layout reply in, a flow-layout `answer.html` out.

The layout is what the vision side was asked for (background, text lines with boxes, font
sizes and colours, image regions). The page keeps the document in normal flow, as a person
writing editable HTML would: elements are ordered top to bottom, lines whose vertical gap is
small and whose font size is close are grouped into one block (`<section>`), and vertical
distances become top margins, horizontal offsets left margins. Nothing is absolutely
positioned, so the result is imperfect where the reference has columns side by side.

`apply_review` folds one comparison reply into a layout: reference lines the draft lacks are
added, text colours and the background the comparison says are off are set to the reference's.
"""

from __future__ import annotations

import html
import re
from typing import Any, NamedTuple

__all__ = ["LayoutError", "Element", "layout_elements", "build_page", "apply_review"]

_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")
_BLOCK_GAP_FACTOR = 0.9  # a gap wider than this many line heights starts a new block


class LayoutError(ValueError):
    """The layout reply lacks a field the page needs, or holds an unusable value."""


class Element(NamedTuple):
    kind: str  # "text" or "region"
    x: int
    y: int
    width: int
    height: int
    text: str
    font_size: float
    colour: str


def _colour(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _HEX.match(value):
        raise LayoutError(f"{field} must be a colour like #1a2b3c, got {value!r}")
    return value.lower()


def _box(item: dict[str, Any], field: str) -> tuple[int, int, int, int]:
    box = item.get("box")
    if not isinstance(box, dict):
        raise LayoutError(f"{field}.box must be an object with x, y, width, height, got {box!r}")
    values = []
    for key in ("x", "y", "width", "height"):
        value = box.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise LayoutError(f"{field}.box.{key} must be a number >= 0, got {value!r}")
        values.append(int(round(value)))
    return values[0], values[1], values[2], values[3]


def layout_elements(layout: dict[str, Any]) -> list[Element]:
    """Text lines and image regions of a layout reply, top to bottom, left to right."""
    lines = layout.get("text_lines")
    regions = layout.get("image_regions", [])
    if not isinstance(lines, list):
        raise LayoutError(f"text_lines must be a list, got {lines!r}")
    if not isinstance(regions, list):
        raise LayoutError(f"image_regions must be a list, got {regions!r}")
    elements = []
    for index, line in enumerate(lines):
        field = f"text_lines[{index}]"
        if not isinstance(line, dict) or not isinstance(line.get("text"), str):
            raise LayoutError(f"{field} must be an object with a text string, got {line!r}")
        x, y, width, height = _box(line, field)
        size = line.get("font_size_px")
        if not isinstance(size, int | float) or size <= 0:
            raise LayoutError(f"{field}.font_size_px must be a number > 0, got {size!r}")
        colour = _colour(line.get("colour"), f"{field}.colour")
        elements.append(Element("text", x, y, width, height, line["text"], float(size), colour))
    for index, region in enumerate(regions):
        field = f"image_regions[{index}]"
        if not isinstance(region, dict):
            raise LayoutError(f"{field} must be an object, got {region!r}")
        x, y, width, height = _box(region, field)
        colour = _colour(region.get("colour"), f"{field}.colour")
        elements.append(Element("region", x, y, width, height, "", 0.0, colour))
    return sorted(elements, key=lambda e: (e.y, e.x))


def _blocks(elements: list[Element]) -> list[list[Element]]:
    blocks: list[list[Element]] = []
    for element in elements:
        if blocks:
            last = blocks[-1][-1]
            gap = element.y - (last.y + last.height)
            same_style = (
                element.kind == last.kind == "text"
                and abs(element.font_size - last.font_size) <= 0.2 * last.font_size
            )
            if same_style and gap <= _BLOCK_GAP_FACTOR * last.height:
                blocks[-1].append(element)
                continue
        blocks.append([element])
    return blocks


def _element_html(element: Element, top: int) -> str:
    margin = f"margin:{top}px 0 0 {element.x}px"
    if element.kind == "region":
        style = f"{margin};width:{element.width}px;height:{element.height}px;"
        return f'    <div class="figure" style="{style}background:{element.colour}"></div>'
    style = (
        f"{margin};font-size:{element.font_size:.0f}px;line-height:{element.height}px;"
        f"height:{element.height}px;color:{element.colour}"
    )
    return f'    <p style="{style}">{html.escape(element.text)}</p>'


def build_page(layout: dict[str, Any], title: str = "Reproduction") -> str:
    """The whole `answer.html` for a layout reply."""
    width = layout.get("width")
    if not isinstance(width, int) or width <= 0:
        raise LayoutError(f"width must be a positive integer, got {width!r}")
    background = _colour(layout.get("background"), "background")
    body = []
    cursor = 0  # bottom edge of what the flow has placed so far, in reference pixels
    for block in _blocks(layout_elements(layout)):
        body.append("  <section>")
        for element in block:
            body.append(_element_html(element, max(0, element.y - cursor)))
            cursor = max(cursor, element.y + element.height)
        body.append("  </section>")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '  <meta charset="utf-8">',
            f"  <title>{html.escape(title)}</title>",
            "  <style>",
            f"    html, body {{ margin: 0; padding: 0; background: {background}; }}",
            f"    main {{ width: {width}px; font-family: sans-serif; }}",
            "    section { display: flow-root; }",
            "    p { margin: 0; white-space: pre; overflow: visible; }",
            "  </style>",
            "</head>",
            "<body>",
            "<main>",
            *body,
            "</main>",
            "</body>",
            "</html>",
            "",
        ]
    )


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def apply_review(layout: dict[str, Any], review: dict[str, Any]) -> dict[str, Any]:
    """A new layout with the comparison's fixable findings applied (the input is not changed)."""
    lines = [dict(line) for line in layout.get("text_lines", [])]
    known = {_norm(line.get("text", "")) for line in lines}
    for missing in review.get("missing_text") or []:
        if isinstance(missing, dict) and _norm(missing.get("text", "")) not in known:
            lines.append(
                {
                    key: missing[key]
                    for key in ("text", "box", "font_size_px", "colour")
                    if key in missing
                }
            )
            known.add(_norm(missing.get("text", "")))
    shifts = {
        _norm(shift["text"]): shift["reference_colour"]
        for shift in review.get("colour_shifts") or []
        if isinstance(shift, dict)
        and isinstance(shift.get("text"), str)
        and isinstance(shift.get("reference_colour"), str)
    }
    for line in lines:
        if _norm(line.get("text", "")) in shifts:
            line["colour"] = shifts[_norm(line["text"])]
    fixed = dict(layout, text_lines=lines)
    background = review.get("background_shift")
    if isinstance(background, dict) and isinstance(background.get("reference_colour"), str):
        fixed["background"] = background["reference_colour"]
    return fixed
