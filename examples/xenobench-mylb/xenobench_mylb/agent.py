"""mylb's agent: `python -m xenobench_mylb.agent run --obj mylb.bpf.o ...` on the LB node, an
XdpLbAgent (xenobench.agents.xdp_lb), which gives it xenobench's agent command line and the
controller's life cycle (load and pin, attach, stats lines, detach and unpin on exit).

Its own part: how the maps of bpf/mylb.bpf.c are filled from the backends file the harness
validated (`configure`) and how its counters are read into the shape `xenobench lb stats` prints
for every LB (`read_stats`).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Callable

from xenobench.agents.bpf import bpftool_stdout, map_update_batch, percpu_sum
from xenobench.agents.net import mac_bytes
from xenobench.agents.xdp_lb import XdpLbAgent
from xenobench.backends import load_backends
from xenobench.errors import XenobenchError

#: the object `make` builds beside this file (the driver passes its path as --obj)
OBJ = Path(__file__).resolve().parent / "mylb.bpf.o"
PROG = "mylb"
BACKENDS = 64                 # MYLB_BACKENDS in bpf/mylb.bpf.c
SLOTS = 256                   # MYLB_SLOTS: at most 8 class bits
NOT_IPV4, SHORT = BACKENDS, BACKENDS + 1


def config_value(mask: int, src_mac: str) -> bytes:
    """struct mylb_cfg: mask, the egress port's MAC, 2 bytes of padding."""
    return struct.pack("<I", mask) + mac_bytes(src_mac) + b"\0\0"


def map_writes(pindir: Path, backends_file, src_mac: str, egress_ifindex: int) -> list[tuple[Path, bytes, bytes]]:
    """Every map entry the program needs, from a validated backends file."""
    bs = load_backends(backends_file)
    if len(bs.backends) > BACKENDS or len(bs.slots) > SLOTS:
        raise XenobenchError(f"Failed to configure mylb from {backends_file}: {len(bs.backends)} backends and "
                             f"{len(bs.slots)} slots; it has room for {BACKENDS} and {SLOTS}")
    m = pindir / "maps"
    u32 = struct.Struct("<I").pack
    return ([(m / "mylb_backends", u32(i), mac_bytes(b.mac) + b"\0\0") for i, b in enumerate(bs.backends)]
            + [(m / "mylb_slots", u32(s), u32(bi)) for s, bi in enumerate(bs.slots)]
            + [(m / "mylb_egress", u32(0), u32(egress_ifindex)),
               (m / "mylb_config", u32(0), config_value(bs.mask, src_mac))])


def _configure(pindir: Path, backends: Path, a, egress_ifindex: int | None) -> dict:
    map_writes_ = map_writes(pindir, backends, a.src_mac, egress_ifindex)
    map_update_batch(map_writes_)
    bs = load_backends(backends)
    return {"backends": [b.name for b in bs.backends], "class_bits": bs.class_bits, "entries": len(map_writes_)}


def read_stats(pindir: Path, backends_file, mode: str, run: Callable[..., str] = bpftool_stdout) -> dict:
    """mylb_count summed over CPUs, in the common shape."""
    bs = load_backends(backends_file)
    st = percpu_sum(pindir / "maps" / "mylb_count", "<QQ", run)
    return {"backends": [{"name": b.name, "mac": b.mac, "packets": st.get(i, (0, 0))[0],
                          "bytes": st.get(i, (0, 0))[1]} for i, b in enumerate(bs.backends)],
            "miss": 0, "non_ipv4": st.get(NOT_IPV4, (0, 0))[0], "non_service": 0,
            "malformed": st.get(SHORT, (0, 0))[0], "tx_error": 0, "mode": mode}


AGENT = XdpLbAgent(name="mylb", prog_name="xenobench_mylb.agent", obj=None, prog=PROG,
                   build_hint="make -C examples/xenobench-mylb", configure=_configure, read_stats=read_stats,
                   egress_required=True, description="mylb controller (an out-of-tree example LB)")

if __name__ == "__main__":
    sys.exit(AGENT.main())
