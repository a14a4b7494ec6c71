"""The XDP programs that make the namespace topology measure the load balancer, not the plumbing
(docs/testbed.md):
- the switch's fast path (switch/fastpath.bpf.c) on every switch port forwards frames to bound
  MACs at XDP, as the MSN2100 does in hardware; only broadcast/unknown frames reach the bridge;
- the backends' sink (switch/sink.bpf.c) counts every frame at a backend's veth and drops the
  generator's, as a separate machine's NIC would; a DNS server takes the interface over.
Both are loaded once into the switch namespace and pinned under the testbed's pin directory.
"""

from __future__ import annotations

import ipaddress
import json
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from .. import REPO_ROOT
from ..agents.bpf import bpftool_stdout, counters as bpf_counters
from ..errors import TestbedError, XenobenchError
from ..katran import DECAP_CHAIN_PROG
from .topology import NamespaceTopology, ip

FASTPATH_OBJ = REPO_ROOT / "switch" / "build" / "fastpath.bpf.o"
FASTPATH_PROG = "sw_fastpath"
SW_STATS = ("forwarded", "to_bridge", "malformed")  # enum sw_stat (switch/switch_common.h)
SINK_OBJ = REPO_ROOT / "switch" / "build" / "sink.bpf.o"
SINK_PROG = "backend_sink"
SINK_STATS = ("dropped", "passed", "unrecorded")  # enum sink_stat
SINK_CONFIG = "<4s4sQQ"  # struct sink_config: net, mask (network order), t0_ns, bucket_ns
SINK_ARRIVAL_KEY = "<6sH"  # struct sink_arrival_key: destination MAC, time bucket
SINK_ARRIVAL = "<QQQ"  # struct sink_arrival: first_ns, last_ns, packets
# the generator's sources are src_ip_base + n, n < flows x 2^k classes <= 256 x 256: one /16
SINK_PREFIX = 16


def _hex(b: bytes) -> str:
    """bpftool's `hex` argument form."""
    return " ".join(f"{x:02x}" for x in b)


def _load(topo: NamespaceTopology, obj: Path, pin: Path) -> None:
    (pin / "maps").mkdir(parents=True, exist_ok=True)
    topo.run(topo.switch_ns, "bpftool", "prog", "loadall", str(obj), str(pin / "progs"), "type", "xdp",
             "pinmaps", str(pin / "maps"))


def _bpftool_batch(topo: NamespaceTopology, name: str, cmds: list[str]) -> None:
    batch = topo.cfg.state_dir / f"{name}.bpftool"
    batch.parent.mkdir(parents=True, exist_ok=True)
    batch.write_text("\n".join(cmds) + "\n")
    topo.run(topo.switch_ns, "bpftool", "batch", "file", str(batch))


def _percpu(pin: Path, names: tuple[str, ...]) -> dict[str, int]:
    try:
        return bpf_counters(pin, names)
    except XenobenchError as e:
        raise TestbedError(f"Failed to read {pin}: {e}") from None


class SwitchFastpath:
    """switch/build/fastpath.bpf.o on every switch port, pinned under `pindir`."""

    def __init__(self, topo: NamespaceTopology, pindir: Path):
        self.topo, self.pindir = topo, pindir

    def attach(self) -> None:
        """Load the object once, bind every node MAC to its port's ifindex, attach it to every
        port. Map updates run inside the switch namespace: devmap ifindexes resolve in the
        namespace of the process that writes them."""
        topo, sw, pin = self.topo, self.topo.switch_ns, self.pindir
        if not FASTPATH_OBJ.exists():
            raise TestbedError(f"Failed to attach the switch fast path: {FASTPATH_OBJ} is not built "
                               "(run `make build` or `make -C switch`; or set testbed.switch_fastpath: false "
                               f"in {topo.cfg.path})")
        _load(topo, FASTPATH_OBJ, pin)
        links = {l["ifname"]: l["ifindex"] for l in json.loads(ip("-n", sw, "-j", "link", "show").stdout)}
        cmds = []
        for n, i, port in topo.ports():
            if not i.mac:
                continue
            # the key is the u64 the program copies the MAC into: its 6 bytes, then 2 zero bytes
            mac = _hex(bytes.fromhex(i.mac.replace(":", "")) + b"\0\0")
            idx = _hex(links[port].to_bytes(4, "little"))
            cmds.append(f"map update pinned {pin / 'maps' / 'fdb'} key hex {mac} value hex {idx}")
            cmds.append(f"map update pinned {pin / 'maps' / 'ports'} key hex {idx} value hex {idx}")
        _bpftool_batch(topo, "switch-fdb", cmds)
        for n, i, port in topo.ports():
            # the node's end receives redirected frames (ndo_xdp_xmit) only with a NAPI: GRO gives it one
            topo.run(topo.ns(n.name), "ethtool", "-K", i.name, "gro", "on")
            # nsenter, not `ip -n`: that remounts /sys, hiding the pins under /sys/fs/bpf
            topo.run(sw, "ip", "link", "set", "dev", port, "xdpdrv", "pinned", str(pin / "progs" / FASTPATH_PROG))

    def stats(self) -> dict[str, int]:
        """The fast path's counters summed over CPUs (enum sw_stat)."""
        return _percpu(self.pindir / "maps" / "sw_stats", SW_STATS)


