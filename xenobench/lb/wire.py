"""The wire reference LB's harness face (switch/wire.bpf.c, agent xenobench.agents.wire_lb).

"wire" forwards p0 → p1 with one lookup and no parsing, to the backend the LBs would pick (the same
backends file, the same class split: the source address's last byte, switch/wire.bpf.c): the rate
it reaches is the testbed's limit for the same traffic to the same backends, the line the pps and
compare figures draw the load balancers against.
"""

from __future__ import annotations

from .xdp import XdpControllerLB


class WireLB(XdpControllerLB):
    kind = "wire"
    agent = "xenobench.agents.wire_lb"
    needs_egress = True
    no_update = ("the wire has no backend set to change (it forwards every frame to the first backend "
                 "of its file, with no lookup)")


def make(testbed) -> WireLB:
    return WireLB(testbed)
