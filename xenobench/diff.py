"""Two results trees compared point by point: `xenobench diff A B` (docs/results.md).

A and B are directories of tidy CSVs (two runs, two commits, two testbeds). A row of one is matched
with the rows of the other that share its table and KEY (experiment, point, lb, metric and the
columns that say under which conditions it was measured; an empty cell matches an empty cell).
What only one side measured is listed apart, never compared.

Rows over all repetitions of a point (`repetition` empty: the paired and ranked designs' medians,
interval bounds, verdicts, counts) are point summaries, one value a run: never compared as
metrics. Where they print an interval (<stem>_median, _ci_low, _ci_high, _verdict) they are read
apart (Printed): each run's median against the other's interval and against the rerun interval
(RERUN_WIDEN), and the verdicts side by side: what a reader of one run expects of a rerun.

Per matched key and metric (only metrics with a better direction, xenobench.results.Metric.better):

- the medians of each side's values (its repetitions, or its samples: rtt_samples, blocks, cycles);
- B / A of the medians, or B - A for microsecond metrics (round trips) and percentages (loss, spread),
  and for a metric whose values are not all above zero;
- MIN_VALUES values or more a side: a percentile bootstrap interval (CI_LEVEL), each side resampled on
  its own, its repetitions with replacement and then the values inside each drawn repetition (the
  run-to-run spread counts, not only the sample-to-sample one), `resamples` draws from numpy's
  default_rng(seed) (both recorded). With 3 values a side such an interval excludes no change whenever
  the two sides do not overlap, which two runs of one distribution do by chance 1 time in 10
  (2 / C(6, 3)); with 2, 1 time in 3: too few for it;
- fewer, where the key is compared as a ratio (the rates of 2 or 3 repetitions a point): a Welch t
  interval (log_t_interval) on the log of the per-repetition values, B / A of their geometric means,
  each run's variance pooled over the points of one experiment, LB and metric (POOL_BY: an LB's
  repetitions spread alike, relative to their rate, at every payload), so that two repetitions a
  point still give an interval from every repetition of the run. Fewer values compared as a
  difference, or one repetition a side in every point (no spread to pool): no interval (shown with
  --all, never judged);
- the verdict: `better` or `worse` where the interval excludes no change (1 for a ratio, 0 for a
  difference), in the metric's better direction; `not distinguishable` otherwise.

Either interval covers the spread of the repetitions within each run, not a change of the machine
between the two runs (its state, placement, other load: drift): between two runs on a shared machine
a `worse` can be the machine's.

`change` puts a comparison on one scale for `--fail-worse`: the relative change of the medians in %
(B/A - 1, or (B - A) / |A|), for percentages the difference in percentage points (a loss from 0.1 %
to 0.2 % is 0.1 points, not +100 %).
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import DataError
from .latency import CI_LEVEL, NOT_DISTINGUISHABLE
from .results import HIGHER, KINDS, LOWER, metric, read_all, read_sidecar, write_rows

#: the columns that key a row besides its table: what was measured, with which LB, under which conditions
#: (not background_pps: a background's rate is a share of the LB's maximum measured in the same run,
#: different in every run; the point names its level)
KEY = ("experiment", "point", "lb", "metric", "payload_bytes", "server", "split", "changes_per_s", "generator")
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 1
DIFFERENCE_UNITS = ("us", "%")  # compared as B - A: round trips, percentages
BETTER, WORSE = "better", "worse"
NO_INTERVAL = "no interval"
MIN_VALUES = 4  # per side for a bootstrap interval (module docstring)
MAX_DRAW_CELLS = 4_000_000  # values drawn per numpy call in a plain bootstrap (bounds memory to ~32 MB)
#: what a run's spread of per-repetition values is pooled over: the points of one experiment, LB,
#: metric and generator (its payloads, splits, rates)
POOL_BY = ("experiment", "lb", "metric", "generator")
BOOTSTRAP, T_LOG = "bootstrap", "t on logs"  # Comparison.method
#: why a key is not judged (one line per table counts them; --all lists them)
WHY_SUMMARY = "point summaries (rows over all repetitions of a point: one value a run; their intervals below)"
WHY_UNDIRECTED = "without a better direction"
WHY_FEW_DIFFERENCE = f"fewer than {MIN_VALUES} values a side, compared as a difference (us, %)"
WHY_NO_SPREAD = "one repetition a side in every point (no spread to pool)"
ONLY = "only in {}"


@dataclass
class Comparison:
    """One key measured on both sides."""
    table: str
    where: dict  # KEY -> value ("" or None where empty)
    unit: str
    better: str  # HIGHER | LOWER
    mode: str  # "ratio" (B / A) | "difference" (B - A)
    n_a: int
    n_b: int
    repetitions_a: int
    repetitions_b: int
    median_a: float
    median_b: float
    estimate: float  # B / A or B - A of the medians
    ci_low: float | None
    ci_high: float | None
    change: float | None  # on the --fail-worse scale (module docstring)
    change_unit: str  # "%" (relative) | "pp" (percentage points)
    verdict: str
    method: str = ""  # BOOTSTRAP | T_LOG | "" (no interval)
    why: str = ""  # why there is no interval (WHY_*), "" with one

    def worse_by(self, pct: float) -> bool:
        """Worse (interval excluding no change) by more than pct on the change scale."""
        return self.verdict == WORSE and self.change is not None and abs(self.change) > pct


@dataclass
class OneSide:
    """A key only one tree measured."""
    side: str  # "A" | "B"
    table: str
    where: dict
    n: int
    median: float


@dataclass
class Printed:
    """An interval both runs printed for one key (the paired designs' differences, the ranked ratios:
    <stem>_median, _ci_low, _ci_high and _verdict rows), each run's estimate read against the
    other's interval: what a reader of one run expects of a rerun."""
    table: str
    where: dict  # KEY, its metric the stem (e.g. rate_vs_wire, rtt_vs_none)
    unit: str
    a: tuple[float, float, float]  # median, interval low, interval high
    b: tuple[float, float, float]
    verdict_a: int | None  # -1, 0, 1 (the stem's _verdict row); None where the run printed none
    verdict_b: int | None

    @property
    def a_in_b(self) -> bool:
        return _inside(self.a[0], self.b)

    @property
    def b_in_a(self) -> bool:
        return _inside(self.b[0], self.a)

    @property
    def a_in_b_rerun(self) -> bool:
        return _inside(self.a[0], self.b, RERUN_WIDEN)

    @property
    def b_in_a_rerun(self) -> bool:
        return _inside(self.b[0], self.a, RERUN_WIDEN)

    @property
    def same_verdict(self) -> bool | None:
        return None if self.verdict_a is None or self.verdict_b is None else self.verdict_a == self.verdict_b


