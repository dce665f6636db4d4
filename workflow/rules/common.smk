# Config loading and validation, the run matrix, and the input functions the rules share.
# Kept cheap: every cluster job parses this file again.
import os
import subprocess
import sys
from pathlib import Path

from snakemake.utils import validate

from veriharness.spend.ledger import requeue_stopped
from veriharness.render.pool import (
    WORKFLOW_POOL_ENV,
    new_workflow_pool,
    stop_workflow_pool,
)

from veriharness.experiment.check import exit_on_problems
from veriharness.experiment.start_order import (
    StartOrderError,
    matrix_runs,
    record_executor,
    resolve_seed,
    start_order,
    start_priorities,
)
from veriharness.experiment.workflow import (
    coerce_command_line_values,
    comparison_pairs,
    condition_inputs,
    identity_settings_digest,
    list_tasks,
    refuse_overwriting_a_record,
    task_files,
    unwrap_experiment_record,
    effective_config_path,
    scheduler_settings,
    write_effective_config,
)

SCHEMA = workflow.source_path("../schemas/config.schema.yaml")
unwrap_experiment_record(config, workflow.config_settings.config)
coerce_command_line_values(config, SCHEMA)
# Every problem of the config, tasks, conditions and prompt modules, one line each, then exit 2;
# Snakemake's validation covers what that check does not. Cluster jobs were checked by the main
# process.
if workflow.is_main_process:
    exit_on_problems(
        config,
        workflow.configfiles,
        workflow.config_settings.configfiles,
        workflow.config_settings.config,
        Path.cwd(),
    )
validate(config, SCHEMA, set_default=True)

EXPERIMENT = config["experiment"]
EXP_DIR = f"{config['execution']['results_dir']}/{EXPERIMENT}"
LOGS = f"{EXP_DIR}/logs"
refuse_overwriting_a_record(workflow.configfiles, f"{EXP_DIR}/experiment.json")
RUN = f"{EXP_DIR}/{{condition}}/{{task}}/r{{replicate}}"
RUN_LOG = "{condition}/{task}/r{replicate}.log"
# Patterns, not functions: Snakemake fills wildcards into strings far faster than it calls
# functions, which matters for planning 10,000 runs.
TASK_DIR = f"{config['tasks_dir']}/{{task}}"
TASKS = list_tasks(config)
CONDITIONS = list(config["conditions"])
REPLICATES = list(range(1, int(config["replicates"]) + 1))
# `compare: null` asks for no comparison: no compare rule, and nothing waits for its file.
COMPARE_PAIRS = comparison_pairs(config)
# Answer sets no session wrote: each is the condition external:<name>, one run per task.
EXTERNAL_SETS = [answers["name"] for answers in config.get("external_answers") or []]
EXTERNAL_RUN = f"{EXP_DIR}/external:{{external}}/{{task}}/r1"
EXTERNAL_METRICS = expand(
    f"{EXTERNAL_RUN}/metrics.json", external=EXTERNAL_SETS, task=TASKS
)
COMPARISON = [f"{EXP_DIR}/comparison.csv"] if COMPARE_PAIRS else []
# True in the Snakemake that a cluster job starts on its node (`--mode remote`). There the rules
# of a run are local rules: they run in that process's own job pool, where the jobs of a group job
# can run side by side, instead of through the SLURM plugin's job-step executor, which starts
# Snakemake again for every job and waits for each before starting the next (docs/cluster.md).
IN_CLUSTER_JOB = workflow.remote_exec
# Verbs run with the Python that runs Snakemake, so an unactivated venv works too.
VH = f"{sys.executable} -m veriharness"
# The merged config (configfile + --config) as the verbs read it. Deliberately not a rule input:
# execution settings change this file but must not rerun finished sessions (docs/decisions.md).
# Written by the main process only: cluster jobs parse the workflow again with their own
# resource settings and must not rewrite what the main process recorded.
if workflow.is_main_process:
    # The seed of the start order (P-60): the config's, else an earlier start's, else new.
    try:
        START_SEED = resolve_seed(config["execution"].get("order_seed"), Path(EXP_DIR))
    except StartOrderError as error:
        sys.exit(f"start order: {error}")
    EXPERIMENT_CONFIG = write_effective_config(
        config,
        EXP_DIR,
        [str(Path(f).resolve()) for f in workflow.configfiles],
        scheduler_settings(workflow.global_resources),
        START_SEED.model_dump(mode="json"),
    )
    RUN_PRIORITY = start_priorities(
        start_order(matrix_runs(CONDITIONS, TASKS, REPLICATES), START_SEED.seed)
    )
