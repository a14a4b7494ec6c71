#!/usr/bin/env python3
"""Benchmark: forwarding rate of XenoFlow on the DOCA Flow emulation vs the eBPF baseline, through
the namespace testbed (loadgen → LB p0 → p1 → switch), in one run, alternating per round.

The method of scripts/bench_ebpf_forwarding.py: trafgen in the loadgen namespace sends COUNT
64-byte frames (22 B UDP payload, source 198.18.0.16) to the LB as fast as it can; the rate is the
LB's p0 XDP-redirect counter delta over trafgen's wall time. The switch port of p1 runs the
baseline's xb_sink XDP program (loaded once for the whole run) so forwarded frames are dropped
there instead of costing the backends' kernels. Both LBs are started and stopped through
xenobench.lb (`lb start/stop`), so start-up is outside the timed window.

On this machine both are bound by veth and trafgen, so the script also prints the datapath's own
cost per frame, without NIC or veth: BPF_PROG_TEST_RUN with repeat on one 64-byte service frame,
XenoFlow's pipe on the emulation (lb/build/tests/bench_datapath, 2 classes, shared counters,
redirect) vs the baseline's xb_lb (same backends, redirect).
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
from xenobench.agents.bpf import bpftool  # noqa: E402
from xenobench.agents.ebpf_lb import OBJ  # noqa: E402
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
    # datapath cost per frame (BPF_PROG_TEST_RUN, repeat)
    import re
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from xenobench.agents.ebpf_lb import fill_maps, load
    repeat = 2_000_000
    dp = Path("/sys/fs/bpf") / f"{cfg.prefix}bench-dp"
    load(dp)
    # both redirect (the devmap entry is lo: under test-run only the verdict is computed, nothing is sent)
    fill_maps(dp, cfg.service.backends, vip=cfg.service.vip, port=cfg.service.port, policy="pass", egress="redirect",
              src_mac="02:00:00:00:05:01", egress_ifindex=1)
    fr = Path(tempfile.mkdtemp()) / "frame.bin"
    fr.write_bytes(bytes(Ether(src="02:00:00:00:04:00", dst="02:00:00:00:05:00") / IP(src="198.18.0.17", dst=cfg.service.vip)
                         / UDP(sport=1024, dport=53) / (b"q" * 22)))
    ns = {"ebpf": [], "xenoflow": []}
    emu = Path(__file__).resolve().parent.parent / "lb" / "build" / "tests" / "bench_datapath"
    for _ in range(5):
        out = bpftool("prog", "run", "pinned", str(dp / "progs" / "xb_lb"), "data_in", str(fr), "repeat", str(repeat))
        ns["ebpf"].append(int(re.search(r"duration \(average\): (\d+)ns", out.stdout + out.stderr).group(1)))
        out = subprocess.run([str(emu), "1", str(repeat)], capture_output=True, text=True, check=True).stdout
        ns["xenoflow"].append(int(re.search(r"ns_per_frame=(\d+)", out).group(1)))
    shutil.rmtree(dp, ignore_errors=True)
    dmed = {k: sorted(v)[len(v) // 2] for k, v in ns.items()}
    print(f"datapath cost per frame, BPF_PROG_TEST_RUN x {repeat} (median of 5): XenoFlow on the emulation "
          f"{dmed['xenoflow']} ns, eBPF baseline {dmed['ebpf']} ns -> {1e3 / dmed['xenoflow']:.1f} vs "
          f"{1e3 / dmed['ebpf']:.1f} Mpps per core, ratio {dmed['ebpf'] / dmed['xenoflow']:.3f}")
finally:
    for lb in lbs.values():
        if lb.running():
            lb.stop()
    subprocess.run([*nsw, "ip", "link", "set", "dev", "fips5-p1", "xdpdrv", "off"], capture_output=True)
    shutil.rmtree(sink, ignore_errors=True)
    tb.down()
