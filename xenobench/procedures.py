"""The trial procedures of the five live measurements (thesis ch. 7, experiments/*.yaml), written
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

from .dns import start_server, stop_server
from .errors import ConfigError, XenobenchError
from .experiments import definitions, points
from .lb import KINDS as LB_KINDS
from .lb import get_lb
from .layout import ResultsTree, point_id, write_json_atomic
from .sampler import RateSampler
from .steady import steady_state_of_counter
from .rtt import probe
from .traffic import fill_tunables, run_traffic, start_traffic
from .trials import TrialContext, Validity, run_trial

log = logging.getLogger(__name__)

DRAIN_S = 0.3          # after the generator stops, frames still in flight reach the backends
MIN_RATE_RATIO = 0.99  # paper §5: offered load verified with counters; a trial reaches >= 99 %
MAX_LOST_PCT = 1.0     # experiments/rtt*.yaml: no probe lost beyond 1 %


def _ex(cfg, experiment: str) -> dict:
    return cfg.section("experiments").get(experiment) or {}


def backend_ifaces(cfg) -> list[tuple[str, str]]:
    return [(n.name, n.iface().name) for n in cfg.backend_nodes()]


def measured_ifaces(cfg) -> list[tuple[str, str]]:
    """Interfaces whose counters every trial snapshots before and after."""
    lb = cfg.role("lb")
    return [(cfg.role("loadgen").name, cfg.role("loadgen").iface().name),
            (cfg.role("client").name, cfg.role("client").iface().name), *backend_ifaces(cfg),
            *((lb.name, i.name) for i in lb.interfaces)]


def point_lb(cfg, experiment: str, point: dict) -> str:
    return point.get("lb") or _ex(cfg, experiment).get("lb") or "none"


def point_server(cfg, experiment: str, point: dict) -> str | None:
    if experiment not in ("rtt", "rtt_load"):
        return None
    return point.get("server") or _ex(cfg, experiment).get("server") or "xdp"


# --- set-up of a point ---------------------------------------------------------------------------
@contextlib.contextmanager
def point_setup(testbed, experiment: str, point: dict, progress=print):
    """DNS server and load balancer of the point, started once for all its repetitions."""
    cfg = testbed.cfg
    stack = contextlib.ExitStack()
    with stack:
        server = point_server(cfg, experiment, point)
        if server:
            stop_server(testbed, server)  # a server left by an interrupted run
            progress(f"[{experiment}] starting DNS server {server}")
            start_server(testbed, server)
            stack.callback(stop_server, testbed, server)
        kind = point_lb(cfg, experiment, point)
        for other in LB_KINDS:  # one LB at a time on the LB node
            lb_other = get_lb(other, testbed)
            if lb_other.running():
                progress(f"[{experiment}] stopping {other} left running")
                lb_other.stop()
        lb = None
        if kind != "none":
            lb = get_lb(kind, testbed)
            progress(f"[{experiment}] starting load balancer {kind}")
            lb.start()
            stack.callback(lb.stop)
        yield lb


def _lb_stats(lb) -> dict | None:
    if lb is None:
        return None
    try:
        return lb.stats()
    except XenobenchError as e:
        return {"error": str(e)}


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
def offered_load(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """pps, loss and compare: the udp_payload profile at a rate (0 = the generator's maximum) for a
    duration; the backends' rx counters sampled meanwhile; loss against the generator's tx."""
    cfg, p = ctx.testbed.cfg, ctx.point
    ex = _ex(cfg, ctx.experiment)
    payload = int(p.get("payload", ex.get("payload")))
    rate = float(p.get("rate_pps", ex.get("rate_pps")))
    duration = float(ex["duration_s"])
    tun = payload_tunables(payload, int(ex["flows"]))
    sampler = RateSampler(ctx.testbed, backend_ifaces(cfg), float(ex["sample_interval_s"]))
    st0 = _lb_stats(lb)
    rx0 = sampler.read_total()
    sampler.start()
    try:
        gen = run_traffic(ctx.testbed, "udp_payload", tun, rate, duration_s=duration)
        time.sleep(DRAIN_S)
    finally:
        series = sampler.stop()
    rx1 = sampler.read_total()
    st1 = _lb_stats(lb)
    rx = rx1 - rx0
    tx = int(gen.get("tx_packets") or 0)
    steady = steady_state_of_counter(series["samples"])
    per_backend = _lb_per_backend(st0, st1)
    fwd = sum(per_backend.values()) if per_backend is not None else None
    out = {"payload": payload, "requested_pps": rate, "generator": gen,
           "tunables": fill_tunables(cfg, "udp_payload", tun),
           "rx_packets": rx, "tx_packets": tx, "rx_series": series, "rx_pps": steady.rate,
           "rx_cv_pct": steady.cv_pct, "steady_intervals": steady.intervals,
           "loss_pct": (100.0 * (1 - rx / tx)) if tx else None,
           "lb_forwarded": fwd, "lb_per_backend": per_backend, "lb_stats_after": st1}
    v = Validity()
    v.require("generator_ok", bool(gen.get("valid")), gen.get("reason") or "generator reported invalid")
    v.require("traffic_sent", tx > 0, "the generator sent nothing")
    v.require("sampler_ok", series["error"] is None, series["error"] or "")
    v.require("steady_state", steady.intervals >= 2,
              f"only {steady.intervals} steady sampling intervals (lengthen duration_s)")
    # counters consistent: nothing is received that was not sent, nor forwarded that was not received
    v.require("counters_consistent", rx <= tx * 1.001 + 10,
              f"backends received {rx} > generator sent {tx}")
    if fwd is not None:
        v.require("lb_counters_consistent", rx <= fwd * 1.001 + 10 and fwd <= tx * 1.001 + 10,
                  f"lb forwarded {fwd}, backends received {rx}, generator sent {tx}")
    return out, v


def rtt_probe(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """rtt: N probes to the DNS backend through the LB (or straight to it for lb=none), measured
    with kernel timestamps by the prober and independently from a client-side capture."""
    return _probe(ctx, lb)


def rtt_under_load(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """rtt_load: background load with the point's split at its level while the probes run."""
    cfg, p = ctx.testbed.cfg, ctx.point
    ex = _ex(cfg, ctx.experiment)
    level = float(p["level_pps"])
    if level <= 0:
        return _probe(ctx, lb)
    tun = background_tunables(p["split"], int(ex["payload"]))
    h = start_traffic(ctx.testbed, "background_split", tun, level)
    try:
        time.sleep(float(ex["load_settle_s"]))
        out, v = _probe(ctx, lb)
    finally:
        bg = h.stop()
    out["background"] = {"tunables": fill_tunables(cfg, "background_split", tun), **bg}
    v.require("background_ok", bool(bg.get("valid")), bg.get("reason") or "background load invalid")
    return out, v


def _probe(ctx: TrialContext, lb) -> tuple[dict, Validity]:
    cfg, p = ctx.testbed.cfg, ctx.point
    ex = _ex(cfg, ctx.experiment)
    count = int(ex["probes"])
    via = "direct" if point_lb(cfg, ctx.experiment, p) == "none" else "lb"
    st0 = _lb_stats(lb)
    s = probe(ctx.testbed, count=count, rate_qps=float(ex["rate_qps"]),
              out=ctx.attempt.probe_records, via=via, capture=True)
    st1 = _lb_stats(lb)
    out = {"probe": s, "server": point_server(cfg, ctx.experiment, p), "via": via,
           "lb_per_backend": _lb_per_backend(st0, st1)}
    v = Validity()
    lost = int(s.get("lost") or 0)
    v.require("probes_answered", s.get("n", 0) > 0, "no probe was answered")
    v.require("loss_below_1pct", lost <= count * MAX_LOST_PCT / 100,
              f"{lost} of {count} probes lost (> {MAX_LOST_PCT:g} %)")
    tol = float(s["tolerance_us"])
    d = s.get("pcap_median_diff_us")
    v.require("prober_pcap_agree", d is not None and abs(d) <= tol,
              f"prober and pcap medians differ by {d} us (tolerance {tol:g} us)")
    return out, v


PROCEDURES = {"offered_load": offered_load, "rtt_probe": rtt_probe, "rtt_under_load": rtt_under_load}


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
    Completed repetitions (result.json present) are not re-run."""
    cfg = testbed.cfg
    d = definitions()[experiment]
    proc = PROCEDURES[d["procedure"]]
    ex_all = cfg.section("experiments")
    reps = int(ex_all["repetitions"])
    tree = ResultsTree(Path(results_root), cfg.name)
    todo = [r for r in range(1, reps + 1) if not tree.trial(experiment, point, r).complete]
    results = []
    if todo:
        testbed.up()  # idempotent; a resumed run may find the testbed down
        with point_setup(testbed, experiment, point, progress) as lb:
            for r in todo:
                run_trial(testbed, experiment, point, r, tree.trial(experiment, point, r),
                          lambda ctx: proc(ctx, lb), ifaces=measured_ifaces(cfg),
                          max_attempts=int(ex_all["max_attempts"]), settle_s=float(ex_all["settle_s"]),
                          cooldown_s=float(ex_all["cooldown_s"]), progress=progress)
    for r in range(1, reps + 1):
        res = tree.trial(experiment, point, r).read_result()
        results.append({"repetition": r, "valid": res["valid"],
                        "reasons": [x for a in res["attempts"] if a["attempt"] == res["chosen_attempt"]
                                    for x in a["reasons"]]})
    summary = {"experiment": experiment, "point": point, "testbed": cfg.name, "repetitions": results,
               "valid": sum(r["valid"] for r in results), "invalid": sum(not r["valid"] for r in results)}
    write_json_atomic(tree.point_summary(experiment, point), summary, indent=1)
    return summary
