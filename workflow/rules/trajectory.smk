# Every answer snapshot of a session (snapshots/, kept by run-agent at each model request) rendered
# and scored on its static metrics: the answer's fidelity over the session (P-56). A scoring
# setting (scoring.trajectory), outside run identity: turning it on scores the kept snapshots and
# reruns no session.


rule score_trajectory:
    # The outcome marks the session's snapshots complete. The run's render and score: the
    # snapshot whose files are the answer takes them instead of a render of its own (they also
    # keep the SLURM profile's groups whole runs, as for annotate_calls). metrics.json is not
    # `ancient`: a run scored again is a trajectory scored again. Snakemake does not look at
    # the params of a job whose input job reruns, so with an ancient input a new scorer version
    # would have left the trajectory as it was.
    input:
        f"{RUN}/outcome.json",
        ancient(f"{RUN}/render/render.json"),
        f"{RUN}/metrics.json",
    output:
        f"{RUN}/trajectory.json",
    log:
        f"{LOGS}/score_trajectory/{RUN_LOG}",
    benchmark:
        f"{EXP_DIR}/benchmarks/score_trajectory/{RUN_LOG[:-4]}.tsv"
    priority: AFTER_SESSION_PRIORITY
    retries: config["execution"]["retries"]
    localrule: IN_CLUSTER_JOB
    resources:
        mem_mb=1024,
    params:
        scorer_version=SCORER_VERSION,
        block_detection=config["scoring"]["block_detection"],
        run_dir=RUN,
        task=TASK_DIR,
        pool=(
            "none"
            if config["scoring"]["block_detection"] == "design2code"
            else "workflow"
        ),
    shell:
        "{VH} score-trajectory --run-dir {params.run_dir} --task-dir {params.task}"
        " --block-detection {params.block_detection} --browser-pool {params.pool} > {log} 2>&1"
