# Tables over every run and the paired comparisons of conditions.

import json


localrules:
    all,
    summarize_condition,
    summarize_task,
    collect_tables,


rule summarize_condition:
    input:
        lambda w: run_paths("metrics.json", conditions=[w.condition]),
        lambda w: run_paths("inferred_tags.json", conditions=[w.condition]),
        lambda w: (
            run_paths("trajectory.json", conditions=[w.condition])
            if config["scoring"]["trajectory"]
            else []
        ),
    output:
        f"{EXP_DIR}/{{condition}}/summary.csv",
    log:
        f"{LOGS}/summarize_condition/{{condition}}.log",
    shell:
        "{VH} collect --experiment-dir {EXP_DIR} --condition {wildcards.condition}"
        " --summary {output} > {log} 2>&1"


rule collect_tables:
    # Through the condition summaries, which need every run: the DAG then lists each run's
    # output once, not twice (planning time at 10,000 runs).
    input:
        expand(f"{EXP_DIR}/{{condition}}/summary.csv", condition=CONDITIONS),
        EXTERNAL_METRICS,
    output:
        runs=report(
            f"{EXP_DIR}/tables/runs.csv",
            caption="../report/runs.rst",
            category="Tables",
        ),
    log:
        f"{LOGS}/collect_tables.log",
    shell:
        "{VH} collect --experiment-dir {EXP_DIR} > {log} 2>&1"


# The running answer (analysis.monitor): one look per task, once every run of its compared
# conditions is scored (P-63); the comparison waits for them all. None without a monitor.
MONITORED = sorted({condition for pair in COMPARE_PAIRS for condition in pair})
MONITOR_LOOKS = (
    expand(f"{EXP_DIR}/monitor/looks/{{task}}.json", task=TASKS)
    if config["analysis"].get("monitor") is not None and COMPARE_PAIRS
    else []
)


def monitor_look_inputs(wildcards):
    """Every compared run of the task: its score (an external set's one run, r1)."""
    paths = []
    for condition in MONITORED:
        replicates = [1] if condition.startswith("external:") else REPLICATES
        paths += expand(
            f"{EXP_DIR}/{condition}/{wildcards.task}/r{{replicate}}/metrics.json",
            replicate=replicates,
        )
    return paths


if MONITOR_LOOKS:

    rule monitor_look:
        input:
            monitor_look_inputs,
        output:
            f"{EXP_DIR}/monitor/looks/{{task}}.json",
        log:
            f"{LOGS}/monitor_look/{{task}}.log",
        priority: LOOK_PRIORITY
        localrule: True
        params:
            # A changed analysis looks again at every task (cheap; no session reruns).
            analysis=json.dumps(config["analysis"], sort_keys=True),
        shell:
            "{VH} monitor-look --experiment-dir {EXP_DIR} --task {wildcards.task} > {log} 2>&1"


if COMPARE_PAIRS:

    rule compare_conditions:
        input:
            f"{EXP_DIR}/tables/runs.csv",
            MONITOR_LOOKS,
        output:
            csv=report(
                f"{EXP_DIR}/comparison.csv",
                caption="../report/comparison.rst",
                category="Comparison",
            ),
            md=f"{EXP_DIR}/comparison.md",
            summary=f"{EXP_DIR}/comparison.json",
        log:
            f"{LOGS}/compare_conditions.log",
        localrule: True
        params:
            pairs=" ".join(f"--pair {b} {t}" for b, t in COMPARE_PAIRS),
            # The declared analysis (experiment.json's, written at the start): a changed
            # outcome, alpha or floor flag redoes the comparison, and comparison.md names the
            # change from the registered one.
            analysis=json.dumps(config["analysis"], sort_keys=True),
        shell:
            "{VH} compare --experiment-dir {EXP_DIR} {params.pairs} > {log} 2>&1"


rule summarize_task:
    input:
        lambda w: run_paths("metrics.json", tasks=[w.task]),
        lambda w: expand(
            f"{EXTERNAL_RUN}/metrics.json", external=EXTERNAL_SETS, task=[w.task]
        ),
    output:
        f"{EXP_DIR}/by-task/{{task}}.csv",
    log:
        f"{LOGS}/summarize_task/{{task}}.log",
    shell:
        "{VH} collect --experiment-dir {EXP_DIR} --task {wildcards.task}"
        " --summary {output} > {log} 2>&1"
