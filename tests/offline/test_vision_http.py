"""The vision endpoint through real HTTP: pixels in, measurements (and OCR text) out."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from offline_images import (
    BACKGROUND,
    BODY,
    BODY_COLOUR,
    PANEL,
    PANEL_COLOUR,
    TITLE,
    TITLE_COLOUR,
    channel_distance,
    data_url,
    screenshot,
)

from veriharness.experiment.offline_model import OFFLINE_VISION_MODEL
from veriharness.offline.agent_policy import LAYOUT_SCHEMA, REVIEW_SCHEMA


def _post(base_url: str, parts: list[dict], **extra: object) -> httpx.Response:
    body = {"model": OFFLINE_VISION_MODEL, "messages": [{"role": "user", "content": parts}]}
    return httpx.post(f"{base_url}/v1/chat/completions", json={**body, **extra}, timeout=120)


def _image_parts(label: str, url: str) -> list[dict]:
    # The same framing CallMLLM's openai-chat backend sends.
    return [
        {"type": "text", "text": f'Input "{label}" (image):'},
        {"type": "image_url", "image_url": {"url": url}},
    ]


def test_layout_json_reads_text_colours_and_panel_from_pixels(base_url: str) -> None:
    parts = [
        {"type": "text", "text": "Describe the layout of this screenshot."},
        *_image_parts("reference", data_url(screenshot())),
        {"type": "text", "text": "Reply with JSON matching: " + json.dumps(LAYOUT_SCHEMA)},
    ]
    response = _post(base_url, parts)
    assert response.status_code == 200
    reply = response.json()
    layout = json.loads(reply["choices"][0]["message"]["content"])
    assert set(layout) == set(LAYOUT_SCHEMA["properties"])  # shaped to the schema, no extras
    assert (layout["width"], layout["height"]) == (640, 360)
    assert channel_distance(layout["background"], BACKGROUND) <= 4
    texts = [line["text"] for line in layout["text_lines"]]
    assert texts == [TITLE, BODY]
    title, body = layout["text_lines"]
    assert channel_distance(title["colour"], TITLE_COLOUR) <= 24
    assert channel_distance(body["colour"], BODY_COLOUR) <= 24
    assert title["font_size_px"] > body["font_size_px"]
    assert title["box"]["y"] < body["box"]["y"]
    (panel,) = layout["image_regions"]
    x0, y0, x1, y1 = PANEL
    assert panel["box"] == {"x": x0, "y": y0, "width": x1 - x0 + 1, "height": y1 - y0 + 1}
    assert channel_distance(panel["colour"], PANEL_COLOUR) <= 4
    assert reply["usage"]["prompt_tokens"] > 0 and reply["usage"]["completion_tokens"] > 0
    assert reply["model"] == OFFLINE_VISION_MODEL


def test_comparison_names_missing_line_and_colour_shift(base_url: str) -> None:
    reference = data_url(screenshot())
    parts = [
        {"type": "text", "text": "Compare these. Answer in JSON: " + json.dumps(REVIEW_SCHEMA)},
        *_image_parts("reference", reference),
        *_image_parts("draft", data_url(screenshot(body=False))),
    ]
    review = json.loads(_post(base_url, parts).json()["choices"][0]["message"]["content"])
    assert [line["text"] for line in review["missing_text"]] == [BODY]
    assert review["colour_shifts"] == [] and review["background_shift"] is None
    assert review["mean_abs_diff"] > 0

    recoloured = [
        *_image_parts("draft", data_url(screenshot(body_colour="#2222aa"))),
        *_image_parts("reference", reference),
        {"type": "text", "text": "Compare. JSON: " + json.dumps(REVIEW_SCHEMA)},
    ]
    review = json.loads(_post(base_url, recoloured).json()["choices"][0]["message"]["content"])
    assert review["missing_text"] == []
    (shift,) = review["colour_shifts"]  # labels, not order, decide which is the reference
    assert shift["text"] == BODY
    assert channel_distance(shift["reference_colour"], BODY_COLOUR) <= 24
    assert channel_distance(shift["draft_colour"], "#2222aa") <= 24
    # the same line is paired in both images and measured: in place, differently coloured
    pairs = {pair["text"]: pair for pair in review["line_offsets"]}
    assert set(pairs) == {TITLE, BODY}
    assert (pairs[BODY]["dx"], pairs[BODY]["dy"]) == (0, 0)
    assert pairs[BODY]["colour_difference"] > 48 and pairs[TITLE]["colour_difference"] <= 4


def test_identical_images_compare_clean(base_url: str) -> None:
    same = data_url(screenshot())
    parts = [*_image_parts("reference", same), *_image_parts("draft", same)]
    review = json.loads(
        _post(base_url, parts, response_format={"type": "json_object"}).json()["choices"][0][
            "message"
        ]["content"]
    )
    assert review["mean_abs_diff"] == 0 and review["differing_regions"] == []
    assert review["missing_text"] == [] and review["extra_text"] == []


def test_plain_text_reply_without_json_request(base_url: str) -> None:
    parts = [
        {"type": "text", "text": "What does it say?"},
        *_image_parts("ref", data_url(screenshot())),
    ]
    content = _post(base_url, parts).json()["choices"][0]["message"]["content"]
    assert TITLE in content and BODY in content and "640x360" in content
    assert not content.lstrip().startswith("{")


def test_response_format_schema_is_honoured(base_url: str) -> None:
    schema = {
        "type": "object",
        "properties": {"width": {"type": "integer"}, "title": {}},
        "required": ["width", "title"],
    }
    response = _post(
        base_url,
        _image_parts("ref", data_url(screenshot())),
        response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
    )
    assert json.loads(response.json()["choices"][0]["message"]["content"]) == {
        "width": 640,
        "title": None,  # required but not measurable: present and empty, never invented
    }


def test_same_request_same_reply(base_url: str) -> None:
    parts = _image_parts("ref", data_url(screenshot()))
    first, second = (_post(base_url, parts).json() for _ in range(2))
    assert first == second


def test_bad_requests_name_the_field(base_url: str, request_log: Path) -> None:
    remote = _post(base_url, [{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}])
    assert remote.status_code == 400
    assert "messages[0].content[0].image_url.url" in remote.json()["error"]["message"]
    broken = _post(
        base_url, [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    )
    assert broken.status_code == 400 and "not a readable image" in broken.json()["error"]["message"]
    wrong = httpx.post(
        f"{base_url}/v1/chat/completions",
        json={"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert wrong.status_code == 400 and "'gpt-9'" in wrong.json()["error"]["message"]
    odd = _post(base_url, [{"type": "audio", "data": "x"}])
    assert odd.status_code == 400 and "'audio'" in odd.json()["error"]["message"]
    # Every request was logged before it was answered, failures included.
    assert len(request_log.read_text().splitlines()) == 4


def test_plain_text_comparison_names_measured_lines(base_url: str) -> None:
    parts = [
        {"type": "text", "text": "How does the draft differ from the reference?"},
        *_image_parts("reference", data_url(screenshot())),
        *_image_parts("draft", data_url(screenshot(body_colour="#2222aa"))),
    ]
    text = _post(base_url, parts).json()["choices"][0]["message"]["content"]
    assert f'Line "{BODY}": moved by (0, 0.0) px' in text
    assert f'Line "{TITLE}"' not in text  # drawn the same in both: nothing to report
