#!/usr/bin/env python3
"""Benchmark: rates a reviewer can rank (experiments/rank.yaml, xenobench.measure.rank), RUNS independent
runs of the interleaved rate procedure on the namespace testbed, each on a fresh testbed (down, up)
and in a results tree of its own. Per run it prints, per LB against the reference (the wire) and
per LB pair: the median ratio of per-round rates, its bootstrap 95 % CI, the CI's half-width in per
cent of the median and the verdict (an order only where the CI excludes 1); then whether the
ranking (the verdicts) agrees across the runs, and whether every half-width met the target (<= 2 %).

Two tables: the rate as the experiment defines it (the backends' rx per second of a block's window),
and the same rx per second of CPU time of the LB port's pinned NAPI thread over the window
(xenobench.measure.rank.dut_cpu_reader). On this 2-core machine the DUT NAPI thread (CPU 1) shares its CPU
with whatever else the scheduler puts there (the harness among them) and the generator (CPU 0) is
starved now and then, at sub-second scales, so a block's plain rate measures how much of the CPU it
got as much as the LB. The second table divides that share out.

LBs: wire, xenoflow, ebpf, and katran where a Katran checkout is found (xenobench.katran.locate:
$XENOBENCH_KATRAN_DIR, katran.checkout, ../shared/katran); Katran's start fills a 65537-slot ring,
so every LB is started once per run (per repetition), never per block.

Each run is REPS repetitions of ROUNDS kept rounds, pooled as the study's aggregation pools them; the CI
resamples the repetitions, then their rounds (xenobench.rateblocks: the ratios move with the
machine's state between repetitions, docs/vm-noise.md). The rounds a repetition
left out (the host running the generator's and the DUT's vCPUs apart, xenobench.machine.RULES)
are printed with their figures; an invalid repetition (fewer than ROUNDS kept) is not pooled. The
samples' interval is the config's (experiments.rank.sample_interval_s).

Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_rank.py [RUNS] [ROUNDS] [BLOCK_S] [CONFIG] [SETTLE_S] [REPS]
(defaults 3, 20, 0.2, config/local.yaml, 0.05, 6)
"""

import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from xenobench import katran
from xenobench.config import load_config
from xenobench.errors import XenobenchError
from xenobench.layout import ResultsTree
from xenobench.procedures import run_point
from xenobench.experiments import section
from xenobench.measure.rank import ranking, ratio_record
from xenobench.testbed import get_testbed
import benchargs  # noqa: E402  (scripts/benchargs.py)

TARGET_PCT = 2.0  # the target: ratio CI half-widths <= 2 %


def lbs_for(cfg) -> list[str]:
    out = ["wire", "xenoflow", "ebpf"]
    try:
        katran.locate(cfg)
        out.append("katran")
    except XenobenchError as e:
        print(f"katran: left out ({e})")
    return out


def bench_config(base: Path, lbs: list[str], rounds: int, block_s: float, settle_s: float, reps: int,
                 d: Path) -> Path:
    """A config extending `base`: its testbed, `reps` repetitions of rank, the sizes given."""
    f = d / "bench-rank.yaml"
    f.write_text(yaml.safe_dump({"extends": str(base.resolve()), "testbed": {"name": "bench-rank"},
                                 "experiments": {"max_attempts": 1, "rank": {
                                     "repetitions": reps, "lbs": lbs, "rounds": rounds, "block_s": block_s,
                                     "settle_s": settle_s}}}))
    return f


def table(title: str, runs: list[list[dict]]) -> None:
    """Per run and pair: median ratio, 95 % CI, half-width, verdict; then the verdicts side by side."""
    print(f"\n== {title}")
    print(f"{'run':>3}  {'pair':24s} {'median':>8}  {'95 % CI':>19}  {'half-width':>10}  verdict")
    for n, rk in enumerate(runs, 1):
        for r in rk:
            print(f"{n:>3}  {r['lb'] + ' / ' + r['vs']:24s} {r['median']:8.4f}  [{r['ci_low']:.4f}, {r['ci_high']:.4f}]  "
                  f"{r['half_width_pct']:9.2f}%  {r['verdict']}")
    verdicts = [{(r["lb"], r["vs"]): r["verdict"] for r in rk} for rk in runs]
    pairs = sorted(set().union(*verdicts)) if verdicts else []
    agree = [p for p in pairs if len({v.get(p) for v in verdicts}) == 1]
    for p in pairs:
        print(f"     {p[0] + ' / ' + p[1]:24s} verdicts: {', '.join(str(v.get(p)) for v in verdicts)}"
              f"{'' if p in agree else '   <- differs'}")
    widths = [r["half_width_pct"] for rk in runs for r in rk]
    print(f"ranking agrees across the {len(runs)} runs: {'yes' if len(agree) == len(pairs) and pairs else 'no'} "
          f"({len(agree)} of {len(pairs)} pairs)")
    print(f"CI half-widths: max {max(widths):.2f} %, median {sorted(widths)[len(widths) // 2]:.2f} %, target <= "
          f"{TARGET_PCT:g} %: {'met' if max(widths) <= TARGET_PCT else 'NOT met'}" if widths else "no ratios")


