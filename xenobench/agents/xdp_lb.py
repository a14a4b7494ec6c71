"""One agent shape for every load balancer that is an XDP program with a controller (the eBPF
baseline, the wire reference, ...), run on the LB node as `python -m xenobench.agents.<kind>_lb run
...` inside the node's namespace, so a devmap's ifindex resolves there.

An LB supplies an `XdpLbAgent`: its BPF object and program, the options only it has, how it fills
its maps from the validated backends file (`configure`) and how it reads its counters into the
shape `lb stats` prints for every LB (`read_stats`). `main` gives every such agent the same command
line (--backends, --ingress, --egress, --src-mac, --state-dir, and xenobench.agents.bpf's --pin-dir,
--interval, --generic, --no-attach) and the controller life cycle of xenobench.agents.bpf.run_controller.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..backends import CLASSES, WeightRule, load_backends
from ..errors import XenobenchError
from .bpf import controller_parser, ip_link, keep_lb_state, load_pinned, run_controller


def running_file(a: argparse.Namespace) -> Path:
    """The backends file the LB runs on: the state dir's copy (keep_lb_state), which a refused
    update leaves alone, or --backends before the copy is made."""
    return next(Path(a.state_dir).glob("backends.*"), Path(a.backends))


@dataclass(frozen=True)
class XdpLbAgent:
    name: str                 # "the eBPF LB": how messages name it
    prog_name: str            # `python -m xenobench.agents.<module>`
    obj: Path | None          # the built BPF object; None: given by --obj (built outside this repository)
    prog: str                 # its XDP program's name
    build_hint: str           # the command that builds obj
    #: (pindir, backends file, parsed args, egress ifindex or None) -> what the "started" line reports
    configure: Callable[[Path, Path, argparse.Namespace, int | None], dict]
    #: (pindir, backends file, mode, run) -> the common stats shape
    read_stats: Callable[..., dict]
    egress_required: bool = False
    add_args: Callable[[argparse.ArgumentParser], None] | None = None
    description: str = ""
    #: a runtime change (SIGHUP: --backends re-read): (pindir, the backends file running now,
    #: the new one, parsed args) -> what the "updated" line reports; it validates the new file
    #: before it writes a map and raises on what it refuses. None: the LB has no update path.
    update: Callable[[Path, Path, Path, argparse.Namespace], dict] | None = None
    #: how it reads the backends' weights (xenobench.backends: CLASSES, or RING for Katran)
    weights: WeightRule = CLASSES
    #: which backend a flow reaches, by the rule its program follows: (the backend set as its weight
    #: rule reads it, a flow with .src .sport .dst .dport .proto) -> the backend's name. The harness
    #: asks it to send a flow to a chosen backend (xenobench.lb.base.LoadBalancer.backend_of). None:
    #: the class rule when its kind splits by class, else the LB cannot say (refused by experiments
    #: that need it)
    route: Callable[[object, object], str | None] | None = None
    #: the per-CPU array whose entries count what it forwarded (packets first, "<QQ"), and how many
    #: of its keys from 0 do (None: all): one map dump for the frames it forwarded so far, where the
    #: interleaved designs read it around every block (read_stats reads every map and the file)
    forwarded_map: str | None = None
    forwarded_keys: int | None = None

    def parser(self) -> argparse.ArgumentParser:
        ap, r = controller_parser(f"python -m {self.prog_name}", self.description or f"{self.name} controller", 1.0)
        r.add_argument("--backends", required=True, help="the backends file (canonical JSON from the harness)")
        r.add_argument("--ingress", required=True, help="interface the program attaches to")
        r.add_argument("--egress", required=self.egress_required,
                       help="egress port (redirect); " + ("required" if self.egress_required else
                                                          "without it frames leave by XDP_TX out of --ingress"))
        r.add_argument("--src-mac", required=True, help="source MAC written into forwarded frames")
        r.add_argument("--state-dir", required=True, help="where the mode and a copy of the backends file go")
        r.add_argument("--no-attach", dest="attach", action="store_false",
                       help="load, pin and fill the maps but attach nothing: the pinned program (prog_pin in the "
                            "started line) is attached by someone else (xenobench.xdpswitch); at exit it is "
                            "detached only if it is still attached")
        if self.obj is None:
            r.add_argument("--obj", required=True, help="the built BPF object to load")
        if self.add_args:
            self.add_args(r)
        return ap

    def run(self, a: argparse.Namespace) -> int:
        pindir = Path(a.pin_dir)
        mode = "generic" if a.generic else "native"

        def setup() -> dict:
            ifindex = None
            if a.egress:
                link = ip_link(a.egress)
                if link is None:
                    raise XenobenchError(f"Failed to find egress interface {a.egress}: no such device "
                                         f"(give an interface of this node to --egress)")
                ifindex = link["ifindex"]
            load_backends(a.backends, self.weights)  # validate before anything is loaded
            load_pinned(Path(a.obj) if self.obj is None else self.obj, pindir, self.build_hint)
            info = self.configure(pindir, Path(a.backends), a, ifindex)
            return {"ingress": a.ingress, **({"egress": a.egress} if a.egress else {}), "mode": mode, **info}

        return run_controller(what=self.name, iface=a.ingress, pindir=pindir, prog=self.prog, generic=a.generic,
                              setup=setup, read_stats=lambda: self.read_stats(pindir, running_file(a), mode),
                              interval=a.interval,
                              after_attach=lambda: keep_lb_state(a.state_dir, mode, a.backends),
                              on_update=(lambda: self.apply_update(pindir, a, mode)) if self.update else None,
                              attach=a.attach)

    def apply_update(self, pindir: Path, a: argparse.Namespace, mode: str) -> dict:
        """SIGHUP: the file at --backends (rewritten by the harness) against the running one (the
        state dir's copy); on success the copy becomes the new file, so stats name its backends."""
        info = self.update(pindir, running_file(a), Path(a.backends), a)
        keep_lb_state(a.state_dir, mode, a.backends)
        return info

    def main(self, argv=None) -> int:
        return self.run(self.parser().parse_args(argv))
