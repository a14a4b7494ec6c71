"""The `distribution` experiment (experiments/distribution.yaml, xenobench.measure.distribution): the
fairness maths on hand-computed cases (xenobench.fairness), the populations' frames as compiled for
the namespace testbed (trex_profiles/population.py), a hand-made results tree through aggregate,
the figure (its drawn bars read back) and the report, the plan, and one point per LB (eBPF, Katran)
run live through `xenobench experiment run`."""

import ipaddress
import json
import math
import struct
import subprocess
import sys
from collections import Counter

import pytest
import yaml

from xenobench import REPO_ROOT
from xenobench.aggregate import aggregate
from xenobench.backends import CLASSES, load_backends
from xenobench.config import load_config
from xenobench.errors import ConfigError, TrafficError
from xenobench.experiments import plan, points, section
from xenobench.fairness import (backend_metric, chi2_distance, fairness, jain_index, max_min_ratio, mean_interval,
                                moved, population_of, populations, split_backend, summary)
from xenobench.layout import point_id
from xenobench.measure.distribution import _judge, _rule, frame_flows, without_last
from xenobench.results import read_tidy, row, write_tidy
from xenobench.traffic import compile_for
from xenobench.traffic.profiles import compile_frames
from xenobench.traffic.stl_sim import csum16
from xenobench.traffic.xdpgen import check_frames
from xenobench.trials import Validity

from .conftest import needs_root
from .test_aggregate_report import _trial

LOCAL = REPO_ROOT / "config" / "local.yaml"


# --- the maths, hand-computed ----------------------------------------------------------------------
# (values, Jain's index): (sum x)^2 / (n sum x^2)
JAIN = [([1, 1], 1.0), ([1, 0], 0.5), ([1, 0, 0, 0], 0.25), ([3, 1], 16 / 20), ([1.02, 0.98], 4 / 4.0016)]
# (values, max/min): None where one is 0
MAX_MIN = [([1.02, 0.98], 1.02 / 0.98), ([1, 0], None), ([2, 2, 1], 2.0)]
# (shares, weight shares, chi-square distance: sum (s - w)^2 / w)
CHI2 = [({"a": 0.51, "b": 0.49}, {"a": 0.5, "b": 0.5}, 0.0004), ({"a": 1.0, "b": 0.0}, {"a": 0.5, "b": 0.5}, 1.0),
        ({"a": 0.5, "b": 0.5}, {"a": 0.75, "b": 0.25}, 0.0625 / 0.75 + 0.0625 / 0.25), ({"a": 0.5}, {"a": 0.5, "b": 0.5}, 0.5)]


@pytest.mark.parametrize("x,want", JAIN)
def test_jain_index(x, want):
    assert jain_index(x) == pytest.approx(want)


@pytest.mark.parametrize("x,want", MAX_MIN)
def test_max_min_ratio(x, want):
    assert max_min_ratio(x) == (None if want is None else pytest.approx(want))


@pytest.mark.parametrize("share,weight,want", CHI2)
def test_chi2_distance(share, weight, want):
    assert chi2_distance(share, weight) == pytest.approx(want)


def test_fairness_is_of_each_share_over_its_weight():
    """Weights 3:1 met exactly: fair (Jain 1, max/min 1, chi-square 0), though the raw shares are 3:1;
    an even split of the same weights is not."""
    assert fairness({"a": 0.75, "b": 0.25}, {"a": 0.75, "b": 0.25}) == {
        "jain_index": pytest.approx(1.0), "max_min_ratio": pytest.approx(1.0), "chi2_distance": pytest.approx(0.0),
        "max_share": 0.75, "min_share": 0.25}
    f = fairness({"a": 0.5, "b": 0.5}, {"a": 0.75, "b": 0.25})
    # x = (0.5/0.75, 0.5/0.25) = (2/3, 2): Jain (8/3)^2 / (2 (4/9 + 4)) = 0.8, max/min 3
    assert (f["jain_index"], f["max_min_ratio"]) == (pytest.approx(0.8), pytest.approx(3.0))
    assert fairness({"a": 1.0, "b": 0.0}, {"a": 0.5, "b": 0.5})["max_min_ratio"] is None


