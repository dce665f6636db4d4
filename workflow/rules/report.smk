# Plots and one page per run, over the tables and the comparison.


localrules:
    write_report,


rule write_report:
    input:
        f"{EXP_DIR}/tables/runs.csv",
        COMPARISON,
    output:
        report(
            directory(f"{EXP_DIR}/report"),
            htmlindex="index.html",
            caption="../report/pages.rst",
            category="Run pages",
        ),
    log:
        f"{LOGS}/write_report.log",
    threads: 2
    params:
        tasks_dir=config["tasks_dir"],
    shell:
        "{VH} report --experiment-dir {EXP_DIR} --out {EXP_DIR}/report --jobs {threads}"
        " --tasks-dir {params.tasks_dir} > {log} 2>&1"
