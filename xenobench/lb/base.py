"""The contract every load balancer implements (eBPF baseline, XenoFlow on DOCA or emulated)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

CONTROLLER_START_S = 10  # an XDP controller prints its "started" line within this long


class LoadBalancer(ABC):
    kind: str = ""
    #: the tag its process runs under on `node` (Node process API): what running() and process() read
    tag: str = ""
    #: what the LB needs of the testbed around it, set up by Testbed.provide before it starts and
    #: withdrawn after it stops (e.g. an encapsulating LB: routing by the outer destination in the
    #: switch, decapsulation on the backends); a testbed that cannot provide one refuses by name
    needs: tuple[str, ...] = ()

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

    @property
    def node(self):
        """The node its process runs on."""
        return self.testbed.node(self.cfg.role("lb").name)

    def process(self):
        """The liveness method (xenobench.actors): its running process's ProcessHandle, None when
        it is not running."""
        from ..actors import tagged
        return tagged(self.node, self.tag)()

    def running(self) -> bool:
        return self.node.running(self.tag)

    def provide_needs(self) -> None:
        """Set up what this LB needs of the testbed (`needs`); idempotent."""
        if self.needs:
            self.testbed.provide(self.needs, self.kind)

    def withdraw_needs(self) -> None:
        if self.needs:
            self.testbed.withdraw(self.needs, self.kind)
