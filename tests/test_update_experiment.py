"""The `update` experiment (experiments/update.yaml, xenobench.measure.update): its plan, the arithmetic
on the sink's arrival records (fixture tables), a hand-made results tree through aggregate → tidy
tables → figures → report, and one short live cycle and burst per LB on the namespace testbed."""

import json
from pathlib import Path

import pytest

from xenobench.aggregate import aggregate
from xenobench.config import load_config
from xenobench.errors import ConfigError, DataError
from xenobench.experiments import capacity_points, plan, points
from xenobench.plots import update_disruption, update_latency, update_throughput
from xenobench.report import write_report
from xenobench.results import read_tidy, row, write_tidy
from xenobench.testbed.switch import Arrival
from xenobench.measure.update import arrival_addition, arrival_removal, longest_gap_s, window_frames

from .conftest import needs_root
from .test_aggregate_report import _trial

MS = 1_000_000
B, O = "02:00:00:00:0a:01", "02:00:00:00:0a:00"  # the removed backend, the other one


# --- plan --------------------------------------------------------------------------------------------
def test_plan_lists_one_point_per_lb_with_an_update_path():
    """A point per LB; where the background is a share of capacity (load), a capacity point per
    LB first (capacity_from self)."""
    for name, lbs, caps in (("ci", ["xenoflow", "ebpf"], False), ("local", ["xenoflow", "ebpf"], True),
                            # fips: Katran listed, left out without an L3 hop (xenobench.lb.unavailable)
                            ("fips", ["xenoflow", "ebpf"], True)):
        cfg = load_config(f"config/{name}.yaml")
        want = [{"level": "max", "lb": lb} for lb in lbs] if caps else []
        assert points(cfg, "update") == want + [{"lb": lb} for lb in lbs], name
    ci = load_config("config/ci.yaml")
    assert [(t.point["lb"], t.repetition) for t in plan(ci, ["update"])] == [
        ("xenoflow", 1), ("xenoflow", 2), ("ebpf", 1), ("ebpf", 2)]
    u = ci.section("experiments")["update"]
    assert (u["cycles"], u["change_rates"], u["burst_s"], u["install_max_k"]) == (1, [0, 20], 0.5, 1)  # tiny in CI
    assert (u["load"], u["load_pps"]) == (None, 100000)  # local's share taken back


@pytest.mark.parametrize("config,point,expected", [
    ("local", {"lb": "ebpf"}, [("update", {"level": "max", "lb": "ebpf"})]),      # its own LB's maximum only
    ("fips", {"lb": "xenoflow"}, [("update", {"level": "max", "lb": "xenoflow"})]),
    ("local", {"level": "max", "lb": "ebpf"}, []),                               # a capacity point needs none
    ("ci", {"lb": "ebpf"}, []),                                                  # load_pps: absolute
])
def test_each_update_point_waits_for_its_lbs_capacity_point(config, point, expected):
        assert capacity_points(load_config(f"config/{config}.yaml"), "update", point) == expected


@pytest.mark.parametrize("update,text", [
    ("{lbs: [ebpf], load: 0.5, load_pps: 1000}", r"experiments\.update: load and load_pps given at once: give one of load, load_pps"),
    ("{lbs: [ebpf], load: null}", r"experiments\.update: none of load, load_pps given: give one of them"),
    ("{lbs: [ebpf], load: 0.95}", r"experiments\.update\.load: 0\.95 is greater than the maximum of 0\.9"),
    ("{lbs: [ebpf], load: 0}", r"experiments\.update\.load: 0 is less than or equal to the minimum of 0"),
    ("{lbs: [ebpf], load: 0.5, capacity_from: compare}", r"experiments\.update\.capacity_from: 'compare' is not one of \['self'\]"),
])
def test_bad_background_keys_are_refused_by_name(tmp_path, update, text):
    """local.yaml gives load: a config extending it adds load_pps (both), takes load back without a
    rate (neither), or gives a share outside (0, 0.9]."""
    f = tmp_path / "c.yaml"
    f.write_text(f"extends: {Path('config/local.yaml').resolve()}\nexperiments:\n  update: {update}\n")
    with pytest.raises(ConfigError, match=text):
        load_config(f)


