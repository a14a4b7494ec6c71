"""Publication readiness (xenobench.readiness): a fixture table of points (what their trials and rows
say) and the mark and unmet conditions each gets; then a small results tree written here (trials'
result.json and metadata.json, a pps table), read back through readiness(), the run report's lines
and `xenobench diff`'s column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from xenobench import readiness as rd
from xenobench.cli import main
from xenobench.config import load_config
from xenobench.results import row, write_tidy
from xenobench.trials import config_hash

REPO = Path(__file__).resolve().parents[1]
GOOD = rd.PointRecord("pps", "lb-xenoflow_payload-22", planned=3, valid=3,
                      intervals=(("rx_pps xenoflow (22 B)", 0.012), ("rate_vs_wire xenoflow (22 B)", 0.03)),
                      disturbed=(), generator_bound=(), commits=("0123456789abcdef",) * 3,
                      config_hashes=("9c7fd6d7779ca29d",) * 3, config_hash="9c7fd6d7779ca29d", local=None)
LOCAL = "namespace testbed local: its numbers describe the machine it ran on"

# id, changes to GOOD, expected mark, expected unmet (condition, what)
CASES = [
    ("every condition, a real testbed", {}, rd.PUBLICATION, ()),
    ("every condition, a namespace testbed", {"local": LOCAL}, rd.LOCAL, ((rd.TESTBED, LOCAL),)),
    ("a repetition short", {"valid": 2}, rd.NOT_READY, ((rd.REPETITIONS, "2 of 3 valid"),)),
    ("the plan unknown", {"planned": None, "config_why": "no trial recorded its config: give the run's"},
     rd.NOT_READY, ((rd.REPETITIONS, "3 valid, the planned count unknown (no trial recorded its config: give the "
                                     "run's)"),)),
    ("an interval too wide", {"intervals": (("rx_pps ebpf (22 B)", 0.0712), ("rate_vs_wire ebpf (22 B)", 0.02))},
     rd.NOT_READY, ((rd.INTERVAL, "±7.1 % (rx_pps ebpf (22 B)) > 5 %"),)),
    ("on the limit", {"intervals": (("rx_pps ebpf (22 B)", 0.05),)}, rd.PUBLICATION, ()),
    ("one repetition: no interval", {"intervals": (("rx_pps ebpf (22 B)", None), ("rx_pps wire (22 B)", 0.01))},
     rd.NOT_READY, ((rd.INTERVAL, "none for rx_pps ebpf (22 B) (fewer than 2 valid repetitions)"),)),
    ("nothing published", {"intervals": ()}, rd.NOT_READY,
     ((rd.INTERVAL, "none (no headline value, no printed interval)"),)),
    ("a disturbed attempt", {"disturbed": ("rep-2 attempt-1",)}, rd.NOT_READY,
     ((rd.MACHINE, "disturbed: rep-2 attempt-1"),)),
    ("generator-bound", {"generator_bound": ("wire rep-1 (100% of its blocks)",)}, rd.NOT_READY,
     ((rd.GENERATOR, "wire rep-1 (100% of its blocks)"),)),
    ("uncommitted changes", {"commits": ("0123456789abcdef-dirty",) * 3}, rd.NOT_READY,
     ((rd.COMMIT, "uncommitted changes (0123456789ab-dirty)"),)),
    ("two commits", {"commits": ("0123456789abcdef", "fedcba9876543210", "0123456789abcdef")}, rd.NOT_READY,
     ((rd.COMMIT, "2 commits across its trials (0123456789ab, fedcba987654)"),)),
    ("a commit not recorded", {"commits": ("0123456789abcdef", None, "0123456789abcdef")}, rd.NOT_READY,
     ((rd.COMMIT, "none recorded (1 of 3 trials)"),)),
    ("no config hash", {"config_hashes": (None,) * 3}, rd.NOT_READY, ((rd.CONFIG, "no hash recorded (3 of 3 trials)"),)),
    ("two configs", {"config_hashes": ("aaaa", "bbbb", "aaaa"), "config_hash": "aaaa"}, rd.NOT_READY,
     ((rd.CONFIG, "2 configs across its trials (aaaa, bbbb)"),)),
    ("the config changed since", {"config_hash": "1111111111111111"}, rd.NOT_READY,
     ((rd.CONFIG, "recorded 9c7fd6d7779ca29d, the config is now 1111111111111111"),)),
    ("several, on a namespace testbed", {"valid": 1, "intervals": (("rx_pps ebpf (22 B)", None),), "local": LOCAL},
     rd.NOT_READY, ((rd.REPETITIONS, "1 of 3 valid"),
                    (rd.INTERVAL, "none for rx_pps ebpf (22 B) (fewer than 2 valid repetitions)"), (rd.TESTBED, LOCAL))),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_points_mark_and_what_it_lacks(case):
    _, changes, mark, unmet = case
    got = rd.judge(rd.PointRecord(**{**GOOD.__dict__, **changes}), max_ci_rel=0.05)
    assert (got.mark, got.unmet) == (mark, unmet)


def test_the_summary_counts_the_marks_and_groups_the_reasons():
    marks = [rd.judge(rd.PointRecord(**{**GOOD.__dict__, "point": f"p{i}", **changes}), 0.05)
             for i, (_, changes, _, _) in enumerate(CASES[:5])]
    assert rd.summary_lines(marks) == [
        "publication-ready: 1 of 5 points (local-ready: 1)",
        "- repetitions (2 points): pps/p2 2 of 3 valid; pps/p3 3 valid, the planned count unknown (no trial recorded "
        "its config: give the run's)",
        "- interval (1 point): ±7.1 % (rx_pps ebpf (22 B)) > 5 %",
        f"- testbed (1 point): {LOCAL}"]


# --- a results tree written here -------------------------------------------------------------------------
CONFIG = REPO / "config" / "fips.yaml"  # 3 repetitions a point; the trials record it and its hash
RATE = {"xenoflow": 9.6e7, "ebpf": 3.0e7}
#: point (LB) -> how its trials and rows differ from a clean one
TREE = {
    "xenoflow": {},  # 3 valid repetitions, 0.5 % apart, one commit, the config's hash
    "ebpf": {"invalid": {3}, "noise": 0.1, "dirty": {2}},
    "katran": {"disturbed": {1}, "generator_bound": 0.8},
}


def _write_tree(resdir: Path, kind: str = "hosts", driver: str = "mlx5_core") -> None:
    h = config_hash(load_config(CONFIG))
    rows = []
    rng = np.random.default_rng(1)
    for lb, how in TREE.items():
        for rep in (1, 2, 3):
            t = resdir / "trials" / "pps" / f"lb-{lb}_payload-22" / f"rep-{rep}"
            t.mkdir(parents=True)
            valid = rep not in how.get("invalid", ())
            attempts = [{"attempt": 1, "valid": valid, "checks": {"generator_ok": valid}, "reasons": []}]
            machine = {"attempt-1": {"disturbed": rep in how.get("disturbed", ()), "over": {}}}
            (t / "result.json").write_text(json.dumps({
                "experiment": "pps", "point": {"lb": lb, "payload": 22}, "repetition": rep, "testbed": resdir.name,
                "config_hash": h, "point_config": {"testbed": {"name": resdir.name, "kind": kind, "transport": "ssh"},
                                                   "nodes": {"fips5": {"transport": "ssh"}}},
                "valid": valid, "attempts": attempts, "chosen_attempt": 1, "outputs": {}}))
            (t / "metadata.json").write_text(json.dumps({
                "git_commit": "0123456789abcdef" + ("-dirty" if rep in how.get("dirty", ()) else ""),
                "config": str(CONFIG), "config_hash": h, "nodes": {"fips5": {"p0": {"driver": driver}}},
                "machine": machine}))
            if not valid:
                continue
            v = RATE.get(lb, 5e7) * float(np.exp(how.get("noise", 0.005) * rng.standard_normal()))
            common = dict(testbed=resdir.name, experiment="pps", point=f"lb-{lb}_payload-22", lb=lb, payload_bytes=22,
                          repetition=rep, source=f"trials/pps/lb-{lb}_payload-22/rep-{rep}")
            rows.append(row(**common, metric="rx_pps", value=v, unit="packets/s"))
            if "generator_bound" in how:
                rows.append(row(**common, metric="generator_bound_share", value=how["generator_bound"], unit="share"))
    write_tidy("pps", rows, resdir, how="test_readiness.py")


def test_a_results_tree_is_read_point_by_point(tmp_path):
    resdir = tmp_path / "fips"
    _write_tree(resdir)
    marks = {m.point: m for m in rd.readiness(resdir)}  # the config the trials recorded
    assert marks["lb-xenoflow_payload-22"].mark == rd.PUBLICATION and marks["lb-xenoflow_payload-22"].unmet == ()
    ebpf = dict(marks["lb-ebpf_payload-22"].unmet)
    assert marks["lb-ebpf_payload-22"].mark == rd.NOT_READY
    assert set(ebpf) == {rd.REPETITIONS, rd.INTERVAL, rd.COMMIT}
    assert ebpf[rd.REPETITIONS] == "2 of 3 valid" and ebpf[rd.COMMIT] == "uncommitted changes (0123456789ab-dirty)"
    assert ebpf[rd.INTERVAL].endswith("(rx_pps ebpf (22 B)) > 5 %")
    assert dict(marks["lb-katran_payload-22"].unmet) == {
        rd.MACHINE: "disturbed: rep-1 attempt-1",
        rd.GENERATOR: "katran rep-1 (80% of its blocks), katran rep-2 (80% of its blocks), katran rep-3 (80% of its blocks)"}
    assert rd.report_lines(resdir)[:3] == ["## Publication readiness (xenobench.readiness)", "",
                                           "publication-ready: 1 of 3 points (local-ready: 0)"]


def test_another_config_than_the_trials_ran_under_is_named(tmp_path):
    resdir = tmp_path / "fips"
    _write_tree(resdir)
    now = config_hash(load_config(REPO / "config" / "local.yaml"))
    m = {x.point: x for x in rd.readiness(resdir, REPO / "config" / "local.yaml")}["lb-xenoflow_payload-22"]
    assert (m.mark, m.unmet) == (rd.NOT_READY, ((rd.CONFIG, f"recorded {config_hash(load_config(CONFIG))}, the "
                                                            f"config is now {now}"),))


@pytest.mark.parametrize("kind,driver,why", [
    ("namespaces", "veth", "namespace testbed fips: its numbers describe the machine it ran on"),
    ("hosts", "veth", "testbed fips: virtual interfaces (veth), a lab, not hardware")])
def test_a_testbed_that_is_no_real_one_is_at_most_local_ready(tmp_path, kind, driver, why):
    resdir = tmp_path / "fips"
    _write_tree(resdir, kind, driver)
    m = {x.point: x for x in rd.readiness(resdir)}["lb-xenoflow_payload-22"]
    assert (m.mark, m.unmet) == (rd.LOCAL, ((rd.TESTBED, why),))


def test_diff_shows_each_points_mark(tmp_path):
    resdir = tmp_path / "fips"
    _write_tree(resdir)
    out = CliRunner().invoke(main, ["diff", str(resdir), str(resdir)]).output
    lines = out.splitlines()
    assert next(x for x in lines if x.startswith("verdict")).endswith("n A/B  ready A/B")
    (xf,) = [x for x in lines if x.startswith("not distinguishable  pps/lb-xenoflow_payload-22")]
    (eb,) = [x for x in lines if x.startswith("not distinguishable  pps/lb-ebpf_payload-22")]
    assert xf.split()[-1] == "pub/pub" and eb.split()[-1] == "no/no"
    assert "  publication-ready: 1 of 3 points (local-ready: 0)" in lines
    full = CliRunner().invoke(main, ["diff", str(resdir), str(resdir), "--all"]).output
    assert "  pps/lb-xenoflow_payload-22: publication-ready" in full.splitlines()
