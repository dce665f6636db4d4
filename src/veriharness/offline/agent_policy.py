"""The scripted agent: a pure function from a Messages API request body to the next message.

The policy keeps no state of its own. Everything it needs is in the request `claude -p` sends:
the appended system prompt (task, reference path, whether a `<verification_policy>` element is
present), Claude Code's environment text (the working directory), the tool list, and the tool
calls made so far with their results. From those it picks the next step:

1. CallMLLM on the reference image, asking for its layout as JSON.
2. Write `answer.html` built from that layout (see `veriharness.offline.page`).
3. Without B3: end the turn with a short summary.
   With B3: render the draft with Chromium through Bash, CallMLLM with reference and draft
   asking for differences, rewrite `answer.html` with what the reply names, and do at most
   `MAX_REVIEW_ROUNDS` such rounds before ending the turn. What the reply names includes the
   per-line measurements (offsets, size ratio, colour and stroke weight), which become margin,
   font-size, colour and weight edits (`veriharness.offline.page.apply_review`); the session
   ends before the last round only when a reply leaves nothing to change.

A system prompt holding `SNOOP_MARKER` (only tests put it there; no task or prompt module of the
project does) makes the agent an adversary of the evidence first: its opening Bash call prints
the environment, searches the filesystem for run records, traces, catalogs and the experiment
record, and appends a forged line to every `mllm_trace.jsonl` it finds (`SNOOP_COMMAND`). Then
it does the task as usual, so the run ends `ok` if the sandbox held.

Tests script other adversaries the same way: each `<veriharness-offline-agent-runs-first>`
element of the system prompt holds one shell command (a network probe, a memory hog, a fork
loop, a disk filler) that the agent runs through Bash, in order, before the task; their results,
failed or not, do not change what it does next (`RUNS_FIRST`). A
`<veriharness-offline-agent-calls-first>` element holds a CallMLLM request made in the same
order (`CALLS_FIRST`), a `<veriharness-offline-agent-uses-first>` element a call of any other tool
by its name and input (`USES_FIRST`: a Read, a WebSearch), and `ONLY_FIRST` ends the turn once
those steps ran, so a test can script a whole session (an answer revised between calls, for
instance). The offline model's stream modes are scripted the same way (`offline/stream_modes.py`).

A failed tool call ends the turn and says so: the policy never retries behind the agent's back.
A missing prerequisite (tool not offered, no reference path, no working directory, a reply it
cannot read) also ends the turn with an explanation, so the transcript shows why.
"""

from __future__ import annotations

import ast
import html
import json
import re
import shlex
from typing import Any, Literal, NamedTuple

from veriharness._util.hashing import sha256_json
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL
from veriharness.offline.page import LayoutError, StateLayout, apply_review, build_page
from veriharness.offline.sse import (
    AssistantMessage,
    ContentBlock,
    MessageUsage,
    TextBlock,
    ToolUseBlock,
    approx_tokens,
)

__all__ = [
    "PolicyInputError",
    "MLLM_TOOL",
    "MAX_REVIEW_ROUNDS",
    "SNOOP_MARKER",
    "SNOOP_COMMAND",
    "RUNS_FIRST",
    "runs_first",
    "CALLS_FIRST",
    "ONLY_FIRST",
    "calls_first",
    "USES_FIRST",
    "uses_first",
    "LAYOUT_SCHEMA",
    "REVIEW_SCHEMA",
    "ToolStep",
    "tool_steps",
    "next_message",
    "system_text",
]

MLLM_TOOL = "mcp__mllm__call"
MAX_REVIEW_ROUNDS = 2
ANSWER_FILE = "answer.html"
DRAFT_FILE = "draft.png"