@dataclass
class Skipped:
    """A key both or one side holds that is never compared: a point summary, a metric without a
    better direction."""
    table: str
    metric: str
    why: str  # WHY_SUMMARY | WHY_UNDIRECTED


@dataclass
class Tree:
    """What a results tree says about itself: its testbeds (the rows' column), and from the tables'
    sidecars the commits and the times they were written."""
    path: str
    tables: list[str]
    testbeds: list[str]
    commits: list[str]
    written: list[str]  # earliest and latest written_utc of its tables' sidecars


@dataclass
class Diff:
    a: Tree
    b: Tree
    comparisons: list[Comparison]
    only: list[OneSide]
    undirected: list[str]  # metrics both measured that have no better direction: not compared
    printed: list[Printed]
    seed: int
    resamples: int
    level: float = CI_LEVEL
    notes: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def worse(self, pct: float) -> list[Comparison]:
        return [c for c in self.comparisons if c.worse_by(pct)]

    def counts(self) -> dict[str, int]:
        out = {BETTER: 0, WORSE: 0, NOT_DISTINGUISHABLE: 0, NO_INTERVAL: 0}
        for c in self.comparisons:
            out[c.verdict] += 1
        return out

    def printed_counts(self) -> dict[str, int]:
        p = self.printed
        return {"intervals": len(p), "a_in_b": sum(x.a_in_b for x in p), "b_in_a": sum(x.b_in_a for x in p),
                "both_ways": sum(x.a_in_b and x.b_in_a for x in p),
                "a_in_b_rerun": sum(x.a_in_b_rerun for x in p), "b_in_a_rerun": sum(x.b_in_a_rerun for x in p),
                "verdicts": sum(x.same_verdict is not None for x in p),
                "same_verdict": sum(bool(x.same_verdict) for x in p)}

    def not_judged(self) -> dict[str, dict[str, int]]:
        """Per table, the keys not judged by why: no interval (Comparison.why), never compared
        (Skipped.why), one side only."""
        out: dict[str, dict[str, int]] = {}
        whys = [(c.table, c.why) for c in self.comparisons if c.verdict == NO_INTERVAL]
        whys += [(s.table, s.why) for s in self.skipped] + [(o.table, ONLY.format(o.side)) for o in self.only]
        for table, why in whys:
            out.setdefault(table, {}).setdefault(why, 0)
            out[table][why] += 1
        return out


