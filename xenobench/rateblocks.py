"""Rates a reviewer can rank: the statistics of the interleaved rate design (the
procedure: xenobench.measure.rank).

Within a repetition every LB of the experiment is loaded once (program pinned, not attached) and
the LB port's XDP program is switched atomically between them in short blocks, in a shuffled order
per round (xenobench.latency.block_order), the generator running throughout, so the machine's drift
hits every LB of a round alike, as the paired RTT design does for latency.

Statistics here, pure numpy:
- a block ratio is one round's rate of an LB over the same round's rate of the reference (the
  wire: the same backends and split, xenobench.lb.wire), or over another LB's for a pair;
- per LB (pair), the median of its per-round ratios over every repetition, and a 95 % CI of that
  median by a two-stage (cluster) percentile bootstrap: the repetitions drawn with replacement,
  then the rounds within each drawn one. The rounds of one repetition share its programs' load and
  its stretch of the machine's time, and the ratios move with both: on the 2-core namespace
  testbed the host now and then runs the two vCPUs on cores without a shared cache, a frame then
  costing ~1.35x (the wire) to ~1.55x (the LBs), an LB over the wire 0.80-0.86 instead of 0.93-0.97
  (xenobench.measure.rank leaves such rounds out), and what remains moves by a per cent or two between
  repetitions (scripts/bench_rank.py). Resampling the rounds alone would give a CI that ignores this. With one
  repetition it is the plain bootstrap of the rounds (xenobench.latency.bootstrap_median_ci), and
  says nothing beyond that repetition;
- a ranking is claimed only between LBs whose CI excludes 1, from at least MIN_ROUNDS ratios;
  otherwise "not distinguishable". The target is CI half-widths <= 2 % and the same ranking in
  three independent runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .latency import CI_LEVEL, NOT_DISTINGUISHABLE, bootstrap_median_ci


#: the fewest ratios a verdict is claimed from. n ratios of an LB no faster than its reference all
#: land on one side of 1 with probability 2 x 0.5^n (a sign test): 6.25 % for 5, 3.1 % for 6, so
#: only from 6 on can a 95 % claim exclude chance; a percentile bootstrap of fewer values (two
#: repetitions of a search: the CI is their range) would claim one every other time
MIN_ROUNDS = 6


@dataclass(frozen=True)
class RateRatio:
    lb: str
    reference: str
    median: float        # median of the per-round ratios lb / reference
    ci_low: float
    ci_high: float
    rounds: int
    repetitions: int = 1  # the repetitions its rounds came from (the CI's first bootstrap stage)

    @property
    def half_width_pct(self) -> float:
        """Half the CI's width, in per cent of the median."""
        return 100 * (self.ci_high - self.ci_low) / 2 / self.median

    @property
    def verdict(self) -> str:
        """'faster' / 'slower' than the reference where the CI excludes 1 and MIN_ROUNDS ratios
        or more make it."""
        if self.rounds < MIN_ROUNDS:
            return NOT_DISTINGUISHABLE
        if self.ci_low > 1:
            return "faster"
        if self.ci_high < 1:
            return "slower"
        return NOT_DISTINGUISHABLE


def round_ratios_by_repetition(blocks, lb: str, reference: str) -> dict:
    """{repetition: per-round ratios}; `blocks`: iterable of (repetition, round, lb, rate_pps).
    Rounds missing either LB, or whose reference rate is not > 0, are left out, and so is a
    repetition left with no round."""
    by: dict[tuple, dict[str, float]] = {}
    for rep, rnd, kind, rate in blocks:
        by.setdefault((rep, rnd), {})[kind] = float(rate)
    out: dict = {}
    for (rep, _), d in sorted(by.items()):
        if lb in d and reference in d and d[reference] > 0:
            out.setdefault(rep, []).append(d[lb] / d[reference])
    return {rep: np.array(v) for rep, v in out.items()}


def round_ratios(blocks, lb: str, reference: str) -> np.ndarray:
    """Every repetition's per-round ratios, in one array (round_ratios_by_repetition)."""
    groups = list(round_ratios_by_repetition(blocks, lb, reference).values())
    return np.concatenate(groups) if groups else np.array([])


def cluster_bootstrap_median_ci(groups: list, resamples: int, seed: int,
                                level: float = CI_LEVEL) -> tuple[float, float, float]:
    """(median of all values, low, high): the two-stage percentile bootstrap CI of the median
    (module docstring); one group: latency.bootstrap_median_ci."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if len(groups) == 1:
        return bootstrap_median_ci(groups[0], resamples, seed, level)
    if not groups:
        raise ValueError("no values to bootstrap")
    med = float(np.median(np.concatenate(groups)))
    rng = np.random.default_rng(seed)
    meds = np.empty(int(resamples))
    for i in range(int(resamples)):
        drawn = [groups[j] for j in rng.integers(0, len(groups), len(groups))]
        meds[i] = np.median(np.concatenate([g[rng.integers(0, len(g), len(g))] for g in drawn]))
    a = (1 - level) / 2
    return med, float(np.quantile(meds, a)), float(np.quantile(meds, 1 - a))


def ratio(blocks, lb: str, reference: str, resamples: int, seed: int) -> RateRatio | None:
    """The median ratio with its interval; None from fewer than two ratios (one ratio is no
    interval: its bootstrap is the value itself)."""
    groups = list(round_ratios_by_repetition(list(blocks), lb, reference).values())
    if sum(len(g) for g in groups) < 2:
        return None
    med, lo, hi = cluster_bootstrap_median_ci(groups, resamples, seed)
    return RateRatio(lb, reference, med, lo, hi, sum(len(g) for g in groups), len(groups))


def ranking(blocks, lbs: list[str], resamples: int, seed: int) -> list[RateRatio]:
    """Every pair of LBs (the first of each pair against the second), for a ranking table: a
    pair's order is claimed only where its verdict is not 'not distinguishable'."""
    blocks = list(blocks)
    out = []
    for i, a in enumerate(lbs):
        for b in lbs[i + 1:]:
            r = ratio(blocks, a, b, resamples, seed)
            if r is not None:
                out.append(r)
    return out


def ratios_from_rows(df, measure: str = "rate") -> list:
    """rateblocks.RateRatio's back from rate_ranking rows of one point (metrics <measure>_vs_<ref>_<part>)."""
    parts = ("median", "ci_low", "ci_high", "rounds")
    got: dict[tuple[str, str], dict] = {}
    pre = f"{measure}_vs_"
    for lb, m, v in zip(df.lb, df.metric, df.value):
        rest = m[len(pre):] if m.startswith(pre) else None
        part = next((p for p in (*parts, "repetitions") if rest and rest.endswith("_" + p)), None)
        if part:
            got.setdefault((lb, rest[: -len(part) - 1]), {})[part] = float(v)
    return [RateRatio(lb, ref, d["median"], d["ci_low"], d["ci_high"], int(d["rounds"]), int(d.get("repetitions", 1)))
            for (lb, ref), d in sorted(got.items()) if all(p in d for p in parts)]
