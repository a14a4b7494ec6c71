#!/usr/bin/env python3
"""Benchmark: BPF_PROG_TEST_RUN cost per packet of the LB program vs the no-op redirect program
(bpftool prog run ... repeat N; the kernel reports the mean duration per run in ns).
Usage (root): .venv/bin/python scripts/bench_ebpf.py [REPEAT]"""

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from xenobench.agents.bpf import bpftool
from xenobench.agents.ebpf_lb import fill_maps, load
from xenobench.testbed import ensure_bpffs, unmount_bpffs_if_unused

repeat = sys.argv[1] if len(sys.argv) > 1 else "1000000"
pindir = Path("/sys/fs/bpf/xb-bench-ebpf")
tmp = Path(tempfile.mkdtemp())
mounted = ensure_bpffs()
try:
    load(pindir)
    (tmp / "b.json").write_text(json.dumps({"backends": [{"name": "a", "mac_address": "02:00:00:00:0a:00"},
                                                         {"name": "b", "mac_address": "02:00:00:00:0a:01"}]}))
    fill_maps(pindir, tmp / "b.json", vip="198.18.0.100", port=53, policy="pass", egress="tx",
              src_mac="02:00:00:00:05:01", egress_ifindex=None)
    frame = bytes(Ether(dst="02:00:00:00:05:00") / IP(src="198.18.0.17", dst="198.18.0.100") / UDP(dport=53) / (b"q" * 22))
    (tmp / "in").write_bytes(frame)
    res = {}
    for prog in ("xb_lb", "xb_noop_redirect"):
        p = bpftool("prog", "run", "pinned", str(pindir / "progs" / prog), "data_in", str(tmp / "in"),
                    "repeat", repeat)
        res[prog] = int(re.search(r"duration \(average\): (\d+)ns", p.stdout + p.stderr).group(1))
    print(f"BPF_PROG_TEST_RUN, 64 B frame, repeat {repeat}: LB {res['xb_lb']} ns/packet, "
          f"no-op redirect {res['xb_noop_redirect']} ns/packet")
finally:
    shutil.rmtree(pindir, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused()