# --- reading ---------------------------------------------------------------------------------------
def _tree(path: str | Path) -> tuple[Tree, dict[str, pd.DataFrame]]:
    p = Path(path)
    if not p.is_dir():
        raise DataError(f"Failed to diff {p}: no such directory (a results tree: the directory holding "
                        "the tidy CSVs, e.g. results/local)")
    tables = read_all(p)
    if not tables:
        raise DataError(f"Failed to diff {p}: no tidy table in it (none of {', '.join(f'{k}.csv' for k in KINDS)}); "
                        f"write them with `xenobench experiment aggregate {p}`")
    testbeds = sorted({str(t) for df in tables.values() for t in df.testbed.unique()})
    metas = [m for k in tables if (m := read_sidecar(p, k)) is not None]
    commits = sorted({str(m["commit"]) for m in metas if m.get("commit")})
    times = sorted(str(m["written_utc"]) for m in metas if m.get("written_utc"))
    written = [times[0], times[-1]] if times else []
    return Tree(str(p), sorted(tables), testbeds, commits, written), tables


_NUMERIC_KEY = ("payload_bytes", "changes_per_s")


def keyed(df: pd.DataFrame) -> pd.DataFrame:
    """The rows with their key cells as text ("" where empty), so empty matches empty."""
    out = df.copy()
    for c in KEY:
        v = out[c]
        if c in _NUMERIC_KEY:
            out[f"k_{c}"] = v.map(lambda x: "" if pd.isna(x) else f"{x:g}")
        else:
            out[f"k_{c}"] = v.astype(object).map(lambda x: "" if pd.isna(x) else str(x))
    return out


def _where(kv: tuple) -> dict:
    """A key's cells: None where empty, numbers as numbers."""
    return {c: (None if v == "" else float(v) if c in _NUMERIC_KEY else v) for c, v in zip(KEY, kv)}


#: A run's interval is its median's: a rerun's median carries its own noise as well, so the
#: difference of two runs' medians has about sqrt(2) the spread of one. A 95 % interval holds a rerun's
#: median about 83 % of the time (P(|Z| < 1.96 / sqrt(2)), both runs alike and normal); widened by
#: sqrt(2) on each side, about 95 %: the rerun interval
RERUN_WIDEN = math.sqrt(2)


def _inside(x: float, iv: tuple[float, float, float], widen: float = 1.0) -> bool:
    """x within the interval (median, low, high), each side widened by `widen` about the median."""
    m, lo, hi = iv
    return m - widen * (m - lo) <= x <= m + widen * (hi - m)


#: a printed interval's rows: <stem>_median, <stem>_ci_low, <stem>_ci_high (each with _us for
#: microseconds) and <stem>_verdict (xenobench.results' patterns for the paired and ranked rows)
_PRINTED = re.compile(r"(?P<stem>.+)_(?P<part>median|ci_low|ci_high)(?:_us)?|(?P<vstem>.+)_verdict")


def printed_parts(x: pd.DataFrame) -> dict[tuple, dict[str, tuple[float, str] | None]]:
    """A keyed table's printed intervals: per key (its metric the stem) the parts present, each
    (value, unit), None where a part is not one row."""
    out: dict[tuple, dict] = {}
    summary = x[x.repetition.isna()]
    for kv, g in summary.groupby([f"k_{c}" for c in KEY], sort=True):
        m = _PRINTED.fullmatch(kv[KEY.index("metric")])
        if m is None:
            continue
        stem, part = (m["stem"], m["part"]) if m["stem"] else (m["vstem"], "verdict")
        key = tuple(stem if c == "metric" else v for c, v in zip(KEY, kv))
        out.setdefault(key, {})[part] = (float(g.value.iloc[0]), str(g.unit.iloc[0])) if len(g) == 1 else None
    return out


INTERVAL_PARTS = ("median", "ci_low", "ci_high")


def _printed(table: str, xa: pd.DataFrame, xb: pd.DataFrame) -> list[Printed]:
    """The intervals both trees printed for one table's keys (a key whose parts are not one row each
    on both sides is not read)."""
    pa, pb = printed_parts(xa), printed_parts(xb)
    out = []
    for key in sorted(set(pa) & set(pb)):
        sa, sb = pa[key], pb[key]
        if not all(sa.get(k) and sb.get(k) for k in INTERVAL_PARTS):
            continue
        va, vb = sa.get("verdict"), sb.get("verdict")
        out.append(Printed(table, _where(key), sa["median"][1], tuple(sa[k][0] for k in INTERVAL_PARTS),
                           tuple(sb[k][0] for k in INTERVAL_PARTS), int(va[0]) if va else None,
                           int(vb[0]) if vb else None))
    return out


# --- statistics ------------------------------------------------------------------------------------
def _groups(g: pd.DataFrame) -> list[np.ndarray]:
    """A side's values by repetition (rows without one: one group)."""
    rep = g.repetition.fillna(-1)
    return [grp.value.to_numpy(dtype=float) for _, grp in g.groupby(rep, sort=True)]


