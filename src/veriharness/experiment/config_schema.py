"""The config's JSON schema, generated from the pydantic models in `experiment.config`.

The models are the one place a config key, its default, its constraints and its description are
written. Snakemake validates (and fills defaults) with the generated file
`workflow/schemas/config.schema.yaml`; `load_config` validates with the same schema in memory.
`python -m veriharness.experiment.config_schema --write` regenerates the file after a model
changes, and a test fails while the committed file differs from what the models generate.
"""

from __future__ import annotations

import argparse
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from veriharness._util import atomic
from veriharness.experiment.config import ExperimentConfig
from veriharness.experiment.record import EXPERIMENT_RECORD

__all__ = ["SCHEMA_FILE", "config_schema", "schema_yaml"]

SCHEMA_FILE = Path("workflow/schemas/config.schema.yaml")

_HEADER = (
    "# Generated from the pydantic models in src/veriharness/experiment/config.py; do not edit.\n"
    "# Regenerate: python -m veriharness.experiment.config_schema --write\n"
)
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


@cache
def config_schema() -> dict[str, Any]:
    """The experiment config's JSON schema (draft 2020-12), self-contained (no `$ref`)."""
    raw = ExperimentConfig.model_json_schema(mode="validation")
    body = _clean(raw, raw.get("$defs", {}))
    _set_defaults(body, ExperimentConfig().resolved())
    body["properties"] = {
        "kind": {
            "description": "Present only when an experiment record (experiment.json) is given "
            "as the config.",
            "type": "string",
            "enum": [EXPERIMENT_RECORD],
        },
        **body["properties"],
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "VeriHarness experiment configuration",
        **body,
    }


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
    return merged


def schema_yaml() -> str:
    """The schema file's text, as committed."""
    text = yaml.safe_dump(config_schema(), sort_keys=False, width=100, allow_unicode=True)
    return _HEADER + text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {SCHEMA_FILE}")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the project checkout")
    args = parser.parse_args(argv)
    if args.write:
        atomic.write_text(args.root / SCHEMA_FILE, schema_yaml())
    else:
        sys.stdout.write(schema_yaml())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
