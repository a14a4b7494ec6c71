"""The interleaved rate design's statistics (xenobench.rateblocks) on small block tables."""

import pytest

from xenobench.rateblocks import ranking, ratio, round_ratios

# (repetition, round, lb, rate_pps): wire 4.0 Mpps, ebpf 2 % below it every round, xenoflow within 1 %
# of ebpf with alternating sign; the machine drifts 10 % between rounds, alike for every LB
DRIFT = [1.0, 0.9, 1.05, 0.95, 1.1, 0.92]
BLOCKS = [(1, r + 1, lb, 4.0e6 * d * f) for r, d in enumerate(DRIFT)
          for lb, f in (("wire", 1.0), ("ebpf", 0.98), ("xenoflow", 0.98 * (1.01 if r % 2 else 0.99)))]


def test_round_ratios_cancel_the_drift():
    assert round_ratios(BLOCKS, "ebpf", "wire") == pytest.approx([0.98] * 6)
    # a round missing the reference, or with a reference rate of 0, is left out
    assert len(round_ratios(BLOCKS + [(1, 7, "ebpf", 1.0), (1, 8, "ebpf", 1.0), (1, 8, "wire", 0)], "ebpf", "wire")) == 6


def test_a_ranking_only_where_the_ci_excludes_one():
    r = ratio(BLOCKS, "ebpf", "wire", 2000, 17)
    assert (r.median, r.ci_low, r.ci_high, r.rounds) == pytest.approx((0.98, 0.98, 0.98, 6))
    assert r.verdict == "slower" and r.half_width_pct == pytest.approx(0)
    pairs = {(x.lb, x.reference): x for x in ranking(BLOCKS, ["wire", "ebpf", "xenoflow"], 2000, 17)}
    assert pairs[("wire", "ebpf")].verdict == "faster"
    assert pairs[("ebpf", "xenoflow")].verdict == "not distinguishable"
    assert pairs[("ebpf", "xenoflow")].ci_low < 1 < pairs[("ebpf", "xenoflow")].ci_high


def test_nothing_to_compare_is_none():
    assert ratio(BLOCKS, "katran", "wire", 100, 1) is None
