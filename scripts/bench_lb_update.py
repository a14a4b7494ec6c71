#!/usr/bin/env python3
"""Benchmark: one backend change under load per LB (xenobench.update: the last backend removed,
then added back), ROUNDS rounds per LB, on the namespace testbed. Prints per LB the medians of:
the change's control time (command → the LB's report, harness clock) and the LB's own apply time;
command → last frame at the removed backend and → first frame at the added one (upper bounds from
its counter sampled back to back; the sample gap is the resolution); frames the removed backend got
after the removal was reported done (a lower bound); frames lost over the cycle.

Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_lb_update.py [ROUNDS] [LOAD_PPS] [CONFIG]
(defaults 3, 200000, config/local.yaml; LBs: every kind with an update path: xenoflow, ebpf, katran)
"""

import statistics
import sys
import tempfile
from pathlib import Path

from xenobench.config import load_config
from xenobench.errors import XenobenchError
from xenobench.lb import KINDS, LBS, get_lb, stop_all
from xenobench.testbed import get_testbed
from xenobench.update import change_cycle, write_sets


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    rounds = int(argv[0]) if argv else 3
    load = float(argv[1]) if len(argv) > 1 else 200000.0
    cfg = load_config(argv[2] if len(argv) > 2 else "config/local.yaml")
    tb = get_testbed(cfg)
    tb.up()
    full, less = write_sets(cfg.service.backends, Path(tempfile.mkdtemp()))
    try:
        stop_all(tb)
        for kind in [k for k in KINDS if not LBS[k].reference]:
            lb = get_lb(kind, tb)
            try:
                lb.start(full)
            except XenobenchError as e:
                print(f"{kind}: not run: {e}")
                continue
            rs = []
            try:
                for _ in range(rounds):
                    rs.append(change_cycle(tb, lb, full, less, load_pps=load))
            finally:
                lb.stop()

            def med(f):
                v = [f(r) for r in rs if f(r) is not None]
                return statistics.median(v) if v else float("nan")
            print(f"{kind:9s} control remove/add {1e3 * med(lambda r: r['remove']['control_s']):.2f}/"
                  f"{1e3 * med(lambda r: r['add']['control_s']):.2f} ms (LB apply "
                  f"{1e3 * med(lambda r: r['remove']['apply_s']):.2f}/{1e3 * med(lambda r: r['add']['apply_s']):.2f} ms); "
                  f"last frame at removed <= {1e3 * med(lambda r: r['remove']['remove_last_frame_s']):.1f} ms, "
                  f"first at added <= {1e3 * med(lambda r: r['add']['add_first_frame_s']):.1f} ms "
                  f"(sample gap {1e3 * med(lambda r: r['sample_gap_median_s']):.1f} ms); after done "
                  f"{med(lambda r: r['remove']['after_done_frames']):.0f} frames; lost "
                  f"{med(lambda r: r['lost_frames']):.0f} of {med(lambda r: r['tx_packets']):.0f} "
                  f"({med(lambda r: r['loss_pct']):.3f} %); rounds {len(rs)}")
    finally:
        tb.down()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
