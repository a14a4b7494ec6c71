# The one place that loads and checks the configuration and computes target lists.
import os
import shlex
import subprocess
import sys
from pathlib import Path

from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

from xenobench.cli import ROOT_REASON, needs_root
from xenobench.closing import quiet_interrupt
from xenobench.config import load_config
from xenobench.errors import ConfigError
from xenobench.experiments import capacity_points, order, plan, point_key, points
from xenobench.plots import THESIS_FIGURES, drawn_by
from xenobench.layout import ResultsTree, point_id
from xenobench.report import RunSummary, figure_category
from xenobench.definitions import definitions
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
        sys.exit(
            "xenobench: Failed to merge config: --configfile given more than once (Snakemake keeps the last "
            "only): give the files after one --configfile, in order"
        )
    # Snakemake reads a --config mapping's scalars as text (YAML BaseLoader): typed as a file's would be
    typed = lambda v: (
        {k: typed(x) for k, x in v.items()}
        if isinstance(v, dict)
        else (
            [typed(x) for x in v]  # noqa: E731
            if isinstance(v, list)
            else yaml.safe_load(v) if isinstance(v, str) else v
        )
    )
    overrides = typed(dict(overrides))
    path = files[0]
    for layer, doc in [
        *((f, yaml.safe_load(Path(f).read_text()) or {}) for f in files[1:]),
        *([("--config", overrides)] if overrides else []),
    ]:
        if not isinstance(doc, dict) or "extends" in doc:
            sys.exit(
                f"xenobench: Failed to merge config {layer}: give extends: only in the first --configfile "
                "(a mapping of sections after it)"
            )
        LAYERS.append((layer, doc))
        text = yaml.safe_dump({"extends": str(Path(path).resolve()), **doc}, sort_keys=False)
        out = Path(".xenobench/config") / f"snakemake-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        path = str(out)
    return path


def _users_words(message, generated):
    """A config error about the generated file, told about what the user wrote: the --configfile or
    --config layer that sets the key it names (the last that does), else the files it merges."""
    import re, yaml

    m = re.match(rf"Failed to load config {re.escape(str(generated))}: ([^ :]+): (.*)", message, re.S)
    if m is None or not LAYERS:
        return message
    keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", m.group(1))]

    def has(doc, keys):
        for k in keys:
            if not (
                isinstance(doc, dict) and k in doc or isinstance(doc, list) and isinstance(k, int) and k < len(doc)
            ):
                return False
            doc = doc[k]
        return True

    try:
        first = [(FILES[0], yaml.safe_load(Path(FILES[0]).read_text()))]
    except (OSError, yaml.YAMLError):
        first = []
    for layer, doc in reversed([*first, *LAYERS]):
        if has(doc, keys):
            return f"Failed to load config {layer}: {m.group(1)}: {m.group(2)}"
    merged = ", ".join(str(x) for x in [FILES[0], *(l for l, _ in LAYERS)])
    return f"Failed to load config {merged} (merged in this order): {m.group(1)}: {m.group(2)}"


FILES = list(workflow.overwrite_configfiles) or ["config/local.yaml"]
LAYERS = []  # (the --configfile or "--config", its mapping) merged over FILES[0], in order
CONFIG_PATH = _layered_config(FILES, workflow.config_settings.config)  # --config alone (overwrite_config: files too)
try:
    CFG = load_config(CONFIG_PATH)  # every section's schema + semantic checks (MACs, roles, ...); resolves `extends:`
except ConfigError as e:
    sys.exit(f"xenobench: {_users_words(str(e), CONFIG_PATH)}")
config.clear()
config.update(CFG.raw)
validate(config, "../config/schema/main.schema.yaml")
TESTBED = CFG.name
# nodes reached over ssh: the workflow deploys to them before the testbed check (rule deploy)
SSH_NODES = [n.name for n in CFG.nodes.values() if n.transport == "ssh"]
# A job runs the Python that runs Snakemake (the venv), or with --use-conda the conda environment of
# environment.yml (the rules' `conda:`: the same packages from pyproject.toml, this clone editable),
# whose `python` the job's shell finds first. Paths are quoted for the shell (a space or `$(...)` in a
# checkout or config path runs nothing).
CONDA_ENV = "../environment.yml"
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
XB = f"{'python' if USE_CONDA else shlex.quote(sys.executable)} -m xenobench --config {shlex.quote(str(CONFIG_PATH))}"
XB_HERE = f"{shlex.quote(sys.executable)} -m xenobench --config {shlex.quote(str(CONFIG_PATH))}"  # outside a job (onsuccess, onerror)
THESIS_DATA = "../shared/thesis-data"  # the thesis's raw measurements (results/thesis/ is committed)
TREE = ResultsTree(Path("results"), TESTBED)  # xenobench.layout owns every path below results/<testbed>
RESULTS = str(TREE.dir)
FIGURES = f"figures/{TESTBED}"
FIGURE_NAMES = list(drawn_by())  # the definitions' figures (experiments/<id>.yaml), in plan order

