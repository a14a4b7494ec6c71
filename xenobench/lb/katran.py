"""Katran's harness face (facebookincubator/katran's own XDP balancer; agent
xenobench.agents.katran_lb): an XdpControllerLB on the LB node's ingress port that sends by
XDP_TX out of that port (Katran has no second port), IPIP-encapsulated to the real, addressed to
the L3 gateway (katran.gateway_mac).

It needs the testbed to route like a fabric and the backends to decapsulate (`needs`; the
namespace testbed provides both, xenobench.fabric). Its object is built from the located Katran
checkout (xenobench.katran) and staged on the LB node; every backend's address is its node's.
"""

from __future__ import annotations

from .. import katran
from ..errors import ConfigError
from ..fabric import gateway_mac
from .xdp import XdpControllerLB


class KatranLB(XdpControllerLB):
    kind = "katran"
    agent = "xenobench.agents.katran_lb"
    needs = ("l3_gateway", "ipip_decap")
    _obj: str = ""

    def ports(self):
        lb, ing, _ = super().ports()
        return lb, ing, None  # XDP_TX out of the ingress port, as Katran is deployed

    def reals(self) -> list[str]:
        """NAME=ADDRESS of every node with an address: a backend's real is its node's address."""
        out = [f"{n.name}={n.iface().addr}" for n in self.cfg.nodes.values() if n.iface().addr]
        if not out:
            raise ConfigError(f"Failed to start katran: no node in {self.cfg.path} has an address "
                              "(nodes.<name>.interfaces[].ip) for Katran to encapsulate to")
        return out

    def extra_args(self, ingress, egress) -> list[str]:
        return ["--obj", self._obj, "--vip", self.cfg.service.vip, "--port", str(self.cfg.service.port),
                "--gateway-mac", gateway_mac(self.cfg),
                *[a for r in self.reals() for a in ("--real", r)]]

    def start(self, backends=None, *, dry_run=False, generic=False, **opts) -> dict:
        b = katran.planned(self.cfg) if dry_run else katran.build(self.cfg)
        self._obj = self.node.stage(b.balancer, "katran-balancer.bpf.o", copy=not dry_run)
        return super().start(backends, dry_run=dry_run, generic=generic, **opts)


def make(testbed) -> KatranLB:
    return KatranLB(testbed)
