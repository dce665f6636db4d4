"""The trajectory stage: every answer snapshot of a run (snapshots/, kept by run-agent) rendered
and scored on its static metrics, into trajectory.json and trajectory/<n>/.

Reads: the run's snapshots/ and the task's reference. Writes: trajectory.json (one score per
snapshot) and trajectory/<n>/render/ (each snapshot's captures, for the report's strip). It
renders through the render stage and scores through the score stage, as one answer on its own
would be, so it sits above both (as the task importer does).
"""
