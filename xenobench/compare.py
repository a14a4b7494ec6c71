"""Published vs reproduced: every number of results/reference/published.csv that a tidy results
directory can reproduce, with its relative deviation.

A row is ok when the reproduced value is within the tolerance of the published one, or inside the
published range [low, high] where the documents give one ("über zwei", "95 - 98 Millionen").
Rows marked gating=no (numbers the shared data cannot settle fairly, see their note) are listed
with their verdict but do not change the exit status.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import REPO_ROOT, latency, rateblocks
from .errors import ConfigError, DataError
from .lb import LBS
from .results import line_rate_pps, read_tidy

PUBLISHED = REPO_ROOT / "results/reference/published.csv"
PUBLISHED_COLUMNS = ["metric", "value", "low", "high", "unit", "lb", "document", "where", "how",
                     "gating", "note"]
LOSS_ONSET_PP = 0.1      # loss this many percentage points above the no-load baseline (paired: the reference's) = started
NETWORK_BOUND = 0.95     # rate >= 95 % of the layer-1 line rate = limited by the network
THESIS_64B_PAYLOAD = 24  # the thesis calls 24 B payload "64 Bytes" (Sec. 7.4.1) and Fig. 7.6 uses it


def read_published(path: str | Path = PUBLISHED) -> pd.DataFrame:
    """The published values; DataError naming the file, line and field when malformed."""
    path = Path(path)
    try:
        pub = pd.read_csv(path, dtype={"gating": str})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise DataError(f"Failed to read published values {path}: {e}") from None
    missing = [c for c in PUBLISHED_COLUMNS if c not in pub.columns]
    if missing:
        raise DataError(f"Failed to read published values {path}: missing columns {', '.join(missing)}")
    for i, r in pub.iterrows():
        if r.how not in ("text", "figure"):
            raise DataError(f"Failed to read published values {path}: line {i + 2}: how={r.how!r}, "
                            "expected text or figure")
        if r.gating not in ("yes", "no"):
            raise DataError(f"Failed to read published values {path}: line {i + 2}: gating={r.gating!r}, "
                            "expected yes or no")
    return pub


#: the experiment whose rows each table's published values are compared with: the thesis's own
#: (thesis ch. 7, experiments/<id>.yaml); a row of another experiment is never read as one of these
PUBLISHED_FROM = {"pps": "pps", "compare": "compare", "loss": "loss", "rtt_summary": "rtt", "rtt_paired": "rtt",
                  "ndr_pdr": "ndr_pdr"}


def _try(resdir, kind):
    """The rows of a table that the published values are compared with (PUBLISHED_FROM); None
    where the table was not written."""
    try:
        x = read_tidy(resdir, kind)
    except DataError as e:
        if "no such file" in str(e):
            return None
        raise
    return x[x.experiment == PUBLISHED_FROM[kind]]


def _rate_by_payload(pps: pd.DataFrame, lb: str = "xenoflow") -> pd.Series:
    x = pps[(pps.metric == "rx_pps") & (pps.lb == lb)]
    return x.groupby("payload_bytes").value.median().sort_index()


NOT_DISTINGUISHABLE_HERE = "not distinguishable on this testbed"
#: the shapes published.csv states that a run claims only where the measured effect lies outside its
#: interval (step_beyond_spread); where it does not, the row says NOT_DISTINGUISHABLE_HERE and why
SHAPES = ("pps_drop_payload_bytes", "loss_onset_mpps")


def step_beyond_spread(a, b) -> tuple[bool, float, float]:
    """(claimed, effect, spread): the difference of two sets of repetitions' medians (a - b) and the
    larger of their spreads (max - min of each); claimed only where both have at least two
    repetitions and the difference exceeds both spreads."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    effect = float(np.median(a) - np.median(b))
    width = max(float(np.ptp(a)), float(np.ptp(b)))
    return bool(len(a) >= 2 and len(b) >= 2 and effect > width), effect, width


def _to_reference(rows: pd.DataFrame, lb: str):
    """lb's rate relative to the reference (rateblocks.RateRatio) from one point's paired ratio rows;
    None where they hold none."""
    return next((r for r in rateblocks.ratios_from_rows(rows, "rate")
                 if r.lb == lb and LBS.get(r.reference) is not None and LBS[r.reference].reference), None)


