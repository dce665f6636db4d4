"""The experiment definition: config, conditions, tasks, prompt modules, the capability taxonomy,
the run and experiment records, provenance, and the start-of-experiment check (verb
`check-experiment`). `workflow` holds what the Snakefile and `workflow/rules/common.smk` import.

Reads `config/`, `conditions/`, `tasks/`, `prompts/` and the model catalog; writes
`experiment.json` and `config.effective.json`."""
