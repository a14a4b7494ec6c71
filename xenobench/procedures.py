"""The trial procedures of the six live measurements (thesis ch. 7, experiments/*.yaml), written
once above the transport layer: the same code drives the namespace testbed (trafgen, emulated
XenoFlow) and the thesis testbed (TRex, XenoFlow on the BlueField-3).

A point is run by run_point(): its set-up (DNS server, load balancer) is done once, then every
repetition is a trial of xenobench.trials (settle, counters, procedure, counters, cool down, with
retries), then everything the set-up started is stopped again, also on error or Ctrl-C.

Procedures return (outputs, Validity). Outputs hold what the tidy aggregation
(xenobench.aggregate) needs; nothing is derived later from anything but the trial directory.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from .actors import ActorGone
from .aggregate import check_trial
from .dns import server_process, start_server, stop_server
from .errors import ConfigError, NodeError, XenobenchError
from .experiments import (capacity_shares, definition, is_capacity_point, measured_lbs, paired, points, repetitions, section,
                          self_capacity_points)
from .latency import block_order
from .lb import NONE, by_hash, get_lb, stop_all
from .layout import ResultsTree, TrialDir, check_results_root, point_id, write_json_atomic
from .sampler import RateSampler
from .steady import steady_state_of_counter
from .progcost import measure as measure_prog_cost
from .resume import stop_when_orphaned
from .rtt import probe
from .search import SearchSettings, goal, run_search, trial_runner
from .results import line_rate_pps
from .traffic import TrialResult, run_traffic, start_traffic
from .trials import TrialContext, Validity, reusable, run_trial, trial_params

log = logging.getLogger(__name__)

DRAIN_S = 0.3          # after the generator stops, frames still in flight reach the backends
WATCH_S = 0.2          # how often a running trial checks its actors (xenobench.actors)
MAX_LOST_PCT = 1.0     # experiments/rtt*.yaml: no probe lost beyond 1 %


_ex = section  # the config's experiments.<id> section


def backend_ifaces(cfg) -> list[tuple[str, str]]:
    return [(n.name, n.iface().name) for n in cfg.backend_nodes()]


def measured_ifaces(cfg) -> list[tuple[str, str]]:
    """Interfaces whose counters every trial snapshots before and after."""
    lb = cfg.role("lb")
    return [(cfg.role("loadgen").name, cfg.role("loadgen").iface().name),
            (cfg.role("client").name, cfg.role("client").iface().name), *backend_ifaces(cfg),
            *((lb.name, i.name) for i in lb.interfaces)]


def point_lb(cfg, experiment: str, point: dict) -> str:
    """The LB the point's set-up starts; none for the paired RTT design (its blocks switch LBs) but
    for a capacity point (its LB's maximum)."""
    if is_capacity_point(point):
        return point["lb"]
    if paired(cfg, experiment):
        return "none"
    return point.get("lb") or _ex(cfg, experiment).get("lb") or "none"


def point_server(cfg, experiment: str, point: dict) -> str | None:
    """The DNS server a latency point's set-up starts (None for other kinds)."""
    if not definition(experiment).is_latency:
        return None
    return point.get("server") or _ex(cfg, experiment).get("server") or cfg.section("dns")["server"]


def dut_mode(cfg, experiment: str) -> str:
    """How the LB's NAPI runs for an experiment (NamespaceTestbed.place_dut): on a CPU of its own
    for rates; for latency as the config's testbed.cpus.latency_napi says (default inline)."""
    if definition(experiment).is_latency:
        return cfg.section("testbed")["cpus"]["latency_napi"]
    return "threaded"


def point_facts(cfg, experiment: str, point: dict) -> dict:
    """What a trial of this point ran with, recorded once in its outputs (`facts`) so aggregation
    and the report read it instead of deriving it: the experiment's kind, the LB the set-up started
    (none in the paired design, whose blocks switch among `lbs`), the DNS server, the traffic
    profile and generator."""
    d = definition(experiment)
    is_paired = paired(cfg, experiment) and not is_capacity_point(point)  # a capacity point: one LB
    return {"kind": d.kind, "lb": point_lb(cfg, experiment, point), "paired": is_paired,
            "lbs": list(_ex(cfg, experiment).get("lbs") or []) if is_paired else None,
            "server": point_server(cfg, experiment, point), "profile": d.profile,
            "generator": cfg.section("traffic")["generator"] if d.profile else None}


# --- set-up of a point ---------------------------------------------------------------------------
@contextlib.contextmanager
def point_setup(testbed, experiment: str, point: dict, progress=print):
    """DNS server and load balancer of the point, started once for all its repetitions."""
    cfg = testbed.cfg
    stack = contextlib.ExitStack()
    with stack:
        mode = dut_mode(cfg, experiment)
        testbed.place_dut(mode)
        if mode != "threaded":  # an up testbed's placement (NamespaceTestbed.up) is back after the point
            stack.callback(_restore_dut, testbed)
        server = point_server(cfg, experiment, point)
        if server:
            stop_server(testbed, server)  # a server left by an interrupted run
            progress(f"[{experiment}] starting DNS server {server}")
            start_server(testbed, server)
            stack.callback(stop_server, testbed, server)
        kind = point_lb(cfg, experiment, point)
        stop_all(testbed, progress=lambda m: progress(f"[{experiment}] {m}"))  # one LB at a time on the node
        lb = None
        if kind != NONE:
            lb = get_lb(kind, testbed)
            progress(f"[{experiment}] starting load balancer {kind}")
            lb.start()
            stack.callback(lb.stop)
        yield lb


def _restore_dut(testbed) -> None:
    try:
        testbed.place_dut("threaded")
    except XenobenchError as e:  # a testbed torn down meanwhile (Ctrl-C) has nothing to restore
        log.warning("%s", e)


# --- the actors of a trial (xenobench.actors) -------------------------------------------------------
def watch_lb(ctx: TrialContext, lb) -> str | None:
    """Watch an LB as an actor of the trial; returns its key (None: no LB)."""
    if lb is None:
        return None
    key = f"lb_{lb.kind}"
    ctx.watch.add(key, f"load balancer {lb.kind}", lb.process)
    return key


def watch_setup(ctx: TrialContext, lb, server: str | None) -> None:
    """The point set-up's actors (point_setup), watched in every trial of the point."""
    watch_lb(ctx, lb)
    if server:
        ctx.watch.add(f"dns_server_{server}", f"DNS server {server}", lambda: server_process(ctx.testbed, server))


def watch_generator(ctx: TrialContext, h) -> str | None:
    """Watch a running generator (TrafficHandle.actor) as an actor of the trial; returns its key
    (None: one that cannot be watched). Release it before stopping it on purpose."""
    a = h.actor()
    if a is None:
        return None
    key, what, liveness, finished = a
    ctx.watch.add(key, what, liveness, finished=finished)
    return key


def revive_setup(testbed, lb, server: str | None, progress=print) -> None:
    """Before an attempt: start again what of the point's set-up is not running (it died in an
    earlier attempt, which is recorded invalid naming it), so the attempt measures the set-up."""
    if server and server_process(testbed, server) is None:
        progress(f"DNS server {server} is not running: starting it again")
        stop_server(testbed, server)
        start_server(testbed, server)
    if lb is not None and lb.process() is None:
        progress(f"load balancer {lb.kind} is not running: starting it again")
        lb.stop()
        lb.start()
    from .traffic.trex import revive_server
    revive_server(testbed, progress)  # the TRex server the harness started, if it died


def _traffic_watched(ctx: TrialContext, profile: str, tun: dict, rate: float, duration: float) -> TrialResult:
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


def _lb_stats(lb) -> dict | None:
    if lb is None:
        return None
    try:
        return lb.stats()
    except XenobenchError as e:
        return {"error": str(e)}


def _lb_checks(v: Validity, lb, before: dict | None, after: dict | None, rx: int | None = None,
               tx: int | None = None) -> dict | None:
    """The LB's checks of a trial: its stats read without error before and after (lb_stats_read)
    and, given the backends' rx and the generator's tx, its forwarded count between them
    (lb_counters_consistent, failed when the stats could not be read: never skipped). Returns
    the per-backend packets."""
    per_backend = _lb_per_backend(before, after)
    if lb is None:
        return per_backend
    errors = [f"{when}: {st['error']}" for when, st in (("before", before), ("after", after)) if "error" in st]
    v.require("lb_stats_read", not errors, "; ".join(errors))
    if rx is not None and tx is not None:
        fwd = sum(per_backend.values()) if per_backend is not None else None
        v.require("lb_counters_consistent",
                  fwd is not None and rx <= fwd * 1.001 + 10 and fwd <= tx * 1.001 + 10,
                  f"lb forwarded {fwd}, backends received {rx}, generator sent {tx}" if fwd is not None
                  else "not checked: the LB's stats could not be read")
    return per_backend


def _lb_split(lb, before: dict | None, after: dict | None) -> dict | None:
    """An LB that splits by flow hash (xenobench.lb.by_hash: Katran) records its split, measured
    between two stats reads (its split_record); None for the class-based ones, whose split the
    profile sets."""
    return lb.split_record(before, after) if lb is not None and by_hash(lb.kind) else None


def _lb_per_backend(before: dict | None, after: dict | None) -> dict | None:
    """Packets the LB sent to each backend between two stats reads (None if either failed)."""
    if not before or not after or "error" in before or "error" in after:
        return None
    b = {x["name"]: x["packets"] for x in before.get("backends", [])}
    return {x["name"]: x["packets"] - b.get(x["name"], 0) for x in after.get("backends", [])}


# --- tunables of the traffic profiles --------------------------------------------------------------
# Only what the experiment decides; xenobench.traffic.fill_tunables adds what the testbed defines
# (VIP, MACs, source range, the DNS backend's classes) and the trial records the filled set.
def payload_tunables(payload: int, flows: int) -> dict:
    return {"payload": payload, "flows": flows}


def background_tunables(split: str, payload: int) -> dict:
    return {"split": split, "payload": payload}


# --- procedures ----------------------------------------------------------------------------------
def offered_phase(cfg, experiment: str, point: dict) -> tuple[int, float, float, str, dict]:
    """(payload, rate, duration, profile, tunables) of an offered-load trial: pps, loss and
    compare's udp_payload profile at the point's rate; a capacity point's profile unpaced (0) for
    capacity_s: rtt_load's background with its split, update's udp_payload over its flows."""
    ex = _ex(cfg, experiment)
    profile = definition(experiment).profile
    if is_capacity_point(point):  # rtt_load's split of the background; update's flows of udp_payload
        payload = int(ex["payload"])
        tun = (background_tunables(point["split"], payload) if "split" in point
               else payload_tunables(payload, int(ex["flows"])))
        return payload, 0.0, float(ex["capacity_s"]), profile, tun
    payload = int(point.get("payload", ex.get("payload")))
    return (payload, float(point.get("rate_pps", ex.get("rate_pps"))), float(ex["duration_s"]), profile,
            payload_tunables(payload, int(ex["flows"])))


def offered_load(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """pps, loss, compare and rtt_load's capacity points: a profile at a rate (0 = the generator's
    maximum) for a duration (offered_phase); the backends' rx counters sampled meanwhile; loss
    against the generator's tx."""
    cfg = ctx.testbed.cfg
    ex = _ex(cfg, ctx.experiment)
    payload, rate, duration, profile, tun = offered_phase(cfg, ctx.experiment, ctx.point)
    with RateSampler(ctx.testbed, backend_ifaces(cfg), float(ex["sample_interval_s"])) as sampler:
        st0 = _lb_stats(lb)
        rx0 = sampler.read_total()
        sampler.start()
        try:
            gen = _traffic_watched(ctx, profile, tun, rate, duration)
            time.sleep(DRAIN_S)
        finally:
            series = sampler.stop()
        rx1 = sampler.read_total()
    st1 = _lb_stats(lb)
    rx = rx1 - rx0
    tx = int(gen.get("tx_packets") or 0)
    steady = steady_state_of_counter(series["samples"])
    v = Validity()
    per_backend = _lb_checks(v, lb, st0, st1, rx, tx)
    fwd = sum(per_backend.values()) if per_backend is not None else None
    gone = ctx.watch.gone()
    out = {"payload": payload, "requested_pps": rate, "generator": gen,
           "tunables": gen.get("tunables"),  # what the generator ran with (it filled the testbed's)
           "rx_packets": rx, "tx_packets": tx, "rx_series": series, "rx_pps": steady.rate,
           "rx_cv_pct": steady.cv_pct, "steady_intervals": steady.intervals,
           "loss_pct": (100.0 * (1 - rx / tx)) if tx else None,
           "lb_forwarded": fwd, "lb_per_backend": per_backend, "lb_stats_after": st1,
           "stopped_early": "; ".join(gone) if gone else None}
    v.require("generator_ok", bool(gen.get("valid")), gen.get("reason") or "generator reported invalid")
    v.require("traffic_sent", tx > 0, "the generator sent nothing")
    v.require("sampler_ok", series["error"] is None, series["error"] or "")
    v.require("steady_state", steady.intervals >= 2,
              f"only {steady.intervals} steady sampling intervals (lengthen duration_s)")
    # counters consistent: nothing is received that was not sent, nor forwarded that was not received
    # (the LB's part in _lb_checks)
    v.require("counters_consistent", rx <= tx * 1.001 + 10,
              f"backends received {rx} > generator sent {tx}")
    cost_s = float(ex.get("prog_cost_s") or 0)
    if lb is not None and cost_s > 0 and not gone:  # after the rate's phase: the statistics slow every program
        out["lb_prog"] = _prog_cost(ctx, profile, tun, rate, cost_s)
    return out, v


def _prog_cost(ctx: TrialContext, profile: str, tun: dict, rate: float, seconds: float) -> dict:
    """The LB program's ns per frame over a phase of the same traffic (xenobench.progcost); a
    failure is recorded, not fatal: the rate above stands without it."""
    def phase():
        g = run_traffic(ctx.testbed, profile, tun, rate, duration_s=seconds)
        # what the report's drop table adds to the rate phase's (the trial's counters span both)
        return {k: g.get(k) for k in ("tx_packets", "tx_link_packets", "tx_dropped", "achieved_pps", "valid", "reason")}
    try:
        return measure_prog_cost(ctx.testbed, phase)
    except XenobenchError as e:
        return {"error": str(e)}


def rtt_probe(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """rtt: N probes to the DNS backend through the LB (or straight to it for lb=none), measured
    with kernel timestamps by the prober and independently from a client-side capture; in the
    paired design every LB variant in interleaved blocks (_paired_blocks)."""
    if paired(ctx.testbed.cfg, ctx.experiment):
        return _paired_blocks(ctx)
    return _probe(ctx, lb)


# --- rtt_load's background level: absolute, or a share of the LB's maximum from the same run -------
def capacity_points(cfg, experiment: str = "rtt_load", point: dict | None = None) -> list[tuple[str, dict]]:
    """(experiment, point) whose valid trials give the maxima an experiment's shares are of
    (rtt_load's capacity levels, update's load): capacity_from self, the experiment's own capacity
    points (xenobench.experiments.self_capacity_points; given a point, those of its split or its
    LB); compare, or the pps point at its payload, one per LB of its points; [] for absolute
    rates, an experiment not sized, and given a point that needs none (level 0, a capacity point).
    The workflow runs them before the points needing them (rules/common.smk); a point the config
    does not plan is refused by name."""
    ex = _ex(cfg, experiment)
    if not ex or not capacity_shares(ex):
        return []
    if point is not None and (is_capacity_point(point) or float(point.get("level", 1)) <= 0):
        return []
    if ex["capacity_from"] == "self":
        return [(experiment, pt) for pt in self_capacity_points(cfg, experiment)
                if point is None or all(pt[k] == point[k] for k in ("split", "lb") if k in point)]
    lbs = measured_lbs(cfg, experiment)
    src, payload = ex["capacity_from"], int(ex["payload"])
    planned = points(cfg, src)
    out = []
    for kind in lbs:
        want = {"lb": kind} if src == "compare" else {"lb": kind, "payload": payload}
        if src == "compare" and int(_ex(cfg, "compare").get("payload", -1)) != payload:
            raise ConfigError(f"Failed to plan {experiment}'s capacity levels: experiments.compare.payload "
                              f"{_ex(cfg, 'compare').get('payload')} is not experiments.{experiment}.payload {payload} "
                              f"in {cfg.path} (set capacity_from: pps, or the same payload)")
        if want not in planned:
            raise ConfigError(f"Failed to plan {experiment}'s capacity levels: {src} does not measure LB {kind!r}"
                              f"{'' if src == 'compare' else f' at {payload} B'} in {cfg.path} (add it to "
                              f"experiments.{src}.lbs{'' if src == 'compare' else ' and payloads'}, or set "
                              f"experiments.{experiment}.level_unit: pps)")
        out.append((src, want))
    return out


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
    or pps's rx_pps; rtt_load's own capacity points' delivered_pps."""
    import statistics
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
    """A background at `share` of the maximum measured in this run (capacity_points): of the
    point's LB, or of the smallest among its LBs' (rtt_load paired: every block of a repetition
    shares one background, the pairs' premise), each the median rate of this run's valid capacity
    trials (measured_maximum)."""
    cfg = ctx.testbed.cfg
    resdir = ctx.attempt.path.parents[4]  # results/<testbed>/trials/<exp>/<point>/rep-<r>/attempt-<n> (layout)
    caps = {pt["lb"]: measured_maximum(resdir, src, pt)
            for src, pt in capacity_points(cfg, ctx.experiment, ctx.point)}
    by = min(caps, key=caps.get)
    return {"capacity_pps": caps, "capacity_of": by, "background_pps": float(round(share * caps[by]))}


def background_level(ctx: TrialContext) -> dict:
    """rtt_load's background rate: level_unit pps as given; capacity: level x the maximum of the
    point's LB (unpaired) or the smallest of its LBs' (paired), from capacity_level (from self:
    those of the point's split)."""
    cfg = ctx.testbed.cfg
    ex = _ex(cfg, ctx.experiment)
    level = float(ctx.point["level"])
    if ex.get("level_unit") == "pps" or level <= 0:
        return {"level": level, "level_unit": ex.get("level_unit"), "background_pps": level if level > 0 else 0.0}
    return {"level": level, "level_unit": "capacity", **capacity_level(ctx, level)}


def rtt_under_load(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """rtt_load: background load with the point's split at its level while the probes run; a
    capacity point: the background unpaced through its LB, no probes (offered_load)."""
    cfg, p = ctx.testbed.cfg, ctx.point
    if is_capacity_point(p):
        return offered_load(ctx, lb)
    ex = _ex(cfg, ctx.experiment)
    bg_level = background_level(ctx)
    level = bg_level["background_pps"]
    measure = _paired_blocks if paired(cfg, ctx.experiment) else (lambda c: _probe(c, lb))
    if level <= 0:
        out, v = measure(ctx)
        return {**out, **bg_level}, v
    tun = background_tunables(p["split"], int(ex["payload"]))
    profile = definition(ctx.experiment).profile
    carrier = None
    if paired(cfg, ctx.experiment):  # one LB carries the background through every block (BlockLBs)
        carrier = BlockLBs(ctx, hold=True)
        measure = lambda c: _paired_blocks(c, carrier)  # noqa: E731
    key = None
    try:
        if carrier is not None:  # up before the background: it never meets a port without its LB
            stop_all(ctx.testbed)  # a block's LB is the only one running
            carrier.use(next((k for k in _block_plan(ctx)[0] if k != NONE), None))
        h = start_traffic(ctx.testbed, profile, tun, level)
        try:
            key = watch_generator(ctx, h)  # the background's generator, checked with the probes' actors
            time.sleep(float(ex["load_settle_s"]))
            out, v = measure(ctx)
        finally:
            ctx.watch.release(key)
            bg = h.stop()
    finally:
        if carrier is not None:
            carrier.close()
    out["background"] = dict(bg)  # carries the filled tunables it ran with
    out.update(bg_level)
    v.require("background_ok", bool(bg.get("valid")), bg.get("reason") or "background load invalid")
    return out, v


def _probe(ctx: TrialContext, lb) -> tuple[dict, Validity]:
    cfg, p = ctx.testbed.cfg, ctx.point
    ex = _ex(cfg, ctx.experiment)
    count = int(ex["probes"])
    via = "direct" if point_lb(cfg, ctx.experiment, p) == "none" else "lb"
    st0 = _lb_stats(lb)
    s = probe(ctx.testbed, count=count, rate_qps=float(ex["rate_qps"]),
              out=ctx.attempt.probe_records, via=via, capture=True, watch=ctx.watch)
    st1 = _lb_stats(lb)
    v = Validity()
    out = {"probe": s, "server": point_server(cfg, ctx.experiment, p), "via": via,
           "lb_per_backend": _lb_checks(v, lb, st0, st1), "lb_split": _lb_split(lb, st0, st1)}
    lost = int(s.get("lost") or 0)
    v.require("probes_answered", s.get("n", 0) > 0, "no probe was answered")
    v.require("loss_below_1pct", lost <= count * MAX_LOST_PCT / 100,
              f"{lost} of {count} probes lost (> {MAX_LOST_PCT:g} %)")
    tol = float(s["tolerance_us"])
    d = s.get("pcap_median_diff_us")
    v.require("prober_pcap_agree", d is not None and abs(d) <= tol,
              f"prober and pcap medians differ by {d} us (tolerance {tol:g} us)")
    return out, v


class BlockLBs:
    """The LB the paired design's blocks run with (use(kind), close()). By default (`hold` false)
    each block starts its LB and stops it after (`use(None)` for a block without one). Under a
    background (rtt_load, `hold`), an LB that is up stays up through the blocks that need none: a
    'none' block probes the DNS backend directly while that LB keeps carrying the background to
    the backends with the point's split, so every block of a repetition has the same background
    (the pairs' premise). Without it, a 'none' block sent the background into the LB node's bare
    port: its kernel stack dropped it at a fraction of the rate, and on the namespace testbed,
    whose generator shares its CPU with that path, the paced background fell to 72-78 % of its
    level (2026-11-25, make all's rtt_load 0.9 points)."""

    def __init__(self, ctx: TrialContext, hold: bool = False):
        self.ctx, self.hold = ctx, hold
        self.lb, self.key = None, None

    @property
    def kind(self) -> str | None:
        return self.lb.kind if self.lb is not None else None

    def use(self, kind: str | None) -> None:
        """Make `kind`'s LB the one running (None: a block that probes directly)."""
        if kind is None and self.hold:
            return
        if self.lb is not None and self.lb.kind != kind:
            self.close()
        if kind is not None and self.lb is None:
            self.lb = get_lb(kind, self.ctx.testbed)
            try:
                self.lb.start()
            except BaseException:
                self.close()
                raise
            self.key = watch_lb(self.ctx, self.lb)

    def close(self) -> None:
        """Stop the running LB (stopped on purpose: released from the watch first)."""
        lb, self.lb = self.lb, None
        if self.key is not None:
            self.ctx.watch.release(self.key)  # a death in its blocks is recorded
            self.key = None
        if lb is not None:
            lb.stop()


def _block_plan(ctx: TrialContext) -> tuple[list[str], int]:
    """The paired design's block order (every LB of `lbs` once per round, shuffled by the seed +
    repetition, xenobench.latency.block_order) and its seed."""
    ex = _ex(ctx.testbed.cfg, ctx.experiment)
    seed = int(ex["seed"]) + int(ctx.repetition)
    return block_order(list(ex["lbs"]), int(ex["blocks"]), seed), seed


def _paired_blocks(ctx: TrialContext, lbs: BlockLBs | None = None) -> tuple[dict, Validity]:
    """The paired design (xenobench.latency): `blocks` rounds, each running every LB of the
    experiment once in a shuffled order (seed + repetition, recorded), `block_probes` probes per
    block, the block's LB running while it probes (BlockLBs: started for the block and stopped
    after it; under a background, `lbs` holds the LB carrying it through the 'none' blocks). The
    client-side capture runs in each LB's first block only (capture start and stop cost ~2.5 s a
    block); the prober's kernel timestamps are the measurement in every block."""
    cfg = ctx.testbed.cfg
    ex = _ex(cfg, ctx.experiment)
    kinds = list(ex["lbs"])
    order, seed = _block_plan(ctx)
    count, rate = int(ex["block_probes"]), float(ex["rate_qps"])
    own = lbs is None
    if own:
        stop_all(ctx.testbed)  # a block's LB is the only one running
        lbs = BlockLBs(ctx)
    blocks, captured = [], set()
    v = Validity()
    stopped = None
    try:
        for i, kind in enumerate(order, 1):
            bd = ctx.attempt.block(i, kind)
            capture = kind not in captured
            captured.add(kind)
            split = None
            try:  # stopped also when its start failed half-way: nothing of a block outlives it
                lbs.use(None if kind == NONE else kind)
                lb = lbs.lb if kind != NONE else None
                hashed = lb is not None and by_hash(lb.kind)
                st0 = _lb_stats(lb) if hashed else None
                s = probe(ctx.testbed, count=count, rate_qps=rate, out=bd.probe_records,
                          via="direct" if kind == NONE else "lb", capture=capture, watch=ctx.watch)
                if hashed:
                    split = _lb_split(lb, st0, _lb_stats(lb))
            except NodeError as e:
                if not ctx.watch.gone():
                    raise
                stopped = f"block {i} ({kind}): {e}"  # an actor is gone: the remaining blocks would measure nothing
            finally:
                if not lbs.hold:
                    lbs.close()
            if stopped is not None:
                break
            s.pop("per_query", None)  # the records and the pcap hold it; outputs stay small
            blocks.append({"block": i, "round": (i - 1) // len(kinds) + 1, "lb": kind, "captured": capture,
                           "records": str(bd.probe_records.relative_to(ctx.attempt.path)), "probe": s,
                           **({"background_via": lbs.kind} if lbs.hold else {}),
                           **({"lb_split": split} if split is not None else {})})
            lost = int(s.get("lost") or 0)
            v.require(f"block_{i}_answered", s.get("n", 0) > 0, f"block {i} ({kind}): no probe was answered")
            v.require(f"block_{i}_loss_below_1pct", lost <= count * MAX_LOST_PCT / 100,
                      f"block {i} ({kind}): {lost} of {count} probes lost (> {MAX_LOST_PCT:g} %)")
            if capture:
                tol, d = float(s["tolerance_us"]), s.get("pcap_median_diff_us")
                v.require(f"block_{i}_prober_pcap_agree", d is not None and abs(d) <= tol,
                          f"block {i} ({kind}): prober and pcap medians differ by {d} us (tolerance {tol:g} us)")
            if ctx.watch.check():
                stopped = f"after block {i} ({kind}): {'; '.join(ctx.watch.gone())}"
                break
    finally:
        if own:
            lbs.close()
    if stopped is not None:  # the remaining blocks would measure nothing
        v.require("blocks_completed", False, f"{len(blocks)} of {len(order)} blocks completed, stopped early "
                                             f"{stopped}")
    out = {"paired": True, "lbs": kinds, "order": order, "order_seed": seed, "rounds": int(ex["blocks"]),
           "block_probes": count, "bootstrap_seed": int(ex["seed"]), "bootstrap_resamples": int(ex["bootstrap"]),
           "server": point_server(cfg, ctx.experiment, ctx.point), "blocks": blocks, "stopped_early": stopped}
    return out, v


# --- NDR/PDR search --------------------------------------------------------------------------------
def search_trial(ctx: TrialContext, lb, duration: float, load: float) -> tuple[dict, Validity]:
    """One measurement of the search (xenobench.search): the udp_payload profile at `load` for
    `duration`; offered = the generator's tx, received = the backends' rx counters (read before and
    after, DRAIN_S after the generator stopped), intended = load x duration frames. A generator
    that sends fewer frames than intended is no invalid trial: the search counts the unsent frames
    as loss (MLRsearch's unsent count). One that sends them all a little slower (start-up inside
    its clock: xdpgen and trafgen send a count) is not short; `stretch` records by how much."""
    cfg, p = ctx.testbed.cfg, ctx.point
    ex = _ex(cfg, ctx.experiment)
    payload = int(p["payload"])
    tun = payload_tunables(payload, int(ex["flows"]))
    profile = definition(ctx.experiment).profile
    with RateSampler(ctx.testbed, backend_ifaces(cfg), 1.0) as sampler:
        st0 = _lb_stats(lb)
        rx0 = sampler.read_total()
        gen = _traffic_watched(ctx, profile, tun, load, duration)
        time.sleep(DRAIN_S)
        rx = sampler.read_total() - rx0
    st1 = _lb_stats(lb)
    tx = int(gen.get("tx_packets") or 0)
    v = Validity()
    per_backend = _lb_checks(v, lb, st0, st1, rx, tx)
    offered_s = float(gen.get("duration_s") or duration)
    intended = int(round(load * duration))
    # the generator's failed checks (xenobench.traffic.trial.judge) except rate and count: the
    # search counts a shortfall as loss
    other = [c for c in gen.get("failed") or () if c not in ("rate", "count")]
    out = {"payload": payload, "intended_load_pps": load, "intended_duration_s": duration,
           "offered": tx, "received": rx, "offered_duration_s": offered_s, "intended_count": intended,
           "unsent": max(0, intended - tx), "stretch": round(offered_s / duration, 4),
           "generator": gen, "tunables": gen.get("tunables"),
           "lb_forwarded": sum(per_backend.values()) if per_backend is not None else None,
           "lb_per_backend": per_backend}
    v.require("generator_ok", not other, f"{', '.join(other)}: {gen.get('reason')}")
    v.require("traffic_sent", tx > 0, "the generator sent nothing")
    v.require("counters_consistent", rx <= tx * 1.001 + 10, f"backends received {rx} > generator sent {tx}")
    return out, v


def ndr_pdr_search(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """ndr_pdr: one MLRsearch per repetition (xenobench.search); its trials are trial directories
    below this one (search/trial-<k>/), its record search/search.json."""
    cfg, p = ctx.testbed.cfg, ctx.point
    ex = _ex(cfg, ctx.experiment)
    payload = int(p["payload"])
    cap = line_rate_pps(payload, float(ex["line_gbps"]))
    settings = SearchSettings.from_section(ex, f"{cfg.path}: experiments.ndr_pdr",
                                           max_load_pps=min(float(ex["max_load_pps"]), cap))
    sdir = TrialDir(ctx.attempt.path.parent).search

    def trial(c, d, load):  # each of the search's trials watches the set-up, the search stops when it is gone
        if ctx.watch.check():
            raise ActorGone("; ".join(ctx.watch.gone()))
        watch_lb(c, lb)
        return search_trial(c, lb, d, load)
    run = trial_runner(ctx.testbed, ctx.experiment, p, ctx.repetition, sdir, trial, ifaces=measured_ifaces(cfg),
                       max_attempts=int(cfg.section("experiments")["max_attempts"]))
    try:
        rec = run_search(settings, run, sdir)
    except ActorGone as e:
        v = Validity()
        v.require("search_completed", False, f"stopped early: {e}")
        return {"payload": payload, "stopped_early": str(e)}, v
    out = {"payload": payload, "search_record": str(sdir.record.relative_to(ctx.attempt.path.parent)),
           "max_load_pps": settings.max_load_pps, "min_load_pps": settings.min_load_pps,
           "relative_width_goal": settings.relative_width, "goals": rec["goals"], "n_trials": rec["n_trials"],
           "trial_seconds": rec["trial_seconds"], "search_wall_s": rec["wall_s"]}
    v = Validity()
    for g in rec["goals"]:
        v.require(f"{g['name']}_lower_bound", not g["below_min_load"],
                  f"{g['name']}: even {settings.min_load_pps:.0f} pps (min_load_pps) lost more than "
                  f"{100 * g['loss_ratio']:g} %")
    ndr = goal(rec, "NDR")
    if ndr is not None and ndr["at_max_load"]:  # valid, but a lower bound only
        out["note"] = f"NDR at max load {settings.max_load_pps:.0f} pps: raise max_load_pps to find it"
    return out, v


def backend_update(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """update: backend changes under load (the logic: xenobench.update.backend_update)."""
    from .update import backend_update as measure
    return measure(ctx, lb)


def interleaved_rates(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """rank: every LB loaded at once, the port's program switched atomically between short blocks
    (the logic: xenobench.rank.interleaved_rates)."""
    from .rank import interleaved_rates as measure
    return measure(ctx, lb)


PROCEDURES = {"offered_load": offered_load, "rtt_probe": rtt_probe, "rtt_under_load": rtt_under_load,
              "ndr_pdr_search": ndr_pdr_search, "backend_update": backend_update,
              "interleaved_rates": interleaved_rates}
#: the outputs a definition's tidy.metrics may read (`from`: a key, or a dotted path below one), per
#: procedure whose rows are built from its definition's metrics (xenobench.aggregate._rate_rows); a
#: typo'd `from` is refused when the definitions load (experiment plan, snakemake -n), not at aggregate
METRIC_OUTPUTS = {"offered_load": ("payload", "requested_pps", "generator", "tunables", "rx_packets", "tx_packets",
                                   "rx_series", "rx_pps", "rx_cv_pct", "steady_intervals", "loss_pct",
                                   "lb_forwarded", "lb_per_backend", "lb_stats_after", "stopped_early", "lb_prog")}


def _rank_precheck(testbed, experiment: str) -> None:
    from .rank import precheck
    precheck(testbed, experiment)


#: what a procedure checks of the testbed before a point's set-up (a refusal names the LB and why)
PRECHECKS = {"interleaved_rates": _rank_precheck}


# --- a whole point ---------------------------------------------------------------------------------
def find_point(cfg, experiment: str, pid: str) -> dict:
    pts = points(cfg, experiment)
    for pt in pts:
        if point_id(pt) == pid:
            return pt
    known = ", ".join(point_id(x) for x in pts) or "none"
    raise ConfigError(f"Failed to find point {pid!r} of experiment {experiment!r} in {cfg.path} "
                      f"(planned: {known})")


def run_point(testbed, experiment: str, point: dict, results_root: Path = Path("results"),
              progress=print) -> dict:
    """Every repetition of one point; writes <point dir>/point.json last (Snakemake's output).
    Completed repetitions recorded for this point are not re-run (xenobench.trials.reusable)."""
    cfg = testbed.cfg
    d = definition(experiment)
    proc = PROCEDURES[d.procedure]
    facts = point_facts(cfg, experiment, point)
    stop_when_orphaned(progress)  # a job of a Snakemake that was killed does not run on unsupervised

    def measure(ctx, lb):
        revive_setup(testbed, lb, facts["server"], progress)
        watch_setup(ctx, lb, facts["server"])
        out, v = proc(ctx, lb)
        return {"facts": facts, **out}, v
    ex_all = cfg.section("experiments")
    reps = repetitions(cfg, experiment)
    tree = ResultsTree(Path(results_root), cfg.name)
    todo = [r for r in range(1, reps + 1)  # complete and recorded for this point: kept; else (re-)run
            if not reusable(tree.trial(experiment, point, r), trial_params(cfg, experiment, point, r), progress)]
    results = []
    if todo:
        check_results_root(Path(results_root), ex_all["min_free_mb"])  # room for the trials, before anything starts
        if d.procedure in PRECHECKS:
            PRECHECKS[d.procedure](testbed, experiment)
        testbed.up()  # idempotent; a resumed run may find the testbed down
        with point_setup(testbed, experiment, point, progress) as lb:
            for r in todo:
                run_trial(testbed, experiment, point, r, tree.trial(experiment, point, r),
                          lambda ctx: measure(ctx, lb), ifaces=measured_ifaces(cfg),
                          # a search retries its own trials; a failed search is recorded, not re-run
                          max_attempts=1 if d.kind == "search" else int(ex_all["max_attempts"]),
                          settle_s=float(ex_all["settle_s"]),
                          cooldown_s=float(ex_all["cooldown_s"]), progress=progress, check=check_trial)
    for r in range(1, reps + 1):
        res = tree.trial(experiment, point, r).read_result()
        results.append({"repetition": r, "valid": res["valid"],
                        "reasons": [x for a in res["attempts"] if a["attempt"] == res["chosen_attempt"]
                                    for x in a["reasons"]]})
    summary = {"experiment": experiment, "point": point, "testbed": cfg.name, "repetitions": results,
               "valid": sum(r["valid"] for r in results), "invalid": sum(not r["valid"] for r in results)}
    write_json_atomic(tree.point_summary(experiment, point), summary, indent=1)
    return summary
