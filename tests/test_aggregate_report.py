"""Trial directories → tidy CSVs → run report, and the rate sampler's steady-state rule, on small
hand-made trial directories (the live path is covered by tests/test_workflow_run.py)."""

import csv
import json
from pathlib import Path

import pytest

from xenobench.aggregate import aggregate
from xenobench.measure.latency import read_probe_records
from xenobench.errors import DataError
from xenobench.report import write_report
from xenobench.results import read_tidy
from xenobench.sampler import parse_proc_net_dev

PROC_NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 9135040  137001    0    0    0     0          0         0     1242      17    0    0    0     0       0          0
"""


def test_proc_net_dev_rx_packets():
    assert parse_proc_net_dev(PROC_NET_DEV, "eth0") == 137001
    assert parse_proc_net_dev(PROC_NET_DEV, "lo") == 0
    with pytest.raises(DataError, match="Failed to read /proc/net/dev: no interface 'p9'"):
        parse_proc_net_dev(PROC_NET_DEV, "p9")


def _facts(exp, point, **kw):
    """What xenobench.procedures.point_facts records for a trial (unpaired)."""
    from xenobench.experiments import definition
    d = definition(exp)
    return {"kind": d.kind, "lb": point.get("lb", "none"), "paired": False, "lbs": None,
            "server": point.get("server"), "profile": d.profile, "generator": "xdpgen" if d.profile else None, **kw}


def _trial(resdir, exp, pid, rep, point, outputs, valid=True, reasons=(), facts=None):
    outputs = {"facts": facts or _facts(exp, point), **outputs}
    d = resdir / "trials" / exp / pid / f"rep-{rep}"
    (d / "attempt-1").mkdir(parents=True)
    (d / "attempt-1" / "outputs.json").write_text(json.dumps({**outputs, "seconds": 2.5}))
    res = {"experiment": exp, "point": point, "repetition": rep, "testbed": resdir.name, "valid": valid,
           "attempts": [{"attempt": 1, "valid": valid, "checks": {}, "reasons": list(reasons)}],
           "chosen_attempt": 1, "outputs": outputs}
    (d / "result.json").write_text(json.dumps(res))
    return d


def _probes(d, rtts_ns, lost=0):
    """Raw records as xenobench.rtt writes them (JSON lines; fields used here)."""
    with open(d / "attempt-1" / "probes.jsonl", "w") as f:
        for i, r in enumerate(rtts_ns):
            f.write(json.dumps({"i": i, "send_ns": 1000 * i, "recv_ns": 1000 * i + r, "rtt_ns": r,
                                "status": "ok", "ts": "kernel"}) + "\n")
        for i in range(lost):
            f.write(json.dumps({"i": 900 + i, "send_ns": 5, "recv_ns": None, "rtt_ns": None,
                                "status": "timeout", "ts": None}) + "\n")


@pytest.fixture
def resdir(tmp_path):
    r = tmp_path / "local"
    for rep, rate in ((1, 190000.0), (2, 200000.0)):
        _trial(r, "pps", "lb-xenoflow_payload-22", rep, {"lb": "xenoflow", "payload": 22},
               {"payload": 22, "rx_pps": rate, "rx_cv_pct": 0.5, "requested_pps": 0,
                "generator": {"achieved_pps": rate + 10, "valid": True}})
    _trial(r, "pps", "lb-xenoflow_payload-22", 3, {"lb": "xenoflow", "payload": 22},
           {"payload": 22, "rx_pps": 5.0, "requested_pps": 0, "generator": {"valid": False}},
           valid=False, reasons=["generator_ok: trafgen exited 1"])
    _trial(r, "loss", "lb-xenoflow_rate_pps-50000", 1, {"lb": "xenoflow", "rate_pps": 50000},
           {"payload": 22, "rx_pps": 49000.0, "loss_pct": 2.0, "requested_pps": 50000,
            "generator": {"achieved_pps": 50000.0, "valid": True}})
    for lb, base in (("none", 20000), ("xenoflow", 25000)):
        d = _trial(r, "rtt", f"lb-{lb}_server-xdp", 1, {"lb": lb, "server": "xdp"},
                   {"server": "xdp", "probe": {"n": 5, "lost": 1, "pcap": {"median_us": base / 1000 + 0.5},
                                               "pcap_median_diff_us": 0.5}})
        _probes(d, [base, base + 1000, base + 2000, base + 3000, base + 4000], lost=1)
    # the LB is not a variable of rtt_load (config lb): the trial's facts name it
    d = _trial(r, "rtt_load", "level_pps-50000_split-70-30", 1, {"level_pps": 50000, "split": "70/30"},
               {"server": "xdp", "probe": {"n": 3, "lost": 0}},
               facts=_facts("rtt_load", {"lb": "ebpf", "server": "xdp"}))
    _probes(d, [30000, 31000, 35000])
    return r


def test_aggregate_writes_valid_trials_and_lists_invalid_ones(resdir):
    written = aggregate(resdir, progress=lambda m: None)
    assert written == {"pps": 4, "loss": 2, "rtt_samples": 13, "rtt_summary": written["rtt_summary"], "invalid": 1}
    pps = read_tidy(resdir, "pps")
    rx = pps[pps.metric == "rx_pps"]
    assert sorted(rx.value) == [190000.0, 200000.0] and set(rx.frame_bytes) == {64.0}
    assert list(rx.offered_pps) == [190010.0, 200010.0]
    loss = read_tidy(resdir, "loss")
    assert loss[loss.metric == "loss_pct"].value.tolist() == [2.0]
    assert loss[loss.metric == "nominal_offered_pps"].value.tolist() == [50000.0]
    summ = read_tidy(resdir, "rtt_summary")
    x = summ[(summ.lb == "xenoflow") & summ.split.isna()].set_index("metric").value
    assert x["rtt_median_us"] == 27.0 and x["n"] == 5 and x["lost"] == 1 and x["rtt_pcap_diff_us"] == 0.5
    load = summ[summ.split == "70/30"].set_index("metric").value
    assert load["rtt_median_us"] == 31.0
    assert summ[summ.split == "70/30"].background_pps.iloc[0] == 50000
    assert set(summ[summ.split == "70/30"].lb) == {"ebpf"}  # as recorded (was hard-coded 'xenoflow')
    assert set(rx.generator) == {"xdpgen"}
    inv = list(csv.DictReader(open(resdir / "invalid.csv")))
    assert inv == [{"trial": "trials/pps/lb-xenoflow_payload-22/rep-3", "experiment": "pps", "point": "lb-xenoflow_payload-22", "attempts": "1",
                    "reasons": "generator_ok: trafgen exited 1"}]


def test_a_trial_without_facts_is_refused_by_name(resdir):
    f = resdir / "trials" / "loss" / "lb-xenoflow_rate_pps-50000" / "rep-1" / "result.json"
    res = json.loads(f.read_text())
    del res["outputs"]["facts"]
    f.write_text(json.dumps(res))
    with pytest.raises(DataError, match=r"rep-1: its result.json records no facts .* delete the trial directory"):
        aggregate(resdir, progress=lambda m: None)


def test_aggregate_removes_a_stale_csv(resdir):
    (resdir / "compare.csv").write_text("stale\n")
    aggregate(resdir, progress=lambda m: None)
    assert not (resdir / "compare.csv").exists()


def test_probe_records_errors_name_file_and_line(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("id,rtt\n1,2\n")
    with pytest.raises(DataError, match=r"Failed to read probe records .*p\.csv: no rtt_ns column"):
        read_probe_records(f)
    j = tmp_path / "p.jsonl"
    j.write_text('{"rtt_ns": 5, "status": "ok"}\n{"rtt_ns": \n')
    with pytest.raises(DataError, match=r"p\.jsonl: line 2: Expecting value"):
        read_probe_records(j)
    j.write_text('{"rtt_ns": 5000, "status": "ok"}\n{"rtt_ns": null, "status": "timeout"}\n')
    assert read_probe_records(j) == [5.0]


def test_report_lists_figures_invalid_trials_and_headlines(resdir, tmp_path):
    aggregate(resdir, progress=lambda m: None)
    figs = tmp_path / "fig"
    figs.mkdir()
    (figs / "pps_vs_payload.png").write_bytes(b"x")
    text = write_report(resdir, figs).read_text()
    assert f"- `{figs / 'pps_vs_payload.png'}` (+ `.pdf`)" in text
    assert "| trials/pps/lb-xenoflow_payload-22/rep-3 | 1 | generator_ok: trafgen exited 1 |" in text
    assert "Trials: 7 (6 valid, 1 invalid) of the points the config plans." in text
    assert "| rx rate, xenoflow, 22 B payload | 0.1950 Mpps | 0.1900–0.2000 | 2 |" in text
    # unpaired trials (the thesis's protocol): the difference of the medians, which has no interval
    assert "| added RTT (rtt), xenoflow vs no LB, server xdp | +5.0 µs | no interval (unpaired: a difference of medians) | 1 |" in text
    # an LB that seems to take time off the path is noise, and the report says so
    d = _trial(resdir, "rtt", "lb-ebpf_server-xdp", 1, {"lb": "ebpf", "server": "xdp"},
               {"server": "xdp", "probe": {"n": 5, "lost": 0}})
    _probes(d, [19000, 20000, 21000, 22000, 23000])
    aggregate(resdir, progress=lambda m: None)
    text = write_report(resdir, figs).read_text()
    assert ("| added RTT (rtt), ebpf vs no LB, server xdp | -1.0 µs (below 0: within the noise of this testbed) | "
            "no interval (unpaired: a difference of medians) | 1 |" in text)
    assert "| loss at 50 kpps requested | 2.000 % | — | 1 |" in text
    assert "never a BlueField-3" in text


def test_compare_rows_carry_the_lb_programs_time_and_the_report_both(resdir, tmp_path):
    """A compare trial with its program-cost phase (xenobench.progcost) gives a max_pps row and an
    lb_prog_ns_per_frame row; one whose phase was skipped (a hardware LB) or failed gives the rate
    only, and the headline median of the rate is not mixed with the time."""
    gen = {"achieved_pps": 2.5e6, "valid": True}
    _trial(resdir, "compare", "lb-ebpf", 1, {"lb": "ebpf"},
           {"payload": 22, "rx_pps": 1.6e6, "generator": gen,
            "lb_prog": {"runs": 1_000_000, "run_time_ns": 41_500_000, "ns_per_run": 41.5}})
    _trial(resdir, "compare", "lb-xenoflow", 1, {"lb": "xenoflow"},
           {"payload": 22, "rx_pps": 1.7e6, "generator": gen,
            "lb_prog": {"skipped": "no XDP program on fips5:p0 to time (a hardware LB has none)"}})
    _trial(resdir, "compare", "lb-wire", 1, {"lb": "wire"},
           {"payload": 22, "rx_pps": 1.8e6, "generator": gen, "lb_prog": {"error": "Failed to start ..."}})
    aggregate(resdir, progress=lambda m: None)
    c = read_tidy(resdir, "compare")
    assert sorted(zip(c.lb, c.metric, c.value, c.unit)) == [
        ("ebpf", "lb_prog_ns_per_frame", 41.5, "ns"), ("ebpf", "max_pps", 1.6e6, "packets/s"),
        ("wire", "max_pps", 1.8e6, "packets/s"), ("xenoflow", "max_pps", 1.7e6, "packets/s")]
    text = write_report(resdir, tmp_path).read_text()
    assert "| max rate at 64 B frames, ebpf | 1.6000 Mpps | — | 1 |" in text
    assert "| LB program time per frame (BPF run-time statistics), ebpf | 41.5 ns | — | 1 |" in text
    assert "program time per frame (BPF run-time statistics), xenoflow" not in text


def _counters(gen_tx, p0_rx, p0_drop, p1_tx, b2, b3):
    v = {"fips4:eth0": {"tx_packets": gen_tx}, "fips5:p0": {"rx_packets": p0_rx, "rx_dropped": p0_drop},
         "fips5:p1": {"tx_packets": p1_tx}, "fips2:eth0": {"rx_packets": b2}, "fips3:eth0": {"rx_packets": b3}}
    return {k: {"view": {"rx_packets": 0, "rx_dropped": 0, "tx_packets": 0, **x}} for k, x in v.items()}


def test_drop_table_counts_every_traffic_phase_the_counters_span(tmp_path):
    """The counters of a compare trial span the rate phase and the program-cost phase: the table's
    offered frames are both phases' generator counts, so every stage balances (0 in the switch);
    counters that disagree (a negative share) are named, not shown as a loss; a few stray frames
    (fewer than 10, or 0.1 % of those offered) are shown as such."""
    from xenobench.config import DEFAULT_CONFIG
    r = tmp_path / "local"
    gen = {"tx_packets": 700, "tx_link_packets": 700, "tx_dropped": 0, "valid": True, "achieved_pps": 700.0}
    phase = {"tx_packets": 300, "tx_link_packets": 300, "tx_dropped": 0}
    for lb, counters in (("ebpf", _counters(1000, 900, 100, 900, 450, 450)),
                         ("wire", _counters(1000, 990, 100, 990, 990, 0)),  # 90 frames from nowhere
                         ("xenoflow", _counters(1000, 900, 100, 900, 452, 450))):  # 2 stray at a backend
        d = _trial(r, "compare", f"lb-{lb}", 1, {"lb": lb},
                   {"payload": 22, "rx_pps": 1.0, "generator": gen,
                    "lb_prog": {"runs": 900, "ns_per_run": 60.0, "phase": phase}, "counters": counters})
        (d / "metadata.json").write_text(json.dumps({"config": str(DEFAULT_CONFIG)}))
    text = write_report(r, tmp_path).read_text()
    assert "| compare | ebpf | 1000 | 0 | 0 | 100 | 0 | 0 | 900 | the LB's ingress |" in text
    assert "| compare | wire | 1000 | 0 | -90 | 100 | 0 | 0 | 990 | counters disagree (the switch: negative) |" in text
    assert "| compare | xenoflow | 1000 | 0 | 0 | 100 | 0 | 0 (2 stray) | 902 | the LB's ingress |" in text


def test_report_reads_the_thesis_comparison_and_names_a_bad_one(resdir, tmp_path):
    """--thesis-compare: `xenobench compare` output goes into the report row by row; a file that is
    not that output (wrong shape, a missing field, non-JSON, too large) is refused by name."""
    from xenobench.compare import compare
    from xenobench.report import MAX_COMPARE_BYTES
    aggregate(resdir, progress=lambda m: None)
    good = tmp_path / "compare.json"
    rows = compare(Path(__file__).parent / "fixtures" / "results" / "small")
    good.write_text(json.dumps(rows))
    text = write_report(resdir, tmp_path, thesis_compare=good, out=tmp_path / "r.md").read_text()
    assert ("| pps_small_payload_mpps | 96.7 | 96.95 | Mpps | +0.26 % | yes | paper: Sec. 5.2 / Fig. 4 (text) |"
            in text.splitlines())
    bad = tmp_path / "bad.json"
    for content, message in [
        ('{"metric": "x"}', "expected a JSON list of rows (`xenobench compare` output), got dict"),
        (json.dumps([{**rows[0], "ok": "yes"}]), "row 0: ok: 'yes' is not true or false"),
        (json.dumps([rows[0], {k: v for k, v in rows[1].items() if k != "unit"}]), "row 1: unit: None is not a string"),
        (json.dumps([{**rows[0], "deviation_pct": True}]), "row 0: deviation_pct: True is not a number"),
        (json.dumps([{**rows[0], "deviation_pct": float("nan")}]), "row 0: deviation_pct: nan is not a finite number"),
        (json.dumps(rows)[:-40], "line 1 column"),  # truncated JSON: the parser says where
        (" " * (MAX_COMPARE_BYTES + 1), f"larger than {MAX_COMPARE_BYTES} bytes"),
    ]:
        bad.write_text(content)
        with pytest.raises(DataError) as e:
            write_report(resdir, tmp_path, thesis_compare=bad, out=tmp_path / "r2.md")
        assert str(e.value).startswith(f"Failed to read the comparison {bad}: "), e.value
        assert message in str(e.value)
    assert not (tmp_path / "r2.md").exists()  # nothing written from a refused input


def test_retry_invalid_sets_aside_only_the_invalid_trials_and_reopens_their_points(tmp_path):
    """A point whose trial is invalid is measured again on the next run only when the user asks:
    `experiment retry-invalid` moves the invalid trial to stale/ and removes the point's
    point.json; the valid trials and other points stay as they are."""
    from click.testing import CliRunner

    from xenobench.cli import main
    root = tmp_path / "results"
    r = root / "local"
    pid = "lb-xenoflow_payload-22"
    kw = dict(point={"lb": "xenoflow", "payload": 22}, outputs={"payload": 22, "rx_pps": 1.0})
    good = _trial(r, "pps", pid, 1, **kw)
    bad = _trial(r, "pps", pid, 2, valid=False, reasons=["lb_alive: xenoflow exited (signal 9) at 1.2 s"], **kw)
    other = _trial(r, "pps", "lb-ebpf_payload-22", 1, **{**kw, "point": {"lb": "ebpf", "payload": 22}})
    for d in (good, other):
        (d.parent / "point.json").write_text("{}")
    cli = ["--config", "config/local.yaml", "experiment", "retry-invalid", "--results", str(root)]

    res = CliRunner().invoke(main, [*cli, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "1 invalid trial(s) would set aside" in res.output
    assert bad.is_dir() and (bad.parent / "point.json").exists()

    res = CliRunner().invoke(main, cli)
    assert res.exit_code == 0, res.output
    assert f"set aside {bad}" in res.output and "lb_alive: xenoflow exited (signal 9) at 1.2 s" in res.output
    assert not bad.exists() and good.is_dir() and (other.parent / "point.json").exists()
    assert not (bad.parent / "point.json").exists()       # the point's rule runs again
    (kept,) = (bad.parent / "stale").iterdir()
    assert kept.name.startswith("rep-2-") and (kept / "result.json").exists()
    assert "0 invalid trial(s) set aside" in CliRunner().invoke(main, cli).output

    res = CliRunner().invoke(main, [*cli, "--only", "ppss"])
    assert res.exit_code != 0 and "Failed to retry experiment 'ppss': unknown" in res.output
    res = CliRunner().invoke(main, ["--config", "config/local.yaml", "experiment", "retry-invalid",
                                    "--results", str(tmp_path / "none")])
    assert res.exit_code != 0 and "no trials under" in res.output and "Traceback" not in res.output


#: (generator_bound_share per repetition of one LB and payload, the label its headline gets)
GENERATOR_BOUND = [
    ([1.0, 0.75, 0.5], " — generator-bound (the generator's own rate set 75% of the blocks)"),
    ([0.0, 0.25, 0.5], ""),  # most blocks measured the LB
    ([], ""),  # not recorded (paced, the thesis's protocol, TRex)
]


@pytest.mark.parametrize("shares,label", GENERATOR_BOUND)
def test_a_rate_the_generator_set_is_labelled_generator_bound(shares, label):
    """A headline rate most of whose kept blocks the generator at its own rate set is the generator's
    ceiling, and says so (the rows as rate.rows writes them for the interleaved design)."""
    import pandas as pd

    from xenobench.report import generator_bound
    rows = [dict(metric="rx_pps", value=1.5e6)] + [dict(metric="generator_bound_share", value=v) for v in shares]
    assert generator_bound(pd.DataFrame(rows)) == label


# One paired point (rtt, server xdp, idle): the per-LB medians of rtt_summary differ by +0.6 µs, the
# median of the per-round differences is +0.28 µs [0.18, 1.73] (rtt_paired, as aggregate writes them)
PAIRED_SUMMARY = [("none", 1, 20.0), ("none", 2, 20.0), ("xenoflow", 1, 20.5), ("xenoflow", 2, 20.7)]
PAIRED_DIFF = {"median_us": 0.28, "ci_low_us": 0.18, "ci_high_us": 1.73, "pairs": 8, "verdict": 1,
               "bootstrap_seed": 7, "bootstrap_resamples": 2000}


def _paired_tables(resdir):
    from xenobench.results import row, write_tidy
    common = dict(testbed=resdir.name, experiment="rtt", point="server-xdp", server="xdp")
    write_tidy("rtt_summary", [row(**common, lb=lb, repetition=rep, metric="rtt_median_us", value=v, unit="us",
                                   source=f"trials/rtt/server-xdp/rep-{rep}") for lb, rep, v in PAIRED_SUMMARY],
               resdir)
    units = {"pairs": "count", "verdict": "sign", "bootstrap_seed": "seed", "bootstrap_resamples": "count"}
    write_tidy("rtt_paired", [row(**common, lb="xenoflow", metric=f"rtt_vs_none_{k}", value=v,
                                  unit=units.get(k, "us"), source="trials/rtt/server-xdp")
                              for k, v in PAIRED_DIFF.items()], resdir)


def test_the_headline_added_rtt_is_the_paired_estimate_in_md_and_tex(tmp_path):
    """Where the points were measured paired, the headline's added RTT is the paired table's
    estimate with its interval, in report.md (and .html) and report.tex, never the difference of
    the medians (+0.6 µs here)."""
    resdir = tmp_path / "px"
    _paired_tables(resdir)
    md = write_report(resdir, tmp_path / "fig").read_text()
    assert ("| added RTT (rtt), xenoflow vs no LB, server xdp | +0.28 µs: higher than none | 95 % CI [+0.18, +1.73] "
            "| 8 |") in md.splitlines()
    assert "| rtt, server xdp, idle | xenoflow | none | +0.28 µs | [+0.18, +1.73] | 8 | higher than none |" in md
    assert "+0.6" not in md and "unpaired" not in md
    tex = (resdir / "report.tex").read_text()
    assert (r"added RTT (rtt), xenoflow vs no LB, server xdp & +0.28 \textmu{}s: higher than none & "
            r"95 \% CI [+0.18, +1.73] & 8 \\") in tex.splitlines()
    assert "+0.6" not in tex
    assert "<td>+0.28 µs: higher than none</td><td>95 % CI [+0.18, +1.73]</td>" in (resdir / "report.html").read_text()


@pytest.mark.parametrize("planned", [None, set()], ids=["every trial", "a plan that has none of them"])
def test_every_csv_aggregate_writes_has_its_sidecar(resdir, planned):
    """Each CSV in the results directory after aggregate (the tidy tables, invalid.csv, unplanned.csv)
    has <name>.csv.json beside it naming its table, its columns as the file's header has them and
    its rows; and no sidecar is left without its CSV."""
    from xenobench.results import SIDECAR_FIELDS
    aggregate(resdir, progress=lambda m: None, planned=planned)
    csvs = sorted(resdir.glob("*.csv"))
    assert {"invalid.csv"} | ({"unplanned.csv"} if planned is not None else set()) <= {c.name for c in csvs}
    for c in csvs:
        meta = json.loads((resdir / f"{c.name}.json").read_text())
        with open(c, newline="") as f:
            header, *rows = list(csv.reader(f))
        assert (meta["table"], meta["columns"], meta["rows"]) == (c.stem, header, len(rows)), c.name
        assert set(meta) == set(SIDECAR_FIELDS), c.name
    assert sorted(s.name for s in resdir.glob("*.csv.json")) == sorted(f"{c.name}.json" for c in csvs)
