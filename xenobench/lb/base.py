"""The contract every load balancer implements (eBPF baseline, XenoFlow on DOCA or emulated)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

CONTROLLER_START_S = 10  # an XDP controller prints its "started" line within this long


class LoadBalancer(ABC):
    kind: str = ""

    def __init__(self, testbed):
        self.testbed = testbed
        self.cfg = testbed.cfg

    def backends_file(self, override: str | Path | None = None) -> Path:
        from ..errors import ConfigError
        p = Path(override) if override else self.cfg.service.backends
        if p is None:
            raise ConfigError(f"Failed to start {self.kind}: no backends file "
                              f"(give --backends or service.backends in {self.cfg.path})")
        return p

    @abstractmethod
    def start(self, backends: str | Path | None = None, *, dry_run: bool = False, **opts) -> dict:
        """Deploy and start on the testbed's LB node; returns what ran (commands, mode, pid).
        dry_run: return/print the exact command sequence without running anything."""

    @abstractmethod
    def stop(self) -> bool:
        """Stop and detach everything start() set up; False if it was not running."""

    @abstractmethod
    def stats(self) -> dict:
        """{"backends": [{"name", "mac", "packets", "bytes"}...], "miss", "non_ipv4",
        "malformed", "mode"}, summed over CPUs."""

    def running(self) -> bool:
        return False

    def _start_controller(self, node, tag: str, argv: list[str], generic: bool) -> dict:
        """Start an XDP controller agent (xenobench.agents.bpf.run_controller) on the node and wait
        for its "started" line; a controller that exits or stays silent is stopped and reported."""
        h = node.start_until(tag, argv, '"event": "started"', what=self.kind, timeout=CONTROLLER_START_S)
        return {"lb": self.kind, "node": node.name, "pid": h.pid,
                "mode": "generic" if generic else "native", "log": h.log}
