"""The search kind's paired design (xenobench.search.run_searches_in_turns, xenobench.measure.search):
one MLRsearch per LB, the searches' trials strictly taking turns, each against a synthetic device of
its own (the real MLRsearch; a fake measurer at the traffic boundary); the ratio rows and verdicts
per repetition and per point; the figure's "not distinguishable"; and one short live run on the
namespace testbed whose every trial was forwarded by its own LB."""

import math
import threading
import time

import numpy as np
import pytest

from xenobench.aggregate import aggregate
from xenobench.layout import ResultsTree, SearchDir
from xenobench.measure.search import MIN_REPETITIONS
from xenobench import plots
from xenobench.plots import ndr_pdr
from xenobench.rateblocks import ratios_from_rows
from xenobench.results import read_tidy
from xenobench.config import load_config
from xenobench.search import (Goal, Measured, SearchSettings, TurnError, run_search, run_searches_in_turns,
                              trial_runner)
from xenobench.trials import Validity

from .conftest import needs_root
from .test_aggregate_report import _facts, _trial
from .test_ndr_pdr import SyntheticTestbed

CEILINGS = {"wire": 150_000.0, "xenoflow": 100_000.0, "ebpf": 60_000.0}  # each device forwards all up to here


def settings(**kw) -> SearchSettings:
    base = dict(goals=(Goal("NDR", 0.0), Goal("PDR", 0.005)), min_load_pps=10_000, max_load_pps=200_000,
                exceed_ratio=0.0, relative_width=0.02, initial_trial_duration_s=0.5,
                final_trial_duration_s=1.0, duration_sum_s=1.0, preceding_targets=1, warmup_s=0)
    return SearchSettings(**{**base, **kw})


def device(name: str, ran: list, fail_at: int | None = None):
    """A fake measurer for search `name`: half of the load above its ceiling lost; `ran` gets
    (name, k) per trial measured; trial `fail_at` raises."""
    def trial(k: int, duration: float, load: float) -> Measured:
        if k == fail_at:
            raise ConnectionError(f"the generator of {name} vanished")
        ran.append((name, k))
        offered = int(round(load * duration))
        c = CEILINGS[name]
        lost = 0 if load <= c else math.ceil(offered * 0.5 * (load - c) / load)
        return Measured(offered, offered - lost, duration)
    return trial


def round_robin(names: list[str], counts: dict[str, int]) -> list[tuple[str, int]]:
    """The strict turn order: round r runs trial r of every search that asks for one."""
    return [(n, r) for r in range(1, max(counts.values()) + 1) for n in names if r <= counts[n]]


TURNS = [  # (case, names, max_load_pps per search (None: the default))
    ("three searches, the slowest device needs the most trials", ["wire", "xenoflow", "ebpf"], {}),
    ("a search ending early leaves the ring, the others go on", ["wire", "ebpf"], {"wire": 160_000}),
    ("one search alone", ["xenoflow"], {}),
]


@pytest.mark.parametrize("case, names, max_load", TURNS, ids=[t[0] for t in TURNS])
def test_searches_take_turns_trial_by_trial_and_find_what_each_finds_alone(case, names, max_load):
    ran: list = []
    searches = {n: (settings(**({"max_load_pps": max_load[n]} if n in max_load else {})), device(n, ran), None)
                for n in names}
    records, order = run_searches_in_turns(searches, progress=lambda *_: None)
    counts = {n: records[n]["n_trials"] for n in names}
    assert order == ran == round_robin(names, counts)
    if len(names) > 1:
        assert len(set(counts.values())) > 1, counts  # one ended before another: the ring went on without it
    for n in names:  # taking turns changes nothing of what a search asks or finds
        alone = run_search(searches[n][0], device(n, []), progress=lambda *_: None)
        assert [g["lower_bound_pps"] for g in records[n]["goals"]] == [g["lower_bound_pps"] for g in alone["goals"]]
        assert records[n]["trials"] == [dict(t, seconds=records[n]["trials"][i]["seconds"])
                                        for i, t in enumerate(alone["trials"])]


