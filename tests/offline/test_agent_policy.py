"""The scripted agent policy on hand-built request bodies: each step, B3 or not, error paths."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from veriharness.experiment.config import load_config
from veriharness.experiment.definition import cell_identity, load_definition
from veriharness.offline.agent_policy import (
    MAX_REVIEW_ROUNDS,
    MLLM_TOOL,
    SNOOP_COMMAND,
    SNOOP_MARKER,
    PolicyInputError,
    next_message,
)
from veriharness.offline.sse import TextBlock, ToolUseBlock

ROOT = Path(__file__).resolve().parents[2]
WORKDIR = "/tmp/vh-ws-123"
TASK = "Recreate the screenshot at `reference.png` as answer.html.\n"
B3 = "<verification_policy>\nRender and compare before you finish.\n</verification_policy>\n"
LAYOUT: dict[str, Any] = {
    "width": 320,
    "height": 200,
    "background": "#fafafa",
    "text_lines": [
        {
            "text": "Title <b>",
            "box": {"x": 10, "y": 12, "width": 200, "height": 28},
            "font_size_px": 30.0,
            "colour": "#112233",
        },
        {
            "text": "First line",
            "box": {"x": 10, "y": 60, "width": 120, "height": 16},
            "font_size_px": 17.0,
            "colour": "#333333",
        },
    ],
    "image_regions": [
        {"box": {"x": 10, "y": 120, "width": 100, "height": 50}, "colour": "#ff0000"}
    ],
}
MISSING = {
    "text": "Second line",
    "box": {"x": 10, "y": 80, "width": 130, "height": 16},
    "font_size_px": 17.0,
    "colour": "#333333",
}


# A (tool, input, result, is_error) turn of an earlier request.
Turn = tuple[str, dict[str, Any], str, bool]


def _body(
    system: str,
    turns: list[Turn],
    tools: tuple[str, ...] = (MLLM_TOOL, "Write", "Bash", "Edit"),
) -> dict[str, Any]:
    """A request as claude -p sends it, after the given (tool, input, result, is_error) turns."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Do the task."}]},
        {
            "role": "system",
            "content": [{"type": "text", "text": f" - Primary working directory: {WORKDIR}\n"}],
        },
    ]
    for index, (name, tool_input, result, is_error) in enumerate(turns):
        call_id = f"toolu_{index}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "..."},
                    {"type": "tool_use", "id": call_id, "name": name, "input": tool_input},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "is_error": is_error,
                        "content": [{"type": "text", "text": result}],
                    }
                ],
            }
        )
    return {
        "model": "veriharness-offline-agent-1",
        "system": [
            {"type": "text", "text": "You are Claude Code."},
            {"type": "text", "text": system},
        ],
        "tools": [{"name": name, "input_schema": {}} for name in tools],
        "messages": messages,
    }


def _tool(message: Any) -> ToolUseBlock:
    assert message.stop_reason == "tool_use"
    (tool,) = [block for block in message.content if isinstance(block, ToolUseBlock)]
    return tool


def _text(message: Any) -> str:
    assert message.stop_reason == "end_turn"
    return " ".join(block.text for block in message.content if isinstance(block, TextBlock))


def _review(**found: Any) -> str:
    base = {
        "mean_abs_diff": 0.01,
        "missing_text": [],
        "colour_shifts": [],
        "background_shift": None,
    }
    return json.dumps({**base, **found})


LAYOUT_TURN: Turn = (MLLM_TOOL, {}, json.dumps(LAYOUT), False)
WRITE_TURN: Turn = ("Write", {}, "File created successfully", False)
BASH_TURN: Turn = ("Bash", {}, "rendered draft.png", False)


def test_first_step_asks_for_the_layout_of_the_named_reference() -> None:
    tool = _tool(next_message(_body(TASK, [])))
    assert tool.name == MLLM_TOOL
    assert tool.input["inputs"] == [
        {"kind": "image", "label": "reference", "path": "reference.png"}
    ]
    assert tool.input["capability_tags"] == ["A2", "B1", "C1", "E1"]
    assert tool.input["output"]["kind"] == "json"
    assert "text_lines" in tool.input["output"]["schema"]["properties"]


def test_reference_path_comes_from_the_system_prompt() -> None:
    tool = _tool(next_message(_body("The target is shots/reference-02.png here.", [])))
    assert tool.input["inputs"][0]["path"] == "shots/reference-02.png"


def test_layout_reply_becomes_a_flow_layout_page() -> None:
    tool = _tool(next_message(_body(TASK, [LAYOUT_TURN])))
    assert tool.name == "Write" and tool.input["file_path"] == f"{WORKDIR}/answer.html"
    page = tool.input["content"]
    assert "Title &lt;b&gt;" in page and "First line" in page
    assert "background: #fafafa" in page and "color:#112233" in page and "font-size:30px" in page
    assert "absolute" not in page
    assert page.index("Title") < page.index("First line") < page.index("#ff0000")


