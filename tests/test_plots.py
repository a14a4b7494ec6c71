"""Figures from the small fixture CSVs (tests/fixtures/results/small) and from the thesis data:
files exist and are non-empty, and the plotted series have the expected values."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xenobench.plots import drawn_by, plot_all, rtt_lb_vs_none
from xenobench.results import line_rate_pps

from .test_ingest_compare import needs_thesis, thesis_tidy  # noqa: F401  (module fixture)

FIXTURES = Path(__file__).parent / "fixtures" / "results" / "small"
NAMES = list(drawn_by())  # every figure a definition lists (the owner's list): the fixture draws each


def _drawn_not_written(monkeypatch, written=()):
    """Figures drawn (captions placed as when saved) and closed, not written, but those named in
    `written`: for tests that check the plotted series; the files plot_all writes are checked on the
    CLI's run (cli_figures)."""
    import matplotlib.pyplot as plt

    from xenobench import plots
    save = plots._save

    def close(fig, outdir, name, resdir=None):
        if name in written:
            return save(fig, outdir, name, resdir)
        plots._finish(fig, name, resdir)
        plt.close(fig)
    monkeypatch.setattr(plots, "_save", close)


@pytest.fixture(scope="module")
def cli_figures(tmp_path_factory):
    """`xenobench plot` on the fixture, labelled as the thesis testbed (the fixture holds
    hardware-scale numbers: the published values and the line rate are overlaid): every figure
    written once for the module."""
    out = tmp_path_factory.mktemp("fig")
    p = subprocess.run([sys.executable, "-m", "xenobench", "plot", str(FIXTURES), "--out", str(out), "--testbed", "fips"],
                       capture_output=True, text=True)
    return out, p


@pytest.fixture(scope="module")
def fixture_figures(tmp_path_factory):
    """The series plot_all returns for the fixture, labelled as the thesis testbed."""
    with pytest.MonkeyPatch.context() as mp:
        _drawn_not_written(mp)
        return plot_all(FIXTURES, tmp_path_factory.mktemp("unwritten"), "fips", progress=lambda m: None)


