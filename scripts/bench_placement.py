#!/usr/bin/env python3
"""Benchmark: whether the host moves this VM's two vCPUs apart in response to our own load. It
keeps both CPUs busy (a spinning process pinned to each) for BUSY seconds, stops them, and then
samples the cache-line round trip between the two CPUs (loadgen/cpu_rtt, the machine rule's
prober) every 0.1 s for a second; ROUNDS times per busy length, the lengths interleaved, with idle
rounds (busy 0) among them.

It prints per round the samples (ns), and per busy length how many rounds began apart (first
sample above LIMIT_NS, experiments.max_cpu_pair_rtt_ns) and how many were still apart a second
later. Apart after busy rounds and not after idle ones: the placement follows our load, and a trial
that loads both CPUs will meet it (docs/vm-noise.md). Needs nothing but `make build`; no testbed.

Usage: .venv/bin/python scripts/bench_placement.py [ROUNDS] [LIMIT_NS]   (defaults 4, 200)
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import benchargs  # noqa: E402  (scripts/benchargs.py)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from xenobench.machine import CPU_RTT  # noqa: E402
from xenobench.nodes.netns import PipeSession  # noqa: E402

BUSY_S = (0.0, 0.2, 0.5, 1.0, 2.0, 4.0)
SPIN = "import time,sys\nt=time.monotonic()+float(sys.argv[1])\nwhile time.monotonic()<t: pass"


def main() -> int:
    a = benchargs.parse(__doc__, ("ROUNDS", benchargs.positive_int, 4, "rounds per busy length"),
                        ("LIMIT_NS", benchargs.positive_float, 200.0, "the round trip above which the CPUs are apart"))
    if not CPU_RTT.exists():
        print(f"{CPU_RTT} is missing: run `make build`", file=sys.stderr)
        return 2
    argv = [str(CPU_RTT), "0", "1"]
    sess = PipeSession("localhost", argv, subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                          stderr=subprocess.PIPE))
    tally = {b: [0, 0] for b in BUSY_S}
    try:
        for r in range(1, a.rounds + 1):
            for busy in (BUSY_S if r % 2 else BUSY_S[::-1]):
                if busy:
                    spin = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c", SPIN, str(busy)])
                            for c in (0, 1)]
                    for p in spin:
                        p.wait()
                ns = []
                for _ in range(10):
                    ns.append(round(float(json.loads(sess.request("20 100"))["min_ns"])))
                    time.sleep(0.1)
                tally[busy][0] += ns[0] > a.limit_ns
                tally[busy][1] += ns[-1] > a.limit_ns
                print(f"round {r}, both CPUs busy {busy:.1f} s, then every 0.1 s: {ns} ns", flush=True)
                time.sleep(1.0)
    finally:
        sess.close()
    print(f"\nper busy length: rounds apart (> {a.limit_ns:g} ns) at the first sample / still a second later")
    for busy, (first, later) in tally.items():
        print(f"  {busy:.1f} s: {first} / {later} of {a.rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
