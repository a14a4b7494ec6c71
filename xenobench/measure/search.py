"""The search kind (ndr_pdr): one MLRsearch per repetition (xenobench.search: the search's
settings, its measurer and record), each of its trials a trial directory below the repetition's
(search/trial-<k>/): the udp_payload profile at a load for a duration, offered = the generator's
tx, received = the backends' rx counters (RFC 2544's throughput, searched as CSIT does).

Owns its procedure (ndr_pdr_search), the trial of the search (search_trial), and its rows: per
goal (NDR, PDR) the lower and upper bound, the conditional throughput and the width reached.
"""

from __future__ import annotations

import sys
import time

from ..actors import ActorGone
from ..layout import TrialDir
from ..lb.inhardware import CHECK as IN_HARDWARE
from ..results import line_rate_pps, row
from ..sampler import RateSampler
from ..search import SearchSettings, goal, run_search, trial_runner
from ..trials import TrialContext, Validity
from .common import (DRAIN_S, backend_ifaces, lb_checks, lb_stats, measured_ifaces, payload_tunables, traffic_watched,
                     watch_lb, within_skew)

KIND = "search"
TABLES = ()  # its definitions' own (tidy.tables)


def search_trial(ctx: TrialContext, lb, duration: float, load: float) -> tuple[dict, Validity]:
    """One measurement of the search (xenobench.search): the udp_payload profile at `load` for
    `duration`; offered = the generator's tx, received = the backends' rx counters (read before and
    after, DRAIN_S after the generator stopped), intended = load x duration frames. A generator
    that sends fewer frames than intended is no invalid trial: the search counts the unsent frames
    as loss (MLRsearch's unsent count). One that sends them all a little slower (start-up inside
    its clock: xdpgen and trafgen send a count) is not short; `stretch` records by how much."""
    payload = int(ctx.knob("payload"))
    tun = payload_tunables(payload, int(ctx.knob("flows")))
    profile = ctx.plan.profile
    with RateSampler(ctx.testbed, backend_ifaces(ctx.testbed.cfg), 1.0) as sampler:
        st0 = lb_stats(lb)
        rx0, d0 = sampler.read_total(), sampler.read_dropped()
        gen = traffic_watched(ctx, profile, tun, load, duration)
        time.sleep(DRAIN_S)
        rx = sampler.read_total() - rx0
        dropped = sampler.read_dropped() - d0
    st1 = lb_stats(lb)
    tx = int(gen.get("tx_packets") or 0)
    v = Validity()
    per_backend = lb_checks(v, lb, st0, st1, rx, tx, dropped)
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
           "lb_per_backend": per_backend, IN_HARDWARE: (st1 or {}).get(IN_HARDWARE)}
    v.require("generator_ok", not other, f"{', '.join(other)}: {gen.get('reason')}")
    v.require("traffic_sent", tx > 0, "the generator sent nothing")
    v.require("counters_consistent", within_skew(rx, tx), f"backends received {rx} > generator sent {tx}")
    return out, v


def _terminal(message: str) -> None:
    """The search's per-trial lines on stderr: the workflow shows a job's stderr on the terminal
    (its stdout only in the log), and a search runs for minutes."""
    print(message, file=sys.stderr, flush=True)


def ndr_pdr_search(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """ndr_pdr: one MLRsearch per repetition (xenobench.search); its trials are trial directories
    below this one (search/trial-<k>/), its record search/search.json."""
    cfg, p = ctx.testbed.cfg, ctx.point
    payload = int(ctx.knob("payload"))
    cap = line_rate_pps(payload, float(ctx.knob("line_gbps")))
    settings = SearchSettings.from_section({**ctx.section, **p}, f"{cfg.path}: experiments.{ctx.experiment}",
                                           max_load_pps=min(float(ctx.knob("max_load_pps")), cap))
    sdir = TrialDir(ctx.attempt.path.parent).search

    def trial(c, d, load):  # each of the search's trials watches the set-up, the search stops when it is gone
        if ctx.watch.check():
            raise ActorGone("; ".join(ctx.watch.gone()))
        watch_lb(c, lb)
        return search_trial(c, lb, d, load)
    run = trial_runner(ctx.testbed, ctx.experiment, p, ctx.repetition, sdir, trial, ifaces=measured_ifaces(cfg),
                       max_attempts=int(cfg.section("experiments")["max_attempts"]), plan=ctx.plan, progress=_terminal)
    try:
        rec = run_search(settings, run, sdir, progress=_terminal)
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


PROCEDURES = {"ndr_pdr_search": ndr_pdr_search}
#: each of a search's trials is a run_trial of its own, judged by the machine rule and retried there;
#: the repetition around them records the machine, and is not judged again (xenobench.procedures)
JUDGED_INSIDE = True


def headline(o: dict) -> str:
    """A valid search's value on the terminal: each goal's lower bound (NDR, PDR) and the trial count."""
    goals = ", ".join(f"{g['name']} {g['lower_bound_pps'] / 1e6:.3f} Mpps" for g in o["goals"]
                      if g.get("lower_bound_pps") is not None)
    return f"{goals or 'no bound found'} ({o['n_trials']} search trials)"


# --- rows --------------------------------------------------------------------------------------------
def rows(t) -> dict[str, list[dict]]:
    """A search's rows (`t`: xenobench.measure.TrialRecord): per goal of the search: the relevant lower bound (the highest load at the goal's loss ratio:
    NDR, PDR), the upper bound, the conditional throughput and the width reached; the search's
    trial count and time. offered_pps = the lower bound, measured_pps = its conditional throughput."""
    o = t.outputs
    src = str((t.trial.path / o["search_record"]).relative_to(t.resdir))
    common = dict(t.common, payload_bytes=o["payload"], source=src)
    out = []
    for g in o["goals"]:
        if g["lower_bound_pps"] is None:
            continue
        n = g["name"].lower()
        c = dict(common, offered_pps=g["lower_bound_pps"], measured_pps=g["conditional_throughput_pps"])
        out.append(row(**c, metric=f"{n}_pps", value=g["lower_bound_pps"], unit="packets/s"))
        out.append(row(**c, metric=f"{n}_conditional_throughput_pps", value=g["conditional_throughput_pps"],
                       unit="packets/s"))
        if g["upper_bound_pps"] is not None:
            out.append(row(**c, metric=f"{n}_upper_bound_pps", value=g["upper_bound_pps"], unit="packets/s"))
            out.append(row(**c, metric=f"{n}_relative_width", value=g["relative_width"], unit="ratio"))
    out.append(row(**common, metric="search_trials", value=o["n_trials"], unit="count"))
    out.append(row(**common, metric="search_trial_seconds", value=o["trial_seconds"], unit="s"))
    out.append(row(**common, metric="search_wall_s", value=o["search_wall_s"], unit="s"))
    return {t.definition.tidy["tables"][0]: out}


