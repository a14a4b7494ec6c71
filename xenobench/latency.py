"""The paired latency design: which LB adds how much round-trip time, with a confidence interval.

The thesis measured each LB variant in its own point, minutes apart (Sec. 7.4, 900 probes x 3);
on a shared machine the drift between points is larger than the differences compared (two runs
moved the eBPF median from 41 to 26 µs). Here each repetition measures every variant in short
blocks: `blocks` rounds, each running every variant once in a shuffled order (numpy's
default_rng(seed + repetition), recorded), so slow drift hits every variant alike.

Statistics, per variant against a reference (usually "none", the client straight to the backend):
- a pair is one round of one repetition: median RTT of the variant's block minus the median of the
  reference's block in the same round;
- the added latency is the median of the pairs; its 95 % CI is the percentile bootstrap of that
  median (`resamples` draws with default_rng(seed), recorded);
- a difference is claimed only where the CI excludes zero; otherwise the variants are "not
  distinguishable" at this sample size.

Pure numpy: the aggregation and the figures call it on tidy rows; no testbed needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CI_LEVEL = 0.95
NOT_DISTINGUISHABLE = "not distinguishable"


def block_order(lbs: list[str], rounds: int, seed: int) -> list[str]:
    """The LB of every block: `rounds` shuffled permutations of lbs, concatenated."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for _ in range(rounds):
        out += [lbs[i] for i in rng.permutation(len(lbs))]
    return out


@dataclass(frozen=True)
class PairedDiff:
    lb: str
    reference: str
    median_us: float      # median of the per-round differences (lb - reference)
    ci_low_us: float
    ci_high_us: float
    pairs: int
    seed: int
    resamples: int

    @property
    def verdict(self) -> str:
        """'higher' / 'lower' (than the reference) where the CI excludes zero."""
        if self.ci_low_us > 0:
            return "higher"
        if self.ci_high_us < 0:
            return "lower"
        return NOT_DISTINGUISHABLE


def bootstrap_median_ci(values, resamples: int, seed: int, level: float = CI_LEVEL) -> tuple[float, float, float]:
    """(median, low, high): the percentile bootstrap CI of the median of `values`."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        raise ValueError("no values to bootstrap")
    med = float(np.median(v))
    if len(v) == 1:
        return med, med, med
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(v), size=(int(resamples), len(v)))
    meds = np.median(v[idx], axis=1)
    a = (1 - level) / 2
    return med, float(np.quantile(meds, a)), float(np.quantile(meds, 1 - a))


def paired_differences(blocks, lb: str, reference: str) -> np.ndarray:
    """Per-round differences of block medians; `blocks`: iterable of (repetition, round, lb,
    median_us). Rounds missing either variant are left out."""
    by: dict[tuple, dict[str, float]] = {}
    for rep, rnd, kind, med in blocks:
        by.setdefault((rep, rnd), {})[kind] = float(med)
    return np.array([d[lb] - d[reference] for _, d in sorted(by.items()) if lb in d and reference in d])


def compare(blocks, lb: str, reference: str, resamples: int, seed: int) -> PairedDiff | None:
    blocks = list(blocks)
    d = paired_differences(blocks, lb, reference)
    if len(d) == 0:
        return None
    med, lo, hi = bootstrap_median_ci(d, resamples, seed)
    return PairedDiff(lb, reference, med, lo, hi, len(d), seed, resamples)


def ranking(diffs: list[PairedDiff], reference: str = "none") -> str:
    """One line: the variants ordered by added latency against `reference`, a '<' only between
    neighbours whose own paired CI (in `diffs`) excludes zero, '~' (not distinguishable) otherwise;
    then the pairs of LBs further apart that are distinguishable although a '~' lies between them
    ("none < ebpf ~ wire ~ xenoflow; ebpf < xenoflow"; each LB against the reference is its own
    verdict, stated beside it)."""
    vs_ref = sorted((d for d in diffs if d.reference == reference), key=lambda d: d.median_us)
    names = [reference] + [d.lb for d in vs_ref]
    meds = [0.0] + [d.median_us for d in vs_ref]
    order = [n for _, n in sorted(zip(meds, names))]

    def apart(a, b):
        pair = next((d for d in diffs if {d.lb, d.reference} == {a, b}), None)
        return pair is not None and pair.verdict != NOT_DISTINGUISHABLE

    out = order[0]
    for a, b in zip(order, order[1:]):
        out += (" < " if apart(a, b) else " ~ ") + b
    chained = [(i, j) for i in range(len(order)) for j in range(i + 2, len(order))
               if reference not in (order[i], order[j]) and apart(order[i], order[j]) and not all(apart(order[k], order[k + 1]) for k in range(i, j))]
    return out + "".join(f"; {order[i]} < {order[j]}" for i, j in chained)


_PARTS = ("median_us", "ci_low_us", "ci_high_us", "pairs", "bootstrap_seed", "bootstrap_resamples")


def diffs_from_rows(df) -> list[PairedDiff]:
    """PairedDiffs back from tidy rtt_paired rows of one point (metrics rtt_vs_<ref>_<part>)."""
    got: dict[tuple[str, str], dict] = {}
    for lb, metric, value in zip(df.lb, df.metric, df.value):
        if not metric.startswith("rtt_vs_"):
            continue
        rest = metric[len("rtt_vs_"):]
        part = next((p for p in _PARTS if rest.endswith("_" + p)), None)
        if part is None:
            continue
        got.setdefault((lb, rest[: -len(part) - 1]), {})[part] = float(value)
    out = []
    for (lb, ref), v in sorted(got.items()):
        if all(p in v for p in _PARTS[:4]):
            out.append(PairedDiff(lb, ref, v["median_us"], v["ci_low_us"], v["ci_high_us"], int(v["pairs"]),
                                  int(v.get("bootstrap_seed", -1)), int(v.get("bootstrap_resamples", 0))))
    return out
