# Render answer.html in Chromium at the reference size, network closed.


rule render_answer:
    input:
        outcome=f"{RUN}/outcome.json",
        answer=f"{RUN}/answer",
        reference=reference_png,
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
    params:
        out=f"{RUN}/render",
    resources:
        mem_mb=1024,
    retries: config["execution"]["retries"]
    log:
        f"{LOGS}/render_answer/{RUN_LOG}",
    benchmark:
        f"{EXP_DIR}/benchmarks/render_answer/{RUN_LOG[:-4]}.tsv"
    shell:
        "{VH} render --answer-dir {input.answer} --reference {input.reference}"
        " --out {params.out} > {log} 2>&1"