def main(argv):
    a = benchargs.parse(__doc__, ("RUNS", benchargs.positive_int, 3, "independent runs, each on a fresh testbed"),
                        ("ROUNDS", benchargs.positive_int, 20, "rounds per repetition (each every LB once)"),
                        ("BLOCK_S", benchargs.positive_float, 0.2, "seconds of a block's measured window"),
                        ("CONFIG", benchargs.existing_file, "config/local.yaml", "testbed config to extend"),
                        ("SETTLE_S", benchargs.positive_float, 0.05, "seconds discarded after each swap"),
                        ("REPS", benchargs.positive_int, 6, "repetitions per run (each LB loaded afresh)"), argv=argv)
    base = load_config(a.config)
    lbs = lbs_for(base)
    tmp = Path(tempfile.mkdtemp(prefix="xb-bench-rank-"))
    cfg = load_config(bench_config(Path(a.config), lbs, a.rounds, a.block_s, a.settle_s, a.reps, tmp))
    print(f"bench_rank: {a.runs} runs x {a.reps} repetitions x {a.rounds} rounds x {len(lbs)} LBs ({', '.join(lbs)}), blocks of "
          f"{a.block_s:g} s after {a.settle_s:g} s settle; results under {tmp}", flush=True)
    runs = []
    for n in range(1, a.runs + 1):
        tb = get_testbed(cfg)
        tb.down()  # a fresh testbed per run
        tb.up()
        root = tmp / f"run-{n}"
        t0 = time.monotonic()
        try:
            run_point(tb, "rank", {"payload": 22}, root, progress=lambda m: print(f"  run {n}: {m}", flush=True))
        finally:
            tb.down()
        rows: dict[str, list] = {"ranking": [], "ranking_per_dut_cpu": []}
        for rep in range(1, a.reps + 1):  # every valid repetition's rounds, pooled as the aggregation does
            res = ResultsTree(root, cfg.name).trial("rank", {"payload": 22}, rep).read_result()
            o = res["outputs"]
            print(f"run {n} rep {rep}: {'valid' if res['valid'] else 'INVALID'}, {len(o.get('blocks') or [])} blocks, "
                  f"{o.get('swaps')} swaps", flush=True)
            if not res["valid"]:
                print("  " + "\n  ".join(r for at in res["attempts"] if at["attempt"] == res["chosen_attempt"]
                                         for r in at["reasons"]))
                continue
            left = o.get("rounds_left_out") or {}
            if left:  # xenobench.machine.RULES: the figures over their limits, per round
                print(f"  {len(left)} rounds left out: " + ", ".join(f"{r} {w}" for r, w in left.items()))
            for b in o.get("blocks") or []:
                if not b.get("round_kept", True):
                    continue
                for key, field in (("ranking", "rate_pps"), ("ranking_per_dut_cpu", "rx_per_dut_cpu_s")):
                    if b.get(field):
                        rows[key].append((rep, b["round"], b["lb"], b[field]))
        ex = section(cfg, "rank")
        print(f"run {n}: {time.monotonic() - t0:.0f} s", flush=True)
        runs.append({key: [ratio_record(r) for r in ranking(rs, lbs, ex["reference"], int(ex["bootstrap"]), int(ex["seed"]))]
                     for key, rs in rows.items()})
    for title, key in (("rate: backends' rx per second of the block's window", "ranking"),
                       ("rate per second of the DUT NAPI thread's CPU time (its CPU share divided out)",
                        "ranking_per_dut_cpu")):
        table(title, [o.get(key) or [] for o in runs])
    (tmp / "bench_rank.json").write_text(json.dumps({"runs": [{k: o.get(k) for k in ("ranking", "ranking_per_dut_cpu")}
                                                              for o in runs]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