# (before, after, the backend that left, (flows, moved, moved without need))
MOVED = [
    ({1: "a", 2: "b", 3: "c", 4: "a"}, {1: "a", 2: "b", 3: "a", 4: "b"}, "c", (4, 0.5, 0.25)),  # 3 had to; 4 did not
    ({1: "a", 2: "b"}, {1: "a", 2: "b"}, "c", (2, 0.0, 0.0)),                                    # nothing on c
    ({1: "a", 2: None, 3: "c"}, {1: "a", 2: "a", 3: "a"}, "c", (2, 0.5, 0.0)),                   # 2: no answer
]


@pytest.mark.parametrize("before,after,gone,want", MOVED)
def test_moved_flows(before, after, gone, want):
    m = moved(before, after, gone)
    assert (m["flows"], m["moved"], m["other"]) == (want[0], pytest.approx(want[1]), pytest.approx(want[2]))


def test_mean_interval_is_students_t():
    """Two repetitions: t(0.975, 1) = 12.706; mean 0.6, sd 0.1414, half-width 12.706 x 0.1 = 1.2706."""
    m, lo, hi = mean_interval([0.5, 0.7])
    assert (m, lo, hi) == (pytest.approx(0.6), pytest.approx(0.6 - 1.2706, abs=2e-3), pytest.approx(0.6 + 1.2706, abs=2e-3))
    assert mean_interval([0.5]) is None


def test_names_of_per_backend_metrics_and_points():
    assert backend_metric("frame_share", "fips2") == "frame_share@fips2"
    assert split_backend("frame_share_mean@fips-2_x") == ("frame_share_mean", "fips-2_x")
    assert split_backend("jain_index") == ("jain_index", None)
    assert population_of(point_id({"lb": "xenoflow-hash", "population": "zipf"})) == "zipf"


def test_without_last_keeps_the_class_mask():
    bs = load_backends(REPO_ROOT / "config" / "backends.json")
    less = without_last(bs, CLASSES)
    assert ([b.name for b in less.backends], less.class_bits, less.slots) == ([bs.backends[0].name], bs.class_bits,
                                                                              (0,) * (1 << bs.class_bits))


# --- a trial's validity (fixture table) -------------------------------------------------------------
# (description, changes to a trial's outputs where all agree, the checks that fail, a text of the reason)
JUDGED = [
    ("all agree", {}, set(), ""),
    ("the LB's rule says 50/50, the backends got 100/0", {"rule": {"frames": {"fips2": 384, "fips3": 384}}},
     {"rule_matches_frames"}, "up to 0.5 away from what the backends received (share_tolerance 0.02): backend_of "
                              "does not follow its data plane"),
    ("the rule within the tolerance", {"rule": {"frames": {"fips2": 763, "fips3": 5}}}, set(), ""),
    ("the LB's counters name another backend", {"lb_frames": {"fips2": 0, "fips3": 50000}}, {"lb_shares_match"},
     "the LB's counters give each backend a share up to 1.0 away from the frames counted at the backends"),
    ("2 % lost", {"rx_packets": 49000}, {"frames_counted"},
     "the backends counted 49000 of the 50000 frames sent, more than max_loss_pct 1 % lost"),
    ("frames to a node the file does not list", {"frames": {"fips2": 50000, "fips3": 0, "fips9": 3}},
     {"frames_at_backends"}, "({'fips9': 3}) or a MAC of no backend node (0)"),
    ("a driver that cannot say where a flow goes: measured only", {"rule": {"frames": None, "flows": None}}, set(), ""),
]


