"""The testbed: its nodes, and for the embedded default the namespace topology itself.

Namespace testbed (the thesis topology on one machine): one namespace per node (<prefix><node>) and a switch namespace
(<prefix>sw) holding a Linux bridge whose FDB binds every MAC statically to its port, like the
MSN2100's MAC bindings. Every veth is created directly inside the namespaces, so nothing appears in
the root namespace; deleting the namespaces removes every link and every unpinned XDP program.
What was created is recorded in <state_dir>/testbed.json before it is created, so `down` cleans
up after a crashed or killed harness too.

Two things make it measure the load balancer rather than the plumbing (README, "The testbed"):
- the switch's fast path (switch/fastpath.bpf.c) on every switch port forwards frames to bound
  MACs at XDP, as the MSN2100 does in hardware; only broadcast/unknown frames reach the bridge;
- CPU placement: for rate measurements the LB's ingress port runs threaded NAPI pinned to
  `testbed.cpus.dut`, so the LB (and everything it forwards) runs on one CPU and the generator
  (traffic.xdpgen.cpu) on another; for latency measurements it runs inline (`place_dut`).
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from . import REPO_ROOT
from .agents.bpf import counters as bpf_counters
from .config import Config, NodeConfig
from .errors import NodeError, TestbedError, XenobenchError
from .nodes import NETNS_RUN_DIR, Node, make_node

log = logging.getLogger(__name__)

BPFFS = Path("/sys/fs/bpf")
FASTPATH_OBJ = REPO_ROOT / "switch" / "build" / "fastpath.bpf.o"
FASTPATH_PROG = "sw_fastpath"
SINK_OBJ = REPO_ROOT / "switch" / "build" / "sink.bpf.o"
SINK_PROG = "backend_sink"
SINK_STATS = ("dropped", "passed")  # enum sink_stat
# the generator's sources are src_ip_base + n, n < flows x 2^k classes <= 256 x 256: one /16
SINK_PREFIX = 16
SW_STATS = ("forwarded", "to_bridge", "malformed")  # enum sw_stat (switch/switch_common.h)
NAPI_LOCK = Path("/run/lock/xenobench-napi.lock")  # napi/<dev>-<id> kthreads are global
DUT_MODES = ("threaded", "inline")  # NamespaceTestbed.place_dut


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise TestbedError(f"Failed to run `ip {' '.join(args)}`: {p.stderr.strip()}")
    return p


def _hex(b: bytes) -> str:
    """bpftool's `hex` argument form."""
    return " ".join(f"{x:02x}" for x in b)


def ensure_bpffs() -> bool:
    """Mount the BPF filesystem at /sys/fs/bpf if it is not; True if this call mounted it."""
    if BPFFS.is_mount():
        return False
    p = subprocess.run(["mount", "-t", "bpf", "bpf", str(BPFFS)], capture_output=True, text=True)
    if p.returncode != 0:
        raise TestbedError(f"Failed to mount the BPF filesystem at {BPFFS}: {p.stderr.strip()}")
    return True


BPF_PRELOAD = {"maps.debug", "progs.debug"}  # iterators the kernel puts into every bpffs mount


def unmount_bpffs_if_unused() -> None:
    """Undo ensure_bpffs() when nothing but the kernel's own iterators is pinned."""
    if BPFFS.is_mount() and not [p for p in BPFFS.iterdir() if p.name not in BPF_PRELOAD]:
        subprocess.run(["umount", str(BPFFS)], capture_output=True)


