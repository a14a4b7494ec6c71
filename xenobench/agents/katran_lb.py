"""Katran's agent (an XdpLbAgent, xenobench.agents.xdp_lb): `python -m xenobench.agents.katran_lb
run ...` on the LB node loads Katran's own balancer (katran/lib/bpf/balancer.bpf.c, built from a
located checkout by xenobench.katran; --obj) and configures it through its maps alone, as Katran's
control plane (katran/lib/KatranLb.cpp) would for one VIP:

- vip_map[{vip, port, proto}] = {flags 0, vip_num 0}               (addVip)
- reals[num] = {the real's IPv4 address, flags 0}, num = 1..n      (increaseRefCountForReal)
- ch_rings[vip_num * 65537 + slot] = num, Katran's Maglev ring      (modifyRealsForVip, programHashRing;
  computed by xenobench.agents.maglev)
- ctl_array[0] = the gateway MAC every encapsulated frame goes to   (the constructor's defaultMac)
- lru_mapping[cpu] = a connection table per CPU                    (initLrus, attachLrus)

Layouts: katran/lib/bpf/balancer_structs.h (struct vip_definition: 16 address bytes, be16 port,
u8 proto, padded to 20; struct vip_meta: u32 flags, u32 vip_num; struct real_definition: 16
address bytes, u8 flags, padded to 20; struct ctl_value: a u64 union holding the MAC; struct
lb_stats: u64 v1, v2) and katran/lib/bpf/balancer_maps.h (the maps). Katran forwards a VIP's frame
IPIP-encapsulated to the real by XDP_TX out of the port it came in on (--ingress; --egress is
refused: Katran has no second port) and passes everything else to the kernel.

The backends file gives the reals: their names, MACs (for the stats' shape only: Katran sends to
the gateway, not to a real's MAC) and weights, read as Katran reads a real's weight (the backends
file's RING rule: any integer 1..2^32-1, no power-of-two total; MaglevHash gives each real its
weight in slots in its first turn and one slot a turn after, xenobench.agents.maglev);
--real NAME=ADDRESS gives each one's IPv4 address (the harness takes it from the testbed node of
that name).
"""

from __future__ import annotations

import array
import ctypes
import ipaddress
import json
import os
import platform
import socket
import struct
import sys
from pathlib import Path
from typing import Callable

from ..backends import RING, load_backends
from ..errors import XenobenchError
from . import maglev
from .bpf import bpftool, bpftool_stdout, map_update, map_update_batch, percpu_lookup
from .bpf_stats import NR_BPF
from .net import mac_bytes
from .xdp_lb import XdpLbAgent

PROG = "balancer_ingress"
MAX_VIPS = maglev.MAX_VIPS
MAX_SUPPORTED_CPUS = 128     # balancer_consts.h: lru_mapping's size
VIP_NUM = 0
PROTOS = {"udp": socket.IPPROTO_UDP, "tcp": socket.IPPROTO_TCP}
#: global counters in `stats` at MAX_VIPS + index (katran/lib/bpf/balancer_consts.h), as (v1, v2)
GLOBAL = {"lru": 0, "lru_miss": 1, "fallback_lru": 3, "encap_fail": 7, "ch_drop": 9,
          "xdp_total": 16, "xdp_tx": 17, "xdp_drop": 18, "xdp_pass": 19}


def vip_key(vip: str, port: int, proto: int) -> bytes:
    """struct vip_definition: the address in the first 4 of 16 bytes, port in network order."""
    return ipaddress.IPv4Address(vip).packed + bytes(12) + struct.pack("!H", port) + bytes([proto, 0])


def vip_meta(flags: int, vip_num: int) -> bytes:
    return struct.pack("<II", flags, vip_num)


def real_value(address: str, flags: int = 0) -> bytes:
    """struct real_definition (IPv4: the address in the first 4 of 16 bytes)."""
    return ipaddress.IPv4Address(address).packed + bytes(12) + bytes([flags]) + bytes(3)


def ctl_mac(mac: str) -> bytes:
    return mac_bytes(mac) + b"\0\0"


