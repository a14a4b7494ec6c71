"""`xenobench diff A B` on small tidy trees written with write_tidy: two runs drawn from one
distribution (nothing distinguishable), one LB's rate scaled by 0.9 (that LB worse at every point,
exit 3 beyond --fail-worse 5), RTT medians +20 % (worse), keys one side measured (listed apart),
testbeds that differ (said in the header), and the outputs (--json, --csv, --figure)."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from xenobench import diff as d
from xenobench.cli import main
from xenobench.errors import DataError
from xenobench.results import metric, read_tidy, row, write_tidy

LBS = {"xenoflow": 9.6e6, "ebpf": 3.0e6}  # packets/s around which each LB's repetitions lie
PAYLOADS = (22, 64)
REPS = 4
RTT_US = {"none": 11.0, "xenoflow": 16.0}


def _pps_rows(seed: int, testbed: str = "ci", scale: dict | None = None, payloads=PAYLOADS) -> list[dict]:
    """2 LBs x 2 payloads x 4 repetitions (16 rows), each 0.3 % around its LB's rate."""
    rng = np.random.default_rng(seed)
    out = []
    for lb, rate in LBS.items():
        for pay in payloads:
            for rep in range(1, REPS + 1):
                v = rate * (1 + 0.003 * rng.standard_normal()) * (scale or {}).get(lb, 1.0)
                out.append(row(testbed=testbed, experiment="pps", point=f"lb-{lb}_payload-{pay}", lb=lb,
                               generator="xdpgen", payload_bytes=pay, measured_pps=v, repetition=rep,
                               metric="rx_pps", value=v, unit="packets/s", source=f"trials/pps/{lb}/{pay}/{rep}"))
    return out


def _rtt_rows(seed: int, testbed: str = "ci", scale: dict | None = None) -> list[dict]:
    """rtt_summary of 2 LBs x 5 repetitions (10 median rows, 0.2 us apart at most), and their n (10 rows)."""
    rng = np.random.default_rng(seed)
    out = []
    for lb, us in RTT_US.items():
        for rep in range(1, 6):
            v = (us + 0.1 * rng.standard_normal()) * (scale or {}).get(lb, 1.0)
            common = dict(testbed=testbed, experiment="rtt", point="server-reflector", lb=lb, server="reflector",
                          repetition=rep, source=f"trials/rtt/{lb}/{rep}")
            out.append(row(**common, metric="rtt_median_us", value=v, unit="us"))
            out.append(row(**common, metric="n", value=900 - rep, unit="count"))
    return out


def _tree(path: Path, seed: int, **kw) -> Path:
    pps_kw = {k: v for k, v in kw.items() if k != "rtt_scale"}
    write_tidy("pps", _pps_rows(seed, **pps_kw), path, how="test_diff.py")
    write_tidy("rtt_summary", _rtt_rows(seed + 100, testbed=kw.get("testbed", "ci"), scale=kw.get("rtt_scale")),
               path, how="test_diff.py")
    return path


def _verdicts(res: d.Diff) -> dict[tuple[str, str, str], str]:
    return {(c.where["point"], c.where["lb"], c.where["metric"]): c.verdict for c in res.comparisons}


def run(*args):
    r = CliRunner().invoke(main, ["diff", *map(str, args)])
    return r


def test_two_runs_of_one_distribution_are_not_distinguishable_anywhere(tmp_path):
    a, b = _tree(tmp_path / "a", 1), _tree(tmp_path / "b", 2)
    res = d.diff(a, b)
    assert len(res.comparisons) == 6  # 4 pps points + 2 RTT medians; n has no better direction
    assert set(_verdicts(res).values()) == {d.NOT_DISTINGUISHABLE}
    assert res.only == [] and res.undirected == ["n"] and res.notes == []
    r = run(a, b, "--fail-worse", 5)
    assert r.exit_code == 0, r.output
    assert "6 compared: 0 better, 0 worse, 6 not distinguishable, 0 without interval; 0 only in A, 0 only in B" \
        in r.output