class Testbed:
    """Nodes of a configuration, by name and by role. Subclasses add bring-up/teardown."""

    __test__ = False

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self._nodes: dict[str, Node] = {}

    def node(self, name: str) -> Node:
        if name not in self._nodes:
            if name not in self.cfg.nodes:
                raise TestbedError(f"Failed to find node {name!r} in {self.cfg.path}: "
                                   f"have {', '.join(self.cfg.nodes)}")
            self._nodes[name] = make_node(self.cfg, self.cfg.nodes[name])
        return self._nodes[name]

    def node_for_role(self, role: str) -> Node:
        return self.node(self.cfg.role(role).name)

    def nodes(self) -> list[Node]:
        return [self.node(n) for n in self.cfg.nodes]

    @property
    def bpffs_dir(self) -> Path:
        """Where programs and maps of this testbed are pinned (removed by `down`)."""
        return BPFFS / f"{self.cfg.prefix}{self.cfg.name}"

    def up(self) -> dict:
        return {"transport": self.cfg.transport, "changed": False}

    def cpu_placement(self) -> dict | None:
        """Where the generator and the DUT's packet processing run (None: not placed here)."""
        return None

    def place_dut(self, mode: str) -> None:
        """How the LB's packet processing is scheduled ("threaded" for rates, "inline" for
        latency; NamespaceTestbed.place_dut); a hardware testbed's is the hardware's: no-op."""

    def release_backend_sink(self, node: str) -> None:
        """A service (a DNS server) takes a backend's interface over; no-op without a sink."""

    def restore_backend_sink(self, node: str) -> None:
        """Give the interface back to the backend sink after release_backend_sink."""

    #: services this testbed can set up around a load balancer (LoadBalancer.needs)
    services: tuple[str, ...] = ()

    def provide(self, needs: tuple[str, ...], lb_kind: str) -> None:
        """Set up what an LB needs around it (LoadBalancer.needs), idempotent; refuses by name
        what this testbed cannot provide."""
        missing = [n for n in needs if n not in self.services]
        if missing:
            raise TestbedError(f"Failed to start {lb_kind} on testbed {self.cfg.name}: it needs "
                               f"{', '.join(missing)}, which this testbed does not provide "
                               f"(provides: {', '.join(self.services) or 'nothing'})")

    def withdraw(self, needs: tuple[str, ...], lb_kind: str) -> None:
        """Undo provide() once the LB has stopped."""

    def down(self) -> dict:
        for n in self.nodes():
            try:
                n.stop_all()
            except NodeError as e:
                log.warning("%s", e)
            n.close()
        return {"removed": []}

    def status(self) -> dict:
        return {"testbed": self.cfg.name, "transport": self.cfg.transport,
                "nodes": {n.name: {"role": n.ncfg.role, "processes": [h.tag for h in n.handles()
                                                                     if n.running(h.tag)]}
                          for n in self.nodes()}}

    def check(self) -> list[tuple[str, bool, str]]:
        """Connectivity proofs: (description, ok, detail) rows."""
        rows = []
        client = self.node_for_role("client")
        for b in self.cfg.backend_nodes():
            ip = b.iface().addr
            r = client.run(["ping", "-c", "1", "-W", "2", ip], check=False, timeout=10)
            rows.append((f"client reaches {b.name} ({ip}) directly", r.ok,
                         (r.stdout.strip().splitlines() or [""])[-1] if r.ok else r.stderr.strip() or r.stdout.strip()))
        for b in self.cfg.backend_nodes():
            rows.append(self._check_vip_to_backend(client, b))
        return rows

    def _check_vip_to_backend(self, client: Node, b: NodeConfig) -> tuple[str, bool, str]:
        """Send one UDP datagram to the VIP addressed to the backend's MAC; it must arrive there."""
        backend = self.node(b.name)
        port = 9
        token = f"xenobench-check-{b.name}-{time.time_ns()}"
        desc = f"UDP to VIP {self.cfg.service.vip} with {b.name}'s MAC arrives at {b.name}"
        recv = backend.start("check-recv", backend.python_argv(
            "xenobench.agents.udpcheck", "recv", "--bind", self.cfg.service.vip, "--port", str(port),
            "--expect", token, "--timeout", "5"))
        try:
            time.sleep(0.3)
            ci = self.cfg.role("client").iface()
            client.run(client.python_argv(
                "xenobench.agents.udpcheck", "send", "--iface", ci.name, "--src-mac", ci.mac,
                "--dst-mac", b.iface().mac, "--src-ip", ci.addr, "--dst-ip", self.cfg.service.vip,
                "--port", str(port), "--payload", token), timeout=10)
            deadline = time.monotonic() + 5
            while backend.running("check-recv") and time.monotonic() < deadline:
                time.sleep(0.05)
            out = backend.read_log(recv).strip()
            ok = "received" in out
            return desc, ok, out.splitlines()[-1] if out else "nothing received"
        finally:
            backend.stop("check-recv")


