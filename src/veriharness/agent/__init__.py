"""The agent stage (rule `run_agent`, verb `run-agent`): one `claude -p` session per prepared run.

Reads `run.json` and `system_prompt.md`; makes a clean workspace outside any repository, starts
the model proxy and the `mllm` server outside the sandbox, runs the session in the sandbox, and
writes `transcript.jsonl`, `agent_requests.jsonl`, `outcome.json`, `claude_stderr.log`,
`mllm_server.log` and `answer/` into the run folder (the server writes `mllm_trace.jsonl`)."""