def test_one_lb_ten_percent_slower_is_worse_at_every_point_and_fails_beyond_five_percent(tmp_path):
    a = _tree(tmp_path / "a", 1)
    b = tmp_path / "b"
    pps = read_tidy(a, "pps")
    slow = pps.lb == "ebpf"
    pps.loc[slow, "value"] *= 0.9
    pps.loc[slow, "measured_pps"] *= 0.9
    write_tidy("pps", pps, b, how="a's pps, ebpf's rx_pps x 0.9")
    write_tidy("rtt_summary", read_tidy(a, "rtt_summary"), b, how="a's")
    res = d.diff(a, b)
    v = _verdicts(res)
    assert {k: x for k, x in v.items() if k[1] == "ebpf"} == {
        ("lb-ebpf_payload-22", "ebpf", "rx_pps"): d.WORSE, ("lb-ebpf_payload-64", "ebpf", "rx_pps"): d.WORSE}
    assert {x for k, x in v.items() if k[1] != "ebpf"} == {d.NOT_DISTINGUISHABLE}
    for c in res.comparisons:
        if c.where["lb"] == "ebpf":
            assert c.mode == "ratio" and c.estimate == pytest.approx(0.9) and c.ci_high < 1
            assert c.change == pytest.approx(-10.0) and c.change_unit == "%"
    r = run(a, b, "--fail-worse", 5)
    assert r.exit_code == 3, r.output
    assert ("xenobench diff: 2 comparison(s) worse by more than 5: pps/lb-ebpf_payload-22 ebpf rx_pps -10.0 %; "
            "pps/lb-ebpf_payload-64 ebpf rx_pps -10.0 %") in r.stderr
    assert run(a, b, "--fail-worse", 15).exit_code == 0  # 10 % is within 15 %
    assert run(a, b).exit_code == 0  # without the flag the verdict is shown, the exit stays 0


def test_rtt_medians_twenty_percent_higher_are_worse(tmp_path):
    a = _tree(tmp_path / "a", 1)
    b = _tree(tmp_path / "b", 1, rtt_scale={"xenoflow": 1.2})
    res = d.diff(a, b)
    (c,) = [c for c in res.comparisons if c.where["metric"] == "rtt_median_us" and c.where["lb"] == "xenoflow"]
    assert c.verdict == d.WORSE and c.mode == "difference" and c.better == "lower"
    assert c.estimate == pytest.approx(0.2 * c.median_a) and c.ci_low > 0
    assert c.change == pytest.approx(20.0)
    assert _verdicts(res)[("server-reflector", "none", "rtt_median_us")] == d.NOT_DISTINGUISHABLE
    assert run(a, b, "--fail-worse", 19).exit_code == 3 and run(a, b, "--fail-worse", 21).exit_code == 0


def test_keys_one_side_measured_are_listed_apart_and_differing_testbeds_are_said(tmp_path):
    a = _tree(tmp_path / "a", 1)
    b = tmp_path / "b"
    write_tidy("pps", _pps_rows(2, testbed="fips", payloads=(22, 1024)), b, how="test")
    res = d.diff(a, b)
    assert [(c.where["point"]) for c in res.comparisons] == ["lb-ebpf_payload-22", "lb-xenoflow_payload-22"]
    only = sorted((o.side, o.table, o.where["point"], o.where["lb"], o.where["metric"]) for o in res.only)
    assert only == [("A", "pps", "lb-ebpf_payload-64", "ebpf", "rx_pps"),
                    ("A", "pps", "lb-xenoflow_payload-64", "xenoflow", "rx_pps"),
                    ("A", "rtt_summary", "server-reflector", "none", "n"),
                    ("A", "rtt_summary", "server-reflector", "none", "rtt_median_us"),
                    ("A", "rtt_summary", "server-reflector", "xenoflow", "n"),
                    ("A", "rtt_summary", "server-reflector", "xenoflow", "rtt_median_us"),
                    ("B", "pps", "lb-ebpf_payload-1024", "ebpf", "rx_pps"),
                    ("B", "pps", "lb-xenoflow_payload-1024", "xenoflow", "rx_pps")]
    out = run(a, b).output
    assert ("NOTE: the testbeds differ: A ci, B fips; a difference is the testbeds' as much as the software's"
            in out)
    assert "Measured by one side only (8: never compared):" in out
    assert "B     pps          pps/lb-ebpf_payload-1024" in out


def test_a_condition_column_keys_the_row(tmp_path):
    """Rows differing only in a key column (the generator) are different points, never compared."""
    a = tmp_path / "a"
    b = tmp_path / "b"
    write_tidy("pps", _pps_rows(1), a, how="test")
    rows = _pps_rows(1)
    for r in rows:
        r["generator"] = "trex"
    write_tidy("pps", rows, b, how="test")
    res = d.diff(a, b)
    assert res.comparisons == [] and len(res.only) == 8
    assert {o.where["generator"] for o in res.only} == {"xdpgen", "trex"}


