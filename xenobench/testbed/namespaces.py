"""Kind `namespaces` (config/local.yaml, the embedded default): the thesis topology built in
network namespaces on this machine (topology.py), with the switch's fast path and the backends'
sink (switch.py) and the LB's CPU placement (napi.py). What was created is recorded before it is
created, per prefix, so `down` with any config on the prefix cleans up after a crashed or killed
harness too.

The nodes are reached by their own transport (nodes.<name>.transport): nothing here assumes
`netns`, so a testbed whose nodes are these namespaces reached over an sshd in each is this class
with the sshds started in `_build` and its nodes' transport set to ssh.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from .base import Testbed
from .bpffs import ensure_bpffs
from .napi import NapiPlacement
from .switch import BackendSink, SwitchFastpath
from .topology import NamespaceTopology, existing_namespaces, ip

log = logging.getLogger(__name__)


class NamespaceTestbed(Testbed):
    """The embedded default: the thesis topology in network namespaces on this machine."""

    kind = "namespaces"
    services = ("l3_gateway", "ipip_decap")  # xenobench.fabric

    def provide(self, needs: tuple[str, ...], lb_kind: str) -> None:
        super().provide(needs, lb_kind)
        from ..fabric import NamespaceFabric
        NamespaceFabric(self).provide(needs)

    def withdraw(self, needs: tuple[str, ...], lb_kind: str) -> None:
        from ..fabric import NamespaceFabric
        NamespaceFabric(self).withdraw(needs)

    def __init__(self, cfg):
        super().__init__(cfg)
        self.topology = NamespaceTopology(cfg, self.bpffs_dir)
        self.fastpath = SwitchFastpath(self.topology, self.bpffs_dir / "switch")
        self.sink = BackendSink(self.topology, self.bpffs_dir / "backend-sink")
        self.napi = NapiPlacement(self.topology)

    # --- names (topology.py owns them) -------------------------------------------------------------
    @property
    def switch_ns(self) -> str:
        return self.topology.switch_ns

    def namespaces(self) -> list[str]:
        return self.topology.namespaces()

    def switch_port(self, node: str, iface: str) -> str:
        return self.topology.switch_port(node, iface)

    @property
    def fastpath_pindir(self) -> Path:
        return self.fastpath.pindir

    @property
    def sink_pindir(self) -> Path:
        return self.sink.pindir

    @staticmethod
    def existing_namespaces() -> set[str]:
        return existing_namespaces()

    # --- bring-up and teardown ---------------------------------------------------------------------
    def is_up(self) -> bool:
        return self.topology.is_up()

    def up(self) -> dict:
        if self.is_up():
            return {"kind": self.kind, "changed": False, "namespaces": self.namespaces()}
        t0 = time.monotonic()
        self.down()  # a half-built testbed from a crash, or another config's on this prefix: start from nothing
        self.topology.start_record(kind=self.kind, bpffs_mount=ensure_bpffs())
        try:
            self._build()
        except Exception:
            log.error("bring-up failed; tearing down what was created")
            self.down()
            raise
        self.topology.write_record(status="up")
        return {"kind": self.kind, "changed": True, "namespaces": self.namespaces(),
                "seconds": round(time.monotonic() - t0, 2)}

    def _build(self) -> None:
        self.topology.build()
        tb = self.cfg.section("testbed")
        if tb["switch_fastpath"]:
            self.fastpath.attach()
        if tb["backend_sink"]:
            self.sink.load()
            for b in self.cfg.backend_nodes():
                self.restore_backend_sink(b.name)
        self.place_dut("threaded")

    def down(self, *, purge: bool = False) -> dict:
        """Remove everything the testbed of this prefix created, whichever config built it:
        processes (recorded ones gracefully, then anything still inside the namespaces),
        namespaces, pins, the bpffs mount it made; `purge`: the state directories too."""
        self.stop_processes()
        return {"removed": self.topology.remove(purge=purge)}

    # --- the backends' sink --------------------------------------------------------------------------
    def _has_sink(self, node: str) -> bool:
        return (self.cfg.nodes[node].role in ("backend", "dns_backend")
                and bool(self.cfg.section("testbed")["backend_sink"]))

    def release_backend_sink(self, node: str) -> None:
        if self.is_up() and self._has_sink(node):
            self.sink.set_link(node, False)

    def restore_backend_sink(self, node: str) -> None:
        """Attach the sink (unless the testbed is down or a program is attached, e.g. by a second restore)."""
        building = self.topology.is_mine() and self.topology.record().get("status") == "creating"
        if (self.is_up() or building) and self._has_sink(node) and not self.sink.attached(node):
            self.sink.set_link(node, True)

    def arrival_recorder(self):
        """The backends' sink records arrival times (switch/sink.bpf.c) when the testbed has one."""
        return self.sink if self.cfg.section("testbed")["backend_sink"] and self.is_up() else None

    def sink_stats(self) -> dict[str, int]:
        """The sink's counters summed over CPUs and backends (enum sink_stat)."""
        return self.sink.stats()

    def switch_stats(self) -> dict[str, int]:
        """The fast path's counters summed over CPUs (enum sw_stat)."""
        return self.fastpath.stats()

    # --- CPU placement (napi.py) ---------------------------------------------------------------------
    def place_dut(self, mode: str) -> None:
        self.napi.place_dut(mode)

    place_dut.__doc__ = NapiPlacement.place_dut.__doc__

    def restore_state(self) -> list[str]:
        """Testbed.restore_state, and the placed NAPI threads' scheduling and CPUs read back and
        reset to the config's (NapiPlacement.restore)."""
        out = super().restore_state()
        if self.is_up():
            out += self.napi.restore()
        return out

    def cpu_placement(self) -> dict | None:
        """What runs where, read back from the kernel (recorded in every trial's host metadata)."""
        return self.napi.read_back()

    def _placed_threads(self) -> dict[str, dict[str, str]]:
        return self.napi.placed_threads()

    # --- status ----------------------------------------------------------------------------------------
    def status(self) -> dict:
        out = super().status()
        existing = existing_namespaces()
        out["up"] = self.is_up()
        for n in self.cfg.nodes.values():
            ns = self.topology.ns(n.name)
            ent = out["nodes"][n.name]
            ent["namespace"] = ns
            ent["exists"] = ns in existing
            ent["interfaces"] = {}
            if ns in existing:
                p = ip("-n", ns, "-j", "link", "show", check=False)
                links = {l["ifname"]: l for l in json.loads(p.stdout or "[]")}
                for i in n.interfaces:
                    l = links.get(i.name)
                    ent["interfaces"][i.name] = None if l is None else {
                        "mac": l.get("address"), "up": "UP" in l.get("flags", []),
                        "xdp": (l.get("xdp") or {}).get("prog", {}).get("id") if l.get("xdp") else None}
        out["switch"] = {"namespace": self.switch_ns, "exists": self.switch_ns in existing}
        return out
