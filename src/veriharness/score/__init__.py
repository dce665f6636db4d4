"""The score stage (rule `score_answer`, verb `score`).

Reads a run's render and answer and the task's reference; writes `audit.json` (one flag per
artifact rule, with evidence) and `metrics.json` (fidelity metrics, see `score.metrics`)."""
