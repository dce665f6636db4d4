# Audit the artifact rules and score fidelity against the reference.


rule score_answer:
    input:
        f"{RUN}/render/render.json",
    output:
        audit=f"{RUN}/audit.json",
        metrics=f"{RUN}/metrics.json",
    log:
        f"{LOGS}/score_answer/{RUN_LOG}",
    benchmark:
        f"{EXP_DIR}/benchmarks/score_answer/{RUN_LOG[:-4]}.tsv"
    retries: config["execution"]["retries"]
    params:
        render_dir=f"{RUN}/render",
        answer=f"{RUN}/answer",
        task=TASK_DIR,
        run_dir=RUN,
    shell:
        "{VH} score --render-dir {params.render_dir} --answer-dir {params.answer}"
        " --task-dir {params.task} --out-dir {params.run_dir} --ocr-cache {EXP_DIR}/.ocr-cache"
        " > {log} 2>&1"
