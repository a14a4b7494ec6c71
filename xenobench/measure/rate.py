"""The rate kind (pps, loss, compare; and every capacity point of another kind): a traffic profile
at a rate (0 = the generator's maximum) for a duration, the backends' rx counters sampled meanwhile,
loss against the generator's tx (thesis Sec. 7.2-7.3: TRex at a rate, the backends' rx_packets_phy
per second).

Owns its procedure (offered_load), the outputs its definitions' tidy.metrics may read (OUTPUTS), and
its rows: one per metric of the definition (rows), and a capacity point's maximum (capacity_rows,
table rtt_capacity).

The paired design (config `paired: true`, pps and compare on the namespace testbed): a point's
repetition measures every LB of `lbs` in interleaved blocks with the reference, the design of
xenobench.measure.rank, whose procedure it runs. Its rows: per repetition and LB the absolute rate
(the median of the LB's kept blocks) under the definition's metrics, and per point each LB's rate
relative to the reference with its bootstrap 95 % CI (rank.ranking_rows) in the same table. On a
machine shared by the generator and the LB, a rate measured alone holds the machine's state; the
ratio to the reference measured in the same rounds divides it out (docs/vm-noise.md).
"""

from __future__ import annotations

import time

from .. import machine
from ..errors import DataError, XenobenchError
from ..progcost import measure as measure_prog_cost
from ..results import metric, row
from ..sampler import RateSampler
from ..steady import parts_cv_pct, steady_state_of_counter
from ..traffic import run_traffic
from ..trials import TrialContext, Validity
from . import rank
from .common import (DRAIN_S, background_tunables, backend_ifaces, delivered_pps, is_capacity_point, lb_checks,
                     lb_stats, payload_tunables, traffic_watched, within_skew)

KIND = "rate"
#: the outputs a definition's tidy.metrics may read (`from`: a key, or a dotted path below one); a
#: typo'd `from` is refused when the definitions load (experiment plan, snakemake -n)
OUTPUTS = ("payload", "requested_pps", "generator", "tunables", "rx_packets", "tx_packets", "rx_series", "rx_pps",
           "rx_cv_pct", "steady_intervals", "loss_pct", "lb_forwarded", "lb_per_backend", "lb_stats_after",
           "stopped_early", "lb_prog",
           # the interleaved design's per-LB figure (rank.per_lb): the share of its blocks the generator set
           "generator_bound_share")
#: the tables this kind writes besides its definitions' own (tidy.tables)
TABLES = ("rtt_capacity",)


def offered_phase(ctx: TrialContext) -> tuple[int, float, float, str, dict]:
    """(payload, rate, duration, profile, tunables) of an offered-load trial: the profile at the
    point's rate; a capacity point's profile unpaced (0) for capacity_s, with the point's split
    (rtt_load's background) or over `flows` (update's udp_payload)."""
    payload = int(ctx.knob("payload"))
    if is_capacity_point(ctx.point):
        tun = (background_tunables(ctx.point["split"], payload) if "split" in ctx.point
               else payload_tunables(payload, int(ctx.knob("flows"))))
        return payload, 0.0, float(ctx.knob("capacity_s")), ctx.plan.profile, tun
    return (payload, float(ctx.knob("rate_pps")), float(ctx.knob("duration_s")), ctx.plan.profile,
            payload_tunables(payload, int(ctx.knob("flows"))))


def paired(ctx: TrialContext) -> bool:
    """Whether this trial runs the paired design (module docstring); a capacity point never does."""
    return bool(ctx.knob("paired", False)) and not is_capacity_point(ctx.point)