@pytest.mark.parametrize("what,change,failed,reason", JUDGED, ids=[j[0] for j in JUDGED])
def test_a_trial_is_judged_by_its_counts_and_the_lbs_rule(what, change, failed, reason):
    out = {"frames": {"fips2": 50000, "fips3": 0}, "stray_frames": 0, "tx_packets": 50000, "rx_packets": 50000,
           "lb_frames": {"fips2": 50000, "fips3": 0}, "rule": {"flows": {"fips2": 768, "fips3": 0},
                                                               "frames": {"fips2": 768, "fips3": 0}}}
    for k, x in change.items():
        out[k] = {**out[k], **x} if isinstance(x, dict) and k == "rule" else x
    out["loss_pct"] = 100 * (1 - out["rx_packets"] / out["tx_packets"])
    v = Validity()
    _judge(v, out, {"valid": True}, ["fips2", "fips3"], 0.02, 1.0)
    assert {k for k, ok in v.checks.items() if not ok} == failed, v.reasons
    assert reason in " ".join(v.reasons)


class _Says:
    """A driver's backend_of as a table (None: it cannot say)."""
    kind, split_by, no_route = "fake", "hash", "it does not say"

    def __init__(self, table):
        self.table = table

    def backend_of(self, flow, backends):
        return self.table.get(flow.sport)


def test_the_rule_counts_flows_and_frames_and_says_why_not():
    from xenobench.lb.base import Flow
    bs = load_backends(REPO_ROOT / "config" / "backends.json")
    a, b = (x.name for x in bs.backends)
    flows = Counter({Flow("198.19.0.1", p, "198.18.0.100", 53): n for p, n in ((1, 5), (2, 1), (3, 2))})
    r = _rule(_Says({1: a, 2: b, 3: b}), flows, bs)
    assert (r["flows"], r["frames"]) == ({a: 1, b: 2}, {a: 5, b: 3}) and r["why_not"] is None
    r = _rule(_Says({1: a, 2: b}), flows, bs)  # flow 3: no answer
    assert (r["flows"], r["frames"], r["why_not"]) == (None, None, "it does not say")


# --- the populations' frames -----------------------------------------------------------------------
def _ip(x: int) -> str:
    return str(ipaddress.IPv4Address(x))


@pytest.fixture(scope="module")
def compiled():
    """Every population of the profile compiled for the namespace testbed (as xdpgen sends it)."""
    cfg = load_config(LOCAL)
    return cfg, {p: compile_for(cfg, "population", {"population": p, "payload": 22}) for p in populations()}


def test_every_population_is_udp_to_the_service_with_valid_checksums_and_xdpgen_can_send_it(compiled):
    cfg, by = compiled
    assert set(by) == {"uniform", "slash24", "nat", "zipf", "evenodd"}
    base = ipaddress.IPv4Network(f"{cfg.section('traffic')['src_ip_base']}/16")
    for p, c in by.items():
        check_frames(c)  # one length, within xdpgen's limits
        for f in c.frames:
            assert len(f) == 64 and f[12:14] == b"\x08\x00" and f[23] == 17, p
            assert _ip(int.from_bytes(f[30:34], "big")) == cfg.service.vip and struct.unpack("!H", f[36:38])[0] == 53, p
            assert csum16(f[14:34]) == 0, p                                  # IPv4 header checksum
            assert ipaddress.IPv4Address(f[26:30]) in base, p                # inside the sink's block


def _sent(frames) -> list[tuple[str, int]]:
    """(source, source port) of each frame, in send order."""
    return [(_ip(int.from_bytes(f[26:30], "big")), struct.unpack("!H", f[34:36])[0]) for f in frames]


def _flows(c) -> Counter:
    """Frames per (source, source port), as xenobench.measure.distribution reads them."""
    return Counter({(f.src, f.sport): n for f, n in frame_flows(c.frames).items()})