def test_the_background_is_its_share_of_the_lbs_own_maximum(tmp_path):
    """load 0.1 (config/local.yaml): 0.1 x the median of the point's LB's valid capacity trials
    (delivered frames per second of the generator's run), the other LB's ignored."""
    from xenobench.layout import ResultsTree
    from xenobench.trials import TrialContext
    from xenobench.measure.update import background_pps
    cfg = load_config("config/local.yaml")
    tree = ResultsTree(tmp_path, "local")
    for lb, rep, delivered, ok in (("ebpf", 1, 2.0e6, True), ("ebpf", 2, 2.2e6, True), ("ebpf", 3, 9e6, False),
                                   ("xenoflow", 1, 1.0e6, True)):
        t = tree.trial("update", {"level": "max", "lb": lb}, rep)
        t.path.mkdir(parents=True)
        t.write_result({"experiment": "update", "point": {"level": "max", "lb": lb}, "repetition": rep, "valid": ok,
                        "attempts": [{"attempt": 1, "reasons": []}], "chosen_attempt": 1,
                        "outputs": {"rx_pps": 1.2 * delivered, "rx_packets": int(delivered), "tx_packets": int(delivered) + 9,
                                    "generator": {"duration_s": 1.0}, "payload": 22}})

    class _Tb:
        def __init__(self, c):
            self.cfg = c
    point = {"lb": "ebpf"}
    from xenobench.procedures import point_plan
    ctx = TrialContext(_Tb(cfg), "update", point, 1, tree.trial("update", point, 1).attempt(1), {},
                       plan=point_plan(cfg, "update", point))
    assert background_pps(ctx) == {"load_pps_from": "capacity", "load_share": 0.1, "capacity_pps": {"ebpf": 2.1e6},
                                   "capacity_of": "ebpf", "background_pps": 210000.0}


# --- (b) the installation sizes (no root) -----------------------------------------------------------
def _moved(base, target) -> int:
    """Classes whose backend MAC differs between two backends documents (xenobench.backends)."""
    from xenobench.backends import parse_backends
    a, b = parse_backends(base), parse_backends(target)
    return sum(a.backend_for_class(c).mac != b.backend_for_class(c).mac for c in range(1 << a.class_bits))


def test_class_sizes_move_exactly_2_to_the_k_classes_and_2_to_the_9_is_refused():
    from xenobench.backends import parse_backends
    from xenobench.errors import BackendsError
    from xenobench.measure.update import install_sets
    sets = install_sets("config/backends.json", "class", 9)
    assert parse_backends(sets["base"]).class_bits == 8
    assert [(t["k"], t["planned"], _moved(sets["base"], t["doc"])) for t in sets["targets"]] == [
        (k, 2 ** k, 2 ** k) for k in range(1, 9)]
    with pytest.raises(BackendsError, match=r"class_bits: 9 is not an integer in 0\.\.8"):
        parse_backends(sets["over"])
    small = install_sets("config/backends.json", "class", 3)
    assert [t["k"] for t in small["targets"]] == [1, 2, 3] and small["over"] is None


def test_katran_sizes_move_2_to_the_k_ring_slots_then_a_whole_real():
    """Katran's ring over the namespace testbed's reals (fips2, fips3): 2^k of weight moved from
    one real of weight 128 to the other changes exactly 2^k slots up to k = 6; past that the
    largest change two reals allow, one removed: about half the ring."""
    import json as _json
    from xenobench.agents.katran_lb import plan
    from xenobench.measure.update import install_sets
    from .test_katran import REALS
    sets = install_sets("config/backends.json", "ring slot", 9)

    def ring(doc, tmp=[]):
        import tempfile
        f = Path(tempfile.mkdtemp()) / "b.json"
        f.write_text(_json.dumps(doc))
        return plan(f, REALS)[1]
    base = ring(sets["base"])
    changed = [sum(x != y for x, y in zip(base, ring(t["doc"]))) for t in sets["targets"]]
    assert [t["k"] for t in sets["targets"]] == [1, 2, 3, 4, 5, 6, None] and sets["over"] is None
    assert changed == [2, 4, 8, 16, 32, 64, 32769]


