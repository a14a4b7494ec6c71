"""The one steady-state rule (xenobench.steady) on the series every caller feeds it: thesis
per-second counters, the harness's sampled rx counters, a generator's tx counter."""

import numpy as np
import pytest

from xenobench.steady import steady_range, steady_state, steady_state_of_counter


def test_sampled_counter_drops_ramp_intervals():
    # 0.25 s samples: idle, ramp (half rate), 6 steady intervals at 400 pkts (1600 pps, one at 1640), ramp down, idle
    counts = [0, 0, 200, 600, 1000, 1400, 1810, 2210, 2610, 2710, 2710]
    s = steady_state_of_counter([(0.25 * i, c) for i, c in enumerate(counts)])
    assert (s.first, s.last, s.intervals) == (2, 8, 6)
    assert s.rate == pytest.approx(1600.0)
    assert s.span_rate == pytest.approx((2610 - 200) / 1.5)
    steady = [1600] * 3 + [1640] + [1600] * 2
    assert s.cv_pct == pytest.approx(100 * np.std(steady, ddof=1) / np.mean(steady))


def test_idle_series_has_no_steady_state():
    s = steady_state_of_counter([(0, 5), (1, 5)])
    assert (s.rate, s.cv_pct, s.intervals) == (0.0, None, 0)
    assert steady_range([0, 0, 0]) == (0, 0)


def test_thesis_seconds_keep_interior_dips():
    # TRex ramps up for two seconds and down for one; a dip inside is measurement, not ramp
    x = [1_000, 60_000_000, 96_900_000, 96_900_100, 80_000_000, 96_899_900, 96_900_000, 5_000]
    s = steady_state(x)
    assert (s.first, s.last) == (2, 7)
    assert s.rate == 96_900_000
    assert s.span_rate == pytest.approx(np.mean(x[2:7]))


def test_weighted_span_rate_uses_interval_durations():
    s = steady_state([100, 100, 100], durations=[1, 2, 1])
    assert s.span_rate == pytest.approx(100)
    s = steady_state([100, 99, 100], durations=[1, 2, 1])
    assert s.span_rate == pytest.approx((100 + 198 + 100) / 4)