def _ratio_interval(pps: pd.DataFrame, lb: str, payload: float) -> tuple[float, float, float] | None:
    """(median, ci_low, ci_high) of lb's rate relative to the reference at one payload, where the
    pps table holds the paired design's ratio rows."""
    r = _to_reference(pps[pps.payload_bytes == payload], lb)
    return (r.median, r.ci_low, r.ci_high) if r is not None else None


def _drop_evidence(pps: pd.DataFrame, x: pd.DataFrame, drop: float) -> tuple[bool, str]:
    """Whether the drop into payload `drop` (from the payload measured before it) lies outside the
    spread of both payloads: the paired design's CIs of the ratio to the reference where the table
    holds them, else the min-max of the repetitions' rx_pps."""
    payloads = sorted(x.payload_bytes.unique())
    i = payloads.index(drop)
    if i == 0:
        return False, (f"the rate is below the midpoint of the two plateaus already at {drop:g} B, the smallest "
                       "payload measured: there is no step into it to judge")
    before = payloads[i - 1]
    ra, rb = _ratio_interval(pps, "xenoflow", before), _ratio_interval(pps, "xenoflow", drop)
    if ra and rb:
        effect = ra[0] - rb[0]
        width = max(ra[2] - ra[1], rb[2] - rb[1])
        ok = effect > width
        what = (f"ratio to the reference {ra[0]:.3f} [{ra[1]:.3f}, {ra[2]:.3f}] at {before:g} B, {rb[0]:.3f} "
                f"[{rb[1]:.3f}, {rb[2]:.3f}] at {drop:g} B: the drop {effect:.3f} "
                + ("exceeds" if ok else "does not exceed") + f" the wider CI ({width:.3f})")
        return ok, what
    va = x[x.payload_bytes == before].value
    vb = x[x.payload_bytes == drop].value
    ok, effect, width = step_beyond_spread(va, vb)
    if min(len(va), len(vb)) < 2:
        return False, (f"{before:g} B → {drop:g} B: {min(len(va), len(vb))} repetition at one of them, no spread "
                       "to judge the drop against")
    return ok, (f"{before:g} B → {drop:g} B: medians {np.median(va) / 1e6:.4g} and {np.median(vb) / 1e6:.4g} Mpps, "
                f"the drop {effect / 1e6:.3g} Mpps " + ("exceeds" if ok else "does not exceed")
                + f" the wider min-max of the repetitions ({width / 1e6:.3g} Mpps)")