def test_a_trials_seconds_leave_out_its_wait_for_the_turn():
    ran: list = []

    def slow(name):
        dev = device(name, ran)

        def trial(k, duration, load):
            time.sleep(0.02)
            return dev(k, duration, load)
        return trial
    t0 = time.monotonic()
    records, _ = run_searches_in_turns({n: (settings(), slow(n), None) for n in ("wire", "ebpf")},
                                       progress=lambda *_: None)
    wall = time.monotonic() - t0
    own = [t["seconds"] for r in records.values() for t in r["trials"]]
    assert len(own) == len(ran) and min(own) >= 0.02
    assert sum(own) <= wall  # with each other's trials counted in, the sum would be about twice the wall time


def test_an_exception_in_one_search_stops_all_at_their_next_turn_naming_the_trial():
    ran: list = []
    names = ["wire", "xenoflow", "ebpf"]
    searches = {n: (settings(), device(n, ran, fail_at=3 if n == "xenoflow" else None), None) for n in names}
    before = threading.active_count()
    with pytest.raises(TurnError) as e:
        run_searches_in_turns(searches, progress=lambda *_: None)
    assert str(e.value) == ("Failed to search NDR/PDR of xenoflow in turns: trial 3: the generator of xenoflow "
                            "vanished; the other searches (wire, ebpf) stopped at their next turn")
    assert (e.value.search, e.value.trial, type(e.value.error)) == ("xenoflow", 3, ConnectionError)
    # wire's third trial ran before xenoflow's turn; nothing after the failure
    assert ran == [("wire", 1), ("xenoflow", 1), ("ebpf", 1), ("wire", 2), ("xenoflow", 2), ("ebpf", 2), ("wire", 3)]
    assert threading.active_count() == before  # every search's thread ended


def _turns_on_disk(tmp_path, measured: list):
    """wire and ebpf searched in turns through the real trial runner (a synthetic procedure at the
    traffic boundary), each in its own search/<lb>/ below one repetition."""
    cfg = load_config("config/ci.yaml")
    rep = ResultsTree(tmp_path, "ci").trial("ndr_pdr", {"payload": 22}, 1)
    runs = {}
    for k in ("wire", "ebpf"):
        dev = device(k, measured)

        def proc(ctx, duration, load, dev=dev):
            m = dev(int(ctx.point["search_trial"]), duration, load)
            return {"offered": m.offered, "received": m.received, "offered_duration_s": duration,
                    "intended_duration_s": duration, "intended_load_pps": load}, Validity()
        sdir = SearchDir(rep.search.path / k)
        runs[k] = (settings(), trial_runner(SyntheticTestbed(cfg), "ndr_pdr", {"payload": 22, "lb": k}, 1, sdir, proc,
                                            ifaces=[], max_attempts=1, progress=lambda *_: None), sdir)
    return rep, run_searches_in_turns(runs, progress=lambda *_: None)


def test_a_rerun_replays_each_searchs_own_trials_from_its_directory(tmp_path):
    measured: list = []
    rep, (records, order) = _turns_on_disk(tmp_path, measured)
    ebpf = SearchDir(rep.search.path / "ebpf")
    assert len(ebpf.trials()) == records["ebpf"]["n_trials"] and measured == order
    ebpf.record.unlink()  # as if killed in ebpf's last trial, wire's search complete
    (ebpf.trials()[-1].path / "result.json").unlink()
    again: list = []
    _, (records2, order2) = _turns_on_disk(tmp_path, again)
    assert again == [("ebpf", records["ebpf"]["n_trials"])]  # only the incomplete trial was measured again
    assert order2 == [("ebpf", k) for k in range(1, records["ebpf"]["n_trials"] + 1)]  # wire's record: no turn
    assert [g["lower_bound_pps"] for g in records2["ebpf"]["goals"]] == [g["lower_bound_pps"] for g in records["ebpf"]["goals"]]
    assert (records2["wire"]["goals"], records2["wire"]["trials"]) == (records["wire"]["goals"], records["wire"]["trials"])


class CountingLb:
    """An LB's counters as a search trial reads them: `counts` one per read (forwarded frames), its
    own through stats(), the others' through forwarded()."""

    def __init__(self, kind, counts):
        self.kind, self.counts = kind, list(counts)

    def stats(self):
        return {"backends": [{"name": "backend1", "packets": self.counts.pop(0)}]}

    def forwarded(self):
        return self.counts.pop(0)


