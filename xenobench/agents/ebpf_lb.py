"""The eBPF baseline's controller (ebpf_baseline/lb.bpf.c), run on the LB node as
`python -m xenobench.agents.ebpf_lb run ...` inside the node's namespace, so the devmap's ifindex
resolves there.

It validates the backends file, loads ebpf_baseline/build/lb.bpf.o with its maps pinned under
--pin-dir, fills config/slots/backends/egress, attaches in native mode (generic only with
--generic; the mode that ran is recorded), prints stats as JSON lines every interval, and on
SIGINT/SIGTERM detaches and unpins everything (xenobench.agents.bpf.run_controller).
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
from .bpf import (bpftool_stdout, controller_parser, counters, ip_link, keep_lb_state, load_pinned, map_update,
                  percpu_sum, run_controller)
from .net import mac_bytes

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


def run(a) -> int:
    pindir = Path(a.pin_dir)
    mode = "generic" if a.generic else "native"

    def setup() -> dict:
        ifindex = None
        if a.egress_mode == "redirect":
            link = ip_link(a.egress)
            if link is None:
                raise XenobenchError(f"Failed to find egress interface {a.egress}")
            ifindex = link["ifindex"]
        load_backends(a.backends)  # validate before anything is loaded
        load(pindir)
        info = fill_maps(pindir, a.backends, vip=a.vip, port=a.port, policy=a.policy, egress=a.egress_mode,
                         src_mac=a.src_mac, egress_ifindex=ifindex)
        return {"ingress": a.ingress, "mode": mode, **info}

    return run_controller(what="the eBPF LB", iface=a.ingress, pindir=pindir, prog=PROG, generic=a.generic,
                          setup=setup, read_stats=lambda: read_stats(pindir, a.backends, mode),
                          interval=a.interval,
                          after_attach=lambda: keep_lb_state(a.state_dir, mode, a.backends))


def main(argv=None) -> int:
    ap, r = controller_parser("python -m xenobench.agents.ebpf_lb", "eBPF baseline controller", 1.0)
    r.add_argument("--backends", required=True)
    r.add_argument("--ingress", required=True)
    r.add_argument("--egress", help="egress port (redirect mode)")
    r.add_argument("--egress-mode", choices=sorted(EGRESS), default="redirect")
    r.add_argument("--src-mac", required=True, help="source MAC written into forwarded frames")
    r.add_argument("--vip", required=True)
    r.add_argument("--port", type=int, default=53)
    r.add_argument("--policy", choices=sorted(POLICY), default="pass", help="non-service frames")
    r.add_argument("--state-dir", required=True, help="where the mode and a copy of the backends file go")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
