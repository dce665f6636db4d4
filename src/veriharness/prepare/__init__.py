"""The prepare stage (rules `hash_task_inputs`, `hash_condition_inputs`, `prepare_run`; verbs
`hash-files`, `prepare`).

Reads the experiment definition; writes each run's `run.json` (identity, provenance, execution),
`system_prompt.md` and `prompt/` snapshots before any session starts."""
