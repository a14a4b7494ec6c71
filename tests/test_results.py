"""The tidy results schema: round trip, path forms, plain CSVs with their sidecars, files written
before the sidecars, and errors naming file, line, column and value for malformed tables."""

import json
from pathlib import Path

import pandas as pd
import pytest

from xenobench.errors import DataError
from xenobench import REPO_ROOT
from xenobench.results import (COLUMNS, KINDS, SIDECAR_FIELDS, l1_gbps, l2_gbps, line_rate_pps, read_all,
                               read_sidecar, read_tidy, remove_tidy, row, write_tidy)

FIXTURES = Path(__file__).parent / "fixtures" / "results" / "small"


def test_row_derives_frame_bytes_and_rejects_unknown_columns():
    r = row(testbed="t", lb="xenoflow", payload_bytes=22, metric="rx_pps", value=1.0, unit="packets/s", source="s")
    assert r["frame_bytes"] == 64 and list(r) == COLUMNS
    with pytest.raises(ValueError, match="unknown tidy columns \\['payload'\\]"):
        row(payload=22)


def test_line_rate_and_bandwidth_formulas():
    # 64 B frame + 4 FCS + 20 preamble/IFG = 88 B on the wire → 100e9 / 704 bit
    assert line_rate_pps(22) == pytest.approx(142_045_454.5, rel=1e-9)
    assert line_rate_pps(1024) == pytest.approx(100e9 / (1090 * 8))
    assert l2_gbps(10e6, 22) == pytest.approx(5.12)
    assert l1_gbps(line_rate_pps(300), 300) == pytest.approx(100.0)


def test_write_read_round_trip_dir_and_file_forms(tmp_path):
    rows = [row(testbed="t", experiment="rtt", point="server-bind9", lb="none", server="bind9", repetition=r,
                metric="rtt_us", value=v, unit="us", source=f"cap.pcap:{r}") for r, v in ((1, 101.5), (2, 99.0))]
    p = write_tidy("rtt_samples", rows, tmp_path / "res", how="made by test_results.py")
    assert p == tmp_path / "res" / "rtt_samples.csv"
    assert p.read_text().startswith("testbed,experiment,point,lb,server,generator,")  # plain: the header first
    meta = json.loads((tmp_path / "res" / "rtt_samples.csv.json").read_text())
    assert tuple(meta) == SIDECAR_FIELDS and meta["how"] == "made by test_results.py"
    assert (meta["table"], meta["rows"], meta["columns"]) == ("rtt_samples", 2, COLUMNS)
    assert meta["written_utc"].endswith("+00:00") and read_sidecar(tmp_path / "res", "rtt_samples") == meta
    plain = pd.read_csv(p)  # no reader of ours needed
    assert list(plain.columns) == COLUMNS and list(plain.value) == [101.5, 99.0]
    df = read_tidy(tmp_path / "res", "rtt_samples")
    assert list(df.columns) == COLUMNS and list(df.value) == [101.5, 99.0]
    assert list(df.lb) == ["none", "none"]  # 'none' is a load balancer name, not a missing value
    f = write_tidy("pps", pd.DataFrame([row(testbed="t", experiment="pps", point="lb-ebpf_payload-2", lb="ebpf",
                                            payload_bytes=2, repetition=1, metric="rx_pps",
                                            value=5e6, unit="packets/s", source="x")]), tmp_path / "x.csv")
    assert f == tmp_path / "x.csv" and "2,44," in f.read_text()  # integers stay integers
    assert read_tidy(f, "pps").frame_bytes.iloc[0] == 44


def test_fixture_directory_reads_every_kind():
    got = read_all(FIXTURES)
    assert set(got) == set(KINDS)
    assert len(got["pps"]) == 13 and got["rtt_summary"].split.dropna().unique().tolist() == ["single", "worst"]


def test_every_table_of_the_fixtures_and_the_thesis_data_is_a_plain_csv_with_its_sidecar():
    """pandas.read_csv, nothing else, gives every committed table with exactly COLUMNS, the same
    values as read_tidy, and each has a sidecar saying how it was made."""
    dirs = [FIXTURES, REPO_ROOT / "results" / "thesis"]
    seen = 0
    for d in dirs:
        for kind in KINDS:
            f = d / f"{kind}.csv"
            if not f.exists():
                continue
            plain = pd.read_csv(f)
            assert list(plain.columns) == COLUMNS, f
            ours = read_tidy(d, kind)
            assert len(plain) == len(ours) and (plain.value.to_numpy() == ours.value.to_numpy()).all(), f
            meta = read_sidecar(d, kind)
            assert meta is not None and meta["table"] == kind and meta["rows"] == len(plain) and meta["how"], f
            seen += 1
    assert seen == len(KINDS) + 4  # every kind in the fixtures; pps, loss, rtt_samples, rtt_summary of the thesis


def test_files_written_before_the_sidecars_still_read_their_comment_lines_skipped(tmp_path):
    lines = (FIXTURES / "pps.csv").read_text().splitlines()
    (tmp_path / "pps.csv").write_text("# made by hand\n# before the sidecars\n" + "\n".join(lines) + "\n")
    old = read_tidy(tmp_path, "pps")
    assert old.equals(read_tidy(FIXTURES, "pps")) and read_sidecar(tmp_path, "pps") is None


