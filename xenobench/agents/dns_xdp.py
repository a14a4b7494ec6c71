"""The XDP DNS responder's controller (dns_server/xdp_responder.bpf.c), run on the DNS backend
node as `python -m xenobench.agents.dns_xdp run ...`: load and pin with bpftool, write the config
and peers maps, attach (native unless --generic), print a JSON line when attached and one with
the counts on SIGTERM/SIGINT, detach and unpin (xenobench.agents.bpf.run_controller).
"""

from __future__ import annotations

import ipaddress
import struct
import subprocess
import sys
from pathlib import Path
from typing import Callable

import dns.name

from .. import REPO_ROOT
from ..errors import XenobenchError
from .bpf import bpftool_stdout, controller_parser, counters, load_pinned, map_update, run_controller
from .net import mac_bytes

OBJ = REPO_ROOT / "dns_server" / "build" / "xdp_responder.bpf.o"
PROG = "xdns_responder"
# enum xdns_stat order (dns_common.h)
STATS_NAMES = ("answered", "refused", "passed", "not_a", "malformed", "not_query", "peer_miss", "tx_error")
MODES = {"answer": 0, "reflect": 1}
EGRESS = {"tx": 0, "redirect": 1}
MAX_ZONE = 64
CONFIG_SIZE = 88  # sizeof(struct xdns_config)


def zone_wire(zone: str) -> bytes:
    """The zone in lower-case wire format, as the program compares it."""
    w = dns.name.from_text(zone).canonicalize().to_wire()
    if len(w) > MAX_ZONE:
        raise XenobenchError(f"Failed to configure the XDP responder: zone {zone!r} is {len(w)} bytes in "
                             f"wire format, at most {MAX_ZONE}")
    return w


def config_bytes(vip: str, port: int, mode: str, zone: str, answer: str, ttl: int, src_mac: str,
                 egress: str = "tx") -> bytes:
    """struct xdns_config (dns_common.h)."""
    z = zone_wire(zone)
    b = (ipaddress.IPv4Address(vip).packed + struct.pack("!H", port) + struct.pack("BB", MODES[mode], len(z))
         + ipaddress.IPv4Address(answer).packed + struct.pack("!I", ttl) + mac_bytes(src_mac)
         + struct.pack("BB", EGRESS[egress], 0)
         + z.ljust(MAX_ZONE, b"\0"))
    assert len(b) == CONFIG_SIZE
    return b


def load(pindir: Path) -> None:
    load_pinned(OBJ, pindir, "make -C dns_server")


def fill_maps(pindir: Path, *, vip: str, port: int, mode: str, zone: str, answer: str, ttl: int,
              src_mac: str, peers: dict[str, str], egress: str = "tx") -> None:
    m = pindir / "maps"
    map_update(m / "config", struct.pack("<I", 0), config_bytes(vip, port, mode, zone, answer, ttl, src_mac, egress))
    for ip, mac in peers.items():
        map_update(m / "peers", ipaddress.IPv4Address(ip).packed, mac_bytes(mac) + b"\0\0")


def read_stats(pindir: Path, run: Callable[..., str] = bpftool_stdout) -> dict:
    return counters(pindir / "maps" / "stats", STATS_NAMES, run)


def parse_peers(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        ip, sep, mac = item.partition("=")
        try:
            if not sep:
                raise ValueError("expected address=MAC")
            ipaddress.IPv4Address(ip)
            mac_bytes(mac)
        except ValueError as e:
            raise XenobenchError(f"Failed to parse peer {item!r}: {e}") from None
        out[ip] = mac
    return out


def driver(iface: str) -> str:
    """The interface's driver (ethtool -i), '' if unknown."""
    p = subprocess.run(["ethtool", "-i", iface], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("driver:"):
            return line.split(":", 1)[1].strip()
    return ""


def run(a) -> int:
    pindir = Path(a.pin_dir)
    egress = a.egress if a.egress != "auto" else ("redirect" if driver(a.iface) == "veth" else "tx")

    def setup() -> dict:
        peers = parse_peers(a.peer)
        config_bytes(a.vip, a.port, a.mode, a.zone, a.answer, a.ttl, a.src_mac)  # validate first
        load(pindir)
        fill_maps(pindir, vip=a.vip, port=a.port, mode=a.mode, zone=a.zone, answer=a.answer, ttl=a.ttl,
                  src_mac=a.src_mac, peers=peers, egress=egress)
        return {"iface": a.iface, "attach": "generic" if a.generic else "native", "mode": a.mode,
                "egress": egress, "peers": len(peers)}

    return run_controller(what="the XDP responder", iface=a.iface, pindir=pindir, prog=PROG, generic=a.generic,
                          setup=setup, read_stats=lambda: read_stats(pindir), interval=a.interval)


def main(argv=None) -> int:
    ap, r = controller_parser("python -m xenobench.agents.dns_xdp", "XDP DNS responder controller", 0.0)
    r.add_argument("--iface", required=True)
    r.add_argument("--vip", required=True)
    r.add_argument("--port", type=int, default=53)
    r.add_argument("--zone", required=True)
    r.add_argument("--answer", required=True, help="the A record's address")
    r.add_argument("--ttl", type=int, default=300)
    r.add_argument("--mode", choices=sorted(MODES), default="answer")
    r.add_argument("--src-mac", required=True, help="this node's MAC: source of every reply")
    r.add_argument("--peer", action="append", default=[], help="client address=MAC (repeatable)")
    r.add_argument("--egress", choices=["auto", *EGRESS], default="auto",
                   help="tx: XDP_TX; redirect: to the ingress port (veth); auto: redirect on veth")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
