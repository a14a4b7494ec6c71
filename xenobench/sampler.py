"""Per-interval receive counters of the backends while a load runs (the thesis sampled
`rx_packets_phy` of the backends once per second and took the steady-state median; the rule is
xenobench.steady, applied by the procedures to the series this returns).

The harness polls each node over its transport, so the same code reads a veth in a namespace and
an mlx5 port over SSH. Which counter is read depends on the driver:
    mlx5*   `ethtool -S` rx_packets_phy (frames on the wire, before any host-side drop)
    other   rx packets of /proc/net/dev (per network namespace, so correct under nsenter)
/proc/net/dev is read through a program kept running on the node (xenobench.agents.readfile over
Node.session): a read is a pipe or channel round trip, no process start. Started per read, under
full load on a 2-core machine (the generator busy on one CPU, the LB's NAPI thread at SCHED_FIFO on
the other) a read waited 100-200 ms for the CPU, the sampler fell behind its interval and a 0.3 s
block of the interleaved rate design kept a single sample (xenobench.measure.rank). A sample's timestamp is
the middle of its read on the harness's monotonic clock. A sampler that falls behind skips the
missed ticks instead of reading back to back to catch up.
"""

from __future__ import annotations

import threading
import time

from .counters import parse_ethtool_stats, parse_proc_net_dev
from .errors import DataError, NodeError

__all__ = ["CounterReader", "RateSampler", "parse_proc_net_dev"]


class KeptFile:
    """One file of a node, read afresh on each read() through a program kept running there
    (xenobench.agents.readfile over Node.session: a pipe or channel round trip, no process start).
    Reads take turns (a sampler's thread and a procedure may share one); close() ends the program
    and a later read starts another."""

    def __init__(self, node, path: str):
        self.node, self.path = node, path
        self._session = None
        self._lock = threading.Lock()

    def read(self) -> bytes:
        with self._lock:
            if self._session is None:
                self._session = self.node.session(self.node.python_argv("xenobench.agents.readfile", self.path))
            return self._session.request("0")

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None


class CounterReader:
    """Reads one rx packet counter of node:iface (see the module doc for which one)."""

    def __init__(self, node, iface: str):
        self.node, self.iface = node, iface
        drv = node.run(["ethtool", "-i", iface], check=False).stdout
        self.driver = next((l.split(":", 1)[1].strip() for l in drv.splitlines() if l.startswith("driver:")), "")
        self.counter = "rx_packets_phy" if self.driver.startswith("mlx5") else "proc_net_dev.rx_packets"
        self._file = KeptFile(node, "/proc/net/dev")

    def read(self) -> int:
        if self.counter == "rx_packets_phy":
            st = parse_ethtool_stats(self.node.run(["ethtool", "-S", self.iface]).stdout)
            if "rx_packets_phy" not in st:
                raise NodeError(f"Failed to read rx_packets_phy of {self.node.name}:{self.iface}: not in ethtool -S")
            return st["rx_packets_phy"]
        return parse_proc_net_dev(self._file.read().decode(errors="replace"), self.iface)

    def close(self) -> None:
        """End the reading program (a later read starts another)."""
        self._file.close()


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
            t0 = time.monotonic()
            try:
                v = self.read_total()
            except (NodeError, DataError) as e:
                self.error = str(e)
                return
            t1 = time.monotonic()
            self.samples.append(((t0 + t1) / 2, v))
            nxt += self.interval
            if nxt < t1:  # behind (the read or the thread was held up): the next tick from now
                nxt = t1 + self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def start(self) -> "RateSampler":
        self._thread.start()
        return self

    def close(self) -> None:
        """End the readers' programs on the nodes."""
        for r in self.readers:
            r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def stop(self) -> dict:
        """Stop sampling (read_total still reads; close() ends the readers' programs)."""
        self._stop.set()
        self._thread.join(timeout=10)
        return {"interval_s": self.interval, "counters": [f"{r.node.name}:{r.iface}:{r.counter}" for r in self.readers],
                "samples": [[round(t, 6), v] for t, v in self.samples], "error": self.error}