def test_slash24_evenodd_and_nat_are_the_flows_they_stand_for(compiled):
    cfg, by = compiled
    b = int(ipaddress.IPv4Address(cfg.section("traffic")["src_ip_base"]))
    assert _sent(by["evenodd"].frames) == [(_ip(b), 1024), (_ip(b + 1), 1024)]
    assert _sent(by["slash24"].frames) == [(_ip(b + i), 1024) for i in range(256)]
    nat = _flows(by["nat"])
    clients = {s for s, _ in nat}
    assert clients == {_ip(b + 4), _ip(b + 20), _ip(b + 36)}                 # x.x.x.4, .20, .36
    assert {int(ipaddress.IPv4Address(s)) & 0xF for s in clients} == {4}     # one class for 1..4 class bits
    assert all(sum(1 for s, _ in nat if s == c) == 256 for c in clients)      # 256 ports each, one frame per flow
    assert set(nat.values()) == {1} and min(p for _, p in nat) >= 1024
    assert [s for s, _ in _sent(by["nat"].frames[:6])] == [_ip(b + 4), _ip(b + 20), _ip(b + 36)] * 2  # in turn


def test_uniform_and_zipf_are_seeded_draws_with_the_zipf_weights(compiled):
    _, by = compiled
    u = _flows(by["uniform"])
    assert (len(u), set(u.values())) == (4096, {1})
    assert len({s for s, _ in u}) > 3900 and min(p for _, p in u) >= 1024   # random addresses over the /16
    z = _flows(by["zipf"])
    # client i (1-based) sends round(4 x 256 / i) frames of each cycle: 1024, 512, 341, ... 4
    assert sorted(z.values(), reverse=True) == [round(1024 / i) for i in range(1, 257)]
    assert by["zipf"].cycle == sum(round(1024 / i) for i in range(1, 257))
    top = max(z, key=z.get)
    # the heaviest client's frames spread over the cycle (stride order), not in one run: the first 8 frames
    # are clients 1, 2, 1, 3, 4, 5, 1, 6 (the k-th of client i at (k + 1/2) / weight_i of the cycle)
    assert _sent(by["zipf"].frames[:8]).count(top) == 3 and len(set(_sent(by["zipf"].frames[:8]))) == 6


@pytest.mark.parametrize("tunables,text", [
    ({"population": "slash24", "src_ip_base": "198.19.0.16"}, "--population slash24: src-ip-base 198.19.0.16 is not "
                                                             "the first address of a /24"),
    ({"population": "evenodd", "clients": 3}, "--population evenodd: it has two clients (an even and an odd address), "
                                              "not 3"),
    ({"population": "zipf", "clients": 5000}, "--population zipf: a cycle of"),
    ({"population": "pareto"}, "argument --population: invalid choice: 'pareto'"),
])
def test_a_population_the_profile_cannot_make_is_refused_by_name(tunables, text):
    with pytest.raises(TrafficError, match=r"population\.py with tunables .*" + text.replace(".", r"\.")
                       .replace("(", r"\(").replace(")", r"\)")):
        compile_frames("population", tunables)


# --- a results tree through aggregate, the figure and the report ----------------------------------
def _outputs(frames: dict, rule_flows: dict | None, weights=None, moved_share=0.5) -> dict:
    n = sum(frames.values())
    return {"population": "nat", "payload": 22, "requested_pps": 50000.0,
            "generator": {"achieved_pps": 50000.0, "tx_packets": n, "duration_s": 1.0, "valid": True},
            "cycle_frames": 768, "flows": 768, "counted_by": "arrivals", "weights": weights or {"fips2": 1, "fips3": 1},
            "frames": frames, "stray_frames": 0, "tx_packets": n, "rx_packets": n, "loss_pct": 0.0, "lb_frames": frames,
            "rule": {"by": "class", "why_not": None, "flows": rule_flows, "frames": rule_flows},
            "disruption": {"removed": "fips3", "backends": 2, "flows": 768, "moved_on_remove": moved_share,
                           "moved_other_on_remove": 0.0, "moved_on_add": moved_share, "moved_other_on_add": 0.0,
                           "ideal": 0.5}}


