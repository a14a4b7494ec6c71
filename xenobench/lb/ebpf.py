"""The eBPF baseline's harness face (ebpf_baseline/, agent xenobench.agents.ebpf_lb): an
XdpControllerLB that adds the service (VIP, port) and the policy for non-service frames.

Loader choice: Python driving bpftool, not a C libbpf loader (see xenobench.agents.bpf): one
implementation of the backends file instead of a second one in C.
"""

from __future__ import annotations

from .xdp import XdpControllerLB


class EbpfLB(XdpControllerLB):
    kind = "ebpf"
    agent = "xenobench.agents.ebpf_lb"

    def extra_args(self, ingress, egress) -> list[str]:
        return ["--vip", self.cfg.service.vip, "--port", str(self.cfg.service.port),
                "--policy", self.cfg.section("ebpf")["policy"]]


def make(testbed) -> EbpfLB:
    return EbpfLB(testbed)
