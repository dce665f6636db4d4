"""The CallMLLM request: what the agent sends to ``mcp__mllm__call``, and what a reply means.

The request is validated by these models and nothing else; the MCP tool advertises their JSON
Schema (with the taxonomy's codes filled in as an enum) so the agent sees one description.
Capability tags are checked against the taxonomy passed in the validation context under
``"taxonomy_codes"``; they are metadata only and never reach the provider payload.

A refusal always names the field and the value it got, so the agent can correct the call.
Replies are judged against the output contract here too: text is taken as is; JSON must parse,
and when a schema is given, validate. A failing reply is not an error: the agent gets the raw
text and a short diagnostic (D-0011), and nothing is repaired or retried.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NamedTuple

from jsonschema import SchemaError, validators
from jsonschema.exceptions import best_match
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from veriharness._util.hashing import sha256_json

__all__ = [
    "RequestRefused",
    "Region",
    "TextInput",
    "ImageInput",
    "TextOutput",
    "JsonOutput",
    "CallRequest",
    "ParseStatus",
    "TOOL_DESCRIPTION",
    "tool_contract_sha256",
    "ReplyCheck",
    "check_reply",
    "describe_validation_error",
    "request_json_schema",
]

ParseStatus = Literal["not_applicable", "ok", "invalid_json", "schema_invalid", "check_failed"]
_SHOWN_VALUE_CHARS = 120
_SHOWN_DIAGNOSTIC_CHARS = 300
_BRANCHES = ("text", "image", "json")


TOOL_DESCRIPTION = (
    "CallMLLM: send one instruction with labelled text and image inputs to a fresh multimodal "
    "model context and get its reply. Every request carries at least one image input; a request "
    "with text inputs only is refused before any model call. Images are workspace files, "
    "attached whole or cropped to an optional pixel region. The output is text, or JSON "
    "(optionally validated against a schema; a reply that does not parse or validate comes "
    "back as raw text with a diagnostic). "
    "One call is one model request; nothing is retried."
)


class RequestRefused(ValueError):
    """A request the server refuses before any model call; the message is for the agent."""


def _json_integer(value: Any) -> Any:
    """JSON Schema counts a number with a zero fractional part (5.0) as an integer: take it as
    one. Anything else goes on to the strict check, which refuses 0.5, "5" and true."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_JsonInteger = Annotated[int, BeforeValidator(_json_integer)]


class Region(BaseModel):
    """A rectangle in pixels of the original image, measured from its top-left corner."""

    model_config = ConfigDict(extra="forbid")
    x: _JsonInteger = Field(
        ge=0, strict=True, description="Left edge, pixels from the image's left."
    )
    y: _JsonInteger = Field(ge=0, strict=True, description="Top edge, pixels from the image's top.")
    width: _JsonInteger = Field(gt=0, strict=True, description="Width in pixels (> 0).")
    height: _JsonInteger = Field(gt=0, strict=True, description="Height in pixels (> 0).")


class TextInput(BaseModel):
    """Auxiliary text for the model, e.g. markup or a list to match against."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["text"]
    label: str = Field(min_length=1, description="Unique name the instruction can refer to.")
    content: str = Field(description="The text itself.")


class ImageInput(BaseModel):
    """An image file in the workspace, attached as image content (cropped if a region is given)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["image"]
    label: str = Field(min_length=1, description="Unique name the instruction can refer to.")
    path: str = Field(min_length=1, description="Path relative to the workspace (or inside it).")
    region: Region | None = Field(
        default=None, description="Optional crop; omit to attach the whole image."
    )


