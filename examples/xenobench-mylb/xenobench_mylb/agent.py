"""mylb's agent: `python -m xenobench_mylb.agent run --obj mylb.bpf.o ...` on the LB node, an
XdpLbAgent (xenobench.agents.xdp_lb), which gives it xenobench's agent command line and the
controller's life cycle (load and pin, attach, stats lines, detach and unpin on exit).

Its own part: how the maps of bpf/mylb.bpf.c are filled from the backends file the harness
validated (`configure`), changed while it runs (`update`, on SIGHUP), how its counters are read into
the shape `xenobench lb stats` prints for every LB (`read_stats`), and which backend a flow reaches
(`route`: the program's hash, in Python).
"""

from __future__ import annotations

import ipaddress
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


M32 = 0xFFFFFFFF


def flow_hash(src: str, sport: int) -> int:
    """mylb_hash of bpf/mylb.bpf.c: MurmurHash3's 32-bit finalizer over the host-order source
    address xor the source port times 2^16 + 1."""
    x = (int(ipaddress.IPv4Address(src)) ^ (sport * 0x10001)) & M32
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & M32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & M32
    return x ^ (x >> 16)


def route(backends, flow) -> str:
    """The backend a flow reaches: its hash's slot in the backends file's slot table (the port
    counts for UDP and TCP only, as in the program)."""
    sport = flow.sport if flow.proto in (6, 17) else 0
    return backends.backends[backends.slots[flow_hash(flow.src, sport) & backends.mask]].name


def config_value(mask: int, src_mac: str) -> bytes:
    """struct mylb_cfg: mask, the egress port's MAC, 2 bytes of padding."""
    return struct.pack("<I", mask) + mac_bytes(src_mac) + b"\0\0"


def map_writes(pindir: Path, backends_file, src_mac: str) -> list[tuple[Path, bytes, bytes]]:
    """Every map entry a backend set needs (its backends, its slot table, the mask), from a
    validated backends file."""
    bs = load_backends(backends_file)
    if len(bs.backends) > BACKENDS or len(bs.slots) > SLOTS:
        raise XenobenchError(f"Failed to configure mylb from {backends_file}: {len(bs.backends)} backends and "
                             f"{len(bs.slots)} slots; it has room for {BACKENDS} and {SLOTS}")
    m = pindir / "maps"
    u32 = struct.Struct("<I").pack
    return ([(m / "mylb_backends", u32(i), mac_bytes(b.mac) + b"\0\0") for i, b in enumerate(bs.backends)]
            + [(m / "mylb_slots", u32(s), u32(bi)) for s, bi in enumerate(bs.slots)]
            + [(m / "mylb_config", u32(0), config_value(bs.mask, src_mac))])


def _summary(backends: Path, entries: int) -> dict:
    bs = load_backends(backends)
    return {"backends": [b.name for b in bs.backends], "class_bits": bs.class_bits, "entries_written": entries}


def _configure(pindir: Path, backends: Path, a, egress_ifindex: int | None) -> dict:
    writes = map_writes(pindir, backends, a.src_mac) + [
        (pindir / "maps" / "mylb_egress", struct.pack("<I", 0), struct.pack("<I", egress_ifindex))]
    map_update_batch(writes)
    return _summary(backends, len(writes))


def _update(pindir: Path, current: Path, new: Path, a) -> dict:
    """SIGHUP: the entries of the new set that differ from the running one's, in one batch; backends
    first, so no slot ever names a backend entry not yet written (a removed backend's entry stays,
    named by no slot)."""
    old = {(p, k): v for p, k, v in map_writes(pindir, current, a.src_mac)}
    writes = [(p, k, v) for p, k, v in map_writes(pindir, new, a.src_mac) if old.get((p, k)) != v]
    map_update_batch(writes)
    return _summary(new, len(writes))


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
                   egress_required=True, description="mylb controller (an out-of-tree example LB)",
                   update=_update, route=route)

if __name__ == "__main__":
    sys.exit(AGENT.main())
