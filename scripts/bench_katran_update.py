#!/usr/bin/env python3
"""Benchmark: Katran's runtime update (xenobench.agents.katran_lb.update_reals) as a git revision
had it ("before", REV) against the working tree's ("after"), on the same pinned maps of a running
Katran on the namespace testbed, interleaved: each round runs both, in alternating order, each one
change {fips2, fips3} -> {fips2} and back. Prints per implementation the median and range of one
change's time in the agent's process (what its "apply_s" reports), the per-round ratio before /
after (median and range), and the share of one change that is the Maglev ring's computation
(xenobench.agents.maglev.ring, timed alone in the same process).

Usage (root, a Katran checkout): XENOBENCH_NS_PREFIX=xbb- XENOBENCH_KATRAN_DIR=... \\
    .venv/bin/python scripts/bench_katran_update.py [ROUNDS] [REV] [CONFIG]
(defaults 10, main, config/local.yaml)
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from xenobench import REPO_ROOT
from xenobench.config import load_config
from xenobench.lb import get_lb, stop_all
from xenobench.lb.katran import node_reals
from xenobench.testbed import get_testbed
from xenobench.measure.update import write_sets
import benchargs  # noqa: E402  (scripts/benchargs.py)

# run in the LB node (its namespace): the revision's module loaded beside the tree's, same package
PROBE = r"""
import importlib.util, json, statistics, sys, time, argparse
from pathlib import Path
from xenobench.agents import katran_lb as after, maglev
spec = importlib.util.spec_from_file_location("xenobench.agents.katran_lb_before", sys.argv[1])
before = importlib.util.module_from_spec(spec); spec.loader.exec_module(before)
pindir, full, less, rounds = Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5])
a = argparse.Namespace(real=json.loads(sys.argv[6]))
t = {"before": [], "after": []}
for r in range(rounds):
    for name in (("before", "after") if r % 2 == 0 else ("after", "before")):
        mod = before if name == "before" else after
        t0 = time.perf_counter()
        mod.update_reals(pindir, full, less, a)
        mod.update_reals(pindir, less, full, a)
        t[name].append((time.perf_counter() - t0) / 2)
eps = [(1, 1, maglev.address_hash(x.split("=")[1])) for x in a.real[:2]]
eps[1] = (2, 1, eps[1][2])
ring = []
for _ in range(rounds):
    t0 = time.perf_counter(); maglev.ring(eps); ring.append(time.perf_counter() - t0)
print(json.dumps({**t, "ring": ring}))
"""


def main(argv):
    a = benchargs.parse(__doc__, ("ROUNDS", benchargs.positive_int, 10, "interleaved rounds"),
                        ("REV", str, "main", "git revision of the 'before' implementation"),
                        ("CONFIG", benchargs.existing_file, "config/local.yaml", "testbed config"), argv=argv)
    src = subprocess.run(["git", "-C", str(REPO_ROOT), "show", f"{a.rev}:xenobench/agents/katran_lb.py"],
                         capture_output=True, text=True)
    if src.returncode != 0:
        print(f"Failed to read the 'before' implementation at {a.rev}: {src.stderr.strip()}", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp())
    old = tmp / "katran_lb_before.py"
    old.write_text(src.stdout)
    cfg = load_config(a.config)
    tb = get_testbed(cfg)
    tb.up()
    full, less = write_sets(cfg.service.backends, tmp)
    try:
        stop_all(tb)
        lb = get_lb("katran", tb)
        lb.start(full)
        try:
            reals = [f"{n}={ad}" for n, ad in node_reals(cfg).items()]
            r = lb.node.run([sys.executable, "-c", PROBE, str(old), str(lb.pindir), str(full), str(less),
                             str(a.rounds), json.dumps(reals)], timeout=1800)
        finally:
            lb.stop()
    finally:
        tb.down()
    t = json.loads(r.stdout.strip().splitlines()[-1])

    def show(v):
        v = sorted(v)
        return f"median {1e3 * v[len(v) // 2]:.1f} ms [{1e3 * v[0]:.1f}, {1e3 * v[-1]:.1f}]"
    ratios = sorted(b / x for b, x in zip(t["before"], t["after"]))
    print(f"katran update_reals, one change (remove fips3 / add it back), {a.rounds} interleaved rounds")
    print(f"  before ({a.rev}): {show(t['before'])}")
    print(f"  after (tree):   {show(t['after'])}")
    print(f"  ratio before/after per round: median {ratios[len(ratios) // 2]:.1f}x [{ratios[0]:.1f}, {ratios[-1]:.1f}]")
    ring = sorted(t["ring"])[len(t["ring"]) // 2]
    print(f"  the Maglev ring alone (65537 slots, 2 reals): median {1e3 * ring:.1f} ms "
          f"({100 * ring / sorted(t['before'])[len(t['before']) // 2]:.0f} % of before, "
          f"{100 * ring / sorted(t['after'])[len(t['after']) // 2]:.0f} % of after)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
