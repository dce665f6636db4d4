"""The config's JSON schema file, `workflow/schemas/config.schema.yaml`.

The schema is generated from the pydantic models (`experiment.config.config_schema`), the one
place a config key, its default, its constraints and its description are written. Snakemake
validates (and fills defaults) with this file; `load_config` validates with the same schema in
memory. `python -m veriharness.experiment.config_schema --write` regenerates the file after a
model changes, and a test fails while the committed file differs from what the models generate.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from veriharness._util import atomic
from veriharness.experiment.config import config_schema

__all__ = ["SCHEMA_FILE", "schema_yaml"]

SCHEMA_FILE = Path("workflow/schemas/config.schema.yaml")

_HEADER = (
    "# Generated from the pydantic models in src/veriharness/experiment/config.py; do not edit.\n"
    "# Regenerate: python -m veriharness.experiment.config_schema --write\n"
)


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
