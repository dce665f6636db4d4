"""The `mllm` MCP server (CallMLLM): provider backends, images, trace. The tool contract it serves
(`experiment.tool_contract`) and its model catalog (`experiment.catalog`) are inputs of the
experiment definition.

The agent stage starts the server outside the session's sandbox, over streamable HTTP on a
loopback port, and tells the session only the address and a per-session token."""

# The per-session token the HTTP transport requires, handed to the server in its environment.
MLLM_TOKEN_ENV = "VERIHARNESS_MLLM_TOKEN"
# Where the streamable HTTP transport answers.
MLLM_HTTP_PATH = "/mcp"
