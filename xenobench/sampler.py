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

A kept reader holds its node's network namespace open: a namespace deleted meanwhile (`ip netns
del`, a testbed torn down) lives on in that program, with its links and counters, nameless. So a
reader of a namespace node (Node.netns) remembers the namespace's inode when its program starts
and compares it with /var/run/netns/<name> on every read (a stat, no process): gone or another
namespace under that name, and the read fails by name instead of counting a namespace nobody can
reach.
"""

from __future__ import annotations

import os
import threading
import time

from .counters import parse_ethtool_stats, parse_proc_net_dev
from .errors import DataError, NodeError
from .nodes import NETNS_RUN_DIR

__all__ = ["CounterReader", "RateSampler", "parse_proc_net_dev"]


class KeptFile:
    """One file of a node, read afresh on each read() through a program kept running there
    (xenobench.agents.readfile over Node.session: a pipe or channel round trip, no process start).
    Reads take turns (a sampler's thread and a procedure may share one); close() ends the program
    and a later read starts another."""

    def __init__(self, node, path: str):
        self.node, self.path = node, path
        self._session = None
        self._netns_ino: int | None = None
        self._lock = threading.Lock()

    def _netns_inode(self) -> int | None:
        """The inode of the node's namespace as named now (None: not a namespace node); NodeError
        when the name is gone."""
        name = getattr(self.node, "netns", None)
        if not name:
            return None
        try:
            return os.stat(NETNS_RUN_DIR / name).st_ino
        except OSError as e:
            raise NodeError(f"Failed to read {self.path} of {self.node.name}: its network namespace {name} "
                            f"was deleted ({NETNS_RUN_DIR / name}: {e.strerror}); bring the testbed up again "
                            "(`xenobench testbed up`) and rerun the trial") from None

    def read(self) -> bytes:
        with self._lock:
            ino = self._netns_inode()
            if self._session is None:
                self._session = self.node.session(self.node.python_argv("xenobench.agents.readfile", self.path))
                self._netns_ino = ino
            elif ino != self._netns_ino:
                raise NodeError(f"Failed to read {self.path} of {self.node.name}: its network namespace "
                                f"{self.node.netns} was replaced since the reader started (inode {self._netns_ino}, "
                                f"now {ino}); the reader counted the old one")
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

    def read_dropped(self) -> int:
        """Frames the interface dropped on receive: mlx5 rx_discards_phy + rx_out_of_buffer (full
        rings), else the rx drop column of /proc/net/dev (a veth counts a frame its full ring refused
        there)."""
        if self.counter == "rx_packets_phy":
            st = parse_ethtool_stats(self.node.run(["ethtool", "-S", self.iface]).stdout)
            return st.get("rx_discards_phy", 0) + st.get("rx_out_of_buffer", 0)
        return parse_proc_net_dev(self._file.read().decode(errors="replace"), self.iface, "rx_drop")

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

    def read_dropped(self) -> int:
        """The readers' receive drops summed (CounterReader.read_dropped): what a full ring between
        the LB and the backends cost, for xenobench.measure.common.lb_checks."""
        return sum(r.read_dropped() for r in self.readers)

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
