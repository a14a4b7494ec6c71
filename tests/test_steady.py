"""The one steady-state rule (xenobench.steady) on the series every caller feeds it: thesis
per-second counters, the harness's sampled rx counters, a generator's tx counter."""

import numpy as np
import pytest

from xenobench.steady import parts_cv_pct, steady_range, steady_state, steady_state_of_counter


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


def counter(interval_s: float, rates) -> list[tuple[float, float]]:
    """(time_s, cumulative count) samples of a counter running at `rates`, one per interval."""
    out, n = [(0.0, 0.0)], 0.0
    for i, r in enumerate(rates, 1):
        n += r * interval_s
        out.append((interval_s * i, n))
    return out


STEADINESS = [
    # 1 s at 20 ms: the intervals alternate +-15 % (the scheduler's scatter), the quarters do not move
    ("20 ms scatter", counter(0.02, [1.15e6, 0.85e6] * 25), 0.0, 1.0),
    # the same second at 250 ms, the last quarter 40 % faster: the rate itself moved
    ("250 ms, a faster last quarter", counter(0.25, [1e6, 1e6, 1e6, 1.4e6]), 18.1, 18.3),
    # at 20 ms the same move gives the same figure
    ("20 ms, a faster last quarter", counter(0.02, [1e6] * 38 + [1.4e6] * 12), 17.5, 19.5),
    # the ramp intervals at either end are not part of the steady span
    ("ramps left out", counter(0.25, [0.2e6, 1e6, 1e6, 1e6, 1e6, 0.3e6]), 0.0, 0.0),
    # three intervals: three parts
    ("three intervals", counter(0.25, [1e6, 1.1e6, 1e6]), 5.5, 5.7),
]


@pytest.mark.parametrize("desc, samples, low, high", STEADINESS, ids=[c[0] for c in STEADINESS])
def test_how_steady_a_span_was_does_not_depend_on_the_sampling_interval(desc, samples, low, high):
    assert low <= parts_cv_pct(samples) <= high


@pytest.mark.parametrize("samples", [[(0, 0), (0.25, 100)], [(0, 5), (1, 5)], [(0, 0)]])
def test_a_span_of_one_interval_has_no_steadiness(samples):
    assert parts_cv_pct(samples) is None


def test_uneven_intervals_keep_every_part_non_empty():
    # one short interval then a long one: the cut for two parts falls after the first
    assert parts_cv_pct([(0, 0), (0.1, 1e5), (1.0, 1e6)]) == pytest.approx(0.0)
