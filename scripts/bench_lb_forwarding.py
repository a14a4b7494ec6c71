#!/usr/bin/env python3
"""Benchmark: the maximum forwarding rate of the wire (no-op reference), the eBPF baseline,
XenoFlow on the DOCA Flow emulation and Katran (every kind of xenobench.lb.LBS) through the
namespace testbed, alternating per round, next to
the per-frame cost of each one's XDP program in BPF_PROG_TEST_RUN and on the live path (the
kernel's BPF run-time statistics over a second phase of the same traffic, xenobench.progcost: what
the compare experiment records).

Traffic: the udp_payload profile (trex_profiles/) at 22 B payload (64 B frames), compiled and sent
through the traffic layer by the config's generator (config/local.yaml: xdpgen on its CPU, the
LB's NAPI on testbed.cpus.dut) at its maximum for DURATION seconds per LB and round. Forwarding
rate = frames the backends' interfaces received (veth rx_packets, counted before the backends'
sink drops them) / the generator's send time. Also printed: the generator's rate and where the
excess was dropped (the LB ingress's rx_dropped: its ring was full; the generator's xmit errors).

Cost: the very program each LB attached to its ingress port, configured as it runs, run by
`bpftool prog run id N ... ctx_in (ingress = the LB's port) repeat R` on the profile's first
frames, refused unless the verdict is the forwarding one, XDP_REDIRECT or XDP_TX (nothing is sent
in test-run mode; before 2026-11-23 the context was missing and XenoFlow-emu's 37 ns were its pass
path, not forwarding). Test-run repeats run on one buffer that the program rewrites in place: an LB
that encapsulates (Katran) sees its own IPIP output from the second repeat on and passes it, so
its test-run cost is not printed (n/a); its live cost is its forwarding cost. If the rates are bound by the LB stage, 1e9 / rate - cost (the testbed's own ns per frame on
the DUT's CPU: veth, switch hop, sink) comes out the same for all three LBs.
Where the DUT's CPU goes (no PMU needed): during a max-rate run,
`perf record -e cpu-clock -C 1 -g -- sleep 3; perf report --no-children --sort sym`. On the 2-core
VM of 2026-11-23 (eBPF LB, 2.26 Mpps): veth receive (veth_xdp_rcv*, three hops) 43 %, redirect and
page-pool return ~25 %, the LB's program 5 %, the switch's fast path 7 %, the backends' sink 1.5 %;
so the LBs' 15-30 ns differences are a few per cent of the ~600 ns per frame.
Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_lb_forwarding.py [ROUNDS] [DURATION] [CONFIG]
"""

import json
import os
import re
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbb-")

from xenobench.config import load_config  # noqa: E402
from xenobench.counters import snapshot  # noqa: E402
from xenobench.lb import LBS as LB_KINDS, get_lb  # noqa: E402
from xenobench.progcost import measure, xdp_prog_id  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402
from xenobench.traffic import compile_for, run_traffic, traffic_config  # noqa: E402
import benchargs  # noqa: E402  (scripts/benchargs.py)

REFS = tuple(k for k, v in LB_KINDS.items() if v.reference)          # the wire: the testbed's limit
UNDER_TEST = tuple(k for k, v in LB_KINDS.items() if not v.reference)
LBS = REFS + UNDER_TEST
# compared as a - b: every LB against each reference, then the LBs against each other
PAIRS = tuple((a, r) for r in REFS for a in UNDER_TEST) + tuple(
    (b, a) for i, a in enumerate(UNDER_TEST) for b in UNDER_TEST[i + 1:])
TUNABLES = {"payload": 22, "flows": 256}
REPEAT = 1_000_000

args = benchargs.parse(__doc__, ("ROUNDS", benchargs.positive_int, 3, "alternating rounds over every LB kind"),
                       ("DURATION", benchargs.positive_float, 2.0, "seconds per trial"),
                       ("CONFIG", benchargs.existing_file, None, "testbed config (None: config/local.yaml)"))
