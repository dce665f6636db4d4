# One run's record and resolved prompt snapshot. Reruns when a hashed input file changes
# (task, condition, prompt module, catalog, taxonomy) or an identity setting of the config does.
# Each task's and condition's files are hashed once into a digest file, so a run depends on two
# small files instead of every task and prompt file (Snakemake plans 10,000 runs much faster).


rule hash_task_inputs:
    input:
        lambda w: task_files(config, w.task),
    output:
        f"{EXP_DIR}/inputs/task-{{task}}.sha256",
    log:
        f"{LOGS}/hash_task_inputs/{{task}}.log",
    priority: FIRST_PRIORITY
    shell:
        "{VH} hash-files --out {output} {input} > {log} 2>&1"


rule hash_condition_inputs:
    input:
        lambda w: condition_inputs(config, w.condition),
        config["model_catalog"],
        config["taxonomy"],
    output:
        f"{EXP_DIR}/inputs/condition-{{condition}}.sha256",
    log:
        f"{LOGS}/hash_condition_inputs/{{condition}}.log",
    priority: FIRST_PRIORITY
    shell:
        "{VH} hash-files --out {output} {input} > {log} 2>&1"


rule prepare_run:
    input:
        task=f"{EXP_DIR}/inputs/task-{{task}}.sha256",
        condition=f"{EXP_DIR}/inputs/condition-{{condition}}.sha256",
    output:
        record=f"{RUN}/run.json",
        prompt=f"{RUN}/system_prompt.md",
    log:
        f"{LOGS}/prepare_run/{RUN_LOG}",
    benchmark:
        f"{EXP_DIR}/benchmarks/prepare_run/{RUN_LOG[:-4]}.tsv"
    priority: prepare_priority
    params:
        identity=lambda w: identity_settings_digest(config, w.condition),
        run_dir=RUN,
    shell:
        "{VH} prepare --config {EXPERIMENT_CONFIG} --condition {wildcards.condition}"
        " --task {wildcards.task} --replicate {wildcards.replicate}"
        " --run-dir {params.run_dir} --experiment-record {EXP_DIR}/experiment.json"
        " > {log} 2>&1"
