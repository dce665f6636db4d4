"""VeriHarness: run Claude Code on image-to-code tasks with a delegated multimodal model.

One experiment is a matrix of tasks x conditions x replicates. Every cell is one `claude -p`
session with the `mllm` MCP server (tool `mcp__mllm__call`, concept `CallMLLM`) attached; the
pipeline then renders, audits and scores each `answer.html` and collects every trace into tables.
"""

__version__ = "0.2.0"

__all__ = ["__version__"]
