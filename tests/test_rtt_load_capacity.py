"""rtt_load's background levels as shares of each LB's maximum from the same run
(xenobench.procedures.capacity_points, measured_maximum, background_level): which points the
workflow runs first, the rate a level becomes, and the refusals when a maximum is missing."""

from pathlib import Path

import pytest

from xenobench.config import load_config
from xenobench.errors import ConfigError, XenobenchError
from xenobench.layout import ResultsTree
from xenobench.procedures import background_level, capacity_points, measured_maximum
from xenobench.trials import TrialContext

CONFIGS = Path(__file__).resolve().parents[1] / "config"


def _cfg(tmp_path, rtt_load: str, compare: str = "{lbs: [wire, xenoflow, ebpf], payload: 22}"):
    f = tmp_path / "c.yaml"
    f.write_text(f"extends: {CONFIGS / 'ci.yaml'}\nexperiments:\n  rtt_load: {rtt_load}\n  compare: {compare}\n")
    return load_config(f)


def _compare_trial(tree, lb, rep, rx_pps, valid=True):
    t = tree.trial("compare", {"lb": lb}, rep)
    t.path.mkdir(parents=True)
    t.write_result({"experiment": "compare", "point": {"lb": lb}, "repetition": rep, "valid": valid,
                    "attempts": [{"attempt": 1, "reasons": []}], "chosen_attempt": 1, "outputs": {"rx_pps": rx_pps}})


def test_the_workflow_runs_each_lbs_maximum_first():
    ci = load_config(CONFIGS / "ci.yaml")          # unpaired: the point's one LB
    assert capacity_points(ci) == [("compare", {"lb": "xenoflow"})]
    local = load_config(CONFIGS / "local.yaml")    # paired [none, xenoflow]: 'none' has no maximum
    assert capacity_points(local) == [("compare", {"lb": "xenoflow"})]
    fips = load_config(CONFIGS / "fips.yaml")      # paired, every LB of the default list
    assert capacity_points(fips) == [("compare", {"lb": "xenoflow"}), ("compare", {"lb": "ebpf"})]


@pytest.mark.parametrize("rtt_load, compare, expected", [
    ("{lb: xenoflow, levels: [0, 50000], splits: [worst], paired: false, level_unit: pps}", None, []),
    ("{lb: xenoflow, levels: [0], splits: [worst], paired: false}", None, []),
    ("{lb: xenoflow, levels: [0, 0.5], splits: [worst], paired: false, capacity_from: pps}", None,
     [("pps", {"lb": "xenoflow", "payload": 22})]),
])
def test_capacity_sources(tmp_path, rtt_load, compare, expected):
    assert capacity_points(_cfg(tmp_path, rtt_load, *([compare] if compare else []))) == expected


@pytest.mark.parametrize("rtt_load, compare, text", [
    ("{lb: ebpf, levels: [0, 0.5], splits: [worst], paired: false}", "{lbs: [xenoflow], payload: 22}",
     "compare does not measure LB 'ebpf' in "),
    ("{lb: xenoflow, levels: [0, 0.5], splits: [worst], paired: false, payload: 64}", None,
     "experiments.compare.payload 22 is not experiments.rtt_load.payload 64"),
])
def test_a_maximum_the_config_does_not_plan_is_refused_by_key(tmp_path, rtt_load, compare, text):
    with pytest.raises(ConfigError, match="Failed to plan rtt_load's capacity levels") as e:
        capacity_points(_cfg(tmp_path, rtt_load, *([compare] if compare else [])))
    assert text in str(e.value)


def test_a_share_above_95_pct_is_refused_by_the_schema(tmp_path):
    with pytest.raises(ConfigError, match="experiments.rtt_load.levels"):
        _cfg(tmp_path, "{lb: xenoflow, levels: [0, 1.5], splits: [worst], paired: false}")
    # absolute levels are whole packets/s
    _cfg(tmp_path, "{lb: xenoflow, levels: [0, 150000], splits: [worst], paired: false, level_unit: pps}")


def test_the_maximum_is_the_median_of_the_valid_trials(tmp_path):
    tree = ResultsTree(tmp_path, "ci")
    for rep, rate, ok in ((1, 1.0e6, True), (2, 1.2e6, True), (3, 9.9e6, False), (4, 1.1e6, True)):
        _compare_trial(tree, "xenoflow", rep, rate, ok)
    assert measured_maximum(tree.dir, "compare", {"lb": "xenoflow"}) == 1.1e6
    with pytest.raises(XenobenchError) as e:
        measured_maximum(tree.dir, "compare", {"lb": "ebpf"})
    assert str(e.value).startswith("Failed to find the maximum rate of LB 'ebpf': no valid compare trial in ")
    assert "`xenobench experiment run compare lb-ebpf` first" in str(e.value)


class _Testbed:
    def __init__(self, cfg):
        self.cfg = cfg


def _ctx(cfg, tree, point):
    t = tree.trial("rtt_load", point, 1)
    return TrialContext(_Testbed(cfg), "rtt_load", point, 1, t.attempt(1), {})


def test_a_level_becomes_its_share_of_the_measured_maximum(tmp_path):
    tree = ResultsTree(tmp_path, "ci")
    cfg = load_config(CONFIGS / "ci.yaml")
    for rep, rate in ((1, 2.0e6), (2, 2.2e6)):
        _compare_trial(tree, "xenoflow", rep, rate)
    got = background_level(_ctx(cfg, tree, {"level": 0.9, "split": "worst"}))
    assert got == {"level": 0.9, "level_unit": "capacity", "capacity_pps": {"xenoflow": 2.1e6},
                   "capacity_of": "xenoflow", "background_pps": 1_890_000.0}
    assert background_level(_ctx(cfg, tree, {"level": 0, "split": "none"}))["background_pps"] == 0.0


def test_paired_blocks_share_the_smallest_maximums_share(tmp_path):
    cfg = _cfg(tmp_path, "{lb: xenoflow, levels: [0, 0.5], splits: [worst], paired: true, lbs: [none, xenoflow, ebpf]}")
    tree = ResultsTree(tmp_path, "x")
    _compare_trial(tree, "xenoflow", 1, 3.0e6)
    _compare_trial(tree, "ebpf", 1, 2.0e6)
    got = background_level(_ctx(cfg, tree, {"level": 0.5, "split": "worst"}))
    assert (got["capacity_of"], got["background_pps"]) == ("ebpf", 1.0e6)


def test_a_missing_maximum_fails_the_trial_by_name(tmp_path):
    tree = ResultsTree(tmp_path, "ci")
    cfg = load_config(CONFIGS / "ci.yaml")
    with pytest.raises(XenobenchError, match="Failed to find the maximum rate of LB 'xenoflow'"):
        background_level(_ctx(cfg, tree, {"level": 0.9, "split": "worst"}))
