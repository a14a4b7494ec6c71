"""What a load balancer that encapsulates (Katran) needs of the namespace testbed around it
(LoadBalancer.needs, Testbed.provide/withdraw), set up while it runs and removed after:

- "l3_gateway": the switch routes like an L3 top-of-rack switch. Frames to the gateway MAC
  (katran.gateway_mac) are forwarded by their outer IPv4 destination to that node's port, with its
  MAC (switch/l3_gateway.bpf.c, in front of the fast path on the switch port of the LB's ingress,
  where such an LB sends its frames back by XDP_TX); every other frame goes on to the fast path.
- "ipip_decap": every backend decapsulates IPIP with Katran's own XDP decap in front of what its
  interface runs today (the receive sink, the XDP DNS responder, or nothing: the kernel's stack for
  bind9 and the Python server): switch/katran_decap_chain.bpf.c, built by xenobench.katran, runs
  Katran's decap and tail-calls the program that was attached before; on withdraw that program
  is attached again. A DNS server that takes the interface over while the chain is up (started
  after the LB, or stopped before it) puts the chain back in front of what it attached or left
  (BackendDecap.in_front, called by xenobench.dns), so either start order answers through the
  decap.

Pins live under <bpffs_dir>/fabric (removed by `testbed down` with the rest), the programs the
chains displaced under <state_dir>/fabric/<node>.json.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import struct
import subprocess
from pathlib import Path

from . import REPO_ROOT
from .errors import NodeError, TestbedError
from .nodes import NETNS_RUN_DIR

GATEWAY_OBJ = REPO_ROOT / "switch" / "build" / "l3_gateway.bpf.o"
GATEWAY_PROG = "l3_gateway"
GATEWAY_STATS = ("routed", "no_route", "not_ipv4", "ttl_exceeded")  # enum gw_stat
SERVICES = ("l3_gateway", "ipip_decap")
XDP_MODES = {1: "xdpdrv", 2: "xdpgeneric"}  # `ip -j link` xdp.mode (XDP_ATTACHED_DRV, _SKB)


def gateway_mac(cfg) -> str:
    """The MAC an encapsulating LB sends to (the L3 gateway's): katran.gateway_mac."""
    return cfg.section("katran")["gateway_mac"]


def _hex(b: bytes) -> str:
    return " ".join(f"{x:02x}" for x in b)


def _mac(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


class NamespaceFabric:
    def __init__(self, testbed):
        self.tb = testbed
        self.cfg = testbed.cfg

    @property
    def pindir(self) -> Path:
        return self.tb.bpffs_dir / "fabric"

    @property
    def statedir(self) -> Path:
        return self.cfg.state_dir / "fabric"

    def _ns(self, ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(["nsenter", f"--net={NETNS_RUN_DIR / ns}", "--", *argv], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise TestbedError(f"Failed to run `{' '.join(argv)}` in namespace {ns}: "
                               f"{(p.stderr or p.stdout).strip()}")
        return p

    def _link(self, ns: str, dev: str) -> dict:
        links = json.loads(self._ns(ns, "ip", "-j", "link", "show", "dev", dev).stdout or "[]")
        return links[0] if links else {}

    def _attached(self, ns: str, dev: str) -> tuple[int | None, str | None, int]:
        """(program id, its name, attach mode) of the XDP program on dev, (None, None, 0) if none."""
        xdp = self._link(ns, dev).get("xdp") or {}
        prog = xdp.get("prog") or {}
        return prog.get("id"), prog.get("name"), int(xdp.get("mode") or 0)

    def _load(self, ns: str, obj: Path, pin: Path) -> None:
        (pin / "maps").mkdir(parents=True, exist_ok=True)
        self._ns(ns, "bpftool", "prog", "loadall", str(obj), str(pin / "progs"), "type", "xdp",
                 "pinmaps", str(pin / "maps"))

    def _batch(self, ns: str, name: str, cmds: list[str]) -> None:
        self.statedir.mkdir(parents=True, exist_ok=True)
        f = self.statedir / f"{name}.bpftool"
        f.write_text("\n".join(cmds) + "\n")
        self._ns(ns, "bpftool", "batch", "file", str(f))
        f.unlink()

    # --- the L3 gateway on the switch ---------------------------------------------------------------
    def _gateway_port(self) -> str:
        lb = self.cfg.role("lb")
        return self.tb.switch_port(lb.name, (lb.lb_port("ingress") or lb.iface()).name)

    def gateway_up(self) -> None:
        sw, port, pin = self.tb.switch_ns, self._gateway_port(), self.pindir / "gateway"
        if self._attached(sw, port)[1] == GATEWAY_PROG:
            return
        if not GATEWAY_OBJ.exists():
            raise TestbedError(f"Failed to set up the L3 gateway: {GATEWAY_OBJ} is not built "
                               "(run `make build` or `make -C switch`)")
        self._load(sw, GATEWAY_OBJ, pin)
        links = {entry["ifname"]: entry["ifindex"]
                 for entry in json.loads(self._ns(sw, "ip", "-j", "link", "show").stdout)}
        gw = _mac(gateway_mac(self.cfg))
        m = pin / "maps"
        cmds = [f"map update pinned {m / 'gw_config'} key hex 00 00 00 00 value hex {_hex(gw + bytes(2))}"]
        for n in self.cfg.nodes.values():
            for i in n.interfaces:
                if not (i.ip and i.mac):
                    continue
                ifindex = links[self.tb.switch_port(n.name, i.name)]
                idx = _hex(struct.pack("<I", ifindex))
                for addr in (i.ip, *(ipaddress.IPv4Interface(x) for x in i.extra_ips)):
                    cmds.append(f"map update pinned {m / 'gw_routes'} key hex {_hex(addr.ip.packed)} "
                                f"value hex {_hex(route_value(ifindex, i.mac))}")
                cmds.append(f"map update pinned {m / 'gw_ports'} key hex {idx} value hex {idx}")
        fast = self.tb.fastpath_pindir / "progs"
        if self.cfg.section("testbed")["switch_fastpath"]:
            cmds.append(f"map update pinned {m / 'gw_next'} key hex 00 00 00 00 value pinned "
                        f"{next(fast.iterdir())}")
        self._batch(sw, "gateway", cmds)
        self._ns(sw, "ip", "-force", "link", "set", "dev", port, "xdpdrv", "pinned", str(pin / "progs" / GATEWAY_PROG))

    def gateway_down(self) -> None:
        sw, port, pin = self.tb.switch_ns, self._gateway_port(), self.pindir / "gateway"
        if (NETNS_RUN_DIR / sw).exists() and self._attached(sw, port)[1] == GATEWAY_PROG:
            fast = self.tb.fastpath_pindir / "progs"
            if self.cfg.section("testbed")["switch_fastpath"] and fast.exists():
                self._ns(sw, "ip", "-force", "link", "set", "dev", port, "xdpdrv", "pinned", str(next(fast.iterdir())))
            else:
                self._ns(sw, "ip", "link", "set", "dev", port, "xdpdrv", "off")
        shutil.rmtree(pin, ignore_errors=True)

    def gateway_stats(self) -> dict[str, int]:
        from .agents.bpf import counters
        return counters(self.pindir / "gateway" / "maps" / "gw_stats", GATEWAY_STATS)

    # --- Katran's decap on the backends ------------------------------------------------------------
    def decap_up(self) -> None:
        BackendDecap(self.tb).up()

    def decap_down(self) -> None:
        BackendDecap(self.tb).down()

    def decap_stats(self) -> dict[str, dict[str, int]]:
        return BackendDecap(self.tb).stats()

    # --- the testbed hook ---------------------------------------------------------------------------
    def provide(self, needs) -> None:
        try:
            if "l3_gateway" in needs:
                self.gateway_up()
            if "ipip_decap" in needs:
                self.decap_up()
        except BaseException:
            self.withdraw(needs)
            raise

    def withdraw(self, needs) -> None:
        if "ipip_decap" in needs:
            self.decap_down()
        if "l3_gateway" in needs:
            self.gateway_down()


class BackendDecap:
    """Katran's decap (switch/katran_decap_chain.bpf.c, built by xenobench.katran) in front of what
    each backend's interface runs, over each backend node's own transport: the namespace testbed's
    netns nodes and a hosts testbed's SSH nodes alike (its object staged on the node, pins under the
    testbed's bpffs directory there, the displaced program's id kept here in <state_dir>/fabric)."""

    def __init__(self, testbed):
        self.tb = testbed
        self.cfg = testbed.cfg

    @property
    def statedir(self) -> Path:
        return self.cfg.state_dir / "fabric"

    def _pin(self, b) -> str:
        return str(self.tb.bpffs_dir / "fabric" / f"decap-{b.name}")

    def _backends(self):
        for b in self.cfg.backend_nodes():
            yield b, self.tb.node(b.name), b.iface().name

    @staticmethod
    def _attached(node, dev: str) -> tuple[int | None, str | None, int]:
        """(program id, its name, attach mode) of the XDP program on dev, (None, None, 0) if none."""
        links = json.loads(node.run(["ip", "-j", "link", "show", "dev", dev]).stdout or "[]")
        xdp = (links[0] if links else {}).get("xdp") or {}
        prog = xdp.get("prog") or {}
        return prog.get("id"), prog.get("name"), int(xdp.get("mode") or 0)

    def up(self) -> None:
        from .katran import DECAP_CHAIN_PROG, build
        obj = build(self.cfg).decap_chain
        for b, node, dev in self._backends():
            pid, name, mode = self._attached(node, dev)
            if name == DECAP_CHAIN_PROG:
                continue
            pin = self._pin(b)
            staged = node.stage(obj, "katran-decap-chain.bpf.o")
            node.run(["mkdir", "-p", f"{pin}/maps"])
            node.run(["bpftool", "prog", "loadall", staged, f"{pin}/progs", "type", "xdp", "pinmaps", f"{pin}/maps"])
            if pid is not None:
                node.run(["bpftool", "map", "update", "pinned", f"{pin}/maps/xb_next",
                          "key", "hex", "00", "00", "00", "00", "value", "id", str(pid)])
            self.statedir.mkdir(parents=True, exist_ok=True)
            (self.statedir / f"{b.name}.json").write_text(json.dumps({"previous": pid, "mode": mode}))
            node.run(["ip", "-force", "link", "set", "dev", dev, XDP_MODES.get(mode, "xdpdrv"), "pinned",
                      f"{pin}/progs/{DECAP_CHAIN_PROG}"])

    def in_front(self, name: str) -> bool:
        """Put the decap chain back in front of what backend `name`'s interface runs now, when the
        decap is up for it (its state and pins exist) and something replaced the chain (a DNS
        server took the interface over: xenobench.dns). The chain then passes what it decapsulated
        to that program, or to the kernel's stack when there is none. True if it was put back."""
        from .katran import DECAP_CHAIN_PROG
        b = self.cfg.nodes[name]
        node, dev, pin = self.tb.node(name), b.iface().name, self._pin(b)
        state = self.statedir / f"{name}.json"
        if not state.exists():
            return False
        prog = f"{pin}/progs/{DECAP_CHAIN_PROG}"
        try:  # the decap's pins are gone, or the node with them (its namespace deleted): nothing to put back
            if not node.run(["test", "-e", prog], check=False).ok:
                return False
        except NodeError:
            return False
        pid, pname, mode = self._attached(node, dev)
        if pname == DECAP_CHAIN_PROG:
            return False
        prev = json.loads(state.read_text())
        if pid is not None:
            node.run(["bpftool", "map", "update", "pinned", f"{pin}/maps/xb_next",
                      "key", "hex", "00", "00", "00", "00", "value", "id", str(pid)])
        else:  # nothing to chain to: the kernel's stack (a stale entry would run a stopped server)
            node.run(["bpftool", "map", "delete", "pinned", f"{pin}/maps/xb_next", "key", "hex", "00", "00", "00", "00"],
                      check=False)
        mode = mode or prev.get("mode") or 0
        state.write_text(json.dumps({"previous": pid, "mode": mode}))
        node.run(["ip", "-force", "link", "set", "dev", dev, XDP_MODES.get(mode, "xdpdrv"), "pinned", prog])
        return True

    def down(self) -> None:
        from .katran import DECAP_CHAIN_PROG
        for b, node, dev in self._backends():
            state = self.statedir / f"{b.name}.json"
            prev = json.loads(state.read_text()) if state.exists() else {}
            if node.present:  # a torn-down namespace has nothing attached
                if self._attached(node, dev)[1] == DECAP_CHAIN_PROG:
                    mode = XDP_MODES.get(prev.get("mode"), "xdpdrv")
                    pid = prev.get("previous")
                    if pid is not None and node.run(["bpftool", "prog", "show", "id", str(pid)], check=False).ok:
                        node.run(["bpftool", "net", "attach", mode, "id", str(pid), "dev", dev, "overwrite"])
                    else:
                        node.run(["ip", "link", "set", "dev", dev, mode, "off"])
                node.run(["rm", "-rf", self._pin(b)], check=False)
            state.unlink(missing_ok=True)

    def stats(self) -> dict[str, dict[str, int]]:
        """Katran's decap_counters per backend (struct decap_stats: decap_v4, decap_v6, total)."""
        from .agents.bpf import percpu_sum
        out = {}
        for b, node, _ in self._backends():
            st = percpu_sum(Path(self._pin(b)) / "maps" / "decap_counters", "<QQQ",
                            lambda *a, node=node: node.run(["bpftool", *a]).stdout)
            v4, v6, tot = st.get(0, (0, 0, 0))
            out[b.name] = {"decap_v4": v4, "decap_v6": v6, "total": tot}
        return out


def route_value(ifindex: int, mac: str) -> bytes:
    """struct gw_route (switch/l3_gateway.bpf.c)."""
    return struct.pack("<I", ifindex) + _mac(mac) + bytes(2)