def test_fixture_figures_exist(cli_figures):
    out, p = cli_figures
    assert p.returncode == 0, p.stderr
    for n in NAMES:
        assert (out / f"{n}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", n
        assert (out / f"{n}.pdf").read_bytes()[:5] == b"%PDF-", n
        assert (out / f"{n}.png").stat().st_size > 10_000, n


def test_fixture_draws_every_figure(fixture_figures):
    assert sorted(fixture_figures) == sorted(NAMES)


def test_fixture_pps_and_bandwidth_series(fixture_figures):
    s = fixture_figures
    pps = s["pps_vs_payload"]
    assert pps["xenoflow"].to_dict() == pytest.approx({2: 97.0, 22: 96.9, 24: 92.9, 64: 92.8, 1024: 11.1})
    assert pps["ebpf"][22] == pytest.approx(30.0)
    assert pps["line_rate"][64] == pytest.approx(line_rate_pps(64) / 1e6)
    assert pps["published"] == {"pps_small_payload_mpps": 96.7, "pps_large_payload_mpps": 92.8}
    bw = s["bandwidth_vs_payload"]
    assert bw["l2"]["ebpf"][1024] == pytest.approx(11e6 * 1066 * 8 / 1e9)  # the paper's formula
    assert bw["l1"]["ebpf"][1024] == pytest.approx(11e6 * 1090 * 8 / 1e9)  # on the wire
    assert bw["published_line_rate_above_payload"] == 1024


def test_fixture_loss_rtt_and_comparison_series(fixture_figures):
    s = fixture_figures
    assert s["loss_vs_load"]["xenoflow"].to_dict() == {50.0: -0.1, 90.0: -0.1, 95.0: 0.0, 97.0: 0.3,
                                                      100.0: pytest.approx(3.1), 120.0: 19.2}
    assert s["loss_vs_load"]["published_onset"] == {"paper": 96.7, "thesis": 95.0}
    # medians come from rtt_summary (interpolated in pcap_rtt), not from the samples (11, 16)
    r = s["rtt_lb_vs_none"]
    assert (r["none"], r["xenoflow"]) == (11.1, 16.2)
    assert r["published"] == pytest.approx({"xenoflow": 23.1, "none": 17.9, "ebpf": 17.9 + 9.3})
    assert s["rtt_under_load"]["worst"].to_dict() == {0.0: 15, 50.0: 16}
    assert s["rtt_under_load"]["single"].to_dict() == {0.0: 15, 50.0: 17}
    c = s["lb_comparison"]
    # compare.csv (a live max-rate trial) overrides the pps-derived 64 B frame value
    assert c["measured"] == pytest.approx({"xenoflow": 96.0, "ebpf": 30.5, "xenoflow @24 B payload": 92.9})
    assert c["prog_ns"] == {"ebpf": 41.5}  # the program-time row is a label, never a rate
    assert c["published"] == {"xenoflow": 92.8, "katran": 38.0, "kakao-loopback": 35.5, "kakao-255": 28.0}


def test_rtt_medians_fall_back_to_samples(tmp_path):
    d = tmp_path / "res"
    d.mkdir()
    shutil.copy(FIXTURES / "rtt_samples.csv", d)
    s = rtt_lb_vs_none(d, tmp_path / "f", "fx")
    assert (s["none"], s["xenoflow"]) == (11.0, 16.0)


def test_missing_kind_is_skipped_with_reason(tmp_path, monkeypatch):
    d = tmp_path / "only_pps"
    d.mkdir()
    shutil.copy(FIXTURES / "pps.csv", d)
    _drawn_not_written(monkeypatch, written=("loss_vs_load",))  # the skipped one would be written if drawn
    msgs = []
    done = plot_all(d, tmp_path / "f", "x", progress=msgs.append)
    assert set(done) == {"pps_vs_payload", "bandwidth_vs_payload", "lb_comparison"}
    assert any(m.startswith("loss_vs_load: skipped (Failed to read tidy results") for m in msgs)
    assert not (tmp_path / "f" / "loss_vs_load.png").exists()


def test_local_testbed_figures_carry_no_published_overlay(tmp_path, monkeypatch):
    """A namespace testbed's rates are ~1000x below the published ones: no published values or
    100 Gbit/s line rate on its figures (they would flatten the measured curves to zero)."""
    _drawn_not_written(monkeypatch)
    s = plot_all(FIXTURES, tmp_path, "local", progress=lambda m: None)
    assert s["pps_vs_payload"]["published"] == {}
    assert s["lb_comparison"]["published"] == {}
    assert s["rtt_lb_vs_none"]["published"] == {}
    assert s["loss_vs_load"]["published_onset"] == {}
    assert s["pps_vs_payload"]["xenoflow"][22] == pytest.approx(96.9)  # the measurements stay


def test_small_rates_keep_their_levels_and_labels_inside_the_figure(tmp_path, monkeypatch):
    """A namespace testbed's sweep lies below 0.2 Mpps: its loss levels must not collapse into
    0.1 Mpps bins, and bar labels must not stretch the figure (they were placed 1 Mpps above)."""
    import matplotlib.image as mpimg
    import pandas as pd
    from xenobench.results import read_tidy, write_tidy
    d = tmp_path / "local"
    for kind, scale in (("loss", 1e-3), ("pps", 1e-3)):
        df = read_tidy(FIXTURES, kind)
        for c in ("offered_pps", "measured_pps"):
            df[c] = df[c] * scale
        if kind == "pps":
            df.loc[df.metric == "rx_pps", "value"] *= scale
        write_tidy(kind, df, d)
    _drawn_not_written(monkeypatch, written=("lb_comparison",))
    s = plot_all(d, tmp_path / "f", "local", progress=lambda m: None)
    loss_fixture = read_tidy(FIXTURES, "loss")
    levels = loss_fixture[loss_fixture.metric == "loss_pct"].offered_pps.mul(1e-3 / 1e6).round(4).nunique()
    assert len(s["loss_vs_load"]["xenoflow"]) == levels > 2
    h, w = mpimg.imread(tmp_path / "f" / "lb_comparison.png").shape[:2]
    assert h < 1.2 * w, (h, w)
    assert pd.notna(s["lb_comparison"]["measured"]["xenoflow"])


def test_placeholder_names_the_missing_data(tmp_path, monkeypatch):
    d = tmp_path / "only_pps"
    d.mkdir()
    shutil.copy(FIXTURES / "pps.csv", d)
    _drawn_not_written(monkeypatch, written=("loss_vs_load",))
    msgs = []
    done = plot_all(d, tmp_path / "f", "local", progress=msgs.append, placeholders=True)
    assert "loss_vs_load" not in done and (tmp_path / "f" / "loss_vs_load.png").stat().st_size > 1000
    assert any(m.startswith("loss_vs_load: no data, placeholder written (Failed to read tidy results") for m in msgs)


@needs_thesis
def test_thesis_figures_show_the_published_shape(thesis_tidy, tmp_path):
    s = plot_all(thesis_tidy, tmp_path, "thesis", progress=lambda m: None)
    x = s["pps_vs_payload"]["xenoflow"]
    assert all(abs(x[p] - 96.7) < 0.5 for p in x.index if p < 23)      # ≈ 96.7 Mpps below 23 B
    assert all(abs(x[p] - 92.8) < 0.3 for p in x.index if 23 <= p <= 64)  # ≈ 92.8 Mpps from 24 B
    lr = s["pps_vs_payload"]["line_rate"]
    assert all(x[p] >= 0.95 * lr[p] for p in x.index if p >= 64)      # network-bound from 64 B
    assert all(x[p] < 0.9 * lr[p] for p in x.index if p < 64)
    loss = s["loss_vs_load"]["xenoflow"]
    assert (loss[loss.index < 95.6].abs() < 0.3).all() and loss[loss.index > 97].min() > 0.5
    r = s["rtt_lb_vs_none"]
    assert r["xenoflow"] - r["none"] == pytest.approx(5.2, abs=0.1)
    assert set(s["rtt_under_load"]) == {"single", "worst", "50/50", "30/70"}
    for split, med in s["rtt_under_load"].items():   # flat: within 5 µs of each other, 0-90 Mpps
        assert med.max() - med.min() < 5, split
    assert s["lb_comparison"]["measured"]["xenoflow @24 B payload"] == pytest.approx(92.8, abs=0.3)
    assert s["bandwidth_vs_payload"]["l2"]["xenoflow"][1024] < 100  # line rate not reached at 1024 B


def test_cli_plot(cli_figures):
    out, p = cli_figures
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.strip().strip("[]").replace('"', "").split(", ")) == sorted(NAMES)
    assert (out / "lb_comparison.pdf").stat().st_size > 1000


