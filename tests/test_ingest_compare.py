"""Thesis raw-data ingest and published-vs-reproduced comparison."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from xenobench.compare import compare
from xenobench.errors import DataError
from xenobench.ingest import ingest_thesis, read_series
from xenobench.steady import steady_range
from xenobench.results import COLUMNS, line_rate_pps

from .test_pcap_rtt import THESIS_RTT

THESIS = THESIS_RTT.parent
needs_thesis = pytest.mark.skipif(not THESIS.exists(), reason="needs ../shared/thesis-data")


@pytest.fixture(scope="module")
def thesis_tidy(tmp_path_factory):
    out = tmp_path_factory.mktemp("thesis")
    ingest_thesis(THESIS, out, progress=lambda s: None)
    return out


@needs_thesis
def test_thesis_packet_rates(thesis_tidy):
    pps = pd.read_csv(thesis_tidy / "pps.csv")
    assert list(pps.columns) == COLUMNS
    assert len(pps[pps.metric == "rx_pps"]) == 44  # 22 payloads x 2 repetitions
    by = pps[pps.metric == "rx_pps"].groupby("payload_bytes").value.median() / 1e6
    assert all(abs(by[p] - 96.7) < 0.5 for p in range(2, 23, 2))       # ≈ 96.7 Mpps below 23 B
    assert all(abs(by[p] - 92.8) < 0.3 for p in (24, 26, 28, 32, 48, 64))  # ≈ 92.8 Mpps from 24 B
    # network-bound above 64 B: 95-100 % of the layer-1 line rate (the thesis: line rate itself
    # is reached only above 1024 B)
    for p in (128, 256, 512, 1024):
        assert 0.95 <= by[p] * 1e6 / line_rate_pps(p) <= 1.005, p
    assert (pps.frame_bytes == pps.payload_bytes + 42).all()
    assert pps.source.str.contains(r"pps/\d+b_\d\.txt lines \d+-\d+ of \d+").all()
    cv = pps[pps.metric == "cv_pct"]
    assert len(cv) == 44 and cv.value.median() < 0.1 and cv.value.max() < 0.5  # per-second spread in a trial


@needs_thesis
def test_thesis_every_file_is_used_and_nothing_is_flagged(thesis_tidy):
    prov = json.loads((thesis_tidy / "provenance.json").read_text())
    status = {f["path"]: (f["status"], f["reason"]) for f in prov["files"]}
    assert len(status) == 189 and status.pop("README.md") == ("skipped", "documentation, not a measurement")
    assert {s for s, _ in status.values()} == {"used"}
    assert not any(f["flags"] for f in prov["files"])
    # the samplers' clock skew: rx exceeds tx by 0.14 % at loads without loss
    assert prov["clock_skew"]["trials"] == 15 and prov["clock_skew"]["median_pct"] == pytest.approx(-0.135, abs=0.001)


@needs_thesis
def test_thesis_loss_onset_and_growth(thesis_tidy):
    loss = pd.read_csv(thesis_tidy / "loss.csv")
    x = loss[loss.metric == "nominal_offered_pps"][["source", "value"]].rename(columns={"value": "nominal"})
    l = loss[loss.metric == "loss_pct"].merge(x, on="source")
    med = l.groupby("nominal").value.median()
    assert (med[med.index <= 95e6].abs() < 0.5).all()          # no loss up to 95 Mpps
    assert med[97e6] > 0.5 and med[135e6] > 25                 # onset at 96-97 Mpps, grows
    assert list(med[med.index >= 96e6]) == sorted(med[med.index >= 96e6])  # monotone growth


@needs_thesis
def test_compare_thesis_within_tolerance(thesis_tidy):
    all_rows = compare(thesis_tidy, 5.0)
    rows = {(r["metric"], r["source"].split(":")[0]): r for r in all_rows}
    assert rows["rtt_added_xenoflow_us", "paper"]["reproduced"] == pytest.approx(5.2, abs=0.1)
    assert 95 <= rows["loss_onset_mpps", "paper"]["reproduced"] <= 97
    assert rows["loss_onset_mpps", "thesis"]["range"] == [95.0, 98.0]
    assert rows["loss_capacity_mpps", "paper"]["reproduced"] == pytest.approx(96.7, abs=0.5)
    assert rows["pps_small_payload_mpps", "paper"]["reproduced"] == pytest.approx(96.7, abs=0.5)
    assert rows["pps_large_payload_mpps", "paper"]["reproduced"] == pytest.approx(92.8, abs=0.3)
    assert rows["pps_drop_payload_bytes", "paper"]["reproduced"] == 24  # no 23 B trial in the data
    assert rows["network_bound_from_payload_bytes", "thesis"]["reproduced"] == 64
    assert rows["compare_speedup_min", "thesis"]["reproduced"] > 2
    assert all(r["ok"] for r in all_rows if r["gating"])
    assert rows["pps_small_payload_mpps", "paper"]["source"].endswith("(text)")
    # the paper's CV < 0.08 % does not hold for the shared 512 B runs (2.4 % apart): reported, not gating
    cv = rows["cv_max_pct", "paper"]
    assert cv["ok"] is False and cv["gating"] is False and cv["reproduced"] > 1


def test_compare_tolerance_and_exit_code(tmp_path):
    pd.DataFrame([{c: None for c in COLUMNS} | {"testbed": "t", "experiment": "pps", "point": f"lb-xenoflow_payload-{p}",
                                                 "lb": "xenoflow", "payload_bytes": p,
                                                 "metric": "rx_pps", "value": v, "unit": "packets/s",
                                                 "source": "test"}
                  for p, v in ((2, 90e6), (64, 92.8e6))]).to_csv(tmp_path / "pps.csv", index=False)
    rows = {(r["metric"], r["source"].split(":")[0]): r for r in compare(tmp_path, 5.0)}
    assert rows["pps_small_payload_mpps", "paper"]["deviation_pct"] == pytest.approx(-6.93, abs=0.01)
    assert rows["pps_small_payload_mpps", "paper"]["ok"] is False and rows["pps_large_payload_mpps", "paper"]["ok"]
    p = subprocess.run([sys.executable, "-m", "xenobench", "compare", str(tmp_path), "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and json.loads(p.stdout)[0]["metric"]
    p = subprocess.run([sys.executable, "-m", "xenobench", "compare", str(tmp_path), "--tolerance", "8.5"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout  # 90 vs 98 (thesis) is -8.2 %


def test_steady_state_rule_drops_ramp_seconds_only():
    x = np.array([10, 500, 1000, 1001, 700, 999, 1000, 300, 5])
    assert steady_range(x) == (2, 7)  # the interior dip (700) is kept


def test_malformed_series_name_file_and_line(tmp_path):
    (tmp_path / "pps").mkdir()
    bad = tmp_path / "pps" / "22b_1.txt"
    bad.write_text("96919452\n9695x823\n")
    with pytest.raises(DataError, match=rf"Failed to read series {bad}: line 2: '9695x823' is not an integer"):
        read_series(bad)
    bad.write_text("")
    with pytest.raises(DataError, match="the file is empty"):
        ingest_thesis(tmp_path, tmp_path / "out", progress=lambda s: None)
    with pytest.raises(DataError, match="none of pps/, loss/, rtt/ present"):
        ingest_thesis(tmp_path / "pps", tmp_path / "out", progress=lambda s: None)


@needs_thesis
def test_cli_ingest_subset(tmp_path):
    sub = tmp_path / "data"
    (sub / "pps").mkdir(parents=True)
    for f in ("2b_1.txt", "64b_1.txt"):
        shutil.copy(THESIS / "pps" / f, sub / "pps" / f)
    p = subprocess.run([sys.executable, "-m", "xenobench", "ingest", "thesis", str(sub), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"pps": 4}  # rx_pps and cv_pct per trial
    assert len(pd.read_csv(tmp_path / "o" / "pps.csv").query("metric == 'rx_pps'")) == 2
