"""The contract every load balancer implements (eBPF baseline, XenoFlow on DOCA or emulated)."""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from ..actors import tagged
from ..backends import CLASSES, BackendSet, WeightRule, load_backends, load_for_testbed, write_canonical
from ..errors import ConfigError, NodeError

CONTROLLER_START_S = 10  # an XDP controller prints its "started" line within this long
UPDATE_TIMEOUT_S = 10    # a running LB reports a runtime change (applied or refused) within this long


@dataclass(frozen=True)
class Flow:
    """One flow to the service as an LB sees it: IPv4 addresses, ports, IP protocol (UDP)."""
    src: str
    sport: int
    dst: str
    dport: int
    proto: int = 17


class LoadBalancer(ABC):
    kind: str = ""
    #: the tag its process runs under on `node` (Node process API): what running() and process() read
    tag: str = ""
    #: what the LB needs of the testbed around it, set up by Testbed.provide before it starts and
    #: withdrawn after it stops (e.g. an encapsulating LB: routing by the outer destination in the
    #: switch, decapsulation on the backends); a testbed that cannot provide one refuses by name
    needs: tuple[str, ...] = ()
    #: how it reads the backends' weights (xenobench.backends): a class split by default, Katran's ring
    weights: WeightRule = CLASSES

    def __init__(self, testbed):
        self.testbed = testbed
        self.cfg = testbed.cfg

    def backends_file(self, override: str | Path | None = None) -> Path:
        p = Path(override) if override else self.cfg.service.backends
        if p is None:
            raise ConfigError(f"Failed to start {self.kind}: no backends file "
                              f"(give --backends or service.backends in {self.cfg.path})")
        load_for_testbed(p, self.cfg, self.weights)  # every backend one of the testbed's backend nodes
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

    def forwarded(self) -> int:
        """The frames it forwarded so far: its per-backend packets, summed (stats)."""
        return int(sum(b["packets"] for b in self.stats()["backends"]))

    @property
    def node(self):
        """The node its process runs on."""
        return self.testbed.node(self.cfg.role("lb").name)

    def process(self):
        """The liveness method (xenobench.actors): its running process's ProcessHandle, None when
        it is not running."""
        return tagged(self.node, self.tag)()

    def running(self) -> bool:
        return self.node.running(self.tag)

    #: why this LB cannot be started "loaded, not attached" (start(attach=False): its XDP program
    #: pinned at `prog_pin` for a switcher, xenobench.xdpswitch); None: it can
    no_pin: str | None = "it is not an XDP program on the LB node's port"
    #: where its program is pinned when started with attach=False
    prog_pin: str = ""

    #: why this kind has no runtime update path (None: it has one, `update` is overridden)
    no_update: str | None = "it has no runtime update path"
    #: what one entry of a runtime change is, for the installation rate (xenobench.measure.update.
    #: install_sets): "class" (a class's destination: a pipe entry, a slots map element) or
    #: "ring slot" (a consistent-hash ring's slot: Katran)
    install_unit: str = "class"
    #: the key of the LB's "updated" report that counts what it wrote (None: it reports none)
    update_entries_key: str | None = None
    #: what one of those counts, in words (`update` returns it as "entry_unit": what an "entry per
    #: second" of the update kind is for this LB); None: it reports no count
    update_entry_unit: str | None = None

    @property
    def can_update(self) -> bool:
        """Whether this driver has a runtime update path (`update` overridden)."""
        return type(self).update is not LoadBalancer.update

    def update(self, backends: str | Path, *, timeout: float = UPDATE_TIMEOUT_S) -> dict:
        """Apply a new backends file to the running LB without restarting it. The file is read by
        the strict reader first (a bad one fails here, nothing is sent). Returns {"lb", "t_sent",
        "t_done" (the harness's CLOCK_MONOTONIC: the command sent, the LB's report of the change
        seen), "control_s", "lb_report" (what the LB reported: its own apply time, entries
        changed), "entries_key" (the report's key of that count: update_entries_key), "entry_unit"
        (what one of them is: update_entry_unit)}. Raises UpdateRefused (a NodeError) when the LB refuses the file; it then runs
        on its old set."""
        raise NodeError(f"Failed to update {self.kind}: {self.no_update}")

    def signal_update(self, node, handle, running_path: str, backends: str | Path, *, sudo: bool = False,
                      timeout: float = UPDATE_TIMEOUT_S) -> dict:
        """The one update shape of the LBs driven by a process (the XDP controllers, XenoFlow):
        the new file, validated and in canonical JSON, replaces the file the process was started
        with (`running_path`, renamed over it so a reader never sees half a file), SIGHUP tells the
        process to re-read it, and its log's next {"event": "updated"|"update_refused", "update": n}
        line is the answer. A refused file is put back by the previous one, so a restart runs on
        what runs now."""
        tmp = Path(tempfile.mkdtemp(prefix="xb-update-"))
        try:
            load_for_testbed(backends, self.cfg, self.weights)  # the testbed's backend nodes only
            canon = write_canonical(backends, tmp, self.weights)  # the strict reader: a bad file stops here
            return self._signal_update(node, handle, running_path, canon, backends, sudo, timeout)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _signal_update(self, node, handle, running_path, canon, backends, sudo, timeout) -> dict:
        prev = f"{running_path}.prev"
        node.run(["cp", "-f", running_path, prev])
        staged = node.stage(canon, Path(running_path).name + ".next")
        node.run(["mv", "-f", staged, running_path])
        seen = [d.get("update", 0) for d in log_events(node.read_text(handle.log))]
        last = max(seen, default=0)
        t_sent = time.monotonic()
        if not node.signal(handle, signal.SIGHUP, sudo=sudo):
            raise NodeError(f"Failed to update {self.kind} on {node.name}: its process is gone")
        deadline = t_sent + timeout
        while True:
            fresh = [d for d in log_events(node.read_text(handle.log)) if d.get("update", 0) > last]
            if fresh:
                t_done = time.monotonic()
                break
            if time.monotonic() > deadline:
                raise NodeError(f"Failed to update {self.kind} on {node.name}: no answer to SIGHUP within "
                                f"{timeout:g} s (log {handle.log})")
            time.sleep(0.0005)
        d = fresh[0]
        if d["event"] == "update_refused":
            node.run(["mv", "-f", prev, running_path])
            raise UpdateRefused(f"Failed to update {self.kind} on {node.name} from {backends}: "
                                f"{d.get('error') or 'refused'}; it keeps forwarding on its previous backend set")
        return {"lb": self.kind, "t_sent": t_sent, "t_done": t_done, "control_s": t_done - t_sent,
                "lb_report": d, "clock": "monotonic", "entries_key": self.update_entries_key,
                "entry_unit": self.update_entry_unit}

    # --- where a flow goes ------------------------------------------------------------------
    def backend_of(self, flow: Flow, backends: BackendSet) -> str | None:
        """The name of the backend `flow` reaches through this LB running on `backends` (read by
        its weight rule), or None when the driver cannot say. Experiments that must send a flow to a
        chosen backend (the RTT probes to the DNS backend) ask every LB of their point, and refuse
        at planning an LB that cannot say (`no_route`). The default answers for an LB of the class
        rule (its kind's split_by "class": the source address's class in the slot table); an LB that
        picks otherwise (a hash, a ring, its own rule) overrides it with the same rule its data
        plane follows."""
        if self.split_by == "class" and self.weights.classes:
            return backends.backend_for_source(flow.src).name
        return None

    @property
    def split_by(self) -> str:
        """How its kind picks a backend (xenobench.lb.LBKind.split_by)."""
        from . import LBS
        k = LBS.get(self.kind)
        return k.split_by if k else "class"

    @property
    def no_route(self) -> str | None:
        """Why this LB cannot say which backend a flow reaches (backend_of), None when it can."""
        if self._answers_routes() or self.split_by == "class":
            return None
        return (f"it splits by {self.split_by!r} and its driver does not say which backend a flow reaches "
                "(give its driver a backend_of(flow, backends) following its data plane's rule: "
                "docs/extending.md)")

    def _answers_routes(self) -> bool:
        """Whether a subclass answers backend_of with a rule of its own."""
        return type(self).backend_of is not LoadBalancer.backend_of

    def route(self, flow: Flow, backends_file: str | Path | None = None) -> str | None:
        """backend_of for the backends file it runs on (default service.backends)."""
        return self.backend_of(flow, load_backends(self.backends_file(backends_file), self.weights))

    def split_record(self, before: dict | None, after: dict | None) -> dict | None:
        """What each backend got between two stats reads (packets per backend and their shares), for
        an LB whose split is not the class rule: a profile's split caption then names what was
        sent, and this is what was measured."""
        if not before or not after or "error" in before or "error" in after:
            return None
        b0 = {x["name"]: x["packets"] for x in before.get("backends", [])}
        got = {x["name"]: x["packets"] - b0.get(x["name"], 0) for x in after.get("backends", [])}
        total = sum(got.values())
        return {"by": self.split_by, "measured": True, "packets": got,
                "share": {n: round(v / total, 4) for n, v in got.items()} if total else None}

    def provide_needs(self) -> None:
        """Set up what this LB needs of the testbed (`needs`); idempotent."""
        if self.needs:
            self.testbed.provide(self.needs, self.kind)

    def withdraw_needs(self) -> None:
        if self.needs:
            self.testbed.withdraw(self.needs, self.kind)


def json_lines(text: str) -> list[dict]:
    """A process's JSON lines in its log (other lines, e.g. DOCA's log, skipped), from its last
    "started" event on (a log is appended to by every run)."""
    out: list[dict] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            if d.get("event") == "started":
                out = []
            out.append(d)
    return out


def log_events(text: str) -> list[dict]:
    """The runtime-change answers ("updated", "update_refused") of the current run (json_lines)."""
    return [d for d in json_lines(text) if d.get("event") in ("updated", "update_refused")]


class UpdateRefused(NodeError):
    """The running LB refused a new backends file (it keeps its previous set)."""