@pytest.fixture
def results(tmp_path):
    """nat through ebpf (every flow to fips2) in two repetitions, katran (0.51/0.49 and 0.49/0.51) and
    xenoflow-hash (0.9/0.1 and 0.2/0.8: an interval wider than a share can be)."""
    r = tmp_path / "local"
    for rep in (1, 2):
        _trial(r, "distribution", "lb-ebpf_population-nat", rep, {"lb": "ebpf", "population": "nat"},
               _outputs({"fips2": 50000, "fips3": 0}, {"fips2": 768, "fips3": 0}, moved_share=0.0))
    for rep, (a, b) in ((1, (25500, 24500)), (2, (24500, 25500))):
        _trial(r, "distribution", "lb-katran_population-nat", rep, {"lb": "katran", "population": "nat"},
               _outputs({"fips2": a, "fips3": b}, {"fips2": 380, "fips3": 388}))
    for rep, (a, b) in ((1, (45000, 5000)), (2, (10000, 40000))):
        _trial(r, "distribution", "lb-xenoflow-hash_population-nat", rep, {"lb": "xenoflow-hash", "population": "nat"},
               _outputs({"fips2": a, "fips3": b}, {"fips2": 400, "fips3": 368}))
    return r


def _value(t, lb, m, rep=None):
    x = t[(t.lb == lb) & (t.metric == m) & (t.repetition.isna() if rep is None else t.repetition == rep)]
    assert len(x) == 1, (lb, m, rep, x)
    return float(x.value.iloc[0])


def test_rows_through_aggregate(results):
    aggregate(results, progress=lambda m: None)
    d = read_tidy(results, "distribution")
    assert _value(d, "ebpf", "frame_share@fips2", 1) == 1.0 and _value(d, "ebpf", "frame_share@fips3", 2) == 0.0
    assert _value(d, "ebpf", "jain_index", 1) == 0.5 and _value(d, "ebpf", "chi2_distance", 1) == 1.0
    assert "max_min_ratio" not in set(d[d.lb == "ebpf"].metric)               # a backend got nothing: unbounded, no row
    assert _value(d, "katran", "max_min_ratio", 1) == pytest.approx(0.51 / 0.49)
    assert _value(d, "katran", "rule_flow_share@fips3", 1) == pytest.approx(388 / 768)
    assert set(d[d.metric == "rule_flow_share@fips3"].source.str.endswith(":rule")) == {True}  # says: by the rule
    # per point over the repetitions: the mean and its t interval, clipped to what a share can be
    assert _value(d, "katran", "frame_share_mean@fips2") == pytest.approx(0.5)
    assert _value(d, "katran", "frame_share_ci_low@fips2") == pytest.approx(0.5 - 12.706 * 0.01, abs=2e-3)
    assert (_value(d, "xenoflow-hash", "frame_share_ci_low@fips2"),                  # 0.55 -+ 12.706 x 0.35
            _value(d, "xenoflow-hash", "frame_share_ci_high@fips2")) == (0.0, 1.0)   # clipped to 0..1
    assert _value(d, "ebpf", "jain_index_ci_high") == 0.5                    # no spread
    assert set(d.point) == {"lb-ebpf_population-nat", "lb-katran_population-nat", "lb-xenoflow-hash_population-nat"}
    x = read_tidy(results, "disruption")
    assert _value(x, "katran", "moved_on_remove_share", 2) == 0.5 and _value(x, "ebpf", "moved_ideal_share", 1) == 0.5
    assert set(x.source.str.contains(":rule:remove-fips3")) == {True}


