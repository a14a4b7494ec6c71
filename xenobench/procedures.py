"""Running a point of an experiment (thesis ch. 7, experiments/*.yaml), written once above the
transport layer: the same code drives the namespace testbed (xdpgen, emulated XenoFlow) and the
thesis testbed (TRex, XenoFlow on the BlueField-3).

A point is run by run_point(): its set-up (DNS server, load balancer) is done once, then every
repetition is a trial of xenobench.trials (settle, counters, the kind's procedure, counters, cool
down, with retries), then everything the set-up started is stopped again, also on error or Ctrl-C.
Where the point's headline comparison stays undecided after its repetitions (undecided), it gets
supplementary ones, one at a time, up to experiments.max_repetitions (repeat).
What a trial does is its measurement kind's (xenobench.measure); what it ran with is recorded once
in its outputs (point_facts), and its rows are checked as aggregation will make them (check_trial).
"""

from __future__ import annotations

import contextlib
import logging
import re
from pathlib import Path

from . import measure
from .aggregate import check_trial, point_rows, trial_record
from .dns import server_process, start_server, stop_server
from .errors import ConfigError, XenobenchError
from .experiments import (available_lbs, capacity_points, check_lbs, definition, flow_lbs, is_capacity_point, paired,
                          points, repetitions, section)
from .layout import ResultsTree, check_results_root, chosen_reasons, point_id, write_json_atomic
from .lb import NONE, get_lb, stop_all
from .measure.common import measured_ifaces, watch_lb
from .resume import stop_when_orphaned
from .traffic.trex import revive_server
from .trials import PointPlan, TrialContext, reusable, run_trial, trial_params

log = logging.getLogger(__name__)


def point_plan(cfg, experiment: str, point: dict) -> PointPlan:
    """What a point's trials are run with: the definition, the config section (its `lbs` without
    those the testbed cannot run: experiments.left_out), the capacity sources."""
    sec = section(cfg, experiment)
    if sec.get("lbs"):
        sec = {**sec, "lbs": available_lbs(cfg, experiment)}
    return PointPlan(definition(experiment), sec, tuple(capacity_points(cfg, experiment, point)),
                     flow_lbs(cfg) if definition(experiment).is_latency else ())


def point_lb(cfg, experiment: str, point: dict) -> str:
    """The LB the point's set-up starts; none for the paired RTT design (its blocks switch LBs) but
    for a capacity point (its LB's maximum)."""
    if is_capacity_point(point):
        return point["lb"]
    if paired(cfg, experiment):
        return NONE
    return point.get("lb") or section(cfg, experiment).get("lb") or NONE


def point_server(cfg, experiment: str, point: dict) -> str | None:
    """The DNS server a latency point's set-up starts (None for other kinds)."""
    if not definition(experiment).is_latency:
        return None
    return point.get("server") or section(cfg, experiment).get("server") or cfg.section("dns")["server"]


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
            "lbs": available_lbs(cfg, experiment) if is_paired else None,
            "server": point_server(cfg, experiment, point), "profile": d.profile,
            "generator": cfg.section("traffic")["generator"] if d.profile else None}


# --- set-up of a point ---------------------------------------------------------------------------
@contextlib.contextmanager
def point_setup(testbed, experiment: str, point: dict, progress=print):
    """DNS server and load balancer of the point, started once for all its repetitions."""
    cfg = testbed.cfg
    stack = contextlib.ExitStack()
    with stack:
        for line in getattr(testbed, "restore_state", list)():  # the testbed's state as configured, not as its record says
            progress(f"[{experiment}] put back: {line}")
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


def watch_setup(ctx: TrialContext, lb, server: str | None) -> None:
    """The point set-up's actors (point_setup), watched in every trial of the point."""
    watch_lb(ctx, lb)
    if server:
        ctx.watch.add(f"dns_server_{server}", f"DNS server {server}", lambda: server_process(ctx.testbed, server))


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
    revive_server(testbed, progress)  # the TRex server the harness started, if it died


def find_point(cfg, experiment: str, pid: str) -> dict:
    pts = points(cfg, experiment)
    for pt in pts:
        if point_id(pt) == pid:
            return pt
    known = ", ".join(point_id(x) for x in pts) or "none"
    raise ConfigError(f"Failed to find point {pid!r} of experiment {experiment!r} in {cfg.path} "
                      f"(planned: {known})")


def max_repetitions(cfg, experiment: str) -> int:
    """The most repetitions a point of `experiment` runs: experiments.max_repetitions, at least its
    planned ones (xenobench.experiments.repetitions; unset: those, none supplementary)."""
    return max(repetitions(cfg, experiment), int(cfg.section("experiments").get("max_repetitions") or 0))


#: a verdict row of a point's comparison (xenobench.measure: <measure>_vs_<reference>_verdict)
VERDICT = re.compile(r"(.+?)_vs_(.+)_verdict")


