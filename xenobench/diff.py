"""Two results trees compared point by point: `xenobench diff A B` (docs/results.md).

A and B are directories of tidy CSVs (two runs, two commits, two testbeds). A row of one is matched
with the rows of the other that share its table and KEY (experiment, point, lb, metric and the
columns that say under which conditions it was measured; an empty cell matches an empty cell).
What only one side measured is listed apart, never compared.

Per matched key and metric (only metrics with a better direction, xenobench.results.Metric.better):

- the medians of each side's values (its repetitions, or its samples: rtt_samples, blocks, cycles);
- B / A of the medians, or B - A for microsecond metrics (round trips) and percentages (loss, spread),
  and for a metric whose values are not all above zero;
- a percentile bootstrap interval (CI_LEVEL): each side resampled on its own, its repetitions with
  replacement and then the values inside each drawn repetition (the run-to-run spread counts, not only
  the sample-to-sample one), `resamples` draws from numpy's default_rng(seed) (both recorded);
- the verdict: `better` or `worse` where the interval excludes no change (1 for a ratio, 0 for a
  difference), in the metric's better direction; `not distinguishable` otherwise. A side with fewer
  than MIN_VALUES values gets no interval (`no interval`: shown, never judged): with 3 values a side
  the percentile interval of the medians excludes no change whenever the two sides do not overlap,
  which two runs of one distribution do by chance 1 time in 10 (2 / C(6, 3)); with 2, 1 time in 3.
  With one repetition a side the interval is the samples' alone: a change of the machine between
  the runs shows as a difference.

The intervals the runs printed themselves (the paired and ranked rows: <stem>_median, _ci_low,
_ci_high, _verdict) are read apart (Printed): each run's median against the other's interval and
against the rerun interval (RERUN_WIDEN), and the verdicts side by side: what a reader of one run
expects of a rerun.

`change` puts a comparison on one scale for `--fail-worse`: the relative change of the medians in %
(B/A - 1, or (B - A) / |A|), for percentages the difference in percentage points (a loss from 0.1 %
to 0.2 % is 0.1 points, not +100 %).
"""

from __future__ import annotations

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
MIN_VALUES = 4  # per side for an interval (module docstring)
MAX_DRAW_CELLS = 4_000_000  # values drawn per numpy call in a plain bootstrap (bounds memory to ~32 MB)


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


def _keyed(df: pd.DataFrame) -> pd.DataFrame:
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


def _printed(table: str, xa: pd.DataFrame, xb: pd.DataFrame) -> list[Printed]:
    """The intervals both trees printed for one table's keys (a key whose parts are not one row each
    on both sides is not read)."""
    def parts(x: pd.DataFrame) -> dict[tuple, dict[str, tuple[float, str]]]:
        out: dict[tuple, dict] = {}
        for kv, g in x.groupby([f"k_{c}" for c in KEY], sort=True):
            m = _PRINTED.fullmatch(kv[KEY.index("metric")])
            if m is None:
                continue
            stem, part = (m["stem"], m["part"]) if m["stem"] else (m["vstem"], "verdict")
            key = tuple(stem if c == "metric" else v for c, v in zip(KEY, kv))
            bucket = out.setdefault(key, {})
            bucket[part] = (float(g.value.iloc[0]), str(g.unit.iloc[0])) if len(g) == 1 else None
        return out
    pa, pb = parts(xa), parts(xb)
    out = []
    for key in sorted(set(pa) & set(pb)):
        sa, sb = pa[key], pb[key]
        triple = ("median", "ci_low", "ci_high")
        if not all(sa.get(k) and sb.get(k) for k in triple):
            continue
        va, vb = sa.get("verdict"), sb.get("verdict")
        out.append(Printed(table, _where(key), sa["median"][1], tuple(sa[k][0] for k in triple),
                           tuple(sb[k][0] for k in triple), int(va[0]) if va else None, int(vb[0]) if vb else None))
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