def _boot_medians(groups: list[np.ndarray], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of `resamples` bootstrap draws: repetitions with replacement, then the values inside
    each drawn repetition with replacement; one repetition (or one value per repetition): the values."""
    if len(groups) == 1 or all(len(x) == 1 for x in groups):
        pooled = np.concatenate(groups)
        n = len(pooled)
        out = np.empty(resamples)
        step = max(1, MAX_DRAW_CELLS // n)
        for s in range(0, resamples, step):
            k = min(step, resamples - s)
            out[s:s + k] = np.median(pooled[rng.integers(0, n, (k, n))], axis=1)
        return out
    out = np.empty(resamples)
    for i in range(resamples):
        picked = rng.integers(0, len(groups), len(groups))
        out[i] = np.median(np.concatenate([groups[j][rng.integers(0, len(groups[j]), len(groups[j]))]
                                           for j in picked]))
    return out


#: Student's t quantiles: the density integrated on [0, T_GRID_MAX] in T_GRID_POINTS steps (numpy only:
#: scipy is not a dependency, as in xenobench.compare.flat_p_value); the 97.5 % point of 1 degree of
#: freedom, the widest used, is 12.7
T_GRID_MAX, T_GRID_POINTS = 100.0, 200_001


@functools.lru_cache(maxsize=512)
def _t_quantile(p: float, df: float) -> float:
    x = np.linspace(0.0, T_GRID_MAX, T_GRID_POINTS)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    pdf = np.exp(log_c - (df + 1) / 2 * np.log1p(x * x / df))
    cdf = 0.5 + np.concatenate([[0.0], np.cumsum((pdf[1:] + pdf[:-1]) / 2 * np.diff(x))])
    return float(np.interp(p, cdf, x))


def t_quantile(p: float, df: float) -> float:
    """Student's t p-quantile (0.5 <= p < 1) with df >= 1 degrees of freedom (not necessarily whole)."""
    if not (0.5 <= p < 1 and df >= 1):
        raise ValueError(f"t_quantile: p {p!r} (0.5 .. 1), df {df!r} (>= 1)")
    return _t_quantile(round(float(p), 6), round(float(df), 3))


@dataclass(frozen=True)
class Spread:
    """A run's spread of the log of per-repetition values, pooled over points (POOL_BY)."""
    ss: float  # squared deviations of each point's log values from their mean, summed over the points
    df: int  # (repetitions - 1) summed over the points

    @property
    def var(self) -> float:
        return self.ss / self.df


def rep_values(g: pd.DataFrame) -> np.ndarray:
    """One value per repetition: the median of its rows (rows without a repetition: none)."""
    g = g[g.repetition.notna()]
    return g.groupby("repetition", sort=True).value.median().to_numpy(dtype=float)


def pooled_spreads(by: dict[tuple, pd.DataFrame]) -> dict[tuple, Spread]:
    """Per POOL_BY group of a side's keys (KEY cells), the spread of the log of its per-repetition
    values about each point's mean, over the points with 2 or more repetitions, all values above 0."""
    acc: dict[tuple, list[float]] = {}
    for kv, g in by.items():
        v = rep_values(g)
        if len(v) < 2 or not (v > 0).all():
            continue
        x = np.log(v)
        s = acc.setdefault(_pool_key(kv), [0.0, 0])
        s[0] += float(((x - x.mean()) ** 2).sum())
        s[1] += len(x) - 1
    return {k: Spread(ss, df) for k, (ss, df) in acc.items()}


def _pool_key(kv: tuple) -> tuple:
    return tuple(kv[KEY.index(c)] for c in POOL_BY)


def log_t_interval(va: np.ndarray, vb: np.ndarray, sa: Spread, sb: Spread,
                   level: float = CI_LEVEL) -> tuple[float, float, float]:
    """(B / A of the geometric means, low, high): Welch's t interval of the difference of the mean
    logs, each side's variance its pooled one (Welch-Satterthwaite degrees of freedom from theirs)."""
    a, b = sa.var / len(va), sb.var / len(vb)
    d = float(np.log(vb).mean() - np.log(va).mean())
    df = (a + b) ** 2 / (a * a / sa.df + b * b / sb.df) if a + b > 0 else sa.df + sb.df
    h = t_quantile(1 - (1 - level) / 2, df) * math.sqrt(a + b)
    return math.exp(d), math.exp(d - h), math.exp(d + h)


def relative_half_width(values: np.ndarray, unit: str, level: float = CI_LEVEL) -> float | None:
    """The half-width of the t interval of the mean of one point's per-repetition values, relative:
    on their logs (exp(h) - 1) where all are above 0 and not us or %, else to |mean| (% metrics: to
    what was delivered, 100 - mean); None from fewer than 2 values."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return None
    q = t_quantile(1 - (1 - level) / 2, len(v) - 1) / math.sqrt(len(v))
    if unit not in DIFFERENCE_UNITS and (v > 0).all():
        return math.expm1(q * float(np.log(v).std(ddof=1)))
    scale = 100 - abs(v.mean()) if unit == "%" else abs(v.mean())
    h = q * float(v.std(ddof=1))
    return h / scale if scale > 0 else (0.0 if h == 0 else math.inf)


def _verdict(lo: float, hi: float, null: float, better: str) -> str:
    if lo > null:
        return BETTER if better == HIGHER else WORSE
    if hi < null:
        return BETTER if better == LOWER else WORSE
    return NOT_DISTINGUISHABLE


def compare_values(a: pd.DataFrame, b: pd.DataFrame, unit: str, better: str, resamples: int, seed: int,
                   table: str = "", where: dict | None = None,
                   spreads: tuple[Spread | None, Spread | None] = (None, None)) -> Comparison:
    """One key's rows of each side (value, repetition) compared (module docstring); `spreads`: each
    side's pooled spread of its key's group (pooled_spreads), for fewer than MIN_VALUES values."""
    ga, gb = _groups(a), _groups(b)
    va, vb = np.concatenate(ga), np.concatenate(gb)
    ma, mb = float(np.median(va)), float(np.median(vb))
    ratio = unit not in DIFFERENCE_UNITS and (va > 0).all() and (vb > 0).all()
    est = mb / ma if ratio else mb - ma
    lo = hi = None
    method, why = "", ""
    if len(va) >= MIN_VALUES and len(vb) >= MIN_VALUES:
        rng = np.random.default_rng(seed)
        ba, bb = _boot_medians(ga, resamples, rng), _boot_medians(gb, resamples, rng)
        stat = bb / ba if ratio else bb - ba
        tail = 100 * (1 - CI_LEVEL) / 2
        lo, hi = (float(x) for x in np.percentile(stat, [tail, 100 - tail]))
        method = BOOTSTRAP
    elif not ratio:
        why = WHY_FEW_DIFFERENCE
    elif None in spreads:
        why = WHY_NO_SPREAD
    else:
        est, lo, hi = log_t_interval(rep_values(a), rep_values(b), *spreads)
        method = T_LOG
    verdict = _verdict(lo, hi, 1.0 if ratio else 0.0, better) if method else NO_INTERVAL
    if unit == "%":
        change, change_unit = mb - ma, "pp"
    elif ratio:
        change, change_unit = 100 * (est - 1), "%"
    else:
        change, change_unit = (100 * (mb - ma) / abs(ma) if ma else None), "%"
    return Comparison(table, where or {}, unit, better, "ratio" if ratio else "difference", len(va), len(vb),
                      len(ga), len(gb), ma, mb, est, lo, hi, change, change_unit, verdict, method, why)


def _by_key(x: pd.DataFrame | None) -> tuple[dict[tuple, pd.DataFrame], dict[tuple, pd.DataFrame]]:
    """A keyed table's measured rows and its point summaries (repetition empty), each by KEY cells."""
    if x is None:
        return {}, {}
    keys = [f"k_{c}" for c in KEY]
    summary = x.repetition.isna()
    return dict(list(x[~summary].groupby(keys, sort=True))), dict(list(x[summary].groupby(keys, sort=True)))


def _table_diff(table: str, xa, xb, resamples: int, seed: int, out: Diff) -> None:
    """One table's comparisons, one-sided keys, skipped keys and printed intervals, into `out`."""
    (by_a, sum_a), (by_b, sum_b) = _by_key(xa), _by_key(xb)
    out.skipped += [Skipped(table, _where(kv)["metric"], WHY_SUMMARY) for kv in sorted(set(sum_a) | set(sum_b))]
    if xa is not None and xb is not None:
        out.printed += _printed(table, xa, xb)
    for side, mine, other in (("A", by_a, by_b), ("B", by_b, by_a)):
        for kv in sorted(set(mine) - set(other)):
            out.only.append(OneSide(side, table, _where(kv), len(mine[kv]), float(mine[kv].value.median())))
    pa, pb = pooled_spreads(by_a), pooled_spreads(by_b)
    for kv in sorted(set(by_a) & set(by_b)):
        where = _where(kv)
        rule = metric(where["metric"])
        if rule is None or rule.better is None:
            out.skipped.append(Skipped(table, where["metric"], WHY_UNDIRECTED))
            continue
        ga, gb = by_a[kv], by_b[kv]
        spreads = (pa.get(_pool_key(kv)), pb.get(_pool_key(kv)))
        out.comparisons.append(compare_values(ga, gb, str(ga.unit.iloc[0]), rule.better, resamples, seed, table,
                                              where, spreads))


def diff(a: str | Path, b: str | Path, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
         progress=None) -> Diff:
    """Compare results tree B with results tree A (module docstring)."""
    if not (isinstance(resamples, int) and resamples >= 100):
        raise DataError(f"Failed to diff {a} and {b}: resamples {resamples!r}: expected an integer >= 100")
    tree_a, tabs_a = _tree(a)
    tree_b, tabs_b = _tree(b)
    out = Diff(tree_a, tree_b, [], [], [], [], seed, resamples, CI_LEVEL)
    for table in KINDS:
        if table not in tabs_a and table not in tabs_b:
            continue
        xa, xb = (keyed(t[table]) if table in t else None for t in (tabs_a, tabs_b))
        _table_diff(table, xa, xb, resamples, seed, out)
        if progress:
            progress(f"{table}: {sum(1 for c in out.comparisons if c.table == table)} compared")
    out.undirected = sorted({s.metric for s in out.skipped if s.why == WHY_UNDIRECTED})
    if tree_a.testbeds != tree_b.testbeds:
        out.notes.append(f"the testbeds differ: A {', '.join(tree_a.testbeds)}, B {', '.join(tree_b.testbeds)}; "
                         "a difference is the testbeds' as much as the software's")
    if tree_a.commits and tree_b.commits and tree_a.commits != tree_b.commits:
        out.notes.append(f"written at different commits: A {', '.join(_short(c) for c in tree_a.commits)}, "
                         f"B {', '.join(_short(c) for c in tree_b.commits)}")
    if not out.comparisons:
        out.notes.append("nothing both trees measured has a better direction: no comparison")
    return out


# --- output ----------------------------------------------------------------------------------------
def _g(v) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def _short(commit: str) -> str:
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")


def header_lines(d: Diff) -> list[str]:
    def tree(name, t: Tree):
        commit = ", ".join(_short(c) for c in t.commits) or "unknown (no sidecars)"
        when = f", written {t.written[0]}" + (f" .. {t.written[1]}" if t.written[1] != t.written[0] else "") \
            if t.written else ""
        return f"{name}: {t.path}  testbed {', '.join(t.testbeds)}  commit {commit}{when}  ({len(t.tables)} tables)"
    L = [tree("A", d.a), tree("B", d.b)]
    L += [f"NOTE: {n}" for n in d.notes]
    L.append(f"per key: medians of each side; B/A (B-A for us and %); {MIN_VALUES} or more values a side: "
             f"percentile bootstrap {100 * d.level:g} % interval, {d.resamples} resamples, seed {d.seed} "
             "(repetitions, then the values within them); fewer, compared as a ratio: Welch t interval on the log "
             "of the per-repetition values (B/A of their geometric means), each run's spread pooled over the "
             "points of its experiment, LB and metric")
    L.append("each interval covers the spread of the repetitions within each run, not a change of the machine "
             "between the runs (drift): between runs on a shared machine a worse can be the machine's")
    return L


def _label(c) -> tuple[str, str]:
    """'experiment/point (conditions the point id does not show)', lb."""
    w = c.where
    point = str(w["point"])
    cond = []
    for k, name in (("payload_bytes", "payload {} B"), ("server", "server {}"), ("split", "split {}"),
                    ("changes_per_s", "{} changes/s")):
        v = w.get(k)
        if v is None:
            continue
        v = f"{v:g}" if isinstance(v, float) else str(v)
        if v.replace("/", "-") not in point:
            cond.append(name.format(v))
    return f"{w['experiment']}/{point}" + (f" ({', '.join(cond)})" if cond else ""), str(w.get("lb"))


#: a point's readiness mark in the judged table's column (xenobench.readiness: MARKS)
READY_CELL = {"publication-ready": "pub", "local-ready": "local", "not ready": "no"}


def _row(c: Comparison, ready: dict | None) -> list[str]:
    point, lb = _label(c)
    op = "B/A" if c.mode == "ratio" else "B-A"
    ci = f"[{_g(c.ci_low)}, {_g(c.ci_high)}]" if c.ci_low is not None else "-"
    ch = "" if c.change is None else f"{c.change:+.1f} {c.change_unit}"
    row = [c.verdict, point, lb, f"{c.where['metric']} ({c.unit}, {c.better} better)", _g(c.median_a),
           _g(c.median_b), f"{op} {_g(c.estimate)}", ci, ch, f"{c.n_a}/{c.n_b}"]
    if ready is not None:
        at = (c.where["experiment"], c.where["point"])
        row.append("/".join(READY_CELL.get((ready.get(s) or {}).get(at), "-") for s in ("A", "B")))
    return row


def not_judged_lines(d: Diff) -> list[str]:
    """One line per table: how many keys it judged, and those it did not, counted by why (the
    metrics without a direction named)."""
    judged: dict[str, int] = {}
    for c in d.comparisons:
        judged[c.table] = judged.get(c.table, 0) + (c.verdict != NO_INTERVAL)
    missing = d.not_judged()
    L = []
    for table in [k for k in KINDS if k in judged or k in missing]:
        why = missing.get(table, {})
        named = sorted({s.metric for s in d.skipped if s.table == table and s.why == WHY_UNDIRECTED})
        text = "; ".join(f"{n} {w}" + (f" ({', '.join(named)})" if w == WHY_UNDIRECTED else "") for w, n in why.items())
        L.append(f"{table}: {judged.get(table, 0)} judged" + (f"; not judged {sum(why.values())}: {text}" if why else ""))
    return L


def table_lines(d: Diff, everything: bool = False, ready: dict | None = None) -> list[str]:
    """The terminal table: one line per judged comparison (`ready`: per side A, B the readiness mark
    of each (experiment, point), a column), one line per table counting what was not judged, then the
    counts and the printed intervals; `everything`: the keys without an interval and those one side
    measured listed as well."""
    rows = [_row(c, ready) for c in d.comparisons]
    head = ["verdict", "point", "lb", "metric", "median A", "median B", "estimate", f"{100 * d.level:g} % CI",
            "change", "n A/B"] + (["ready A/B"] if ready is not None else [])
    decided = [r for r in rows if r[0] != NO_INTERVAL]
    L = header_lines(d) + [""]
    L += _fixed(head, decided) if decided else ["(no key judged)"]
    L += ["", "Judged and not judged, per table" + ("" if everything else " (--all lists what was not judged):")]
    L += [f"  {x}" for x in not_judged_lines(d)]
    if everything:
        L += _unjudged_lines(d, head, rows)
    n = d.counts()
    judged = len(d.comparisons) - n[NO_INTERVAL]
    L += ["", f"{len(d.comparisons)} compared: {n[BETTER]} better, {n[WORSE]} worse, "
              f"{n[NOT_DISTINGUISHABLE]} not distinguishable, {n[NO_INTERVAL]} without interval; "
              f"{sum(1 for o in d.only if o.side == 'A')} only in A, {sum(1 for o in d.only if o.side == 'B')} only in B"]
    if judged:  # each interval is a key's own: over many keys some exclude no change by chance
        L.append(f"Each interval is one key's {100 * d.level:g} %: of {judged} keys of two runs of one distribution, "
                 f"about {(1 - d.level) * judged:.1f} come out better or worse by chance (--fail-worse gates on size)")
    return L + printed_lines(d)


def _unjudged_lines(d: Diff, head: list[str], rows: list[list[str]]) -> list[str]:
    """--all: the comparisons without an interval, the keys one side measured, the metrics without a direction."""
    L = []
    once = [r for r in rows if r[0] == NO_INTERVAL]
    if once:
        L += ["", f"Without an interval ({len(once)}: shown, not judged):"]
        L += _fixed(head[1:], [r[1:] for r in once])
    if d.only:
        L += ["", f"Measured by one side only ({len(d.only)}: never compared):"]
        L += _fixed(["side", "table", "point", "lb", "metric", "n", "median"],
                    [[o.side, o.table, *_label(o), o.where["metric"], str(o.n), _g(o.median)] for o in d.only])
    if d.undirected:
        L += ["", "Not compared (no better direction: set, counted or the machine's): " + ", ".join(d.undirected)]
    return L


_SIGN = {-1: "lower", 0: "~", 1: "higher", None: "-"}


def printed_lines(d: Diff) -> list[str]:
    """The intervals both runs printed, each run's median read against the other's interval: the
    counts, then every key where one falls outside or the verdicts differ."""
    if not d.printed:
        return []
    n = d.printed_counts()
    L = ["", f"Intervals both runs printed ({n['intervals']}: the paired and ranked rows): A's median inside B's "
             f"interval {n['a_in_b']}, B's inside A's {n['b_in_a']}, both {n['both_ways']}; inside the rerun "
             f"interval (widened by {RERUN_WIDEN:.3g}: what a rerun's median falls in 95 % of the time) "
             f"{n['a_in_b_rerun']} and {n['b_in_a_rerun']}; the same verdict {n['same_verdict']} of {n['verdicts']}"]
    off = [p for p in d.printed if not (p.a_in_b and p.b_in_a and p.same_verdict is not False)]
    if off:
        iv = lambda t: f"{_g(t[0])} [{_g(t[1])}, {_g(t[2])}]"  # noqa: E731
        yn = lambda inside, rerun: "yes" if inside else "rerun" if rerun else "no"  # noqa: E731
        L += _fixed(["point", "lb", "interval of", "A", "B", "A in B", "B in A", "verdict A/B"],
                    [[*_label(p), p.where["metric"], iv(p.a), iv(p.b), yn(p.a_in_b, p.a_in_b_rerun),
                      yn(p.b_in_a, p.b_in_a_rerun), f"{_SIGN[p.verdict_a]}/{_SIGN[p.verdict_b]}"] for p in off])
        L.append("(yes: inside the other's interval; rerun: inside it widened by "
                 f"{RERUN_WIDEN:.3g} only; no: outside both)")
    return L


def _fixed(head: list[str], rows: list[list[str]]) -> list[str]:
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    fmt = lambda r: "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip()  # noqa: E731
    return [fmt(head), fmt(["-" * x for x in w]), *(fmt(r) for r in rows)]


def to_json(d: Diff, fail_worse: float | None = None) -> dict:
    out = {"a": asdict(d.a), "b": asdict(d.b), "notes": d.notes, "seed": d.seed, "resamples": d.resamples,
           "level": d.level, "counts": d.counts(), "comparisons": [asdict(c) for c in d.comparisons],
           "only": [asdict(o) for o in d.only], "not_compared": d.undirected, "not_judged": d.not_judged(),
           "printed": {**d.printed_counts(),
                       "rerun_widen": RERUN_WIDEN,
                       "keys": [{**asdict(p), "a_in_b": p.a_in_b, "b_in_a": p.b_in_a, "a_in_b_rerun": p.a_in_b_rerun,
                                 "b_in_a_rerun": p.b_in_a_rerun, "same_verdict": p.same_verdict}
                                for p in d.printed]}}
    if fail_worse is not None:
        out["fail_worse_pct"] = fail_worse
        out["worse_beyond"] = [asdict(c) for c in d.worse(fail_worse)]
    return out


CSV_COLUMNS = ["table", *KEY, "unit", "better", "mode", "n_a", "n_b", "repetitions_a", "repetitions_b", "median_a",
               "median_b", "estimate", "ci_low", "ci_high", "change", "change_unit", "verdict", "method", "why", "seed",
               "resamples"]


def write_csv(d: Diff, out: str | Path) -> Path:
    """One row per comparison, then the keys one side measured (verdict `only in A` / `only in B`)."""
    out = Path(out)
    rows = []
    for c in d.comparisons:
        r = {k: v for k, v in asdict(c).items() if k != "where"}
        rows.append({**c.where, **r, "seed": d.seed, "resamples": d.resamples})
    for o in d.only:
        rows.append({"table": o.table, **o.where, f"n_{o.side.lower()}": o.n, f"median_{o.side.lower()}": o.median,
                     "verdict": f"only in {o.side}"})
    return write_rows(out, CSV_COLUMNS, rows, "the diff table")


VERDICT_COLOURS = {BETTER: "tab:green", WORSE: "tab:red", NOT_DISTINGUISHABLE: "0.45"}


def _as_ratio(c: Comparison) -> tuple[float, float, float] | None:
    """A comparison as B/A with its interval (a difference divided by |median A| and moved to 1)."""
    if c.ci_low is None:
        return None
    if c.mode == "ratio":
        return c.estimate, c.ci_low, c.ci_high
    if not c.median_a:
        return None
    s = abs(c.median_a)
    return 1 + c.estimate / s, 1 + c.ci_low / s, 1 + c.ci_high / s


def write_figure(d: Diff, out: str | Path) -> Path:
    """B/A per compared key with its interval, coloured by verdict (differences as 1 + (B - A) / |A|)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pts = [(c, r) for c in d.comparisons if (r := _as_ratio(c)) is not None]
    out = Path(out)
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.28 * max(1, len(pts))))
    for i, (c, (est, lo, hi)) in enumerate(pts):
        ax.errorbar([est], [i], xerr=[[est - lo], [hi - est]], fmt="o", ms=4, capsize=3,
                    color=VERDICT_COLOURS[c.verdict])
    ax.axvline(1.0, color="0.2", lw=0.8)
    ax.set_yticks(range(len(pts)))
    ax.set_yticklabels([f"{_label(c)[0]} {c.where['lb']} {c.where['metric']}" for c, _ in pts], fontsize=7)
    ax.set_ylim(len(pts) - 0.5, -0.5)
    ax.set_xlabel(f"B / A of the medians, {100 * d.level:g} % interval (bootstrap; 2-3 repetitions: t on logs, "
                  "geometric means)\n(us and % metrics: 1 + (B - A) / |median A|)", fontsize=8)
    ax.set_title(f"B {Path(d.b.path).name} ({', '.join(d.b.testbeds)}) vs A {Path(d.a.path).name} "
                 f"({', '.join(d.a.testbeds)})", fontsize=9)
    handles = [plt.Line2D([], [], color=col, marker="o", ls="", label=v) for v, col in VERDICT_COLOURS.items()]
    ax.legend(handles=handles, fontsize=7, loc="best")
    if not pts:
        ax.text(0.5, 0.5, "no key with an interval", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=120)
    except OSError as e:
        raise DataError(f"Failed to write the diff figure {out}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return out


def dumps(d: Diff, fail_worse: float | None = None, extra: dict | None = None) -> str:
    """to_json as text, with `extra` keys beside (the CLI's readiness marks)."""
    return json.dumps({**to_json(d, fail_worse), **(extra or {})}, indent=1, allow_nan=False, default=str)