def test_the_wire_is_refused_as_an_update_point(tmp_path):
    import shutil
    shutil.copytree("config", tmp_path / "config")
    f = tmp_path / "config" / "ci.yaml"
    f.write_text(f.read_text().replace("update: {lbs: [xenoflow, ebpf]", "update: {lbs: [ebpf, wire]"))
    with pytest.raises(ConfigError, match=r"experiments\.update\.lbs\[1\]: .wire."):
        load_config(f)


def test_every_lb_but_the_reference_has_an_update_path(testbed):
    """Every built-in LB under test changes its backend set at runtime; the reference (the wire) has
    no backends to change (xenobench.lb.BUILTIN: its `reference`)."""
    from xenobench.lb import BUILTIN, get_lb
    assert {k.name: get_lb(k.name, testbed).can_update for k in BUILTIN} == {k.name: not k.reference for k in BUILTIN}


# --- the arithmetic on arrival records ----------------------------------------------------------------
def A(mac, bucket, first_ms, last_ms, n):
    return Arrival(mac, bucket, int(first_ms * MS), int(last_ms * MS), n)


# removal sent at 100 ms, reported done at 103 ms, add-back sent at 300 ms (quiet: 50 ms); 1 ms buckets
RECS = [A(B, 99, 99.1, 99.9, 10), A(B, 100, 100.0, 100.9, 9), A(B, 101, 101.0, 101.4, 3),  # B drains at 101.4
        A(O, 101, 101.0, 101.95, 20), A(O, 150, 150.0, 150.9, 20),
        A(B, 300, 300.6, 300.9, 4), A(B, 301, 301.0, 301.9, 9)]                         # B back at 300.6


def test_removal_and_addition_from_arrivals():
    rm = arrival_removal(RECS, B, 100 * MS, 103 * MS, 300 * MS, 50 * MS)
    assert rm["drained"] is True
    assert rm["remove_last_frame_s"] == pytest.approx(1.4e-3)
    assert rm["done_to_last_frame_s"] == pytest.approx(-1.6e-3)      # drained before the report
    assert (rm["after_done_frames"], rm["after_done_frames_max"]) == (0, 0)
    assert rm["frames_at_removed_after_send"] == 12
    assert arrival_addition(RECS, B, 300 * MS, True) == {"add_first_frame_s": pytest.approx(0.6e-3)}


def test_a_backend_that_never_drains_has_no_last_or_first_frame_but_its_frames_after_done():
    lru = RECS[:3] + [A(B, 120, 120.2, 120.8, 5), A(B, 290, 290.0, 290.5, 7)]  # Katran's cached flows
    rm = arrival_removal(lru, B, 100 * MS, 103 * MS, 300 * MS, 50 * MS)
    assert (rm["drained"], rm["remove_last_frame_s"], rm["done_to_last_frame_s"]) == (False, None, None)
    assert (rm["after_done_frames"], rm["after_done_frames_max"]) == (12, 12)
    assert arrival_addition(lru, B, 300 * MS, False) == {"add_first_frame_s": None}
    # a bucket around the report: not in the lower bound, in the upper
    rm = arrival_removal(RECS + [A(B, 102, 102.5, 103.5, 6)], B, 100 * MS, 103 * MS, 300 * MS, 50 * MS)
    assert (rm["after_done_frames"], rm["after_done_frames_max"]) == (0, 6)


