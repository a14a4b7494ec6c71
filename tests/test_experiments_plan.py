"""The experiment plan expanded from config: the thesis testbed's full plan, the local one; the
experiment definitions read as data and validated (experiments/schema/definition.schema.yaml)."""

import shutil

import pytest

from xenobench.config import DEFAULT_CONFIG, load_config
from xenobench.errors import ConfigError
from xenobench.experiments import (EXPERIMENTS_DIR, available_lbs, definitions, paired, left_out, listed_lbs, order, plan,
                                   points, record_left_out)
from xenobench.lb import unavailable
from xenobench.plots import FIGURES
from xenobench.measure import KINDS as MEASURE_KINDS, PROCEDURES
from xenobench.results import KINDS
from xenobench.traffic.profiles import profile_names


def test_every_measurement_has_a_definition_the_code_can_run():
    defs = definitions()
    assert sorted(defs) == sorted(order())
    for d in defs.values():
        assert PROCEDURES[d.procedure][0] == d.kind and d.kind in MEASURE_KINDS, d.id
        assert set(d.tidy["tables"]) <= set(KINDS), d.id
        assert d.figures and set(d.figures) <= set(FIGURES), d.id


def _defs_dir(tmp_path, edit):
    d = tmp_path / "experiments"
    shutil.copytree(EXPERIMENTS_DIR, d, ignore=shutil.ignore_patterns("schema"))
    edit(d)
    return d


# (description, edit of a copy of experiments/, the refusal's text)
BAD_DEFINITIONS = [
    ("a typo'd procedure", lambda d: (d / "pps.yaml").write_text((d / "pps.yaml").read_text().replace(
        "procedure: offered_load", "procedure: offerd_load")), "pps.yaml: procedure: 'offerd_load' is not a procedure of kind rate (known: offered_load)"),
    ("a typo'd kind", lambda d: (d / "pps.yaml").write_text((d / "pps.yaml").read_text().replace(
        "kind: rate", "kind: rates")), "pps.yaml: kind: 'rates' is not a measurement kind (known: rate, latency,"),
    ("a table no tidy schema has", lambda d: (d / "loss.yaml").write_text((d / "loss.yaml").read_text().replace(
        "tables: [loss]", "tables: [losses]")), "loss.yaml: tidy.tables: 'losses' is not a table of xenobench.results"),
    ("a typo'd metric source", lambda d: (d / "pps.yaml").write_text((d / "pps.yaml").read_text().replace(
        "from: rx_pps}", "from: rx_ppz}")),
     "pps.yaml: tidy.metrics.rx_pps.from: 'rx_ppz' is not an output of kind rate (known: payload,"),
    ("a typo'd profile", lambda d: (d / "pps.yaml").write_text((d / "pps.yaml").read_text().replace(
        "profile: udp_payload", "profile: udp_paylod")),
     "pps.yaml: profile: 'udp_paylod' is not a profile of trex_profiles/ (known: " + ", ".join(profile_names()) + ")"),
    ("bad YAML", lambda d: (d / "loss.yaml").write_text("id: loss\ntitle: [unclosed\n"), "loss.yaml: while parsing"),
    ("a missing id", lambda d: (d / "rtt.yaml").write_text((d / "rtt.yaml").read_text().replace("id: rtt\n", "")),
     "rtt.yaml: (top level): 'id' is a required property"),
    ("an id that is not the file's", lambda d: (d / "rtt.yaml").write_text(
        (d / "rtt.yaml").read_text().replace("id: rtt\n", "id: rtt2\n")), "id: 'rtt2' is not the file's name 'rtt'"),
    ("two at one place in the plan", lambda d: (d / "rank.yaml").write_text((d / "rank.yaml").read_text().replace(
        "order: 80", "order: 10")), "rank.yaml: order: 10 is also pps's"),
    ("no order", lambda d: (d / "rank.yaml").write_text((d / "rank.yaml").read_text().replace("order: 80\n", "")),
     "rank.yaml: (top level): 'order' is a required property"),
    ("none_when_zero naming a later variable", lambda d: (d / "rtt_load.yaml").write_text(
        (d / "rtt_load.yaml").read_text().replace("none_when_zero: level", "none_when_zero: nosuch")),
     "variables.split.none_when_zero: 'nosuch' is not a variable before it"),
]


@pytest.mark.parametrize("what,edit,text", BAD_DEFINITIONS, ids=[b[0] for b in BAD_DEFINITIONS])
def test_bad_definitions_are_refused_by_file_and_key(tmp_path, what, edit, text):
    with pytest.raises(ConfigError) as e:
        definitions(_defs_dir(tmp_path, edit))
    assert text in str(e.value), str(e.value)


