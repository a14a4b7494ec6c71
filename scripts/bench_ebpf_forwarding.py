#!/usr/bin/env python3
"""Benchmark: forwarding rate through the namespace testbed (loadgen → LB p0 → p1 → switch →
backends) with the eBPF LB program vs a no-op redirect program, in one run, alternating.

trafgen in the loadgen namespace sends COUNT 64-byte frames (22 B UDP payload) to the LB as
fast as it can; the rate is the LB's p0 XDP-redirect counter delta over trafgen's wall time.
The no-op program forwards frames unchanged, so their destination MAC is still the LB's and the
bridge would send them back to p0; so in both runs the switch port of p1 runs the xb_sink XDP
program, which drops what p1 delivers (tc classifiers are not available on this kernel).
Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_ebpf_forwarding.py [COUNT] [ROUNDS]"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbb-")

from xenobench.config import load_config  # noqa: E402
from xenobench.counters import snapshot  # noqa: E402
from xenobench.lb import get_lb  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402

count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
cfg = load_config()
tb = get_testbed(cfg)
tb.up()
lbn, gen = tb.node("fips5"), tb.node("fips4")
lb = get_lb("ebpf", tb)
cfgfile = Path(tempfile.mkdtemp()) / "frame.cfg"
# Ethernet(LB p0) / IPv4(198.18.0.16 → VIP, checksum by trafgen) / UDP(1024 → 53) / 22 B
cfgfile.write_text(
    "{ 0x02,0x00,0x00,0x00,0x05,0x00, 0x02,0x00,0x00,0x00,0x04,0x00, 0x08,0x00,\n"
    "  0x45,0x00, const16(50), 0x00,0x00, 0x00,0x00, 0x40, 0x11, csumip(14, 33),\n"
    "  198,18,0,16, 198,18,0,100,\n"
    "  const16(1024), const16(53), const16(30), 0x00,0x00,\n"
    "  fill(0x71, 22) }\n")
sw = f"{cfg.prefix}sw"
try:
    lb.start()
    pins = tb.bpffs_dir / "ebpf" / "progs"
    subprocess.run(["nsenter", f"--net=/var/run/netns/{sw}", "ip", "link", "set", "dev", "fips5-p1", "xdpdrv",
                    "pinned", str(pins / "xb_sink")], check=True)
    rates = {"xb_lb": [], "xb_noop_redirect": []}
    for r in range(rounds):
        for prog in rates:
            lbn.run(["ip", "-force", "link", "set", "dev", "p0", "xdpdrv", "pinned", str(pins / prog)])
            s0 = snapshot(lbn, "p0")
            t0 = time.monotonic()
            # -t 0: sendto() per frame; the TX_RING path fails with EAGAIN when the veth peer backs up
            gen.run(["trafgen", "-o", "eth0", "-i", str(cfgfile), "-n", str(count), "-q", "-t", "0"], timeout=120)
            dt = time.monotonic() - t0
            time.sleep(0.2)
            s1 = snapshot(lbn, "p0")
            fwd = s1["view"]["xdp_redirect"] - s0["view"]["xdp_redirect"]
            rates[prog].append(fwd / dt)
    med = {k: sorted(v)[len(v) // 2] for k, v in rates.items()}
    print(f"forwarding, {count} frames x {rounds} rounds (median): LB {med['xb_lb'] / 1e3:.0f} kpps, "
          f"no-op redirect {med['xb_noop_redirect'] / 1e3:.0f} kpps, ratio {med['xb_lb'] / med['xb_noop_redirect']:.3f}"
          " (target >= 0.95)")
finally:
    lb.stop()
    tb.down()
