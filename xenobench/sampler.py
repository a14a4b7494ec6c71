"""Per-interval receive counters of the backends while a load runs (the thesis sampled
`rx_packets_phy` of the backends once per second and took the steady-state median; the rule is
xenobench.steady, applied by the procedures to the series this returns).

The harness polls each node over its transport, so the same code reads a veth in a namespace and
an mlx5 port over SSH. Which counter is read depends on the driver:
    mlx5*   `ethtool -S` rx_packets_phy (frames on the wire, before any host-side drop)
    other   rx packets of /proc/net/dev (per network namespace, so correct under nsenter)
Timestamps are the harness's monotonic clock after each read returns; a read costs a process
spawn (~5 ms locally), small against the interval (default 0.25 s).
"""

from __future__ import annotations

import threading
import time

from .counters import parse_ethtool_stats, parse_proc_net_dev
from .errors import DataError, NodeError

__all__ = ["CounterReader", "RateSampler", "parse_proc_net_dev"]


class CounterReader:
    """Reads one rx packet counter of node:iface (see the module doc for which one)."""

    def __init__(self, node, iface: str):
        self.node, self.iface = node, iface
        drv = node.run(["ethtool", "-i", iface], check=False).stdout
        self.driver = next((l.split(":", 1)[1].strip() for l in drv.splitlines() if l.startswith("driver:")), "")
        self.counter = "rx_packets_phy" if self.driver.startswith("mlx5") else "proc_net_dev.rx_packets"

    def read(self) -> int:
        if self.counter == "rx_packets_phy":
            st = parse_ethtool_stats(self.node.run(["ethtool", "-S", self.iface]).stdout)
            if "rx_packets_phy" not in st:
                raise NodeError(f"Failed to read rx_packets_phy of {self.node.name}:{self.iface}: not in ethtool -S")
            return st["rx_packets_phy"]
        return parse_proc_net_dev(self.node.run(["cat", "/proc/net/dev"]).stdout, self.iface)


class RateSampler:
    """Samples the summed rx counter of several node:iface pairs every `interval` seconds in a
    background thread; stop() returns the series."""

    def __init__(self, testbed, ifaces: list[tuple[str, str]], interval: float = 0.25):
        self.readers = [CounterReader(testbed.node(n), i) for n, i in ifaces]
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def read_total(self) -> int:
        return sum(r.read() for r in self.readers)

    def _loop(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            try:
                v = self.read_total()
            except (NodeError, DataError) as e:
                self.error = str(e)
                return
            self.samples.append((time.monotonic(), v))
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def start(self) -> "RateSampler":
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(timeout=10)
        return {"interval_s": self.interval, "counters": [f"{r.node.name}:{r.iface}:{r.counter}" for r in self.readers],
                "samples": [[round(t, 6), v] for t, v in self.samples], "error": self.error}