_BOX = {
    "type": "object",
    "properties": {k: {"type": "integer"} for k in ("x", "y", "width", "height")},
    "required": ["x", "y", "width", "height"],
}
_LINE = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "box": _BOX,
        "font_size_px": {"type": "number"},
        "colour": {"type": "string", "description": "text colour as #rrggbb"},
    },
    "required": ["text", "box", "font_size_px", "colour"],
}
LAYOUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "width": {"type": "integer"},
        "height": {"type": "integer"},
        "background": {"type": "string", "description": "page background as #rrggbb"},
        "text_lines": {"type": "array", "items": _LINE},
        "image_regions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"box": _BOX, "colour": {"type": "string"}},
                "required": ["box", "colour"],
            },
        },
    },
    "required": ["width", "height", "background", "text_lines", "image_regions"],
}
_SHIFT = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "reference_colour": {"type": "string"},
        "draft_colour": {"type": "string"},
    },
    "required": ["text", "reference_colour", "draft_colour"],
}
_OFFSET = {
    "type": "object",
    "description": "a reference line paired by text with a draft line, draft minus reference",
    "properties": {
        "text": {"type": "string"},
        "other_text": {"type": "string"},
        "reference_box": _BOX,
        "other_box": _BOX,
        "dx": {"type": "number"},
        "dy": {"type": "number"},
        "width_ratio": {"type": ["number", "null"]},
        "height_ratio": {"type": ["number", "null"]},
        "reference_colour": {"type": "string"},
        "other_colour": {"type": "string"},
        "colour_difference": {"type": "integer"},
        "ink_ratio": {"type": ["number", "null"]},
    },
    "required": ["text", "other_text", "reference_box", "dx", "dy", "width_ratio"],
}
REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mean_abs_diff": {"type": "number"},
        "differing_regions": {"type": "array", "items": _BOX},
        "missing_text": {"type": "array", "items": _LINE},
        "extra_text": {"type": "array", "items": _LINE},
        "colour_shifts": {"type": "array", "items": _SHIFT},
        "line_offsets": {"type": "array", "items": _OFFSET},
        "background_shift": {
            "type": ["object", "null"],
            "properties": {
                "reference_colour": {"type": "string"},
                "draft_colour": {"type": "string"},
            },
        },
    },
    "required": ["mean_abs_diff", "missing_text", "colour_shifts", "line_offsets"],
}

SNOOP_MARKER = "<veriharness-offline-agent-snoops/>"
_SOUGHT = (
    "reference.png",  # in the workspace: shows the search itself works
    "run.json", "mllm_trace.jsonl", "outcome.json", "experiment.json", "agent_requests.jsonl",
    "config.effective.json", "model-catalog*", "*catalog*.yaml", "capabilities-v*.yaml",
    "reference_dom.json", "decisions.md",
)  # fmt: skip
_PRUNED = r"\( -path /proc -o -path /sys -o -path /dev \) -prune -o"
_NAMES = " -o ".join(f"-name '{name}'" for name in _SOUGHT)
SNOOP_COMMAND = (
    "echo '--- environment'; env | sort; echo '--- search'; "
    f"find / {_PRUNED} -type f \\( {_NAMES} \\) -print 2>/dev/null | sed 's/^/FOUND: /'; "
    f"find / {_PRUNED} -type f -name mllm_trace.jsonl -print 2>/dev/null | "
    'while read -r f; do echo \'{"event": "forged"}\' >> "$f" && echo "APPENDED: $f"; done; '
    "echo '--- end'"
)

RUNS_FIRST = "veriharness-offline-agent-runs-first"
CALLS_FIRST = "veriharness-offline-agent-calls-first"
USES_FIRST = "veriharness-offline-agent-uses-first"
ONLY_FIRST = "<veriharness-offline-agent-only-first/>"
_FIRST = re.compile(f"<({RUNS_FIRST}|{CALLS_FIRST}|{USES_FIRST})>(.*?)</\\1>", re.DOTALL)
_BASH_TIMEOUT_MS = 600_000


def runs_first(command: str) -> str:
    """The system prompt element that makes the offline agent run `command` before its task."""
    return f"<{RUNS_FIRST}>{command}</{RUNS_FIRST}>"


def calls_first(request: dict[str, Any]) -> str:
    """The element that makes it call CallMLLM with `request` before its task (in order with
    the `runs_first` commands)."""
    return f"<{CALLS_FIRST}>{html.escape(json.dumps(request))}</{CALLS_FIRST}>"


def uses_first(tool: str, tool_input: dict[str, Any]) -> str:
    """The element that makes it call the tool named `tool` with `tool_input` before its task
    (in order with the other first steps)."""
    step = json.dumps({"tool": tool, "input": tool_input})
    return f"<{USES_FIRST}>{html.escape(step)}</{USES_FIRST}>"


class _FirstStep(NamedTuple):
    tool: str
    input: dict[str, Any]


