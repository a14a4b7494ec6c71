"""What the measurement kinds share: the point's vocabulary (capacity points, 'none'), the actors a
trial watches, the LB's checks of a trial, the traffic profiles' tunables, and the maxima a share
of capacity is taken of.

Nothing here knows an experiment by name: a procedure reads its knobs through its context
(TrialContext.knob: the point first, then the experiment's config section) and the capacity
sources its point was planned with (TrialContext.plan.capacity).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ..definitions import is_capacity_point
from ..errors import NodeError, XenobenchError
from ..layout import ResultsTree, TrialDir, point_id
from ..lb import split_measured
from ..lb.inhardware import CHECK, READING_KEY
from ..results import COUNTER_SKEW
from ..traffic import TrialResult, start_traffic
from ..trials import TrialContext, Validity

DRAIN_S = 0.3          # after the generator stops, frames still in flight reach the backends
WATCH_S = 0.2          # how often a running trial checks its actors (xenobench.actors)


def within_skew(received: float, sent: float) -> bool:
    """Nothing received that was not sent, within the counters' tolerance (xenobench.results.COUNTER_SKEW:
    stray frames, counters read a moment apart)."""
    return received <= sent * (1 + COUNTER_SKEW[0]) + COUNTER_SKEW[1]


def backend_ifaces(cfg) -> list[tuple[str, str]]:
    return [(n.name, n.iface().name) for n in cfg.backend_nodes()]


def measured_ifaces(cfg) -> list[tuple[str, str]]:
    """Interfaces whose counters every trial snapshots before and after."""
    lb = cfg.role("lb")
    return [(cfg.role("loadgen").name, cfg.role("loadgen").iface().name),
            (cfg.role("client").name, cfg.role("client").iface().name), *backend_ifaces(cfg),
            *((lb.name, i.name) for i in lb.interfaces),
            # an LB in a DPU's eSwitch: its ports' counters (the report's frame-loss table for the DPU)
            *((d.name, i.name) for d in cfg.nodes_with_role("dpu") for i in d.interfaces)]


# --- the actors of a trial (xenobench.actors) -------------------------------------------------------
def watch_lb(ctx: TrialContext, lb) -> str | None:
    """Watch an LB as an actor of the trial; returns its key (None: no LB)."""
    if lb is None:
        return None
    key = f"lb_{lb.kind}"
    ctx.watch.add(key, f"load balancer {lb.kind}", lb.process)
    return key


def watch_generator(ctx: TrialContext, h) -> str | None:
    """Watch a running generator (TrafficHandle.actor) as an actor of the trial; returns its key
    (None: one that cannot be watched). Release it before stopping it on purpose."""
    a = h.actor()
    if a is None:
        return None
    key, what, liveness, finished = a
    ctx.watch.add(key, what, liveness, finished=finished)
    return key


def traffic_watched(ctx: TrialContext, profile: str, tun: dict, rate: float, duration: float) -> TrialResult:
    """run_traffic with the trial's actors checked every WATCH_S while it sends: one found gone
    stops the generator at once (the rest of the duration would measure nothing)."""
    h = start_traffic(ctx.testbed, profile, tun, rate, duration_s=duration)
    try:
        key = watch_generator(ctx, h)  # the generator itself is one of the actors
        end = time.monotonic() + duration
        while (left := end - time.monotonic()) > 0:
            if ctx.watch.check():
                ctx.watch.release(key)
                return h.stop()
            time.sleep(min(WATCH_S, left))
        ctx.watch.release(key)  # what is left of a count: the generator's own result answers for it
        return h.wait()
    except BaseException:  # an error or ^C: the generator must not outlive the trial
        with contextlib.suppress(NodeError):
            h.stop()
        raise


# --- the LB's part of a trial ----------------------------------------------------------------------
def lb_stats(lb) -> dict | None:
    """The LB's stats at one end of a trial's measured phase, and where the LB offers a proof of
    where it ran (`in_hardware`: XenoFlow, xenobench.lb.inhardware), its reading then, under
    READING_KEY, for lb_checks."""
    if lb is None:
        return None
    try:
        st = lb.stats()
    except XenobenchError as e:
        st = {"error": str(e)}
    proof = getattr(lb, "in_hardware", None)
    if proof is not None:
        st[READING_KEY] = proof.read()
    return st


def lb_per_backend(before: dict | None, after: dict | None) -> dict | None:
    """Packets the LB sent to each backend between two stats reads (None if either failed)."""
    if not before or not after or "error" in before or "error" in after:
        return None
    b = {x["name"]: x["packets"] for x in before.get("backends", [])}
    return {x["name"]: x["packets"] - b.get(x["name"], 0) for x in after.get("backends", [])}


#: the share of the frames an LB forwards that may be lost after it without a counter seeing it: a
#: ring on the way overflows when what follows the LB is slower than the LB (the rehearsal's DPU
#: stand-in delivers 90 % of what XenoFlow counts at its maximum rate, every counter of the measured
#: ports at zero drops). Half of them missing is no ring but a wrong destination: an LB sending half
#: its ring to a node that is not a backend.
RING_LOSS_MAX = 0.25


def lb_checks(v: Validity, lb, before: dict | None, after: dict | None, rx: int | None = None,
              tx: int | None = None, dropped: int = 0) -> dict | None:
    """The LB's checks of a trial: its stats read without error before and after (lb_stats_read)
    and, given the backends' rx and the generator's tx, its forwarded count between them
    (lb_counters_consistent, failed when the stats could not be read: never skipped). Returns
    the per-backend packets.

    lb_counters_consistent holds the forwarded count both ways, within the counters' tolerance
    (within_skew): at most what the generator sent and at least what the backends received; and
    the backends received, or the caller's counters saw dropped on the way (`dropped`: a full ring's
    rx drops), all but RING_LOSS_MAX of it. Every backend the LB forwarded to must be one of the
    testbed's backend nodes."""
    per_backend = lb_per_backend(before, after)
    if lb is None:
        return per_backend
    in_hardware(v, lb, before, after)
    errors = [f"{when}: {st['error']}" for when, st in (("before", before), ("after", after)) if "error" in st]
    v.require("lb_stats_read", not errors, "; ".join(errors))
    if rx is not None and tx is not None:
        fwd = sum(per_backend.values()) if per_backend is not None else None
        if fwd is None:
            v.require("lb_counters_consistent", False, "not checked: the LB's stats could not be read")
        else:
            why = []
            if not within_skew(fwd, tx):
                why.append("more than the generator sent")
            if not within_skew(rx, fwd):
                why.append("fewer than the backends received")
            if not within_skew(fwd * (1 - RING_LOSS_MAX), rx + dropped):
                why.append(f"{fwd - rx - dropped} more than the backends received or dropped on the way "
                           f"(more than the {RING_LOSS_MAX:.0%} a ring on the way may lose)")
            cfg = getattr(lb, "cfg", None)
            if cfg is not None:
                backends = {n.name for n in cfg.backend_nodes()}
                stray = {n: p for n, p in per_backend.items() if p and n not in backends}
                if stray:
                    why.append(", ".join(f"{p} to {n}" for n, p in stray.items())
                               + f", not a backend node of {cfg.path} ({', '.join(sorted(backends))})")
            v.require("lb_counters_consistent", not why,
                      f"lb forwarded {fwd}, backends received {rx}" + (f" and dropped {dropped}" if dropped else "")
                      + f", generator sent {tx}: forwarded " + "; ".join(why))
    return per_backend


