"""The search kind (ndr_pdr): one MLRsearch per repetition (xenobench.search: the search's
settings, its measurer and record), each of its trials a trial directory below the repetition's
(search/trial-<k>/): the udp_payload profile at a load for a duration, offered = the generator's
tx, received = the backends' rx counters (RFC 2544's throughput, searched as CSIT does).

Owns its procedure (ndr_pdr_search), the trial of the search (search_trial), and its rows: per
goal (NDR, PDR) the lower and upper bound, the conditional throughput and the width reached.

The paired design (config `paired: true`, the namespace testbed; docs/vm-noise.md): one repetition
runs one search per LB of `lbs` at once, their trials strictly taking turns
(xenobench.search.run_searches_in_turns), every LB started loaded, not attached, and the port's
program switched to the search's LB before each of its trials (xenobench.measure.rank's
start_unattached and port_switch); a trial is valid only where its LB forwarded and no other LB
did. Each search keeps its trials and record in search/<lb>/. Rows: each LB's as unpaired, per
repetition each LB's NDR and PDR over the reference's (ndr_vs_<ref>, pdr_vs_<ref>), and per point
the median of those ratios with a bootstrap 95 % CI over the point's valid repetitions (of this run
only: rank.rank_rows, a repetition for a round) and its verdict, from two repetitions on.
"""

from __future__ import annotations

import sys
import time

from ..actors import ActorGone
from ..layout import SearchDir, TrialDir
from ..lb import stop_all
from ..lb.inhardware import CHECK as IN_HARDWARE
from ..results import line_rate_pps, row
from ..sampler import RateSampler
from ..search import SearchSettings, TurnError, goal, run_search, run_searches_in_turns, trial_runner
from ..trials import TrialContext, Validity
from . import rank
from .common import (DRAIN_S, backend_ifaces, lb_checks, lb_stats, measured_ifaces, payload_tunables, traffic_watched,
                     watch_lb, within_skew)

KIND = "search"
TABLES = ()  # its definitions' own (tidy.tables)


def search_trial(ctx: TrialContext, lb, duration: float, load: float, others: dict | None = None,
                 tol_pct: float = 0.0) -> tuple[dict, Validity]:
    """One measurement of the search (xenobench.search): the udp_payload profile at `load` for
    `duration`; offered = the generator's tx, received = the backends' rx counters (read before and
    after, DRAIN_S after the generator stopped), intended = load x duration frames. A generator
    that sends fewer frames than intended is no invalid trial: the search counts the unsent frames
    as loss (MLRsearch's unsent count). One that sends them all a little slower (start-up inside
    its clock: xdpgen and trafgen send a count) is not short; `stretch` records by how much.
    `others` (the paired design: the LBs loaded but not attached, by kind): valid only where none of
    them forwarded a frame and `lb` forwarded at least (1 - tol_pct %) of what the backends received."""
    payload = int(ctx.knob("payload"))
    tun = payload_tunables(payload, int(ctx.knob("flows")))
    profile = ctx.plan.profile
    with RateSampler(ctx.testbed, backend_ifaces(ctx.testbed.cfg), 1.0) as sampler:
        o0 = {k: d.forwarded() for k, d in (others or {}).items()}
        st0 = lb_stats(lb)
        rx0, d0 = sampler.read_total(), sampler.read_dropped()
        gen = traffic_watched(ctx, profile, tun, load, duration)
        time.sleep(DRAIN_S)
        rx = sampler.read_total() - rx0
        dropped = sampler.read_dropped() - d0
    st1 = lb_stats(lb)
    moved = {k: d.forwarded() - o0[k] for k, d in (others or {}).items()}
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
    if others is not None:
        out["others_forwarded"] = moved
        v.require("others_idle", not any(moved.values()),
                  ", ".join(f"{k} forwarded {n}" for k, n in moved.items() if n)
                  + f" while {lb.kind}'s program was to be the one attached")
        fwd = out["lb_forwarded"] or 0
        v.require(f"forwarded_by_{lb.kind}", fwd >= rx * (1 - tol_pct / 100) - 10,
                  f"{lb.kind} forwarded {fwd} frames, the backends received {rx} (tolerance {tol_pct:g} %): "
                  "the LB switched in did not do the forwarding")
    return out, v


def _terminal(message: str) -> None:
    """The search's per-trial lines on stderr: the workflow shows a job's stderr on the terminal
    (its stdout only in the log), and a search runs for minutes."""
    print(message, file=sys.stderr, flush=True)


def _settings(ctx: TrialContext) -> tuple[int, SearchSettings]:
    """(payload, the search's settings), its max load capped at the frame's line rate."""
    payload = int(ctx.knob("payload"))
    cap = line_rate_pps(payload, float(ctx.knob("line_gbps")))
    return payload, SearchSettings.from_section({**ctx.section, **ctx.point},
                                                f"{ctx.testbed.cfg.path}: experiments.{ctx.experiment}",
                                                max_load_pps=min(float(ctx.knob("max_load_pps")), cap))


