"""mylb's harness face: an XdpControllerLB (xenobench.lb.xdp) naming the kind and the agent, which
passes the agent the object built beside it. `make(testbed)` is what xenobench.lb.get_lb calls. What
its agent has, the driver has: a runtime update (SIGHUP) and the answer to which backend a flow reaches
(its agent's route)."""

from __future__ import annotations

from xenobench.errors import ConfigError
from xenobench.lb.xdp import XdpControllerLB

from .agent import OBJ


class MyLB(XdpControllerLB):
    kind = "mylb"
    agent = "xenobench_mylb.agent"
    needs_egress = True  # forwards p0 -> p1

    def extra_args(self, ingress, egress) -> list[str]:
        return ["--obj", self.node.stage(OBJ, "mylb.bpf.o", copy=False)]

    def start(self, backends=None, *, dry_run=False, **opts) -> dict:
        if not OBJ.is_file():
            raise ConfigError(f"Failed to start mylb: {OBJ} is not built (run `make` in the package's "
                              "source folder, examples/xenobench-mylb)")
        if not dry_run:
            self.node.stage(OBJ, "mylb.bpf.o")  # a remote LB node gets a copy
        return super().start(backends, dry_run=dry_run, **opts)


def make(testbed) -> MyLB:
    return MyLB(testbed)
