"""The config's price table: USD per million tokens of each model.

The config's ``prices`` section holds one price per agent model name (``models``) and one per
model catalog profile (``profiles``), in USD per million tokens: input, output, cache read and
cache write. Prices are recorded and never hashed: a new price list reruns nothing. The embedded
offline model costs 0 unless a price is given for it (tests give one to exercise the caps). What a
request costs at these prices is `spend.prices`' arithmetic.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TokenPrice", "PriceSettings", "FREE"]


class TokenPrice(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    input: float = Field(ge=0)
    """USD per million input tokens."""
    output: float = Field(ge=0)
    """USD per million output tokens."""
    cache_read: float = Field(ge=0)
    """USD per million input tokens read from the prompt cache."""
    cache_write: float = Field(ge=0)
    """USD per million input tokens written to the prompt cache."""


FREE = TokenPrice(input=0, output=0, cache_read=0, cache_write=0)


class PriceSettings(BaseModel):
    """The config's ``prices`` section."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    read_on: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    """The date (YYYY-MM-DD) the prices were read from the providers' price lists."""
    models: dict[str, TokenPrice] = Field(default_factory=dict)
    """Agent model name -> price."""
    profiles: dict[str, TokenPrice] = Field(default_factory=dict)
    """Model catalog profile name -> price."""

    def agent(self, model: str, offline: bool) -> TokenPrice | None:
        """The agent model's price; the offline model is free unless priced; None if unknown."""
        return self.models.get(model) or (FREE if offline else None)

    def profile(self, name: str, offline: bool) -> TokenPrice | None:
        return self.profiles.get(name) or (FREE if offline else None)
