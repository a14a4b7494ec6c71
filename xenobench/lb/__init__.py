"""Load balancers under test, driven alike by experiments and by `xenobench lb ...`.

This module is the one list of LB kinds: the config schema's LB enums (xenobench.config), the
CLI's choices, the figures' labels (xenobench.plots), the build (bpf_dir) and the benchmarks all read
`LBS`. It holds what config and analysis need to know of a kind without loading its driver (label,
how it splits, where its data plane is built); what running it needs is its driver's
(xenobench.lb.<module>, whose `make(testbed) -> LoadBalancer`; xenobench.lb.base).

Adding a load balancer: docs/extending.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..errors import ConfigError

#: the pseudo-kind of the RTT experiments: the client sends straight to the DNS backend
NONE = "none"


@dataclass(frozen=True)
class LBKind:
    name: str
    label: str            # how figures and reports name it
    module: str           # its driver, xenobench.lb.<module>
    reference: bool = False  # a reference line (the testbed's limit), not a load balancer under test
    #: how it picks a backend: "class" (the source's class, so a profile's split is exact) or
    #: "flow hash" (Katran's ring: what each backend gets is measured, never read off a split's caption)
    split_by: str = "class"
    #: it sends what it forwards back out of its ingress port (XDP_TX: Katran), not out of an egress port
    out_of_ingress: bool = False
    #: the top-level folder whose Makefile builds its data plane (scripts/build.sh builds every such
    #: folder; an SSH LB node gets its BPF objects from <bpf_dir>/build); None: built elsewhere
    #: (Katran: from a Katran checkout, xenobench.katran)
    bpf_dir: str | None = None
    #: the BPF objects its agent loads on the LB node (globs under the repository: what `deploy`
    #: ships to an SSH LB node); () for a data plane built on the node (XenoFlow) or elsewhere
    bpf_objects: tuple[str, ...] = ()


LBS: dict[str, LBKind] = {k.name: k for k in (
    LBKind("xenoflow", "XenoFlow", "xenoflow", bpf_dir="lb"),
    LBKind("ebpf", "eBPF/XDP LB", "ebpf", bpf_dir="ebpf_baseline", bpf_objects=("ebpf_baseline/build/lb.bpf.o",)),
    LBKind("katran", "Katran", "katran", split_by="flow hash", out_of_ingress=True),
    LBKind("wire", "wire (no-op, testbed limit)", "wire", reference=True, bpf_dir="switch",
           bpf_objects=("switch/build/wire.bpf.o",)),
)}
KINDS: tuple[str, ...] = tuple(LBS)
#: labels of the kinds that are not measured here but appear in published numbers or as RTT paths
OTHER_LABELS = {NONE: "no LB", "kakao-loopback": "Kakao loopback",
                "kakao-255": "Kakao 255 backends"}


def label(kind: str) -> str:
    """How a figure names an LB kind (an unknown one by its own name)."""
    k = LBS.get(kind)
    return k.label if k else OTHER_LABELS.get(kind, kind)


def by_hash(kind: str) -> bool:
    """Whether the kind splits by flow hash (its split is measured, not set by the profile)."""
    k = LBS.get(kind)
    return bool(k and k.split_by == "flow hash")


def get_lb(kind: str, testbed):
    """The driver of an LB kind on a testbed (a xenobench.lb.base.LoadBalancer)."""
    if kind not in LBS:
        raise ConfigError(f"Failed to select load balancer: unknown kind {kind!r} (known: {', '.join(KINDS)})")
    return importlib.import_module(f"{__name__}.{LBS[kind].module}").make(testbed)


def stop_all(testbed, keep: str | None = None, progress=None) -> list[str]:
    """Stop every LB kind running on the LB node except `keep` (one LB at a time on the node);
    returns the kinds stopped."""
    stopped = []
    for kind in KINDS:
        if kind == keep:
            continue
        lb = get_lb(kind, testbed)
        if lb.running():
            if progress:
                progress(f"stopping {kind} left running")
            lb.stop()
            stopped.append(kind)
    return stopped