def test_a_broken_sidecar_is_named_and_remove_tidy_takes_both(tmp_path):
    write_tidy("pps", read_tidy(FIXTURES, "pps"), tmp_path, how="copy")
    (tmp_path / "pps.csv.json").write_text("[1, 2]")
    with pytest.raises(DataError, match=f"Failed to read the sidecar {tmp_path / 'pps.csv.json'}: expected a JSON "
                                        "object, got list"):
        read_sidecar(tmp_path, "pps")
    remove_tidy("pps", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_files_without_the_server_and_generator_columns_still_read(tmp_path):
    cols = [c for c in COLUMNS if c not in ("server", "generator", "changes_per_s")]
    f = tmp_path / "pps.csv"
    f.write_text(",".join(cols) + "\nt,pps,lb-xenoflow_payload-2,xenoflow,2,44,,1,1,,,rx_pps,96900000,packets/s,old\n")
    assert read_tidy(tmp_path, "pps").server.isna().all()


def test_files_whose_rows_name_no_experiment_and_point_are_refused_with_the_fix(tmp_path):
    cols = [c for c in COLUMNS if c not in ("experiment", "point")]
    (tmp_path / "pps.csv").write_text(",".join(cols) + "\nt,xenoflow,,,2,44,,1,1,,,,rx_pps,96900000,packets/s,old\n")
    with pytest.raises(DataError, match=r"pps.csv: no experiment and point columns .*: regenerate it with "
                                        r"`xenobench experiment aggregate <results dir>`"):
        read_tidy(tmp_path, "pps")


def _csv(tmp_path, line, kind="pps", comment=False):
    f = tmp_path / f"{kind}.csv"
    cols = [c for c in COLUMNS if c not in ("generator", "changes_per_s")]  # optional; the rows below lack them
    f.write_text(("# fixture\n" if comment else "") + ",".join(cols) + "\n" +
                 "t,pps,p,xenoflow,,2,44,,,1,,,rx_pps,96900000,packets/s,ok\n" + line + "\n")
    return f


@pytest.mark.parametrize("line,comment,msg", [
    ("t,pps,p,xenoflow,,2,44,,,1,,,rx_pps,9x6,packets/s,bad", False, "line 3: column value: '9x6' is not a number"),
    ("t,pps,p,xenoflow,,2,44,,,1,,,rx_pps,9x6,packets/s,bad", True, "line 4: column value: '9x6' is not a number"),
    ("t,pps,p,xenoflow,,two,44,,,1,,,rx_pps,1,packets/s,bad", False, "line 3: column payload_bytes: 'two' is not a number"),
    ("t,pps,p,,,2,44,,,1,,,rx_pps,1,packets/s,bad", False, "line 3: column lb is empty"),
    ("t,pps,p,xenoflow,,2,44,,,1,,,rx_pps,96.9,Mpps,bad", False, "line 3: metric rx_pps has unit 'Mpps', expected 'packets/s'"),
])
def test_malformed_rows_name_file_line_column_value(tmp_path, line, comment, msg):
    f = _csv(tmp_path, line, comment=comment)
    with pytest.raises(DataError, match=f"Failed to read tidy results {f}: {msg}"):
        read_tidy(tmp_path, "pps")


def test_empty_missing_and_unknown(tmp_path):
    (tmp_path / "loss.csv").write_text("")
    with pytest.raises(DataError, match=f"Failed to read tidy results {tmp_path / 'loss.csv'}: the file is empty"):
        read_tidy(tmp_path, "loss")
    with pytest.raises(DataError, match="rtt_samples.csv: no such file"):
        read_tidy(tmp_path, "rtt_samples")
    (tmp_path / "pps.csv").write_text("testbed,experiment,point,lb,value\nt,pps,p,x,1\n")
    with pytest.raises(DataError, match="missing columns payload_bytes, frame_bytes"):
        read_tidy(tmp_path, "pps")
    with pytest.raises(DataError, match="Failed to use tidy kind 'latency': unknown"):
        read_tidy(tmp_path, "latency")
    with pytest.raises(DataError, match="line 2: column source is empty"):
        write_tidy("pps", [row(testbed="t", experiment="pps", point="p", lb="x", metric="rx_pps", value=1,
                               unit="packets/s")], tmp_path / "w")
    assert not (tmp_path / "w" / "pps.csv").exists()  # nothing half-written


def test_the_same_rows_made_the_same_way_leave_the_table_and_its_sidecar_untouched(tmp_path, monkeypatch):
    """A rerun that makes exactly the rows a table holds (results/thesis, tracked) rewrites neither
    the CSV nor its sidecar, whatever the commit now is; other rows or another `how` rewrite both."""
    import xenobench.results as results
    rows = [row(testbed="t", experiment="pps", point="lb-ebpf_payload-22", lb="ebpf", payload_bytes=22,
                metric="rx_pps", value=v, unit="packets/s", source="s") for v in (1.0, 2.0)]
    f = write_tidy("pps", rows, tmp_path, how="the rows")
    side = f.with_name(f.name + ".json")
    before = (f.read_bytes(), side.read_bytes())
    monkeypatch.setattr(results, "source_commit", lambda: "0" * 40 + "-dirty")
    assert write_tidy("pps", rows, tmp_path, how="the rows") == f
    assert (f.read_bytes(), side.read_bytes()) == before
    write_tidy("pps", rows, tmp_path, how="other words")
    assert json.loads(side.read_text())["how"] == "other words" and json.loads(side.read_text())["commit"].endswith("-dirty")
    write_tidy("pps", rows[:1], tmp_path, how="other words")
    assert json.loads(side.read_text())["rows"] == 1 and f.read_bytes() != before[0]
