"""Prompt modules: extraction of the sent block, placeholder resolution, assembly.

A module source is ``<prompts_dir>/<module-id>.md``: YAML front matter (``id`` equal to the file
stem, ``slot`` B1/B2/B3, ``env`` for environment facts, or ``review`` for translations,
``version``, ``placeholder``: a name, a list of names, or null), then commentary for people and
exactly one fenced block, which is the only text ever sent. Three digests describe a module in a
run: the source file, the block as written (template) and the block with its placeholders
replaced (resolved). Only the declared placeholders are replaced, and any ``{{...}}`` left
afterwards is an error rather than text the agent would see.

Assembly joins the resolved blocks in slot order (B1, B2, env, then B3) with one blank line
between them; that text is what ``--append-system-prompt-file`` receives, so two conditions that
differ by one module differ by exactly that module's block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from veriharness._util.hashing import sha256_bytes, sha256_file
from veriharness._util.yaml_text import load_yaml

__all__ = [
    "PromptError",
    "ModuleHeader",
    "PromptModule",
    "ResolvedModule",
    "AssembledPrompt",
    "REFERENCE_IMAGE_PATH",
    "SEPARATOR",
    "extract_block",
    "load_module",
    "resolve_module",
    "assemble",
]

# The workspace holds the reference image under this name in every run.
REFERENCE_IMAGE_PATH = "reference.png"
SEPARATOR = "\n\n"

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
# Environment facts come before B3, so adding or removing B3 changes only the prompt's end.
_SLOT_ORDER = {"B1": 1, "B2": 2, "env": 3, "B3": 4}
_NAME = r"^[A-Z][A-Z0-9_]*$"


class PromptError(ValueError):
    """A prompt module cannot be read, resolved or assembled; the message names the file."""


class ModuleHeader(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    id: str
    slot: Literal["B1", "B2", "B3", "env", "review", "annotator"]
    version: str
    placeholder: (
        Annotated[str, StringConstraints(pattern=_NAME)]
        | tuple[Annotated[str, StringConstraints(pattern=_NAME)], ...]
        | None
    ) = None

    @property
    def placeholders(self) -> tuple[str, ...]:
        name = self.placeholder
        return () if name is None else (name,) if isinstance(name, str) else name


class PromptModule(BaseModel):
    """A module as written: header, the sent block, and digests of file and block."""

    model_config = ConfigDict(frozen=True)
    header: ModuleHeader
    path: str
    template: str
    source_sha256: str
    template_sha256: str

    @property
    def id(self) -> str:
        return self.header.id


class ResolvedModule(BaseModel):
    """A module's block with its placeholders replaced, as stored in ``prompt/<id>.md``. A module
    with one placeholder records its name and value; one with several, their tuple and a mapping
    of name to value."""

    model_config = ConfigDict(frozen=True)
    id: str
    slot: str
    version: str
    source_sha256: str
    template_sha256: str
    placeholder: str | tuple[str, ...] | None
    value: str | dict[str, str] | None
    text: str
    resolved_sha256: str


class AssembledPrompt(BaseModel):
    model_config = ConfigDict(frozen=True)
    modules: tuple[ResolvedModule, ...]
    text: str
    sha256: str


def _split_front_matter(text: str, path: Path) -> tuple[dict[str, Any], list[str]]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise PromptError(f"prompt module {path}: must start with a '---' front matter header")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise PromptError(f"prompt module {path}: front matter is not closed by '---'") from None
    header = load_yaml("\n".join(lines[1:end])) or {}
    if not isinstance(header, dict):
        raise PromptError(f"prompt module {path}: front matter must be a mapping")
    return header, lines[end + 1 :]


def extract_block(lines: list[str], path: Path | str) -> str:
    """The content of the only fenced block, without its fence lines."""
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group("fence")
        close = next(
            (
                j
                for j in range(i + 1, len(lines))
                if lines[j].strip().startswith(fence[0] * len(fence))
                and set(lines[j].strip()) == {fence[0]}
            ),
            None,
        )
        if close is None:
            raise PromptError(
                f"prompt module {path}: fenced block opened on line {i + 1} is never closed"
            )
        blocks.append("\n".join(lines[i + 1 : close]))
        i = close + 1
    if len(blocks) != 1:
        raise PromptError(
            f"prompt module {path}: expected exactly one fenced block, found {len(blocks)}"
        )
    return blocks[0]


def load_module(prompts_dir: Path | str, module_id: str) -> PromptModule:
    path = Path(prompts_dir) / f"{module_id}.md"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PromptError(f"prompt module {module_id!r}: no file {path}") from None
    header_data, body = _split_front_matter(raw.decode("utf-8"), path)
    try:
        header = ModuleHeader(**header_data)
    except ValidationError as error:
        raise PromptError(
            f"prompt module {path}: header {error.errors()[0]['loc']}: {error.errors()[0]['msg']}"
        ) from None
    if header.id != path.stem:
        raise PromptError(
            f"prompt module {path}: header id {header.id!r} differs from the file "
            f"stem {path.stem!r}"
        )
    template = extract_block(body, path)
    return PromptModule(
        header=header,
        path=str(path),
        template=template,
        source_sha256=sha256_file(path),
        template_sha256=sha256_bytes(template.encode("utf-8")),
    )


def resolve_module(module: PromptModule, values: Mapping[str, str]) -> ResolvedModule:
    """Replace the module's declared placeholders with their values, and nothing else. A value
    `values` cannot give (a lazy mapping may raise PromptError naming why) refuses the module."""
    text = module.template
    found: dict[str, str] = {}
    for name in module.header.placeholders:
        token = "{{" + name + "}}"
        if token not in text:
            raise PromptError(
                f"prompt module {module.path}: declared placeholder {token} does "
                "not occur in its fenced block"
            )
        if name not in values:
            raise PromptError(f"prompt module {module.path}: no value supplied for {token}")
        found[name] = values[name]
        text = text.replace(token, found[name])
    leftover = _PLACEHOLDER.findall(text)
    if leftover:
        raise PromptError(
            f"prompt module {module.path}: unresolved placeholder(s) "
            f"{sorted({'{{' + p + '}}' for p in leftover})} in its fenced block"
        )
    value: str | dict[str, str] | None = found or None
    if isinstance(module.header.placeholder, str):
        value = found[module.header.placeholder]
    return ResolvedModule(
        id=module.id,
        slot=module.header.slot,
        version=module.header.version,
        source_sha256=module.source_sha256,
        template_sha256=module.template_sha256,
        placeholder=module.header.placeholder,
        value=value,
        text=text,
        resolved_sha256=sha256_bytes(text.encode("utf-8")),
    )


def assemble(
    prompts_dir: Path | str, module_ids: tuple[str, ...] | list[str], values: Mapping[str, str]
) -> AssembledPrompt:
    """Load, resolve and join a condition's modules in slot order (B1, B2, env, B3)."""
    modules = [load_module(prompts_dir, m) for m in module_ids]
    for module in modules:
        if module.header.slot not in _SLOT_ORDER:
            raise PromptError(
                f"prompt module {module.path} is a {module.header.slot} file and "
                "is never part of a session prompt; list the normative module instead"
            )
    slots = [m.header.slot for m in modules]
    repeated = sorted({s for s in slots if slots.count(s) > 1})
    if repeated:
        raise PromptError(f"modules {list(module_ids)} fill slot(s) {repeated} more than once")
    ordered = sorted(modules, key=lambda m: _SLOT_ORDER[m.header.slot])
    resolved = tuple(resolve_module(m, values) for m in ordered)
    text = SEPARATOR.join(r.text for r in resolved) + "\n"
    return AssembledPrompt(modules=resolved, text=text, sha256=sha256_bytes(text.encode("utf-8")))
