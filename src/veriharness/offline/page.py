"""The offline agent's page builder: a layout reply in, a flow-layout `answer.html` out.

The layout is what the vision side was asked for (background, text lines with ink boxes, font
sizes and colours, image regions). The page keeps the document in normal flow, as a person
writing editable HTML would, by a recursive XY cut: regions that enclose other elements become
containers; the elements of a container are split into horizontal bands (rows) where their
vertical extents do not overlap, and a band into columns (a flex row) where their horizontal
extents do not overlap. Every band and column has its measured size; distances become margins
(negative when two elements overlap with no cleaner cut). Nothing is absolutely positioned.

A text line's box is its ink box as read by OCR. Its CSS line box is at least the font size
tall (`line-height` never below `font-size`, or glyphs overlap their neighbours) and centred on
the ink box; where the glyphs really land inside it depends on the font, which is what a
verification round measures and corrects.

`apply_review` folds one comparison reply into a layout: reference lines the draft lacks are
added, colours and the background the comparison says are off are set to the reference's, and
each line the comparison paired with the draft (`line_offsets`) is edited by what was measured:
moved by its offset, its font size scaled by the width ratio, its colour corrected by the
colour difference, made bold when the reference's strokes are clearly heavier. The edits are
kept as `nudge_x`/`nudge_y`/`font_weight` fields of the line, so the measured box stays as read.

An interactive task's after-states (`StateLayout`) become hidden `<main data-state="<id>">`
copies of the page, each laid out from its own layout reply, and every stated interaction gets a
trigger of its own on the base page (`_triggers`): the element nearest to the first thing its
after-state changed, text lines before regions, never one inside another's trigger (a click
would reach both). A click or hover trigger is that element; for typing, a key or a choice it is
a transparent field (`<input>`, `<select>`) laid over the element, as the output contract wants
the field itself marked. Acting on a trigger hides the base page and shows its after-state.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = [
    "LayoutError",
    "Element",
    "layout_elements",
    "StateLayout",
    "build_page",
    "apply_review",
    "apply_line_offsets",
]

_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")
_FONT_STACK = '"DejaVu Sans", sans-serif'  # what Debian's Chromium renders for sans-serif text
_NEST_SLACK = 2  # px an element may stick out of a region and still count as inside it
_SIZE_EDIT = 0.03  # a width ratio further than this from 1 rescales the font
_COLOUR_EDIT = 12  # a channel difference above this recolours the line
_BOLD_INK = 1.2  # reference ink share this many times the draft's: the reference is bold
_BOLD_WIDTH = 1.13  # DejaVu Sans Bold sets text about 13% wider than Book (font advances)
_WEIGHTS = ("normal", "bold")


class LayoutError(ValueError):
    """The layout reply lacks a field the page needs, or holds an unusable value."""


class Element(NamedTuple):
    """One thing to place; x, y, width, height are its CSS box in page pixels."""

    kind: str  # "text" or "region"
    x: int
    y: int
    width: int
    height: int
    text: str
    font_size: float
    colour: str
    weight: str = "normal"


class _Node(NamedTuple):
    element: Element
    children: list[_Node]


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


def _nudge(line: dict[str, Any], key: str, field: str) -> int:
    value = line.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise LayoutError(f"{field}.{key} must be an integer, got {value!r}")
    return value


def layout_elements(layout: dict[str, Any]) -> list[Element]:
    """Text lines and regions of a layout as CSS boxes, top to bottom, left to right."""
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
        weight = line.get("font_weight", "normal")
        if weight not in _WEIGHTS:
            raise LayoutError(f"{field}.font_weight must be normal or bold, got {weight!r}")
        box_height = max(height, int(-(-float(size) // 1)))  # never below the font size
        top = y - (box_height - height) // 2 + _nudge(line, "nudge_y", field)
        left = x + _nudge(line, "nudge_x", field)
        elements.append(
            Element("text", left, top, width, box_height, line["text"], float(size), colour, weight)
        )
    for index, region in enumerate(regions):
        field = f"image_regions[{index}]"
        if not isinstance(region, dict):
            raise LayoutError(f"{field} must be an object, got {region!r}")
        x, y, width, height = _box(region, field)
        colour = _colour(region.get("colour"), f"{field}.colour")
        elements.append(Element("region", x, y, width, height, "", 0.0, colour))
    return sorted(elements, key=lambda e: (e.y, e.x))


def _inside(inner: Element, outer: Element) -> bool:
    slack = _NEST_SLACK
    return (
        inner.x >= outer.x - slack
        and inner.y >= outer.y - slack
        and inner.x + inner.width <= outer.x + outer.width + slack
        and inner.y + inner.height <= outer.y + outer.height + slack
    )


def _nest(elements: list[Element]) -> list[_Node]:
    """Elements as a forest: each element under the smallest region that encloses it."""
    parents: dict[int, int] = {}
    for i, inner in enumerate(elements):
        holders = [
            j
            for j, outer in enumerate(elements)
            if j != i
            and outer.kind == "region"
            and _inside(inner, outer)
            # of two equal boxes, the earlier one holds the later one
            and not (_inside(outer, inner) and j > i)
        ]
        if holders:
            parents[i] = min(holders, key=lambda j: elements[j].width * elements[j].height)
    nodes = [_Node(element, []) for element in elements]
    for child, parent in sorted(parents.items()):
        nodes[parent].children.append(nodes[child])
    return [node for index, node in enumerate(nodes) if index not in parents]


def _split(nodes: list[_Node], axis: str) -> list[list[_Node]]:
    """Groups of nodes whose extents along `axis` ("y" or "x") overlap, in order."""

    def span(node: _Node) -> tuple[int, int]:
        e = node.element
        return (e.y, e.y + e.height) if axis == "y" else (e.x, e.x + e.width)

    groups: list[list[_Node]] = []
    end = None
    for node in sorted(nodes, key=lambda n: (span(n), n.element.y, n.element.x)):
        low, high = span(node)
        if end is not None and low < end:
            groups[-1].append(node)
            end = max(end, high)
        else:
            groups.append([node])
            end = high
    return groups


def _extent(nodes: list[_Node]) -> tuple[int, int, int, int]:
    left = min(n.element.x for n in nodes)
    top = min(n.element.y for n in nodes)
    right = max(n.element.x + n.element.width for n in nodes)
    bottom = max(n.element.y + n.element.height for n in nodes)
    return left, top, right, bottom


# Which interaction's trigger a base element holds, by the element's identity (`_triggers`).
Marks = Mapping[int, "StateLayout"]
_NO_MARKS: Marks = MappingProxyType({})


def _flow(nodes: list[_Node], left: int, top: int, depth: int, marks: Marks) -> list[str]:
    """HTML for nodes placed in a container whose content box starts at (left, top)."""
    pad = "  " * depth
    out: list[str] = []
    cursor = top
    for band in _split(nodes, "y"):
        b_left, b_top, b_right, b_bottom = _extent(band)
        if len(band) == 1:
            out += _node_html(band[0], b_top - cursor, band[0].element.x - left, depth, marks)
            cursor = b_bottom
            continue
        columns = _split(band, "x")
        style = f"margin-top:{b_top - cursor}px;height:{b_bottom - b_top}px"
        if len(columns) == 1:  # overlapping both ways: stack, with negative margins if need be
            out.append(f'{pad}<div class="stack" style="{style}">')
            inner = b_top
            for node in sorted(band, key=lambda n: (n.element.y, n.element.x)):
                out += _node_html(
                    node, node.element.y - inner, node.element.x - left, depth + 1, marks
                )
                inner = node.element.y + node.element.height
            out.append(f"{pad}</div>")
        else:
            out.append(f'{pad}<div class="row" style="{style}">')
            x_cursor = left
            for column in columns:
                c_left, _, c_right, _ = _extent(column)
                c_style = f"margin-left:{c_left - x_cursor}px;width:{c_right - c_left}px"
                out.append(f'{pad}  <div class="column" style="{c_style}">')
                out += _flow(column, c_left, b_top, depth + 2, marks)
                out.append(f"{pad}  </div>")
                x_cursor = c_right
            out.append(f"{pad}</div>")
        cursor = b_bottom
    return out


def _node_html(node: _Node, top: int, left: int, depth: int, marks: Marks) -> list[str]:
    pad = "  " * depth
    element = node.element
    margin = f"margin:{top}px 0 0 {left}px"
    mark, held, field = _trigger_markup(marks.get(id(element)))
    if element.kind == "region":
        style = f"{margin};width:{element.width}px;height:{element.height}px;{held}"
        style += ";" if held else ""
        opening = (
            f'{pad}<div class="figure"{mark} style="{style}background:{element.colour}">{field}'
        )
        if not node.children:
            return [opening + "</div>"]
        inner = _flow(node.children, element.x, element.y, depth + 1, marks)
        return [opening, *inner, f"{pad}</div>"]
    weight = ";font-weight:bold" if element.weight == "bold" else ""
    style = (
        f"{margin};font-size:{round(element.font_size, 1):g}px;line-height:{element.height}px;"
        f"height:{element.height}px;color:{element.colour}{weight}{';' + held if held else ''}"
    )
    return [f'{pad}<p{mark} style="{style}">{html.escape(element.text)}{field}</p>']


class StateLayout(NamedTuple):
    """An interaction's after-state as the model described it, for `build_page`: its id, the
    action (click, hover, type, select, key), the action's value when it has one, and the layout
    reply of the after-state image."""

    id: str
    action: str
    layout: dict[str, Any]
    value: str | None = None


# The DOM event each action is taken as, on the trigger (the field itself for type, key, select).
_EVENTS = {"click": "click", "hover": "mouseenter", "type": "input", "key": "keydown",
           "select": "change"}  # fmt: skip
_FIELD = "position:absolute;left:0;top:0;width:100%;height:100%;margin:0;opacity:0"


def _trigger_markup(state: StateLayout | None) -> tuple[str, str, str]:
    """An element's trigger attribute, what its style gains, and the field laid over it (an
    action on a field marks the field, as the output contract says)."""
    if state is None:
        return "", "", ""
    mark = f' data-interaction="{html.escape(state.id)}"'
    if state.action in ("click", "hover"):
        return mark, "", ""
    if state.action == "select":
        value = html.escape(state.value or "")
        options = f'<option value=""></option><option value="{value}"></option>'
        return "", "position:relative", f'<select{mark} style="{_FIELD}">{options}</select>'
    label = f' aria-label="{html.escape(state.id)}"'
    return "", "position:relative", f'<input{mark}{label} style="{_FIELD}">'


def _same(first: Element, second: Element) -> bool:
    """One element in two layouts: the same thing, drawn alike, within a pixel or two."""
    drawn = (first.kind, first.text, first.colour, first.weight)
    boxes = zip(first[1:5], second[1:5], strict=True)
    return drawn == (second.kind, second.text, second.colour, second.weight) and all(
        abs(a - b) <= _NEST_SLACK for a, b in boxes
    )


def _centre_distance(first: Element, second: Element) -> float:
    dx = (first.x + first.width / 2) - (second.x + second.width / 2)
    dy = (first.y + first.height / 2) - (second.y + second.height / 2)
    return float((dx * dx + dy * dy) ** 0.5)


def _triggers(base: list[Element], states: list[StateLayout]) -> dict[int, StateLayout]:
    """The base element each interaction's trigger goes on, by position in `base`: the free one
    that best explains the first element of its after-state the base page lacks (in reading
    order; `_nearest`), text lines first. A region that holds, or sits in, a trigger is never
    free. An interaction left without an element gets no trigger."""
    taken: dict[int, StateLayout] = {}
    for state in states:
        after = layout_elements(state.layout)
        changed = next((e for e in after if not any(_same(e, b) for b in base)), None)
        free = [
            i
            for i, element in enumerate(base)
            if i not in taken
            and not any(_inside(element, base[t]) or _inside(base[t], element) for t in taken)
        ]
        texts = [i for i in free if base[i].kind == "text"] or free
        if texts:
            taken[_nearest(base, texts, changed)] = state
    return taken


def _nearest(base: list[Element], free: list[int], changed: Element | None) -> int:
    """The trigger for a change: the element itself when it changed in place (a tab or a label
    recoloured: the same text), else the nearest one that ends above it (a button above what it
    reveals, whose insertion moves what follows), else the nearest one."""
    if changed is None:
        return free[0]
    same = [i for i in free if base[i].kind == "text" and base[i].text == changed.text]
    above = [i for i in free if base[i].y + base[i].height <= changed.y + _NEST_SLACK]
    return min(same or above or free, key=lambda i: _centre_distance(base[i], changed))


def _states_html(states: list[StateLayout], live: bool) -> list[str]:
    """The hidden after-state mains, and (`live`) the script that shows one when its trigger is
    acted on; `live` False plants dead triggers: marked, with nothing that acts on them."""
    parts = []
    for state in states:
        body = _flow(_nest(layout_elements(state.layout)), 0, 0, 1, _NO_MARKS)
        parts += [f'<main data-state="{html.escape(state.id)}" hidden>', *body, "</main>"]
    if live and states:
        parts += [
            "<script>",
            # After the event's dispatch: a browser driver checks that its pointer events reach
            # the trigger, and a hover's mouseenter comes before the mousemove it checks.
            "  const show = (id) => setTimeout(() => {",
            "    document.querySelector('main:not([data-state])').hidden = true;",
            '    document.querySelector(`[data-state="${id}"]`).hidden = false;',
            "  });",
        ]
        for state in states:
            event = _EVENTS.get(state.action)
            if event is None:
                continue
            selector = json.dumps(f'[data-interaction="{state.id}"]')
            parts.append(
                f"  document.querySelector({selector})?.addEventListener('{event}', "
                f"() => show({json.dumps(state.id)}));"
            )
        parts.append("</script>")
    return parts


def build_page(
    layout: dict[str, Any],
    title: str = "Reproduction",
    states: list[StateLayout] | None = None,
    live: bool = True,
) -> str:
    """The whole `answer.html` for a layout reply (and, for an interactive task, the layouts
    of its after-states)."""
    width = layout.get("width")
    if not isinstance(width, int) or width <= 0:
        raise LayoutError(f"width must be a positive integer, got {width!r}")
    background = _colour(layout.get("background"), "background")
    elements = layout_elements(layout)
    marks = {id(elements[i]): state for i, state in _triggers(elements, states or []).items()}
    body = _flow(_nest(elements), 0, 0, 1, marks)
    extra = _states_html(states or [], live)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '  <meta charset="utf-8">',
            f"  <title>{html.escape(title)}</title>",
            "  <style>",
            f"    html, body {{ margin: 0; padding: 0; background: {background}; }}",
            f"    main {{ width: {width}px; font-family: {_FONT_STACK}; }}",
            "    main div { display: flow-root; box-sizing: border-box; }",
            "    main div.row { display: flex; align-items: flex-start; }",
            "    main div.column { flex: none; }",
            "    p { margin: 0; white-space: pre; overflow: visible; }",
            "  </style>",
            "</head>",
            "<body>",
            "<main>",
            *body,
            "</main>",
            *extra,
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
    offsets = review.get("line_offsets") or []
    measured = {_norm(str(o.get("text", ""))) for o in offsets if isinstance(o, dict)}
    shifts = {
        _norm(shift["text"]): shift["reference_colour"]
        for shift in review.get("colour_shifts") or []
        if isinstance(shift, dict)
        and isinstance(shift.get("text"), str)
        and isinstance(shift.get("reference_colour"), str)
        # a line with a measured offset gets its colour corrected from that measurement
        and _norm(shift["text"]) not in measured
    }
    for line in lines:
        if _norm(line.get("text", "")) in shifts:
            line["colour"] = shifts[_norm(line["text"])]
    fixed = apply_line_offsets(dict(layout, text_lines=lines), offsets)
    background = review.get("background_shift")
    if isinstance(background, dict) and isinstance(background.get("reference_colour"), str):
        fixed["background"] = background["reference_colour"]
    return fixed


def _rgb(colour: str) -> list[int]:
    return [int(colour[i : i + 2], 16) for i in (1, 3, 5)]


def _corrected(colour: str, reference: str, drawn: str) -> str:
    """`colour` moved by what the render got wrong; channels stay within 0-255 by definition."""
    channels = [
        min(255, max(0, c + r - d))
        for c, r, d in zip(_rgb(colour), _rgb(reference), _rgb(drawn), strict=True)
    ]
    return "#" + "".join(f"{c:02x}" for c in channels)


def _weight(line: dict[str, Any], offset: dict[str, Any]) -> str:
    current = str(line.get("font_weight", "normal"))
    ink = offset.get("ink_ratio")
    if not isinstance(ink, int | float):
        return current
    if ink >= _BOLD_INK:
        return "bold"
    return "normal" if ink <= 1 / _BOLD_INK else current


def _edit_line(line: dict[str, Any], offset: dict[str, Any]) -> dict[str, Any]:
    """One line moved, resized, reweighted and recoloured by what its pair measured."""
    edited = dict(line)
    for key, measured in (("nudge_x", offset["dx"]), ("nudge_y", offset["dy"])):
        if int(round(measured)):  # a line in place keeps its layout unchanged
            edited[key] = int(line.get(key, 0)) - int(round(measured))
    weight = _weight(line, offset)
    ratio = offset.get("width_ratio")
    if isinstance(ratio, int | float):
        if weight != line.get("font_weight", "normal"):
            # the width was measured at the other weight: take out what the weight adds
            ratio = ratio / _BOLD_WIDTH if weight == "bold" else ratio * _BOLD_WIDTH
        if abs(ratio - 1) > _SIZE_EDIT:
            edited["font_size_px"] = round(float(line["font_size_px"]) * ratio, 1)
    if weight != line.get("font_weight", "normal"):
        edited["font_weight"] = weight  # thin strokes read lighter: recolour after re-measuring
    elif offset.get("colour_difference", 0) > _COLOUR_EDIT:
        edited["colour"] = _corrected(
            line["colour"], offset["reference_colour"], offset["other_colour"]
        )
    return edited


def apply_line_offsets(layout: dict[str, Any], offsets: list[Any]) -> dict[str, Any]:
    """A new layout with each measured line edited (see the module notes).

    An offset names the reference line it measured by text and box; since the layout and the
    comparison read the same reference pixels, that identifies the layout's line exactly.
    Offsets for lines the layout does not hold are ignored: there is nothing drawn to edit;
    so are pairs whose two texts read differently.
    """
    by_key = {}
    for offset in offsets:
        if isinstance(offset, dict) and isinstance(offset.get("reference_box"), dict):
            box = offset["reference_box"]
            by_key[(_norm(str(offset.get("text", ""))), box.get("x"), box.get("y"))] = offset
    lines = []
    for line in layout.get("text_lines", []):
        box = line.get("box") or {}
        offset = by_key.get((_norm(line.get("text", "")), box.get("x"), box.get("y")))
        readable = offset is not None and _norm(str(offset.get("other_text", ""))) == _norm(
            line.get("text", "")
        )
        # a pair that reads differently (e.g. OCR merged a logo into the line) measures a box
        # holding something else, so only pairs that read the same are acted on
        lines.append(_edit_line(line, offset) if readable and offset else line)
    return dict(layout, text_lines=lines)
