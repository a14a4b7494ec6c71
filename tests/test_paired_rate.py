"""pps and compare in the paired design (xenobench.measure.rate; config `paired: true`): the points
it plans, the rows it makes of interleaved repetitions (each LB's absolute rate per repetition, its
ratio to the reference with a CI per point, in the experiment's own table), and aggregation keeping
to the config's plan (unplanned.csv)."""

import csv

import pytest

from xenobench.aggregate import aggregate, planned_points
from xenobench.config import load_config
from xenobench.errors import ConfigError
from xenobench.experiments import plan, points
from xenobench.layout import ResultsTree, point_id
from xenobench.results import read_tidy

CONFIGS = __import__("pathlib").Path(__file__).resolve().parent.parent / "config"


def _cfg(tmp_path, pps: str, compare: str = "{lbs: [wire, xenoflow], payload: 22, paired: true}", name="local"):
    f = tmp_path / "c.yaml"
    f.write_text(f"extends: {CONFIGS / 'local.yaml'}\ntestbed: {{name: {name}}}\nexperiments:\n"
                 f"  pps: {pps}\n  compare: {compare}\n")
    return load_config(f)


@pytest.mark.parametrize("pps, expected", [
    ("{lbs: [wire, ebpf], payloads: [22, 64], paired: true}", [{"payload": 22}, {"payload": 64}]),
    ("{lbs: [wire, ebpf], payloads: [22], paired: false}", [{"lb": "wire", "payload": 22}, {"lb": "ebpf", "payload": 22}]),
])
def test_points_of_the_two_designs(tmp_path, pps, expected):
    assert points(_cfg(tmp_path, pps), "pps") == expected


def test_a_paired_design_without_a_variable_left_is_one_point_named_by_its_reference(tmp_path):
    assert points(_cfg(tmp_path, "{lbs: [wire], payloads: [22]}"), "compare") == [{"reference": "wire"}]


def test_a_paired_list_without_its_reference_is_refused_when_planned(tmp_path):
    cfg = _cfg(tmp_path, "{lbs: [xenoflow, ebpf], payloads: [22], paired: true}")
    with pytest.raises(ConfigError) as e:
        plan(cfg, ["pps"])
    assert str(e.value) == (f"Failed to plan experiment pps: experiments.pps.reference 'wire' is not in its lbs "
                            f"['xenoflow', 'ebpf'] in {cfg.path} (add it to the list, or name one of the list)")


# one interleaved repetition: rounds x LBs blocks (rate, kept); round 3 left out by the machine rule
BLOCKS = [  # round, lb, rate_pps, per DUT CPU-second
    (1, "wire", 3.0e6, 3.1e6), (1, "xenoflow", 2.7e6, 2.9e6),
    (2, "xenoflow", 2.8e6, 2.95e6), (2, "wire", 3.1e6, 3.2e6),
    (3, "wire", 1.0e6, 1.1e6), (3, "xenoflow", 0.5e6, 0.6e6),
    (4, "wire", 3.05e6, 3.15e6), (4, "xenoflow", 2.75e6, 2.9e6),
]


def _paired_trial(tree, experiment, point, rep, payload=22, lbs=("wire", "xenoflow")):
    t = tree.trial(experiment, point, rep)
    t.path.mkdir(parents=True)
    blocks = [{"block": i, "round": r, "lb": lb, "rate_pps": rate * (1 + rep / 100), "rx_per_dut_cpu_s": cpu,
               "round_kept": r != 3, "samples": 10} for i, (r, lb, rate, cpu) in enumerate(BLOCKS, 1)]
    t.write_result({"experiment": experiment, "point": point, "repetition": rep, "valid": True,
                    "attempts": [{"attempt": 1, "valid": True, "checks": {}, "reasons": []}], "chosen_attempt": 1,
                    "outputs": {"payload": payload, "lbs": list(lbs), "reference": "wire", "blocks": blocks,
                                "bootstrap_seed": 17, "bootstrap_resamples": 500,
                                "generator": {"valid": True, "achieved_pps": 4.0e6},
                                "facts": {"kind": "rate", "lb": "none", "paired": True, "lbs": list(lbs),
                                          "server": None, "profile": "udp_payload", "generator": "xdpgen"}}})
    return t


def test_rows_of_the_paired_design(tmp_path):
    tree = ResultsTree(tmp_path, "local")
    for rep in (1, 2, 3):
        _paired_trial(tree, "pps", {"payload": 22}, rep)
    aggregate(tree.dir, progress=lambda m: None)
    df = read_tidy(tree.dir / "pps.csv", "pps")
    assert set(df.experiment) == {"pps"} and set(df.point) == {"payload-22"}
    rx = df[df.metric == "rx_pps"].sort_values(["repetition", "lb"])
    # per repetition and LB: the median of its kept blocks (round 3 left out), absolute
    assert list(zip(rx.repetition, rx.lb)) == [(1, "wire"), (1, "xenoflow"), (2, "wire"), (2, "xenoflow"),
                                               (3, "wire"), (3, "xenoflow")]
    assert list(rx.value) == pytest.approx([3.05e6 * 1.01, 2.75e6 * 1.01, 3.05e6 * 1.02, 2.75e6 * 1.02,
                                            3.05e6 * 1.03, 2.75e6 * 1.03])
    ratio = df[df.metric.str.startswith("rate_vs_wire_")].set_index("metric")
    assert set(ratio.lb) == {"xenoflow"} and ratio.repetition.isna().all()
    # the kept rounds' ratios: 2.7/3.0, 2.8/3.1, 2.75/3.05 in each repetition; median and CI over them
    assert ratio.value["rate_vs_wire_median"] == pytest.approx(2.75 / 3.05, rel=1e-6)
    assert ratio.value["rate_vs_wire_ci_low"] <= 2.75 / 3.05 <= ratio.value["rate_vs_wire_ci_high"]
    assert ratio.value["rate_vs_wire_ci_high"] < 1 and ratio.value["rate_vs_wire_verdict"] == -1
    assert ratio.value["rate_vs_wire_rounds"] == 9 and ratio.value["rate_vs_wire_repetitions"] == 3
    assert "rate_per_cpu_vs_wire_median" in set(df.metric)


def test_aggregate_keeps_to_the_plan_and_lists_the_rest(tmp_path):
    cfg = _cfg(tmp_path, "{lbs: [wire, xenoflow], payloads: [22], paired: true}")
    tree = ResultsTree(tmp_path / "results", "local")
    _paired_trial(tree, "pps", {"payload": 22}, 1)
    old = _paired_trial(tree, "pps", {"payload": 64}, 1, payload=64)  # recorded under another config
    assert ("pps", "payload-22") in planned_points(cfg) and ("pps", "payload-64") not in planned_points(cfg)
    written = aggregate(tree.dir, progress=lambda m: None, planned=planned_points(cfg))
    assert written["unplanned"] == 1
    df = read_tidy(tree.dir / "pps.csv", "pps")
    assert set(df.point) == {"payload-22"}
    with open(tree.dir / "unplanned.csv", newline="") as f:
        assert list(csv.DictReader(f)) == [{"trial": str(old.path.relative_to(tree.dir)), "experiment": "pps",
                                            "point": point_id({"payload": 64}), "valid": "True"}]
    # without a plan (a merged tree, results/thesis): every point, and no stale unplanned.csv
    aggregate(tree.dir, progress=lambda m: None)
    assert set(read_tidy(tree.dir / "pps.csv", "pps").point) == {"payload-22", "payload-64"}
    assert not (tree.dir / "unplanned.csv").exists()