# the intervals each run printed: (A's median, low, high, verdict), B's, and what diff reads of them:
# each median inside the other's interval, inside it widened to the rerun interval, the same verdict
PRINTED_CASES = [
    # id, table, stem, unit, A, B, (A in B, B in A), (the same in the rerun intervals), same verdict
    ("rerun inside", "rate_ranking", "rate_vs_wire", "ratio", (0.95, 0.93, 0.97, -1), (0.96, 0.94, 0.98, -1),
     (True, True), (True, True), True),
    ("rerun outside, verdict flips", "rate_ranking", "rate_vs_wire", "ratio", (0.95, 0.94, 0.96, -1),
     (0.99, 0.97, 1.01, 0), (False, False), (False, False), False),
    ("one way only", "rtt_paired", "rtt_vs_none", "us", (1.5, 0.4, 2.6, 1), (2.1, 1.9, 2.3, 1),
     (False, True), (False, True), True),
    ("inside the rerun interval only", "pps", "rate_vs_wire", "ratio", (1.0, 0.9, 1.1, 0), (1.12, 1.02, 1.22, 0),
     (False, False), (True, True), True),
    ("on the bound", "rtt_paired", "rtt_vs_none", "us", (1.9, 1.0, 2.1, 1), (2.1, 1.9, 2.3, 1),
     (True, True), (True, True), True),
]


def _printed_rows(table: str, stem: str, unit: str, vals: tuple, background: float) -> list[dict]:
    us = "_us" if unit == "us" else ""
    common = dict(testbed="ci", experiment="x", point="payload-22", lb="xenoflow", payload_bytes=22,
                  background_pps=background, source="trials/x")
    return [row(**common, metric=f"{stem}_{part}{us}", value=v, unit=unit)
            for part, v in zip(("median", "ci_low", "ci_high"), vals[:3])] + \
        [row(**common, metric=f"{stem}_verdict", value=vals[3], unit="sign")]


@pytest.mark.parametrize("case", PRINTED_CASES, ids=[c[0] for c in PRINTED_CASES])
def test_each_runs_median_is_read_against_the_interval_the_other_printed(tmp_path, case):
    """A rerun lands inside the interval a run printed, or diff names the key; the background's rate
    (measured per run) does not key the row."""
    _, table, stem, unit, va, vb, (a_in_b, b_in_a), (a_rerun, b_rerun), same = case
    a, b = tmp_path / "a", tmp_path / "b"
    write_tidy(table, _printed_rows(table, stem, unit, va, 1.13e6), a, how="test")
    write_tidy(table, _printed_rows(table, stem, unit, vb, 1.15e6), b, how="test")
    res = d.diff(a, b)
    (p,) = res.printed
    assert (p.table, p.where["metric"], p.unit, p.a, p.b) == (table, stem, unit, va[:3], vb[:3])
    assert (p.a_in_b, p.b_in_a, p.a_in_b_rerun, p.b_in_a_rerun, p.same_verdict) == (a_in_b, b_in_a, a_rerun,
                                                                                      b_rerun, same)
    assert res.only == []
    out = run(a, b).output
    assert (f"Intervals both runs printed (1: the paired and ranked rows): A's median inside B's interval "
            f"{int(a_in_b)}, B's inside A's {int(b_in_a)}, both {int(a_in_b and b_in_a)}; inside the rerun "
            f"interval (widened by 1.41: what a rerun's median falls in 95 % of the time) {int(a_rerun)} and "
            f"{int(b_rerun)}; the same verdict {int(same)} of 1") in out
    listed = [ln.split() for ln in out.splitlines() if ln.startswith("x/payload-22") and f"  {stem}  " in ln]
    if a_in_b and b_in_a and same:
        assert listed == []
    else:
        yn = lambda inside, rerun: "yes" if inside else "rerun" if rerun else "no"  # noqa: E731
        (cells,) = listed
        assert cells[-3:-1] == [yn(a_in_b, a_rerun), yn(b_in_a, b_rerun)]
    j = json.loads(run(a, b, "--json").stdout)["printed"]
    assert (j["intervals"], j["a_in_b"], j["b_in_a_rerun"], j["keys"][0]["same_verdict"]) == (
        1, int(a_in_b), int(b_rerun), same)