# every measurement point of this testbed: (experiment, point id); trials live below its directory
POINTS = [(e, point_id(p)) for e in order() for p in points(CFG, e)]
# what each point is measured for (xenobench.experiments.point_key): a point whose key changed runs again
POINT_KEYS = {(e, point_id(p)): point_key(CFG, e, p) for e in order() for p in points(CFG, e)}
TRIALS = len(plan(CFG))  # every point x its experiment's repetitions (xenobench.experiments.repetitions)
print(
    f"xenobench: testbed {TESTBED} ({CONFIG_PATH}): {len(POINTS)} measurement points, {TRIALS} trials", file=sys.stderr
)


wildcard_constraints:
    experiment="|".join(order()),
    point=r"[A-Za-z0-9_.-]+",


# the workflow starts TRex itself (rule trex_server) when the experiments generate with it
USES_TREX = CFG.section("traffic").get("generator") == "trex"


# `snakemake --report report.html`: the figures, each with its caption, filed by experiment, and
# report.md as HTML. The captions are Snakemake's templates (report/*.rst, Jinja over rst); the
# workflow's description sees only `config`, so the run's header and the figures' trial counts
# are there, read from the results tree when the report asks (xenobench.report.RunSummary).
config["xenobench_report"] = RunSummary(RESULTS, CONFIG_PATH)


def caption(template, figure):
    """report/<template>.rst for one figure: Snakemake renders a caption per output file but tells
    the template only the job, so each figure gets a copy that first names it (generated below
    .xenobench/report/, like the layered config)."""
    body = (Path(workflow.basedir) / "report" / f"{template}.rst").read_text()
    text = f"{{% set figure = '{figure}' %}}\n{body}"
    out = (Path(".xenobench/report") / f"{template}-{figure}.rst").resolve()
    if not out.exists() or out.read_text() != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return str(out)


def experiment_title(experiment):
    """An experiment's title (experiments/<id>.yaml): a figure's subcategory in the HTML report."""
    d = definitions().get(experiment)
    return d.raw.get("title", experiment) if d is not None else experiment


def check_root():
    """Before the first job (onstart: not for -n, --report or --lint): a testbed on this machine
    is changed only by root, said in one line instead of the first job's traceback."""
    if needs_root(CFG) and os.geteuid() != 0:
        sys.exit(f"xenobench: Failed to run the study on testbed {TESTBED} ({CONFIG_PATH}): {ROOT_REASON}")


def testbed_down():
    """Leave nothing behind, on success and on failure alike (namespace testbed only); stop the
    TRex server the workflow started, its log into the results."""
    if USES_TREX and Path(f"{RESULTS}/trex_server.txt").exists():
        shell(f"{XB_HERE} traffic server stop --collect {RESULTS}/logs/trex_server.log || true")
        Path(f"{RESULTS}/trex_server.txt").unlink()
    if CFG.testbed_kind == "namespaces" and os.geteuid() == 0:  # not root: nothing was brought up
        shell(f"{XB_HERE} testbed down")


def interrupt_in_one_line():
    """Ctrl-C (onstart: a run, not -n, --lint or --report): one line saying that the same command
    resumes, Snakemake's account of the interruption to a log (xenobench.closing.quiet_interrupt);
    onerror still takes the testbed down."""
    log = f"{RESULTS}/logs/interrupted.log"
    quiet_interrupt(
        Path(log),
        f"xenobench: interrupted: run the same command again to resume, completed "
        f"repetitions are kept (what Snakemake said: {log})",
    )


def closing_summary():
    """After the last job (onsuccess): the run's closing summary (`xenobench experiment summary`);
    a run that measured nothing (xenobench.closing.judge) makes Snakemake exit non-zero: a sys.exit
    in onsuccess is its exit status (its locks released), where a raise prints a traceback and
    os._exit leaves the locks. Only once every point is measured (a run of one point's target is
    not the study); a run with nothing to do calls no hook: `summary --check` by hand."""
    if POINTS and all(Path(f).exists() for f in point_outputs()):
        r = subprocess.run([*shlex.split(XB_HERE), "experiment", "summary", RESULTS, "--check"])
        if r.returncode:
            sys.exit(r.returncode)


# rtt_load's capacity levels are shares of maxima measured in the same run: each level point waits
# for the points measuring them (xenobench.experiments.capacity_points: capacity_from self, its own
# capacity points of its split; one the config does not plan is refused here)
CAPACITY_INPUTS = {
    (e, point_id(p)): [str(TREE.point_summary(src, point_id(pt))) for src, pt in capacity_points(CFG, e, p)]
    for e in order()
    for p in points(CFG, e)
}


def point_inputs(wildcards):
    return CAPACITY_INPUTS.get((wildcards.experiment, wildcards.point), [])


def point_outputs():
    return [str(TREE.point_summary(e, p)) for e, p in POINTS]


def all_outputs():
    out = [f"{RESULTS}/testbed_check.txt", *THESIS_FIGURE_FILES, "results/thesis/compare.json"]
    if POINTS:
        out += [f"{RESULTS}/report.md"]
    return out