def compare_values(a: pd.DataFrame, b: pd.DataFrame, unit: str, better: str, resamples: int, seed: int,
                   table: str = "", where: dict | None = None) -> Comparison:
    """One key's rows of each side (value, repetition) compared (module docstring)."""
    ga, gb = _groups(a), _groups(b)
    va, vb = np.concatenate(ga), np.concatenate(gb)
    ma, mb = float(np.median(va)), float(np.median(vb))
    ratio = unit not in DIFFERENCE_UNITS and (va > 0).all() and (vb > 0).all()
    est = mb / ma if ratio else mb - ma
    lo = hi = None
    verdict = NO_INTERVAL
    if len(va) >= MIN_VALUES and len(vb) >= MIN_VALUES:
        rng = np.random.default_rng(seed)
        ba, bb = _boot_medians(ga, resamples, rng), _boot_medians(gb, resamples, rng)
        stat = bb / ba if ratio else bb - ba
        tail = 100 * (1 - CI_LEVEL) / 2
        lo, hi = (float(x) for x in np.percentile(stat, [tail, 100 - tail]))
        null = 1.0 if ratio else 0.0
        if lo > null:
            verdict = BETTER if better == HIGHER else WORSE
        elif hi < null:
            verdict = BETTER if better == LOWER else WORSE
        else:
            verdict = NOT_DISTINGUISHABLE
    if unit == "%":
        change, change_unit = mb - ma, "pp"
    elif ratio:
        change, change_unit = 100 * (est - 1), "%"
    else:
        change, change_unit = (100 * (mb - ma) / abs(ma) if ma else None), "%"
    return Comparison(table, where or {}, unit, better, "ratio" if ratio else "difference", len(va), len(vb),
                      len(ga), len(gb), ma, mb, est, lo, hi, change, change_unit, verdict)


def diff(a: str | Path, b: str | Path, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
         progress=None) -> Diff:
    """Compare results tree B with results tree A (module docstring)."""
    if not (isinstance(resamples, int) and resamples >= 100):
        raise DataError(f"Failed to diff {a} and {b}: resamples {resamples!r}: expected an integer >= 100")
    tree_a, tabs_a = _tree(a)
    tree_b, tabs_b = _tree(b)
    comps, only, undirected, printed = [], [], set(), []
    for table in KINDS:
        xa = _keyed(tabs_a[table]) if table in tabs_a else None
        xb = _keyed(tabs_b[table]) if table in tabs_b else None
        keys = [f"k_{c}" for c in KEY]
        by_a = dict(list(xa.groupby(keys, sort=True))) if xa is not None else {}
        by_b = dict(list(xb.groupby(keys, sort=True))) if xb is not None else {}
        for side, mine, other in (("A", by_a, by_b), ("B", by_b, by_a)):
            for kv in sorted(set(mine) - set(other)):
                g = mine[kv]
                only.append(OneSide(side, table, _where(kv), len(g), float(g.value.median())))
        if xa is not None and xb is not None:
            printed += _printed(table, xa, xb)
        for kv in sorted(set(by_a) & set(by_b)):
            where = _where(kv)
            rule = metric(where["metric"])
            if rule is None or rule.better is None:
                undirected.add(where["metric"])
                continue
            ga, gb = by_a[kv], by_b[kv]
            comps.append(compare_values(ga, gb, str(ga.unit.iloc[0]), rule.better, resamples, seed, table, where))
        if progress and (by_a or by_b):
            progress(f"{table}: {sum(1 for c in comps if c.table == table)} compared")
    notes = []
    if tree_a.testbeds != tree_b.testbeds:
        notes.append(f"the testbeds differ: A {', '.join(tree_a.testbeds)}, B {', '.join(tree_b.testbeds)}; "
                     "a difference is the testbeds' as much as the software's")
    if tree_a.commits and tree_b.commits and tree_a.commits != tree_b.commits:
        notes.append(f"written at different commits: A {', '.join(_short(c) for c in tree_a.commits)}, "
                     f"B {', '.join(_short(c) for c in tree_b.commits)}")
    if not comps:
        notes.append("nothing both trees measured has a better direction: no comparison")
    return Diff(tree_a, tree_b, comps, only, sorted(undirected), printed, seed, resamples, CI_LEVEL, notes)


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
    L.append(f"per key: medians of each side; B/A (B-A for us and %); percentile bootstrap {100 * d.level:g} % "
             f"interval, {d.resamples} resamples, seed {d.seed} (repetitions, then the values within them)")
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


