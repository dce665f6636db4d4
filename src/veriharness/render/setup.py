"""What a render needs to know before any browser: its setup error and the default load timeout.

Kept free of Playwright and pydantic: the pool's client (one `render` job handing its run to a
shared browser) and every parse of the workflow import it.
"""

from __future__ import annotations

__all__ = ["DEFAULT_LOAD_TIMEOUT_S", "RenderSetupError"]

DEFAULT_LOAD_TIMEOUT_S = 30.0


class RenderSetupError(RuntimeError):
    """The stage cannot run at all: no Chromium, or arguments it cannot use."""
