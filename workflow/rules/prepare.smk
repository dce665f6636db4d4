# One run's record and resolved prompt snapshot. Reruns when a hashed input file changes
# (task, condition, prompt module, catalog, taxonomy) or an identity setting of the config does.


rule prepare_run:
    input:
        unpack(prepare_inputs),
    output:
        record=f"{RUN}/run.json",
        prompt=f"{RUN}/system_prompt.md",
    params:
        identity=IDENTITY_SETTINGS,
        run_dir=RUN,
    log:
        f"{LOGS}/prepare_run/{RUN_LOG}",
    shell:
        "{VH} prepare --config {EXPERIMENT_CONFIG} --condition {wildcards.condition}"
        " --task {wildcards.task} --replicate {wildcards.replicate}"
        " --run-dir {params.run_dir} --experiment-record {EXP_DIR}/experiment.json > {log} 2>&1"
