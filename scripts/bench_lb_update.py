#!/usr/bin/env python3
"""Benchmark: one backend change under load per LB (xenobench.measure.update: the last backend removed,
then added back), ROUNDS rounds per LB, on the namespace testbed. Prints per LB the medians of:
the change's control time (command → the LB's report, harness clock) and the LB's own apply time;
command → last frame at the removed backend and → first frame at the added one (exact: the sink's
arrival records); frames the removed backend got after the removal was reported done (whole 1 ms
buckets: lower bound); frames lost over the cycle. Then (d): the received rate and loss over
BURST_S with no changes and with changes at RATE/s (same LB, same background).

Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_lb_update.py [ROUNDS] [LOAD_PPS] [CONFIG] [RATE] [BURST_S]
(defaults 3, 200000, config/local.yaml, 20, 2; LBs: every kind with an update path: xenoflow, ebpf, katran)
"""

import statistics
import sys
import tempfile
from pathlib import Path

from xenobench.config import load_config
from xenobench.errors import XenobenchError
from xenobench.lb import KINDS, LBS, get_lb, stop_all
from xenobench.testbed import get_testbed
from xenobench.measure.update import change_burst, change_cycle, write_sets
import benchargs  # noqa: E402  (scripts/benchargs.py)


def main(argv):
    a = benchargs.parse(__doc__, ("ROUNDS", benchargs.positive_int, 3, "change cycles per LB"),
                        ("LOAD_PPS", benchargs.positive_float, 200000.0, "background load, packets/s"),
                        ("CONFIG", benchargs.existing_file, "config/local.yaml", "testbed config"),
                        ("RATE", benchargs.positive_float, 20.0, "backend changes per second in the burst"),
                        ("BURST_S", benchargs.positive_float, 2.0, "seconds of each burst"), argv=argv)
    rounds, load, cfg, crate, burst_s = a.rounds, a.load_pps, load_config(a.config), a.rate, a.burst_s
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
                bursts = [change_burst(tb, lb, full, less, rate_per_s=r, duration_s=burst_s, load_pps=load)
                          for r in (0.0, crate, 0.0)]
            finally:
                lb.stop()

            def med(f):
                v = [f(r) for r in rs if f(r) is not None]
                return statistics.median(v) if v else float("nan")
            def ms(v):
                return "n/a" if v != v else f"{1e3 * v:.2f}"
            print(f"{kind:9s} control remove/add {ms(med(lambda r: r['remove']['control_s']))}/"
                  f"{ms(med(lambda r: r['add']['control_s']))} ms (LB apply "
                  f"{ms(med(lambda r: r['remove']['apply_s']))}/{ms(med(lambda r: r['add']['apply_s']))} ms); "
                  f"last frame at removed {ms(med(lambda r: r['remove']['remove_last_frame_s']))} ms after the "
                  f"command ({ms(med(lambda r: r['remove']['done_to_last_frame_s']))} ms after done; drained "
                  f"{sum(r['remove']['drained'] for r in rs)}/{len(rs)}), first at added "
                  f"{ms(med(lambda r: r['add']['add_first_frame_s']))} ms; after done "
                  f"{med(lambda r: r['remove']['after_done_frames']):.0f}.."
                  f"{med(lambda r: r['remove']['after_done_frames_max']):.0f} frames; lost "
                  f"{med(lambda r: r['lost_frames']):.0f} of {med(lambda r: r['tx_packets']):.0f} "
                  f"({med(lambda r: r['loss_pct']):.3f} %); longest pause of all arrivals around the removal "
                  f"{ms(med(lambda r: r.get('arrival_gap_s')))} ms; timing {rs[0]['timing']}; rounds {len(rs)}")
            for b in bursts:
                print(f"{kind:9s} burst {b['changes_per_s']:g}/s: {b['changes']} changes "
                      f"({b['achieved_changes_per_s']:.1f}/s) rx {b['rx_pps']:.0f} pps over {b['window_s']:.2f} s, "
                      f"generator {b['generator_achieved_pps'] or 0:.0f} pps, loss {b['loss_pct']:.3f} % "
                      f"({b['lost_frames']} of {b['tx_packets']})")
    finally:
        tb.down()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