def test_without_b3_the_turn_ends_after_writing() -> None:
    text = _text(next_message(_body(TASK, [LAYOUT_TURN, WRITE_TURN])))
    assert "answer.html" in text


def test_with_b3_the_draft_is_rendered_then_compared() -> None:
    bash = _tool(next_message(_body(TASK + B3, [LAYOUT_TURN, WRITE_TURN])))
    assert bash.name == "Bash"
    command = bash.input["command"]
    assert "chromium --headless" in command and "--window-size=320,200" in command
    assert f"--screenshot={WORKDIR}/draft.png" in command
    assert f"file://{WORKDIR}/answer.html" in command
    compare = _tool(next_message(_body(TASK + B3, [LAYOUT_TURN, WRITE_TURN, BASH_TURN])))
    assert compare.name == MLLM_TOOL
    assert [item["label"] for item in compare.input["inputs"]] == ["reference", "draft"]
    assert compare.input["capability_tags"] == ["G1", "F1"]


def test_review_findings_are_written_back_into_the_page() -> None:
    shift = {"text": "First line", "reference_colour": "#0000aa", "draft_colour": "#333333"}
    review: Turn = (MLLM_TOOL, {}, _review(missing_text=[MISSING], colour_shifts=[shift]), False)
    turns = [LAYOUT_TURN, WRITE_TURN, BASH_TURN, review]
    fix = _tool(next_message(_body(TASK + B3, turns)))
    assert fix.name == "Write"
    page = fix.input["content"]
    assert "Second line" in page and "color:#0000aa" in page
    assert page.index("First line") < page.index("Second line")
    # The second round starts from the fixed page: a clean review ends the session.
    clean: Turn = (MLLM_TOOL, {}, _review(), False)
    again = turns + [WRITE_TURN, BASH_TURN]
    assert _tool(next_message(_body(TASK + B3, again))).name == MLLM_TOOL
    assert "2 comparison round(s)" in _text(next_message(_body(TASK + B3, again + [clean])))


def test_measured_line_offsets_are_written_back_as_edits() -> None:
    offset = {
        "text": "First line",
        "other_text": "First line",
        "reference_box": LAYOUT["text_lines"][1]["box"],
        "dx": 4,
        "dy": -3,
        "width_ratio": 1.0,
        "reference_colour": "#333333",
        "other_colour": "#333333",
        "colour_difference": 0,
        "ink_ratio": 1.5,
    }
    turns = [LAYOUT_TURN, WRITE_TURN, BASH_TURN]
    first = _tool(next_message(_body(TASK, [LAYOUT_TURN]))).input["content"]
    review: Turn = (MLLM_TOOL, {}, _review(line_offsets=[offset]), False)
    fixed = _tool(next_message(_body(TASK + B3, [*turns, review]))).input["content"]
    # a 17 px box at the 16 px ink (10, 60), under the title's box that ends at 41;
    # then moved by (-4, +3) and made bold, 17 / 1.13 px so that bold keeps the measured width
    assert "margin:19px 0 0 10px;font-size:17px;line-height:17px" in first
    assert "margin:22px 0 0 6px;font-size:15px;line-height:16px" in fixed
    assert "font-weight:bold" in fixed and "font-weight:bold" not in first
    # the edits persist into the next round's page, with the next review's on top
    again = [*turns, review, WRITE_TURN, BASH_TURN]
    clean: Turn = (
        MLLM_TOOL,
        {},
        _review(line_offsets=[dict(offset, dx=0, dy=0, ink_ratio=1.0)]),
        False,
    )
    assert "2 comparison round(s)" in _text(next_message(_body(TASK + B3, [*again, clean])))


def test_review_asks_for_line_offsets() -> None:
    compare = _tool(next_message(_body(TASK + B3, [LAYOUT_TURN, WRITE_TURN, BASH_TURN])))
    schema = compare.input["output"]["schema"]
    assert "line_offsets" in schema["required"]
    assert {"dx", "dy", "width_ratio", "ink_ratio"} <= set(
        schema["properties"]["line_offsets"]["items"]["properties"]
    )


def test_review_rounds_are_bounded() -> None:
    review: Turn = (MLLM_TOOL, {}, _review(missing_text=[MISSING]), False)
    turns = [LAYOUT_TURN]
    for _ in range(MAX_REVIEW_ROUNDS):
        turns += [WRITE_TURN, BASH_TURN, review]
    text = _text(next_message(_body(TASK + B3, turns)))
    assert f"{MAX_REVIEW_ROUNDS} comparison round(s)" in text and "1 missing line(s)" in text


