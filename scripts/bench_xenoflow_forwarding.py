#!/usr/bin/env python3
"""Benchmark: forwarding rate of XenoFlow on the DOCA Flow emulation vs the eBPF baseline, through
the namespace testbed (loadgen → LB p0 → p1 → switch), in one run, alternating per round.

The method of scripts/bench_ebpf_forwarding.py: trafgen in the loadgen namespace sends COUNT
64-byte frames (22 B UDP payload, source 198.18.0.16) to the LB as fast as it can; the rate is the
LB's p0 XDP-redirect counter delta over trafgen's wall time. The switch port of p1 runs the
baseline's xb_sink XDP program (loaded once for the whole run) so forwarded frames are dropped
there instead of costing the backends' kernels. Both LBs are started and stopped through
xenobench.lb (`lb start/stop`), so start-up is outside the timed window.
Usage (root): XENOBENCH_NS_PREFIX=xbx- .venv/bin/python scripts/bench_xenoflow_forwarding.py [COUNT] [ROUNDS]"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbx-")

from xenobench.config import load_config  # noqa: E402
from xenobench.counters import snapshot  # noqa: E402
from xenobench.lb import get_lb  # noqa: E402
from xenobench.lb.ebpf import OBJ, bpftool  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402

count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
cfg = load_config()
tb = get_testbed(cfg)
tb.up()
lbn, gen = tb.node("fips5"), tb.node("fips4")
lbs = {"xenoflow": get_lb("xenoflow", tb), "ebpf": get_lb("ebpf", tb)}
cfgfile = Path(tempfile.mkdtemp()) / "frame.cfg"
# Ethernet(LB p0) / IPv4(198.18.0.16 → VIP, checksum by trafgen) / UDP(1024 → 53) / 22 B
cfgfile.write_text(
    "{ 0x02,0x00,0x00,0x00,0x05,0x00, 0x02,0x00,0x00,0x00,0x04,0x00, 0x08,0x00,\n"
    "  0x45,0x00, const16(50), 0x00,0x00, 0x00,0x00, 0x40, 0x11, csumip(14, 33),\n"
    "  198,18,0,16, 198,18,0,100,\n"
    "  const16(1024), const16(53), const16(30), 0x00,0x00,\n"
    "  fill(0x71, 22) }\n")
sw = f"{cfg.prefix}sw"
sink = tb.bpffs_dir / "xenoflow-bench-sink"
nsw = ["nsenter", f"--net=/var/run/netns/{sw}"]
try:
    if sink.exists():
        shutil.rmtree(sink)
    (sink / "maps").mkdir(parents=True)
    bpftool("prog", "loadall", str(OBJ), str(sink / "progs"), "type", "xdp", "pinmaps", str(sink / "maps"))
    subprocess.run([*nsw, "ip", "link", "set", "dev", "fips5-p1", "xdpdrv", "pinned", str(sink / "progs" / "xb_sink")],
                   check=True)
    rates = {k: [] for k in lbs}
    for r in range(rounds):
        for name, lb in lbs.items():
            lb.start()
            try:
                s0 = snapshot(lbn, "p0")
                t0 = time.monotonic()
                # -t 0: sendto() per frame; the TX_RING path fails with EAGAIN when the veth peer backs up
                gen.run(["trafgen", "-o", "eth0", "-i", str(cfgfile), "-n", str(count), "-q", "-t", "0"], timeout=120)
                dt = time.monotonic() - t0
                time.sleep(0.2)
                s1 = snapshot(lbn, "p0")
            finally:
                lb.stop()
            rates[name].append((s1["view"]["xdp_redirect"] - s0["view"]["xdp_redirect"]) / dt)
    med = {k: sorted(v)[len(v) // 2] for k, v in rates.items()}
    print(f"forwarding, {count} frames x {rounds} rounds (median): XenoFlow (emulation) {med['xenoflow'] / 1e3:.0f} kpps, "
          f"eBPF baseline {med['ebpf'] / 1e3:.0f} kpps, ratio {med['xenoflow'] / med['ebpf']:.3f} (target >= 0.85)")
    print("  per round kpps: " + "; ".join(f"{k} " + ", ".join(f"{x / 1e3:.0f}" for x in v) for k, v in rates.items()))
finally:
    for lb in lbs.values():
        if lb.running():
            lb.stop()
    subprocess.run([*nsw, "ip", "link", "set", "dev", "fips5-p1", "xdpdrv", "off"], capture_output=True)
    shutil.rmtree(sink, ignore_errors=True)
    tb.down()