def test_rtt_under_load_draws_the_level_without_background_on_every_split(tmp_path):
    """rtt_load measures level 0 once (split "none", xenobench.experiments.points): that point is
    the origin of each split's line, not a line of its own."""
    from xenobench.plots import rtt_under_load
    d = tmp_path / "res"
    d.mkdir()
    head = ("testbed,experiment,point,lb,server,payload_bytes,frame_bytes,offered_pps,measured_pps,repetition,split,"
            "background_pps,metric,value,unit,source\n")
    rows = [("none", 0, 15), ("single", 100000, 17), ("worst", 100000, 16), ("worst", 250000, 19)]
    (d / "rtt_summary.csv").write_text(head + "".join(
        f"fx,rtt_load,level_pps-{bg}_split-{sp},xenoflow,xdp,,,,,1,{sp},{bg},rtt_{k}_us,{v + dv},us,fixture\n"
        for sp, bg, v in rows for k, dv in (("median", 0), ("p25", -1), ("p75", 1))))
    s = rtt_under_load(d, tmp_path / "f", "fx")
    assert set(s) == {"single", "worst"}
    assert s["single"].to_dict() == {0.0: 15, 0.1: 17}
    assert s["worst"].to_dict() == {0.0: 15, 0.1: 16, 0.25: 19}
