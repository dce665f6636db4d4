# VeriHarness: tasks x conditions x replicates, one claude -p session per run.
# Outputs: results/<experiment>/<condition>/<task>/r<k>/ (see docs/architecture.md).
from snakemake.utils import min_version

min_version("9.0")
