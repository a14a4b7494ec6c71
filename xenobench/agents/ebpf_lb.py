"""The eBPF baseline's agent (ebpf_baseline/lb.bpf.c), an XdpLbAgent (xenobench.agents.xdp_lb):
`python -m xenobench.agents.ebpf_lb run ...` on the LB node.

It loads ebpf_baseline/build/lb.bpf.o with its maps pinned under --pin-dir, fills
config/slots/backends/egress from the backends file, attaches in native mode (generic only with
--generic; the mode that ran is recorded), prints stats as JSON lines every interval, and on
SIGINT/SIGTERM detaches and unpins everything. With --egress it redirects to that port (p0 -> p1);
without, it sends out of its ingress port by XDP_TX (a one-port host like fips5's).
"""

from __future__ import annotations

import ipaddress
import struct
import sys
from pathlib import Path
from typing import Callable

from .. import REPO_ROOT
from ..backends import load_backends
from ..errors import XenobenchError
from .bpf import bpftool_stdout, counters, load_pinned, map_update, map_update_batch, percpu_sum
from .net import mac_bytes
from .xdp_lb import XdpLbAgent

OBJ = REPO_ROOT / "ebpf_baseline" / "build" / "lb.bpf.o"
PROG = "xb_lb"
STATS_NAMES = ("miss", "non_ipv4", "non_service", "malformed", "tx_error")  # enum xb_stat order
POLICY = {"pass": 0, "drop": 1}
EGRESS = {"redirect": 0, "tx": 1}


def config_bytes(vip: str, port: int, policy: str, egress: str, mask: int, src_mac: str) -> bytes:
    """struct xb_config (lb_common.h): 20 bytes."""
    return (ipaddress.IPv4Address(vip).packed + struct.pack("!H", port)
            + struct.pack("<BBI", POLICY[policy], EGRESS[egress], mask) + mac_bytes(src_mac) + b"\0\0")


def load(pindir: Path) -> None:
    load_pinned(OBJ, pindir, "make -C ebpf_baseline")


def fill_maps(pindir: Path, backends_file, *, vip: str, port: int, policy: str, egress: str,
              src_mac: str, egress_ifindex: int | None) -> dict:
    bs = load_backends(backends_file)
    m = pindir / "maps"
    for i, b in enumerate(bs.backends):
        map_update(m / "backends", struct.pack("<I", i), mac_bytes(b.mac) + b"\x01\x00")
    for s, bi in enumerate(bs.slots):
        map_update(m / "slots", struct.pack("<I", s), struct.pack("<I", bi))
    map_update(m / "config", struct.pack("<I", 0), config_bytes(vip, port, policy, egress, bs.mask, src_mac))
    if egress_ifindex is not None:
        map_update(m / "egress", struct.pack("<I", 0), struct.pack("<I", egress_ifindex))
    return {"backends": [b.name for b in bs.backends], "class_bits": bs.class_bits, "slots": list(bs.slots)}


def backend_value(mac: str, valid: bool = True) -> bytes:
    """struct xb_backend (lb_common.h): mac, valid, pad."""
    return mac_bytes(mac) + bytes([1 if valid else 0, 0])


def update_maps(pindir: Path, current, new, a=None) -> dict:
    """A runtime change of the backend set by map updates while the program runs (SIGHUP,
    XdpLbAgent.update): the new file is read by the same strict reader first and refused whole
    (nothing written) if it is bad or changes class_bits (the class mask stays what the LB started
    with: restart for another). Indices follow the new file's order, as at start. Order of the
    writes, one `bpftool batch`: (1) backends entries that differ (an index may now name another
    backend of the new set: its slots go there at once), (2) slots that differ, (3) indices past
    the new set marked invalid once no slot names them. After (1)-(3) no frame goes to a removed
    backend; in between a frame may reach a backend of the new set other than its final one."""
    old, bs = load_backends(current), load_backends(new)
    if bs.class_bits != old.class_bits:
        raise XenobenchError(f"Failed to update the eBPF LB from {new}: class_bits {old.class_bits} -> "
                             f"{bs.class_bits} changes the class mask of the running program; restart it "
                             "with the new file")
    m = pindir / "maps"
    ups = [(m / "backends", struct.pack("<I", i), backend_value(b.mac)) for i, b in enumerate(bs.backends)
           if i >= len(old.backends) or old.backends[i].mac != b.mac]
    slots = [(m / "slots", struct.pack("<I", s), struct.pack("<I", bi)) for s, bi in enumerate(bs.slots)
             if old.slots[s] != bi]
    gone = [(m / "backends", struct.pack("<I", i), backend_value(old.backends[i].mac, valid=False))
            for i in range(len(bs.backends), len(old.backends))]
    map_update_batch(ups + slots + gone)
    return {"backends": [b.name for b in bs.backends], "class_bits": bs.class_bits, "slots": list(bs.slots),
            "added": sorted({b.name for b in bs.backends} - {b.name for b in old.backends}),
            "removed": sorted({b.name for b in old.backends} - {b.name for b in bs.backends}),
            "entries_written": len(ups) + len(slots) + len(gone)}


def read_stats(pindir: Path, backends_file, mode: str, run: Callable[..., str] = bpftool_stdout) -> dict:
    """Counters of a running LB in the shape `lb stats` prints for every LB."""
    bs = load_backends(backends_file)
    m = pindir / "maps"
    per_be = percpu_sum(m / "backend_stats", "<QQ", run)
    out = {"backends": [{"name": b.name, "mac": b.mac, "packets": per_be.get(i, (0, 0))[0],
                         "bytes": per_be.get(i, (0, 0))[1]} for i, b in enumerate(bs.backends)]}
    out.update(counters(m / "stats", STATS_NAMES, run))
    out["mode"] = mode
    return out


def _configure(pindir: Path, backends: Path, a, egress_ifindex: int | None) -> dict:
    return fill_maps(pindir, backends, vip=a.vip, port=a.port, policy=a.policy,
                     egress="redirect" if egress_ifindex is not None else "tx", src_mac=a.src_mac,
                     egress_ifindex=egress_ifindex)


def _add_args(r) -> None:
    r.add_argument("--vip", required=True, help="the service address (IPv4)")
    r.add_argument("--port", type=int, default=53, help="the service's UDP port")
    r.add_argument("--policy", choices=sorted(POLICY), default="pass", help="non-service frames")


AGENT = XdpLbAgent(name="the eBPF LB", prog_name="xenobench.agents.ebpf_lb", obj=OBJ, prog=PROG,
                   build_hint="make -C ebpf_baseline", configure=_configure, read_stats=read_stats,
                   add_args=_add_args, description="eBPF baseline controller", update=update_maps,
                   forwarded_map="backend_stats")

if __name__ == "__main__":
    sys.exit(AGENT.main())
