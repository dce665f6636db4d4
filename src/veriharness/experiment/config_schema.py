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
from collections.abc import Callable
from pathlib import Path

import yaml

from veriharness._util import atomic
from veriharness.experiment.config import config_schema

__all__ = ["SCHEMA_FILE", "generated_file_main", "schema_yaml"]

SCHEMA_FILE = Path("workflow/schemas/config.schema.yaml")

_HEADER = (
    "# Generated from the pydantic models in src/veriharness/experiment/config.py; do not edit.\n"
    "# Regenerate: python -m veriharness.experiment.config_schema --write\n"
)


def schema_yaml() -> str:
    """The schema file's text, as committed."""
    text = yaml.safe_dump(config_schema(), sort_keys=False, width=100, allow_unicode=True)
    return _HEADER + text


def generated_file_main(
    doc: str, target: Path, text: Callable[[], str], argv: list[str] | None = None
) -> int:
    """The command of a file generated from the models: print its text, or `--write` it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {target}")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the project checkout")
    args = parser.parse_args(argv)
    if args.write:
        atomic.write_text(args.root / target, text())
    else:
        sys.stdout.write(text())
    return 0


def main(argv: list[str] | None = None) -> int:
    return generated_file_main(__doc__, SCHEMA_FILE, schema_yaml, argv)


if __name__ == "__main__":
    raise SystemExit(main())
