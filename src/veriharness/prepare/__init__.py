"""The prepare stage (the experiment check at workflow start; rules `hash_task_inputs`,
`hash_condition_inputs`, `prepare_run`; verbs `check-experiment`, `hash-files`, `prepare`).

Reads the experiment definition and, for the start check, earlier runs' `outcome.json` and
`run.json`; writes `experiment.json`, then each run's `run.json` (identity, provenance,
execution), `system_prompt.md` and `prompt/` snapshots before any session starts."""
