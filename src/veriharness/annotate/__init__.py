"""The annotate stage (rule `annotate_calls`, verb `annotate`): inferred capability tags.

Reads a run's `mllm_trace.jsonl` (and, for a model annotator, the images a call sent where they
are still available: the task's `reference.png` and the answer's files); writes the run's
`inferred_tags.json`, one annotation per CallMLLM call with the annotator's id, kind, version and
prompt hash. It never reads or changes the declared tags' records: declared and inferred tags
stay apart (D-0007), and changing the annotator reruns this stage only, never a session."""
