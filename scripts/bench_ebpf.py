#!/usr/bin/env python3
"""Benchmark: BPF_PROG_TEST_RUN cost per frame of the eBPF LB program vs its no-op redirect program
(bpftool prog run ... repeat N; the kernel reports the mean duration per run in ns).

The program is loaded and configured as `lb start --lb ebpf` does (xenobench.agents.ebpf_lb, the
config's backends file, VIP and MACs), and the frames are the udp_payload profile's first frames
(trex_profiles/, 22 B payload = 64 B frame), so the benchmark measures the shipped program on the
testbed's own traffic. The frames are a fixture table (xenobench.bpftest): each is checked for
its verdict and rewritten output before it is timed. Usage (root):
.venv/bin/python scripts/bench_ebpf.py [REPEAT] [CONFIG]
"""

import ipaddress
import shutil
from pathlib import Path

from xenobench import bpftest
from xenobench.agents.ebpf_lb import fill_maps, load
from xenobench.backends import load_backends
from xenobench.bpftest import Fixture
from xenobench.config import load_config
from xenobench.testbed import ensure_bpffs, unmount_bpffs_if_unused
from xenobench.traffic import compile_frames, fill_tunables
import benchargs  # scripts/benchargs.py

args = benchargs.parse(__doc__, ("REPEAT", benchargs.positive_int, 1_000_000, "runs of each program per frame"),
                       ("CONFIG", benchargs.existing_file, None, "testbed config (None: config/local.yaml)"))
cfg = load_config(args.config)
lb = cfg.role("lb")
egress = lb.lb_port("egress") or lb.iface()
pindir = Path("/sys/fs/bpf/xb-bench-ebpf")
mounted = ensure_bpffs()


def mac(m: str) -> bytes:
    return bytes.fromhex(m.replace(":", ""))


def rows(frames: list[bytes]) -> dict[str, list[Fixture]]:
    """The LB sends each frame back out (egress tx) to its class's backend; the no-op redirect
    finds no egress port under test-run (XDP_ABORTED, untouched)."""
    bs = load_backends(cfg.service.backends)
    lb_rows, noop_rows = [], []
    for f in frames:
        src = str(ipaddress.IPv4Address(f[26:30]))
        b = bs.backend_for_source(src)
        lb_rows.append(Fixture(f"{src} to {b.name}", f, "XDP_TX", mac(b.mac) + mac(egress.mac) + f[12:]))
        noop_rows.append(Fixture(f"{src}: no-op redirect", f, "XDP_ABORTED"))
    return {"xb_lb": lb_rows, "xb_noop_redirect": noop_rows}


try:
    load(pindir)
    fill_maps(pindir, cfg.service.backends, vip=cfg.service.vip, port=cfg.service.port, policy="pass",
              egress="tx", src_mac=egress.mac, egress_ifindex=None)
    compiled = compile_frames("udp_payload", fill_tunables(cfg, "udp_payload", {"payload": 22, "flows": 256}))
    res = {}
    for prog, table in rows(compiled.frames[:4]).items():  # frames of different classes
        ns = [n for _, n in bpftest.perf(pindir / "progs" / prog, table, repeat=args.repeat)]
        res[prog] = sum(ns) / len(ns)
    print(f"BPF_PROG_TEST_RUN, udp_payload {len(compiled.frames[0])} B frames ({cfg.path.name}), repeat {args.repeat}: "
          f"LB {res['xb_lb']:.0f} ns/frame, no-op redirect {res['xb_noop_redirect']:.0f} ns/frame")
finally:
    shutil.rmtree(pindir, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused(mounted)
