#!/usr/bin/env python3
"""Does a rerun land inside the intervals a run printed? Reads two results trees of the same study
(results/<testbed> of two runs, e.g. two `make all` back to back, the first moved aside) and, for
every interval the tidy tables hold (a metric family <prefix>_median with <prefix>_ci_low and
<prefix>_ci_high: each LB's rate relative to the reference in pps, compare and rate_ranking; the
added RTT of rtt_paired), prints per experiment, point and LB: the first run's median and interval,
the second's, whether each median lies inside the other run's interval, and whether the verdicts
(<prefix>_verdict: faster, slower, not distinguishable) agree. Exit 1 when a median lies outside
the other run's interval or a verdict differs; 2 on unreadable input.

    scripts/rerun_coverage.py results/local-run1 results/local

What it does not say: whether a third run would land inside (two runs are one draw of the
run-to-run spread), nor anything about the absolute rates, which move with the machine's state.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xenobench.errors import XenobenchError  # noqa: E402
from xenobench.results import read_all  # noqa: E402

MEDIAN = re.compile(r"(?P<prefix>.+_vs_.+?)_(?P<unit>us_)?median(?P<us>_us)?$")


def intervals(resdir: Path) -> dict[tuple, dict]:
    """(table, experiment, point, lb, prefix) -> {median, low, high, verdict} of every interval."""
    out = {}
    for table, df in read_all(resdir).items():
        if df is None or df.empty or "metric" not in df:
            continue
        for m in sorted(set(df.metric)):
            mm = MEDIAN.fullmatch(m)
            if not mm:
                continue
            pre, suffix = mm.group("prefix"), "_us" if mm.group("us") else ""
            for (e, p, lb), g in df[df.metric.isin([m, f"{pre}_ci_low{suffix}", f"{pre}_ci_high{suffix}",
                                                     f"{pre}_verdict"])].groupby(["experiment", "point", "lb"]):
                v = dict(zip(g.metric, g.value))
                if f"{pre}_ci_low{suffix}" in v and f"{pre}_ci_high{suffix}" in v:
                    out[(table, e, p, lb, pre)] = {"median": v[m], "low": v[f"{pre}_ci_low{suffix}"],
                                                   "high": v[f"{pre}_ci_high{suffix}"],
                                                   "verdict": v.get(f"{pre}_verdict")}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    a = ap.parse_args(argv)
    try:
        one, two = intervals(a.first), intervals(a.second)
    except XenobenchError as e:
        print(f"rerun_coverage: {e}", file=sys.stderr)
        return 2
    both = sorted(set(one) & set(two))
    bad = 0
    print(f"{'table':14} {'experiment':10} {'point':18} {'lb':9} {'vs':22} {'first [interval]':30} "
          f"{'second [interval]':30} 1st in 2nd  2nd in 1st  verdicts")
    for k in both:
        x, y = one[k], two[k]
        a_in = y["low"] <= x["median"] <= y["high"]
        b_in = x["low"] <= y["median"] <= x["high"]
        same = x["verdict"] == y["verdict"]
        bad += (not a_in) + (not b_in) + (not same)
        first = f"{x['median']:.4g} [{x['low']:.4g}, {x['high']:.4g}]"
        second = f"{y['median']:.4g} [{y['low']:.4g}, {y['high']:.4g}]"
        print(f"{k[0]:14} {k[1]:10} {k[2]:18} {k[3]:9} {k[4]:22} {first:30} {second:30} "
              f"{'yes' if a_in else 'NO':11} {'yes' if b_in else 'NO':11} {'same' if same else 'DIFFER'}")
    only = sorted(set(one) ^ set(two))
    print(f"\n{len(both)} intervals in both runs: {sum(one[k]['low'] <= two[k]['median'] <= one[k]['high'] for k in both)} "
          f"second-run medians inside the first run's interval, "
          f"{sum(two[k]['low'] <= one[k]['median'] <= two[k]['high'] for k in both)} first-run medians inside the "
          f"second's, {sum(one[k]['verdict'] == two[k]['verdict'] for k in both)} verdicts the same; "
          f"{len(only)} in one run only")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
