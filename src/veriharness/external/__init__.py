"""The external answers stage (rule `import_external_answer`, verb `import-answer`): answers no
session wrote, scored as a condition of their own.

Reads a set of `external_answers` from the config (a folder with `<task>/answer.html` and
`assets/`, or the tasks' own `reference.html`); writes each task's run folder
`external:<name>/<task>/r1/` with `answer/` (a copy) and `outcome.json` (kind `external_answer`:
the set, the source, the sha256 of every file imported). Render, score and collect then treat the
folder like any run; it has no transcript and no CallMLLM calls."""
