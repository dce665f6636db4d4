"""The one way VeriHarness reads YAML: safe loading, with libyaml's parser when PyYAML has it.

Every verb reads the config, tasks, conditions and prompt headers, and `check-experiment` reads
each task once per cell, so the parser is paid in every process: libyaml's is about six times
faster than PyYAML's own. It says less when a document is broken (no line excerpt, no name for a
stray tab), so a document it refuses is read again by PyYAML's parser, whose error is raised.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["load_yaml"]

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """The document in `text`, as `yaml.safe_load` reads it; raises `yaml.YAMLError`."""
    try:
        return yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        return yaml.safe_load(text)