def _steps_first(system: str) -> list[_FirstStep]:
    """The tool calls the agent makes before its task, in order."""
    steps = [_FirstStep("Bash", _bash(SNOOP_COMMAND))] if SNOOP_MARKER in system else []
    for kind, text in _FIRST.findall(system):
        value = html.unescape(text.strip())
        if kind == RUNS_FIRST:
            steps.append(_FirstStep("Bash", _bash(value)))
            continue
        try:
            loaded = json.loads(value)
        except json.JSONDecodeError as error:
            raise PolicyInputError(f"<{kind}> does not hold JSON: {error}") from None
        if kind == CALLS_FIRST:
            steps.append(_FirstStep(MLLM_TOOL, loaded))
        elif isinstance(loaded, dict) and isinstance(loaded.get("input"), dict):
            steps.append(_FirstStep(str(loaded.get("tool")), loaded["input"]))
        else:
            raise PolicyInputError(f"<{kind}> must hold {{'tool': name, 'input': {{...}}}}")
    return steps


def _made(step: ToolStep, planned: _FirstStep) -> bool:
    """Whether a tool call of the conversation is the planned one (a command by its text)."""
    if step.name != planned.tool:
        return False
    if planned.tool == "Bash":
        return bool(step.input.get("command") == planned.input["command"])
    return step.input == planned.input


def _bash(command: str) -> dict[str, Any]:
    return {"command": command, "description": "Look around the machine",
            "timeout": _BASH_TIMEOUT_MS}  # fmt: skip


_REFERENCE = re.compile(r"(?<![\w/.-])((?:/?[\w.-]+/)*[\w.-]*reference[\w.-]*\.(?:png|jpe?g|webp))")
_WORKDIR = re.compile(r"(?:Primary working directory|Working directory):\s*(/\S+)")
_VERIFICATION = "<verification_policy>"
# An interaction line of the interactive task module: id, action, the action's value as Python
# writes a string (`experiment.interactions.interactions_text`), after-state image.
_VALUE = r"""(?: '(?:[^'\\]|\\.)*'| "(?:[^"\\]|\\.)*")?"""
_INTERACTION = re.compile(
    rf"^- `([\w-]+)` \((\w+)({_VALUE})\):.*?After-state: `([^`]+)`", re.MULTILINE
)


class PolicyInputError(ValueError):
    """The request body is not a Messages API request the policy can read."""


class ToolStep(NamedTuple):
    """One tool call of the conversation so far, with its result (None while pending)."""

    name: str
    input: dict[str, Any]
    result: str | None
    is_error: bool


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def system_text(body: dict[str, Any]) -> str:
    return _text_of(body.get("system"))


def _all_text(body: dict[str, Any]) -> str:
    texts = [system_text(body)]
    for message in body.get("messages", []):
        if isinstance(message, dict):
            texts.append(_text_of(message.get("content")))
    return "\n".join(texts)


def tool_steps(messages: list[Any]) -> list[ToolStep]:
    """The tool calls of the assistant turns, paired with their tool_result blocks."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    order: list[str] = []
    results: dict[str, tuple[str, bool]] = {}
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and message.get("role") == "assistant":
                calls[block["id"]] = (block["name"], block.get("input") or {})
                order.append(block["id"])
            elif block.get("type") == "tool_result":
                text = _text_of(block.get("content"))
                results[block.get("tool_use_id", "")] = (text, bool(block.get("is_error")))
    steps = []
    for call_id in order:
        name, tool_input = calls[call_id]
        result_text, is_error = results.get(call_id, (None, False))
        steps.append(ToolStep(name, tool_input, result_text, is_error))
    return steps


def _find_dict_with(value: Any, key: str) -> dict[str, Any] | None:
    """The first dict (depth first) holding `key`, also inside JSON-encoded strings."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, dict):
        if key in value:
            return value
        children = list(value.values())
    elif isinstance(value, list):
        children = value
    else:
        return None
    for child in children:
        found = _find_dict_with(child, key)
        if found is not None:
            return found
    return None


def _message(
    body: dict[str, Any], content: list[ContentBlock], stop: Literal["end_turn", "tool_use"]
) -> AssistantMessage:
    steps = len(tool_steps(body.get("messages", [])))
    digest = sha256_json(body.get("messages", []))[7:31]
    usage = MessageUsage(
        input_tokens=approx_tokens(json.dumps(body)),
        output_tokens=approx_tokens(json.dumps([block.model_dump() for block in content])),
    )
    return AssistantMessage(
        id=f"msg_offline_{steps:02d}_{digest}",
        model=str(body.get("model") or OFFLINE_AGENT_MODEL),
        content=content,
        stop_reason=stop,
        usage=usage,
    )


def _end(body: dict[str, Any], text: str) -> AssistantMessage:
    return _message(body, [TextBlock(text=text)], "end_turn")


