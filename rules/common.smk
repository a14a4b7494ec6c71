# The one place that loads and checks the configuration and computes target lists.
import os
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

from xenobench.config import load_config

# No `configfile:` directive: Snakemake would deep-merge --configfile over it, mixing the
# namespace testbed's nodes into the thesis testbed's. The default applies only when none is given.
CONFIG_PATH = (list(workflow.overwrite_configfiles) or ["config/local.yaml"])[-1]
if not config:
    config.update(yaml.safe_load(Path(CONFIG_PATH).read_text()))
validate(config, "../config/schema/main.schema.yaml")
CFG = load_config(CONFIG_PATH)  # schema of every section + semantic checks (MACs, roles, ...)
TESTBED = CFG.name
XB = f"{sys.executable} -m xenobench --config {CONFIG_PATH}"  # the venv that runs Snakemake
THESIS_DATA = config.get("thesis_data", "../shared/thesis-data")


def testbed_down():
    """Leave nothing behind, on success and on failure alike (namespace testbed only)."""
    if CFG.transport == "netns":
        shell(f"{XB} testbed down")


def all_outputs():
    # grows as the measurements land: experiments, tidy CSVs, figures, the run report
    return [f"results/{TESTBED}/testbed_check.txt", *THESIS_FIGURES, "results/thesis/compare.json"]
