#!/usr/bin/env python3
"""Benchmark: what the DUT NAPI thread's scheduling does to a max-rate measurement on the namespace
testbed (testbed.cpus.dut_rt_priority: 0, normal scheduling, against 50, SCHED_FIFO), interleaved:
per round one run at each priority, the order reversed every other round (ABBA), each on a fresh
testbed with the wire LB and the generator unpaced.

Per run, the backends' summed rx counter is sampled every 5 ms (xenobench.sampler through the
reading program kept on each node) for SECONDS, and it prints:
- stalls: stretches of two or more consecutive samples (>= 10 ms) in which not one frame arrived,
  their count, median length and the median time between two (a SCHED_FIFO thread that keeps its
  CPU busy is stopped by the kernel's RT bandwidth limit, kernel.sched_rt_runtime_us, for up to
  50 ms of each 1 s period);
- per block length tau: the spread (standard deviation of the log, in per cent) of the ratio of two
  adjacent blocks' rates, which is what one round of the interleaved rate design
  (xenobench.measure.rank) sees when two LBs are equally fast; and the same times sqrt(tau), the figure to
  compare across tau for a fixed measuring time (lower is better).

Usage (root): XENOBENCH_NS_PREFIX=xbn- .venv/bin/python scripts/bench_napi_priority.py [ROUNDS] [SECONDS] [CONFIG]
(defaults 2, 40, config/local.yaml)
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbn-")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from xenobench.config import load_config  # noqa: E402
from xenobench.lb import get_lb  # noqa: E402
from xenobench.measure.common import backend_ifaces, payload_tunables  # noqa: E402
from xenobench.sampler import RateSampler  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402
from xenobench.traffic import start_traffic  # noqa: E402
import benchargs  # noqa: E402  (scripts/benchargs.py)

PRIORITIES = (0, 50)
TAUS = (0.05, 0.1, 0.2, 0.5, 1.0)
INTERVAL_S = 0.005


def stalls(t: np.ndarray, v: np.ndarray) -> list[tuple[float, float]]:
    """(start, length) of every stretch of >= 2 consecutive sample gaps without a new frame."""
    flat = np.diff(v) == 0
    out, i = [], 0
    while i < len(flat):
        if flat[i]:
            j = i
            while j < len(flat) and flat[j]:
                j += 1
            if j - i >= 2:
                out.append((float(t[i]), float(t[j] - t[i])))
            i = j
        else:
            i += 1
    return out


def adjacent_spread(t: np.ndarray, v: np.ndarray, tau: float) -> float | None:
    """sd of log(rate of block 2k+1 / rate of block 2k), per cent, over blocks of tau seconds."""
    edges = np.arange(t[0], t[-1], tau)
    r = np.diff(np.interp(edges, t, v)) / tau
    n = len(r) // 2
    if n < 3 or (r[: 2 * n] <= 0).any():
        return None
    return float(np.std(np.log(r[1: 2 * n: 2] / r[0: 2 * n: 2])) * 100)


def one_run(base: Path, prio: int, seconds: float, d: Path) -> dict:
    f = d / f"prio-{prio}.yaml"
    f.write_text(yaml.safe_dump({"extends": str(base.resolve()),
                                 "testbed": {"name": "bench-napi", "cpus": {"dut_rt_priority": prio}}}))
    cfg = load_config(f)
    tb = get_testbed(cfg)
    tb.down()
    tb.up()
    try:
        lb = get_lb("wire", tb)
        lb.start()
        h = start_traffic(tb, "udp_payload", payload_tunables(22, 256), 0.0)
        try:
            time.sleep(1.0)
            with RateSampler(tb, backend_ifaces(cfg), INTERVAL_S) as s:
                s.start()
                time.sleep(seconds)
                series = s.stop()
        finally:
            h.stop()
            lb.stop()
    finally:
        tb.down()
    if series["error"]:
        raise SystemExit(f"bench_napi_priority: the sampler failed: {series['error']}")
    smp = np.array(series["samples"], dtype=float)
    t, v = smp[:, 0], smp[:, 1]
    st = stalls(t, v)
    return {"prio": prio, "samples": len(t), "gap_p99_ms": float(np.percentile(np.diff(t), 99) * 1e3),
            "rate_mpps": float((v[-1] - v[0]) / (t[-1] - t[0]) / 1e6), "stalls": len(st),
            "stall_ms": statistics.median(s[1] for s in st) * 1e3 if st else 0.0,
            "stall_period_s": statistics.median(np.diff([s[0] for s in st])) if len(st) > 1 else None,
            "spread": {tau: adjacent_spread(t, v, tau) for tau in TAUS}}


def main(argv):
    a = benchargs.parse(__doc__, ("ROUNDS", benchargs.positive_int, 2, "rounds, one run per priority each"),
                        ("SECONDS", benchargs.positive_float, 40.0, "seconds sampled per run"),
                        ("CONFIG", benchargs.existing_file, "config/local.yaml", "testbed config to extend"), argv=argv)
    d = Path(tempfile.mkdtemp(prefix="xb-bench-napi-"))
    print(f"bench_napi_priority: {a.rounds} rounds x priorities {PRIORITIES} (ABBA), {a.seconds:g} s each, "
          f"samples every {INTERVAL_S * 1e3:g} ms; wire LB, generator unpaced", flush=True)
    runs = []
    for rnd in range(a.rounds):
        for prio in (PRIORITIES if rnd % 2 == 0 else PRIORITIES[::-1]):
            r = one_run(Path(a.config), prio, a.seconds, d)
            runs.append(r)
            per = f"every {r['stall_period_s']:.2f} s" if r["stall_period_s"] else "-"
            print(f"round {rnd + 1} prio {prio:2d}: {r['rate_mpps']:.3f} Mpps, {r['samples']} samples (gap p99 "
                  f"{r['gap_p99_ms']:.1f} ms), {r['stalls']} stalls (median {r['stall_ms']:.0f} ms, {per}); adjacent-block "
                  "spread % [x sqrt(tau)]: " + ", ".join(
                      f"{tau:g} s {s:.1f} [{s * tau ** 0.5:.2f}]" if s is not None else f"{tau:g} s -"
                      for tau, s in r["spread"].items()), flush=True)
    print("\nmedian over rounds, adjacent-block spread % x sqrt(tau) (lower: tighter ratios per second measured)")
    print("prio  stalls/run  " + "  ".join(f"{tau:>6g} s" for tau in TAUS))
    for prio in PRIORITIES:
        rs = [r for r in runs if r["prio"] == prio]
        cells = []
        for tau in TAUS:
            xs = [r["spread"][tau] * tau ** 0.5 for r in rs if r["spread"][tau] is not None]
            cells.append(f"{statistics.median(xs):8.2f}" if xs else f"{'-':>8}")
        print(f"{prio:4d}  {statistics.median(r['stalls'] for r in rs):10g}  " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