class FakeSampler:
    def __init__(self, *a):
        self.rx = iter([0, 1000])

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def read_total(self):
        return next(self.rx)

    def read_dropped(self):
        return 0


class FakeCtx:
    point = {"payload": 22, "flows": 4}
    plan = type("Plan", (), {"profile": "udp_payload"})()
    testbed = type("Tb", (), {"cfg": None})()

    def knob(self, name):
        return self.point[name]


OTHERS = [  # (case, the switched-in LB's counts before/after, the other's, failed checks)
    ("its LB forwarded, the other did not", (0, 1000), (500, 500), set()),
    ("the other LB forwarded: the wrong program attached", (0, 0), (500, 1500), {"others_idle", "forwarded_by_xenoflow",
                                                                                 "lb_counters_consistent"}),
    ("its LB forwarded half of what the backends received", (0, 500), (500, 500), {"forwarded_by_xenoflow",
                                                                                   "lb_counters_consistent"}),
]


@pytest.mark.parametrize("case, own, other, failed", OTHERS, ids=[o[0] for o in OTHERS])
def test_a_search_trial_is_valid_only_where_its_own_lb_forwarded(monkeypatch, case, own, other, failed):
    from xenobench.measure import search as kind
    monkeypatch.setattr(kind, "RateSampler", FakeSampler)
    monkeypatch.setattr(kind, "backend_ifaces", lambda cfg: [])
    monkeypatch.setattr(kind, "traffic_watched", lambda *a: {"tx_packets": 1000, "duration_s": 0.3, "failed": []})
    monkeypatch.setattr(kind, "DRAIN_S", 0)
    out, v = kind.search_trial(FakeCtx(), CountingLb("xenoflow", own), 0.3, 1e4, {"wire": CountingLb("wire", other)}, 5)
    assert {c for c, ok in v.checks.items() if not ok} == failed
    assert out["others_forwarded"] == {"wire": other[1] - other[0]}
    if "others_idle" in failed:
        assert next(r for r in v.reasons if r.startswith("others_idle")) == "others_idle: wire forwarded 1000 while xenoflow's program was to be the one attached"


def test_paired_ndr_pdr_without_its_reference_is_refused_when_planned(tmp_path):
    from xenobench.errors import ConfigError
    from xenobench.experiments import plan
    cfg = load_config("config/local.yaml")
    cfg.section("experiments")["ndr_pdr"].update(lbs=["xenoflow", "ebpf"])
    with pytest.raises(ConfigError, match=r"Failed to plan experiment ndr_pdr: experiments.ndr_pdr.reference 'wire' "
                                          r"is not in its lbs \['xenoflow', 'ebpf'\]"):
        plan(cfg)


# --- rows, verdicts and the figure from a hand-made results tree -------------------------------------
LBS = ["wire", "xenoflow", "ebpf"]
#: per repetition each LB's NDR and PDR (pps): xenoflow's NDR about 0.8 of the wire's in every repetition
#: (slower, once there are rateblocks.MIN_ROUNDS of them), ebpf's around 1 (not distinguishable); PDR alike
REPS = {1: {"wire": (500e3, 600e3), "xenoflow": (400e3, 480e3), "ebpf": (475e3, 630e3)},
        2: {"wire": (400e3, 500e3), "xenoflow": (330e3, 410e3), "ebpf": (420e3, 480e3)},
        3: {"wire": (600e3, 700e3), "xenoflow": (470e3, 560e3), "ebpf": (600e3, 700e3)},
        4: {"wire": (550e3, 650e3), "xenoflow": (440e3, 520e3), "ebpf": (560e3, 640e3)},
        5: {"wire": (450e3, 550e3), "xenoflow": (360e3, 445e3), "ebpf": (440e3, 560e3)},
        6: {"wire": (520e3, 620e3), "xenoflow": (420e3, 500e3), "ebpf": (525e3, 615e3)}}
SIX = [1, 2, 3, 4, 5, 6]


