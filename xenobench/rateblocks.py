"""Rates a reviewer can rank: the statistics of the interleaved rate design (issue 28, part 2).

Design (the procedure is not built yet; this module is its analysis, tested on its own): within a
repetition, every LB of the experiment is attached once up front (each loaded and configured, its
program pinned) and the LB port's XDP program is switched atomically between them (a link update:
bpf_link_update / `bpftool link update`, or a netlink XDP replace, which swaps the program pointer
without taking the veth down), in short alternating blocks in a shuffled order per round
(xenobench.latency.block_order), the generator running throughout. Each block's rate is the
backends' rx over the block (the same sampler as offered_load), so slow drift of the shared machine
hits every LB of a round alike, as the paired RTT design does for latency.

Statistics here, pure numpy:
- a block ratio is one round's rate of an LB over the same round's rate of the reference (the
  wire: the same backends and split, xenobench.lb.wire), or over another LB's for a pair;
- per LB (pair), the median of its per-round ratios and the percentile bootstrap 95 % CI of that
  median (xenobench.latency.bootstrap_median_ci, seeded and recorded);
- a ranking is claimed only between LBs whose CI excludes 1; otherwise "not distinguishable". The
  target is CI half-widths <= 2 % and the same ranking in three independent runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .latency import NOT_DISTINGUISHABLE, bootstrap_median_ci


@dataclass(frozen=True)
class RateRatio:
    lb: str
    reference: str
    median: float        # median of the per-round ratios lb / reference
    ci_low: float
    ci_high: float
    rounds: int

    @property
    def half_width_pct(self) -> float:
        """Half the CI's width, in per cent of the median."""
        return 100 * (self.ci_high - self.ci_low) / 2 / self.median

    @property
    def verdict(self) -> str:
        """'faster' / 'slower' than the reference where the CI excludes 1."""
        if self.ci_low > 1:
            return "faster"
        if self.ci_high < 1:
            return "slower"
        return NOT_DISTINGUISHABLE


def round_ratios(blocks, lb: str, reference: str) -> np.ndarray:
    """Per-round ratios; `blocks`: iterable of (repetition, round, lb, rate_pps). Rounds missing
    either LB, or whose reference rate is not > 0, are left out."""
    by: dict[tuple, dict[str, float]] = {}
    for rep, rnd, kind, rate in blocks:
        by.setdefault((rep, rnd), {})[kind] = float(rate)
    return np.array([d[lb] / d[reference] for _, d in sorted(by.items())
                     if lb in d and reference in d and d[reference] > 0])


def ratio(blocks, lb: str, reference: str, resamples: int, seed: int) -> RateRatio | None:
    r = round_ratios(list(blocks), lb, reference)
    if len(r) == 0:
        return None
    med, lo, hi = bootstrap_median_ci(r, resamples, seed)
    return RateRatio(lb, reference, med, lo, hi, len(r))


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
