"""`xenobench diff A B` on small tidy trees written with write_tidy: two runs drawn from one
distribution (nothing distinguishable), one LB's rate scaled by 0.9 (that LB worse at every point,
exit 3 beyond --fail-worse 5), the default designs' rates of 2-3 repetitions a point (judged by the
t interval on their logs, calibrated on simulated runs), RTT medians +20 % (worse), point summaries
and interval bounds (never metrics), keys one side measured (counted per table, listed with --all),
testbeds that differ (said in the header), and the outputs (--json, --csv, --figure)."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
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
    assert "  pps: 2 judged; not judged 4: 2 only in A; 2 only in B" in out.splitlines()
    assert "  rtt_summary: 0 judged; not judged 4: 4 only in A" in out.splitlines()
    assert "Measured by one side only" not in out and "payload-1024" not in out
    out = run(a, b, "--all").output
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
    assert j["not_judged"] == {"rtt_summary": {d.WHY_UNDIRECTED: 2}}
    assert j["readiness"] == {"A": "no trial records in it (a tree of tidy tables only)",
                              "B": "no trial records in it (a tree of tidy tables only)"}
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


def _design_rows(seed: int, reps: int, noise: float, scale: dict | None = None, lbs=("wire", "xenoflow", "ebpf"),
                 payloads=(2, 22, 23, 64, 256, 1024)) -> list[dict]:
    """A default paired pps design's per-repetition rates: every LB at every payload, `reps`
    repetitions, each `noise` (relative, log-normal) about its LB's rate, `scale`d per LB."""
    rng = np.random.default_rng(seed)
    rate = {"wire": 1.8e6, "xenoflow": 1.6e6, "ebpf": 1.5e6}
    return [row(testbed="local", experiment="pps", point=f"payload-{pay}", lb=lb, generator="xdpgen",
                payload_bytes=pay, repetition=rep, metric="rx_pps", unit="packets/s", source=f"trials/pps/{pay}/{rep}",
                value=rate[lb] * (scale or {}).get(lb, 1.0) * float(np.exp(noise * rng.standard_normal())))
            for lb in lbs for pay in payloads for rep in range(1, reps + 1)]


DESIGNS = [(2, 0.01), (2, 0.02), (3, 0.015)]  # repetitions a point, relative noise: the shipped designs' rates


@pytest.mark.parametrize("reps,noise", DESIGNS, ids=[f"{r}reps-{100 * n:g}pct" for r, n in DESIGNS])
def test_the_default_designs_rates_are_judged_between_two_runs(tmp_path, reps, noise):
    """One LB's rate 10 % lower in B, each run with its own noise: worse at every payload, beyond
    --fail-worse 5; the same rows again (0 % change): not distinguishable anywhere; a rerun of one
    distribution: nothing worse beyond 5 % (its chance verdicts: the calibration test below)."""
    a, slow, same, rerun = (tmp_path / x for x in ("a", "slow", "same", "rerun"))
    write_tidy("pps", _design_rows(1, reps, noise), a, how="test")
    write_tidy("pps", _design_rows(2, reps, noise, scale={"ebpf": 0.9}), slow, how="test")
    write_tidy("pps", read_tidy(a, "pps"), same, how="test")
    write_tidy("pps", _design_rows(3, reps, noise), rerun, how="test")
    res = d.diff(a, slow)
    assert {c.method for c in res.comparisons} == {d.T_LOG} and len(res.comparisons) == 18
    ebpf = [c for c in res.comparisons if c.where["lb"] == "ebpf"]
    assert [c.verdict for c in ebpf] == [d.WORSE] * 6
    sd = 100 * noise * np.sqrt(2 / reps)  # of one key's change, in %
    assert all(c.ci_high < 1 and abs(c.change + 10) < 3 * sd for c in ebpf), [(c.change, c.ci_high) for c in ebpf]
    assert not any(c.worse_by(5) for c in res.comparisons if c.where["lb"] != "ebpf")
    r = run(a, slow, "--fail-worse", 5)
    assert r.exit_code == 3 and "xenobench diff: 6 comparison(s) worse by more than 5: pps/payload-1024 ebpf" in r.stderr
    assert {c.verdict for c in d.diff(a, same).comparisons} == {d.NOT_DISTINGUISHABLE}
    assert run(a, same, "--fail-worse", 0).exit_code == 0
    assert d.diff(a, rerun).worse(5) == [] and run(a, rerun, "--fail-worse", 5).exit_code == 0