class TextOutput(BaseModel):
    """Free text reply."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["text"]

    @model_validator(mode="before")
    @classmethod
    def _no_schema(cls, data: Any) -> Any:
        if isinstance(data, dict) and "schema" in data:
            raise ValueError("a text output takes no schema; use kind 'json' to give a schema")
        return data


class JsonOutput(BaseModel):
    """JSON reply; with a schema, the reply must also validate against it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    kind: Literal["json"]
    json_schema: dict[str, Any] | None = Field(
        default=None, alias="schema", description="Optional JSON Schema the reply must satisfy."
    )

    @field_validator("json_schema")
    @classmethod
    def _schema_is_valid(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            try:
                validators.validator_for(schema).check_schema(schema)
            except SchemaError as error:
                where = "/".join(str(p) for p in error.path) or "(root)"
                raise ValueError(f"not a valid JSON Schema at {where}: {error.message}") from None
            _check_refs(schema, schema, "")
        return schema


def _check_refs(node: Any, root: dict[str, Any], where: str) -> None:
    """Every `$ref` must point inside the schema (`#`, `#/json/pointer` or `#anchor`), so the
    reply can be checked after the model has been paid for; nothing is ever fetched."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            _check_refs(item, root, f"{where}/{index}")
        return
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and not _resolves(ref, root):
        raise ValueError(
            f"not a usable JSON Schema at {where or '(root)'}: $ref {ref!r} must point inside "
            "the schema ('#/$defs/...' or '#anchor') and find something there"
        )
    for key, value in node.items():
        _check_refs(value, root, f"{where}/{key}")


def _resolves(ref: str, root: dict[str, Any]) -> bool:
    if not ref.startswith("#"):
        return False
    fragment = ref[1:]
    if fragment and not fragment.startswith("/"):
        return fragment in _anchors(root)
    node: Any = root
    for part in filter(None, fragment.split("/")):
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return False
    return True


def _anchors(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("$anchor"), str):
            found.add(node["$anchor"])
        for value in node.values():
            found |= _anchors(value)
    elif isinstance(node, list):
        for item in node:
            found |= _anchors(item)
    return found


InputItem = Annotated[TextInput | ImageInput, Field(discriminator="kind")]
OutputContract = Annotated[TextOutput | JsonOutput, Field(discriminator="kind")]


# D-0002 in the input schema: `contains` (JSON Schema draft 6 on, 2020-12 included) holds when at
# least one item matches, i.e. minContains 1.
_AN_IMAGE: dict[str, Any] = {
    "type": "object",
    "properties": {"kind": {"const": "image"}},
    "required": ["kind"],
}


class CallRequest(BaseModel):
    """One CallMLLM request: a complete instruction, labelled inputs, tags and output contract."""

    model_config = ConfigDict(extra="forbid")
    instruction: str = Field(
        min_length=1, description="The complete task for the model: what to do and what to return."
    )
    inputs: list[InputItem] = Field(
        min_length=1,
        description="Labelled text and image inputs; at least one must be an image. Each label "
        "must be unique (JSON Schema cannot state this rule; the server checks it).",
        json_schema_extra={"contains": _AN_IMAGE},
    )
    capability_tags: list[str] = Field(
        min_length=1,
        description="Taxonomy codes describing this call (>= 1, no repeats, order ignored). "
        "Recorded for analysis only; they do not change the request.",
        json_schema_extra={"uniqueItems": True},
    )
    output: OutputContract = Field(
        description="Reply format: {kind: text} or {kind: json, schema?}."
    )
    model_profile: str | None = Field(
        default=None, description="Catalog profile name; omit for 'default'."
    )

    @field_validator("instruction")
    @classmethod
    def _instruction_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("instruction is blank")
        return value

    @field_validator("capability_tags")
    @classmethod
    def _tags_known_and_distinct(cls, tags: list[str], info: ValidationInfo) -> list[str]:
        repeated = sorted({t for t in tags if tags.count(t) > 1})
        if repeated:
            raise ValueError(f"tags repeated: {repeated}; each tag is given once (uniqueItems)")
        codes = (info.context or {}).get("taxonomy_codes")
        if codes is not None:
            unknown = [t for t in tags if t not in codes]
            if unknown:
                raise ValueError(f"unknown tags {unknown}; valid codes: {', '.join(codes)}")
        return tags

    @field_validator("inputs")
    @classmethod
    def _labels_unique(cls, inputs: list[TextInput | ImageInput]) -> list[TextInput | ImageInput]:
        labels = [item.label for item in inputs]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(
                f"input labels must be unique, repeated: {repeated}; the instruction names each "
                "input by its label (a rule JSON Schema cannot state, so the server checks it)"
            )
        if not any(isinstance(item, ImageInput) for item in inputs):
            # D-0002: CallMLLM is for multimodal understanding, not a plain text model.
            kinds = [item.kind for item in inputs]
            raise ValueError(
                f"at least one input must be an image (kind 'image'); got only kinds {kinds}"
            )
        return inputs


def request_json_schema(taxonomy_codes: tuple[str, ...]) -> dict[str, Any]:
    """The tool's input schema: the request model's schema with the tag codes as an enum."""
    schema = CallRequest.model_json_schema(by_alias=True)
    schema["properties"]["capability_tags"]["items"]["enum"] = list(taxonomy_codes)
    return schema


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > _SHOWN_VALUE_CHARS:
        return text[:_SHOWN_VALUE_CHARS] + "…"
    return text


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    previous: int | str | None = None
    for part in loc:
        # pydantic puts the discriminator's branch name after the union's own position
        branch = part in _BRANCHES and (isinstance(previous, int) or previous == "output")
        previous = part
        if branch:
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(request)"


def describe_validation_error(error: ValidationError) -> str:
    """One line per problem: the field's path, the value it got, and what is wrong."""
    lines = []
    for item in error.errors(include_url=False):
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{_location(item['loc'])} = {_shown(item['input'])}: {message}")
    return "invalid CallMLLM request:\n" + "\n".join(f"- {line}" for line in lines)


class ReplyCheck(NamedTuple):
    parse_status: ParseStatus
    diagnostic: str | None


def _cap(text: str) -> str:
    return text if len(text) <= _SHOWN_DIAGNOSTIC_CHARS else text[:_SHOWN_DIAGNOSTIC_CHARS] + "…"


def check_reply(output: TextOutput | JsonOutput, text: str) -> ReplyCheck:
    """Judge a reply against the output contract, without changing it."""
    if isinstance(output, TextOutput):
        return ReplyCheck("not_applicable", None)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return ReplyCheck(
            "invalid_json",
            f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno} "
            f"(character {error.pos})",
        )
    if output.json_schema is None:
        return ReplyCheck("ok", None)
    validator = validators.validator_for(output.json_schema)(output.json_schema)
    errors = list(validator.iter_errors(value))
    if not errors:
        return ReplyCheck("ok", None)
    worst = best_match(errors)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return ReplyCheck(
        "schema_invalid", _cap(f"schema violation at {worst.json_path}: {worst.message}") + more
    )


def tool_contract_sha256(taxonomy_codes: tuple[str, ...]) -> str:
    """Digest of what the agent is shown of CallMLLM: the tool's description and its input
    schema. Part of every run's identity, so a change to either reruns the sessions it affects."""
    schema = request_json_schema(taxonomy_codes)
    return sha256_json({"description": TOOL_DESCRIPTION, "input_schema": schema})
