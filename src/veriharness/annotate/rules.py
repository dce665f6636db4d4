"""The rule-based annotator: deterministic taxonomy codes from a call's request, no model.

It runs when no annotator profile is configured (no keys needed), so the example experiment and
CI exercise the whole stage. It is a fixed set of patterns over the instruction plus the shape of
the inputs (how many images, supplied markup), versioned here: a change of any rule is a new
`RULES_VERSION`, which reruns annotation (never a session). Its labels are a weak baseline, marked
`rule-based` wherever they appear; they are not a judgement of what the call really needed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the workflow imports RULES_VERSION at parse time, without the trace models
    from veriharness.annotate.calls import CallView

__all__ = ["RULES_ID", "RULES_VERSION", "rule_codes"]

RULES_ID = "veriharness-rules"
RULES_VERSION = "0.1"


def _words(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(rf"\b(?:{p})\b" for p in patterns), re.IGNORECASE)


# Code -> patterns over the instruction. Order is the taxonomy's; every code but Z1 has rules.
_INSTRUCTION: dict[str, re.Pattern[str]] = {
    "A1": _words(r"where", r"locat\w*", r"position of"),
    "A2": _words(r"list (every|all|each)", r"enumerat\w*", r"how many", r"every (element|item)"),
    "A3": _words(r"whether", r"is there", r"are there", r"present or absent"),
    "B1": _words(r"transcrib\w*", r"word for word", r"verbatim", r"exact (text|wording)"),
    "B2": _words(
        r"axis", r"ticks?", r"(read|extract) the (values?|numbers?|dates?)", r"data values?"
    ),
    "B3": _words(r"icons?", r"logos?", r"glyphs?", r"symbols?"),
    "C1": _words(r"bounding box(es)?", r"boxes", r"coordinates"),
    "C2": _words(r"measur\w*", r"spacing", r"margins?", r"padding", r"gaps?", r"in pixels"),
    "C3": _words(r"refers? to", r"described as"),
    "D1": _words(r"layout", r"sections?", r"hierarch\w*", r"columns?", r"nest\w*"),
    "D2": _words(r"tables?", r"grids?", r"rows and columns", r"cells?"),
    "D3": _words(r"reading order", r"group(s|ing|ed)?"),
    "E1": _words(r"colou?rs?", r"fonts?", r"typograph\w*", r"borders?", r"shadows?", r"styl\w*"),
    "E2": _words(r"components?", r"buttons?", r"widgets?", r"navigation"),
    "E3": _words(r"charts?", r"diagrams?", r"graphs?", r"illustrations?", r"figures?"),
    "F1": _words(r"correspond\w*", r"match(es|ing)? (each|the) elements?"),
    "F2": _words(r"html", r"css", r"markup", r"source code"),
    "F3": _words(r"offsets?", r"scale", r"shifted"),
    "G1": _words(r"differen\w*", r"differs?", r"mismatch\w*"),
    "G2": _words(r"similar\w*", r"how close"),
    "G3": _words(r"rank", r"which of", r"best (fits?|matches)", r"choose", r"pick"),
    "H1": _words(r"estimat\w*", r"infer\w*", r"hex (codes?|values?)", r"font sizes?"),
    "H2": _words(r"step by step", r"combin\w*"),
    "H3": _words(r"why", r"explain\w*", r"causes?"),
}


def _images(call: CallView) -> int:
    return sum(1 for item in call.inputs if item.get("kind") == "image")


def _has_markup(call: CallView) -> bool:
    return any(
        item.get("kind") == "text" and "<" in str(item.get("content") or "") for item in call.inputs
    )


# Rules on the shape of the request, beside the instruction's words.
_SHAPE: dict[str, Callable[[CallView], bool]] = {
    "C1": lambda c: "schema" in c.output and "width" in str(c.output.get("schema")),
    "F2": lambda c: _images(c) >= 1 and _has_markup(c),
}
# Codes that relate two sources need two images to apply.
_NEEDS_TWO_IMAGES = frozenset({"F1", "F3", "G1", "G2"})


def _never(_: CallView) -> bool:
    return False


_NOTHING = re.compile(r"(?!)")


def rule_codes(call: CallView, codes: tuple[str, ...]) -> list[str]:
    """The codes the rules give the call, in taxonomy order; Z1 when none applies."""
    found = []
    for code in codes:
        matched = bool(_INSTRUCTION.get(code, _NOTHING).search(call.instruction))
        matched = matched or _SHAPE.get(code, _never)(call)
        if matched and (code not in _NEEDS_TWO_IMAGES or _images(call) >= 2):
            found.append(code)
    if not found and "Z1" in codes:
        found.append("Z1")
    return found
