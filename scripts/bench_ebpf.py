#!/usr/bin/env python3
"""Benchmark: BPF_PROG_TEST_RUN cost per frame of the eBPF LB program vs its no-op redirect program
(bpftool prog run ... repeat N; the kernel reports the mean duration per run in ns).

The program is loaded and configured as `lb start --lb ebpf` does (xenobench.agents.ebpf_lb, the
config's backends file, VIP and MACs), and the frames are the udp_payload profile's first frames
(trex_profiles/, 22 B payload = 64 B frame), so the benchmark measures the shipped program on the
testbed's own traffic. Usage (root): .venv/bin/python scripts/bench_ebpf.py [REPEAT] [CONFIG]
"""

import re
import shutil
import tempfile
from pathlib import Path

from xenobench.agents.bpf import bpftool
from xenobench.agents.ebpf_lb import fill_maps, load
from xenobench.config import load_config
from xenobench.testbed import ensure_bpffs, unmount_bpffs_if_unused
from xenobench.traffic import compile_frames, fill_tunables
import benchargs  # scripts/benchargs.py

args = benchargs.parse(__doc__, ("REPEAT", benchargs.positive_int, 1_000_000, "runs of each program per frame"),
                       ("CONFIG", benchargs.existing_file, None, "testbed config (None: config/local.yaml)"))
repeat = str(args.repeat)
cfg = load_config(args.config)
lb = cfg.role("lb")
egress = lb.lb_port("egress") or lb.iface()
pindir = Path("/sys/fs/bpf/xb-bench-ebpf")
tmp = Path(tempfile.mkdtemp())
mounted = ensure_bpffs()
try:
    load(pindir)
    fill_maps(pindir, cfg.service.backends, vip=cfg.service.vip, port=cfg.service.port, policy="pass",
              egress="tx", src_mac=egress.mac, egress_ifindex=None)
    compiled = compile_frames("udp_payload", fill_tunables(cfg, "udp_payload", {"payload": 22, "flows": 256}))
    res = {}
    for prog in ("xb_lb", "xb_noop_redirect"):
        runs = []
        for frame in compiled.frames[:4]:  # frames of different classes
            (tmp / "in").write_bytes(frame)
            p = bpftool("prog", "run", "pinned", str(pindir / "progs" / prog), "data_in", str(tmp / "in"),
                        "repeat", repeat)
            runs.append(int(re.search(r"duration \(average\): (\d+)ns", p.stdout + p.stderr).group(1)))
        res[prog] = sum(runs) / len(runs)
    print(f"BPF_PROG_TEST_RUN, udp_payload {len(compiled.frames[0])} B frames ({cfg.path.name}), repeat {repeat}: "
          f"LB {res['xb_lb']:.0f} ns/frame, no-op redirect {res['xb_noop_redirect']:.0f} ns/frame")
finally:
    shutil.rmtree(pindir, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused(mounted)
