# Audit the artifact rules and score fidelity against the reference.
# The scorer version is a param: a new one rescores every finished run, never a session (P-17).
from veriharness.score import SCORER_VERSION


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
    priority: LOOK_PRIORITY
    retries: config["execution"]["retries"]
    localrule: IN_CLUSTER_JOB
    params:
        scorer_version=SCORER_VERSION,
        render_dir=f"{RUN}/render",
        answer=f"{RUN}/answer",
        task=TASK_DIR,
        run_dir=RUN,
        # A param: changing it rescores every run (and re-renders, render_answer), never a
        # session (P-43).
        block_detection=config["scoring"]["block_detection"],
    shell:
        "{VH} score --render-dir {params.render_dir} --answer-dir {params.answer}"
        " --task-dir {params.task} --out-dir {params.run_dir}"
        " --block-detection {params.block_detection} > {log} 2>&1"