rounds, duration = args.rounds, args.duration
cfg = load_config(args.config)
tb = get_testbed(cfg)
lbc = cfg.role("lb")
ingress = (lbc.lb_port("ingress") or lbc.iface()).name
lbn = tb.node(lbc.name)
backends = [(b.name, b.iface().name) for b in cfg.backend_nodes()]


def rx_total() -> int:
    return sum(snapshot(tb.node(n), i)["view"]["rx_packets"] for n, i in backends)


FORWARDING = {"3": "XDP_TX", "4": "XDP_REDIRECT"}


def test_run_ns(prog_id: int, frames: list[tuple[str, str]]) -> float | None:
    """Mean of the kernel's ns per run over the given staged (frame, xdp_md) files. The context
    names the ingress port: without it the run's ingress is the loopback device, and XenoFlow's
    emulation, whose pipes match on the port, passes the frame instead of forwarding it. None when
    one run forwards but the repeats do not (the program rewrote the buffer: it encapsulates)."""
    ns = []
    for f, ctx in frames:
        def run(repeat: int) -> tuple[str, str]:
            out = lbn.run(["bpftool", "prog", "run", "id", str(prog_id), "data_in", f, "ctx_in", ctx,
                           "repeat", str(repeat)])
            text = out.stdout + out.stderr
            return re.search(r"Return value: (\d+)", text).group(1), text
        verdict, text = run(REPEAT)
        if verdict not in FORWARDING:
            if run(1)[0] in FORWARDING:
                return None
            sys.exit(f"Failed to time program {prog_id} in BPF_PROG_TEST_RUN: verdict {verdict}, not XDP_REDIRECT "
                     f"or XDP_TX (the frame did not take the forwarding path)")
        ns.append(int(re.search(r"duration \(average\): (\d+)ns", text).group(1)))
    return statistics.mean(ns)


def fmt(ns: float | None, spec: str = ".0f") -> str:
    return "n/a" if ns is None else format(ns, spec)


tb.up()
tmp = Path(tempfile.mkdtemp())
compiled = compile_for(tb, "udp_payload", TUNABLES)
staged = []
ifindex = json.loads(lbn.run(["ip", "-j", "link", "show", "dev", ingress]).stdout)[0]["ifindex"]
for k, frame in enumerate(compiled.frames[:4]):  # frames of different classes
    (tmp / f"f{k}.bin").write_bytes(frame)
    # struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex
    (tmp / f"c{k}.bin").write_bytes(struct.pack("<6I", 0, len(frame), 0, ifindex, 0, 0))
    staged.append((lbn.stage(tmp / f"f{k}.bin", f"bench-lb-frame{k}.bin"),
                   lbn.stage(tmp / f"c{k}.bin", f"bench-lb-ctx{k}.bin")))