def in_hardware(v: Validity, lb, before: dict | None, after: dict | None) -> dict | None:
    """The LB's proof of where it ran (XenoFlow: xenobench.lb.inhardware), judged from lb_stats'
    readings (judge_in_hardware); the verdict (values, or not applicable with the reason) is kept in
    the end's stats (`after`, under CHECK), which the trial's outputs carry as lb_stats_after."""
    verdict = judge_in_hardware(v, lb, (before or {}).get(READING_KEY), (after or {}).get(READING_KEY))
    if verdict is not None and after is not None:
        after[CHECK] = verdict
    return verdict


def lb_reading(lb) -> dict | None:
    """A reading of the LB's proof of where it ran (in_hardware) on its own, for a procedure whose
    phases run without lb_stats (the paired latency design's blocks, update's whole trial); None for
    an LB without one."""
    proof = getattr(lb, "in_hardware", None) if lb is not None else None
    return proof.read() if proof is not None else None


def judge_in_hardware(v: Validity, lb, before: dict | None, after: dict | None, block: int | None = None
                      ) -> dict | None:
    """The verdict of the LB's proof between two readings: where it applies, the requirement
    xenoflow_in_hardware (block_<n>_xenoflow_in_hardware for a block of a paired design) whose
    reason carries the values; returned for the caller's record. None for an LB without a proof."""
    proof = getattr(lb, "in_hardware", None) if lb is not None else None
    if proof is None:
        return None
    verdict = proof.judge(before, after)
    if verdict["applicable"]:
        name, why = (CHECK, verdict["reason"]) if block is None else (
            f"block_{block}_{CHECK}", f"block {block} ({lb.kind}): {verdict['reason']}")
        v.require(name, verdict["ok"], why)
    return verdict


