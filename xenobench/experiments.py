"""The experiments (thesis ch. 7) as data: definitions in experiments/<id>.yaml (validated against
experiments/schema/definition.schema.yaml), sizes per testbed in the config's `experiments:`
section, expanded here into the plan of trials.

A definition says what the code needs to know: its kind (rate, latency, search), its procedure,
the traffic profile, its variables (each from a key of the config section), its tidy tables and
metrics, and its figures. Every trial has an explicit key — experiment, point (its variables in
order) and repetition — and a directory in the results tree (xenobench.layout).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from . import REPO_ROOT
from .errors import ConfigError
from .layout import ResultsTree, TrialDir

EXPERIMENTS_DIR = REPO_ROOT / "experiments"
SCHEMA = EXPERIMENTS_DIR / "schema" / "definition.schema.yaml"
ORDER = ("pps", "loss", "ndr_pdr", "rtt", "rtt_load", "compare", "update", "rank")  # the plan's order
NO_SPLIT = "none"  # rtt_load's split at level 0 (xenobench.plots draws it on every split's line)
CAPACITY = "max"   # rtt_load's level of a capacity point (capacity_from: self): the background unpaced


@dataclass(frozen=True)
class Experiment:
    """One definition (experiments/<id>.yaml), as the code reads it."""
    id: str
    kind: str          # rate | latency | search | update | rank
    procedure: str
    profile: str | None
    variables: tuple[dict, ...]
    tidy: dict
    figures: tuple[str, ...]
    raw: dict

    @property
    def is_latency(self) -> bool:
        return self.kind == "latency"


def _where(e: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in e.absolute_path) or "(top level)"


def _load(f: Path, validator) -> Experiment:
    try:
        d = yaml.safe_load(f.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ConfigError(f"Failed to load experiment {f}: {' '.join(str(e).split())}") from None
    errs = sorted(validator.iter_errors(d), key=lambda e: list(map(str, e.absolute_path)))
    if errs:
        raise ConfigError(f"Failed to load experiment {f}: {_where(errs[0])}: {errs[0].message} "
                          f"(the shape is {SCHEMA.relative_to(REPO_ROOT)})")
    if d["id"] != f.stem:
        raise ConfigError(f"Failed to load experiment {f}: id: {d['id']!r} is not the file's name {f.stem!r}")
    if d.get("profile") is not None:
        from .traffic.profiles import PROFILE_DIR
        if not (PROFILE_DIR / f"{d['profile']}.py").is_file():
            known = ", ".join(sorted(p.stem for p in PROFILE_DIR.glob("*.py") if not p.stem.startswith("xb_")))
            raise ConfigError(f"Failed to load experiment {f}: profile: {d['profile']!r} is not a profile of "
                              f"{PROFILE_DIR.relative_to(REPO_ROOT)}/ (known: {known})")
    from .procedures import METRIC_OUTPUTS
    from .results import metric
    for m in d["tidy"].get("metrics") or ():
        if metric(m["metric"]) is None:
            raise ConfigError(f"Failed to load experiment {f}: tidy.metrics: {m['metric']!r} is not a metric "
                              "xenobench.results.METRICS knows (add its unit and range there)")
        outs = METRIC_OUTPUTS.get(d["procedure"], ())
        if m["from"].split(".")[0] not in outs:
            raise ConfigError(f"Failed to load experiment {f}: tidy.metrics.{m['metric']}.from: {m['from']!r} is not "
                              f"an output of procedure {d['procedure']} (known: {', '.join(outs) or 'none'})")
    names = [v["name"] for v in d["variables"]]
    for v in d["variables"]:
        if v.get("none_when_zero") and v["none_when_zero"] not in names[:names.index(v["name"])]:
            raise ConfigError(f"Failed to load experiment {f}: variables.{v['name']}.none_when_zero: "
                              f"{v['none_when_zero']!r} is not a variable before it")
    return Experiment(d["id"], d["kind"], d["procedure"], d.get("profile"), tuple(d["variables"]), d["tidy"],
                      tuple(d.get("figures") or ()), d)


@functools.lru_cache(maxsize=8)
def _definitions(directory: Path, stamp: tuple) -> dict[str, Experiment]:
    validator = jsonschema.Draft202012Validator(yaml.safe_load(SCHEMA.read_text()))
    out = {}
    for f in sorted(directory.glob("*.yaml")):
        e = _load(f, validator)
        out[e.id] = e
    missing = [e for e in ORDER if e not in out]
    if missing:
        raise ConfigError(f"Failed to load the experiments in {directory}: no definition of "
                          f"{', '.join(missing)} (expected {', '.join(f'{m}.yaml' for m in missing)})")
    return out


def definitions(directory: Path = EXPERIMENTS_DIR) -> dict[str, Experiment]:
    """Every definition, validated (a bad one is refused naming its file and key)."""
    stamp = tuple((f.name, f.stat().st_mtime_ns) for f in sorted(Path(directory).glob("*.yaml")))
    return _definitions(Path(directory), stamp)


def definition(experiment: str) -> Experiment:
    defs = definitions()
    if experiment not in defs:
        raise ConfigError(f"Failed to find experiment {experiment!r}: unknown (known: {', '.join(defs)})")
    return defs[experiment]


@dataclass(frozen=True)
class PlannedTrial:
    experiment: str
    point: dict
    repetition: int

    def trial_dir(self, results_root: Path, testbed: str) -> TrialDir:
        return ResultsTree(Path(results_root), testbed).trial(self.experiment, self.point, self.repetition)


def section(cfg, experiment: str) -> dict:
    """The config's experiments.<id> section (with its schema defaults), {} where it is not sized."""
    return cfg.section("experiments").get(experiment) or {}


