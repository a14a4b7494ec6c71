"""What every testbed offers, whatever its kind: its nodes by name and by role, bring-up and
teardown, status and connectivity proofs, and the hooks an experiment calls (CPU placement, the
backend sink) that only some kinds act on."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from ..config import Config, NodeConfig
from ..errors import NodeError, TestbedError, XenobenchError
from ..fabric import BackendDecap
from ..lb import unavailable
from ..nodes import Node, make_node
from ..shipping import purge as purge_deployed
from ..traffic import GENERATORS, check_generator, generator_summary
from .bpffs import BPFFS

log = logging.getLogger(__name__)


class Testbed:
    """Nodes of a configuration, by name and by role. Subclasses add bring-up/teardown."""

    __test__ = False
    kind = ""  # testbed.kind (xenobench.testbed.KINDS)

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
        return {"kind": self.kind, "changed": False}

    def cpu_placement(self) -> dict | None:
        """Where the generator and the DUT's packet processing run (None: not placed here)."""
        return None

    def place_dut(self, mode: str) -> None:
        """How the LB's packet processing is scheduled ("threaded" for rates, "inline" for
        latency; NamespaceTestbed.place_dut); a hardware testbed's is the hardware's: no-op."""

    def restore_state(self) -> list[str]:
        """Put back what a harness killed mid-point (SIGKILL: no `finally` runs) may have left,
        read from the testbed itself rather than from its records: what any local generator left
        (Generator.leftover: xdpgen's or trafgen's process, trafgen's pacing qdisc), whichever
        generator the config names now, since it pollutes every trial (only this testbed's, never
        another prefix's). NamespaceTestbed adds its NAPI threads' scheduling. Returns what was put
        back, one line each; a point's set-up calls it first and names it in its progress line."""
        return [line for g in GENERATORS.values() if g.leftover is not None for line in g.leftover(self)]

    def decap_in_front(self, node: str) -> bool:
        """A service (a DNS server) attached or removed an XDP program on a backend's interface:
        an LB's decap that is up there (Katran's, LoadBalancer.needs "ipip_decap") goes back in
        front of it (xenobench.fabric.BackendDecap.in_front). True if it was put back."""
        return BackendDecap(self).in_front(node)

    def release_backend_sink(self, node: str) -> None:
        """A service (a DNS server) takes a backend's interface over; no-op without a sink."""

    def restore_backend_sink(self, node: str) -> None:
        """Give the interface back to the backend sink after release_backend_sink."""

    def arrival_recorder(self):
        """Where the backends record each generator frame's arrival time on the harness clock
        (start_arrivals(bucket_ns) -> t0_ns, stop_arrivals() -> [switch.Arrival]): the namespace
        testbed's sink. None here: real backends record nothing, and a caller samples their
        receive counters instead (xenobench.measure.update: ethtool rx_packets read back to back, a
        resolution of one read, ~10 ms over SSH)."""
        return None

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

    def stop_processes(self) -> None:
        """Stop every recorded background process of every node, and close the connections."""
        for n in self.nodes():
            try:
                n.stop_all()
            except NodeError as e:
                log.warning("%s", e)
            n.close()

    def remove_pins(self) -> None:
        """Remove this testbed's pin directory (bpffs_dir: its prefix and name) on every node whose
        login is root, once the agents that pinned there have stopped. On a login that is not root
        (the DPU's) the harness has no rights there: only XenoFlow's DOCA Flow emulation pins there,
        under XenoFlow's own sudo rule, and removes its pins when XenoFlow stops (on DOCA nothing is
        pinned). A node that cannot be reached is named in the log, not fatal: `down` goes on with
        the others."""
        for n in self.nodes():
            if not n.root:
                continue
            try:
                n.run(["rm", "-rf", "--", str(self.bpffs_dir)], check=False)
            except NodeError as e:
                log.warning("%s", e)
            n.close()

    def down(self, *, purge: bool = False) -> dict:
        """Stop what the harness started on the nodes and remove their pins (remove_pins);
        `purge`: remove the state directory too (logs, process records) and what `xenobench
        deploy` placed on the nodes."""
        self.stop_processes()
        self.remove_pins()  # an agent killed -9 (or cut off by a lost connection) left its pins
        purged = []
        if purge:
            purged = purge_deployed(self)
            self.stop_processes()  # closes the connections purge opened
            shutil.rmtree(self.cfg.state_dir, ignore_errors=True)
        return {"removed": [], "purged": purged}

    def status(self) -> dict:
        return {"testbed": self.cfg.name, "kind": self.kind, "generator": generator_summary(self),
                "nodes": {n.name: {"role": n.ncfg.role, "transport": n.ncfg.transport,
                                   "processes": [h.tag for h in n.handles() if n.running(h.tag)]}
                          for n in self.nodes()}}

    def check(self) -> list[tuple[str, bool, str]]:
        """Connectivity proofs, (description, ok, detail) rows: client → backends, VIP → backend MACs,
        Katran's IPIP path where it runs, and the generator: how it sends and that it does."""
        rows = []
        client = self.node_for_role("client")
        for b in self.cfg.backend_nodes():
            ip = b.iface().addr
            r = client.run(["ping", "-c", "1", "-W", "2", ip], check=False, timeout=10)
            rows.append((f"client reaches {b.name} ({ip}) directly", r.ok,
                         (r.stdout.strip().splitlines() or [""])[-1] if r.ok else r.stderr.strip() or r.stdout.strip()))
        for b in self.cfg.backend_nodes():
            rows.append(self._check_vip_to_backend(client, b))
        if uses_lb(self.cfg, "katran") and not unavailable("katran", self.cfg):  # a left-out Katran: not probed
            rows += self.check_ipip()
        return rows + check_generator(self)

    def _check_vip_to_backend(self, client: Node, b: NodeConfig) -> tuple[str, bool, str]:
        """Send one UDP datagram to the VIP addressed to the backend's MAC; it must arrive there."""
        ci = self.cfg.role("client").iface()
        return self._check_arrives(
            client, b, f"UDP to VIP {self.cfg.service.vip} with {b.name}'s MAC arrives at {b.name}",
            ["--iface", ci.name, "--src-mac", ci.mac, "--dst-mac", b.iface().mac, "--src-ip", ci.addr])

    def check_ipip(self) -> list[tuple[str, bool, str]]:
        """Katran's path (an encapsulating LB): from the LB node's ingress port, a UDP datagram to the
        VIP inside IPIP to each real, sent to the L3 gateway's MAC (katran.gateway_mac), must arrive
        at that real decapsulated. What Katran needs around it (the gateway's routing, the backends'
        decap: Testbed.provide) is set up for the check and withdrawn after, unless Katran runs."""
        from ..fabric import gateway_mac
        from ..lb import get_lb
        lb_node, katran = self.cfg.role("lb"), get_lb("katran", self)
        port = lb_node.lb_port("ingress") or lb_node.iface()
        sender = self.node(lb_node.name)
        running = katran.running()
        rows = []
        try:
            if not running:
                katran.provide_needs()
            for b in self.cfg.backend_nodes():
                rows.append(self._check_arrives(
                    sender, b, f"IPIP to {b.name} ({b.iface().addr}) via gateway {gateway_mac(self.cfg)} arrives "
                               f"at {b.name} decapsulated",
                    ["--iface", port.name, "--src-mac", port.mac, "--dst-mac", gateway_mac(self.cfg),
                     "--src-ip", self.cfg.role("client").iface().addr, "--ipip-to", b.iface().addr]))
        except XenobenchError as e:
            rows.append(("IPIP to every real via the gateway (Katran's path)", False, str(e)))
        finally:
            if not running:
                katran.withdraw_needs()
        return rows

    def _check_arrives(self, sender: Node, b: NodeConfig, desc: str, send: list[str]) -> tuple[str, bool, str]:
        """udpcheck recv on backend b, udpcheck send on sender with `send`'s arguments: a token
        datagram to the VIP must arrive at b."""
        backend = self.node(b.name)
        port = 9
        token = f"xenobench-check-{b.name}-{time.time_ns()}"
        try:  # sent once the receiver's socket is bound (after a fixed wait it could arrive before the bind)
            recv = backend.start_until("check-recv", backend.python_argv(
                "xenobench.agents.udpcheck", "recv", "--bind", self.cfg.service.vip, "--iface", b.iface().name,
                "--port", str(port), "--expect", token, "--timeout", "5"),
                "listening on", what=f"the check's UDP receiver ({b.iface().name})")
        except NodeError as e:
            return desc, False, str(e)
        try:
            sender.run(sender.python_argv(
                "xenobench.agents.udpcheck", "send", *send, "--dst-ip", self.cfg.service.vip,
                "--port", str(port), "--payload", token), timeout=10)
            deadline = time.monotonic() + 5
            while backend.running("check-recv") and time.monotonic() < deadline:
                time.sleep(0.05)
            out = backend.read_log(recv).strip()
            last = out.splitlines()[-1] if out else "nothing received"
            return desc, last.startswith("received "), last
        finally:
            backend.stop("check-recv")


def uses_lb(cfg, kind: str) -> bool:
    """Whether any experiment of the config runs the LB kind (its lbs lists or its lb)."""
    for sec in cfg.section("experiments").values():
        if isinstance(sec, dict) and (sec.get("lb") == kind or kind in (sec.get("lbs") or ())):
            return True
    return False
