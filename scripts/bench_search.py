#!/usr/bin/env python3
"""Benchmark: NDR/PDR by MLRsearch (xenobench.search) vs a linear sweep reaching the same
precision, on the namespace testbed with a live LB, both through the same trial procedure
(procedures.search_trial: the udp_payload profile at a load, generator tx vs the backends' rx).

1. The search with config/local.yaml's ndr_pdr settings (one LB, 22 B payload): trials, trial
   seconds, wall time, NDR/PDR and their bounds.
2. A linear sweep as the thesis ran it (Sec. 7.4.3, Fig. 7.8), at the search's precision: from
   min_load_pps upward in steps of relative_width x the search's NDR, one trial per load at the
   search's final trial duration, stopped at the first load losing more than the PDR ratio (a
   sweep that knows where to stop: fewer trials than the thesis's full range). Also printed: the
   trial count of the full range up to max_load_pps (linear_sweep_trials).

Target: the search needs <= 1/3 of the sweep's trials. The machine is shared (2 cores, several
engineers) and the generator (trafgen) tops out near the LB's rate here: figures describe this
machine only, and the NDR found is the generator-bound one where the generator falls short.
Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_search.py [LB] [RESULTS_DIR]"""

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbb-")

from xenobench.config import load_config  # noqa: E402
from xenobench.layout import ResultsTree, SearchDir  # noqa: E402
from xenobench.measure.common import measured_ifaces  # noqa: E402
from xenobench.measure.search import search_trial  # noqa: E402
from xenobench.procedures import point_plan, point_setup  # noqa: E402
from xenobench.search import SearchSettings, linear_sweep_trials, run_search, trial_runner  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402
import benchargs  # noqa: E402  (scripts/benchargs.py)

from xenobench.lb import KINDS as LBS  # noqa: E402

args = benchargs.parse(__doc__, ("LB", str, "xenoflow", "load balancer: " + ", ".join(LBS)),
                       ("RESULTS_DIR", Path, None, "kept results tree (None: a temporary one, removed)"))
if args.lb not in LBS:
    sys.exit(f"Failed to run the benchmark: LB {args.lb!r} is not one of {', '.join(LBS)}")
lb_kind = args.lb
root = args.results_dir or Path(tempfile.mkdtemp(prefix="bench_search-"))
cfg = load_config()
tb = get_testbed(cfg)
tb.up()
ex = cfg.section("experiments")["ndr_pdr"]
s = SearchSettings.from_section(ex, f"{cfg.path}: experiments.ndr_pdr")
point = {"lb": lb_kind, "payload": 22}
tree = ResultsTree(root, cfg.name)
quiet = lambda *_: None  # noqa: E731
ifaces = measured_ifaces(cfg)
try:
    with point_setup(tb, "ndr_pdr", point, progress=quiet) as lb:
        proc = lambda c, d, load: search_trial(c, lb, d, load)  # noqa: E731
        sdir = tree.trial("ndr_pdr", point, 1).search
        run = trial_runner(tb, "ndr_pdr", point, 1, sdir, proc, ifaces=ifaces, max_attempts=2, progress=quiet,
                           plan=point_plan(cfg, "ndr_pdr", point))
        t0 = time.monotonic()
        rec = run_search(s, run, sdir, progress=quiet)
        search_wall = time.monotonic() - t0
        ndr, pdr = rec["goals"][0], rec["goals"][1]
        print(f"search ({lb_kind}, 64 B frames, width {s.relative_width:g}, trials {s.initial_trial_duration_s:g}-"
              f"{s.final_trial_duration_s:g} s, {s.duration_sum_s:g} s per bound): {rec['n_trials']} trials, "
              f"{rec['trial_seconds']:.1f} trial-s, {search_wall:.1f} s wall", flush=True)
        for g in (ndr, pdr):
            print(f"  {g['name']}: {g['lower_bound_pps'] or 0:.0f} pps (upper bound {g['upper_bound_pps'] or 0:.0f}, "
                  f"width {g['relative_width'] or 0:.4f})", flush=True)
        if ndr["lower_bound_pps"] is None:
            sys.exit("no NDR found: no sweep to compare with")
        step = s.relative_width * ndr["lower_bound_pps"]
        sweep = SearchDir(tree.trial("ndr_pdr", point, 1).path / "sweep")
        srun = trial_runner(tb, "ndr_pdr", point, 1, sweep, proc, ifaces=ifaces, max_attempts=2, progress=quiet)
        t0 = time.monotonic()
        k, load, last_ok, first_bad = 0, s.min_load_pps, None, None
        max_ratio = max(g.loss_ratio for g in s.goals)
        while load <= s.max_load_pps:
            k += 1
            m = srun(k, s.final_trial_duration_s, load)
            lr = (max(0, m.offered - m.received) + abs((m.intended_count or m.offered) - m.offered)) / max(
                m.offered, m.intended_count or 0, 1)
            if lr == 0:
                last_ok = load
            if lr > max_ratio:
                first_bad = load
                break
            load += step
        sweep_wall = time.monotonic() - t0
        full = linear_sweep_trials(s.min_load_pps, s.max_load_pps, ndr["lower_bound_pps"], s.relative_width)
        print(f"linear sweep from {s.min_load_pps:.0f} pps in steps of {step:.0f} pps: {k} trials "
              f"({k * s.final_trial_duration_s:.1f} trial-s), {sweep_wall:.1f} s wall; last loss-free load "
              f"{last_ok or 0:.0f} pps, first beyond {100 * max_ratio:g} % loss {first_bad or 0:.0f} pps", flush=True)
        print(f"  full range to max_load_pps {s.max_load_pps:.0f}: {full} trials (x 3 repetitions as in the "
              f"thesis: {3 * full})", flush=True)
        print(f"search / stopped sweep: {rec['n_trials'] / k:.2f} of the trials, {search_wall / sweep_wall:.2f} of "
              f"the wall time; search / full-range sweep: {rec['n_trials'] / full:.3f} of the trials "
              f"(target <= 0.33)", flush=True)
finally:
    tb.down()
    if args.results_dir is None:
        shutil.rmtree(root, ignore_errors=True)
