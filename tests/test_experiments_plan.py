"""The experiment plan expanded from config: the thesis testbed's full plan, the local one."""

from xenobench.config import DEFAULT_CONFIG, load_config
from xenobench.experiments import ORDER, definitions, plan, points


def test_every_measurement_has_a_definition():
    defs = definitions()
    assert sorted(defs) == sorted(ORDER)
    assert all({"title", "variables", "procedure", "tidy"} <= set(d) for d in defs.values())


def test_thesis_plan_sizes():
    cfg = load_config(DEFAULT_CONFIG.parent / "fips.yaml")
    by = {}
    for t in plan(cfg):
        by[t.experiment] = by.get(t.experiment, 0) + 1
    # 2 LBs × 22 payloads, 11 offered rates, 2 LBs × 3 frame sizes searched, 1 server (the 3 paths
    # paired inside each repetition), 6 levels × 4 splits + the level without background, 2 LBs; × 3 reps
    assert by == {"pps": 132, "loss": 33, "ndr_pdr": 18, "rtt": 3, "rtt_load": 75, "compare": 6}
    assert points(cfg, "loss")[-1] == {"lb": "xenoflow", "rate_pps": 135_000_000}
    assert {"level_pps": 90_000_000, "split": "worst"} in points(cfg, "rtt_load")


def test_trial_directories_are_explicit_keys():
    cfg = load_config()
    t = plan(cfg, ["rtt_load"])[0]
    assert str(t.trial_dir("results", cfg.name).path) == "results/local/trials/rtt_load/level_pps-0_split-none/rep-1"
    s = {str(x.trial_dir("results", cfg.name).path) for x in plan(cfg)}
    assert len(s) == len(plan(cfg))  # no two trials share a directory
