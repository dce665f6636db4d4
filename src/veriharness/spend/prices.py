"""What the tokens of a request cost at a price of the config (`experiment.prices`)."""

from __future__ import annotations

from veriharness.experiment.prices import TokenPrice
from veriharness.runfolder.spend import TokenCounts

__all__ = ["cost_usd"]

_MILLION = 1_000_000


def cost_usd(price: TokenPrice, tokens: TokenCounts) -> float:
    """The cost of `tokens` at `price`, in USD."""
    return (
        tokens.input_tokens * price.input
        + tokens.output_tokens * price.output
        + tokens.cache_read_tokens * price.cache_read
        + tokens.cache_write_tokens * price.cache_write
    ) / _MILLION
