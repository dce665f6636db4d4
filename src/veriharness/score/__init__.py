"""The score stage (rule `score_answer`, verb `score`).

Reads a run's render and answer and the task's reference; writes `audit.json` (one flag per
artifact rule, with evidence) and `metrics.json` (fidelity metrics, see `score.metrics`)."""

__all__ = ["SCORER_VERSION"]

# Raise whenever `score` would write different metrics.json or audit.json for the same inputs.
# It is recorded in metrics.json and is a `params` value of rule score_answer, so a new version
# rescores every finished run and rebuilds the tables without rerunning a session (P-2, P-17).
# 1: (unrecorded) block metrics without neighbour merging or context bonus.
# 2: block matching follows Design2Code's published method (docs/metrics.md).
SCORER_VERSION = "2"
