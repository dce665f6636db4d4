# Inferred capability tags: every CallMLLM call of every session run, labelled by the configured
# annotator and kept apart from the declared tags. The annotator's digest is a param, so changing
# the annotator reruns this rule (and the tables), never a session.
from veriharness.annotate.identity import annotator_digest

ANNOTATOR = annotator_digest(config)


rule annotate_calls:
    # The session's outcome marks its trace complete (the trace itself is not a declared output
    # of run_agent; annotate reads it). The render is there for order only: it ties annotation to
    # its run's render and score, so the SLURM profile's groups hold whole runs (one connected
    # piece per run, docs/cluster.md). `ancient`: a newer render never reruns an annotation.
    input:
        f"{RUN}/outcome.json",
        ancient(f"{RUN}/render/render.json"),
    output:
        f"{RUN}/inferred_tags.json",
    log:
        f"{LOGS}/annotate_calls/{RUN_LOG}",
    priority: AFTER_SESSION_PRIORITY
    localrule: IN_CLUSTER_JOB
    params:
        annotator=ANNOTATOR,
        run_dir=RUN,
        task_dir=TASK_DIR,
    shell:
        "{VH} annotate --config {EXPERIMENT_CONFIG} --run-dir {params.run_dir}"
        " --task-dir {params.task_dir} > {log} 2>&1"
