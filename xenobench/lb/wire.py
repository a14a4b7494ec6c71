"""The wire reference LB's harness face: starts its controller (xenobench.agents.wire_lb, which
loads switch/build/wire.bpf.o) on the LB node, stops it, and reads its counters there.

"wire" forwards p0 → p1 with no lookup (every frame to the backends file's first backend): the
rate it reaches is the testbed's physical limit, the line the pps and compare figures draw the
load balancers against.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..agents.wire_lb import read_stats
from ..backends import load_backends
from ..errors import ConfigError, NodeError
from .base import LoadBalancer

TAG = "lb-wire"


class WireLB(LoadBalancer):
    kind = "wire"

    @property
    def node(self):
        return self.testbed.node(self.cfg.role("lb").name)

    @property
    def pindir(self) -> Path:
        return self.testbed.bpffs_dir / "wire"

    @property
    def statedir(self) -> Path:
        return Path(self.node.path("wire"))

    def argv(self, staged: str, generic: bool) -> list[str]:
        lb = self.cfg.role("lb")
        ing, eg = lb.lb_port("ingress") or lb.iface(), lb.lb_port("egress")
        if eg is None:
            raise ConfigError(f"Failed to start wire on {lb.name}: it needs an egress port "
                              f"(nodes.{lb.name}.interfaces[].lb_port: egress in {self.cfg.path})")
        return self.node.python_argv(
            "xenobench.agents.wire_lb", "run", "--backends", staged, "--ingress", ing.name, "--egress", eg.name,
            "--src-mac", eg.mac, "--pin-dir", str(self.pindir), "--state-dir", str(self.statedir),
            # the eBPF baseline's stats interval: the wire is its no-lookup sibling
            "--interval", str(self.cfg.section("ebpf")["stats_interval_s"]),
            *(["--generic"] if generic else []))

    def start(self, backends=None, *, dry_run=False, generic=False, **opts) -> dict:
        bfile = self.backends_file(backends)
        node = self.node
        name = f"wire-backends{Path(bfile).suffix}"
        argv = self.argv(node.stage(bfile, name, copy=False), generic)
        if dry_run:
            return {"commands": [" ".join(argv)]}
        load_backends(bfile)  # a bad file fails here, before anything runs on the node
        if node.running(TAG):
            raise NodeError(f"Failed to start wire on {node.name}: already running; `xenobench lb stop --lb wire` first")
        node.stage(bfile, name)
        return self._start_controller(node, TAG, argv, generic)

    def stop(self) -> bool:
        return self.node.stop(TAG, timeout=5)

    def running(self) -> bool:
        return self.node.running(TAG)

    def stats(self) -> dict:
        node = self.node
        if not node.run(["test", "-d", str(self.pindir / "maps")], check=False).ok:
            raise NodeError(f"Failed to read wire stats on {node.name}: not running (no pinned maps under "
                            f"{self.pindir})")
        mode = node.read_text(str(self.statedir / "mode")).strip() or "native"
        names = node.run(["ls", str(self.statedir)], check=False).stdout.split()
        copy = next((n for n in names if n.startswith("backends.")), None)
        local = Path(tempfile.mkdtemp()) / (copy or "backends.json")
        try:
            if copy:
                local.write_text(node.read_text(str(self.statedir / copy)))
            else:
                shutil.copyfile(self.backends_file(None), local)
            return read_stats(self.pindir, local, mode, run=lambda *a: node.run(["bpftool", *a]).stdout)
        finally:
            shutil.rmtree(local.parent, ignore_errors=True)


def make(testbed) -> WireLB:
    return WireLB(testbed)