def test_a_new_definition_is_planned_in_its_place(tmp_path):
    """The definitions are the plan's list: a copy of rtt as a new experiment, placed between pps
    and loss, is planned there with nothing else edited; one removed is simply not planned."""
    def edit(d):
        (d / "rtt_rate.yaml").write_text((d / "rtt.yaml").read_text().replace("id: rtt\n", "id: rtt_rate\n")
                                         .replace("order: 40", "order: 15"))
        (d / "compare.yaml").unlink()
    shipped = definitions()
    want = sorted([*(e for e in shipped if e != "compare"), "rtt_rate"],
                  key=lambda e: 15 if e == "rtt_rate" else shipped[e].order)
    assert list(definitions(_defs_dir(tmp_path, edit))) == want and "rtt_rate" in want


def test_rtt_unpaired_has_lb_as_a_variable(tmp_path):
    cfg = load_config(DEFAULT_CONFIG.parent / "ci.yaml")
    # capacity_from self: the maxima the levels are shares of first (tests/test_rtt_load_capacity.py)
    assert points(cfg, "rtt_load")[2:] == [{"level": 0, "split": "none"}, {"level": 0.9, "split": "50/50"},
                                           {"level": 0.9, "split": "worst"}]
    assert points(cfg, "rtt") == [{"server": "xdp"}]  # paired: every LB inside each repetition


def test_thesis_plan_sizes():
    cfg = load_config(DEFAULT_CONFIG.parent / "fips.yaml")
    by = {}
    for t in plan(cfg):
        by[t.experiment] = by.get(t.experiment, 0) + 1
    # Katran is left out (its testbed has no L3 hop: test_katran_left_out_of_the_thesis_plan_by_name):
    # 2 LBs (XenoFlow, eBPF) × 22 payloads, 11 offered rates, 2 LBs × 3 frame sizes searched,
    # 1 server (the paths paired inside each repetition), 6 levels × 4 splits + the level without
    # background + a capacity point per LB (XenoFlow, eBPF) and split (capacity_from self, the
    # default), 2 LBs, 2 LBs changing backends, each after its capacity point (load: a share of it); × 3 reps
    # distribution: 3 LBs (XenoFlow in both modes, eBPF) x 5 populations
    assert by == {"pps": 132, "loss": 33, "ndr_pdr": 18, "rtt": 3, "rtt_load": 99, "compare": 6, "update": 12,
                  "distribution": 45}
    assert {"level": "max", "split": "70/30", "lb": "xenoflow"} in points(cfg, "rtt_load")
    assert points(cfg, "loss")[-1] == {"lb": "xenoflow", "rate_pps": 135_000_000}
    assert {"level": 0.9, "split": "worst"} in points(cfg, "rtt_load")


def test_trial_directories_are_explicit_keys():
    cfg = load_config()
    t = plan(cfg, ["rtt_load"])[0]
    assert str(t.trial_dir("results", cfg.name).path) == \
        "results/local/trials/rtt_load/level-max_split-single_lb-xenoflow/rep-1"  # its capacity points first
    s = {str(x.trial_dir("results", cfg.name).path) for x in plan(cfg)}
    assert len(s) == len(plan(cfg))  # no two trials share a directory


# (description, the experiments section over config/local.yaml's, trials per pps point, per loss
# point, per update point: config/local.yaml gives update its own 2)
REPETITIONS = [
    ("the study's count", "{repetitions: 3}", 3, 3, 2),
    ("an experiment's own count", "{repetitions: 3, loss: {repetitions: 2}}", 3, 2, 2),
    ("its own over a smaller study's", "{repetitions: 1, pps: {repetitions: 4}}", 4, 1, 2),
]


@pytest.mark.parametrize("what, section, pps, loss, update", REPETITIONS, ids=[r[0] for r in REPETITIONS])
def test_an_experiment_may_set_its_own_repetitions(tmp_path, what, section, pps, loss, update):
    (tmp_path / "c.yaml").write_text(f"extends: {DEFAULT_CONFIG}\nexperiments: {section}\n")
    cfg = load_config(tmp_path / "c.yaml")
    got = {}
    for t in plan(cfg, ["pps", "loss", "update"]):
        got.setdefault(t.experiment, set()).add(tuple(sorted(r.repetition for r in plan(cfg, [t.experiment])
                                                              if r.point == t.point)))
    assert got == {"pps": {tuple(range(1, pps + 1))}, "loss": {tuple(range(1, loss + 1))},
                   "update": {tuple(range(1, update + 1))}}, got


def test_an_experiments_repetitions_below_one_is_refused_by_key(tmp_path):
    (tmp_path / "c.yaml").write_text(f"extends: {DEFAULT_CONFIG}\nexperiments: {{update: {{repetitions: 0}}}}\n")
    with pytest.raises(ConfigError, match=r"experiments\.update\.repetitions.*0"):
        load_config(tmp_path / "c.yaml")


def _with(tmp_path, base: str, extra: str):
    (tmp_path / "c.yaml").write_text(f"extends: {DEFAULT_CONFIG.parent / base}\n{extra}")
    return load_config(tmp_path / "c.yaml")


