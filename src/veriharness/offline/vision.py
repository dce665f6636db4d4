"""The offline vision model behind CallMLLM's `offline` profile (OpenAI chat completions shape).

A request's messages hold text parts and `image_url` parts with `data:` URLs (remote URLs are
refused: the offline model never fetches anything). Each image takes its label from the text
part just before it. One image is described (`pixels.describe`); with two or more, the one
labelled as the reference (else the first) is compared with the next (`pixels.compare`).

The reply is JSON when the request asks for it (`response_format`, or text that mentions JSON
or carries a schema), shaped to the schema as far as the measurements go: properties the
analysis has are filled, required ones it lacks are null; without a schema the whole analysis
is returned. Otherwise the reply is a short plain-text account. Token usage is approximate.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
from typing import Any, NamedTuple

from PIL import Image, UnidentifiedImageError

from veriharness._util.hashing import sha256_json
from veriharness.experiment.offline_model import OFFLINE_VISION_MODEL
from veriharness.offline.pixel_facts import compare, describe
from veriharness.offline.sse import approx_tokens

__all__ = [
    "VisionRequestError",
    "LabelledImage",
    "parse_request",
    "shape_to_schema",
    "analyse",
    "chat_completion",
]

_DATA_URL = re.compile(r"^data:(image/[\w.+-]+);base64,(.*)$", re.DOTALL)
# CallMLLM's backends introduce each input as `Input "<label>" (image):`; a bare `label: x`
# is accepted too, for hand-written requests.
_LABELS = (
    re.compile(r"Input \"([^\"]{1,80})\""),
    re.compile(r"label\W{0,3}[\"'`]?([^\s\"'`,;:)]+)", re.IGNORECASE),
)
_DRAFT_WORDS = ("draft", "render", "candidate", "answer", "attempt")


class VisionRequestError(ValueError):
    """The chat request is malformed or asks for something the offline model does not do."""


class LabelledImage(NamedTuple):
    label: str
    image: Image.Image


class ParsedRequest(NamedTuple):
    text: str
    images: list[LabelledImage]
    wants_json: bool
    schema: dict[str, Any] | None


def _decode(url: Any, where: str) -> Image.Image:
    if not isinstance(url, str):
        raise VisionRequestError(f"{where}.image_url.url must be a string, got {url!r}"[:200])
    match = _DATA_URL.match(url)
    if match is None:
        raise VisionRequestError(
            f"{where}.image_url.url must be a base64 data: URL of an image, got {url[:60]!r}"
        )
    try:
        image = Image.open(io.BytesIO(base64.b64decode(match.group(2), validate=True)))
        image.load()
    except (binascii.Error, UnidentifiedImageError, OSError) as error:
        raise VisionRequestError(
            f"{where}: the data URL is not a readable image ({error})"
        ) from None
    return image.convert("RGB")


def _label_from(text: str, index: int) -> str:
    for pattern in _LABELS:
        found = pattern.findall(text)
        if found:
            return str(found[-1])
    stripped = text.strip().strip(":").strip()
    return stripped if 0 < len(stripped) <= 60 else f"image-{index + 1}"


def _schema_in(text: str) -> dict[str, Any] | None:
    """The largest JSON object in the text that looks like a JSON Schema."""
    decoder = json.JSONDecoder()
    best: dict[str, Any] | None = None
    for start in [m.start() for m in re.finditer(r"\{", text)]:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and ("properties" in value or "type" in value):
            if best is None or len(json.dumps(value)) > len(json.dumps(best)):
                best = value
    return best


def _response_format(body: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    form = body.get("response_format")
    if form is None:
        return False, None
    kind = form.get("type") if isinstance(form, dict) else None
    if kind == "text":
        return False, None
    if kind == "json_object":
        return True, None
    if kind == "json_schema":
        spec = form.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise VisionRequestError("response_format.json_schema.schema must be an object")
        return True, schema
    raise VisionRequestError(
        f"response_format.type must be text, json_object or json_schema, got {kind!r}"
    )


def parse_request(body: dict[str, Any]) -> ParsedRequest:
    """Text, labelled images and the requested output form of a chat completions body."""
    model = body.get("model")
    if model != OFFLINE_VISION_MODEL:
        raise VisionRequestError(f"model must be {OFFLINE_VISION_MODEL!r}, got {model!r}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise VisionRequestError("messages must be a non-empty list")
    texts: list[str] = []
    images: list[LabelledImage] = []
    for m_index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(parts, list):
            raise VisionRequestError(f"messages[{m_index}].content must be a string or a list")
        for p_index, part in enumerate(parts):
            where = f"messages[{m_index}].content[{p_index}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                texts.append(str(part.get("text", "")))
            elif kind == "image_url":
                url = (part.get("image_url") or {}).get("url")
                label = _label_from(texts[-1] if texts else "", len(images))
                images.append(LabelledImage(label, _decode(url, where)))
            else:
                raise VisionRequestError(f"{where}.type must be text or image_url, got {kind!r}")
    text = "\n".join(texts)
    wants_json, schema = _response_format(body)
    if not wants_json:
        schema = _schema_in(text)
        wants_json = schema is not None or "json" in text.lower()
    elif schema is None:
        schema = _schema_in(text)
    return ParsedRequest(text, images, wants_json, schema)


def _is_draft(label: str) -> bool:
    return any(word in label.lower() for word in _DRAFT_WORDS)


def analyse(images: list[LabelledImage]) -> dict[str, Any]:
    """The measurements for one image, or the comparison of the reference with the next one."""
    if not images:
        return {"note": "no image was attached, so there is nothing to measure"}
    if len(images) == 1:
        return dict(describe(images[0].image), label=images[0].label)
    ordered = sorted(images, key=lambda item: _is_draft(item.label))  # stable: reference first
    reference, other = ordered[0], ordered[1]
    result = compare(reference.image, other.image)
    result["reference_label"], result["other_label"] = reference.label, other.label
    if len(images) > 2:
        result["not_compared"] = [item.label for item in ordered[2:]]
    return result


def _empty(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "null" in kinds:
        return None
    return [] if "array" in kinds else None


def shape_to_schema(value: Any, schema: Any) -> Any:
    """`value` restricted to what `schema` describes; required fields it lacks become empty."""
    if not isinstance(schema, dict):
        return value
    props = schema.get("properties")
    if isinstance(props, dict) and props:
        if not isinstance(value, dict):
            return _empty(schema) if value is None else value
        shaped = {
            key: shape_to_schema(value[key], sub) for key, sub in props.items() if key in value
        }
        for key in schema.get("required", []):
            if key not in shaped:
                shaped[key] = _empty(props.get(key, {}))
        return shaped
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        return [shape_to_schema(item, items) for item in value]
    if schema.get("type") == "integer" and isinstance(value, float):
        return int(round(value))
    return value


def _as_text(analysis: dict[str, Any]) -> str:
    if "mean_abs_diff" in analysis:
        lines = [
            f"Compared '{analysis['other_label']}' with '{analysis['reference_label']}': mean "
            f"absolute difference {analysis['mean_abs_diff']}, {len(analysis['differing_regions'])}"
            " differing region(s).",
        ]
        lines += [
            f'Missing: "{item["text"]}" at {item["box"]}' for item in analysis["missing_text"]
        ]
        lines += [f'Extra: "{item["text"]}"' for item in analysis["extra_text"]]
        lines += [
            f'Colour of "{s["text"]}": {s["draft_colour"]} instead of {s["reference_colour"]}'
            for s in analysis["colour_shifts"]
        ]
        lines += [
            f'Line "{o["text"]}": moved by ({o["dx"]}, {o["dy"]}) px, width ratio '
            f"{o['width_ratio']}, colour {o['other_colour']} vs {o['reference_colour']}"
            for o in analysis.get("line_offsets", [])
            if o["dx"] or o["dy"] or o["width_ratio"] != 1.0 or o["colour_difference"]
        ]
        return "\n".join(lines)
    if "text_lines" not in analysis:
        return str(analysis.get("note", ""))
    lines = [
        f"Image '{analysis['label']}': {analysis['width']}x{analysis['height']} px, background "
        f"{analysis['background']}, {len(analysis['image_regions'])} non-text region(s)."
    ]
    lines += [
        f'"{item["text"]}" at {item["box"]}, about {item["font_size_px"]} px, {item["colour"]}'
        for item in analysis["text_lines"]
    ]
    return "\n".join(lines)


def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    """The full chat completions response for one request body."""
    request = parse_request(body)
    analysis = analyse(request.images)
    if request.wants_json:
        shaped = analysis if request.schema is None else shape_to_schema(analysis, request.schema)
        content = json.dumps(shaped, ensure_ascii=False)
    else:
        content = _as_text(analysis)
    prompt_tokens = approx_tokens(request.text) + sum(
        max(1, item.image.width * item.image.height // 750) for item in request.images
    )
    completion_tokens = approx_tokens(content)
    return {
        "id": "chatcmpl-offline-" + sha256_json(body)[7:31],
        "object": "chat.completion",
        "created": 0,
        "model": OFFLINE_VISION_MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
