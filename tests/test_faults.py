"""Faults: what the harness and the data path do when something breaks underneath them.

- The eBPF LB's tx_error counter: a redirect the program can see failing (no egress port in the
  devmap) is counted there and not as forwarded (BPF_PROG_TEST_RUN, frames from test_ebpf_lb).
- `kill -9` of `xenobench experiment run` in the middle of a trial on the namespace testbed, then
  `xenobench testbed down` and a rerun: nothing of the killed run is left (namespaces, processes,
  XDP programs, pinned objects), no completed trial is redone, no trial is half-written.
"""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xenobench.agents.bpf import map_update
from xenobench.agents.ebpf_lb import OBJ, read_stats

from .conftest import needs_root
from .test_ebpf_lb import frame, prog, two  # noqa: F401  (prog: the fixture)

pytestmark = [needs_root]


# --- the eBPF LB's redirect failure ------------------------------------------------------------------
@pytest.mark.skipif(not OBJ.exists(), reason="ebpf_baseline not built (make -C ebpf_baseline)")
def test_redirect_without_egress_port_counts_tx_error_not_forwarded(prog):  # noqa: F811
    configure, run, pindir = prog
    bfile = configure(two(), egress="redirect")  # the devmap's slot stays empty
    v, out = run(frame())
    assert v == "XDP_ABORTED" and out == frame()  # nothing rewritten, nothing sent
    st = read_stats(pindir, bfile, "test")
    assert (st["tx_error"], [b["packets"] for b in st["backends"]]) == (1, [0, 0])
    map_update(pindir / "maps" / "egress", struct.pack("<I", 0), struct.pack("<I", 1))  # lo: a port exists
    v, out = run(frame())
    assert v == "XDP_REDIRECT" and out[:6] == bytes.fromhex("02000000" "0a00")
    st = read_stats(pindir, bfile, "test")
    assert (st["tx_error"], [b["packets"] for b in st["backends"]]) == (1, [1, 0])