def _tool(
    body: dict[str, Any], note: str, name: str, tool_input: dict[str, Any]
) -> AssistantMessage:
    call_id = f"toolu_offline_{len(tool_steps(body.get('messages', []))) + 1:02d}"
    blocks: list[ContentBlock] = [
        TextBlock(text=note),
        ToolUseBlock(id=call_id, name=name, input=tool_input),
    ]
    return _message(body, blocks, "tool_use")


def _layout_call(reference: str) -> dict[str, Any]:
    return {
        "instruction": (
            "Describe the layout of this screenshot so it can be rebuilt as HTML. Give the image "
            "width and height, the page background colour, every line of text in reading order "
            "with its exact wording, bounding box in pixels, font size in pixels and colour, "
            "and the boxes and colours of non-text regions such as pictures or coloured panels."
        ),
        "inputs": [{"kind": "image", "label": "reference", "path": reference}],
        "capability_tags": ["A2", "B1", "C1", "E1"],
        "output": {"kind": "json", "schema": LAYOUT_SCHEMA},
    }


def _review_call(reference: str) -> dict[str, Any]:
    return {
        "instruction": (
            "The first image is the reference screenshot, the second a rendering of my HTML "
            "reproduction. List how the draft differs: mean absolute pixel difference, regions "
            "that differ, text lines of the reference missing from the draft (with box, font size "
            "and colour), extra text in the draft, text colour shifts and a background shift. "
            "Also pair the text lines of the two images by their text and give, per pair, the "
            "draft's offset in pixels (dx, dy), the width and height ratios, both colours and "
            "their difference, and how much heavier the reference's strokes are."
        ),
        "inputs": [
            {"kind": "image", "label": "reference", "path": reference},
            {"kind": "image", "label": "draft", "path": DRAFT_FILE},
        ],
        "capability_tags": ["G1", "F1"],
        "output": {"kind": "json", "schema": REVIEW_SCHEMA},
    }


def _render_command(workdir: str, width: int, height: int) -> str:
    page = shlex.quote(f"file://{workdir}/{ANSWER_FILE}")
    target = shlex.quote(f"{workdir}/{DRAFT_FILE}")
    return (
        f'rm -f {target}; profile="$(mktemp -d)"; chromium --headless --no-sandbox --disable-gpu '
        "--hide-scrollbars --no-first-run --disable-background-networking "
        '--disable-component-update --user-data-dir="$profile" '
        f"--window-size={width},{height} --screenshot={target} {page} 2>/dev/null; "
        f'status=$?; rm -rf "$profile"; if [ -s {target} ]; then echo "rendered {DRAFT_FILE}"; '
        f'else echo "no screenshot written (chromium exit $status)" >&2; exit 1; fi'
    )


def _current_layout(steps: list[ToolStep]) -> dict[str, Any]:
    """The layout from the first CallMLLM reply, with every review that led to a rewrite."""
    layout = _find_dict_with(steps[0].result, "text_lines")
    if layout is None:
        raise LayoutError("the layout reply holds no text_lines field")
    for index, step in enumerate(steps[1:], start=1):
        later = steps[index + 1] if index + 1 < len(steps) else None
        if step.name == MLLM_TOOL and later is not None and later.name == "Write":
            layout = apply_review(layout, _find_dict_with(step.result, "missing_text") or {})
    return layout