def test_window_frames_take_whole_buckets_and_gaps_span_buckets():
    recs = [A(O, b, b + 0.1, b + 0.9, 10) for b in range(0, 10)]
    assert window_frames(recs, 0, MS, int(2.5 * MS), int(7.2 * MS)) == (40, pytest.approx(0.004))  # buckets 3..6
    assert window_frames(recs, 0, MS, 5 * MS, 5 * MS) == (0, 0.0)
    gap = [A(O, 0, 0.1, 0.9, 5), A(B, 0, 0.2, 0.95, 5), A(O, 7, 7.3, 7.9, 5)]
    assert longest_gap_s(gap, 0, 10 * MS) == pytest.approx(6.35e-3)


# --- a results tree through aggregate, tables, figures, report ---------------------------------------
def _cycle(control_ms, last_ms, first_ms, after, drained=True):
    return {"remove": {"control_s": control_ms / 1e3, "apply_s": 0.0001, "drained": drained,
                       "remove_last_frame_s": None if last_ms is None else last_ms / 1e3,
                       "done_to_last_frame_s": None if last_ms is None else (last_ms - control_ms) / 1e3,
                       "after_done_frames": after, "after_done_frames_max": after},
            "add": {"control_s": control_ms / 2e3, "apply_s": 0.0001,
                    "add_first_frame_s": None if first_ms is None else first_ms / 1e3},
            "loss_pct": 1.5, "timing": "arrivals"}


def _burst(rate, rx, changes):
    return {"changes_per_s": rate, "changes": changes, "achieved_changes_per_s": changes / 2.0, "rx_pps": rx,
            "loss_pct": 2.0, "generator_achieved_pps": 200000.0, "timing": "arrivals"}


@pytest.fixture
def update_results(tmp_path):
    res = tmp_path / "local"
    for lb, cyc, bursts in (
            ("ebpf", [_cycle(12.0, 9.0, 14.0, 0), _cycle(14.0, 10.0, 15.0, 0)],
             [_burst(0.0, 190000.0, 0), _burst(10.0, 180000.0, 20)]),
            ("katran", [_cycle(3900.0, None, None, 70000, drained=False)],
             [_burst(0.0, 150000.0, 0), _burst(10.0, 75000.0, 1)])):
        _trial(res, "update", f"lb-{lb}", 1, {"lb": lb},
               {"payload": 22, "load_pps": 200000.0, "bucket_ns": MS, "cycles": cyc, "bursts": bursts})
    return res


def test_update_results_through_aggregate_figures_and_report(update_results, tmp_path):
    assert aggregate(update_results, progress=lambda m: None)["update"] == 2 * 11 + 8  # katran: no last-frame, done-to-last, first-frame rows
    u = read_tidy(update_results, "update")
    e = u[u.lb == "ebpf"]
    assert sorted(e[e.metric == "remove_control_ms"].value) == [12.0, 14.0]
    assert sorted(e[e.metric == "add_first_frame_ms"].value) == [14.0, 15.0]
    assert set(e.unit[e.metric == "remove_control_ms"]) == {"ms"} and set(e.background_pps) == {200000.0}
    k = u[u.lb == "katran"]
    assert "remove_last_frame_ms" not in set(k.metric)  # not measurable: no row, no made-up value
    assert list(k[k.metric == "after_done_frames"].value) == [70000.0]
    b = read_tidy(update_results, "update_burst")
    assert sorted(b[(b.lb == "katran") & (b.metric == "rx_pps")].changes_per_s) == [0.0, 10.0]
    figs = tmp_path / "figs"
    assert update_latency(update_results, figs, "local")[("ebpf", "remove_control_ms")] == [12.0, 14.0]
    assert update_disruption(update_results, figs, "local")[("katran", "after_done_frames")] == [70000.0]
    assert update_throughput(update_results, figs, "local") == {"ebpf": {0.0: 190000.0, 10.0: 180000.0},
                                                                 "katran": {0.0: 150000.0, 10.0: 75000.0}}
    assert (figs / "update_latency.png").exists() and (figs / "update_throughput.pdf").exists()
    text = write_report(update_results, figs).read_text()
    assert "## Backend changes under load" in text
    assert "| ebpf | 200 kpps | 13.00 ms | 9.50 ms | -3.50 ms | 6.50 ms | 14.50 ms | 0 | 2/2 | 1.50 % |" in text
    assert "| katran | 200 kpps | 3900.00 ms | n/a | n/a | 1950.00 ms | n/a | 70000 | 0/1 | 1.50 % |" in text
    assert "Finding: the removed backend kept receiving after the LB reported the change done (katran)" in text
    assert "| katran | 10 | 75.0 kpps | 50.0 % |" in text


