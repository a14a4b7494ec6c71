# The one place that loads and checks the configuration and computes target lists.
import os
import shlex
import sys
from pathlib import Path

from snakemake.utils import validate

from xenobench.config import load_config
from xenobench.experiments import capacity_points, order, plan, points
from xenobench.plots import THESIS_FIGURES, drawn_by
from xenobench.layout import ResultsTree, point_id
from xenobench.resume import clear_stale_locks

# a Snakemake that was killed left its locks: the same command resumes (xenobench.resume)
clear_stale_locks(Path.cwd(), progress=lambda m: print(m, file=sys.stderr))

# No `configfile:` directive: Snakemake would deep-merge --configfile over it, mixing the
# namespace testbed's nodes into the thesis testbed's. The default applies only when none is given.
# Several --configfile's merge in order and --config keys over them, as Snakemake merges them: each
# layer `extends:` the one before (xenobench.config's merge) in a file the jobs read too, so every key
# is validated like a file's (a typo is refused by name) and none is dropped.
def _layered_config(files, overrides):
    import hashlib, yaml
    if sum(a in ("--configfile", "--configfiles") for a in sys.argv) > 1:  # argparse keeps the last only
        sys.exit("xenobench: Failed to merge config: --configfile given more than once (Snakemake keeps the last "
                 "only): give the files after one --configfile, in order")
    # Snakemake reads a --config mapping's scalars as text (YAML BaseLoader): typed as a file's would be
    typed = lambda v: ({k: typed(x) for k, x in v.items()} if isinstance(v, dict) else [typed(x) for x in v]  # noqa: E731
                       if isinstance(v, list) else yaml.safe_load(v) if isinstance(v, str) else v)
    overrides = typed(dict(overrides))
    path = files[0]
    for layer, doc in [*((f, yaml.safe_load(Path(f).read_text()) or {}) for f in files[1:]),
                       *([("--config", overrides)] if overrides else [])]:
        if not isinstance(doc, dict) or "extends" in doc:
            sys.exit(f"xenobench: Failed to merge config {layer}: give extends: only in the first --configfile "
                     "(a mapping of sections after it)")
        text = yaml.safe_dump({"extends": str(Path(path).resolve()), **doc}, sort_keys=False)
        out = Path(".xenobench/config") / f"snakemake-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        path = str(out)
    return path
CONFIG_PATH = _layered_config(list(workflow.overwrite_configfiles) or ["config/local.yaml"],
                              workflow.config_settings.config)  # --config alone (overwrite_config: files too)
CFG = load_config(CONFIG_PATH)  # every section's schema + semantic checks (MACs, roles, ...); resolves `extends:`
config.clear()
config.update(CFG.raw)
validate(config, "../config/schema/main.schema.yaml")
TESTBED = CFG.name
# nodes reached over ssh: the workflow deploys to them before the testbed check (rule deploy)
SSH_NODES = [n.name for n in CFG.nodes.values() if n.transport == "ssh"]
XB = f"{shlex.quote(sys.executable)} -m xenobench --config {shlex.quote(str(CONFIG_PATH))}"  # the venv that runs Snakemake
CONDA_ENV = "../environment.yml"  # the same packages for --use-conda (testbed machines)
THESIS_DATA = "../shared/thesis-data"  # the thesis's raw measurements (results/thesis/ is committed)
TREE = ResultsTree(Path("results"), TESTBED)  # xenobench.layout owns every path below results/<testbed>
RESULTS = str(TREE.dir)
FIGURES = f"figures/{TESTBED}"
FIGURE_NAMES = list(drawn_by())  # the definitions' figures (experiments/<id>.yaml), in plan order

# every measurement point of this testbed: (experiment, point id); trials live below its directory
POINTS = [(e, point_id(p)) for e in order() for p in points(CFG, e)]
TRIALS = len(plan(CFG))  # every point x its experiment's repetitions (xenobench.experiments.repetitions)
print(f"xenobench: testbed {TESTBED} ({CONFIG_PATH}): {len(POINTS)} measurement points, {TRIALS} trials",
      file=sys.stderr)


wildcard_constraints:
    experiment="|".join(order()),
    point=r"[A-Za-z0-9_.-]+",


# the workflow starts TRex itself (rule trex_server) when the experiments generate with it
USES_TREX = CFG.section("traffic").get("generator") == "trex"


def testbed_down():
    """Leave nothing behind, on success and on failure alike (namespace testbed only); stop the
    TRex server the workflow started, its log into the results."""
    if USES_TREX and Path(f"{RESULTS}/trex_server.txt").exists():
        shell(f"{XB} traffic server stop --collect {RESULTS}/logs/trex_server.log || true")
        Path(f"{RESULTS}/trex_server.txt").unlink()
    if CFG.testbed_kind == "namespaces":
        shell(f"{XB} testbed down")


# rtt_load's capacity levels are shares of maxima measured in the same run: each level point waits
# for the points measuring them (xenobench.experiments.capacity_points: capacity_from self, its own
# capacity points of its split; one the config does not plan is refused here)
CAPACITY_INPUTS = {(e, point_id(p)): [str(TREE.point_summary(src, point_id(pt))) for src, pt in capacity_points(CFG, e, p)]
                   for e in order() for p in points(CFG, e)}


def point_inputs(wildcards):
    return CAPACITY_INPUTS.get((wildcards.experiment, wildcards.point), [])


def point_outputs():
    return [str(TREE.point_summary(e, p)) for e, p in POINTS]


def all_outputs():
    out = [f"{RESULTS}/testbed_check.txt", *THESIS_FIGURE_FILES, "results/thesis/compare.json"]
    if POINTS:
        out += [f"{RESULTS}/report.md"]
    return out