def table_lines(d: Diff) -> list[str]:
    """The terminal table: one line per comparison, the ones without an interval apart, then the
    keys only one side measured, then the counts."""
    rows = []
    for c in d.comparisons:
        point, lb = _label(c)
        op = "B/A" if c.mode == "ratio" else "B-A"
        ci = f"[{_g(c.ci_low)}, {_g(c.ci_high)}]" if c.ci_low is not None else "-"
        ch = "" if c.change is None else f"{c.change:+.1f} {c.change_unit}"
        rows.append([c.verdict, point, lb, f"{c.where['metric']} ({c.unit}, {c.better} better)", _g(c.median_a),
                     _g(c.median_b), f"{op} {_g(c.estimate)}", ci, ch, f"{c.n_a}/{c.n_b}"])
    head = ["verdict", "point", "lb", "metric", "median A", "median B", "estimate", f"{100 * d.level:g} % CI",
            "change", "n A/B"]
    decided = [r for r in rows if r[0] != NO_INTERVAL]
    once = [r for r in rows if r[0] == NO_INTERVAL]
    L = header_lines(d) + [""]
    L += _fixed(head, decided) if decided else [f"(no key with at least {MIN_VALUES} values on each side)"]
    if once:
        L += ["", f"Fewer than {MIN_VALUES} values on a side ({len(once)}: no interval; shown, not judged):"]
        L += _fixed(head[1:], [r[1:] for r in once])
    if d.only:
        L += ["", f"Measured by one side only ({len(d.only)}: never compared):"]
        L += _fixed(["side", "table", "point", "lb", "metric", "n", "median"],
                    [[o.side, o.table, *_label(o), o.where["metric"], str(o.n), _g(o.median)] for o in d.only])
    if d.undirected:
        L += ["", "Not compared (no better direction: set, counted or the machine's): " + ", ".join(d.undirected)]
    n = d.counts()
    judged = len(d.comparisons) - n[NO_INTERVAL]
    L += ["", f"{len(d.comparisons)} compared: {n[BETTER]} better, {n[WORSE]} worse, "
              f"{n[NOT_DISTINGUISHABLE]} not distinguishable, {n[NO_INTERVAL]} without interval; "
              f"{sum(1 for o in d.only if o.side == 'A')} only in A, {sum(1 for o in d.only if o.side == 'B')} only in B"]
    if judged:  # each interval is a key's own: over many keys some exclude no change by chance
        L.append(f"Each interval is one key's {100 * d.level:g} %: of {judged} keys of two runs of one distribution, "
                 f"about {(1 - d.level) * judged:.1f} come out better or worse by chance (--fail-worse gates on size)")
    return L + printed_lines(d)


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
           "only": [asdict(o) for o in d.only], "not_compared": d.undirected,
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
               "median_b", "estimate", "ci_low", "ci_high", "change", "change_unit", "verdict", "seed", "resamples"]


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
    ax.set_xlabel(f"B / A of the medians, {100 * d.level:g} % bootstrap interval\n"
                  "(us and % metrics: 1 + (B - A) / |median A|)", fontsize=8)
    ax.set_title(f"B {Path(d.b.path).name} ({', '.join(d.b.testbeds)}) vs A {Path(d.a.path).name} "
                 f"({', '.join(d.a.testbeds)})", fontsize=9)
    handles = [plt.Line2D([], [], color=col, marker="o", ls="", label=v) for v, col in VERDICT_COLOURS.items()]
    ax.legend(handles=handles, fontsize=7, loc="best")
    if not pts:
        ax.text(0.5, 0.5, f"no key with {MIN_VALUES} values on both sides", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=120)
    except OSError as e:
        raise DataError(f"Failed to write the diff figure {out}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return out


def dumps(d: Diff, fail_worse: float | None = None) -> str:
    return json.dumps(to_json(d, fail_worse), indent=1, allow_nan=False, default=str)
