# Tables over every run, the paired comparison of two conditions, and the report.


localrules:
    all,
    summarize_condition,
    collect_tables,
    compare_conditions,
    write_report,


rule summarize_condition:
    input:
        lambda w: run_paths("metrics.json", conditions=[w.condition]),
    output:
        f"{EXP_DIR}/{{condition}}/summary.csv",
    log:
        f"{LOGS}/summarize_condition/{{condition}}.log",
    shell:
        "{VH} collect --experiment-dir {EXP_DIR} --condition {wildcards.condition}"
        " --summary {output} > {log} 2>&1"


rule collect_tables:
    input:
        run_paths("metrics.json"),
    output:
        runs=f"{EXP_DIR}/tables/runs.csv",
    log:
        f"{LOGS}/collect_tables.log",
    shell:
        "{VH} collect --experiment-dir {EXP_DIR} > {log} 2>&1"


rule compare_conditions:
    input:
        f"{EXP_DIR}/tables/runs.csv",
    output:
        csv=f"{EXP_DIR}/comparison.csv",
        md=f"{EXP_DIR}/comparison.md",
    params:
        baseline=config["compare"]["baseline"],
        treatment=config["compare"]["treatment"],
    log:
        f"{LOGS}/compare_conditions.log",
    shell:
        "{VH} compare --experiment-dir {EXP_DIR} --baseline {params.baseline}"
        " --treatment {params.treatment} > {log} 2>&1"


rule write_report:
    input:
        f"{EXP_DIR}/tables/runs.csv",
        f"{EXP_DIR}/comparison.csv",
    output:
        f"{EXP_DIR}/report/index.html",
    log:
        f"{LOGS}/write_report.log",
    shell:
        "{VH} report --experiment-dir {EXP_DIR} --out {EXP_DIR}/report > {log} 2>&1"