@pytest.mark.parametrize("reps", [2, 3])
def test_the_small_sample_interval_is_wrong_about_one_time_in_twenty(reps):
    """Simulated pairs of runs of one distribution (6 points, 1.5 % noise): the share of keys judged
    better or worse is the interval's 5 %, not more."""
    rng = np.random.default_rng(11)
    key = lambda p: ("pps", f"payload-{p}", "ebpf", "rx_pps", "", "", "", "", "xdpgen")  # noqa: E731

    def one_run():
        return {key(p): pd.DataFrame({"repetition": np.arange(1.0, reps + 1),
                                      "value": 1.5e6 * np.exp(0.015 * rng.standard_normal(reps))}) for p in range(6)}
    wrong = keys = 0
    for _ in range(100):
        ra, rb = one_run(), one_run()
        sa, sb = (d.pooled_spreads(r)[("pps", "ebpf", "rx_pps", "xdpgen")] for r in (ra, rb))
        assert (sa.df, sb.df) == (6 * (reps - 1),) * 2
        for k in ra:
            _, lo, hi = d.log_t_interval(ra[k].value.to_numpy(), rb[k].value.to_numpy(), sa, sb)
            wrong += lo > 1 or hi < 1
            keys += 1
    assert 0.02 <= wrong / keys <= 0.09, wrong / keys


def test_t_quantiles_are_students():
    assert [round(d.t_quantile(0.975, df), 3) for df in (1, 2, 4, 12, 1e6)] == [12.706, 4.303, 2.776, 2.179, 1.96]


def test_what_has_no_interval_is_counted_and_shown_with_all(tmp_path):
    """3 RTT medians a side (a difference: no interval), a rate of one repetition a side in every
    point (no spread to pool): counted per table with why, listed with --all, never judged."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_tidy("rtt_summary", [r for r in _rtt_rows(1) if r["repetition"] <= 3], a, how="test")
    write_tidy("rtt_summary", [r for r in _rtt_rows(2, scale={"xenoflow": 2}) if r["repetition"] <= 3], b, how="test")
    write_tidy("pps", _design_rows(1, 1, 0.01), a, how="test")
    write_tidy("pps", _design_rows(2, 1, 0.01, scale={"ebpf": 0.5}), b, how="test")
    res = d.diff(a, b)
    assert {(c.table, c.verdict, c.why) for c in res.comparisons} == {
        ("rtt_summary", d.NO_INTERVAL, d.WHY_FEW_DIFFERENCE), ("pps", d.NO_INTERVAL, d.WHY_NO_SPREAD)}
    assert res.worse(0) == [] and run(a, b, "--fail-worse", 5).exit_code == 0
    out = run(a, b).output.splitlines()
    assert "(no key judged)" in out
    assert f"  pps: 0 judged; not judged 18: 18 {d.WHY_NO_SPREAD}" in out
    assert f"  rtt_summary: 0 judged; not judged 4: 2 {d.WHY_FEW_DIFFERENCE}; 2 {d.WHY_UNDIRECTED} (n)" in out
    full = run(a, b, "--all").output
    assert "Without an interval (20: shown, not judged):" in full and "server-reflector" in full


def test_interval_bounds_and_point_summaries_are_never_metrics(tmp_path):
    """The rows over all repetitions of a point (repetition empty: medians, CI bounds, verdicts,
    counts) are not compared: their intervals are read as the runs printed them."""
    a, b = tmp_path / "a", tmp_path / "b"
    pairs = lambda v: [row(testbed="ci", experiment="rtt", point="server-xdp", lb="xenoflow", server="xdp",  # noqa: E731
                           metric="rtt_vs_none_pairs", value=v, unit="count", source="trials/rtt")]
    write_tidy("rtt_paired", _printed_rows("rtt_paired", "rtt_vs_none", "us", (1.5, 0.4, 2.6, 1), 0) + pairs(9), a,
               how="test")
    write_tidy("rtt_paired", _printed_rows("rtt_paired", "rtt_vs_none", "us", (9.5, 8.4, 10.6, 1), 0) + pairs(9), b,
               how="test")
    res = d.diff(a, b)
    assert res.comparisons == [] and res.only == [] and res.undirected == []
    assert sorted(s.metric for s in res.skipped) == ["rtt_vs_none_ci_high_us", "rtt_vs_none_ci_low_us",
                                                     "rtt_vs_none_median_us", "rtt_vs_none_pairs", "rtt_vs_none_verdict"]
    assert {s.why for s in res.skipped} == {d.WHY_SUMMARY}
    (p,) = res.printed
    assert (p.a, p.b, p.a_in_b) == ((1.5, 0.4, 2.6), (9.5, 8.4, 10.6), False)
    out = run(a, b, "--all").output
    assert "ci_high" not in out.split("Intervals both runs printed")[0]
    assert f"  rtt_paired: 0 judged; not judged 5: 5 {d.WHY_SUMMARY}" in out.splitlines()


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
