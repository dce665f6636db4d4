# One claude -p session per run. The command text stays fixed: Snakemake reruns a rule's jobs
# when its command changes, and these are the expensive, paid sessions.


rule run_agent:
    input:
        f"{RUN}/run.json",
    # transcript.jsonl and mllm_trace.jsonl are written too but not declared: Snakemake deletes
    # declared outputs of a killed job, and a lost attempt's transcript must survive for
    # run-agent to keep it under attempts/ (agent/attempts.py).
    output:
        outcome=f"{RUN}/outcome.json",
        answer=directory(f"{RUN}/answer"),
    log:
        f"{LOGS}/run_agent/{RUN_LOG}",
    benchmark:
        f"{EXP_DIR}/benchmarks/run_agent/{RUN_LOG[:-4]}.tsv"
    priority: session_priority
    retries: config["execution"]["retries"]
    localrule: IN_CLUSTER_JOB
    resources:
        agent_sessions=1,
        mllm_requests=1,
        mem_mb=1024,
    params:
        run_dir=RUN,
        task_dir=TASK_DIR,
    shell:
        "{VH} run-agent --config {EXPERIMENT_CONFIG} --run-dir {params.run_dir}"
        " --task-dir {params.task_dir} > {log} 2>&1"