def undecided(tree: ResultsTree, experiment: str, point: dict, last: int) -> list[str]:
    """The headline comparisons that repetitions 1..last of a point leave undecided, from the point's
    rows over its valid ones (xenobench.aggregate.point_rows: the kind's paired ratios or differences
    with their bootstrap CIs, as the tables get them): those of the first verdict row's measure and
    reference whose verdict is 0 (the CI includes no difference, or too few rounds to claim one),
    all of a paired point that has too few for any; [] where the point compares nothing."""
    recs = []
    for r in range(1, last + 1):
        t = tree.trial(experiment, point, r)
        if t.complete and (res := t.read_result())["valid"]:
            recs.append(trial_record(tree.dir.name, t, res, tree.dir))
    verdicts = [(m.groups(), x) for rows in point_rows(recs).values() for x in rows
                if (m := VERDICT.fullmatch(x["metric"]))]
    if not verdicts:
        return ["every comparison (too few valid repetitions)"] if any(t.facts.get("paired") for t in recs) else []
    head = verdicts[0][0]
    return [f"{x['lb']} vs {head[1]}" for g, x in verdicts if g == head and x["value"] == 0]


def repeat(tree: ResultsTree, experiment: str, point: dict, reps: int, cap: int, fresh, run,
           progress=print) -> tuple[int, list[str] | None]:
    """A point's repetitions: each planned one not recorded yet (`fresh(r)`) is run (`run(r,
    metadata)`), then, while its headline comparison is undecided and fewer than `cap` ran, one
    supplementary repetition at a time (metadata supplementary). Returns the last repetition and
    what is undecided after it (None: cap no higher than reps, not judged)."""
    for r in range(1, reps + 1):
        if fresh(r):
            run(r, {"supplementary": False})
    last, still = reps, (undecided(tree, experiment, point, reps) if cap > reps else None)
    while still and last < cap:
        last += 1
        progress(f"[{experiment}] {point_id(point)}: {'; '.join(still)} undecided after {last - 1} repetitions: "
                 f"supplementary repetition {last} (at most {cap}, experiments.max_repetitions)")
        if fresh(last):
            run(last, {"supplementary": True})
        still = undecided(tree, experiment, point, last)
    return last, still


def point_summary(tree: ResultsTree, experiment: str, point: dict, reps: int, last: int,
                  still: list[str] | None) -> dict:
    """point.json: every repetition's validity and reasons, which were supplementary, and what the
    last left undecided (None: not judged)."""
    results = []
    for r in range(1, last + 1):
        res = tree.trial(experiment, point, r).read_result()
        results.append({"repetition": r, "valid": res["valid"], "reasons": chosen_reasons(res)})
    return {"experiment": experiment, "point": point, "testbed": tree.testbed, "repetitions": results,
            "supplementary": list(range(reps + 1, last + 1)), "undecided": still,
            "valid": sum(r["valid"] for r in results), "invalid": sum(not r["valid"] for r in results)}


def run_point(testbed, experiment: str, point: dict, results_root: Path = Path("results"),
              progress=print) -> dict:
    """Every repetition of one point (repeat); writes <point dir>/point.json last (Snakemake's
    output). Completed repetitions recorded for this point are not re-run (xenobench.trials.reusable).
    A deterministic fault stops the point (xenobench.trials.run_trial raises PointStopped): no
    point.json, so the next run measures it again."""
    cfg = testbed.cfg
    d = definition(experiment)
    proc = measure.procedure(d.procedure)
    plan = point_plan(cfg, experiment, point)
    facts = point_facts(cfg, experiment, point)
    stop_when_orphaned(progress)  # a job of a Snakemake that was killed does not run on unsupervised

    def attempt(ctx, lb):
        revive_setup(testbed, lb, facts["server"], progress)
        watch_setup(ctx, lb, facts["server"])
        out, v = proc(ctx, lb)
        return {"facts": facts, **out}, v
    ex_all = cfg.section("experiments")
    reps = repetitions(cfg, experiment)
    tree = ResultsTree(Path(results_root), cfg.name)
    with contextlib.ExitStack() as stack:
        lb = []  # the point's set-up (its LB), entered before its first trial to run

        def run(r: int, metadata: dict) -> None:
            if not lb:
                check_results_root(Path(results_root), ex_all["min_free_mb"])  # room for the trials, before anything starts
                check_lbs(cfg, experiment, testbed)  # what the kind needs of its LBs (a single point's run skips plan())
                precheck = getattr(measure.KINDS[d.kind], "precheck", None)
                if precheck is not None:  # what the kind checks of the testbed before a point's set-up
                    precheck(testbed, experiment, plan.section)
                testbed.up()  # idempotent; a resumed run may find the testbed down
                lb.append(stack.enter_context(point_setup(testbed, experiment, point, progress)))
            run_trial(testbed, experiment, point, r, tree.trial(experiment, point, r),
                      lambda ctx: attempt(ctx, lb[0]), ifaces=measured_ifaces(cfg),
                      # a search retries its own trials; a failed search is recorded, not re-run
                      max_attempts=1 if d.kind == "search" else int(ex_all["max_attempts"]),
                      settle_s=float(ex_all["settle_s"]),
                      cooldown_s=float(ex_all["cooldown_s"]), progress=progress, check=check_trial, plan=plan,
                      headline=measure.rows_module(d.kind, point).headline,
                      judge_machine=not getattr(measure.KINDS[d.kind], "JUDGED_INSIDE", False), metadata=metadata)

        def fresh(r: int) -> bool:  # complete and recorded for this point: kept; else (re-)run
            return not reusable(tree.trial(experiment, point, r), trial_params(cfg, experiment, point, r, plan), progress)
        last, still = repeat(tree, experiment, point, reps, max_repetitions(cfg, experiment), fresh, run, progress)
    summary = point_summary(tree, experiment, point, reps, last, still)
    write_json_atomic(tree.point_summary(experiment, point), summary, indent=1)
    return summary
