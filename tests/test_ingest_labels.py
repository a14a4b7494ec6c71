"""`xenobench ingest thesis` on a raw-data directory made here: labels (--lb ebpf, --split-map,
manifest.yaml), repetitions _2/_3, every file used or listed with its reason, the loss gates
against the measured clock skew, refused captures, and `compare --tolerance` checks."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from xenobench.compare import compare, reproduced
from xenobench.errors import ConfigError, DataError
from xenobench.ingest import ingest_thesis, provenance_lines

from .test_rtt_pairing import BACKEND, CLIENT, LB, NOISE, T0, pcap_ns, probe, reflected


def capture(path, rtt_ns, n=20, early=False):
    """n identical probes 214 ms apart, each reflected after rtt_ns (early: stamped before it)."""
    q, r, recs = probe(), reflected(), []
    for i in range(n):
        t = T0 + i * 214_000_000
        recs += [(t, q), (t - 50_000 if early else t + rtt_ns, r), (t + 1000, NOISE[i % 3])]
    return pcap_ns(path, recs)


def text_capture(path, rtt_us, n=10):
    q = "ethertype IPv4 (0x0800), length 73: 1.2.3.4.12345 > 10.3.10.45.53: 0+ A? example.com. (29)"
    a = "ethertype IPv4 (0x0800), length 89: 10.3.10.45.53 > 1.2.3.4.12345: 0*- 1/0/0 A 1.1.1.1 (45)"
    lines = []
    for i in range(n):
        ms = 100 + i * 214
        lines += [f"10:00:{ms // 1000:02d}.{ms % 1000:03d}000 {CLIENT} > {LB}, {q}",
                  f"10:00:{ms // 1000:02d}.{ms % 1000:03d}{rtt_us:03d} {BACKEND} > {CLIENT}, {a}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def series(path, values):
    path.write_text("".join(f"{v}\n" for v in values))


@pytest.fixture
def rawdir(tmp_path):
    d = tmp_path / "ebpf-data"
    for sub in ("pps", "loss", "rtt/baseline", "rtt/under-load", "extra"):
        (d / sub).mkdir(parents=True)
    (d / "README.md").write_text("how these were taken\n")
    (d / "extra" / "scope.bin").write_bytes(b"\0\1")
    # pps: a ramp second at each end, 5 steady seconds
    series(d / "pps/2b_1.txt", [1_000, 40_000_000, 40_000_100, 39_999_900, 40_000_000, 40_000_050, 2_000])
    series(d / "pps/64b_1.txt", [38_000_000] * 5)
    series(d / "pps/64b.txt", [1])  # no repetition: not the layout
    # loss: below capacity rx exceeds tx by ~0.1 % (the samplers' clock skew); 45m_2 by 2 % (flagged);
    # 135m_1 by 400 % (refused); 60m_1 has no rx file (skipped)
    for name, tx, rx in (("15m_1", 15_000_000, 15_015_000), ("30m_1", 30_000_000, 30_033_000),
                         ("45m_1", 45_000_000, 45_045_000), ("45m_2", 45_000_000, 45_900_000),
                         ("100m_1", 100_000_000, 97_000_000), ("120m_1", 120_000_000, 97_000_000),
                         ("135m_1", 20_000_000, 100_000_000)):
        series(d / f"loss/tx_{name}.txt", [tx] * 6)
        series(d / f"loss/rx_{name}.txt", [rx] * 6)
    series(d / "loss/tx_60m_1.txt", [60_000_000] * 6)
    capture(d / "rtt/baseline/rtt_ebpf.pcap", 30_000)
    capture(d / "rtt/baseline/pingpong_ebpf.pcap", 20_000)
    capture(d / "rtt/under-load/rtt_15m_30_70.pcap", 31_000)
    capture(d / "rtt/under-load/rtt_15m_30_70_2.pcap", 33_000)
    text_capture(d / "rtt/under-load/rtt_15m_30_70_3.txt", 35)
    capture(d / "rtt/under-load/rtt_30m_50_50.pcap", 0, early=True)  # every reply before its query
    (d / "rtt/under-load/notes.txt").write_text("the switch was rebooted before 45m\n")
    return d


def test_ingest_labelled_ebpf_uses_or_lists_every_file(rawdir, tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "xenobench", "ingest", "thesis", str(rawdir), "--out", str(out),
                        "--lb", "ebpf", "--split-map", "30_70=70/30"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    err = p.stderr
    assert "files: 19 used, 5 skipped, 3 refused (labels from command line: lb ebpf, server reflector)" in err
    assert "skipped: README.md: documentation, not a measurement" in err
    assert "skipped: extra/scope.bin: extra/ is not one of pps/, loss/, rtt/" in err
    assert "skipped: pps/64b.txt: name is not NNb_R.txt" in err
    assert "skipped: loss/tx_60m_1.txt: no rx_60m_1.txt beside it" in err
    assert "skipped: rtt/under-load/notes.txt: name is not rtt_NNm_X_Y[_R].*" in err
    assert "refused: loss/tx_135m_1.txt: loss -400.000 % < -10 %" in err
    # each reply stamped 50 µs before its query pairs with the query before (214 ms): refused
    assert ("refused: rtt/under-load/rtt_30m_50_50.pcap: identical queries 214000.000 µs apart, less than 2 x "
            "the median RTT (213950.000 µs): answers cannot be told apart") in err
    assert "flagged: loss/tx_45m_2.txt: loss -2.000 % is below 0 beyond the measured clock skew" in err

    prov = json.loads((out / "provenance.json").read_text())
    listed = {f["path"] for f in prov["files"]}
    assert listed == {f.relative_to(rawdir).as_posix() for f in rawdir.rglob("*") if f.is_file()}
    assert prov["labels"]["lb"] == "ebpf" and prov["rules"]["timeout_s"] == 1.0
    assert prov["clock_skew"]["trials"] == 4 and prov["clock_skew"]["median_pct"] == pytest.approx(-0.105, abs=1e-3)
    assert provenance_lines(out)[0].startswith("files: 19 used, 5 skipped, 3 refused")

    rs = pd.read_csv(out / "rtt_summary.csv")
    assert set(rs.lb) == {"ebpf", "none"} and set(rs.server) == {"reflector"}
    med = rs[rs.metric == "rtt_median_us"]
    load = med[med.split.notna()].sort_values("repetition")
    assert list(load.split) == ["70/30"] * 3 and list(load.repetition) == [1, 2, 3]
    assert list(load.value) == [31.0, 33.0, 35.0]  # pcap, pcap, tcpdump text
    assert reproduced(out)["rtt_added_ebpf_us"] == 10.0
    pps = pd.read_csv(out / "pps.csv")
    assert set(pps.lb) == {"ebpf"} and len(pps[pps.metric == "rx_pps"]) == 2
    assert pps[pps.payload_bytes == 2].source.iloc[0] == "ebpf-data/pps/2b_1.txt lines 2-6 of 7"
    assert pps[(pps.payload_bytes == 2) & (pps.metric == "rx_pps")].value.iloc[0] == 40_000_000
    loss = pd.read_csv(out / "loss.csv")
    flagged = loss[loss.source.str.contains("flags: loss -2.000 %")]
    assert len(flagged) == 2 and set(flagged.repetition) == {2}  # loss_pct and nominal rows of 45m_2
    assert not loss.source.str.contains("135m").any()


def test_manifest_labels_and_command_line_override(rawdir, tmp_path):
    (rawdir / "manifest.yaml").write_text("lb: katran\nserver: python\nsplit_map: {'30_70': seventy-thirty}\n")
    ingest_thesis(rawdir, tmp_path / "a", progress=lambda s: None)
    rs = pd.read_csv(tmp_path / "a" / "rtt_summary.csv")
    assert set(rs.lb) == {"katran", "none"} and set(rs.server) == {"python"}
    assert set(rs.split.dropna()) == {"seventy-thirty"}
    prov = json.loads((tmp_path / "a" / "provenance.json").read_text())
    assert {"path": "manifest.yaml", "status": "used", "kind": "manifest", "reason": None, "flags": []} in prov["files"]
    ingest_thesis(rawdir, tmp_path / "b", progress=lambda s: None, lb="ebpf")
    assert set(pd.read_csv(tmp_path / "b" / "pps.csv").lb) == {"ebpf"}
    (rawdir / "manifest.yaml").write_text("split_map: {30_70: x}\n")
    with pytest.raises(DataError, match=r"split map entry 3070='x': .* \(YAML reads an unquoted 30_70 as the number"):
        ingest_thesis(rawdir, tmp_path / "c", progress=lambda s: None)
    (rawdir / "manifest.yaml").write_text("lb: katran\nbalancer: x\n")
    with pytest.raises(DataError, match=rf"Failed to read labels {rawdir}/manifest.yaml: unknown key 'balancer'"):
        ingest_thesis(rawdir, tmp_path / "c", progress=lambda s: None)
    (rawdir / "manifest.yaml").unlink()
    with pytest.raises(DataError, match=r"Failed to read labels --split-map: split map entry 30-70='x': expected X_Y=NAME"):
        ingest_thesis(rawdir, tmp_path / "d", progress=lambda s: None, split_map=["30-70=x"])


def test_compare_tolerance_must_be_finite_and_not_negative(tmp_path):
    for tol in (float("inf"), float("nan"), -0.5):
        with pytest.raises(ConfigError, match=rf"Failed to compare {tmp_path}: tolerance {tol!r} %: expected a "
                                              "finite number >= 0"):
            compare(tmp_path, tol)
    p = subprocess.run([sys.executable, "-m", "xenobench", "compare", str(tmp_path), "--tolerance", "inf"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "tolerance inf %: expected a finite number >= 0" in p.stderr
