"""Katran's harness face (facebookincubator/katran's own XDP balancer; agent
xenobench.agents.katran_lb): an XdpControllerLB on the LB node's ingress port that sends by
XDP_TX out of that port (Katran has no second port), IPIP-encapsulated to the real, addressed to
the L3 gateway (katran.gateway_mac).

It needs the testbed to route like a fabric and the backends to decapsulate (`needs`; the
namespace testbed provides both, xenobench.fabric). Its object is built from the located Katran
checkout (xenobench.katran) and staged on the LB node; every backend's address is its node's. Its
backends file's weights are read by the RING rule (xenobench.backends): any positive integers, which
its agent turns into Katran's Maglev ring.
"""

from __future__ import annotations

from .. import katran
from ..backends import RING
from ..config import section_with_defaults
from ..errors import ConfigError
from ..fabric import gateway_mac
from .xdp import XdpControllerLB


def unavailable(cfg) -> str | None:
    """Why Katran cannot run on this config's testbed (xenobench.lb.unavailable), None when it can.
    Katran hands every frame it balances, IPIP-encapsulated, to one MAC, the default gateway's: it
    leaves routing to the first router (facebookincubator/katran README.md, "Environment
    requirements" 2: an L3 topology; EXAMPLE.md: "MAC address of default gateway"; commit 19f08fe).
    The namespace testbed routes those frames itself (xenobench.fabric); on a `hosts` testbed it
    takes the site's router, so katran.gateway_mac must be that router's MAC, not the schema's
    placeholder (the namespace fabric's). A switch with static MAC bindings (L2, as the thesis
    testbed's MSN2100) has no such hop."""
    if cfg.section("testbed")["kind"] != "hosts":
        return None
    placeholder = section_with_defaults("katran", {})["gateway_mac"]
    if gateway_mac(cfg).lower() != placeholder.lower():
        return None  # a real router's MAC: `xenobench deploy` proves the IPIP path through it (check_ipip)
    return (f"the testbed has no L3 hop: Katran sends every frame IPIP-encapsulated to the default gateway's MAC "
            f"(its README: an L3 topology) and katran.gateway_mac in {cfg.path} is the placeholder {placeholder} "
            "(fix: route the backends' subnet through a router, e.g. the switch in L3 mode, and set "
            "katran.gateway_mac to that router's MAC in the subnet: `ip neigh` on a backend shows it)")


def _addresses(cfg) -> dict[str, str]:
    return {n.name: n.iface().addr for n in cfg.nodes.values() if n.iface().addr}


def node_reals(cfg) -> dict[str, str]:
    """NAME -> IPv4 address of every node with an address: a backend's real is its node's address."""
    out = _addresses(cfg)
    if not out:
        raise ConfigError(f"Failed to start katran: no node in {cfg.path} has an address "
                          "(nodes.<name>.interfaces[].ip) for Katran to encapsulate to")
    return out


def ring_plan(cfg, backends_file=None) -> tuple[list[dict], list[int]] | None:
    """Katran's reals (name, num, address, weight, share of the ring) and its Maglev ring for the
    backends file (default service.backends), as its agent fills them (xenobench.agents.katran_lb.plan);
    None when a backend has no node address (Katran could not run with that file)."""
    from ..agents.katran_lb import plan
    from ..backends import RING, load_backends
    f = backends_file or cfg.service.backends
    if f is None:
        return None
    reals = _addresses(cfg)
    if any(b.name not in reals for b in load_backends(f, RING).backends):
        return None
    return plan(f, reals)


def flow_real(plan: tuple[list[dict], list[int]], src: str, sport: int, dport: int) -> str:
    """The backend (by name) Katran sends an IPv4 UDP/TCP flow to the VIP to: its ring's slot for the
    flow's hash (balancer.bpf.c get_packet_dst; xenobench.agents.maglev.flow_slot)."""
    from ..agents.maglev import flow_slot
    rs, ring = plan
    num = ring[flow_slot(src, sport, dport)]
    return next(r["name"] for r in rs if r["num"] == num)


class KatranLB(XdpControllerLB):
    kind = "katran"
    agent = "xenobench.agents.katran_lb"
    #: any positive weights, as Katran takes them (xenobench.backends RING)
    weights = RING
    needs = ("l3_gateway", "ipip_decap")
    _obj: str = ""
    #: a change rewrites the ring slots whose real changed (katran_lb.update_reals)
    install_unit = "ring slot"
    update_entries_key = "ring_slots_changed"
    update_entry_unit = "one slot of its Maglev ring rewritten in place (ch_rings), per slot whose real changed"

    def ports(self):
        lb, ing, _ = super().ports()
        return lb, ing, None  # XDP_TX out of the ingress port, as Katran is deployed

    def reals(self) -> list[str]:
        """NAME=ADDRESS of every node with an address (node_reals)."""
        return [f"{name}={addr}" for name, addr in node_reals(self.cfg).items()]

    def extra_args(self, ingress, egress) -> list[str]:
        return ["--obj", self._obj, "--vip", self.cfg.service.vip, "--port", str(self.cfg.service.port),
                "--gateway-mac", gateway_mac(self.cfg),
                *[a for r in self.reals() for a in ("--real", r)]]

    _backends = None

    def backend_of(self, flow, backends) -> str | None:
        """Its Maglev ring's slot for the flow's hash (balancer.bpf.c get_packet_dst), the ring its
        agent builds from `backends` and the nodes' addresses; None when a backend has no address."""
        reals = _addresses(self.cfg)
        if any(b.name not in reals for b in backends.backends):
            return None
        key = tuple((b.name, reals[b.name], b.weight) for b in backends.backends)
        if self._ring is None or self._ring[0] != key:  # the ring of this set, built once
            from ..agents import maglev
            nums, ring = maglev.reals_ring([(addr, w) for _, addr, w in key])
            self._ring = (key, ([{"name": n, "num": num} for (n, _, _), num in zip(key, nums)], ring))
        return flow_real(self._ring[1], flow.src, flow.sport, flow.dport)

    _ring = None

    def split_record(self, before: dict | None, after: dict | None) -> dict | None:
        """The measured split (LoadBalancer.split_record) beside each backend's share of the ring
        (what many flows approach; a few flows, like a background profile's, land where their hashes
        fall)."""
        rec = super().split_record(before, after)
        if rec is None:
            return None
        plan = ring_plan(self.cfg, self._backends)
        return {**rec, "ring_share": {r["name"]: round(r["share"], 4) for r in plan[0]} if plan else None}

    def start(self, backends=None, *, dry_run=False, generic=False, **opts) -> dict:
        self._backends = self.backends_file(backends)
        b = katran.planned(self.cfg) if dry_run else katran.build(self.cfg)
        self._obj = self.node.stage(b.balancer, "katran-balancer.bpf.o", copy=not dry_run)
        return super().start(backends, dry_run=dry_run, generic=generic, **opts)


def make(testbed) -> KatranLB:
    return KatranLB(testbed)
