"""The report stage (rule `write_report`, verb `report`) and the live `status` of an experiment.

`report` reads the tables, the comparison and every run folder; writes `report/`: plots with
captions and one page per run (steps, CallMLLM calls with their images and regions). `status`
reads `experiment.json`, each run's outcome and the spending ledger while the experiment runs,
and writes nothing."""