def _install(rows, over=None):
    """Changes of (k, entries, lb_entries, control ms, apply ms) and their way back, same times."""
    ch = []
    for k, e, lbe, c, a in rows:
        for d in ("install", "revert"):
            ch.append({"k": k, "direction": d, "entries": e, "lb_entries": lbe, "control_s": c / 1e3, "apply_s": a / 1e3,
                       "entries_per_s": e / (c / 1e3), "apply_entries_per_s": e / (a / 1e3)})
    return {"load_pps": 200000.0, "changes": ch, "over": over, "generator_valid": True}


def test_installation_rows_figure_and_report(tmp_path):
    """Two LBs' installation sizes and the refused change above the limit → update_install rows
    (the rows of one change share a source), the log-log figure's medians and the report's table;
    an update capacity trial → an rtt_capacity row without split and its headline."""
    from xenobench.aggregate import rows_for_trial
    from xenobench.plots import update_install
    from xenobench.report import _headlines
    from xenobench.results import read_all
    res = tmp_path / "local"
    _trial(res, "update", "lb-ebpf", 1, {"lb": "ebpf"},
           {"payload": 22, "load_pps": 200000.0, "cycles": [_cycle(12.0, 9.0, 14.0, 0)], "bursts": [_burst(0.0, 1.9e5, 0)],
            "install": _install([(1, 2, 3, 2.0, 0.5), (8, 256, 1, 4.0, 1.0)],
                                over={"refused": True, "error": "Failed to ...", "frames_at_old_set_after": 5000,
                                      "backend": "fips2"})})
    _trial(res, "update", "lb-katran", 1, {"lb": "katran"},
           {"payload": 22, "load_pps": 200000.0, "cycles": [_cycle(30.0, None, None, 7, drained=False)],
            "bursts": [_burst(0.0, 1.5e5, 0)], "install": _install([(1, 2, 2, 20.0, 10.0), (None, 32769, 32769, 40.0, 20.0)])})
    cap = _trial(res, "update", "level-max_lb-ebpf", 1, {"level": "max", "lb": "ebpf"},
                 {"payload": 22, "rx_pps": 2.5e6, "rx_packets": 2_000_000, "tx_packets": 2_000_100,
                  "generator": {"duration_s": 1.0, "achieved_pps": 2_000_100.0}})
    from xenobench.layout import TrialDir
    cap = TrialDir(cap)
    (r,) = rows_for_trial("local", cap, cap.read_result(), res)["rtt_capacity"]
    assert (r["lb"], r["split"], r["value"]) == ("ebpf", None, 2_000_000.0)
    n = aggregate(res, progress=lambda m: None)
    assert n["update_install"] == 2 * 2 * 6 + 2 * 2 * 6 + 2 and n["rtt_capacity"] == 1
    u = read_tidy(res, "update_install")
    e = u[(u.lb == "ebpf") & (u.metric == "entries_per_s")]
    assert sorted(e.value) == [1000.0, 1000.0, 64000.0, 64000.0]
    one = u[u.source == "trials/update/lb-ebpf/rep-1:install-3:k-8:install"]
    assert dict(zip(one.metric, one.value)) == {"entries": 256.0, "lb_entries": 1.0, "install_control_ms": 4.0,
                                               "install_apply_ms": 1.0, "entries_per_s": 64000.0,
                                               "apply_entries_per_s": 256000.0}
    assert list(u[u.metric == "over_limit_refused"].value) == [1.0]
    figs = tmp_path / "figs"
    got = update_install(res, figs, "local")
    assert got["ebpf"] == {2.0: 1000.0, 256.0: 64000.0} and got["katran"] == {2.0: 100.0, 32769.0: 819225.0}
    assert got["katran/apply"] == {2.0: 200.0, 32769.0: 1638450.0}
    assert (figs / "update_install.png").exists()
    text = write_report(res, figs).read_text()
    assert "| ebpf | 256 | 64,000 | 256,000 | 2 |" in text
    assert "| katran | 32769 | 819,225 | 1,638,450 | 2 |" in text
    assert "Above its limit (ebpf): 1 of 1 changes refused; its old set forwarded 5000+ frames" in text
    assert ["capacity under update's conditions (update's 100 %), ebpf", "2000.0 kpps", "—", 1] in \
        _headlines(read_all(res))


