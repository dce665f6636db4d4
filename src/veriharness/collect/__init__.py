"""The collect stage (rules `summarize_condition`, `summarize_task`, `collect_tables`,
`compare_conditions`; verbs `collect`, `compare`).

Reads every run folder of an experiment (never writes one) and writes the tables
(`tables/*.parquet|csv`), the per-condition and per-task summaries and the paired comparison."""
