"""The eBPF baseline's harness face: starts its controller (xenobench.agents.ebpf_lb, which loads
ebpf_baseline/build/lb.bpf.o) on the LB node, stops it, and reads its counters there.

Loader choice: Python driving bpftool, not a C libbpf loader (see xenobench.agents.bpf): one
implementation of the backends file instead of a second one in C; the controller runs inside the
LB node's namespace, so the devmap's ifindex resolves there.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..agents.ebpf_lb import read_stats
from ..backends import load_backends, write_canonical
from ..errors import NodeError
from .base import LoadBalancer

TAG = "lb-ebpf"


class EbpfLB(LoadBalancer):
    kind = "ebpf"

    @property
    def pindir(self) -> Path:
        return self.testbed.bpffs_dir / "ebpf"

    @property
    def statedir(self) -> Path:
        """Where the controller keeps its mode and backends copy, on the LB node."""
        return Path(self.testbed.node(self.cfg.role("lb").name).path("ebpf"))

    def _ports(self):
        lb = self.cfg.role("lb")
        ing = lb.lb_port("ingress") or lb.iface()
        eg = lb.lb_port("egress")
        return lb, ing, eg

    def start(self, backends=None, *, dry_run=False, generic=False, **opts) -> dict:
        lb, ing, eg = self._ports()
        # the controller gets the canonical JSON of the file (validated here; JSON or YAML), as XenoFlow does
        bfile = write_canonical(self.backends_file(backends), self.cfg.state_dir / "canonical-backends" / "ebpf")
        sec = self.cfg.section("ebpf")
        node = self.testbed.node(lb.name)
        # the controller reads the file on the LB node (a remote node gets a copy)
        staged = node.stage(bfile, f"ebpf-backends{Path(bfile).suffix}", copy=False)
        argv = node.python_argv(
            "xenobench.agents.ebpf_lb", "run", "--backends", staged, "--ingress", ing.name,
            "--egress-mode", "redirect" if eg else "tx", *(["--egress", eg.name] if eg else []),
            "--src-mac", (eg or ing).mac, "--vip", self.cfg.service.vip, "--port", str(self.cfg.service.port),
            "--policy", sec["policy"], "--pin-dir", str(self.pindir),
            "--state-dir", str(self.statedir),
            "--interval", str(sec["stats_interval_s"]), *(["--generic"] if generic else []))
        if dry_run:
            return {"commands": [" ".join(argv)]}
        load_backends(bfile)  # a bad file fails here, before anything runs on the node
        if node.running(TAG):
            raise NodeError(f"Failed to start ebpf on {lb.name}:{ing.name}: already running; "
                            "`xenobench lb stop --lb ebpf` first")
        node.stage(bfile, f"ebpf-backends{Path(bfile).suffix}")
        return self._start_controller(node, TAG, argv, generic)

    def stop(self) -> bool:
        lb, ing, _ = self._ports()
        return self.testbed.node(lb.name).stop(TAG, timeout=5)

    def running(self) -> bool:
        return self.testbed.node(self.cfg.role("lb").name).running(TAG)

    def stats(self) -> dict:
        """Read on the LB node (bpftool there), so it works over either transport."""
        node = self.testbed.node(self.cfg.role("lb").name)
        if not node.run(["test", "-d", str(self.pindir / "maps")], check=False).ok:
            raise NodeError(f"Failed to read ebpf stats on {node.name}: not running (no pinned maps under "
                            f"{self.pindir})")
        mode = node.read_text(str(self.statedir / "mode")).strip() or "native"
        # the backends file the running controller loaded (it keeps a copy in its state dir)
        names = node.run(["ls", str(self.statedir)], check=False).stdout.split()
        copy = next((n for n in names if n.startswith("backends.")), None)
        local = Path(tempfile.mkdtemp()) / (copy or "backends.json")
        if copy:
            local.write_text(node.read_text(str(self.statedir / copy)))
        else:
            shutil.copyfile(self.backends_file(None), local)
        try:
            return read_stats(self.pindir, local, mode,
                              run=lambda *a: node.run(["bpftool", *a]).stdout)
        finally:
            shutil.rmtree(local.parent, ignore_errors=True)


def make(testbed) -> EbpfLB:
    return EbpfLB(testbed)

