#!/usr/bin/env python3
"""Benchmark: what the machine rule's steadiness limit (experiments.max_unpaced_cv_pct) keeps of
rtt_load's capacity trials. Runs the capacity point of SPLIT (the background unpaced through the
point's LB for capacity_s) TRIALS times with the limit off, one attempt each and no machine retries,
so that every attempt is recorded as it came; then judges the same attempts with and without the
limit. Both variants see exactly the same attempts: a paired comparison by construction, no
interleaving needed.

Printed per attempt: the maximum (the steady rate the study would take), the figure the limit
judges (the CV of the rates of its steady span's quarters), the largest cache-line round trip, and
the verdict of the rest of the rule; then for the attempts the rest of the rule accepts, with the
limit and without it: how many, the median maximum, its min-max and the spread (CV) of the maxima
across trials, and the median of the maxima the limit leaves out.

What it does not tell: what a retry of a left-out attempt would have measured (the study retries
it; the machine may still be in the state that moved it), and another machine kind.

Usage (root): XENOBENCH_NS_PREFIX=xbu- .venv/bin/python scripts/bench_unpaced_cv.py [TRIALS] [SPLIT] [LIMIT] [CONFIG]
(defaults 16, worst, the config's max_unpaced_cv_pct, config/local.yaml)
"""

import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

from xenobench.config import load_config
from xenobench.errors import XenobenchError
from xenobench.experiments import points
from xenobench.layout import ResultsTree
from xenobench.procedures import run_point
from xenobench.testbed import get_testbed
import benchargs  # noqa: E402  (scripts/benchargs.py)


def bench_config(base: Path, split: str, trials: int, d: Path) -> Path:
    """A config extending `base`: the limit off, TRIALS repetitions of one attempt, no machine retries."""
    f = d / "bench-unpaced-cv.yaml"
    f.write_text(yaml.safe_dump({"extends": str(base.resolve()),
                                 "experiments": {"max_unpaced_cv_pct": None, "repetitions": trials,
                                                 "max_attempts": 1, "machine_retries": 0,
                                                 "rtt_load": {"splits": [split]}}}))
    return f


def attempts(cfg, point: dict, root: Path, trials: int) -> list[dict]:
    """Each repetition's one attempt: maximum, CV, largest cache-line round trip, verdict."""
    out = []
    tree = ResultsTree(root, cfg.name)
    for rep in range(1, trials + 1):
        trial = tree.trial("rtt_load", point, rep)
        machine = json.loads(trial.metadata.read_text()).get("machine") or {}
        for a in trial.read_result()["attempts"]:
            att = trial.attempt(a["attempt"])
            o = json.loads(att.outputs.read_text())
            rec = machine.get(att.path.name) or {}
            rtts = rec.get("cpu_pair_rtt_ns") or ()
            cv = (rec.get("figures") or {}).get("unpaced_cv_pct")  # recorded though not judged here
            out.append({"rep": rep, "rx_pps": o.get("rx_pps"), "cv_pct": cv, "valid": a["valid"],
                        "reasons": a["reasons"], "pair_rtt_ns": max(rtts) if rtts else None})
    return out


def summary(name: str, rates: list[float]) -> str:
    if not rates:
        return f"  {name:28s}: none"
    spread = 100 * statistics.pstdev(rates) / statistics.mean(rates) if len(rates) > 1 else float("nan")
    return (f"  {name:28s}: {len(rates):2d} trials, median {statistics.median(rates) / 1e6:.3f} Mpps, min-max "
            f"{min(rates) / 1e6:.3f}-{max(rates) / 1e6:.3f}, CV across trials {spread:.1f} %")


def main(argv):
    a = benchargs.parse(__doc__, ("TRIALS", benchargs.positive_int, 16, "capacity trials, one attempt each"),
                        ("SPLIT", str, "worst", "rtt_load split whose capacity point runs"),
                        ("LIMIT", benchargs.positive_float, None, "CV limit in per cent (None: the config's max_unpaced_cv_pct)"),
                        ("CONFIG", benchargs.existing_file, "config/local.yaml", "testbed config to extend"), argv=argv)
    tmp = Path(tempfile.mkdtemp(prefix="xb-bench-unpaced-cv-"))

    def refuse(why: str) -> int:  # before touching the machine: nothing left behind
        shutil.rmtree(tmp)
        print(f"bench_unpaced_cv: {why}", file=sys.stderr)
        return 2
    try:
        cfg = load_config(bench_config(Path(a.config), a.split, a.trials, tmp))
        limit = a.limit if a.limit is not None else load_config(a.config).section("experiments").get("max_unpaced_cv_pct")
    except XenobenchError as e:  # a split the schema refuses, named with the key
        return refuse(f"SPLIT {a.split!r}: {e}")
    if limit is None:
        return refuse(f"{a.config} does not judge an unpaced trial's steadiness (experiments.max_unpaced_cv_pct "
                      "is null): give LIMIT")
    cap = [p for p in points(cfg, "rtt_load") if p.get("split") == a.split and p.get("level") == "max"]
    if not cap:
        return refuse(f"rtt_load has no capacity point for split {a.split!r} (`xenobench experiment plan --only "
                      "rtt_load` lists the points)")
    print(f"bench_unpaced_cv: split {a.split}, {a.trials} trials, limit {limit:g} %; results under {tmp}", flush=True)
    tb = get_testbed(cfg)
    tb.down()
    tb.up()
    try:
        run_point(tb, "rtt_load", cap[0], tmp, progress=lambda m: None)
    finally:
        tb.down()
    rows = attempts(cfg, cap[0], tmp, a.trials)
    for r in rows:
        cv = "n/a" if r["cv_pct"] is None else f"{r['cv_pct']:.1f} %"
        rate = "n/a" if r["rx_pps"] is None else f"{r['rx_pps'] / 1e6:.3f} Mpps"
        print(f"trial {r['rep']:2d}: maximum {rate}, CV {cv}, cache-line round trip {r['pair_rtt_ns']} ns, "
              f"{'valid' if r['valid'] else 'INVALID: ' + '; '.join(r['reasons'])[:160]}", flush=True)
    calm = [r for r in rows if r["valid"] and r["rx_pps"]]
    kept = [r for r in calm if r["cv_pct"] is None or r["cv_pct"] <= limit]
    left = [r for r in calm if r not in kept]
    print(f"\nthe attempts the rest of the rule accepts ({len(calm)} of {len(rows)})")
    print(summary("without the limit", [r["rx_pps"] for r in calm]))
    print(summary(f"with the limit ({limit:g} %)", [r["rx_pps"] for r in kept]))
    print(summary("left out by the limit", [r["rx_pps"] for r in left]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
