"""The tokens of a request and what they cost at a price of the config (`experiment.prices`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from veriharness.experiment.prices import TokenPrice

__all__ = ["TokenCounts", "cost_usd"]

_MILLION = 1_000_000


class TokenCounts(BaseModel):
    """Tokens of one request (or a sum of requests); None counts as 0."""

    model_config = ConfigDict(frozen=True)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @classmethod
    def of(
        cls,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
    ) -> TokenCounts:
        return cls(
            input_tokens=input_tokens or 0,
            output_tokens=output_tokens or 0,
            cache_read_tokens=cache_read_tokens or 0,
            cache_write_tokens=cache_write_tokens or 0,
        )


def cost_usd(price: TokenPrice, tokens: TokenCounts) -> float:
    """The cost of `tokens` at `price`, in USD."""
    return (
        tokens.input_tokens * price.input
        + tokens.output_tokens * price.output
        + tokens.cache_read_tokens * price.cache_read
        + tokens.cache_write_tokens * price.cache_write
    ) / _MILLION