@pytest.mark.parametrize("metric,value,text", [
    ("remove_control_ms", 0.0, "must be > 0"),          # a report cannot come before its command
    ("add_first_frame_ms", -1.0, "must be >= 0"),       # nor a first frame after the command before it
    ("drained", 2.0, "one of 0, 1"),
])
def test_impossible_update_values_are_refused(tmp_path, metric, value, text):
    from xenobench.results import metric as unit_of
    r = row(testbed="local", experiment="update", point="lb-ebpf", lb="ebpf", metric=metric, value=value, unit=unit_of(metric).unit, source="t")
    with pytest.raises(DataError, match=text):
        write_tidy("update", [r], tmp_path)


# --- live, namespace testbed ---------------------------------------------------------------------------
@needs_root
@pytest.mark.parametrize("kind", ["xenoflow", "ebpf", "katran"])
def test_live_cycle_and_burst_per_lb(testbed, tmp_path, kind):
    """One change cycle and a short burst under a light background, timed by the sink's arrival
    records. eBPF and XenoFlow: nothing reaches the removed backend after the report, the added one
    gets frames after its command. Katran: its LRU keeps flows on the removed real (the finding)."""
    from xenobench.lb import get_lb
    from xenobench.measure.update import change_burst, change_cycle, write_sets
    if kind == "katran":
        from .test_katran import needs_katran
        if needs_katran.args[0]:
            pytest.skip(needs_katran.kwargs["reason"])
    full, less = write_sets(testbed.cfg.service.backends, tmp_path)
    lb = get_lb(kind, testbed)
    lb.start(full)
    try:
        c = change_cycle(testbed, lb, full, less, load_pps=50000, hold_s=0.4, settle_s=0.3)
        b0 = change_burst(testbed, lb, full, less, rate_per_s=0, duration_s=0.5, load_pps=50000, settle_s=0.2)
        b = change_burst(testbed, lb, full, less, rate_per_s=20, duration_s=0.5, load_pps=50000, settle_s=0.2)
    finally:
        lb.stop()
    info = json.dumps(c, default=str)
    assert c["timing"] == "arrivals" and c["arrival_records"] > 0, info
    rm, add = c["remove"], c["add"]
    assert rm["frames_at_removed_after_send"] >= 0 and rm["control_s"] > 0 and add["control_s"] > 0, info
    if kind == "katran":
        assert rm["drained"] is False and rm["after_done_frames"] > 0, info
        assert rm["remove_last_frame_s"] is None and add["add_first_frame_s"] is None, info
    else:
        assert rm["drained"] is True and rm["after_done_frames"] == 0, info
        assert rm["done_to_last_frame_s"] <= 0, info   # nothing at the removed backend after the report
        assert 0 <= add["add_first_frame_s"], info
    assert b0["changes"] == 0 and b0["rx_pps"] > 0, b0
    assert b["changes"] >= 1 and b["rx_pps"] > 0, b
