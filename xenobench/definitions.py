"""The experiments' definitions (experiments/<id>.yaml) as data: loaded, checked against
experiments/schema/definition.schema.yaml and against the tidy schema (tables, metrics), and put in
the plan's order. The one list of experiments: a new file is planned.

This layer reads files only; what a definition asks of the measurement kinds (its kind, procedure,
metrics' outputs, traffic profile) is checked where a plan is made (xenobench.experiments), so the
figures and the report read definitions without loading what measures.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from . import REPO_ROOT
from .errors import ConfigError
from .results import KINDS as TABLES, metric

EXPERIMENTS_DIR = REPO_ROOT / "experiments"
SCHEMA = EXPERIMENTS_DIR / "schema" / "definition.schema.yaml"
NO_SPLIT = "none"      # a split variable where the level it depends on is 0 (none_when_zero): one point
CAPACITY = "max"       # the level of a capacity point (capacity_from: self): its profile unpaced


def is_capacity_point(point: dict) -> bool:
    """A point measuring the maximum that its experiment's levels are shares of."""
    return point.get("level") == CAPACITY


@dataclass(frozen=True)
class Experiment:
    """One definition (experiments/<id>.yaml), as the code reads it."""
    id: str
    order: int         # its place in the plan
    kind: str          # a measurement kind (xenobench.measure.KINDS)
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
    where = f"Failed to load experiment {f}"
    for t in d["tidy"]["tables"]:
        if t not in TABLES:
            raise ConfigError(f"{where}: tidy.tables: {t!r} is not a table of xenobench.results.KINDS "
                              f"(known: {', '.join(TABLES)})")
    for m in d["tidy"].get("metrics") or ():
        if metric(m["metric"]) is None:
            raise ConfigError(f"{where}: tidy.metrics: {m['metric']!r} is not a metric "
                              "xenobench.results.METRICS knows (add its unit and range there)")
    names = [v["name"] for v in d["variables"]]
    for v in d["variables"]:
        if v.get("none_when_zero") and v["none_when_zero"] not in names[:names.index(v["name"])]:
            raise ConfigError(f"Failed to load experiment {f}: variables.{v['name']}.none_when_zero: "
                              f"{v['none_when_zero']!r} is not a variable before it")
    return Experiment(d["id"], int(d["order"]), d["kind"], d["procedure"], d.get("profile"), tuple(d["variables"]),
                      d["tidy"], tuple(d.get("figures") or ()), d)


@functools.lru_cache(maxsize=8)
def _definitions(directory: Path, stamp: tuple) -> dict[str, Experiment]:
    validator = jsonschema.Draft202012Validator(yaml.safe_load(SCHEMA.read_text()))
    out: dict[str, Experiment] = {}
    for f in sorted(directory.glob("*.yaml")):
        e = _load(f, validator)
        same = [o.id for o in out.values() if o.order == e.order]
        if same:
            raise ConfigError(f"Failed to load experiment {f}: order: {e.order} is also {same[0]}'s "
                              f"({directory / same[0]}.yaml): give each experiment its own place in the plan")
        out[e.id] = e
    if not out:
        raise ConfigError(f"Failed to load the experiments in {directory}: no definition (experiments/<id>.yaml)")
    return dict(sorted(out.items(), key=lambda kv: kv[1].order))


def definitions(directory: Path = EXPERIMENTS_DIR) -> dict[str, Experiment]:
    """Every definition, validated (a bad one is refused naming its file and key), in plan order."""
    stamp = tuple((f.name, f.stat().st_mtime_ns) for f in sorted(Path(directory).glob("*.yaml")))
    return _definitions(Path(directory), stamp)


def order() -> tuple[str, ...]:
    """Every experiment's id, in the plan's order (each definition's `order`)."""
    return tuple(definitions())


def definition(experiment: str, defs: dict[str, Experiment] | None = None) -> Experiment:
    """One definition by id (of `defs`, default every definition), an unknown one refused by name."""
    defs = definitions() if defs is None else defs
    if experiment not in defs:
        raise ConfigError(f"Failed to find experiment {experiment!r}: unknown (known: {', '.join(defs)})")
    return defs[experiment]