rate, gen, drop_in, drop_gen, cost, live = ({k: [] for k in LBS} for _ in range(6))
try:
    for r in range(rounds):
        for kind in LBS:
            lb = get_lb(kind, tb)
            lb.start()
            try:
                cost[kind].append(test_run_ns(xdp_prog_id(lbn, ingress), staged))
                rx0, in0 = rx_total(), snapshot(lbn, ingress)["view"]["rx_dropped"]
                res = run_traffic(tb, "udp_payload", TUNABLES, 0, duration_s=duration)
                time.sleep(0.3)  # the DUT drains its rings
                rx1, in1 = rx_total(), snapshot(lbn, ingress)["view"]["rx_dropped"]
                live[kind].append(measure(tb, lambda: run_traffic(tb, "udp_payload", TUNABLES, 0,
                                                                  duration_s=duration / 2))["ns_per_run"])
            finally:
                lb.stop()
            dt = res["duration_s"] or res["wall_s"]
            rate[kind].append((rx1 - rx0) / dt)
            gen[kind].append(res["achieved_pps"])
            drop_in[kind].append(in1 - in0)
            drop_gen[kind].append((res.get("tx_dropped") or 0) + (res.get("peer_dropped") or 0))
            print(f"round {r + 1} {kind:8s}: forwarded {rate[kind][-1] / 1e6:.3f} Mpps, generator "
                  f"{gen[kind][-1] / 1e6:.3f} Mpps, dropped at the LB ingress {drop_in[kind][-1]}, at the "
                  f"generator {drop_gen[kind][-1]}, test-run {fmt(cost[kind][-1])} ns, live {live[kind][-1]:.1f} ns  (load {os.getloadavg()[0]:.1f})",
                  flush=True)
    med = {k: statistics.median(v) for k, v in rate.items()}
    cmed = {k: None if None in v else statistics.median(v) for k, v in cost.items()}
    g = traffic_config(cfg)["generator"]
    print(f"\nmax forwarding, udp_payload {len(compiled.frames[0])} B frames by {g}, {rounds} rounds x {duration:g} s "
          f"(median): " + ", ".join(f"{k} {med[k] / 1e6:.3f} Mpps" for k in LBS))
    lmed = {k: statistics.median(v) for k, v in live.items()}
    print("BPF_PROG_TEST_RUN cost of the attached program (median): "
          + ", ".join(f"{k} {fmt(cmed[k])} ns" for k in LBS))
    print("live cost of the attached program, BPF run-time statistics at the maximum rate (median): "
          + ", ".join(f"{k} {lmed[k]:.1f} ns" for k in LBS))
    for a, b in PAIRS:
        timed = cmed[a] is not None and cmed[b] is not None
        print(f"  {a}/{b}: rate ratio {med[a] / med[b]:.3f}; test-run cost ratio {b}/{a} "
              f"{fmt(cmed[b] / cmed[a] if timed else None, '.3f')}; "
              f"DUT ns per frame {1e9 / med[a]:.0f} vs {1e9 / med[b]:.0f} (difference {1e9 / med[a] - 1e9 / med[b]:+.0f} ns, "
              f"test-run difference {fmt(cmed[a] - cmed[b] if timed else None, '+.0f')} ns)")
    # The rounds alternate the LBs, so a per-round difference cancels slow drift of the machine;
    # its spread over rounds is the noise a cost difference must exceed to be seen in the rates.
    print("per-round difference of DUT ns per frame (min / median / max over rounds) vs test-run difference:")
    for a, b in PAIRS:
        d = sorted(1e9 / x - 1e9 / y for x, y in zip(rate[a], rate[b]))
        t = None if None in cost[a] + cost[b] else statistics.median(x - y for x, y in zip(cost[a], cost[b]))
        seen = "resolved" if d[0] > 0 or d[-1] < 0 else "not resolved (the rounds disagree in sign)"
        print(f"  {a} - {b}: {d[0]:+.0f} / {statistics.median(d):+.0f} / {d[-1]:+.0f} ns; test-run {fmt(t, '+.0f')} ns; {seen}")
    print("per-round difference of the live program cost (min / median / max over rounds):")
    for a, b in PAIRS:
        d = sorted(x - y for x, y in zip(live[a], live[b]))
        seen = "resolved" if d[0] > 0 or d[-1] < 0 else "not resolved (the rounds disagree in sign)"
        print(f"  {a} - {b}: {d[0]:+.1f} / {statistics.median(d):+.1f} / {d[-1]:+.1f} ns; {seen}")
    print("testbed's own cost per frame on the DUT CPU (1e9/rate - test-run cost): "
          + ", ".join(f"{k} {fmt(None if cmed[k] is None else 1e9 / med[k] - cmed[k])} ns" for k in LBS))
    print("drops (sum over rounds): " + "; ".join(f"{k}: LB ingress {sum(drop_in[k])}, generator {sum(drop_gen[k])}"
                                                  for k in LBS))
finally:
    for kind in LBS:
        lb = get_lb(kind, tb)
        if lb.running():
            lb.stop()
    tb.down()
