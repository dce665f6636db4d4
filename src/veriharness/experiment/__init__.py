"""The experiment definition: config, conditions, tasks, prompt modules, the capability taxonomy,
the model catalog, the CallMLLM tool contract, prices, the offline model's names, the loaded
definition and each cell's identity (`definition`), the run and experiment records, provenance.
`workflow` holds what the Snakefile and `workflow/rules/common.smk` import. The start check
(verb `check-experiment`) is the prepare stage's, since it reads earlier runs' folders.

Reads `config/`, `conditions/`, `tasks/`, `prompts/` and the model catalog; writes
`config.effective.json` (`workflow`)."""
