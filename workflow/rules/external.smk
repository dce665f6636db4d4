# Answers no session wrote (config `external_answers`): each task's answer is imported into
# external:<name>/<task>/r1/, which render_answer and score_answer then treat like any run.
# The import reruns when the set's files for the task change (or appear), never a session.
from veriharness.external.answers import external_answer_files


localrules:
    import_external_answer,


# A run folder under external:<name>/ comes from its set, never from a session.
ruleorder: import_external_answer > run_agent


rule import_external_answer:
    input:
        lambda w: external_answer_files(config, w.external, w.task),
    output:
        outcome=f"{EXTERNAL_RUN}/outcome.json",
        answer=directory(f"{EXTERNAL_RUN}/answer"),
    log:
        f"{LOGS}/import_external_answer/{{external}}/{{task}}.log",
    priority: AFTER_SESSION_PRIORITY
    params:
        run_dir=EXTERNAL_RUN,
    shell:
        "{VH} import-answer --config {EXPERIMENT_CONFIG} --set {wildcards.external}"
        " --task {wildcards.task} --run-dir {params.run_dir} > {log} 2>&1"
