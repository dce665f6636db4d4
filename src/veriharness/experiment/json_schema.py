"""A pydantic model's JSON schema as a plain reader needs it: self-contained, every default set.

Pydantic's schema has `$ref`s, titles and `anyOf [X, null]` for optional keys; Snakemake's
validator and the workflow's `--config` coercion want each key's type in one place, inline, with
its default. `plain_schema` gives that, for any model, so the config models' module can build its
schema without a module of its own importing them back.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["plain_schema"]

# What a JSON schema reader needs; pydantic's titles and the like are left out.
_KEPT = (
    "description",
    "type",
    "enum",
    "const",
    "pattern",
    "minimum",
    "minLength",
    "minItems",
    "uniqueItems",
    "items",
    "properties",
    "required",
    "additionalProperties",
    "anyOf",
    "default",
)


def _clean(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_clean(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        return _clean({**target, **{k: v for k, v in node.items() if k != "$ref"}}, defs)
    out = {key: _clean(node[key], defs) for key in _KEPT if key in node}
    if isinstance(out.get("description"), str):
        out["description"] = " ".join(out["description"].split())
    if "properties" in node:
        out["properties"] = {k: _clean(v, defs) for k, v in node["properties"].items()}
        out.setdefault("additionalProperties", False)
    return _nullable(out)


def _set_defaults(node: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Every key's default as the models resolve it. A nested settings object defaults to `{}`,
    which validation then fills key by key, so a config may state one key of it."""
    for key, spec in node.get("properties", {}).items():
        if key not in defaults:
            continue
        if spec.get("type") == "object":
            spec["default"] = {}
            _set_defaults(spec, defaults[key])
        else:
            spec["default"] = defaults[key]


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [X, {type: null}]` as X with `type: [X's type, "null"]`: one place to read a
    key's type (the workflow's `--config` coercion reads `type`)."""
    options = node.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and {"type": "null"} in options):
        return node
    (other,) = [o for o in options if o != {"type": "null"}]
    if not isinstance(other.get("type"), str):
        return node
    merged = {**other, **{k: v for k, v in node.items() if k != "anyOf"}}
    merged["type"] = [other["type"], "null"]
    if "properties" in merged:
        # An object that may be null (analysis.monitor) states no defaults of its keys:
        # Snakemake's validation would set them on the null. The models fill them in.
        merged["properties"] = {
            key: {k: v for k, v in spec.items() if k != "default"}
            for key, spec in merged["properties"].items()
        }
    return merged


def plain_schema(model: type[BaseModel], defaults: dict[str, Any]) -> dict[str, Any]:
    """`model`'s validation schema without `$ref`, titles or nullable `anyOf`, with `defaults`
    (the model's resolved values) as every key's default."""
    raw = model.model_json_schema(mode="validation")
    body: dict[str, Any] = _clean(raw, raw.get("$defs", {}))
    _set_defaults(body, defaults)
    return body
