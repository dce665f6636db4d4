"""The agent stage (rule `run_agent`, verb `run-agent`): one `claude -p` session per prepared run.

Reads `run.json` and `system_prompt.md`; makes a clean workspace outside any repository, runs the
session in the sandbox with the `mllm` server attached, and writes `transcript.jsonl`,
`outcome.json`, `claude_stderr.log` and `answer/` into the run folder."""