def _search_outputs(rec: dict, settings: SearchSettings, record: str) -> dict:
    """What a repetition records of one finished search (`record`: its record's path, relative to the repetition)."""
    out = {"search_record": record, "max_load_pps": settings.max_load_pps, "min_load_pps": settings.min_load_pps,
           "relative_width_goal": settings.relative_width, "goals": rec["goals"], "n_trials": rec["n_trials"],
           "trials_left_out": len(rec.get("trials_left_out") or ()),
           "trial_seconds": rec["trial_seconds"], "search_wall_s": rec["wall_s"]}
    ndr = goal(rec, "NDR")
    if ndr is not None and ndr["at_max_load"]:  # valid, but a lower bound only
        out["note"] = f"NDR at max load {settings.max_load_pps:.0f} pps: raise max_load_pps to find it"
    return out


def _require_bounds(v: Validity, rec: dict, settings: SearchSettings, prefix: str = "") -> None:
    for g in rec["goals"]:
        v.require(f"{prefix}{g['name']}_lower_bound", not g["below_min_load"],
                  f"{prefix.replace('_', ' ')}{g['name']}: even {settings.min_load_pps:.0f} pps (min_load_pps) lost "
                  f"more than {100 * g['loss_ratio']:g} %")


def paired(ctx: TrialContext) -> bool:
    """Whether this repetition runs the paired design (module docstring)."""
    return bool(ctx.knob("paired", False))