def test_figure_draws_each_backends_share_per_lb_and_population(results, tmp_path, monkeypatch):
    """The bars read back from the drawn figure: per panel (population) and LB, each backend's median
    share; Jain's index above each LB; the caption says what the numbers are."""
    from xenobench import plots
    aggregate(results, progress=lambda m: None)
    figs = {}
    monkeypatch.setattr(plots, "_save", lambda fig, outdir, name, resdir=None: figs.setdefault(name, fig))
    series = plots.FIGURES["distribution_shares"](results, tmp_path / "figs", "local")
    fig = figs["distribution_shares"]
    ax = next(a for a in fig.axes if a.get_title() == "nat")
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    bars = sorted((round(p.get_x() + p.get_width() / 2, 3), round(p.get_height(), 6)) for p in ax.patches)
    assert ticks == ["XenoFlow\n(hash)", "eBPF/XDP LB", "Katran"]  # the LB kinds' order
    # two backends per LB, left fips2, right fips3: xenoflow-hash median 0.55/0.45, ebpf 1.0/0.0, katran 0.5/0.5
    assert [h for _, h in bars] == [0.55, 0.45, 1.0, 0.0, 0.5, 0.5]
    assert {t.get_text() for t in ax.texts} >= {"J 0.50", "J 1.00", "0"}
    assert series == {"nat": {"xenoflow-hash": {"fips2": 0.55, "fips3": 0.45}, "ebpf": {"fips2": 1.0, "fips3": 0.0},
                              "katran": {"fips2": 0.5, "fips3": 0.5}}}
    caption = " ".join(fig.__dict__["_xenobench_captions"])
    assert "each backend's share of the population's frames counted where they arrive" in caption
    assert "median of 2 runs per point" in caption


def test_report_has_the_open_questions(results, tmp_path):
    from xenobench.report import write_report
    aggregate(results, progress=lambda m: None)
    text = write_report(results, tmp_path / "figs").read_text()
    part = text[text.index("## The paper's open questions"):]
    assert "| nat | ebpf | class | 0.500 | ∞ (a backend got none) | 1.000 | 0.500 | 0.000 (ideal 0.500) | 2 |" in part
    assert "| nat | katran | flow hash | 1.000 | 1.04 | 0.000 | 1.000 | 0.500 (ideal 0.500) | 2 |" in part
    assert "### A per-client table in pipe entries\n\nNot measured yet." in part


def test_report_without_rows_says_not_measured(tmp_path):
    from xenobench.report import write_report
    r = tmp_path / "local"
    r.mkdir()
    text = write_report(r, tmp_path / "figs").read_text()
    assert ("### Hash-based distribution instead of the source-address classes\n\nNot measured in this run"
            in text)


def test_summary_orders_populations_as_the_profile_and_lbs_as_the_kinds(tmp_path):
    rows = [row(testbed="fx", experiment="distribution", point=f"lb-{lb}_population-{p}", lb=lb, repetition=1,
                metric="jain_index", value=1.0, unit="index", source="t") for p in ("zipf", "uniform")
            for lb in ("katran", "xenoflow")]
    write_tidy("distribution", rows, tmp_path)
    got = [(r["population"], r["lb"]) for r in summary(read_tidy(tmp_path, "distribution"))]
    assert got == [("uniform", "xenoflow"), ("uniform", "katran"), ("zipf", "xenoflow"), ("zipf", "katran")]


def test_small_fixture_tables_read(tmp_path):
    """tests/fixtures/results/small's distribution rows hold the figures of their shares."""
    d = read_tidy(REPO_ROOT / "tests" / "fixtures" / "results" / "small", "distribution")
    k = d[d.lb == "katran"]
    share = {split_backend(m)[1]: v for m, v in zip(k.metric, k.value) if m.startswith("frame_share@")}
    assert float(k[k.metric == "jain_index"].value.iloc[0]) == pytest.approx(
        fairness(share, {"fips2": 0.5, "fips3": 0.5})["jain_index"], abs=1e-6)


