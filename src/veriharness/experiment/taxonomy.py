"""The versioned capability taxonomy that CallMLLM requests declare their tags from."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from veriharness._util.hashing import sha256_file
from veriharness._util.yaml_text import load_yaml

__all__ = ["Capability", "Family", "Taxonomy", "load_taxonomy", "DEFAULT_TAXONOMY_PATH"]

DEFAULT_TAXONOMY_PATH = Path("prompts/taxonomy/capabilities-v0.1.yaml")


class Capability(BaseModel):
    model_config = ConfigDict(frozen=True)
    code: str
    name: str
    definition: str


class Family(BaseModel):
    model_config = ConfigDict(frozen=True)
    code: str
    name: str
    definition: str
    capabilities: tuple[Capability, ...]


class Taxonomy(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    version: str
    families: tuple[Family, ...]
    escape: tuple[Capability, ...]
    sha256: str = ""

    @property
    def codes(self) -> tuple[str, ...]:
        """Every tag an agent may declare, in file order."""
        inner = tuple(c.code for f in self.families for c in f.capabilities)
        return inner + tuple(c.code for c in self.escape)

    def unknown(self, tags: list[str]) -> list[str]:
        valid = set(self.codes)
        return [tag for tag in tags if tag not in valid]


def load_taxonomy(path: Path = DEFAULT_TAXONOMY_PATH) -> Taxonomy:
    path = Path(path)
    data = load_yaml(path.read_text(encoding="utf-8"))
    return Taxonomy(**data, sha256=sha256_file(path))