def lb_split(lb, before: dict | None, after: dict | None) -> dict | None:
    """An LB whose split is not the class rule (xenobench.lb.split_measured: a hash, a ring, its own
    rule) records what each backend got between two stats reads (its split_record); None for one of
    the class rule, whose split the profile sets."""
    return lb.split_record(before, after) if lb is not None and split_measured(lb.kind) else None


# --- tunables of the traffic profiles --------------------------------------------------------------
# Only what the experiment decides; xenobench.traffic.fill_tunables adds what the testbed defines
# (VIP, MACs, source range, the DNS backend's classes) and the trial records the filled set.
def payload_tunables(payload: int, flows: int) -> dict:
    return {"payload": payload, "flows": flows}


def background_tunables(split: str, payload: int) -> dict:
    return {"split": split, "payload": payload}


# --- a background as a share of a maximum measured in the same run ---------------------------------
def delivered_pps(outputs: dict) -> float | None:
    """A capacity point's maximum: the frames the backends received per second of the generator's
    unpaced run (at most those it sent), the same whole-run average by which a level's background
    is judged (xenobench.traffic.trial.judge: achieved = sent / send time), where the steady-state
    median of short samples (rx_pps) leaves out the start and the generator's stalls."""
    gen = outputs.get("generator") or {}
    secs = float(gen.get("duration_s") or 0)
    if secs <= 0 or outputs.get("rx_packets") is None or outputs.get("tx_packets") is None:
        return None
    return min(int(outputs["rx_packets"]), int(outputs["tx_packets"])) / secs


def measured_maximum(resdir: Path, experiment: str, point: dict) -> float:
    """The median maximum of a capacity point's valid trials in this run's results tree: compare's
    or pps's rx_pps; an experiment's own capacity points' delivered_pps."""
    tree = ResultsTree.of(resdir)
    rates = []
    for td in sorted(tree.point_dir(experiment, point).glob("rep-*")):
        t = TrialDir(td)
        if t.complete:
            r = t.read_result()
            rate = delivered_pps(r["outputs"]) if is_capacity_point(point) else r["outputs"].get("rx_pps")
            if r["valid"] and rate:
                rates.append(float(rate))
    if not rates:
        raise XenobenchError(f"Failed to find the maximum rate of LB {point['lb']!r}: no valid {experiment} trial in "
                             f"{tree.point_dir(experiment, point)} ({experiment}'s background shares are of it: run "
                             f"`xenobench experiment run {experiment} {point_id(point)}` first, as the workflow does)")
    return statistics.median(rates)


def capacity_level(ctx: TrialContext, share: float) -> dict:
    """A background at `share` of the maximum measured in this run (the point's capacity sources,
    planned by xenobench.experiments.capacity_points): of the point's LB, or of the smallest among
    its LBs' (rtt_load paired: every block of a repetition shares one background, the pairs'
    premise), each the median rate of this run's valid capacity trials (measured_maximum)."""
    if not ctx.plan.capacity:
        raise XenobenchError(f"Failed to take {share:g} of a maximum for {ctx.experiment} {point_id(ctx.point)}: the "
                             "point was planned without capacity sources (capacity_from)")
    resdir = ctx.attempt.trial.results_dir
    caps = {pt["lb"]: measured_maximum(resdir, src, pt) for src, pt in ctx.plan.capacity}
    by = min(caps, key=caps.get)
    return {"capacity_pps": caps, "capacity_of": by, "background_pps": float(round(share * caps[by]))}


# --- a valid trial, as the kinds' rows read it --------------------------------------------------------
@dataclass(frozen=True)
class TrialRecord:
    """One valid trial as the tidy rows are made of it (xenobench.aggregate builds it): its
    directory, result.json, experiment definition and facts (what its point ran with:
    xenobench.procedures.point_facts), and the columns every row of it carries (`common`: testbed,
    experiment, point, lb, generator, repetition, source)."""
    trial: TrialDir
    result: dict
    definition: object
    facts: dict
    resdir: Path
    common: dict

    @property
    def outputs(self) -> dict:
        return self.result["outputs"]

    @property
    def point(self) -> dict:
        return self.result["point"]

    @property
    def repetition(self) -> int:
        return int(self.result["repetition"])