def _goals(ndr, pdr):
    return [{"name": n, "loss_ratio": lr, "lower_bound_pps": v, "upper_bound_pps": v * 1.05,
             "conditional_throughput_pps": v, "relative_width": 0.05 / 1.05, "at_max_load": False,
             "below_min_load": False} for n, lr, v in (("NDR", 0.0, ndr), ("PDR", 0.005, pdr))]


def _paired_trial(r, rep, values, valid=True):
    searches = {k: {"search_record": f"search/{k}/search.json", "goals": _goals(*v), "n_trials": 9,
                    "trial_seconds": 4.5, "search_wall_s": 12.0, "max_load_pps": 4e6, "min_load_pps": 1e4,
                    "relative_width_goal": 0.05} for k, v in values.items()}
    return _trial(r, "ndr_pdr", "payload-22", rep, {"payload": 22},
                  {"payload": 22, "paired": True, "lbs": LBS, "reference": "wire", "searches": searches,
                   "turns": [], "bootstrap_seed": 17, "bootstrap_resamples": 2000}, valid=valid,
                  reasons=() if valid else ["xenoflow_NDR_lower_bound: ..."],
                  facts=_facts("ndr_pdr", {"payload": 22}, paired=True, lbs=LBS))


def _tree(tmp_path, reps):
    r = tmp_path / "local"
    for rep in reps:
        _paired_trial(r, rep, REPS[rep])
    _paired_trial(r, 9, {k: (1e3, 1e3) for k in LBS}, valid=False)  # an invalid repetition adds no row
    aggregate(r, progress=lambda m: None)
    return r, read_tidy(r, "ndr_pdr")


RATIO_CASES = [  # (lb, goal, repetitions, verdict)
    ("xenoflow", "ndr", SIX, "slower"),
    ("xenoflow", "pdr", SIX, "slower"),
    ("xenoflow", "ndr", [1, 2, 3], "not distinguishable"),  # all three below 1: too few to exclude chance
    ("ebpf", "ndr", SIX, "not distinguishable"),
    ("ebpf", "pdr", [1, 2, 3], "not distinguishable"),
]


@pytest.mark.parametrize("lb, goal, reps, verdict", RATIO_CASES,
                         ids=[f"{c[0]}-{c[1]}-{len(c[2])}" for c in RATIO_CASES])
def test_ratio_rows_per_repetition_and_per_point_with_verdict(tmp_path, lb, goal, reps, verdict):
    g = goal == "pdr"
    per_rep = [REPS[k][lb][g] / REPS[k]["wire"][g] for k in reps]
    r, x = _tree(tmp_path, reps)
    own = x[(x.lb == lb) & (x.metric == f"{goal}_pps")].sort_values("repetition")
    assert list(own.value) == [REPS[k][lb][g] for k in reps]  # the absolute values stay
    ratio = x[(x.lb == lb) & (x.metric == f"{goal}_vs_wire")].sort_values("repetition")
    assert list(ratio.repetition) == reps and ratio.value.to_numpy() == pytest.approx(per_rep)
    assert set(ratio.source) == {f"trials/ndr_pdr/payload-22/rep-{k}/search/{lb}/search.json" for k in reps}
    assert not len(x[(x.lb == "wire") & x.metric.str.startswith(f"{goal}_vs_")])  # the reference has no ratio
    (rr,) = [q for q in ratios_from_rows(x, goal) if (q.lb, q.reference) == (lb, "wire")]
    assert rr.median == pytest.approx(float(np.median(per_rep)))
    assert min(per_rep) - 1e-9 <= rr.ci_low <= rr.median <= rr.ci_high <= max(per_rep) + 1e-9
    if len(reps) == 3:  # the percentile bootstrap of three values: their range
        assert (rr.ci_low, rr.ci_high) == pytest.approx((min(per_rep), max(per_rep)))
    assert (rr.rounds, rr.repetitions, rr.verdict) == (len(reps), len(reps), verdict)
    sign = x[(x.lb == lb) & (x.metric == f"{goal}_vs_wire_verdict")].value
    assert list(sign) == [{"slower": -1, "not distinguishable": 0}[verdict]]