def test_clean_first_review_ends_the_turn() -> None:
    turns = [LAYOUT_TURN, WRITE_TURN, BASH_TURN, (MLLM_TOOL, {}, _review(), False)]
    assert "1 comparison round(s)" in _text(next_message(_body(TASK + B3, turns)))


def test_a_failed_tool_call_ends_the_turn_without_retry() -> None:
    failed: Turn = (MLLM_TOOL, {}, "model request failed (timeout)", True)
    text = _text(next_message(_body(TASK, [failed])))
    assert MLLM_TOOL in text and "model request failed (timeout)" in text
    render_failed = [LAYOUT_TURN, WRITE_TURN, ("Bash", {}, "no screenshot written", True)]
    assert "Bash call failed" in _text(next_message(_body(TASK + B3, render_failed)))


def test_unreadable_replies_end_the_turn_and_name_the_problem() -> None:
    text = _text(next_message(_body(TASK, [(MLLM_TOOL, {}, "I see a page.", False)])))
    assert "text_lines" in text
    bad = dict(LAYOUT, background="white")
    text = _text(next_message(_body(TASK, [(MLLM_TOOL, {}, json.dumps(bad), False)])))
    assert "background" in text and "'white'" in text


@pytest.mark.parametrize(
    ("system", "tools", "expected"),
    [
        (TASK, ("Write", "Bash"), f"{MLLM_TOOL} was not offered"),
        ("Make a web page.", (MLLM_TOOL, "Write"), "names no reference image"),
    ],
)
def test_missing_prerequisites_end_the_turn(
    system: str, tools: tuple[str, ...], expected: str
) -> None:
    assert expected in _text(next_message(_body(system, [], tools)))


def test_missing_working_directory_ends_the_turn() -> None:
    body = _body(TASK, [])
    body["messages"] = body["messages"][:1]
    assert "no working directory" in _text(next_message(body))


def test_malformed_requests_raise() -> None:
    with pytest.raises(PolicyInputError, match="messages"):
        next_message({"model": "m", "messages": []})


def test_same_body_same_message() -> None:
    body = _body(TASK + B3, [LAYOUT_TURN, WRITE_TURN])
    assert next_message(body) == next_message(json.loads(json.dumps(body)))


def test_only_a_prompt_with_the_snoop_marker_looks_around_first_then_does_the_task() -> None:
    assert _tool(next_message(_body(TASK, []))).name == MLLM_TOOL
    prompt = TASK + SNOOP_MARKER + "\n"
    look = _tool(next_message(_body(prompt, [])))
    assert look.name == "Bash" and look.input["command"] == SNOOP_COMMAND
    # A failed look-around changes nothing: the task goes on as if it had not happened.
    snooped = [("Bash", {"command": SNOOP_COMMAND}, "--- end", True)]
    layout = _tool(next_message(_body(prompt, snooped)))
    assert layout.name == MLLM_TOOL and layout.input["inputs"][0]["path"] == "reference.png"
    done = snooped + [(MLLM_TOOL, layout.input, json.dumps(LAYOUT), False)]
    write = _tool(next_message(_body(prompt, done)))
    assert write.name == "Write" and write.input["file_path"] == f"{WORKDIR}/answer.html"
    finished = done + [("Write", write.input, "ok", False)]
    assert "Wrote answer.html" in _text(next_message(_body(prompt, finished)))


def test_the_example_conditions_take_the_b3_path_only_with_b3() -> None:
    """The environment facts (in both example conditions, with a browser command of their own)
    never send the agent down its B3 path; only the condition with B3 does."""
    defn = load_definition(
        load_config(ROOT / "config" / "config.yaml", {"allow_uncommitted": True}), ROOT
    )
    prompts = {c: cell_identity(defn, c, "landing-page")[1].text for c in defn.conditions}
    assert all("<environment_facts>" in text for text in prompts.values())
    ended = next_message(_body(prompts["b3-absent"], [LAYOUT_TURN, WRITE_TURN]))
    assert "answer.html" in _text(ended)
    rendered = _tool(next_message(_body(prompts["b3-present"], [LAYOUT_TURN, WRITE_TURN])))
    assert rendered.name == "Bash" and "--screenshot=" in rendered.input["command"]
    first = _tool(next_message(_body(prompts["b3-absent"], [])))
    assert first.input["inputs"][0]["path"] == "reference.png"


INTERACTIVE_TASK = TASK + (
    "- `open` (click): Clicking Open shows the panel. After-state: `states/open.png`; "
    "marked copy: `states/open_marked.png`.\n"
)
STATE_LAYOUT = {**LAYOUT, "text_lines": [{**LAYOUT["text_lines"][0], "text": "Panel open"}]}
STATE_TURN: Turn = (MLLM_TOOL, {}, json.dumps(STATE_LAYOUT), False)


