#!/usr/bin/env python3
"""Benchmark: how many kept rounds a point of the paired rate design needs (pps, compare: `rounds` in
config/local.yaml). It runs one point of EXPERIMENT at each of the ROUNDS values, interleaved
(pass 1 at every value, then pass 2, ...), PASSES times, each run with the config's repetitions on
one testbed and in a results tree of its own. Per run it prints the wall time and, per LB against
the reference, the median ratio of per-round rates, its bootstrap 95 % CI (the study's: the
repetitions resampled, then their rounds), the CI's half-width and the verdict, for both measures
(the rate, and the rate per CPU-second of the DUT NAPI thread); then per ROUNDS value the largest and
the median half-width over its runs and whether its runs' verdicts agree.

What an interval here does not cover: another machine kind, and states of this machine that lasted
longer than the benchmark (the passes share one stretch of the host's load).

Usage (root): XENOBENCH_NS_PREFIX=xbr- .venv/bin/python scripts/bench_rounds.py [EXPERIMENT] [POINT] [ROUNDS] [PASSES] [CONFIG]
(defaults pps, payload-22, "2,4,6", 3, config/local.yaml)
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from xenobench.config import load_config
from xenobench.errors import XenobenchError
from xenobench.experiments import order, points, section
from xenobench.layout import ResultsTree, point_id
from xenobench.measure.rank import ranking, ratio_record
from xenobench.procedures import run_point
from xenobench.testbed import get_testbed
import benchargs  # noqa: E402  (scripts/benchargs.py)

MEASURES = (("rate", "rate_pps"), ("per CPU-s", "rx_per_dut_cpu_s"))


def rounds_list(text: str) -> list[int]:
    """ROUNDS: whole numbers of at least 1, comma-separated."""
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers >= 1 (e.g. 2,4,6)")
    return vals


def experiment_name(text: str) -> str:
    """EXPERIMENT: one of the study's experiments (xenobench.experiments.order)."""
    if text not in order():
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(order())}")
    return text


def bench_config(base: Path, experiment: str, rounds: int, d: Path) -> Path:
    """A config extending `base` with `rounds` kept rounds for the experiment, one attempt a trial."""
    f = d / f"bench-rounds-{rounds}.yaml"
    f.write_text(yaml.safe_dump({"extends": str(base.resolve()),
                                 "experiments": {"max_attempts": 1, experiment: {"rounds": rounds}}}))
    return f


def run_ratios(cfg, experiment: str, point: dict, root: Path) -> dict[str, list[dict]]:
    """Every valid repetition's kept rounds of the point, pooled as the aggregation pools them."""
    ex = section(cfg, experiment)
    rows: dict[str, list] = {m: [] for m, _ in MEASURES}
    for rep in range(1, int(cfg.section("experiments")["repetitions"]) + 1):
        res = ResultsTree(root, cfg.name).trial(experiment, point, rep).read_result()
        if not res["valid"]:
            print(f"    rep {rep}: INVALID ({'; '.join(r for a in res['attempts'] for r in a['reasons'])[:300]})")
            continue
        for b in res["outputs"].get("blocks") or []:
            for m, field in MEASURES:
                if b.get("round_kept", True) and b.get(field):
                    rows[m].append((rep, b["round"], b["lb"], b[field]))
    return {m: [ratio_record(r) for r in ranking(rs, list(ex["lbs"]), ex["reference"], int(ex["bootstrap"]),
                                                 int(ex["seed"])) if r.reference == ex["reference"]]
            for m, rs in rows.items()}


def main(argv):
    a = benchargs.parse(__doc__, ("EXPERIMENT", experiment_name, "pps", "a paired rate experiment of the config"),
                        ("POINT", str, "payload-22", "the point's id (`xenobench experiment plan`)"),
                        ("ROUNDS", rounds_list, "2,4,6", "kept rounds per repetition to compare, comma-separated"),
                        ("PASSES", benchargs.positive_int, 3, "runs at each value, interleaved"),
                        ("CONFIG", benchargs.existing_file, "config/local.yaml", "testbed config to extend"), argv=argv)
    values = a.rounds
    tmp = Path(tempfile.mkdtemp(prefix="xb-bench-rounds-"))
    cfgs = {r: load_config(bench_config(Path(a.config), a.experiment, r, tmp)) for r in values}
    first = cfgs[values[0]]
    try:
        point = next(p for p in points(first, a.experiment) if point_id(p) == a.point)
    except (StopIteration, XenobenchError):
        print(f"bench_rounds: {a.experiment} has no point {a.point!r} in {a.config} "
              "(`xenobench experiment plan` lists them)", file=sys.stderr)
        return 2
    if not section(first, a.experiment).get("lbs") or "reference" not in section(first, a.experiment):
        print(f"bench_rounds: {a.experiment} in {a.config} is not a paired rate design (no lbs and reference)",
              file=sys.stderr)
        return 2
    print(f"bench_rounds: {a.experiment} {a.point}, rounds {values}, {a.passes} passes; results under {tmp}", flush=True)
    tb = get_testbed(first)
    tb.down()
    tb.up()
    runs: dict[int, list[dict]] = {r: [] for r in values}
    try:
        for n in range(1, a.passes + 1):
            for r in values:
                root = tmp / f"pass-{n}-rounds-{r}"
                t0 = time.monotonic()
                run_point(get_testbed(cfgs[r]), a.experiment, point, root, progress=lambda m: None)
                secs = time.monotonic() - t0
                got = run_ratios(cfgs[r], a.experiment, point, root)
                runs[r].append(got)
                print(f"pass {n} rounds {r}: {secs:.1f} s", flush=True)
                for m, recs in got.items():
                    for x in recs:
                        print(f"    {m:9s} {x['lb']}/{x['vs']} {x['median']:.3f} [{x['ci_low']:.3f}, {x['ci_high']:.3f}] "
                              f"+-{x['half_width_pct']:.1f} % {x['verdict']}", flush=True)
    finally:
        tb.down()
    print("\nper rounds value: CI half-width over its runs (max, median), verdicts the same in every run")
    for r in values:
        for m, _ in MEASURES:
            recs = [x for run in runs[r] for x in run[m]]
            if not recs:
                print(f"  rounds {r} {m}: no ratio")
                continue
            widths = [x["half_width_pct"] for x in recs]
            verdicts = {}
            for x in recs:
                verdicts.setdefault(x["lb"], set()).add(x["verdict"])
            same = sum(len(v) == 1 for v in verdicts.values())
            print(f"  rounds {r} {m:9s}: max +-{max(widths):.1f} %, median +-{statistics.median(widths):.1f} %; "
                  f"verdicts the same for {same} of {len(verdicts)} LBs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
