#!/usr/bin/env python3
"""Benchmark: idle-path DNS RTT on the namespace testbed, per server (xdp, python, bind9), without
and with the eBPF load balancer: the prober's kernel-timestamp median/std/p99, the same run's pcap
analysis, their per-query difference, and the prober's own overhead (user-space clock around
sendto/recvmsg minus the kernel timestamps). A last run per server without the capture shows
what tcpdump adds. Numbers describe this machine (2 shared cores), not a BlueField.
Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_rtt.py [COUNT] [RATE_QPS]"""

import os
import tempfile
from pathlib import Path

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbb-")

import benchargs  # noqa: E402  (scripts/benchargs.py)
from xenobench.config import load_config  # noqa: E402
from xenobench.dns import start_server, stop_server  # noqa: E402
from xenobench.lb import get_lb  # noqa: E402
from xenobench.rtt import probe  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402

args = benchargs.parse(__doc__, ("COUNT", benchargs.positive_int, 900, "queries per row"),
                       ("RATE_QPS", benchargs.positive_float, 500.0, "queries per second"))
count, rate = args.count, args.rate_qps
tb = get_testbed(load_config())
was_up = tb.is_up()
tb.up()
tmp = Path(tempfile.mkdtemp(prefix="bench-rtt-"))
rows = []
try:
    for kind in ("xdp", "python", "bind9"):
        start_server(tb, kind)
        try:
            for via in ("direct", "lb", "direct-nocap"):
                lb = get_lb("ebpf", tb) if via == "lb" else None
                if lb:
                    lb.start()
                try:
                    s = probe(tb, count=count, rate_qps=rate, out=tmp / f"{kind}-{via}.jsonl",
                              via="lb" if via == "lb" else "direct", capture=via != "direct-nocap")
                finally:
                    if lb:
                        lb.stop()
                rows.append((kind, via, s))
        finally:
            stop_server(tb, kind)
finally:
    if not was_up:
        tb.down()

print(f"Idle-path DNS RTT, namespace testbed, {count} queries at {rate:g} q/s per row (µs; 2 shared cores, noisy)")
print(f"{'server':7} {'path':13} {'ts':7} {'n':>4} {'lost':>4} | {'median':>7} {'std':>7} {'p99':>7} | "
      f"{'pcap med':>8} {'pcap std':>8} {'pcap p99':>8} | {'Δmed':>6} {'Δq p99':>6} | {'user med':>8} {'overhead':>8}")
for kind, via, s in rows:
    p = s.get("pcap") or {}
    pq = s.get("per_query") or {}

    def f(v, w=7):
        return f"{v:>{w}.1f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"
    path = {"direct": "none", "lb": "ebpf", "direct-nocap": "none, no pcap"}[via]
    print(f"{kind:7} {path:13} {s['timestamps']:7} {s['n']:>4} {s['lost']:>4} | {f(s['median_us'])} {f(s['std_us'])} "
          f"{f(s['p99_us'])} | {f(p.get('median_us'), 8)} {f(p.get('std_us'), 8)} {f(p.get('p99_us'), 8)} | "
          f"{f(s.get('pcap_median_diff_us'), 6)} {f(pq.get('rtt_diff_p99_abs_us'), 6)} | "
          f"{f(s['user_median_us'], 8)} {f(s['overhead_median_us'], 8)}")
print("Δmed: prober − pcap median; Δq p99: 99th percentile of |prober − pcap| per query; "
      "overhead: median of (user-space RTT − kernel RTT)")
for kind, via, s in rows:
    d = s.get("pcap_median_diff_us")
    if d is not None and abs(d) > s["tolerance_us"]:
        print(f"note: {kind}/{via}: prober and pcap medians differ by {d} µs (> tolerance {s['tolerance_us']} µs)")
