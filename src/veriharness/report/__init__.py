"""The report stage (rule `write_report`, verb `report`).

Reads the tables, the comparison and every run folder; writes `report/`: plots with captions and
one page per run (steps, CallMLLM calls with their images and regions)."""
