"""The model profile catalog: public names the agent may choose, private provider settings.

A catalog is a YAML file the user supplies. Each profile has a public part (``name``,
``description``), which is rendered into B1's ``{{MODEL_PROFILE_CATALOG}}``, and a private
``provider`` part (API style, base URL, model id, the *name* of the key's environment variable,
timeouts), which is only ever hashed into ``resolved_model_config_hash``. ``base_url`` may refer
to environment variables as ``${NAME}``; they are expanded at call time, and the hash covers the
text as written, so a run's identity does not depend on a port chosen at run time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from veriharness._util.hashing import sha256_file, sha256_json
from veriharness._util.yaml_text import load_yaml

__all__ = [
    "OFFLINE_URL_ENV",
    "CatalogError",
    "expand_env_refs",
    "ProviderSettings",
    "ModelProfile",
    "ModelCatalog",
    "load_catalog",
]

# The embedded offline model's address, set by whoever starts it (see veriharness.offline).
OFFLINE_URL_ENV = "VERIHARNESS_OFFLINE_URL"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class CatalogError(ValueError):
    """The catalog, a profile name or a profile's environment is not usable."""


def expand_env_refs(text: str, field: str) -> str:
    """Replace each ``${NAME}`` in `text` by that environment variable; unset is an error."""

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        value = os.environ.get(name)
        if not value:
            raise CatalogError(f"{field} refers to environment variable {name}, which is not set")
        return value

    return _ENV_REF.sub(expand, text)


class ProviderSettings(BaseModel):
    """Private: hashed, never written in clear to prompts, traces, records or tables."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    api_style: Literal["openai-chat", "anthropic-messages"]
    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    connect_timeout_seconds: float = Field(default=10.0, gt=0)
    max_output_tokens: int = Field(default=4096, gt=0)
    native_json: bool = False

    def resolved_base_url(self) -> str:
        return expand_env_refs(self.base_url, "base_url").rstrip("/")

    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise CatalogError(
                f"the API key variable {self.api_key_env} named by this profile is not set"
            )
        return value

    @property
    def offline(self) -> bool:
        return f"${{{OFFLINE_URL_ENV}}}" in self.base_url


class ModelProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    description: str = Field(min_length=1)
    provider: ProviderSettings


class ModelCatalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    profiles: tuple[ModelProfile, ...]
    source_sha256: str = ""

    @field_validator("profiles")
    @classmethod
    def _names_unique_and_default_present(
        cls, profiles: tuple[ModelProfile, ...]
    ) -> tuple[ModelProfile, ...]:
        names = [p.name for p in profiles]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"profile names must be unique, repeated: {duplicates}")
        if "default" not in names:
            raise ValueError(f"a profile named 'default' is required, found only {names}")
        return profiles

    @model_validator(mode="after")
    def _no_secret_in_clear(self) -> ModelCatalog:
        for profile in self.profiles:
            if profile.provider.api_key_env and not re.fullmatch(
                r"[A-Za-z_][A-Za-z0-9_]*", profile.provider.api_key_env
            ):
                raise ValueError(
                    f"profile {profile.name!r}: api_key_env must name an environment variable, "
                    "not hold a key"
                )
        return self

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def resolve(self, requested: str | None) -> ModelProfile:
        """The profile for a request; omitted means ``default``, unknown is an error."""
        name = "default" if requested is None else requested
        for profile in self.profiles:
            if profile.name == name:
                return profile
        raise CatalogError(
            f"model_profile {name!r} is not in the catalog; available: {', '.join(self.names)}"
        )

    def public_part(self) -> list[dict[str, str]]:
        return [{"name": p.name, "description": p.description} for p in self.profiles]

    def public_text(self) -> str:
        """The text that replaces ``{{MODEL_PROFILE_CATALOG}}`` in B1."""
        return "\n".join(f"- `{p.name}`: {p.description}" for p in self.profiles)

    def private_hash(self) -> str:
        return sha256_json({p.name: p.provider.model_dump() for p in self.profiles})

    def profile_config_hash(self, profile: ModelProfile) -> str:
        """``resolved_model_config_hash`` of one profile."""
        return sha256_json({"name": profile.name, "provider": profile.provider.model_dump()})

    @property
    def offline(self) -> bool:
        return all(p.provider.offline for p in self.profiles)

    def secrets(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The values in `environ` of the profiles' key variables and of the variables in their
        base URLs (a private endpoint's address is a secret too)."""
        return {name: environ[name] for name in self.environment_names() if name in environ}

    def environment_names(self) -> tuple[str, ...]:
        """The environment variables the profiles read: key variables and `${VAR}` in URLs."""
        names = {p.provider.api_key_env for p in self.profiles if p.provider.api_key_env}
        for profile in self.profiles:
            names.update(_ENV_REF.findall(profile.provider.base_url))
        return tuple(sorted(names))


def load_catalog(path: str | Path) -> ModelCatalog:
    path = Path(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"model catalog file not found: {path}") from None
    if not isinstance(data, dict):
        raise CatalogError(f"model catalog {path} must be a mapping with a 'profiles' list")
    try:
        return ModelCatalog(**data, source_sha256=sha256_file(path))
    except ValueError as error:
        raise CatalogError(f"model catalog {path}: {error}") from None