def test_katran_left_out_of_the_thesis_plan_by_name():
    """The thesis testbed's switch binds MACs (L2): Katran, which hands every frame to the default
    gateway's MAC, has no hop there while katran.gateway_mac is the placeholder. Its points are not
    planned, each experiment listing it names it with the reason, and the rest of the study stays."""
    cfg = load_config(DEFAULT_CONFIG.parent / "fips.yaml")
    why = unavailable("katran", cfg)
    assert why.startswith("the testbed has no L3 hop: Katran sends every frame IPIP-encapsulated to the default "
                          "gateway's MAC (its README: an L3 topology) and katran.gateway_mac in ")
    assert "is the placeholder 02:00:00:00:fe:00 (fix: route the backends' subnet through a router" in why
    assert not [t for t in plan(cfg) if t.point.get("lb") == "katran"]
    listing = [e for e in order() if ("katran", "lbs") in listed_lbs(cfg, e)]
    out = left_out(cfg)
    assert [(x.experiment, x.lb, x.reason) for x in out] == [(e, "katran", why) for e in listing]
    assert len(listing) == 6
    # points dropped: a point per payload of pps, per size of ndr_pdr, rtt_load's capacity point per
    # split, update's capacity point and its own, compare's one; none of the paired rtt (its
    # repetitions switch among the others)
    sec = cfg.section("experiments")
    assert {x.experiment: x.points for x in out} == {
        "pps": len(sec["pps"]["payloads"]), "ndr_pdr": len(sec["ndr_pdr"]["payloads"]), "rtt": 0,
        "rtt_load": len(sec["rtt_load"]["splits"]), "compare": 1, "update": 2}
    assert out[0].line().startswith(f"pps: katran left out of experiments.pps.lbs ({len(sec['pps']['payloads'])} "
                                    "point(s)): the testbed has no L3 hop")
    assert available_lbs(cfg, "rtt") == [k for k in sec["rtt"]["lbs"] if k != "katran"]
    assert unavailable("xenoflow", cfg) is None and unavailable("ebpf", cfg) is None


@pytest.mark.parametrize("base,extra,katran_planned", [
    ("fips.yaml", "katran: {gateway_mac: '7c:fe:90:00:00:01'}\n", True),   # the site's router: deploy proves it
    ("local.yaml", "", True),                                             # the namespace fabric routes
    ("local.yaml", "experiments: {compare: {lbs: [xenoflow, katran]}}\n", True),
])
def test_katran_planned_where_its_l3_hop_exists(tmp_path, base, extra, katran_planned):
    cfg = _with(tmp_path, base, extra)
    assert unavailable("katran", cfg) is None
    # a point per LB (the thesis's protocol), or an LB of every repetition (local.yaml's paired design)
    planned = (any(pt.get("lb") == "katran" for pt in points(cfg, "compare"))
               or (paired(cfg, "compare") and "katran" in available_lbs(cfg, "compare")))
    assert planned == katran_planned
    assert not [x for x in left_out(cfg) if x.lb == "katran"]


def test_xenoflow_without_a_dpu_is_left_out_and_the_rest_runs(tmp_path):
    """XenoFlow's DOCA build runs on a BlueField's Arm cores: a hosts testbed in mode doca without a
    node of role dpu leaves it out (its points, its paired blocks), naming the fix."""
    import yaml
    raw = yaml.safe_load((DEFAULT_CONFIG.parent / "fips.yaml").read_text())
    del raw["nodes"]["fips5-dpu"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    cfg = load_config(tmp_path / "c.yaml")
    why = unavailable("xenoflow", cfg)
    assert why == (f"xenoflow.mode is doca (XenoFlow runs on a BlueField DPU's Arm cores) and {cfg.path} has no "
                   "node with role dpu (fix: add the DPU's Arm side as a node with role: dpu and its ports p0/p1 as "
                   "lb_port ingress/egress, or set xenoflow.mode: emulation to run the emulated build on the LB node)")
    planned = plan(cfg)
    assert not [t for t in planned if "xenoflow" in (t.point.get("lb"),)]
    assert [t for t in planned if t.point.get("lb") == "ebpf"]
    assert points(cfg, "loss") == []  # its one LB is XenoFlow
    assert available_lbs(cfg, "rtt") == ["none", "ebpf"]


def test_left_out_recorded_for_the_report(tmp_path):
    import json
    cfg = load_config(DEFAULT_CONFIG.parent / "fips.yaml")
    out = record_left_out(cfg, tmp_path / "fips" / "left_out.json")
    rec = json.loads((tmp_path / "fips" / "left_out.json").read_text())
    assert [(r["experiment"], r["lb"], r["key"], r["points"], r["reason"], r["line"]) for r in rec] == [
        (x.experiment, x.lb, x.key, x.points, x.reason, x.line()) for x in out]
    assert {r["lb"] for r in rec} == {"katran"} and len(rec) == 6
    assert record_left_out(load_config(DEFAULT_CONFIG), tmp_path / "local.json") == []