def test_an_interval_with_a_part_missing_or_twice_is_not_read(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    rows = _printed_rows("rate_ranking", "rate_vs_wire", "ratio", (0.95, 0.93, 0.97, -1), 0)
    write_tidy("rate_ranking", rows, a, how="test")
    write_tidy("rate_ranking", [r for r in rows if not r["metric"].endswith("ci_high")], b, how="test")
    assert d.diff(a, b).printed == []
    write_tidy("rate_ranking", rows + rows[:1], b, how="test")
    assert d.diff(a, b).printed == []


def test_json_csv_and_figure_record_the_seed_and_every_key(tmp_path):
    a, b = _tree(tmp_path / "a", 1), _tree(tmp_path / "b", 1, scale={"ebpf": 0.9})
    r = run(a, b, "--json", "--csv", tmp_path / "out.csv", "--figure", tmp_path / "out.png", "--seed", 7,
            "--resamples", 500, "--fail-worse", 5)
    assert r.exit_code == 3
    j = json.loads(r.stdout)
    assert (j["seed"], j["resamples"], j["level"], j["fail_worse_pct"]) == (7, 500, 0.95, 5.0)
    assert j["counts"] == {"better": 0, "worse": 2, "not distinguishable": 4, "no interval": 0}
    assert [w["where"]["lb"] for w in j["worse_beyond"]] == ["ebpf", "ebpf"]
    assert j["a"]["testbeds"] == ["ci"] and j["a"]["tables"] == ["pps", "rtt_summary"]
    with open(tmp_path / "out.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and list(rows[0]) == d.CSV_COLUMNS
    assert {(r["lb"], r["verdict"]) for r in rows if r["metric"] == "rx_pps"} == {
        ("ebpf", "worse"), ("xenoflow", "not distinguishable")}
    assert {r["seed"] for r in rows} == {"7"}
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = json.loads(run(a, b, "--json", "--seed", 7, "--resamples", 500).stdout)
    assert again["comparisons"] == j["comparisons"]  # seeded: the same intervals


def test_fewer_than_four_values_a_side_are_shown_not_judged(tmp_path):
    """Three repetitions a side, B at half of A: the sides do not overlap, but two runs of one
    distribution do not overlap 1 time in 10: no interval, no verdict, no failure."""
    a, b = tmp_path / "a", tmp_path / "b"
    one = [r for r in _pps_rows(1) if r["repetition"] <= 3]
    write_tidy("pps", one, a, how="test")
    write_tidy("pps", [{**r, "value": r["value"] * 0.5, "measured_pps": r["measured_pps"] * 0.5} for r in one], b,
               how="test")
    res = d.diff(a, b)
    assert {c.verdict for c in res.comparisons} == {d.NO_INTERVAL} and res.worse(5) == []
    assert [(c.n_a, c.n_b) for c in res.comparisons] == [(3, 3)] * 4
    assert "Fewer than 4 values on a side (4: no interval; shown, not judged):" in "\n".join(d.table_lines(res))


def test_bad_trees_are_named():
    r = run("/nonexistent-a", "/nonexistent-b")
    assert r.exit_code == DataError.exit_code
    assert r.output.strip() == ("xenobench: Failed to diff /nonexistent-a: no such directory (a results tree: the "
                                "directory holding the tidy CSVs, e.g. results/local)")


def test_empty_tree_is_refused_with_the_fix(tmp_path):
    (tmp_path / "a").mkdir()
    with pytest.raises(DataError, match=rf"Failed to diff {tmp_path / 'a'}: no tidy table in it .*; write them with "
                                        rf"`xenobench experiment aggregate {tmp_path / 'a'}`"):
        d.diff(tmp_path / "a", tmp_path / "a")


def test_directions_come_from_the_metrics_owner():
    assert metric("rx_pps").better == "higher" and metric("loss_pct").better == "lower"
    assert metric("rtt_p99_us").better == "lower" and metric("rtt_vs_none_median_us").better == "lower"
    assert metric("nominal_offered_pps").better is None and metric("n").better is None


def test_diff_imports_only_the_results_layer():
    """Analysis: the results tree's readers only (results, layout, definitions), the errors, and the
    statistics' owner of the CI level and the verdict's words (latency: numpy only)."""
    tree = ast.parse(Path(d.__file__).read_text())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name.startswith("xeno")}
    assert mods <= {"results", "layout", "definitions", "errors", "latency"}, mods


#: (a tree made bad from the fixture's, the one line diff prints): truncated, non-finite
FIXTURE_TREE = Path(__file__).parent / "fixtures" / "results" / "small"
BAD_TREES = [
    ("truncated", lambda t: t[:len(t) // 2], "Failed to read tidy results {b}/pps.csv: line 7: column value is empty"),
    ("non-finite", lambda t: t.replace(",96900000.0,packets", ",inf,packets", 1),
     "Failed to read tidy results {b}/pps.csv: line 2: column value: 'inf' is not a finite number"),
]


@pytest.mark.parametrize("name,spoil,line", BAD_TREES, ids=[b[0] for b in BAD_TREES])
def test_a_spoiled_tree_gives_one_line(tmp_path, name, spoil, line):
    import shutil
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(FIXTURE_TREE, a)
    shutil.copytree(FIXTURE_TREE, b)
    (b / "pps.csv").write_text(spoil((b / "pps.csv").read_text()))
    r = run(str(a), str(b))
    assert r.exit_code == DataError.exit_code and r.output.strip() == f"xenobench: {line.format(b=b)}", r.output
