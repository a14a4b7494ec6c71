# The one place that loads and checks the configuration and computes target lists.
import os
import sys
from pathlib import Path

from snakemake.utils import validate

from xenobench.config import load_config
from xenobench.experiments import ORDER, points
from xenobench.plots import FIGURES as PLOTS, THESIS_FIGURES
from xenobench.layout import ResultsTree, point_id

# No `configfile:` directive: Snakemake would deep-merge --configfile over it, mixing the
# namespace testbed's nodes into the thesis testbed's. The default applies only when none is given.
CONFIG_PATH = (list(workflow.overwrite_configfiles) or ["config/local.yaml"])[-1]
CFG = load_config(CONFIG_PATH)  # every section's schema + semantic checks (MACs, roles, ...); resolves `extends:`
config.clear()
config.update(CFG.raw)
validate(config, "../config/schema/main.schema.yaml")
TESTBED = CFG.name
# nodes reached over ssh: the workflow deploys to them before the testbed check (rule deploy)
SSH_NODES = [n.name for n in CFG.nodes.values() if n.transport == "ssh"]
XB = f"{sys.executable} -m xenobench --config {CONFIG_PATH}"  # the venv that runs Snakemake
CONDA_ENV = "../environment.yml"  # the same packages for --use-conda (testbed machines)
THESIS_DATA = "../shared/thesis-data"  # the thesis's raw measurements (results/thesis/ is committed)
TREE = ResultsTree(Path("results"), TESTBED)  # xenobench.layout owns every path below results/<testbed>
RESULTS = str(TREE.dir)
FIGURES = f"figures/{TESTBED}"
FIGURE_NAMES = list(PLOTS)  # xenobench.plots owns the list

# every measurement point of this testbed: (experiment, point id); trials live below its directory
POINTS = [(e, point_id(p)) for e in ORDER for p in points(CFG, e)]
REPETITIONS = int(CFG.section("experiments")["repetitions"])
print(f"xenobench: testbed {TESTBED} ({CONFIG_PATH}): {len(POINTS)} measurement points x {REPETITIONS} "
      f"repetitions = {len(POINTS) * REPETITIONS} trials", file=sys.stderr)


wildcard_constraints:
    experiment="|".join(ORDER),
    point=r"[A-Za-z0-9_.-]+",


# the workflow starts TRex itself (rule trex_server) when the experiments generate with it
USES_TREX = CFG.section("traffic").get("generator") == "trex"


def testbed_down():
    """Leave nothing behind, on success and on failure alike (namespace testbed only); stop the
    TRex server the workflow started, its log into the results."""
    if USES_TREX and Path(f"results/{TESTBED}/trex_server.txt").exists():
        shell(f"{XB} traffic server stop --collect results/{TESTBED}/logs/trex_server.log || true")
        Path(f"results/{TESTBED}/trex_server.txt").unlink()
    if CFG.testbed_kind == "namespaces":
        shell(f"{XB} testbed down")


def point_outputs():
    return [str(TREE.point_summary(e, p)) for e, p in POINTS]


def all_outputs():
    out = [f"{RESULTS}/testbed_check.txt", *THESIS_FIGURE_FILES, "results/thesis/compare.json"]
    if POINTS:
        out += [f"{RESULTS}/report.md"]
    return out
