#!/usr/bin/env python3
"""Benchmark: trafgen on the namespace testbed (loadgen fips4 eth0 → switch → LB node p0, no LB
running, so the LB node's kernel takes the frames).

1. Maximum trafgen rate at 64-byte frames (udp_payload, 22 B payload) with 1 and 2 CPUs
   (rate 0, DURATION s, ROUNDS rounds, median).
2. The ceiling of the paced path (trafgen -q through a tbf qdisc, requested far above it).
3. Achieved/requested at 10 %, 50 %, 80 % of the maximum (tbf-paced, target >= 0.99), per CPU count.

The machine is shared (2 cores, several engineers): figures are noisy and describe this machine only.
Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_traffic.py [DURATION] [ROUNDS]"""

import os
import statistics
import time

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbb-")

from xenobench.config import load_config  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402
from xenobench.traffic import run_traffic  # noqa: E402
import benchargs  # noqa: E402  (scripts/benchargs.py)

args = benchargs.parse(__doc__, ("DURATION", benchargs.positive_float, 2.0, "seconds per trial"),
                       ("ROUNDS", benchargs.positive_int, 3, "trials per figure"))
duration, rounds = args.duration, args.rounds
tb = get_testbed(load_config())
tb.up()
TUN = {"payload": 22, "flows": 256}
try:
    for cpus in (1, 2):
        maxes = []
        for _ in range(rounds):
            r = run_traffic(tb, "udp_payload", TUN, 0, duration_s=duration, cpus=cpus)
            maxes.append(r["achieved_pps"])
            time.sleep(0.2)
        mx = statistics.median(maxes)
        print(f"max trafgen rate, 64 B frames, {cpus} CPU(s): {mx / 1e3:.1f} kpps median of {rounds} "
              f"({', '.join(f'{m / 1e3:.1f}' for m in maxes)} kpps)", flush=True)
        paced = []
        for _ in range(rounds):
            r = run_traffic(tb, "udp_payload", TUN, 20 * mx, duration_s=duration, cpus=cpus)
            paced.append(r["achieved_pps"])
        print(f"  ceiling through the tbf-paced qdisc path (requested 20 x max), {cpus} CPU(s): "
              f"{statistics.median(paced) / 1e3:.1f} kpps", flush=True)
        for frac in (0.10, 0.50, 0.80):
            rate = round(mx * frac)
            ratios, invalid = [], 0
            for _ in range(rounds):
                r = run_traffic(tb, "udp_payload", TUN, rate, duration_s=duration, cpus=cpus)
                ratios.append(r["achieved_pps"] / rate)
                invalid += not r["valid"]
                time.sleep(0.2)
            print(f"  {cpus} CPU(s) {frac * 100:.0f} % = {rate / 1e3:.1f} kpps: achieved/requested median "
                  f"{statistics.median(ratios):.4f} (min {min(ratios):.4f}, {invalid}/{rounds} invalid; target >= 0.99)",
                  flush=True)
finally:
    tb.down()