@dataclass(frozen=True)
class Arrival:
    """One (backend, time bucket) record of the sink, its CPUs merged: first and last frame on
    CLOCK_MONOTONIC in ns (bpf_ktime_get_ns(), the clock of time.monotonic_ns()) and the count."""
    mac: str
    bucket: int
    first_ns: int
    last_ns: int
    packets: int


class BackendSink:
    """switch/build/sink.bpf.o, loaded once and pinned under `pindir`, attached to each backend's
    interface (attach/detach: a DNS server takes the interface over and gives it back)."""

    def __init__(self, topo: NamespaceTopology, pindir: Path):
        self.topo, self.pindir = topo, pindir
        self._unrecorded0 = 0  # the unrecorded counter when the current recording started

    def load(self) -> None:
        """Load the object with the generator's source block (traffic.src_ip_base)."""
        cfg = self.topo.cfg
        base = cfg.section("traffic").get("src_ip_base")
        if not SINK_OBJ.exists():
            raise TestbedError(f"Failed to attach the backend sink: {SINK_OBJ} is not built (run `make build` "
                               f"or `make -C switch`; or set testbed.backend_sink: false in {cfg.path})")
        if not base:
            raise TestbedError(f"Failed to attach the backend sink: traffic.src_ip_base is not set in {cfg.path} "
                               "(the sink drops frames from that block; or set testbed.backend_sink: false)")
        _load(self.topo, SINK_OBJ, self.pindir)
        self._configure(0, 0)

    def _configure(self, t0_ns: int, bucket_ns: int) -> None:
        base = self.topo.cfg.section("traffic").get("src_ip_base")
        net = ipaddress.IPv4Network(f"{base}/{SINK_PREFIX}", strict=False)
        val = _hex(struct.pack(SINK_CONFIG, net.network_address.packed, net.netmask.packed, t0_ns, bucket_ns))
        _bpftool_batch(self.topo, "backend-sink",
                       [f"map update pinned {self.pindir / 'maps' / 'sink_config'} key hex 00 00 00 00 value hex {val}"])

    # --- arrival times (switch/sink.bpf.c, sink_arrivals) -------------------------------------------
    def start_arrivals(self, bucket_ns: int) -> int:
        """Record every generator frame's arrival per backend MAC and `bucket_ns` time bucket from
        now on (a fresh recording: earlier records are cleared); returns t0 (time.monotonic_ns(),
        the clock bpf_ktime_get_ns() reads)."""
        if bucket_ns <= 0:
            raise TestbedError(f"Failed to record arrivals: bucket width {bucket_ns} ns is not positive")
        # a backend whose interface runs something else (a DNS server's program, or nothing) would
        # count 0 frames: a wrong split, never a recording
        other = self.uncounted()
        if other:
            raise TestbedError(
                "Failed to record arrivals: " + "; ".join(f"{b.name}'s {b.iface().name} runs {p or 'no XDP program'}, "
                                                          f"not the backend sink ({SINK_PROG})" for b, p in other.items())
                + ": its frames would go uncounted. Stop what holds the interface (a DNS server: `xenobench dns "
                "stop`), or attach the sink again with `xenobench testbed up`")
        self.clear_arrivals()
        self._unrecorded0 = self.stats()["unrecorded"]
        t0 = time.monotonic_ns()
        self._configure(t0, int(bucket_ns))
        return t0

    def stop_arrivals(self) -> list[Arrival]:
        """Turn recording off and read what it recorded (one map dump), then clear it; refuses a
        recording that lost frames' times (the map was full: a narrower window or wider buckets)."""
        self._configure(0, 0)
        unrecorded = self.stats()["unrecorded"] - self._unrecorded0
        entries = self._dump()  # one dump: read, then deleted by the keys it holds
        recs = self._records(entries)
        self._delete(entries)
        if unrecorded:
            raise TestbedError(f"Failed to record arrivals: {unrecorded} frames found sink_arrivals full "
                               f"(max_entries in switch/switch_common.h SINK_ARRIVAL_ENTRIES); record a shorter "
                               "window or use wider buckets")
        return recs

    def _dump(self) -> list[dict]:
        try:
            out = bpftool_stdout("map", "dump", "pinned", str(self.pindir / "maps" / "sink_arrivals"), "-j")
        except XenobenchError as e:
            raise TestbedError(f"Failed to read the sink's arrival records: {e}") from None
        return json.loads(out or "[]")

    def arrivals(self) -> list[Arrival]:
        """The records, CPUs merged (first: the earliest, last: the latest, packets summed)."""
        return self._records(self._dump())

    @staticmethod
    def _records(entries: list[dict]) -> list[Arrival]:
        recs = []
        for ent in entries:
            mac, bucket = struct.unpack(SINK_ARRIVAL_KEY, bytes(int(x, 16) for x in ent["key"]))
            per = [struct.unpack(SINK_ARRIVAL, bytes(int(x, 16) for x in v["value"])) for v in ent["values"]]
            per = [p for p in per if p[2]]  # a CPU that never saw this key holds zeros
            if per:
                recs.append(Arrival(mac.hex(":"), bucket, min(p[0] for p in per), max(p[1] for p in per),
                                    sum(p[2] for p in per)))
        return sorted(recs, key=lambda a: (a.mac, a.bucket))

    def clear_arrivals(self) -> None:
        """Delete every record (one bpftool batch)."""
        self._delete(self._dump())

    def _delete(self, entries: list[dict]) -> None:
        maps = self.pindir / "maps"
        cmds = [f"map delete pinned {maps / 'sink_arrivals'} key hex {' '.join(e['key'])}" for e in entries]
        if cmds:
            _bpftool_batch(self.topo, "backend-sink-clear", cmds)

    def set_link(self, node: str, attach: bool) -> None:
        """Attach the sink to a backend's interface, or detach whatever program is there."""
        n = self.topo.cfg.nodes[node]
        argv = ["ip", "link", "set", "dev", n.iface().name, "xdpdrv",
                *(["pinned", str(self.pindir / "progs" / SINK_PROG)] if attach else ["off"])]
        self.topo.run(self.topo.ns(node), *argv)

    def uncounted(self) -> dict:
        """The backends (NodeConfig -> the program there, None for none) whose interface runs
        neither the sink nor Katran's decap chain in front of it: their frames go uncounted."""
        progs = {b: self.program(b.name) for b in self.topo.cfg.backend_nodes()}
        return {b: p for b, p in progs.items() if p not in (SINK_PROG, DECAP_CHAIN_PROG)}

    def attached(self, node: str) -> bool:
        """Whether an XDP program is attached to a backend's interface."""
        return self.program(node) is not None

    def program(self, node: str) -> str | None:
        """The name of the XDP program on a backend's interface, None where there is none."""
        n = self.topo.cfg.nodes[node]
        p = ip("-n", self.topo.ns(node), "-j", "link", "show", "dev", n.iface().name, check=False)
        xdp = ((json.loads(p.stdout or "[]") or [{}])[0]).get("xdp") or {}
        return ((xdp.get("prog") or {}).get("name") or "an unnamed XDP program") if xdp else None

    def stats(self) -> dict[str, int]:
        """The sink's counters summed over CPUs and backends (enum sink_stat)."""
        return _percpu(self.pindir / "maps" / "sink_stats", SINK_STATS)
