"""The steady-state rule: which part of a measured series is the trial, and which is ramp.

One rule for every series the project reads, so that the thesis's numbers (per-second counter
values in ../shared/thesis-data) and the live numbers (counter samples taken by the harness, tx
counters of every traffic executor) are computed alike:

- the series is split into intervals (a thesis second, or the span between two counter samples)
  with a rate each;
- an interval is *steady* when its rate is at least STEADY_FRACTION of the median of the non-idle
  (rate > 0) intervals; the steady range runs from the first steady interval to the last one
  (leading and trailing ramp intervals are excluded; interior dips are kept: they are measurement);
- the steady-state rate is the median of the steady range's interval rates; `span_rate` is the
  counter difference over the steady range's time (the mean rate, what a generator's achieved/
  requested ratio needs); cv_pct is their spread;
- how steady the steady range was, whatever the sampling interval (parts_cv_pct): the spread of the
  mean rates of its quarters, which the machine rule judges for an unpaced trial
  (xenobench.machine, unpaced_cv_pct).

This module is a leaf: numpy only, so node-side agents may import it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STEADY_FRACTION = 0.95  # an interval at >= 95 % of the median busy rate is steady (thesis ch. 7)


@dataclass(frozen=True)
class Steady:
    first: int              # index of the first steady interval
    last: int               # index one past the last steady interval
    rate: float             # median interval rate over [first, last)
    span_rate: float        # total over [first, last) / its duration (mean rate)
    cv_pct: float | None    # coefficient of variation of the steady interval rates, %
    total: int              # intervals in the series

    @property
    def intervals(self) -> int:
        return self.last - self.first


IDLE = Steady(0, 0, 0.0, 0.0, None, 0)


def steady_range(rates) -> tuple[int, int]:
    """[first, last) of the steady intervals of a rate series; (0, 0) if it is all idle."""
    r = np.asarray(rates, dtype=float)
    busy = r[r > 0]
    if len(busy) == 0:
        return 0, 0
    ok = np.nonzero(r >= STEADY_FRACTION * np.median(busy))[0]
    return int(ok[0]), int(ok[-1]) + 1


def steady_state(rates, durations=None) -> Steady:
    """The rule on interval rates (one value per interval; `durations` in seconds, default 1 each:
    the thesis's per-second counters)."""
    r = np.asarray(rates, dtype=float)
    d = np.ones_like(r) if durations is None else np.asarray(durations, dtype=float)
    a, b = steady_range(r)
    if b == a:
        return Steady(0, 0, 0.0, 0.0, None, len(r))
    s, w = r[a:b], d[a:b]
    mean = float(np.mean(s))
    cv = float(100.0 * np.std(s, ddof=1) / mean) if len(s) > 1 and mean > 0 else None
    return Steady(a, b, float(np.median(s)), float(np.sum(s * w) / np.sum(w)), cv, len(r))


def interval_rates(samples) -> tuple[np.ndarray, np.ndarray]:
    """Rates and durations between consecutive (time_s, counter) samples of a cumulative counter;
    intervals without elapsed time are dropped."""
    s = np.asarray(samples, dtype=float).reshape(-1, 2)
    if len(s) < 2:
        return np.array([]), np.array([])
    dt = np.diff(s[:, 0])
    dv = np.diff(s[:, 1])
    ok = dt > 0
    return dv[ok] / dt[ok], dt[ok]


def steady_state_of_counter(samples) -> Steady:
    """The rule on samples of a cumulative counter [(time_s, value), ...]."""
    rates, durations = interval_rates(samples)
    return steady_state(rates, durations)


#: the stretches a steady range is cut into to judge how steady it was (parts_cv_pct)
STEADINESS_PARTS = 4


def parts_cv_pct(samples, parts: int = STEADINESS_PARTS) -> float | None:
    """How steady a cumulative counter's steady range was, whatever its sampling interval: the range
    (steady_range) cut at whole intervals into `parts` consecutive stretches of about equal duration
    (fewer where it has fewer intervals), the CV (%) of their mean rates. Interval rates sampled
    every few ms scatter with the scheduler; a quarter of the range averages that out and keeps a
    change of the rate itself. None under two stretches."""
    rates, durations = interval_rates(samples)
    a, b = steady_range(rates)
    r, d = rates[a:b], durations[a:b]
    n = min(int(parts), len(r))
    if n < 2:
        return None
    ends = np.cumsum(d)
    # after the interval that reaches k/n of the duration; every stretch keeps an interval
    cuts = sorted({min(max(int(np.searchsorted(ends, ends[-1] * k / n, side="left")) + 1, 1), len(r) - 1)
                   for k in range(1, n)})
    frames, secs = np.add.reduceat(r * d, [0, *cuts]), np.add.reduceat(d, [0, *cuts])
    means = frames / secs
    mean = float(np.mean(means))
    return float(100.0 * np.std(means, ddof=1) / mean) if mean > 0 else None
