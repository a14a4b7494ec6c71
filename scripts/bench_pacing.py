#!/usr/bin/env python3
"""Benchmark: how close the config's generator comes to a paced rate, as rtt_load's and update's
backgrounds ask for it: the maximum (unpaced) through an LB, then paced runs at shares of that
maximum, each with several catch-up buckets (xdpgen --bucket-ms), interleaved per round.

The question it answers (the invalid rtt_load levels): does the paced background fall
short because the generator loses its tokens while held off its CPU (then a larger bucket recovers
the rate, and held_up_ms says for how long), or because pacing itself costs the rate (then no
bucket helps)? Printed per (share, bucket): achieved / requested (median and range over rounds),
the frames the bucket dropped (tokens_lost), the sender's CPU time / elapsed time.

Placement: the LB's NAPI inline (the RTT experiments' placement, NamespaceTestbed.place_dut).
Traffic: rtt_load's background (dns_split at the 50/50 split, 22 B payload).
Usage (root): XENOBENCH_NS_PREFIX=xbp- .venv/bin/python scripts/bench_pacing.py [ROUNDS] [DURATION] [CONFIG]
"""

import os
import statistics
import sys

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbp-")

from xenobench.config import load_config  # noqa: E402
from xenobench.experiments import definition  # noqa: E402
from xenobench.lb import get_lb  # noqa: E402
from xenobench.measure.common import background_tunables  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402
from xenobench.traffic import run_traffic  # noqa: E402
import benchargs  # noqa: E402  (scripts/benchargs.py)

SHARES = (0.5, 0.9)
BUCKETS_MS = (10.0, 50.0, 200.0)
LB = "xenoflow"

args = benchargs.parse(__doc__, ("ROUNDS", benchargs.positive_int, 3, "interleaved rounds"),
                       ("DURATION", benchargs.positive_float, 3.0, "seconds per run"),
                       ("CONFIG", benchargs.existing_file, None, "testbed config (None: config/local.yaml)"))
cfg = load_config(args.config)
if cfg.section("traffic")["generator"] != "xdpgen":
    sys.exit(f"bench_pacing: traffic.generator in {cfg.path} is not xdpgen (the buckets are xdpgen's)")
profile = definition("rtt_load").profile
tun = background_tunables("50/50", 22)
tb = get_testbed(cfg)
tb.up()
lb = get_lb(LB, tb)
got: dict = {}
try:
    tb.place_dut("inline")
    lb.start()
    maxima = []
    for r in range(1, args.rounds + 1):
        m = run_traffic(tb, profile, tun, 0, args.duration)
        maxima.append(m["achieved_pps"])
        for share in SHARES:
            for b in BUCKETS_MS:
                rate = share * statistics.median(maxima)
                t = run_traffic(tb, profile, tun, rate, args.duration, bucket_ms=b)
                cpu = (t.get("sender_cpu_s") or 0) / (t.get("duration_s") or args.duration)
                got.setdefault((share, b), []).append((t["achieved_pps"] / rate, t.get("tokens_lost"), cpu))
                print(f"round {r} share {share} bucket {b:g} ms: requested {rate / 1e6:.3f} Mpps, achieved "
                      f"{t['achieved_pps'] / 1e6:.3f} ({100 * t['achieved_pps'] / rate:.1f} %), tokens lost "
                      f"{t.get('tokens_lost')}, sender CPU {100 * cpu:.0f} % of the run", flush=True)
finally:
    lb.stop()
    tb.place_dut("threaded")
    tb.down()
print(f"\nunpaced maximum through {LB} (inline NAPI): {', '.join(f'{m / 1e6:.3f}' for m in maxima)} Mpps")
print(f"{'share':>5} {'bucket':>8} {'achieved/requested median [min, max]':>38} {'tokens lost (median)':>22}")
for (share, b), v in sorted(got.items()):
    ratios = [x[0] for x in v]
    lost = [x[1] for x in v if x[1] is not None]
    print(f"{share:>5} {b:>6g}ms {statistics.median(ratios):>20.4f} [{min(ratios):.4f}, {max(ratios):.4f}]"
          f" {statistics.median(lost) if lost else 'n/a':>22}")