def next_message(body: dict[str, Any]) -> AssistantMessage:
    """The assistant message that follows the conversation in `body`."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise PolicyInputError(f"messages must be a non-empty list, got {messages!r}"[:300])
    tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    if MLLM_TOOL not in tools:
        return _end(body, f"I cannot do this task: the tool {MLLM_TOOL} was not offered.")
    system = system_text(body)
    reference = _REFERENCE.search(system)
    if reference is None:
        return _end(body, "I cannot do this task: the system prompt names no reference image.")
    workdir = _WORKDIR.search(_all_text(body))
    if workdir is None:
        return _end(body, "I cannot do this task: the request names no working directory.")
    steps = tool_steps(messages)
    first = _steps_first(system)
    ran = 0
    while ran < len(first) and ran < len(steps) and _made(steps[ran], first[ran]):
        ran += 1
    if ran < len(first) and ran == len(steps):
        step = first[ran]
        return _tool(body, "First I look around the machine.", step.tool, step.input)
    if ONLY_FIRST in system and ran == len(first):
        return _end(body, f"Done: the {len(first)} steps I was given ran.")
    steps = steps[ran:]  # the task proceeds as if those commands had not run
    verify = _VERIFICATION in system
    if not steps:
        note = f"I will ask the multimodal model for the layout of {reference.group(1)}."
        return _tool(body, note, MLLM_TOOL, _layout_call(reference.group(1)))
    last = steps[-1]
    if last.result is None:
        raise PolicyInputError(f"the last tool call ({last.name}) has no tool_result")
    if last.is_error:
        return _end(body, f"Stopping: the {last.name} call failed: {last.result[:500]}")
    interactions = _INTERACTION.findall(system)
    if len(steps) <= len(interactions):
        state_id, _, _, image = interactions[len(steps) - 1]
        note = f"I will ask the multimodal model for the layout after `{state_id}` ({image})."
        return _tool(body, note, MLLM_TOOL, _layout_call(image))
    states = [
        StateLayout(state_id, action, _layout_of(step), _value(value))
        for (state_id, action, value, _), step in zip(interactions, steps[1:], strict=False)
    ]
    steps = [steps[0], *steps[1 + len(interactions) :]]
    try:
        return _after(body, steps, reference.group(1), workdir.group(1), verify, states)
    except LayoutError as error:
        return _end(body, f"Stopping: I cannot use the model's reply: {error}")


def _value(written: str) -> str | None:
    """An interaction's value as the task module states it (a Python string literal), if any."""
    return str(ast.literal_eval(written.strip())) if written else None


def _layout_of(step: ToolStep) -> dict[str, Any]:
    layout = _find_dict_with(step.result, "text_lines")
    if layout is None:
        raise LayoutError("the layout reply holds no text_lines field")
    return layout


def _after(
    body: dict[str, Any],
    steps: list[ToolStep],
    reference: str,
    workdir: str,
    verify: bool,
    states: list[StateLayout],
) -> AssistantMessage:
    """The step after the layouts are in. Each stated interaction of an interactive task gets a
    trigger of its own that shows its after-state (`page.build_page`); without B3 the planted
    weakness: the triggers are marked but nothing acts on them (so the demo's Implement Rate
    differs by condition)."""
    last = steps[-1]
    reviews = [s for s in steps[1:] if s.name == MLLM_TOOL]
    answer = f"{workdir}/{ANSWER_FILE}"
    if last.name == MLLM_TOOL and not reviews:
        page = build_page(_current_layout(steps), states=states, live=verify)
        return _tool(
            body,
            "Writing the first version of the page.",
            "Write",
            {"file_path": answer, "content": page},
        )
    if last.name == "Write" and not verify:
        return _end(body, f"Wrote {ANSWER_FILE} from the model's layout of {reference}.")
    if last.name == "Write":
        layout = _current_layout(steps)
        command = _render_command(workdir, int(layout["width"]), int(layout["height"]))
        return _tool(
            body,
            "Rendering the draft to compare it.",
            "Bash",
            {"command": command, "description": "Render answer.html to draft.png"},
        )
    if last.name == "Bash":
        return _tool(
            body, "Comparing the draft with the reference.", MLLM_TOOL, _review_call(reference)
        )
    if last.name == MLLM_TOOL:
        review = _find_dict_with(last.result, "missing_text")
        if review is None:
            raise LayoutError("the comparison reply holds no missing_text field")
        layout = _current_layout(steps)
        fixed = apply_review(layout, review)
        if fixed != layout and len(reviews) < MAX_REVIEW_ROUNDS:
            return _tool(
                body,
                "Fixing what the comparison found.",
                "Write",
                {"file_path": answer, "content": build_page(fixed, states=states, live=verify)},
            )
        return _end(body, _summary(review, len(reviews)))
    return _end(body, f"Stopping: I did not expect a {last.name} call at this point.")


def _summary(review: dict[str, Any], rounds: int) -> str:
    missing = len(review.get("missing_text") or [])
    shifts = len(review.get("colour_shifts") or [])
    offsets = [o for o in review.get("line_offsets") or [] if isinstance(o, dict)]
    moved = sum(1 for o in offsets if abs(o.get("dx", 0)) >= 1 or abs(o.get("dy", 0)) >= 1)
    return (
        f"Wrote {ANSWER_FILE} and checked it in {rounds} comparison round(s); the last one "
        f"reported mean difference {review.get('mean_abs_diff')}, {missing} missing line(s), "
        f"{shifts} colour shift(s) and {moved} of {len(offsets)} paired line(s) offset."
    )
