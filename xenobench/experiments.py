"""The plan: the experiments' definitions (xenobench.definitions) checked against the measurement
kinds (xenobench.measure: a definition's kind, procedure and the outputs its metrics read) and the
traffic profiles, and expanded with the config's `experiments:` section (its sizes per testbed) into
the points and trials of a study. A definition the plan cannot use is refused by name.
Every trial has an explicit key — experiment, point (its variables in order) and repetition — and
a directory in the results tree (xenobench.layout).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from . import REPO_ROOT, definitions as _data
from .definitions import EXPERIMENTS_DIR, Experiment
from .errors import ConfigError
from .layout import ResultsTree, TrialDir
from .lb import NONE, get_lb, unavailable
from .measure import KINDS as MEASURE_KINDS
from .definitions import CAPACITY, NO_SPLIT, is_capacity_point
from .testbed import get_testbed
from .traffic import generator_of
from .traffic.profiles import PROFILE_DIR, profile_names
from .trials import point_config

__all__ = ["CAPACITY", "NO_SPLIT", "EXPERIMENTS_DIR", "Experiment", "is_capacity_point"]


def check(d: Experiment, directory: Path = EXPERIMENTS_DIR) -> None:
    """What a definition asks of the measurement kinds and the traffic profiles, refused by name."""
    f = Path(directory) / f"{d.id}.yaml"
    d = d.raw
    where = f"Failed to load experiment {f}"
    if d.get("profile") is not None and not (PROFILE_DIR / f"{d['profile']}.py").is_file():
        raise ConfigError(f"{where}: profile: {d['profile']!r} is not a profile of "
                          f"{PROFILE_DIR.relative_to(REPO_ROOT)}/ (known: {', '.join(profile_names())})")
    kind = MEASURE_KINDS.get(d["kind"])
    if kind is None:
        raise ConfigError(f"{where}: kind: {d['kind']!r} is not a measurement kind (known: {', '.join(MEASURE_KINDS)}; "
                          "each is a module of xenobench/measure/)")
    if d["procedure"] not in kind.PROCEDURES:
        raise ConfigError(f"{where}: procedure: {d['procedure']!r} is not a procedure of kind {d['kind']} "
                          f"(known: {', '.join(kind.PROCEDURES)})")
    outs = getattr(kind, "OUTPUTS", ())
    for m in d["tidy"].get("metrics") or ():
        if m["from"].split(".")[0] not in outs:
            raise ConfigError(f"{where}: tidy.metrics.{m['metric']}.from: {m['from']!r} is not "
                              f"an output of kind {d['kind']} (known: {', '.join(outs) or 'none'})")


@functools.lru_cache(maxsize=8)
def _checked(directory: Path, stamp: tuple) -> dict[str, Experiment]:
    out = _data.definitions(directory)
    for d in out.values():
        check(d, directory)
    return out


def definitions(directory: Path = EXPERIMENTS_DIR) -> dict[str, Experiment]:
    """Every definition, validated as data and against the kinds and profiles, in plan order."""
    stamp = tuple((f.name, f.stat().st_mtime_ns) for f in sorted(Path(directory).glob("*.yaml")))
    return _checked(Path(directory), stamp)


def order() -> tuple[str, ...]:
    """Every experiment's id, in the plan's order (each definition's `order`)."""
    return tuple(definitions())


def definition(experiment: str) -> Experiment:
    """One definition, checked as the plan checks them (an unknown id refused by name)."""
    return _data.definition(experiment, definitions())


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


def point_key(cfg, experiment: str, point: dict) -> str:
    """What a point's trials are measured for, as one digest: its variables, the testbed, the
    configuration and definition it runs under (xenobench.trials.point_config) and its planned
    repetition count. The workflow passes it to the point's job, so that Snakemake runs the point
    again when it changed (its `params` trigger) and the point then reuses only the trials recorded
    for it (xenobench.trials.reusable) and measures the rest; without it, an edited size or setting
    left the point's earlier trials standing as if measured with it."""
    doc = {"point": point, "testbed": cfg.name, "repetitions": repetitions(cfg, experiment),
           "config": point_config(cfg, experiment, definition(experiment).raw)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def paired(cfg, experiment: str) -> bool:
    """Whether an experiment runs a paired design: each repetition measures every LB of its list in
    interleaved blocks against a reference (config `paired`): latency (default true; false = the
    thesis's protocol of one point per LB, Sec. 7.4), rate (pps, compare, loss: default false, the
    thesis's protocol; true = the interleaved rate design of xenobench.measure.rank) and search
    (ndr_pdr: default false; true = one search per LB taking turns, xenobench.measure.search)."""
    return definition(experiment).kind in ("latency", "rate", "search") and bool(section(cfg, experiment).get("paired"))


def capacity_shares(sec: dict) -> bool:
    """Whether an experiment's background is a share of a maximum measured in the same run:
    rtt_load's level_unit capacity with a level above 0, update's `load`."""
    return bool((sec.get("level_unit") == "capacity" and any(v > 0 for v in sec.get("levels") or ()))
                or sec.get("load"))


# --- LBs the testbed cannot run -----------------------------------------------------------------
@dataclass(frozen=True)
class LeftOut:
    """An LB of an experiment's lists that the plan leaves out: the experiment, the LB kind, where
    it is listed (lbs, lb), the points dropped and why (its kind's xenobench.lb.unavailable)."""
    experiment: str
    lb: str
    key: str
    points: int
    reason: str

    def line(self) -> str:
        return (f"{self.experiment}: {self.lb} left out of experiments.{self.experiment}.{self.key} "
                f"({self.points} point(s)): {self.reason}")


def why_not(cfg, kind: str) -> str | None:
    """Why the config's testbed cannot run LB `kind` (xenobench.lb.unavailable: its own prerequisites,
    a Katran without an L3 hop, a XenoFlow without a DPU), None when it can."""
    return None if kind == NONE else unavailable(kind, cfg)


def listed_lbs(cfg, experiment: str) -> list[tuple[str, str]]:
    """(kind, key) of every LB an experiment's section lists: experiments.<id>.lbs, then .lb."""
    sec = section(cfg, experiment)
    return [(k, "lbs") for k in sec.get("lbs") or ()] + ([(sec["lb"], "lb")] if sec.get("lb") else [])


def available_lbs(cfg, experiment: str) -> list[str]:
    """The experiment's `lbs` the testbed can run (in order, `none` kept): what a paired design's
    repetition switches among (its facts' `lbs`)."""
    return [k for k in section(cfg, experiment).get("lbs") or () if not why_not(cfg, k)]


def flow_lbs(cfg) -> tuple[str, ...]:
    """Every LB the config's latency experiments list that the testbed can run, once each in plan
    order: the probes' one flow reaches the DNS backend through every one of them
    (xenobench.rtt.probe_flow), so every RTT of the study is of the same frames."""
    out: dict[str, None] = {}
    for e in order():
        if definition(e).is_latency and section(cfg, e):
            out.update((k, None) for k, _ in listed_lbs(cfg, e) if k != NONE and not why_not(cfg, k))
    return tuple(out)


def left_out(cfg, only: list[str] | None = None) -> list[LeftOut]:
    """Every LB the plan leaves out, per experiment that lists it, with its reason and the number
    of points dropped (a paired design's LB drops none: its repetitions switch among the others):
    what `deploy`'s readiness table and the report list."""
    out = []
    for e in only or order():
        if not section(cfg, e):
            continue
        for kind, key in listed_lbs(cfg, e):
            why = why_not(cfg, kind)
            if why:
                n = sum(1 for pt in _all_points(cfg, e) if pt.get("lb") == kind)
                out.append(LeftOut(e, kind, key, n, why))
    return out


def record_left_out(cfg, path: Path) -> list[LeftOut]:
    """Write left_out(cfg) to `path` as JSON ([{experiment, lb, key, points, reason, line}]): the
    plan's record for what reads no plan (the report, which must not import this module)."""
    out = left_out(cfg)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps([{**dataclasses.asdict(x), "line": x.line()} for x in out], indent=1) + "\n")
    return out


def measured_lbs(cfg, experiment: str) -> list[str]:
    """The LBs whose maxima an experiment's shares are of: the paired design's lbs, the unpaired
    protocol's lb, or (update: a point per LB) its lbs; `none` and the LBs the testbed cannot run
    (left_out) left out."""
    sec = section(cfg, experiment)
    kinds = sec["lbs"] if paired(cfg, experiment) or "lb" not in sec else [sec["lb"]]
    return [x for x in kinds if x != NONE and not why_not(cfg, x)]


def self_capacity_points(cfg, experiment: str) -> list[dict]:
    """capacity_from: self (rtt_load, update): a point {level: max, split, lb} per LB with a maximum
    (measured_lbs) and split (rtt_load), or {level: max, lb} per LB (update, no split), when the
    background is a share of it (capacity_shares). Each measures the path's maximum under the
    dependent points' own conditions (rtt_load: the latency placement, the DNS server, the LB
    attached, the background profile with that split and payload: the split decides which
    backend's XDP program and stack take the frames, on the same CPU as the generator and the LB
    when their NAPI runs inline; update: its udp_payload profile, payload and flows through the
    LB). [] for any other sizing."""
    return [pt for pt in _self_capacity_points(cfg, experiment) if not why_not(cfg, pt["lb"])]


def _self_capacity_points(cfg, experiment: str) -> list[dict]:
    sec = section(cfg, experiment)
    if sec.get("capacity_from") != "self" or not capacity_shares(sec):
        return []
    sec_lbs = sec["lbs"] if paired(cfg, experiment) or "lb" not in sec else [sec["lb"]]
    lbs = [x for x in sec_lbs if x != NONE]
    if "splits" not in sec:
        return [{"level": CAPACITY, "lb": kind} for kind in lbs]
    return [{"level": CAPACITY, "split": s, "lb": kind} for kind in lbs for s in sec["splits"]]


def points(cfg, experiment: str) -> list[dict]:
    """The measurement points of one experiment on this testbed, in sweep order (the first variable
    varies slowest), from its definition's variables; its capacity points first (self_capacity_points).
    A point of an LB the testbed cannot run is not one of them (left_out says which and why)."""
    return [pt for pt in _all_points(cfg, experiment) if not why_not(cfg, pt.get("lb", NONE))]


def _all_points(cfg, experiment: str) -> list[dict]:
    """points() before the LBs the testbed cannot run are left out (their capacity points too)."""
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
    if not axes and is_paired:  # every variable was the LB: one point, named by what the blocks are compared with
        axes.append(({"name": "reference"}, [sec.get("reference", NONE)]))
    out, seen = _self_capacity_points(cfg, experiment), set()
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


def capacity_points(cfg, experiment: str = "rtt_load", point: dict | None = None) -> list[tuple[str, dict]]:
    """(experiment, point) whose valid trials give the maxima an experiment's shares are of
    (rtt_load's capacity levels, update's load): capacity_from self, the experiment's own capacity
    points (xenobench.experiments.self_capacity_points; given a point, those of its split or its
    LB); compare, or the pps point at its payload, one per LB of its points; [] for absolute
    rates, an experiment not sized, and given a point that needs none (level 0, a capacity point).
    The workflow runs them before the points needing them (rules/common.smk); a point the config
    does not plan is refused by name."""
    ex = section(cfg, experiment)
    if not ex or not capacity_shares(ex):
        return []
    if point is not None and (is_capacity_point(point) or float(point.get("level", 1)) <= 0):
        return []
    if ex["capacity_from"] == "self":
        return [(experiment, pt) for pt in self_capacity_points(cfg, experiment)
                if point is None or all(pt[k] == point[k] for k in ("split", "lb") if k in point)]
    lbs = measured_lbs(cfg, experiment)
    src, payload = ex["capacity_from"], int(ex["payload"])
    if paired(cfg, src):  # its blocks are rates of a design with switches, not one LB's steady maximum
        raise ConfigError(f"Failed to plan {experiment}'s capacity levels: experiments.{src} runs the paired design "
                          f"(paired: true) in {cfg.path}, which measures no LB's maximum alone (set "
                          f"experiments.{experiment}.capacity_from: self, or experiments.{src}.paired: false)")
    planned = points(cfg, src)
    out = []
    for kind in lbs:
        want = {"lb": kind} if src == "compare" else {"lb": kind, "payload": payload}
        if src == "compare" and int(section(cfg, "compare").get("payload", -1)) != payload:
            raise ConfigError(f"Failed to plan {experiment}'s capacity levels: experiments.compare.payload "
                              f"{section(cfg, 'compare').get('payload')} is not experiments.{experiment}.payload {payload} "
                              f"in {cfg.path} (set capacity_from: pps, or the same payload)")
        if want not in planned:
            raise ConfigError(f"Failed to plan {experiment}'s capacity levels: {src} does not measure LB {kind!r}"
                              f"{'' if src == 'compare' else f' at {payload} B'} in {cfg.path} (add it to "
                              f"experiments.{src}.lbs{'' if src == 'compare' else ' and payloads'}, or set "
                              f"experiments.{experiment}.level_unit: pps)")
        out.append((src, want))
    return out


def check_lbs(cfg, experiment: str, testbed=None) -> None:
    """Refuse by name an LB of an experiment's lists (experiments.<id>.lbs, .lb) that lacks what
    the experiment's kind needs of it (its module's LB_NEED: what the LB must do, the driver's
    attribute that says why it cannot, the driver -> that reason or None; a kind without one needs
    nothing beyond the contract of xenobench.lb.base.LoadBalancer), built-in or not; nothing is
    started. `testbed`: the one the drivers are asked about (default: the config's)."""
    need = getattr(MEASURE_KINDS[definition(experiment).kind], "LB_NEED", None)
    sec = section(cfg, experiment)
    if need is None or not sec:
        return
    what, attr, why = need
    listed = listed_lbs(cfg, experiment)
    if testbed is None:
        testbed = get_testbed(cfg)
    for kind, key in listed:
        if kind == NONE or why_not(cfg, kind):  # left out of the plan (left_out), not refused
            continue
        reason = why(get_lb(kind, testbed))
        if reason:
            raise ConfigError(f"Failed to plan experiment {experiment}: LB {kind!r} cannot {what} (its driver's "
                              f"{attr}: {reason}): leave it out of experiments.{experiment}.{key} in {cfg.path}")


def plan(cfg, only: list[str] | None = None, testbed=None) -> list[PlannedTrial]:
    """Every trial of the study (or of `only`'s experiments), in plan order; a generator the traffic
    layer does not have and an LB lacking what its experiment needs (check_lbs) are refused here,
    before anything runs. The points of an LB the testbed cannot run are not planned (left_out:
    which, and why), and the rest of the study runs."""
    generator_of(cfg)
    out = []
    for e in only or order():
        kind = MEASURE_KINDS[definition(e).kind]
        if section(cfg, e) and hasattr(kind, "check_section"):  # what the kind asks of its section
            kind.check_section(cfg, e, section(cfg, e))
        check_lbs(cfg, e, testbed)
        reps = repetitions(cfg, e)
        for pt in points(cfg, e):
            out += [PlannedTrial(e, pt, r) for r in range(1, reps + 1)]
    return out