def offered_load(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """A profile at a rate for a duration (offered_phase); the backends' rx counters sampled
    meanwhile; loss against the generator's tx. In the paired design, the interleaved blocks of
    every LB of the list (xenobench.measure.rank.interleaved_rates)."""
    if paired(ctx):
        return rank.interleaved_rates(ctx)
    payload, rate, duration, profile, tun = offered_phase(ctx)
    with RateSampler(ctx.testbed, backend_ifaces(ctx.testbed.cfg), float(ctx.knob("sample_interval_s"))) as sampler:
        st0 = lb_stats(lb)
        rx0, d0 = sampler.read_total(), sampler.read_dropped()
        sampler.start()
        try:
            gen = traffic_watched(ctx, profile, tun, rate, duration)
            time.sleep(DRAIN_S)
        finally:
            series = sampler.stop()
        rx1, d1 = sampler.read_total(), sampler.read_dropped()
    st1 = lb_stats(lb)
    rx = rx1 - rx0
    tx = int(gen.get("tx_packets") or 0)
    steady = steady_state_of_counter(series["samples"])
    v = Validity()
    per_backend = lb_checks(v, lb, st0, st1, rx, tx, d1 - d0)  # frames a full ring refused: counted
    fwd = sum(per_backend.values()) if per_backend is not None else None
    gone = ctx.watch.gone()
    out = {"payload": payload, "requested_pps": rate, "generator": gen,
           "tunables": gen.get("tunables"),  # what the generator ran with (it filled the testbed's)
           "rx_packets": rx, "tx_packets": tx, "rx_series": series, "rx_pps": steady.rate,
           "rx_cv_pct": steady.cv_pct, "steady_intervals": steady.intervals,
           "loss_pct": (100.0 * (1 - rx / tx)) if tx else None,
           "lb_forwarded": fwd, "lb_per_backend": per_backend, "lb_stats_after": st1,
           "stopped_early": "; ".join(gone) if gone else None}
    if rate == 0:  # unpaced: its rate moves only with the machine's state, which the machine rule judges
        out[machine.MEASURED_KEY] = {"unpaced_cv_pct": parts_cv_pct(series["samples"])}
    v.require("generator_ok", bool(gen.get("valid")), gen.get("reason") or "generator reported invalid")
    v.require("traffic_sent", tx > 0, "the generator sent nothing")
    v.require("sampler_ok", series["error"] is None, series["error"] or "")
    v.require("steady_state", steady.intervals >= 2,
              f"only {steady.intervals} steady sampling intervals (lengthen duration_s)" if tx > 0 else
              "the generator sent nothing: no rate to find (see generator_ok and traffic_sent)")
    # counters consistent: nothing is received that was not sent, nor forwarded that was not received
    # (the LB's part in lb_checks)
    v.require("counters_consistent", within_skew(rx, tx), f"backends received {rx} > generator sent {tx}")
    cost_s = float(ctx.knob("prog_cost_s", 0) or 0)
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


PROCEDURES = {"offered_load": offered_load}


#: when the plan is made, and before a point's set-up: a paired section's reference is one of its
#: LBs, and they can be switched on the LB's port (rank's checks)
check_section, precheck = rank.check_paired_section, rank.precheck_paired


def headline(o: dict) -> str:
    """A valid trial's value on the terminal: the backends' steady rx rate and the loss; in the
    paired design each LB's rate and its ratio to the reference."""
    if "blocks" in o:
        rates = "; ".join(f"{k} {v['rx_pps'] / 1e6:.3f} Mpps" for k, v in rank.per_lb(o).items())
        return f"{rates} | {rank.headline(o)}"
    loss = o.get("loss_pct")
    return f"rx {o['rx_pps'] / 1e6:.3f} Mpps" + ("" if loss is None else f", loss {loss:.2f} %")


# --- rows --------------------------------------------------------------------------------------------
def _output(o: dict, dotted: str):
    """outputs[a][b]... for a definition's metric `from: a.b`; None where absent."""
    v = o
    for part in dotted.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v


def rows(t) -> dict[str, list[dict]]:
    """A rate trial's rows (`t`: xenobench.measure.TrialRecord): one per metric of its definition's
    tidy.metrics, in its first table; in the paired design one set per LB of the repetition, read
    from that LB's absolute rate (rank.per_lb)."""
    d, o = t.definition, t.outputs
    gen = o.get("generator") or {}
    if "blocks" in o:
        return {d.tidy["tables"][0]: [
            r for k, vals in rank.per_lb(o).items()
            for r in _metric_rows(t, vals, dict(t.common, lb=k, payload_bytes=o["payload"],
                                                offered_pps=gen.get("achieved_pps"), measured_pps=vals["rx_pps"]))]}
    common = dict(t.common, payload_bytes=o["payload"], offered_pps=gen.get("achieved_pps"),
                  measured_pps=o["rx_pps"])
    return {d.tidy["tables"][0]: _metric_rows(t, o, common)}


def _metric_rows(t, o: dict, common: dict) -> list[dict]:
    d, out = t.definition, []
    for m in d.tidy.get("metrics") or ():
        v = _output(o, m["from"])
        if v is None:
            if m.get("optional"):
                continue
            raise DataError(f"Failed to aggregate trial {t.trial.path}: outputs.{m['from']} (metric {m['metric']} "
                            f"of experiments/{d.id}.yaml) is missing from result.json")
        out.append(row(**common, metric=m["metric"], value=v, unit=metric(m["metric"]).unit))
    return out


def point_rows(records: list) -> dict[str, list[dict]]:
    """In the paired design, each LB's rate relative to the reference over the point's valid
    repetitions (rank.ranking_rows), in the definition's first table; {} otherwise."""
    recs = [t for t in records if "blocks" in t.outputs]
    if not recs:
        return {}
    return {recs[0].definition.tidy["tables"][0]: rank.ranking_rows(recs)}


def capacity_rows(t) -> dict[str, list[dict]]:
    """A capacity point's maximum (the one its experiment's levels are shares of): no probes, no
    rows of its experiment's own kind."""
    o = t.outputs
    gen, cap = o.get("generator") or {}, delivered_pps(o)
    if cap is None:
        raise DataError(f"Failed to aggregate trial {t.trial.result}: a capacity trial without rx_packets, "
                        "tx_packets or generator.duration_s (not a result xenobench wrote?)")
    return {"rtt_capacity": [row(**t.common, server=t.facts.get("server"), payload_bytes=o["payload"],
                                 offered_pps=gen.get("achieved_pps"), measured_pps=cap, split=t.point.get("split"),
                                 metric="max_pps", value=cap, unit="packets/s")]}