def repetitions(cfg, experiment: str) -> int:
    """Repetitions of each point of `experiment`: its section's `repetitions`, else the study's
    experiments.repetitions."""
    return int(section(cfg, experiment).get("repetitions") or cfg.section("experiments")["repetitions"])


def paired(cfg, experiment: str) -> bool:
    """Whether a latency experiment runs the paired design: each repetition measures every LB
    variant in interleaved blocks (config `paired`, default true; false = the thesis's protocol of
    one point per LB, Sec. 7.4)."""
    return definition(experiment).is_latency and bool(section(cfg, experiment).get("paired"))


def is_capacity_point(point: dict) -> bool:
    """A point measuring the maximum that the experiment's levels are shares of (self_capacity_points)."""
    return point.get("level") == CAPACITY


def capacity_shares(sec: dict) -> bool:
    """Whether an experiment's background is a share of a maximum measured in the same run:
    rtt_load's level_unit capacity with a level above 0, update's `load`."""
    return bool((sec.get("level_unit") == "capacity" and any(v > 0 for v in sec.get("levels") or ()))
                or sec.get("load"))


def measured_lbs(cfg, experiment: str) -> list[str]:
    """The LBs whose maxima an experiment's shares are of: the paired design's lbs, the unpaired
    protocol's lb, or (update: a point per LB) its lbs; none left out."""
    sec = section(cfg, experiment)
    from .lb import NONE
    kinds = sec["lbs"] if paired(cfg, experiment) or "lb" not in sec else [sec["lb"]]
    return [x for x in kinds if x != NONE]


def self_capacity_points(cfg, experiment: str) -> list[dict]:
    """capacity_from: self (rtt_load, update): a point {level: max, split, lb} per LB with a maximum
    (measured_lbs) and split (rtt_load), or {level: max, lb} per LB (update, no split), when the
    background is a share of it (capacity_shares). Each measures the path's maximum under the
    dependent points' own conditions (rtt_load: the latency placement, the DNS server, the LB
    attached, the background profile with that split and payload: the split decides which
    backend's XDP program and stack take the frames, on the same CPU as the generator and the LB
    when their NAPI runs inline; update: its udp_payload profile, payload and flows through the
    LB). [] for any other sizing."""
    sec = section(cfg, experiment)
    if sec.get("capacity_from") != "self" or not capacity_shares(sec):
        return []
    lbs = measured_lbs(cfg, experiment)
    if "splits" not in sec:
        return [{"level": CAPACITY, "lb": kind} for kind in lbs]
    return [{"level": CAPACITY, "split": s, "lb": kind} for kind in lbs for s in sec["splits"]]


def points(cfg, experiment: str) -> list[dict]:
    """The measurement points of one experiment on this testbed, in sweep order (the first variable
    varies slowest), from its definition's variables; its capacity points first (self_capacity_points)."""
    d = definition(experiment)
    sec = cfg.section("experiments").get(experiment)
    if sec is None:
        return []
    is_paired = paired(cfg, experiment)
    axes = []
    for v in d.variables:
        if v.get("unless_paired") and is_paired:
            continue
        if v["from"] not in sec:
            raise ConfigError(f"Failed to plan experiment {experiment}: experiments.{experiment}.{v['from']} "
                              f"is not set in {cfg.path} (the variable {v['name']} takes its values from it)")
        vals = sec[v["from"]]
        axes.append((v, list(vals) if isinstance(vals, list) else [vals]))
    out, seen = self_capacity_points(cfg, experiment), set()
    for combo in itertools.product(*(vals for _, vals in axes)):
        pt = {}
        for (v, _), val in zip(axes, combo):
            z = v.get("none_when_zero")
            pt[v["name"]] = NO_SPLIT if z and pt.get(z) == 0 else val
        key = tuple(pt.items())
        if key not in seen:  # a variable that is 'none' collapses its sweep into one point
            seen.add(key)
            out.append(pt)
    return out


def plan(cfg, only: list[str] | None = None) -> list[PlannedTrial]:
    out = []
    for e in only or ORDER:
        reps = repetitions(cfg, e)
        for pt in points(cfg, e):
            out += [PlannedTrial(e, pt, r) for r in range(1, reps + 1)]
    return out
