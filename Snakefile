# VeriHarness: tasks x conditions x replicates, one claude -p session per run.
#
# Per run:        results/<experiment>/<condition>/<task>/r<k>/  (run.json ... metrics.json)
# Per condition:  results/<experiment>/<condition>/summary.csv
# Per experiment: results/<experiment>/{experiment.json,tables/,comparison.csv,report/}
# See docs/architecture.md for what each file holds.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/agent.smk"
include: "workflow/rules/external.smk"
include: "workflow/rules/render.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/annotate.smk"
include: "workflow/rules/trajectory.smk"
include: "workflow/rules/collect.smk"
include: "workflow/rules/report.smk"


# Everything `all` makes but the report: the tables, each condition's summary and the
# comparison, which is what the declared analysis reads.
rule analysis:
    input:
        f"{EXP_DIR}/tables/runs.csv",
        COMPARISON,
        expand(f"{EXP_DIR}/{{condition}}/summary.csv", condition=CONDITIONS),


rule all:
    default_target: True
    input:
        rules.analysis.input,
        f"{EXP_DIR}/report",
