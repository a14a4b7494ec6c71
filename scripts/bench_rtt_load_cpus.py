#!/usr/bin/env python3
"""Benchmark: does the harness hold rtt_load's paced background up when it runs on the generator's
CPU? Runs rtt_load's capacity point and one level's point for each SPLIT with the harness kept off
the generator's CPU (testbed.cpus.harness_off_generator true, the default) and free to run anywhere
(false), the two interleaved split by split, PASSES times, each run in a results tree of its own
with the config's attempts and machine retries (a capacity point must be valid for its level point
to run); every attempt of a level point is counted once.

Printed per attempt of a level point: the background's achieved / requested rate, the frames its
token bucket dropped because the generator was held up longer than traffic.xdpgen.bucket_ms
(tokens_lost), the probes lost, the largest cache-line round trip of the attempt and its verdict;
then per placement: attempts, those whose background reached 99 % (rtt_load's rule), attempts without a
lost token, probes lost, valid attempts.

What it does not tell: how often the host separates the two vCPUs (both placements meet that state
alike; the machine rule judges it), nor another machine kind.

Usage (root): XENOBENCH_NS_PREFIX=xbl- .venv/bin/python scripts/bench_rtt_load_cpus.py [LEVEL] [SPLITS] [PASSES] [CONFIG]
(defaults 0.8, "single,70/30", 2, config/local.yaml)
"""

import json
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

PLACEMENTS = (("off the generator's CPU", True), ("anywhere", False))


def bench_config(base: Path, off: bool, level: float, splits: list[str], d: Path) -> Path:
    """A config extending `base`: the harness's placement, rtt_load at the one level and the splits."""
    f = d / f"bench-harness-off-{str(off).lower()}.yaml"
    f.write_text(yaml.safe_dump({"extends": str(base.resolve()),
                                 "testbed": {"cpus": {"harness_off_generator": off}},
                                 "experiments": {"rtt_load": {"levels": [level], "splits": splits}}}))
    return f


def attempts(cfg, point: dict, root: Path) -> list[dict]:
    """Every attempt of the point's repetitions, each once: background share, tokens lost, probes
    lost, the largest cache-line round trip, verdict."""
    out = []
    tree = ResultsTree(root, cfg.name)
    for rep in range(1, int(cfg.section("experiments")["repetitions"]) + 1):
        trial = tree.trial("rtt_load", point, rep)
        machine = json.loads(trial.metadata.read_text()).get("machine") or {}
        for a in trial.read_result()["attempts"]:
            att = trial.attempt(a["attempt"])
            o = json.loads(att.outputs.read_text())
            bg = o.get("background") or {}
            req = bg.get("requested_pps") or 0
            rtts = (machine.get(att.path.name) or {}).get("cpu_pair_rtt_ns") or ()
            out.append({"share": (bg.get("achieved_pps") or 0) / req if req else None,
                        "tokens_lost": bg.get("tokens_lost"),
                        "probes_lost": sum(int(b["probe"].get("lost") or 0) for b in o.get("blocks") or [] if b.get("probe")),
                        "valid": a["valid"], "reasons": a["reasons"], "pair_rtt_ns": max(rtts) if rtts else None})
    return out


def main(argv):
    a = benchargs.parse(__doc__, ("LEVEL", benchargs.positive_float, 0.8, "rtt_load level, a share of the capacity (need not be in CONFIG)"),
                        ("SPLITS", str, "single,70/30", "rtt_load splits, comma-separated"),
                        ("PASSES", benchargs.positive_int, 2, "runs of each placement, interleaved"),
                        ("CONFIG", benchargs.existing_file, "config/local.yaml", "testbed config to extend"), argv=argv)
    splits = [s.strip() for s in a.splits.split(",") if s.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="xb-bench-rtt-load-cpus-"))
    try:
        cfgs = {off: load_config(bench_config(Path(a.config), off, a.level, splits, tmp)) for _, off in PLACEMENTS}
    except XenobenchError as e:  # a level or split the schema refuses, named with the key
        print(f"bench_rtt_load_cpus: LEVEL {a.level} or SPLITS {a.splits!r}: {e}", file=sys.stderr)
        return 2
    plan = points(cfgs[True], "rtt_load")
    chosen = {}
    for s in splits:
        cap = [p for p in plan if p.get("split") == s and p.get("level") == "max"]
        lvl = [p for p in plan if p.get("split") == s and p.get("level") == a.level]
        if not cap or not lvl:
            print(f"bench_rtt_load_cpus: rtt_load has no level {a.level} or capacity point for split {s!r} "
                  "(`xenobench experiment plan --only rtt_load` lists the points)", file=sys.stderr)
            return 2
        chosen[s] = cap + lvl
    print(f"bench_rtt_load_cpus: level {a.level}, splits {splits}, {a.passes} passes; results under {tmp}", flush=True)
    tb = get_testbed(cfgs[True])
    tb.down()
    tb.up()
    got: dict[bool, list[dict]] = {off: [] for _, off in PLACEMENTS}
    try:
        for n in range(1, a.passes + 1):
            for s in splits:
                for name, off in PLACEMENTS:
                    root = tmp / f"pass-{n}-off-{str(off).lower()}"
                    for p in chosen[s]:
                        run_point(get_testbed(cfgs[off]), "rtt_load", p, root, progress=lambda m: None)
                    rows = attempts(cfgs[off], chosen[s][-1], root)
                    got[off] += rows
                    for r in rows:
                        share = f"{r['share']:.4f}" if r["share"] is not None else "n/a"
                        print(f"pass {n} split {s} harness {name}: background {share} of requested, tokens lost "
                              f"{r['tokens_lost']}, probes lost {r['probes_lost']}, cache-line round trip "
                              f"{r['pair_rtt_ns']} ns, {'valid' if r['valid'] else 'INVALID: ' + '; '.join(r['reasons'])[:160]}",
                              flush=True)
    finally:
        tb.down()
    print("\nper placement (attempts of the level points)")
    for name, off in PLACEMENTS:
        rows = got[off]
        shares = [r["share"] for r in rows if r["share"] is not None]
        print(f"  harness {name:24s}: {len(rows)} attempts; background >= 99 %: {sum(x >= 0.99 for x in shares)}; "
              f"no token lost: {sum(r['tokens_lost'] == 0 for r in rows)}; share median "
              f"{statistics.median(shares) if shares else float('nan'):.4f}; probes lost "
              f"{sum(r['probes_lost'] for r in rows)}; valid {sum(r['valid'] for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