def test_an_interactive_task_asks_for_each_after_state_then_wires_its_trigger() -> None:
    state = _tool(next_message(_body(INTERACTIVE_TASK, [LAYOUT_TURN])))
    assert state.name == MLLM_TOOL
    assert state.input["inputs"] == [
        {"kind": "image", "label": "reference", "path": "states/open.png"}
    ]
    with_b3 = _tool(next_message(_body(INTERACTIVE_TASK + B3, [LAYOUT_TURN, STATE_TURN])))
    page = with_b3.input["content"]
    # The trigger is the line the after-state changed ("Title" became "Panel open").
    assert '<p data-interaction="open" style="margin:' in page and "Title &lt;b&gt;</p>" in page
    assert page.count(' data-interaction="') == 1
    assert '<main data-state="open" hidden>' in page and "Panel open" in page
    assert "addEventListener('click'" in page
    # Without B3, the planted weakness: the trigger is marked, but nothing acts on it.
    without = _tool(next_message(_body(INTERACTIVE_TASK, [LAYOUT_TURN, STATE_TURN])))
    dead = without.input["content"]
    assert '<p data-interaction="open"' in dead and "<script>" not in dead
    # After the write, the usual path: B3 renders the draft, no B3 ends the turn.
    turns = [LAYOUT_TURN, STATE_TURN, WRITE_TURN]
    assert _tool(next_message(_body(INTERACTIVE_TASK + B3, turns))).name == "Bash"
    assert "answer.html" in _text(next_message(_body(INTERACTIVE_TASK, turns)))


TWO_INTERACTIONS = INTERACTIVE_TASK + (
    "- `greet` (type 'Ada (admin)'): Typing a name shows a greeting. After-state: "
    "`states/greet.png`; marked copy: `states/greet_marked.png`.\n"
)
GREET_LAYOUT = {**LAYOUT, "text_lines": [LAYOUT["text_lines"][0], {**LAYOUT["text_lines"][1],
                "text": "Hello, Ada (admin)"}]}  # fmt: skip
GREET_TURN: Turn = (MLLM_TOOL, {}, json.dumps(GREET_LAYOUT), False)


def test_every_stated_interaction_gets_a_trigger_of_its_own() -> None:
    second = _tool(next_message(_body(TWO_INTERACTIONS, [LAYOUT_TURN, STATE_TURN])))
    assert second.input["inputs"] == [
        {"kind": "image", "label": "reference", "path": "states/greet.png"}
    ]
    turns = [LAYOUT_TURN, STATE_TURN, GREET_TURN]
    page = _tool(next_message(_body(TWO_INTERACTIONS + B3, turns))).input["content"]
    assert (
        page.count('data-interaction="open"') == 1 and page.count('data-interaction="greet"') == 1
    )
    # Typing goes into a field: a transparent input laid over the line the greeting replaces.
    field = re.search(r'<p style="([^"]*)">First line<input data-interaction="greet"', page)
    assert field is not None and field.group(1).endswith(";position:relative")
    assert '<main data-state="open" hidden>' in page and '<main data-state="greet" hidden>' in page
    assert "addEventListener('click', () => show(\"open\"))" in page
    assert "addEventListener('input', () => show(\"greet\"))" in page
    dead = _tool(next_message(_body(TWO_INTERACTIONS, turns))).input["content"]
    assert 'data-interaction="greet"' in dead and "<script>" not in dead


def test_a_choice_trigger_is_a_select_holding_the_stated_value() -> None:
    from veriharness.offline.page import StateLayout, build_page

    states = [StateLayout("lang", "select", STATE_LAYOUT, "php"),
              StateLayout("enter", "key", GREET_LAYOUT, "Enter"),
              StateLayout("tip", "hover", LAYOUT)]  # fmt: skip
    page = build_page(LAYOUT, states=states)
    assert '<select data-interaction="lang"' in page and '<option value="php"></option>' in page
    assert '<input data-interaction="enter"' in page
    for event, state in (("change", "lang"), ("keydown", "enter"), ("mouseenter", "tip")):
        assert f"addEventListener('{event}', () => show(\"{state}\"))" in page
    # Three triggers on three elements; the region holds no trigger's element, so it may hold one.
    assert page.count(' data-interaction="') == 3
    assert '<div class="figure" data-interaction="tip"' in page


def test_a_static_task_page_is_unchanged_by_the_states_option() -> None:
    from veriharness.offline.page import build_page

    assert build_page(LAYOUT) == build_page(LAYOUT, states=[], live=False)
    assert "data-interaction" not in build_page(LAYOUT)
