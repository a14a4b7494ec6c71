"""How evenly a load balancer spreads a population over its backends: the figures of the
distribution experiment (experiments/distribution.yaml, xenobench.measure.distribution), computed
here once for the rows, the figure and the report.

- share: a backend's part of what all backends got (frames or flows), 0..1;
- Jain's index (R. Jain, D. Chiu, W. Hawe, DEC-TR-301, 1984) of x_i = share_i / weight_i, the
  backends file's weight share w_i: (sum x)^2 / (n sum x^2), 1 when every backend got its weight's
  share, 1/n when one got everything;
- max/min: the largest x_i over the smallest (None where a backend got nothing: unbounded);
- the chi-square distance from the weights: sum (share_i - w_i)^2 / w_i (0: exactly the weights;
  dimensionless, independent of how many frames were counted, unlike Pearson's statistic);
- disruption: the share of a population's flows whose backend differs between two backend sets,
  and among them those that were not on the backend that left (moved without need).

A per-backend row names its backend in the metric: `<measure>@<backend>` (backend_metric,
split_backend), as the paired rows name their reference (rtt_vs_<ref>_...): the tidy columns
have no backend column.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np

from . import REPO_ROOT

SEP = "@"
#: the tidy metrics of one (LB, population) over its backends (fairness)
FAIRNESS_METRICS = ("jain_index", "max_min_ratio", "chi2_distance", "max_share", "min_share")
CI_LEVEL = 0.95
#: the distribution experiment's profile (experiments/distribution.yaml `profile`): its POPULATIONS order
#: the figure's panels and the report's rows
POPULATION_PROFILE = REPO_ROOT / "trex_profiles" / "population.py"
_POPULATION = re.compile(r"(?:^|_)population-([^_]+)")  # a point's population variable (xenobench.layout.point_id)


def populations(profile: Path = POPULATION_PROFILE) -> tuple[str, ...]:
    """The client populations a profile offers, in its order: its module-level POPULATIONS, a
    literal tuple read from the source without running it (a profile imports the TRex client, as
    xenobench.traffic.profiles.declared_tunables reads TESTBED_TUNABLES); () for a profile without one."""
    for node in ast.parse(Path(profile).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "POPULATIONS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def backend_metric(measure: str, backend: str) -> str:
    """The metric of one backend's value: `frame_share@fips2`."""
    return f"{measure}{SEP}{backend}"


def split_backend(metric: str) -> tuple[str, str | None]:
    """(measure, backend) of a per-backend metric; (metric, None) for any other."""
    m, sep, b = metric.partition(SEP)
    return (m, b) if sep else (metric, None)


def population_of(point: str) -> str:
    """The population of a distribution point's id (`lb-ebpf_population-nat` -> nat)."""
    m = _POPULATION.search(point)
    return m.group(1) if m else point


def shares(counts: dict[str, float]) -> dict[str, float] | None:
    """Each key's part of the total; None when the total is 0."""
    total = float(sum(counts.values()))
    return {k: v / total for k, v in counts.items()} if total > 0 else None


def jain_index(x) -> float:
    """(sum x)^2 / (n sum x^2); NaN for no values or all zero."""
    x = np.asarray(list(x), dtype=float)
    sq = float((x * x).sum())
    return float(x.sum() ** 2 / (len(x) * sq)) if len(x) and sq > 0 else math.nan


def max_min_ratio(x) -> float | None:
    """max x / min x; None where the smallest is 0."""
    x = np.asarray(list(x), dtype=float)
    return float(x.max() / x.min()) if len(x) and x.min() > 0 else None


def chi2_distance(share: dict[str, float], weight: dict[str, float]) -> float:
    """sum over the weighted backends of (share - weight)^2 / weight."""
    return float(sum((share.get(b, 0.0) - w) ** 2 / w for b, w in weight.items() if w > 0))


def fairness(share: dict[str, float], weight: dict[str, float]) -> dict[str, float | None]:
    """Jain's index and max/min of share/weight per backend of `weight`, the chi-square distance,
    the largest and smallest share (FAIRNESS_METRICS)."""
    x = [share.get(b, 0.0) / w for b, w in weight.items() if w > 0]
    vals = [share.get(b, 0.0) for b in weight]
    return {"jain_index": jain_index(x), "max_min_ratio": max_min_ratio(x),
            "chi2_distance": chi2_distance(share, weight), "max_share": max(vals), "min_share": min(vals)}


def moved(before: dict, after: dict, gone: str | None = None) -> dict[str, float | int]:
    """Flows (the keys both answer for) whose backend differs between `before` and `after`, as a
    share of those flows; `other`: the share that moved although they were not on `gone` (the
    backend that left or joined), which an ideal rule never moves."""
    keys = [k for k in before if before[k] is not None and after.get(k) is not None]
    if not keys:
        return {"flows": 0, "moved": math.nan, "other": math.nan}
    changed = [k for k in keys if before[k] != after[k]]
    other = [k for k in changed if before[k] != gone and after[k] != gone]
    return {"flows": len(keys), "moved": len(changed) / len(keys), "other": len(other) / len(keys)}


def mean_interval(values, level: float = CI_LEVEL) -> tuple[float, float, float] | None:
    """(mean, low, high): Student's t interval of the mean of a point's repetitions; None for
    fewer than two."""
    v = np.asarray(list(values), dtype=float)
    if len(v) < 2:
        return None
    from .diff import t_quantile  # the project's t quantile (scipy is not a dependency)
    m = float(v.mean())
    h = t_quantile(1 - (1 - level) / 2, len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v))
    return m, m - h, m + h


def summary(dist, disruption=None) -> list[dict]:
    """Per (population, LB) of a distribution table's per-trial rows (pandas): the medians over the
    repetitions of Jain's index, max/min (None where a backend got nothing in a repetition:
    unbounded), the chi-square distance and the rule's flows' Jain index, the share of flows the
    rule moves when the last backend leaves and the ideal 1/N (from the disruption table), and the
    repetitions; in the profile's order of populations, then the LB kinds' order."""
    from .lb import LBS
    d = dist[dist.repetition.notna()]
    out = []
    for (point, lb), g in d.groupby(["point", "lb"], sort=False):
        def med(frame, m):
            v = frame[frame.metric == m].value
            return float(v.median()) if len(v) else None
        n = int(g.repetition.nunique())
        mm = g[g.metric == "max_min_ratio"].value
        moved_rows = disruption[(disruption.point == point) & (disruption.lb == lb)] if disruption is not None else g[:0]
        out.append({"population": population_of(point), "lb": lb, "jain_index": med(g, "jain_index"),
                    "max_min_ratio": float(mm.median()) if len(mm) == n else None,
                    "chi2_distance": med(g, "chi2_distance"), "rule_flow_jain_index": med(g, "rule_flow_jain_index"),
                    "moved_on_remove": med(moved_rows, "moved_on_remove_share"),
                    "moved_ideal": med(moved_rows, "moved_ideal_share"), "repetitions": n})
    pops, kinds = populations(), list(LBS)
    return sorted(out, key=lambda r: (pops.index(r["population"]) if r["population"] in pops else len(pops),
                                      kinds.index(r["lb"]) if r["lb"] in kinds else len(kinds), r["population"], r["lb"]))