def test_one_valid_repetition_gives_its_ratio_but_no_interval(tmp_path):
    assert MIN_REPETITIONS == 2
    r, x = _tree(tmp_path, [1])
    assert x[(x.lb == "xenoflow") & (x.metric == "ndr_vs_wire")].value.tolist() == [0.8]
    assert not ratios_from_rows(x, "ndr") and not x.metric.str.endswith("_verdict").any()


def test_figure_draws_the_ratios_hollow_where_not_distinguishable(tmp_path, monkeypatch):
    r, _ = _tree(tmp_path, SIX)
    drawn = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, outdir, name, resdir=None: (drawn.append(fig), save(fig, outdir, name, resdir)))
    series = ndr_pdr(r, tmp_path / "fig", "local")
    assert (tmp_path / "fig" / "ndr_pdr.png").exists()
    (ax,) = drawn[0].axes
    labels = ax.get_legend_handles_labels()[1]
    assert [x for x in labels if "not distinguishable" in x] == [
        f"{plots._name('ebpf')}: not distinguishable from wire (CI includes 1)"]
    assert f"{plots._name('xenoflow')} / wire: median over 6 repetitions" in labels
    assert ax.get_ylabel() == "NDR / PDR relative to wire"
    assert series["reference"] == "wire"
    assert series["ratios"]["xenoflow"]["NDR, 64 B"]["verdict"] == "slower"
    assert series["ratios"]["ebpf"]["NDR, 64 B"]["verdict"] == "not distinguishable"
    lo, hi = series["ratios"]["ebpf"]["PDR, 64 B"]["ci"]
    assert lo < 1 < hi


# --- live: the paired design on the namespace testbed ---------------------------------------------------
@needs_root
def test_paired_searches_on_the_namespace_testbed_each_trial_forwarded_by_its_own_lb(testbed, tmp_path, monkeypatch):
    """One short repetition: wire and xenoflow searched in turns (coarse: 0.2 s trials, 20 % width);
    every trial of each search was forwarded by its own LB (its counters moved, the other's did not),
    the trials alternated, each search's record is in search/<lb>/, and nothing of the switch is left."""
    from xenobench.procedures import run_point
    ex = testbed.cfg.raw["experiments"]
    monkeypatch.setitem(ex, "ndr_pdr", {**ex["ndr_pdr"], "lbs": ["wire", "xenoflow"], "paired": True, "repetitions": 1,
                                        "min_load_pps": 20000, "max_load_pps": 2000000, "relative_width": 0.2,
                                        "initial_trial_duration_s": 0.2, "final_trial_duration_s": 0.2,
                                        "duration_sum_s": 0.2, "preceding_targets": 0, "exceed_ratio": 0})
    monkeypatch.setitem(ex, "max_steal_share", None)  # the forwarding is checked here, not the shared VM's steal
    point = {"payload": 22}
    run_point(testbed, "ndr_pdr", point, results_root=tmp_path, progress=lambda *_: None)
    rep = ResultsTree(tmp_path, testbed.cfg.name).trial("ndr_pdr", point, 1)
    res = rep.read_result()
    o = res["outputs"]
    assert res["valid"], [a["reasons"] for a in res["attempts"]]
    assert set(o["searches"]) == {"wire", "xenoflow"} and o["reference"] == "wire"
    counts = {k: s["n_trials"] for k, s in o["searches"].items()}
    assert [tuple(t) for t in o["turns"]] == round_robin(["wire", "xenoflow"], counts)
    for k, other in (("wire", "xenoflow"), ("xenoflow", "wire")):
        sdir = SearchDir(rep.search.path / k)
        assert sdir.complete and len(sdir.trials()) == counts[k]
        for td in sdir.trials():
            t = td.read_result()
            assert t["valid"] and t["point"]["lb"] == k, td.path
            out = t["outputs"]
            assert out["others_forwarded"] == {other: 0}, td.path
            assert out["lb_forwarded"] >= out["received"] > 0, td.path
    lbn = testbed.cfg.role("lb")
    assert "xdp" not in testbed.node(lbn.name).run(["ip", "-j", "link", "show", "dev",
                                                        lbn.lb_port("ingress").name]).stdout