else:
    EXPERIMENT_CONFIG = effective_config_path(EXP_DIR)
    # A cluster job runs the jobs it was given; their order was the submitter's.
    RUN_PRIORITY = {}
# Runs a spending cap stopped are redone on the next start (a paid, interrupted session is moved
# to superseded/ first), before the DAG is built from the files present.
if workflow.is_main_process and not workflow.dryrun:
    requeue_stopped(EXP_DIR)


# Job priorities: Snakemake starts (locally) or submits (a cluster) the ready job of highest
# priority first. A session's is its place in the start order above every other job's; its
# run's preparation has the same place below, so runs are prepared in the order and the next
# session is ready when a slot frees; the stages after a session come before any preparation,
# so a long queue of preparations never holds them back; the input digests go first of all.
SESSIONS = len(TASKS) * len(CONDITIONS) * len(REPLICATES)
AFTER_SESSION_PRIORITY = SESSIONS + 1
FIRST_PRIORITY = 2 * SESSIONS + 2
# With the monitor's stop (analysis.monitor.stop), what a look at a task needs, its runs'
# renders and scores and the look itself, comes before any session: the answer is known as soon
# as the task's last score is in, and a session started meanwhile may be one the stop would
# have saved (P-64).
MONITOR_STOPS = bool((config["analysis"].get("monitor") or {}).get("stop"))
LOOK_PRIORITY = FIRST_PRIORITY if MONITOR_STOPS else AFTER_SESSION_PRIORITY


def prepare_priority(wildcards):
    """1 (the last run) to SESSIONS (the first)."""
    key = (wildcards.condition, wildcards.task, int(wildcards.replicate))
    return RUN_PRIORITY.get(key, 0)


def session_priority(wildcards):
    """SESSIONS + 2 (the last run) to 2 * SESSIONS + 1 (the first)."""
    return AFTER_SESSION_PRIORITY + prepare_priority(wildcards)


localrules:
    hash_task_inputs,
    hash_condition_inputs,
    prepare_run,


wildcard_constraints:
    condition="(external:)?[A-Za-z0-9][A-Za-z0-9_.-]*",
    external="[A-Za-z0-9][A-Za-z0-9_.-]*",
    task="[A-Za-z0-9][A-Za-z0-9_.-]*",
    replicate=r"\d+",


def run_paths(filename, conditions=CONDITIONS, tasks=TASKS):
    return expand(
        f"{RUN}/{filename}", condition=conditions, task=tasks, replicate=REPLICATES
    )


# The render jobs of this run share Chromiums (render/pool.py): the jobs inherit the pool's
# folder through the environment, and the browsers are stopped when the run ends. A render in a
# cluster job uses its job's pool instead.
if workflow.is_main_process and not workflow.dryrun:
    os.environ[WORKFLOW_POOL_ENV] = new_workflow_pool()


# A refusal is the verb's own message on stderr and exit 2, with no traceback after it.
onstart:
    # What this executor keeps of the start order, for the record (P-60).
    record_executor(
        EXPERIMENT_CONFIG, workflow.executor_plugin.name, rules.run_agent.rule.group
    )
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "veriharness",
            "check-experiment",
            "--config",
            EXPERIMENT_CONFIG,
            "--out",
            f"{EXP_DIR}/experiment.json",
        ]
    )
    if checked.returncode:
        sys.exit(checked.returncode)


onsuccess:
    stop_workflow_pool()
    # Where the answer is, as the main job's last lines: the verdict, comparison.md, the report.
    if workflow.is_main_process:
        from veriharness.report.closing import closing_lines, end_with, refreshed

        made_comparison, made_report = refreshed(
            workflow.dag_settings.targets, EXP_DIR
        )
        end_with(
            closing_lines(
                Path(EXP_DIR),
                comparison=made_comparison,
                report=made_report,
                compares=bool(COMPARE_PAIRS),
            )
        )


onerror:
    stop_workflow_pool()