def parse_reals(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items or []:
        name, sep, addr = it.partition("=")
        try:
            ipaddress.IPv4Address(addr)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise XenobenchError(f"Failed to read --real {it!r}: expected NAME=IPV4 (e.g. fips2=198.18.0.2)")
        out[name] = addr
    return out


def plan(backends_file, reals: dict[str, str]) -> tuple[list[dict], list[int]]:
    """The reals in file order with their number, address and weight, and Katran's ring."""
    bs = load_backends(backends_file, RING)
    missing = [b.name for b in bs.backends if b.name not in reals]
    if missing:
        raise XenobenchError(f"Failed to configure Katran: no address for {', '.join(missing)} "
                             f"(give --real NAME=IPV4 for every backend of {backends_file})")
    nums, ring = maglev.reals_ring([(reals[b.name], b.weight) for b in bs.backends])
    share = maglev.shares(ring)
    rs = [{"name": b.name, "num": n, "address": reals[b.name], "weight": b.weight, "share": share.get(n, 0.0)}
          for n, b in zip(nums, bs.backends)]
    return rs, ring


BPF_OBJ_GET, BPF_MAP_UPDATE_BATCH = 7, 26    # enum bpf_cmd (include/uapi/linux/bpf.h)


def _bpf(cmd: int, attr: bytes) -> tuple[int, bytes]:
    """bpf(2): (its return value, the attr as the kernel left it)."""
    nr = NR_BPF.get(platform.machine())
    if nr is None:
        raise OSError(f"bpf(2) syscall number unknown for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(attr, len(attr))
    r = libc.syscall(nr, cmd, buf, len(attr))
    if r < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return r, buf.raw


def update_u32_map(pin: Path, keys, values) -> None:
    """values[i] at keys[i] of a pinned u32 -> u32 array, in one BPF_MAP_UPDATE_BATCH (Linux >= 5.6)
    instead of one bpftool line per key: a 65537-slot ring in ~10 ms, not ~1.2 s. (No numpy in an
    agent: importing it starts OpenBLAS threads that do not block SIGHUP, and a SIGHUP one of them
    takes kills the agent instead of reaching its update loop, xenobench.agents.bpf.run_controller.)"""
    k, v = array.array("I", keys), array.array("I", values)
    n = len(k)
    if n != len(v):
        raise ValueError(f"{n} keys for {len(v)} values")
    if n == 0:
        return
    path = ctypes.create_string_buffer(str(pin).encode())
    fd, _ = _bpf(BPF_OBJ_GET, struct.pack("<QII", ctypes.addressof(path), 0, 0))  # attr: pathname, bpf_fd, file_flags
    try:
        # attr.batch: in_batch, out_batch, keys, values (u64 each), count, map_fd (u32), elem_flags, flags (u64)
        _, out = _bpf(BPF_MAP_UPDATE_BATCH, struct.pack("<QQQQIIQQ", 0, 0, k.buffer_info()[0], v.buffer_info()[0],
                                                        n, fd, 0, 0))
        done = struct.unpack_from("<I", out, 32)[0]
        if done != n:
            raise OSError(f"updated {done} of {n} entries")
    finally:
        os.close(fd)


def write_u32(pin: Path, keys, values) -> str:
    """update_u32_map, or on a kernel without batched map updates bpftool, one line per key;
    returns which ("batch" or "bpftool")."""
    try:
        update_u32_map(pin, keys, values)
        return "batch"
    except OSError:
        map_update_batch([(pin, struct.pack("<I", int(k)), struct.pack("<I", int(v))) for k, v in zip(keys, values)])
        return "bpftool"


def _hex(b: bytes) -> str:
    return " ".join(f"{x:02x}" for x in b)


def possible_cpus() -> list[int]:
    """/sys/devices/system/cpu/possible ("0-3,6") as a list."""
    out = []
    for part in Path("/sys/devices/system/cpu/possible").read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def per_cpu_lrus(pindir: Path) -> int:
    """One connection table (LRU hash) per CPU in lru_mapping, as Katran's control plane makes them
    for its forwarding cores (KatranLb::initLrus/attachLrus, createLruMap: katran_lru<cpu>); without
    them every frame takes the shared fallback_cache and counts FALLBACK_LRU_CNTR, which Katran
    calls a unit-test path. Each is shaped like the object's inner-map template (key struct
    flow_key, value struct real_pos_lru, DEFAULT_LRU_SIZE entries), which the kernel requires of an
    inner map. Returns how many were made."""
    m = pindir / "maps"
    proto = json.loads(bpftool_stdout("-j", "map", "show", "pinned", str(m / "fallback_cache")))
    cpus = [c for c in possible_cpus() if c < MAX_SUPPORTED_CPUS]
    (pindir / "lru").mkdir(exist_ok=True)
    for c in cpus:
        pin = pindir / "lru" / f"cpu{c}"
        bpftool("map", "create", str(pin), "type", "lru_hash", "key", str(proto["bytes_key"]),
                "value", str(proto["bytes_value"]), "entries", str(proto["max_entries"]), "name", f"katran_lru{c}")
        map_update_pinned(m / "lru_mapping", struct.pack("<I", c), pin)
    return len(cpus)


def map_update_pinned(pin: Path, key: bytes, value_pin: Path) -> None:
    bpftool("map", "update", "pinned", str(pin), "key", "hex", *_hex(key).split(), "value", "pinned", str(value_pin))


def fill_maps(pindir: Path, backends_file, *, vip: str, port: int, proto: str, gateway_mac: str,
              reals: dict[str, str]) -> dict:
    rs, ring = plan(backends_file, reals)
    m = pindir / "maps"
    lrus = per_cpu_lrus(pindir)
    for r in rs:
        map_update(m / "reals", struct.pack("<I", r["num"]), real_value(r["address"]))
    base = VIP_NUM * maglev.RING_SIZE
    write_u32(m / "ch_rings", range(base, base + len(ring)), ring)
    map_update(m / "ctl_array", struct.pack("<I", 0), ctl_mac(gateway_mac))
    # the VIP last: until it is there every frame passes
    map_update(m / "vip_map", vip_key(vip, port, PROTOS[proto]), vip_meta(0, VIP_NUM))
    return {"vip": f"{vip}:{port}/{proto}", "gateway_mac": gateway_mac, "lru_per_cpu": lrus,
            "reals": [{k: r[k] for k in ("name", "num", "address", "weight", "share")} for r in rs]}


#: the running agent's reals (address -> num) and the next unused num, kept between updates as
#: KatranLb keeps reals_ and realNums_, and the ring last written, as Vip keeps chRing_ (set from the
#: start's plan at the first update)
_RUNNING: dict = {}


def update_reals(pindir: Path, current, new, a) -> dict:
    """A runtime change of the VIP's reals as Katran's control plane makes it
    (katran/lib/KatranLb.cpp modifyRealsForVip at 19f08fec): a real that stays keeps its number
    (reals_ is keyed by address); a new one takes the next free number and its `reals` entry is
    written before the ring names it (increaseRefCountForReal); a removed one's number is freed
    to the back of the free list (decreaseRefCountForReal: realNums_.push_back; its `reals` entry
    stays); the ring is recomputed (Vip::batchRealsUpdate → calculateHashRing) and only the slots
    whose real changed are written (programHashRing: one bpfUpdateMapBatch of the delta; here one
    BPF_MAP_UPDATE_BATCH too, write_u32). The ring written last is kept for the next change, as
    Vip keeps chRing_. Flows in Katran's per-CPU connection tables (LRU) keep their real, also a
    removed one, until their entry ages out: Katran's connection consistency, not purged here
    either. The new file is read by the strict reader first; a backend without an address is
    refused before any map is written."""
    reals = parse_reals(a.real)
    bs = load_backends(new, RING)
    missing = [b.name for b in bs.backends if b.name not in reals]
    if missing:
        raise XenobenchError(f"Failed to update Katran from {new}: no address for {', '.join(missing)} "
                             "(the agent knows the reals given by --real)")
    if not _RUNNING:
        rs, ring0 = plan(current, reals)
        _RUNNING.update(nums={r["address"]: r["num"] for r in rs},
                        next=max((r["num"] for r in rs), default=0) + 1, ring=ring0)
    old_nums = dict(_RUNNING["nums"])
    nums, weights, nxt = {}, {}, _RUNNING["next"]
    for b in bs.backends:
        addr = reals[b.name]
        if addr in old_nums:
            nums[addr] = old_nums[addr]
        else:
            nums[addr], nxt = nxt, nxt + 1
        weights[addr] = b.weight

    before = _RUNNING["ring"]
    after = maglev.ring([(n, weights[ad], maglev.address_hash(ad)) for ad, n in nums.items()])
    delta = [i for i, (x, y) in enumerate(zip(before, after)) if x != y]
    m = pindir / "maps"
    added = [ad for ad in nums if ad not in old_nums]
    for ad in added:  # a new real's entry before the ring names it
        map_update(m / "reals", struct.pack("<I", nums[ad]), real_value(ad))
    base = VIP_NUM * maglev.RING_SIZE
    how = write_u32(m / "ch_rings", [base + i for i in delta], [max(after[i], 0) for i in delta]) if delta else None
    _RUNNING.update(nums=nums, next=nxt, ring=after)
    name = {reals[b.name]: b.name for b in bs.backends}
    old_names = {v: k for k, v in reals.items()}
    return {"reals": [{"name": name[ad], "num": n, "address": ad} for ad, n in nums.items()],
            "added": sorted(name[ad] for ad in added),
            "removed": sorted(old_names.get(ad, ad) for ad in old_nums if ad not in nums),
            "ring_slots_changed": len(delta), "entries_written": len(added) + len(delta),
            "ring_write": how}


def read_stats(pindir: Path, backends_file, mode: str, run: Callable[..., str] = bpftool_stdout) -> dict:
    """Katran's counters in the shape `lb stats` prints for every LB: per real from reals_stats
    (v1 packets, v2 bytes), the global ones from `stats` (v1 and v2 as balancer.bpf.c counts them).
    miss: VIP frames the ring had no real for (CH_DROP_STATS v1 + v2); non_service: frames passed
    to the kernel (XDP_PASS_CNTR); tx_error: failed encapsulations (ENCAP_FAIL_CNTR); Katran does
    not count non-IPv4 or malformed frames apart (they are in xdp_pass / xdp_drop): None."""
    bs = load_backends(backends_file, RING)
    m = pindir / "maps"
    # the entries counted, looked up one by one (percpu_lookup: a dump of the 4096 reals is ~0.1 s of CPU)
    per_real = percpu_lookup(m / "reals_stats", range(1, len(bs.backends) + 1), "<QQ", run)
    st = percpu_lookup(m / "stats", [VIP_NUM, *(MAX_VIPS + i for i in GLOBAL.values())], "<QQ", run)
    g = {name: st.get(MAX_VIPS + i, (0, 0)) for name, i in GLOBAL.items()}
    out = {"backends": [{"name": b.name, "mac": b.mac, "packets": per_real.get(i, (0, 0))[0],
                         "bytes": per_real.get(i, (0, 0))[1]} for i, b in enumerate(bs.backends, 1)],
           "miss": sum(g["ch_drop"]), "non_ipv4": None, "non_service": g["xdp_pass"][0], "malformed": None,
           "tx_error": sum(g["encap_fail"]),
           "vip_packets": st.get(VIP_NUM, (0, 0))[0], "vip_bytes": st.get(VIP_NUM, (0, 0))[1],
           "lru_miss": g["lru"][1], "fallback_lru": g["fallback_lru"][0],
           **{k: g[k][0] for k in ("xdp_total", "xdp_tx", "xdp_drop", "xdp_pass")}}
    out["mode"] = mode
    return out


def _configure(pindir: Path, backends: Path, a, egress_ifindex: int | None) -> dict:
    if egress_ifindex is not None:
        raise XenobenchError(f"Failed to configure Katran: it sends out of its ingress port ({a.ingress}) "
                             f"by XDP_TX; --egress {a.egress} is not used by it (leave it out)")
    return fill_maps(pindir, backends, vip=a.vip, port=a.port, proto=a.proto, gateway_mac=a.gateway_mac,
                     reals=parse_reals(a.real))


def _add_args(r) -> None:
    r.add_argument("--vip", required=True, help="the service address (IPv4)")
    r.add_argument("--port", type=int, default=53, help="the service's port")
    r.add_argument("--proto", choices=sorted(PROTOS), default="udp", help="the service's protocol")
    r.add_argument("--gateway-mac", required=True, help="MAC of the router every encapsulated frame goes to")
    r.add_argument("--real", action="append", default=[], metavar="NAME=IPV4",
                   help="a backend's address (one per backend of --backends)")


AGENT = XdpLbAgent(name="Katran", prog_name="xenobench.agents.katran_lb", obj=None, prog=PROG, weights=RING,
                   build_hint="xenobench.katran.build (a Katran checkout: katran.checkout)",
                   configure=_configure, read_stats=read_stats, add_args=_add_args, update=update_reals,
                   description="Katran (facebookincubator/katran) controller: its balancer, configured through its maps",
                   forwarded_map="reals_stats")

if __name__ == "__main__":
    sys.exit(AGENT.main())