def reproduced(resdir: str | Path, unclaimed: dict | None = None) -> dict[str, float]:
    """The reproducible metrics of a tidy results directory (whatever its data allows). A shape
    (SHAPES) measured but not beyond its interval is left out, and why in `unclaimed` (given)."""
    out = {}
    unclaimed = {} if unclaimed is None else unclaimed
    pps = _try(resdir, "pps")
    if pps is not None and len(pps):
        x = pps[(pps.metric == "rx_pps") & (pps.lb == "xenoflow")]
        small = x[x.payload_bytes < 23].value
        large = x[(x.payload_bytes >= 23) & (x.payload_bytes <= 64)].value
        if len(small):
            out["pps_small_payload_mpps"] = float(np.median(small)) / 1e6
        if len(large):
            out["pps_large_payload_mpps"] = float(np.median(large)) / 1e6
        rate = _rate_by_payload(pps)
        if len(small) and len(large) and np.median(large) < 0.99 * np.median(small):
            mid = (np.median(small) + np.median(large)) / 2
            below = rate[(rate.index <= 64) & (rate < mid)]
            if len(below):
                ok, why = _drop_evidence(pps, x, float(below.index[0]))
                if ok:
                    out["pps_drop_payload_bytes"] = float(below.index[0])
                else:
                    unclaimed["pps_drop_payload_bytes"] = why
        if len(rate):
            ratio = rate / np.array([line_rate_pps(p) for p in rate.index])
            # smallest payload from which every larger one is network-bound
            bound = ratio[::-1].cummin()[::-1] >= NETWORK_BOUND
            if bound.any() and bound.iloc[-1]:
                out["network_bound_from_payload_bytes"] = float(bound[bound].index[0])
        reps = x.groupby("payload_bytes").value
        if (reps.count() >= 2).any():
            cv = (reps.std(ddof=1) / reps.mean() * 100)[reps.count() >= 2]
            out["cv_max_pct"] = float(cv.max())
        if THESIS_64B_PAYLOAD in rate.index:
            out["compare_xenoflow_64b_mpps"] = float(rate[THESIS_64B_PAYLOAD]) / 1e6
    cmp_ = _try(resdir, "compare")
    if cmp_ is not None:  # a live comparison trial overrides the pps-derived value
        x = cmp_[cmp_.metric.isin(["max_pps", "rx_pps"]) & (cmp_.lb == "xenoflow")]
        if len(x):
            out["compare_xenoflow_64b_mpps"] = float(x.value.median()) / 1e6
    if "compare_xenoflow_64b_mpps" in out:
        pub = read_published()
        others = pub[pub.metric.str.startswith("compare_") & (pub.lb != "xenoflow") & pub.lb.notna()
                     & (pub.unit == "Mpps")]
        if len(others):
            out["compare_speedup_min"] = out["compare_xenoflow_64b_mpps"] / float(others.value.max())
    loss = _try(resdir, "loss")
    ratios = {} if loss is None else {pt: r for pt, g in loss.groupby("point")
                                      if (r := _to_reference(g, "xenoflow")) is not None}
    if ratios:
        # the paired design: where XenoFlow delivered less of the same offered rate than the
        # reference, in the same rounds (its ratio's CI below 1), not where its own loss rose;
        # by at least what starts a loss in the unpaired design (LOSS_ONSET_PP): a ratio whose CI lies
        # below 1 by less is a difference this method resolves, not a loss onset
        nominal = loss[loss.metric == "nominal_offered_pps"].groupby("point").value.median()
        by_rate = sorted(((float(nominal[pt]), r) for pt, r in ratios.items() if pt in nominal.index),
                         key=lambda x: x[0])
        below = 1 - LOSS_ONSET_PP / 100
        onset = next((n for n, r in by_rate if r.verdict == "slower" and r.ci_high < below), None)
        slight = [(n, r.ci_high) for n, r in by_rate if r.verdict == "slower"]
        if onset is not None:
            out["loss_onset_mpps"] = onset / 1e6
        elif slight:
            n, hi = slight[0]
            unclaimed["loss_onset_mpps"] = (
                f"at {n / 1e6:g} Mpps XenoFlow delivered less than the reference in the same rounds, but by less "
                f"than an onset's {LOSS_ONSET_PP:g} percentage points (its ratio's CI reaches {hi:.4f}), and by no "
                f"more at any rate up to {by_rate[-1][0] / 1e6:g} Mpps")
        elif by_rate:
            unclaimed["loss_onset_mpps"] = (
                f"at every offered rate up to {by_rate[-1][0] / 1e6:g} Mpps XenoFlow's delivered rate is not "
                "distinguishable from the reference's in the same rounds (its ratio's CI includes 1)")
        loss = None  # the absolute losses below hold the machine's state as much as the LB's
    if loss is not None and len(loss):
        x = loss[(loss.metric == "loss_pct") & (loss.lb == "xenoflow")].copy()
        # a point's repetitions are one rate: the median of their offered rates, never one bin each
        x["offered_mpps"] = (x.groupby("point").offered_pps.transform("median") / 1e6).round(1)
        med = x.groupby("offered_mpps").value.median().sort_index()
        if len(med) >= 2:
            low = med.index[: max(1, len(med) // 2)]
            base = float(med.loc[low].median())  # the no-loss level (may be < 0)
            base_vals = x[x.offered_mpps.isin(low)].value
            started = med[med > base + LOSS_ONSET_PP]
            onset = next((r for r in started.index if len(base_vals) >= 2 and float(med[r]) - base
                          > max(float(np.ptp(base_vals)), float(np.ptp(x[x.offered_mpps == r].value)))), None)
            if onset is not None:
                out["loss_onset_mpps"] = float(onset)
            elif len(started):
                r = started.index[0]
                unclaimed["loss_onset_mpps"] = (
                    f"loss {float(med[r]):.3g} % at {r:g} Mpps against the no-loss level {base:.3g} % "
                    + (f"(min-max {float(base_vals.min()):.3g} to {float(base_vals.max()):.3g} %)" if len(base_vals) >= 2
                       else "(one value: no spread)")
                    + ": no rate's loss lies outside the spread of the no-loss level and its own repetitions")
            over = x[x.offered_mpps.isin(med[med > base + 1.0].index)]  # clearly overloaded
            if len(over) and over.measured_pps.notna().any():
                out["loss_capacity_mpps"] = float(over.measured_pps.median()) / 1e6
    rs = _try(resdir, "rtt_summary")
    if rs is not None and len(rs):
        reflector = rs[rs.server.isna() | (rs.server == "reflector")]
        med = reflector[reflector.metric == "rtt_median_us"].groupby("lb").value.median()
        if "xenoflow" in med:
            out["rtt_xenoflow_median_us"] = float(med["xenoflow"])
        if "none" in med:
            out["rtt_none_median_us"] = float(med["none"])
        for lb in ("xenoflow", "ebpf"):
            if lb in med and "none" in med:
                out[f"rtt_added_{lb}_us"] = float(med[lb] - med["none"])
        if "rtt_added_xenoflow_us" in out and "rtt_added_ebpf_us" in out and out["rtt_added_ebpf_us"] > 0:
            out["rtt_reduction_pct"] = 100.0 * (1 - out["rtt_added_xenoflow_us"] / out["rtt_added_ebpf_us"])
        bind9 = rs[(rs.server == "bind9") & (rs.lb == "none")]
        for m, key in (("rtt_median_us", "rtt_bind9_median_us"), ("rtt_std_us", "rtt_bind9_std_us")):
            v = bind9[bind9.metric == m].value
            if len(v):
                out[key] = float(v.median())
    return out


# NDR/PDR (xenobench.search) against the published loss onset: the onset is the offered load where
# loss starts (thesis Sec. 7.4.3 / Fig. 7.8, paper Sec. 5.2), which is what NDR and PDR bracket.
SEARCH_VS_PUBLISHED = {"ndr_xenoflow_64b_mpps": "loss_onset_mpps", "pdr_xenoflow_64b_mpps": "loss_onset_mpps"}
SEARCH_PAYLOAD = 22  # 64 B frame without FCS: the loss sweep's payload


def search_reproduced(resdir) -> dict[str, float]:
    """NDR and PDR of XenoFlow at 64 B frames (median over searches), Mpps."""
    x = _try(resdir, "ndr_pdr")
    out = {}
    if x is None or not len(x):
        return out
    x = x[(x.lb == "xenoflow") & (x.payload_bytes == SEARCH_PAYLOAD)]
    for m in ("ndr", "pdr"):
        v = x[x.metric == f"{m}_pps"].value
        if len(v):
            out[f"{m}_xenoflow_64b_mpps"] = float(v.median()) / 1e6
    return out


def paired_reproduced(resdir) -> dict[str, latency.PairedDiff]:
    """The paired design's added latency per LB (idle path) and XenoFlow minus eBPF, with CIs."""
    x = _try(resdir, "rtt_paired")
    out = {}
    if x is None or not len(x):
        return out
    for srv, g in x.groupby(x.server.fillna("-")):
        for d in latency.diffs_from_rows(g):
            if d.reference == "none":
                out.setdefault(f"rtt_added_{d.lb}_us", d)
            elif {d.lb, d.reference} == {"xenoflow", "ebpf"}:
                out.setdefault("rtt_xenoflow_minus_ebpf_us", d if d.lb == "xenoflow" else latency.PairedDiff(
                    "xenoflow", "ebpf", -d.median_us, -d.ci_high_us, -d.ci_low_us, d.pairs, d.seed, d.resamples))
    return out


def _extra_rows(resdir, pub: pd.DataFrame, tolerance_pct: float) -> list[dict]:
    """Rows beyond published.csv's own metrics: NDR/PDR against the published loss onset, and the
    paired added latencies with their CI (ok: within tolerance or the published value inside the
    CI; verdict: the CI's statement, a ranking only where it excludes zero)."""
    rows = []
    for key, val in search_reproduced(resdir).items():
        for p in pub[pub.metric == SEARCH_VS_PUBLISHED[key]].itertuples():
            dev = 100.0 * (val - p.value) / p.value
            in_range = None
            if not (_nan(p.low) and _nan(p.high)):
                in_range = (_nan(p.low) or val >= p.low) and (_nan(p.high) or val <= p.high)
            rows.append({"metric": key, "published": float(p.value), "reproduced": round(val, 4), "unit": p.unit,
                         "deviation_pct": round(dev, 2), "ok": bool(abs(dev) <= tolerance_pct or in_range),
                         "source": f"{p.document}: {p.where} ({p.how}), published as {p.metric}",
                         "gating": p.gating == "yes",
                         "range": None if in_range is None else [None if _nan(p.low) else float(p.low),
                                                                  None if _nan(p.high) else float(p.high)]})
    paired = paired_reproduced(resdir)
    pubv = {p.metric: p for p in pub.itertuples()}
    targets = [(k, pubv.get(k)) for k in ("rtt_added_xenoflow_us", "rtt_added_ebpf_us")]
    if "rtt_added_xenoflow_us" in pubv and "rtt_added_ebpf_us" in pubv:
        targets.append(("rtt_xenoflow_minus_ebpf_us", None))
    for key, p in targets:
        d = paired.get(key)
        if d is None:
            continue
        if p is not None:
            ref, src, gating = float(p.value), f"{p.document}: {p.where} ({p.how}); paired design", p.gating == "yes"
        else:  # the paper's ranking claim: 5.2 - 9.3 us (Sec. 5.4)
            a, b = pubv["rtt_added_xenoflow_us"], pubv["rtt_added_ebpf_us"]
            ref, src, gating = float(a.value - b.value), f"{a.document}: {a.where}, {a.value} - {b.value} us; paired design", False
        dev = 100.0 * (d.median_us - ref) / abs(ref) if ref else float("inf")
        rows.append({"metric": key + " (paired)", "published": round(ref, 4), "reproduced": round(d.median_us, 3), "unit": "us",
                     "deviation_pct": round(dev, 2),
                     "ok": bool(abs(dev) <= tolerance_pct or d.ci_low_us <= ref <= d.ci_high_us),
                     "source": src, "gating": gating, "range": None,
                     "ci": [round(d.ci_low_us, 3), round(d.ci_high_us, 3)], "pairs": d.pairs,
                     "verdict": d.verdict + ("" if d.verdict == latency.NOT_DISTINGUISHABLE else
                                             f" than {d.reference}")})
    return rows


def _nan(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


def compare(resdir: str | Path, tolerance_pct: float = 5.0, published: str | Path = PUBLISHED) -> list[dict]:
    """One dict per published number the results reproduce: metric, published, reproduced, unit,
    deviation_pct, source, ok, gating, range. DataError if nothing matches."""
    if not (isinstance(tolerance_pct, (int, float)) and 0 <= tolerance_pct < float("inf")):
        raise ConfigError(f"Failed to compare {resdir}: tolerance {tolerance_pct!r} %: expected a finite "
                          "number >= 0")
    pub = read_published(published)
    unclaimed: dict[str, str] = {}
    rep = reproduced(resdir, unclaimed)
    rows = []
    for p in pub.itertuples():
        if p.metric in unclaimed:
            # measured, but the effect lies inside its interval: no shape is claimed (not ok), and noise
            # cannot settle it either way (not gating)
            rows.append({"metric": p.metric, "published": float(p.value), "reproduced": NOT_DISTINGUISHABLE_HERE,
                         "unit": p.unit, "deviation_pct": float("nan"),
                         "source": f"{p.document}: {p.where} ({p.how})", "ok": False, "gating": False,
                         "range": None, "why": unclaimed[p.metric]})
            continue
        if p.metric not in rep:
            continue
        r = rep[p.metric]
        dev = 100.0 * (r - p.value) / p.value if p.value else float("inf")
        in_range = None
        if not (_nan(p.low) and _nan(p.high)):
            in_range = (_nan(p.low) or r >= p.low) and (_nan(p.high) or r <= p.high)
        ok = abs(dev) <= tolerance_pct or bool(in_range)
        rows.append({"metric": p.metric, "published": float(p.value), "reproduced": round(r, 4),
                     "unit": p.unit, "deviation_pct": round(dev, 2),
                     "source": f"{p.document}: {p.where} ({p.how})", "ok": bool(ok),
                     "gating": p.gating == "yes",
                     "range": None if in_range is None else [None if _nan(p.low) else float(p.low),
                                                              None if _nan(p.high) else float(p.high)]})
    rows += _extra_rows(resdir, pub, tolerance_pct)
    if not rows:
        raise DataError(f"Failed to compare {resdir}: no tidy results that match a published number")
    return rows


def failed(rows: list[dict]) -> list[dict]:
    """The rows that make `xenobench compare` exit 1."""
    return [r for r in rows if r["gating"] and not r["ok"]]


# --- agreement of one run's tables -----------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """One consistency check of a run's tables: what was compared (`check`), whether the tables
    agree (`ok`), and the sentence the report prints (`text`)."""
    check: str
    ok: bool | None  # None: not judged (what it needs is missing), neither agreement nor contradiction
    text: str


def _tables(resdir, kind: str) -> pd.DataFrame | None:
    try:
        return read_tidy(resdir, kind)
    except DataError as e:
        if "no such file" in str(e):
            return None
        raise


def _ratios_by_pair(df: pd.DataFrame) -> dict[tuple[str, str, float], rateblocks.RateRatio]:
    """{(lb, reference, payload): ratio} of a table's paired-design rows (rate_vs_<ref>_...)."""
    out = {}
    for pay, g in df.groupby(df.payload_bytes.fillna(-1)):
        for r in rateblocks.ratios_from_rows(g, "rate"):
            out[(r.lb, r.reference, float(pay))] = r
    return out


def _iv(r: rateblocks.RateRatio) -> str:
    return f"{r.median:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]"


def _pay(p: float) -> str:
    return "" if p < 0 else f" at {p:g} B payload"


def _compare_vs_rank(resdir) -> list[Finding]:
    """The compare table's ratio per LB and pair against rate_ranking's for the same pair and
    payload: they agree where the CIs overlap."""
    c, rk = _tables(resdir, "compare"), _tables(resdir, "rate_ranking")
    if c is None or rk is None:
        return []
    a = _ratios_by_pair(c[c.metric.astype(str).str.startswith("rate_vs_")])
    b = _ratios_by_pair(rk[rk.metric.astype(str).str.startswith("rate_vs_")])
    out = []
    for key in sorted(set(a) & set(b)):
        ra, rb = a[key], b[key]
        lb, ref, pay = key
        agree = ra.ci_low <= rb.ci_high and rb.ci_low <= ra.ci_high
        out.append(Finding(f"compare_vs_rank/{lb}/{ref}{'' if pay < 0 else f'/{pay:g}'}", agree,
                           f"{lb}/{ref}{_pay(pay)}: compare {_iv(ra)}, rate_ranking {_iv(rb)}: "
                           + ("the CIs overlap" if agree else "the CIs do not overlap: the two experiments disagree "
                                                              "(the machine's state moved between them, or one of "
                                                              "them measured another path)")))
    return out


#: the flatness check's permutation test (flat_p_value): how many random relabellings, and their seed
FLAT_PERMUTATIONS, FLAT_SEED = 2000, 1


def _between_spread(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per row of `values` (one labelling each), the groups' spread about the grand mean:
    sum over groups of size x (group mean - grand mean)^2 (one-way ANOVA's between-group sum of
    squares; the groups are the consecutive runs of `sizes` values starting at `starts`)."""
    means = np.add.reduceat(values, starts, axis=1) / sizes
    return ((means - values.mean(axis=1, keepdims=True)) ** 2 * sizes).sum(axis=1)


def smallest_p_value(sizes) -> float:
    """The smallest p-value a permutation test of groups of these sizes can give: the share of all
    labellings that make the same partition as the observed one (its members reordered within each
    group, and groups of equal size swapped)."""
    sizes = [int(n) for n in sizes]
    same = math.prod(math.factorial(n) for n in sizes) * math.prod(
        math.factorial(sizes.count(n)) for n in set(sizes))
    return same / math.factorial(sum(sizes))


def flat_p_value(groups, permutations: int = FLAT_PERMUTATIONS, seed: int = FLAT_SEED) -> float:
    """The p-value of "every group has the same rate" (the groups: one payload's repetitions each):
    the share of random relabellings of all values across the groups, sizes kept, whose spread
    between the groups (_between_spread) is at least the observed one, the observed labelling
    counted as one of them (a Monte Carlo permutation test; exact in level whatever the
    distribution of the values, as long as they are exchangeable where the rate is flat). numpy
    only, as the bootstraps here: scipy, whose permutation_test does the same, is not a dependency."""
    vals = [np.asarray(g, dtype=float) for g in groups]
    x = np.concatenate(vals)
    sizes = np.array([len(v) for v in vals], dtype=float)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    observed = _between_spread(x[None, :], starts, sizes)[0]
    rng = np.random.default_rng(seed)
    relabelled = rng.permuted(np.tile(x, (int(permutations), 1)), axis=1)
    hits = int((_between_spread(relabelled, starts, sizes) >= observed * (1 - 1e-12)).sum())
    return (1 + hits) / (1 + int(permutations))


def _reference_flat(resdir) -> list[Finding]:
    """The reference LB's (the wire's) absolute rate across the pps payloads below the network
    limit (published network_bound_from_payload_bytes: the thesis's rate is flat below it, the
    network not yet the bottleneck) is flat: its payloads' repetitions differ between payloads no
    more than within them (flat_p_value at 1 - latency.CI_LEVEL). Not judged where a payload has
    one repetition, or where so few repetitions cannot reach that level (smallest_p_value)."""
    pps = _tables(resdir, "pps")
    if pps is None:
        return []
    pps = pps[(pps.experiment == PUBLISHED_FROM["pps"]) & (pps.metric == "rx_pps")]
    pub = read_published()
    limit = pub[pub.metric == "network_bound_from_payload_bytes"].value
    if not len(limit):
        return []
    limit = float(limit.iloc[0])
    alpha = 1 - latency.CI_LEVEL
    out = []
    for lb in sorted(k for k in set(pps.lb) if LBS.get(k) is not None and LBS[k].reference):
        x = pps[(pps.lb == lb) & (pps.payload_bytes < limit)]
        groups = {float(p): g.value.to_numpy(dtype=float) for p, g in x.groupby("payload_bytes")}
        if len(groups) < 2:
            continue
        check, head = f"reference_flat/{lb}", f"{lb}'s rate below {limit:g} B payload: "
        sizes = [len(g) for g in groups.values()]
        if min(sizes) < 2:
            out.append(Finding(check, None, head + "not judged, a payload with one repetition (no spread to "
                                                   "judge the payloads' differences against)"))
            continue
        floor = smallest_p_value(sizes)
        if floor > alpha:
            out.append(Finding(check, None, head + f"not judged, {len(groups)} payloads of {'/'.join(map(str, sizes))} "
                                                   f"repetitions cannot show a difference at {latency.CI_LEVEL:.0%} "
                                                   f"(the smallest p-value they can give is {floor:.2g})"))
            continue
        p = flat_p_value(list(groups.values()))
        med = {k: float(np.median(v)) for k, v in groups.items()}
        lo, hi = min(med, key=med.get), max(med, key=med.get)
        span = (f"its {len(groups)} payloads' medians range from {med[lo] / 1e6:.4g} Mpps at {lo:g} B to "
                f"{med[hi] / 1e6:.4g} Mpps at {hi:g} B")
        test = f"(permutation test of the payloads, p = {p:.2g} {'≥' if p >= alpha else '<'} {alpha:.2g})"
        out.append(Finding(check, bool(p >= alpha), head + (
            f"flat: {span}, no further apart than its repetitions' own spread gives {test}" if p >= alpha
            else f"not flat: {span}, further apart than its repetitions' own spread gives {test}: the machine's "
                 "state moved between payloads, or the path depends on the payload")))
    return out


def agreement(resdir: str | Path) -> list[Finding]:
    """Consistency checks across one run's tables, where both sides exist: the compare table's
    ratio of each LB to the reference (or of two LBs) against rate_ranking's for the same pair and
    payload (CIs overlap), and the reference's absolute rate across the pps payloads below the
    network limit (flat within its intervals, as the thesis's rate is). Nothing to check: []."""
    return _compare_vs_rank(resdir) + _reference_flat(resdir)