# --- the plan --------------------------------------------------------------------------------------
def xb(*args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xenobench", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("config", ["ci", "local", "fips"])
def test_plan_is_every_lb_times_every_population(config):
    """`experiment plan --only distribution --json`: a point per LB (slowest) and population, each of
    the section's repetitions; the LBs the testbed cannot run left out (fips: Katran)."""
    path = REPO_ROOT / "config" / f"{config}.yaml"
    cfg = load_config(path)
    sec = section(cfg, "distribution")
    r = xb("--config", str(path), "experiment", "plan", "--only", "distribution", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    from xenobench.experiments import why_not
    want = [{"lb": lb, "population": p} for lb in sec["lbs"] if not why_not(cfg, lb) for p in sec["populations"]]
    reps = sec.get("repetitions") or cfg.section("experiments")["repetitions"]
    assert [(x["point"], x["trials"]) for x in got] == [(p, reps) for p in want]
    assert points(cfg, "distribution") == want
    assert len(plan(cfg, ["distribution"])) == reps * len(want)


def test_ci_is_tiny_and_local_lists_the_lbs_that_balance():
    ci, local = (section(load_config(REPO_ROOT / "config" / f"{c}.yaml"), "distribution") for c in ("ci", "local"))
    assert (len(ci["lbs"]), len(ci["populations"]), ci["duration_s"]) == (2, 2, 0.5)
    assert {"xenoflow", "ebpf", "katran"} <= set(local["lbs"]) and "wire" not in local["lbs"]
    assert set(local["populations"]) == set(populations())


def test_a_population_the_profile_does_not_offer_is_refused_when_planned(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({"extends": str(LOCAL), "experiments": {
        "distribution": {"lbs": ["ebpf"], "populations": ["nat", "pareto"]}}}))
    with pytest.raises(ConfigError, match=r"Failed to plan experiment distribution: experiments\.distribution\."
                                          r"populations: 'pareto' is not a population of population\.py \(known: "
                                          + ", ".join(populations()) + r"\) in .*c\.yaml"):
        plan(load_config(p), ["distribution"])


# --- live: one point per LB through `xenobench experiment run` -------------------------------------
@needs_root
def test_live_nat_through_ebpf_and_katran(testbed, tmp_path):
    """The nat population (three clients sharing their low bits) through the eBPF LB (the class rule:
    every frame to the class's backend) and Katran (its ring: both backends), each point valid, its
    measured shares where the LB's rule says, its rows present."""
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({"extends": str(LOCAL), "experiments": {"distribution": {
        "repetitions": 1, "lbs": ["ebpf", "katran"], "populations": ["nat"], "rate_pps": 50000, "duration_s": 0.5}}}))
    cfg = load_config(p)
    for lb in ("ebpf", "katran"):
        r = xb("--config", str(p), "experiment", "run", "distribution", point_id({"lb": lb, "population": "nat"}),
               "--results", str(tmp_path / "results"))
        assert r.returncode == 0, r.stderr[-3000:]
        assert (json.loads(r.stdout)["valid"], json.loads(r.stdout)["invalid"]) == (1, 0), r.stdout
    resdir = tmp_path / "results" / cfg.name
    assert xb("experiment", "aggregate", str(resdir)).returncode == 0
    d = read_tidy(resdir, "distribution")
    bs = load_backends(cfg.service.backends)
    base = int(ipaddress.IPv4Address(cfg.section("traffic")["src_ip_base"]))
    nat_backend = bs.backend_for_source(_ip(base + 4)).name                  # the nat clients' one class
    for b in bs.backends:
        assert _value(d, "ebpf", backend_metric("frame_share", b.name), 1) == (1.0 if b.name == nat_backend else 0.0)
        k = _value(d, "katran", backend_metric("frame_share", b.name), 1)
        assert 0.3 < k < 0.7                                                  # 768 flows hashed over both
        assert k == pytest.approx(_value(d, "katran", backend_metric("rule_frame_share", b.name), 1), abs=0.02)
    assert _value(d, "ebpf", "jain_index", 1) == 0.5 and _value(d, "katran", "jain_index", 1) > 0.9
    assert _value(d, "katran", "flows", 1) == 768
    x = read_tidy(resdir, "disruption")
    assert _value(x, "katran", "moved_ideal_share", 1) == 1 / len(bs.backends)
    assert _value(x, "ebpf", "moved_on_remove_share", 1) == (0.0 if nat_backend != bs.backends[-1].name else 1.0)
    assert not math.isnan(_value(x, "katran", "moved_on_remove_share", 1))
