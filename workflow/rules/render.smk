# Render answer.html in Chromium at the reference size, network closed. Inside a SLURM job the
# renders of one cluster job (a group job, profiles/slurm) share one Chromium; in a local run,
# the renders share the run's Chromiums, one per render running at once (render/pool.py). Each
# page gets a fresh browser context, so the output is the same as with a browser of its own.


rule render_answer:
    # One input per job keeps planning fast: the answer folder comes from the same agent job,
    # and the reference is covered by the task's digest upstream.
    input:
        f"{RUN}/outcome.json",
    output:
        png=report(
            f"{RUN}/render/render.png",
            caption="../report/render.rst",
            category="Renders",
            subcategory="{condition}",
            labels={"task": "{task}", "replicate": "{replicate}"},
        ),
        dom=f"{RUN}/render/dom.json",
        status=f"{RUN}/render/render.json",
    log:
        f"{LOGS}/render_answer/{RUN_LOG}",
    benchmark:
        f"{EXP_DIR}/benchmarks/render_answer/{RUN_LOG[:-4]}.tsv"
    priority: LOOK_PRIORITY
    retries: config["execution"]["retries"]
    localrule: IN_CLUSTER_JOB
    resources:
        mem_mb=1024,
    params:
        answer=f"{RUN}/answer",
        reference=f"{TASK_DIR}/reference.png",
        task=TASK_DIR,
        out=f"{RUN}/render",
        # Design2Code's block detection needs three more captures per page, which the shared
        # browser pool does not take (P-44).
        design2code=(
            "--design2code-blocks --browser-pool none"
            if config["scoring"]["block_detection"] == "design2code"
            else "--browser-pool workflow"
        ),
    shell:
        "{VH} render --answer-dir {params.answer} --reference {params.reference}"
        " --task-dir {params.task} --out {params.out} {params.design2code} > {log} 2>&1"