class NamespaceTestbed(Testbed):
    """The embedded default: the thesis topology in network namespaces on this machine."""

    services = ("l3_gateway", "ipip_decap")  # xenobench.fabric

    def provide(self, needs: tuple[str, ...], lb_kind: str) -> None:
        super().provide(needs, lb_kind)
        from .fabric import NamespaceFabric
        NamespaceFabric(self).provide(needs)

    def withdraw(self, needs: tuple[str, ...], lb_kind: str) -> None:
        from .fabric import NamespaceFabric
        NamespaceFabric(self).withdraw(needs)

    @property
    def switch_ns(self) -> str:
        return f"{self.cfg.prefix}sw"

    @property
    def state_file(self) -> Path:
        return self.cfg.state_dir / "testbed.json"

    def namespaces(self) -> list[str]:
        return [f"{self.cfg.prefix}{n}" for n in self.cfg.nodes] + [self.switch_ns]

    def switch_port(self, node: str, iface: str) -> str:
        """Name of the bridge port a node interface is plugged into (≤ 15 characters)."""
        name = f"{node}-{iface}"
        if len(name) > 15:
            idx = [f"{n}/{i.name}" for n, c in self.cfg.nodes.items() for i in c.interfaces]
            name = f"swp{idx.index(f'{node}/{iface}')}"
        return name

    def _state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def _write_state(self, **kw) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        st = self._state()
        st.update(kw)
        self.state_file.write_text(json.dumps(st, indent=1))

    @staticmethod
    def existing_namespaces() -> set[str]:
        return {p.name for p in NETNS_RUN_DIR.iterdir()} if NETNS_RUN_DIR.is_dir() else set()

    def is_up(self) -> bool:
        st = self._state()
        return st.get("status") == "up" and set(self.namespaces()) <= self.existing_namespaces()

    def up(self) -> dict:
        if self.is_up():
            return {"transport": "netns", "changed": False, "namespaces": self.namespaces()}
        t0 = time.monotonic()
        self.down()  # a half-built testbed from a crash: start from nothing
        self._write_state(status="creating", namespaces=self.namespaces(), created=time.time(),
                          mounted_bpffs=ensure_bpffs())
        try:
            self._build()
        except Exception:
            log.error("bring-up failed; tearing down what was created")
            self.down()
            raise
        self._write_state(status="up")
        return {"transport": "netns", "changed": True, "namespaces": self.namespaces(),
                "seconds": round(time.monotonic() - t0, 2)}

    def _ns(self, ns: str, *argv: str) -> None:
        p = subprocess.run(["nsenter", f"--net={NETNS_RUN_DIR / ns}", "--", *argv],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise TestbedError(f"Failed to run `{' '.join(argv)}` in namespace {ns}: {p.stderr.strip()}")

    def _build(self) -> None:
        cfg, sw = self.cfg, self.switch_ns
        for ns in self.namespaces():
            _ip("netns", "add", ns)
            # no IPv6: router solicitations and DAD would add frames to every count and capture
            self._ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                     "net.ipv6.conf.default.disable_ipv6=1")
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0",
            "mcast_snooping", "0")
        # no multicast on any link: IGMP reports would add frames to counts and captures
        _ip("-n", sw, "link", "set", "br0", "multicast", "off", "up")
        vip = cfg.service.vip
        for n in cfg.nodes.values():
            ns = f"{cfg.prefix}{n.name}"
            if n.role in ("dns_backend", "backend"):
                # the VIP lives on the backend's loopback (direct server return); never answer ARP for it
                self._ns(ns, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1",
                         "net.ipv4.conf.all.arp_announce=2")
                _ip("-n", ns, "addr", "add", f"{vip}/32", "dev", "lo")
            for i in n.interfaces:
                port = self.switch_port(n.name, i.name)
                _ip("link", "add", i.name, "netns", ns, "address", i.mac, "type", "veth",
                    "peer", "name", port, "netns", sw)
                # checksums in software: frames on the wire (XDP, captures) carry full checksums
                for dev, where in ((i.name, ns), (port, sw)):
                    self._ns(where, "ethtool", "-K", dev, "tx", "off")
                # GRO on the switch side gives the veth NAPI, without which XDP_TX/XDP_REDIRECT
                # into the node's interface would be dropped
                self._ns(sw, "ethtool", "-K", port, "gro", "on")
                _ip("-n", sw, "link", "set", port, "master", "br0")
                subprocess.run(["bridge", "-n", sw, "link", "set", "dev", port, "learning", "off"], check=True)
                subprocess.run(["bridge", "-n", sw, "fdb", "replace", i.mac, "dev", port, "master", "static"],
                               check=True)
                _ip("-n", sw, "link", "set", port, "multicast", "off", "up")
                if i.ip:
                    _ip("-n", ns, "addr", "add", str(i.ip), "dev", i.name)
                for extra in i.extra_ips:
                    _ip("-n", ns, "addr", "add", str(extra), "dev", i.name)
                if n.role == "lb" and i.lb_port == "ingress":
                    _ip("-n", ns, "addr", "add", f"{vip}/32", "dev", i.name)
                _ip("-n", ns, "link", "set", i.name, "multicast", "off", "up")
            if n.role == "lb" and len(n.interfaces) > 1:
                # two ports in one subnet: answer ARP only on the port that owns the address
                self._ns(ns, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1",
                         "net.ipv4.conf.all.arp_announce=2")
        tb = cfg.section("testbed")
        if tb["switch_fastpath"]:
            self._attach_fastpath()
        if tb["backend_sink"]:
            self._load_backend_sink()
            for b in cfg.backend_nodes():
                self.restore_backend_sink(b.name)
        self.place_dut("threaded")

    # --- the switch's XDP fast path ---------------------------------------------------------------
    @property
    def fastpath_pindir(self) -> Path:
        return self.bpffs_dir / "switch"

    def _ports(self) -> list[tuple[NodeConfig, object, str]]:
        return [(n, i, self.switch_port(n.name, i.name)) for n in self.cfg.nodes.values() for i in n.interfaces]

    def _attach_fastpath(self) -> None:
        """Load switch/build/fastpath.bpf.o once, bind every node MAC to its port's ifindex, attach
        it to every port. Map updates run inside the switch namespace: devmap ifindexes resolve in
        the namespace of the process that writes them."""
        cfg, sw = self.cfg, self.switch_ns
        if not FASTPATH_OBJ.exists():
            raise TestbedError(f"Failed to attach the switch fast path: {FASTPATH_OBJ} is not built "
                               "(run `make build` or `make -C switch`; or set testbed.switch_fastpath: false "
                               f"in {cfg.path})")
        pin = self.fastpath_pindir
        self._load(sw, FASTPATH_OBJ, pin)
        links = {l["ifname"]: l["ifindex"] for l in json.loads(_ip("-n", sw, "-j", "link", "show").stdout)}
        cmds = []
        for n, i, port in self._ports():
            if not i.mac:
                continue
            # the key is the u64 the program copies the MAC into: its 6 bytes, then 2 zero bytes
            mac = _hex(bytes.fromhex(i.mac.replace(":", "")) + b"\0\0")
            idx = _hex(links[port].to_bytes(4, "little"))
            cmds.append(f"map update pinned {pin / 'maps' / 'fdb'} key hex {mac} value hex {idx}")
            cmds.append(f"map update pinned {pin / 'maps' / 'ports'} key hex {idx} value hex {idx}")
        self._bpftool_batch(sw, "switch-fdb", cmds)
        for n, i, port in self._ports():
            # the node's end receives redirected frames (ndo_xdp_xmit) only with a NAPI: GRO gives it one
            self._ns(f"{cfg.prefix}{n.name}", "ethtool", "-K", i.name, "gro", "on")
            # nsenter, not `ip -n`: that remounts /sys, hiding the pins under /sys/fs/bpf
            self._ns(sw, "ip", "link", "set", "dev", port, "xdpdrv", "pinned", str(pin / "progs" / FASTPATH_PROG))

    def _load(self, ns: str, obj: Path, pin: Path) -> None:
        (pin / "maps").mkdir(parents=True, exist_ok=True)
        self._ns(ns, "bpftool", "prog", "loadall", str(obj), str(pin / "progs"), "type", "xdp",
                 "pinmaps", str(pin / "maps"))

    def _bpftool_batch(self, ns: str, name: str, cmds: list[str]) -> None:
        batch = self.cfg.state_dir / f"{name}.bpftool"
        batch.write_text("\n".join(cmds) + "\n")
        self._ns(ns, "bpftool", "batch", "file", str(batch))

    # --- the backends' receive sink ------------------------------------------------------------------
    @property
    def sink_pindir(self) -> Path:
        return self.bpffs_dir / "backend-sink"

    def _load_backend_sink(self) -> None:
        """Load switch/build/sink.bpf.o once with the generator's source block (traffic.src_ip_base)."""
        base = self.cfg.section("traffic").get("src_ip_base")
        if not SINK_OBJ.exists():
            raise TestbedError(f"Failed to attach the backend sink: {SINK_OBJ} is not built (run `make build` "
                               f"or `make -C switch`; or set testbed.backend_sink: false in {self.cfg.path})")
        if not base:
            raise TestbedError(f"Failed to attach the backend sink: traffic.src_ip_base is not set in {self.cfg.path} "
                               "(the sink drops frames from that block; or set testbed.backend_sink: false)")
        net = ipaddress.IPv4Network(f"{base}/{SINK_PREFIX}", strict=False)
        self._load(self.switch_ns, SINK_OBJ, self.sink_pindir)
        val = _hex(net.network_address.packed + net.netmask.packed)
        self._bpftool_batch(self.switch_ns, "backend-sink",
                            [f"map update pinned {self.sink_pindir / 'maps' / 'sink_config'} key hex 00 00 00 00 value hex {val}"])

    def _sink_link(self, node: str, attach: bool) -> None:
        n = self.cfg.nodes[node]
        if n.role not in ("backend", "dns_backend") or not self.cfg.section("testbed")["backend_sink"]:
            return
        argv = ["ip", "link", "set", "dev", n.iface().name, "xdpdrv",
                *(["pinned", str(self.sink_pindir / "progs" / SINK_PROG)] if attach else ["off"])]
        self._ns(f"{self.cfg.prefix}{node}", *argv)

    def release_backend_sink(self, node: str) -> None:
        if self.is_up():
            self._sink_link(node, False)

    def restore_backend_sink(self, node: str) -> None:
        """Attach the sink (unless the testbed is down or a program is attached, e.g. by a second restore)."""
        if not self.is_up() and self._state().get("status") != "creating":
            return
        n = self.cfg.nodes[node]
        p = _ip("-n", f"{self.cfg.prefix}{node}", "-j", "link", "show", "dev", n.iface().name, check=False)
        link = (json.loads(p.stdout or "[]") or [{}])[0]
        if not link.get("xdp"):
            self._sink_link(node, True)

    def sink_stats(self) -> dict[str, int]:
        """The sink's counters summed over CPUs and backends (enum sink_stat)."""
        return self._percpu(self.sink_pindir / "maps" / "sink_stats", SINK_STATS)

    def switch_stats(self) -> dict[str, int]:
        """The fast path's counters summed over CPUs (enum sw_stat)."""
        return self._percpu(self.fastpath_pindir / "maps" / "sw_stats", SW_STATS)

    @staticmethod
    def _percpu(pin: Path, names: tuple[str, ...]) -> dict[str, int]:
        try:
            return bpf_counters(pin, names)
        except XenobenchError as e:
            raise TestbedError(f"Failed to read {pin}: {e}") from None

    # --- CPU placement -----------------------------------------------------------------------------
    def _lb_ingress(self) -> tuple[str, str]:
        lb = self.cfg.role("lb")
        return f"{self.cfg.prefix}{lb.name}", (lb.lb_port("ingress") or lb.iface()).name

    def _napi_placements(self) -> list[tuple[str, str, str, int, str]]:
        """(what, namespace, device, CPU, config key) of every NAPI that runs as a pinned thread
        for rates: the LB's ingress port, and the switch hops testbed.cpus.hops names."""
        cpus = self.cfg.section("testbed")["cpus"]
        ns, dev = self._lb_ingress()
        out = [("dut", ns, dev, cpus["dut"], "testbed.cpus.dut")]
        hops = cpus.get("hops") or {}
        lb = self.cfg.role("lb")
        ports = {"from_generator": self.cfg.role("loadgen"), "from_lb": lb}
        for what, cpu in sorted(hops.items()):
            n = ports[what]
            i = (lb.lb_port("egress") or lb.iface()) if n is lb else n.iface()
            out.append((what, self.switch_ns, self.switch_port(n.name, i.name), cpu, f"testbed.cpus.hops.{what}"))
        return out

    @staticmethod
    def _napi_threads(dev: str) -> dict[int, str]:
        """napi/<dev>-<id> kthreads (their names cut at 15 characters, as the kernel stores them)."""
        prefix = f"napi/{dev}-"[:15]
        p = subprocess.run(["ps", "-e", "-o", "pid=,comm="], capture_output=True, text=True)
        out = {}
        for line in p.stdout.splitlines():
            pid, _, comm = line.strip().partition(" ")
            if comm.strip().startswith(prefix):
                out[int(pid)] = comm.strip()
        return out

    @staticmethod
    def _set_threaded(ns: str, dev: str, on: bool) -> None:
        # `ip netns exec` (not nsenter) remounts /sys, so /sys/class/net is the namespace's
        p = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", f"echo {int(on)} > /sys/class/net/{dev}/threaded"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise TestbedError(f"Failed to {'enable' if on else 'disable'} threaded NAPI on {ns}:{dev}: "
                               f"{p.stderr.strip()}")

    def _placed_threads(self) -> dict[str, dict[str, str]]:
        """The pinned NAPI threads this testbed made, {what: {pid: comm}}, from its state file."""
        return self._state().get("napi_threads") or {}

    def place_dut(self, mode: str) -> None:
        """How the LB ingress port's NAPI (and the switch hops of testbed.cpus.hops) run from now on
        (idempotent):
        - "threaded": each as a kthread pinned to its CPU at SCHED_FIFO, so the LB's XDP program
          and every hop after it run on a CPU of their own, away from the generator's (rates);
        - "inline": in softirq on the CPU that handed the frame over, as a NIC's interrupt runs it
          (latency: a sleeping kthread's wake-up on another vCPU adds 5-30 µs to every RTT)."""
        if mode not in DUT_MODES:
            raise TestbedError(f"Failed to place the LB's NAPI: mode {mode!r} is not one of {', '.join(DUT_MODES)}")
        placements = self._napi_placements()
        for _, _, dev, cpu, key in placements:  # all checked before anything changes
            if cpu >= (os.cpu_count() or 1):
                who = "the LB's NAPI" if key == "testbed.cpus.dut" else f"the NAPI of switch port {dev}"
                raise TestbedError(f"Failed to pin {who}: {key}: CPU {cpu} does not exist "
                                   f"(this machine has {os.cpu_count()}; {self.cfg.path})")
        placed = self._placed_threads()
        if self._state().get("dut_napi") == mode and (mode == "inline" or (
                set(placed) == {p[0] for p in placements}
                and all(placed[what] and set(placed[what]) <= set(map(str, self._napi_threads(dev)))
                        for what, _, dev, _, _ in placements))):
            return
        for _, ns, dev, _, _ in placements:
            self._set_threaded(ns, dev, False)
        self._write_state(napi_threads={}, dut_napi="inline")
        if mode == "threaded":
            placed = {}
            for what, ns, dev, cpu, _ in placements:
                placed[what] = self._place_napi(ns, dev, cpu)
                self._write_state(napi_threads=placed)
            self._write_state(dut_napi="threaded")

    def _place_napi(self, ns: str, dev: str, cpu: int) -> dict[str, str]:
        """Threaded NAPI on a veth, its kthread pinned to `cpu` (checked by place_dut) at
        testbed.cpus.dut_rt_priority;
        returns {pid: comm} of the threads made. The kthreads are named napi/<dev>-<napi id> in
        every namespace alike, so the ones made here are told apart by a before/after look under a
        lock."""
        NAPI_LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(NAPI_LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            before = self._napi_threads(dev)
            self._set_threaded(ns, dev, True)
            new = {pid: c for pid, c in self._napi_threads(dev).items() if pid not in before}
        if not new:
            raise TestbedError(f"Failed to find the NAPI thread of {ns}:{dev} after enabling threaded NAPI")
        prio = self.cfg.section("testbed")["cpus"]["dut_rt_priority"]
        for pid in new:
            p = subprocess.run(["taskset", "-pc", str(cpu), str(pid)], capture_output=True, text=True)
            if p.returncode != 0:
                raise TestbedError(f"Failed to pin NAPI thread {pid} of {ns}:{dev} to CPU {cpu}: {p.stderr.strip()}")
            # SCHED_FIFO like the kernel's IRQ threads: NAPI in softirq preempts every task, and a
            # threaded NAPI at normal priority would share the CPU with whatever else runs there
            if prio:
                p = subprocess.run(["chrt", "-f", "-p", str(prio), str(pid)], capture_output=True, text=True)
                if p.returncode != 0:
                    raise TestbedError(f"Failed to set SCHED_FIFO {prio} on NAPI thread {pid} of {ns}:{dev} "
                                       f"(testbed.cpus.dut_rt_priority): {p.stderr.strip()}")
        return {str(pid): c for pid, c in new.items()}

    def cpu_placement(self) -> dict | None:
        """What runs where, read back from the kernel (recorded in every trial's host metadata)."""
        placed = self._placed_threads()
        mode = self._state().get("dut_napi")

        def read_back(what: str, ns: str, dev: str) -> dict:
            threads, sched = {}, {}
            for pid, comm in (placed.get(what) or {}).items():
                p = subprocess.run(["taskset", "-pc", pid], capture_output=True, text=True)
                threads[comm] = p.stdout.rsplit(":", 1)[-1].strip() if p.returncode == 0 else None
                p = subprocess.run(["chrt", "-p", pid], capture_output=True, text=True)
                sched[comm] = " ".join(l.rsplit(":", 1)[-1].strip() for l in p.stdout.splitlines()) or None
            return {"node": ns, "dev": dev, "mode": mode, "threads": threads, "scheduling": sched}

        placements = self._napi_placements()
        (_, ns, dev, _, _), hops = placements[0], placements[1:]
        gen = (self.cfg.section("traffic").get("xdpgen") or {}).get("cpu")
        out = {"cpus_online": os.cpu_count(), "generator_cpu": gen, "dut_cpu": self.cfg.section("testbed")["cpus"]["dut"],
               "dut_napi": read_back("dut", ns, dev),
               "switch_fastpath": bool(self.cfg.section("testbed")["switch_fastpath"])}
        if hops:
            out["hop_napi"] = {what: {"cpu": cpu, **read_back(what, hns, hdev)} for what, hns, hdev, cpu, _ in hops}
        return out

    def down(self) -> dict:
        st = self._state()
        mine = set(self.namespaces()) | set(st.get("namespaces", []))
        present = sorted(mine & self.existing_namespaces())
        # processes first: recorded ones gracefully, then anything still inside our namespaces
        for n in self.nodes():
            try:
                n.stop_all()
            except NodeError as e:
                log.warning("%s", e)
        for ns in present:
            self._kill_ns_processes(ns)
        for ns in present:
            _ip("netns", "del", ns, check=False)
        if self.bpffs_dir.exists():
            shutil.rmtree(self.bpffs_dir, ignore_errors=True)
        if st.get("mounted_bpffs"):
            unmount_bpffs_if_unused()
        if self.state_file.exists():
            self.state_file.unlink()
        left = sorted(mine & self.existing_namespaces())
        if left:
            raise TestbedError(f"Failed to remove namespaces {', '.join(left)}")
        return {"removed": present}

    @staticmethod
    def _kill_ns_processes(ns: str) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            pids = [int(x) for x in p.stdout.split()]
            if not pids:
                return
            for pid in pids:
                try:
                    import os
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
                if not p.stdout.split():
                    return
                time.sleep(0.05)

    def status(self) -> dict:
        out = super().status()
        existing = self.existing_namespaces()
        out["up"] = self.is_up()
        for n in self.cfg.nodes.values():
            ns = f"{self.cfg.prefix}{n.name}"
            ent = out["nodes"][n.name]
            ent["namespace"] = ns
            ent["exists"] = ns in existing
            ent["interfaces"] = {}
            if ns in existing:
                p = _ip("-n", ns, "-j", "link", "show", check=False)
                links = {l["ifname"]: l for l in json.loads(p.stdout or "[]")}
                for i in n.interfaces:
                    l = links.get(i.name)
                    ent["interfaces"][i.name] = None if l is None else {
                        "mac": l.get("address"), "up": "UP" in l.get("flags", []),
                        "xdp": (l.get("xdp") or {}).get("prog", {}).get("id") if l.get("xdp") else None}
        out["switch"] = {"namespace": self.switch_ns, "exists": self.switch_ns in existing}
        return out


class SshTestbed(Testbed):
    """The thesis testbed: nodes reached over SSH; the machines and the switch exist already, so
    `up` only proves every node answers and has its configured interfaces."""

    def up(self) -> dict:
        t0 = time.monotonic()
        for n in self.nodes():
            r = n.run(["ip", "-j", "link", "show"], timeout=30)
            names = {l["ifname"] for l in json.loads(r.stdout or "[]")}
            missing = [i.name for i in n.ncfg.interfaces if i.name not in names]
            if missing:
                raise TestbedError(f"Failed to find interface(s) {', '.join(missing)} on node {n.name} "
                                   f"(nodes.{n.name}.interfaces in {self.cfg.path})")
        return {"transport": "ssh", "changed": False, "seconds": round(time.monotonic() - t0, 2)}


def get_testbed(cfg: Config) -> Testbed:
    return NamespaceTestbed(cfg) if cfg.transport == "netns" else SshTestbed(cfg)