def ndr_pdr_search(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """ndr_pdr: one MLRsearch per repetition (xenobench.search); its trials are trial directories
    below this one (search/trial-<k>/), its record search/search.json. In the paired design one
    search per LB, taking turns (paired_searches)."""
    if paired(ctx):
        return paired_searches(ctx)
    cfg, p = ctx.testbed.cfg, ctx.point
    payload, settings = _settings(ctx)
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
    out = {"payload": payload,
           **_search_outputs(rec, settings, str(sdir.record.relative_to(ctx.attempt.path.parent)))}
    v = Validity()
    _require_bounds(v, rec, settings)
    return out, v


def paired_searches(ctx: TrialContext) -> tuple[dict, Validity]:
    """One repetition of the paired design (module docstring): a search per LB of `lbs`, in turns."""
    tb, cfg, p = ctx.testbed, ctx.testbed.cfg, ctx.point
    ex = ctx.section
    lbs, ref = list(ex["lbs"]), ex["reference"]
    drivers = rank.check_switchable(tb, lbs, f"experiments.{ctx.experiment}.lbs")
    payload, settings = _settings(ctx)
    rep_dir = ctx.attempt.path.parent
    sdirs = {k: SearchDir(TrialDir(rep_dir).search.path / k) for k in lbs}
    tol = float(ex["check_tolerance_pct"])
    out: dict = {"payload": payload, "paired": True, "lbs": lbs, "reference": ref,
                 "bootstrap_seed": int(ex["seed"]), "bootstrap_resamples": int(ex["bootstrap"])}
    stop_all(tb)  # the port is the switcher's
    sw = rank.port_switch(tb)
    started: list[str] = []

    def trial_of(k: str):
        others = {o: d for o, d in drivers.items() if o != k}

        def trial(c, d, load):  # at the search's turn: its LB's program on the port, every LB watched
            if ctx.watch.check():
                raise ActorGone("; ".join(ctx.watch.gone()))
            for dr in drivers.values():
                watch_lb(c, dr)
            (sw.attach if sw.current is None else sw.switch)(drivers[k].prog_pin)
            return search_trial(c, drivers[k], d, load, others, tol)
        return trial
    try:
        rank.start_unattached(ctx, drivers, started)
        runs = {k: (settings, trial_runner(tb, ctx.experiment, {**p, "lb": k}, ctx.repetition, sdirs[k], trial_of(k),
                                           ifaces=measured_ifaces(cfg),
                                           max_attempts=int(cfg.section("experiments")["max_attempts"]),
                                           plan=ctx.plan, progress=_terminal), sdirs[k])
                for k in lbs}
        records, turns = run_searches_in_turns(runs, progress=_terminal)
    except TurnError as e:
        if not isinstance(e.error, ActorGone):
            raise
        v = Validity()
        v.require("search_completed", False, f"stopped early: {e}")
        return {**out, "stopped_early": str(e)}, v
    finally:
        out["swaps"] = sw.swaps
        rank.stop_unattached(ctx, drivers, started, sw)
    out.update(turns=[list(t) for t in turns], max_load_pps=settings.max_load_pps,
               searches={k: _search_outputs(records[k], settings, str(sdirs[k].record.relative_to(rep_dir)))
                         for k in lbs})
    v = Validity()
    for k in lbs:
        _require_bounds(v, records[k], settings, f"{k}_")
    return out, v


PROCEDURES = {"ndr_pdr_search": ndr_pdr_search}
#: each of a search's trials is a run_trial of its own, judged by the machine rule and retried there;
#: the repetition around them records the machine, and is not judged again (xenobench.procedures)
JUDGED_INSIDE = True


#: when the plan is made, and before a point's set-up: a paired section's reference is one of its
#: LBs, and they can be switched on the LB's port (rank's checks)
check_section, precheck = rank.check_paired_section, rank.precheck_paired


def headline(o: dict) -> str:
    """A valid search's value on the terminal: each goal's lower bound (NDR, PDR) and the trial count;
    in the paired design per LB, with its NDR over the reference's."""
    if "searches" in o:
        ref = o["searches"][o["reference"]]
        return "; ".join(f"{k}: {headline(s)}" + "".join(f", {n} {r:.3f} x {o['reference']}"
                                                         for n, r in _ratios(s, ref).items() if k != o["reference"])
                         for k, s in o["searches"].items())
    goals = ", ".join(f"{g['name']} {g['lower_bound_pps'] / 1e6:.3f} Mpps" for g in o["goals"]
                      if g.get("lower_bound_pps") is not None)
    return f"{goals or 'no bound found'} ({o['n_trials']} search trials)"


# --- rows --------------------------------------------------------------------------------------------
def _ratios(o: dict, ref: dict) -> dict[str, float]:
    """{goal name: this search's lower bound over the reference search's}, goals where both have one."""
    out = {}
    for g in o["goals"]:
        r = goal(ref, g["name"])
        if g["lower_bound_pps"] is not None and r is not None and r["lower_bound_pps"]:
            out[g["name"]] = g["lower_bound_pps"] / r["lower_bound_pps"]
    return out


def rows(t) -> dict[str, list[dict]]:
    """A search's rows (`t`: xenobench.measure.TrialRecord): _search_rows; in the paired design
    each LB's, and each LB's lower bounds over the reference's (<goal>_vs_<ref>, unit ratio)."""
    o = t.outputs
    if "searches" not in o:
        return {t.definition.tidy["tables"][0]: _search_rows(t, o, t.common)}
    out, ref = [], o["reference"]
    for k, s in o["searches"].items():
        common = dict(t.common, lb=k)
        out += _search_rows(t, s, common)
        if k != ref:
            for n, r in _ratios(s, o["searches"][ref]).items():
                src = str((t.trial.path / s["search_record"]).relative_to(t.resdir))
                out.append(row(**dict(common, payload_bytes=o["payload"], source=src), metric=f"{n.lower()}_vs_{ref}",
                               value=r, unit="ratio"))
    return {t.definition.tidy["tables"][0]: out}


def _search_rows(t, o: dict, common: dict) -> list[dict]:
    """One search's rows (`o`: its outputs): per goal of the search: the relevant lower bound (the
    highest load at the goal's loss ratio: NDR, PDR), the upper bound, the conditional throughput and
    the width reached; the search's trial count and time. offered_pps = the lower bound,
    measured_pps = its conditional throughput."""
    src = str((t.trial.path / o["search_record"]).relative_to(t.resdir))
    common = dict(common, payload_bytes=t.outputs["payload"], source=src)
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
    return out


#: the fewest valid repetitions a point's ratio interval is made of: one repetition's ratio is no interval
MIN_REPETITIONS = 2


def point_rows(records: list) -> dict[str, list[dict]]:
    """In the paired design, per goal each LB's lower bound relative to the reference's over the
    point's valid repetitions (`records`): the median of the repetitions' ratios with its bootstrap
    95 % CI (rank.rank_rows, each repetition one round: the interval covers this run's repetitions
    only) and the verdict (0: not distinguishable, the CI includes 1), then every pair of the other
    LBs; metrics <goal>_vs_<ref>_<part>. Goals with fewer than MIN_REPETITIONS repetitions give none."""
    recs = [t for t in records if "searches" in t.outputs]
    if not recs:
        return {}
    first, o = recs[0], recs[0].outputs
    common = {k: v for k, v in first.common.items() if k not in ("lb", "repetition")}
    common.update(payload_bytes=o["payload"], source=str(first.trial.path.parent.relative_to(first.resdir)))
    out = []
    for gname in [g["name"] for g in o["searches"][o["reference"]]["goals"]]:
        blocks = [(t.repetition, 1, k, g["lower_bound_pps"]) for t in recs for k, s in t.outputs["searches"].items()
                  if (g := goal(s, gname)) is not None and g["lower_bound_pps"]]
        if len({b[0] for b in blocks if b[2] == o["reference"]}) < MIN_REPETITIONS:
            continue
        out += rank.rank_rows(blocks, o["lbs"], o["reference"], common, int(o["bootstrap_resamples"]),
                              int(o["bootstrap_seed"]), gname.lower())
    return {first.definition.tidy["tables"][0]: out}


