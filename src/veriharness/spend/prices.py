"""What the tokens of a request cost at a price of the config (`experiment.prices`), and the
conservative estimate the caps count for a request whose reply reported no usage (P-36)."""

from __future__ import annotations

from veriharness.experiment.prices import TokenPrice
from veriharness.runfolder.spend import TokenCounts

__all__ = ["BYTES_PER_INPUT_TOKEN", "NO_USAGE", "cost_usd", "estimate_tokens", "unpriced_reason"]

_MILLION = 1_000_000
BYTES_PER_INPUT_TOKEN = 4
NO_USAGE = "the provider reported no usage"


def cost_usd(price: TokenPrice, tokens: TokenCounts) -> float:
    """The cost of `tokens` at `price`, in USD."""
    return (
        tokens.input_tokens * price.input
        + tokens.output_tokens * price.output
        + tokens.cache_read_tokens * price.cache_read
        + tokens.cache_write_tokens * price.cache_write
    ) / _MILLION


def unpriced_reason(input_tokens: int | None, output_tokens: int | None) -> str | None:
    """Why a reply's tokens cannot be priced (None when they can): the provider reported no
    usage, or only part of it. A missing count is never read as 0 tokens."""
    if input_tokens is None and output_tokens is None:
        return NO_USAGE
    if input_tokens is None:
        return "the provider reported no input tokens"
    if output_tokens is None:
        return "the provider reported no output tokens"
    return None


def estimate_tokens(request_bytes: int, max_output_tokens: int | None) -> TokenCounts:
    """The tokens a request without reported usage is charged to the caps at (P-36): its
    output at the limit the request set (the profile's ``max_output_tokens`` for CallMLLM, the
    request's ``max_tokens`` for the agent), its input at one token per 4 bytes of the request
    body, rounded up (base64 images and JSON overhead included, so more than a tokenizer would
    count), all at the uncached input price."""
    return TokenCounts(
        input_tokens=-(-max(request_bytes, 0) // BYTES_PER_INPUT_TOKEN),
        output_tokens=max(max_output_tokens or 0, 0),
    )
