"""The actors of a trial and the one check that they lived through it.

An actor is a process the trial relies on besides the harness: the load balancer, the DNS server,
the prober, the generator (xdpgen; the TRex server the harness started: TrafficHandle.actor, watched
while it sends by xenobench.measure.common.watch_generator; a generator that dies also prints no result,
which fails its TrialResult's `fault` check, xenobench.traffic.trial.judge). Each is watched
through its driver's liveness method, a callable returning the actor's live ProcessHandle of the
Node process API or None (LoadBalancer.process, xenobench.dns.server_process, the prober's in
xenobench.rtt), so every transport and every LB is checked the same way.

    w = ctx.watch                               # one per attempt (xenobench.trials.run_trial)
    w.add("lb_xenoflow", "load balancer xenoflow", lb.process)
    if w.check(): ...                           # between samples or blocks: stop early
    w.release("lb_xenoflow")                    # before the trial stops it on purpose
    outputs["actors"] = w.judge(validity)       # run_trial, at the attempt's end

An actor is gone when its process has ended, when another process now runs under its tag (it was
restarted: the pid and start time the trial began with no longer match) or when its liveness
could not be read (a node that no longer answers). Every gone actor fails the check
`<key>_alive`, whose reason names the actor, its pid and node, when it was last seen alive and
when it was found gone (seconds from the attempt's start); outputs["actors"] records each actor.

The connections the attempt ran over are judged too (w.connections(testbed.nodes()), run_trial):
a node whose SSH connection dropped during the attempt (its `losses`, xenobench.nodes.ssh: the node's
sshd killed or restarted, the node rebooted) fails the check `ssh_<node>`, whose reason says when the
loss was found, why and whether the connection was made again; what ran over it cannot be vouched
for. A loss also stops the attempt early, as a gone actor does; outputs["connections"] records them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from .errors import XenobenchError
from .nodes.base import ProcessHandle

Liveness = Callable[[], "ProcessHandle | None"]


class ActorGone(Exception):
    """Stops a trial early from inside trials nested in it (a search's): not a XenobenchError, so
    the nested run_trial passes it on to the procedure that watches (the outer trial records why)."""


@dataclass
class Actor:
    key: str                          # "lb_xenoflow", "dns_server_xdp", "prober": the check <key>_alive
    what: str                         # how a reason names it: "load balancer xenoflow"
    process: Liveness
    handle: ProcessHandle | None = None   # the process the actor was when it was added
    last_seen: float | None = None    # monotonic: the last check that found it alive
    found_gone: float | None = None   # monotonic: the check that found it gone
    how: str = ""                     # why it is gone
    watched: bool = True              # False once released (stopped on purpose) or finished
    finished: Callable[[], bool] | None = None  # an actor that ends by itself: did it end done?

    @property
    def gone(self) -> bool:
        return self.found_gone is not None


class Watch:
    """The actors of one attempt (module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.t0 = clock()
        self.actors: dict[str, Actor] = {}
        self.links: dict[str, tuple[object, int]] = {}  # node name -> (node, its losses before the attempt)

    def connections(self, nodes) -> None:
        """Judge the connections to these nodes from now on (those whose transport records `losses`)."""
        for n in nodes:
            losses = getattr(n, "losses", None)
            if isinstance(losses, list) and n.name not in self.links:
                self.links[n.name] = (n, len(losses))

    def _losses(self) -> dict[str, list]:
        """The connection losses of each watched node since the attempt's start."""
        out = {}
        for name, (n, before) in self.links.items():
            new = n.losses[before:]
            if new:
                out[name] = new
        return out

    def _loss_reason(self, name: str, losses: list) -> str:
        n = self.links[name][0]
        where = f" ({n.ssh.user}@{n.ssh.host}:{n.ssh.port})" if getattr(n, "ssh", None) else ""
        parts = []
        for x in losses:
            again = (f"connected again at {self._s(x.reconnected):.2f} s" if x.reconnected is not None
                     else "not connected again")
            parts.append(f"found {self._s(x.at):.2f} s into the attempt ({x.why}), {again}")
        return f"the SSH connection to {name}{where} was lost: {'; '.join(parts)}"

    def add(self, key: str, what: str, process: Liveness, finished: Callable[[], bool] | None = None) -> None:
        """Watch an actor from now on; one not running now is gone at once. `finished`: for an
        actor that ends by itself (the prober), whether it ended having done its work (then it is
        not gone). Adding a key again (a block's LB started again) watches the new process,
        unless the old one was found gone."""
        old = self.actors.get(key)
        if old is not None and old.gone:
            return
        a = self.actors[key] = Actor(key, what, process, finished=finished)
        self._read(a, at_start=True)

    def release(self, key: str | None) -> None:
        """A last check before the trial stops the actor on purpose; not watched afterwards."""
        a = self.actors.get(key)
        if a is not None and a.watched:
            self._read(a)
            a.watched = False

    def check(self) -> list[str]:
        """Check every watched actor now; what names the gone ones (empty: all alive)."""
        for a in self.actors.values():
            if a.watched and not a.gone:
                self._read(a)
        return self.gone()

    def gone(self) -> list[str]:
        """The gone actors' reasons and the lost connections', without checking again."""
        return ([self.reason(a) for a in self.actors.values() if a.gone]
                + [self._loss_reason(k, v) for k, v in self._losses().items()])

    def _read(self, a: Actor, at_start: bool = False) -> None:
        try:
            h = a.process()
        except XenobenchError as e:  # the node did not answer: its actor cannot be vouched for
            self._lost(a, f"could not be checked ({e})")
            return
        if at_start:
            if h is None and a.finished is not None and a.finished():
                a.watched = False
            elif h is None:
                self._lost(a, "was not running at the start")
            else:
                a.handle, a.last_seen = h, self.clock()
        elif h is not None and (h.pid, h.starttime_ticks) == (a.handle.pid, a.handle.starttime_ticks):
            a.last_seen = self.clock()
        elif h is None and a.finished is not None and a.finished():
            a.watched = False  # it ended, its work done
        else:
            self._lost(a, "died" if h is None else f"was restarted (now pid {h.pid})")

    def _lost(self, a: Actor, how: str) -> None:
        a.watched = False
        a.found_gone, a.how = self.clock(), how

    def _s(self, t: float | None) -> float | None:
        return None if t is None else round(t - self.t0, 3)

    def reason(self, a: Actor) -> str:
        where = f" (pid {a.handle.pid} on {a.handle.node})" if a.handle else ""
        seen = (f"last seen alive {self._s(a.last_seen):.2f} s into the attempt" if a.last_seen is not None
                else "not seen alive in this attempt")
        return f"{a.what}{where} {a.how}: {seen}, found gone at {self._s(a.found_gone):.2f} s"

    def judge(self, validity) -> dict:
        """Check every watched actor a last time, add `<key>_alive` to the Validity per actor and
        return the record outputs["actors"] keeps."""
        self.check()
        out = {}
        for a in self.actors.values():
            validity.require(f"{a.key}_alive", not a.gone, self.reason(a) if a.gone else "")
            out[a.key] = {"what": a.what, "node": a.handle.node if a.handle else None,
                          "pid": a.handle.pid if a.handle else None, "alive": not a.gone,
                          "how": a.how or None, "last_seen_alive_s": self._s(a.last_seen),
                          "found_gone_s": self._s(a.found_gone)}
        return out

    def judge_connections(self, validity) -> dict:
        """Add `ssh_<node>` to the Validity for every node whose connection was lost during the
        attempt and return the record outputs["connections"] keeps (run_trial, after the closing
        counter snapshot: a loss that only the snapshot found counts too)."""
        out = {}
        for name, losses in self._losses().items():
            validity.require(f"ssh_{name}", False, self._loss_reason(name, losses))
            out[name] = [{"found_s": self._s(x.at), "why": x.why, "reconnected_s": self._s(x.reconnected)}
                         for x in losses]
        return out


def tagged(node, tag: str) -> Liveness:
    """The liveness method of a process started under `tag` on `node` (Node process API)."""
    def process() -> ProcessHandle | None:
        h = node.handle(tag)
        return h if h is not None and node.running(tag) else None
    return process

