"""Figures from small fixture CSVs and from the thesis data: files exist, plotted series are right."""

import subprocess
import sys

import pandas as pd
import pytest

from xenobench.plots import plot_all
from xenobench.results import COLUMNS, line_rate_pps, row, write_tidy

from .test_ingest_compare import needs_thesis, thesis_tidy  # noqa: F401  (module fixture)

NAMES = ["pps_vs_payload", "bandwidth_vs_payload", "loss_vs_load", "rtt_lb_vs_none", "rtt_under_load",
         "lb_comparison"]


@pytest.fixture
def fixture_results(tmp_path):
    """Twelve hand-made rows per kind (written by this fixture, no external file)."""
    d = tmp_path / "res"
    write_tidy("pps", [row(testbed="fx", lb=lb, payload_bytes=p, repetition=r, metric="rx_pps",
                           value=v * 1e6 + r, unit="packets/s")
                       for lb, base in (("xenoflow", 10), ("ebpf", 8))
                       for p, v in ((2, base), (64, base - 1), (1024, base - 5)) for r in (1, 2)], d)
    write_tidy("loss", [row(testbed="fx", lb="xenoflow", payload_bytes=22, offered_pps=o * 1e6, repetition=1,
                            metric="loss_pct", value=l, unit="%") for o, l in ((1, 0.0), (2, 0.0), (3, 12.5))], d)
    write_tidy("rtt_samples", [row(testbed="fx", lb=lb, repetition=1, metric="rtt_us", value=v, unit="us")
                               for lb, vs in (("none", (10, 11, 12)), ("xenoflow", (14, 15, 16, 17, 18)))
                               for v in vs], d)
    write_tidy("rtt_summary", [row(testbed="fx", lb="xenoflow", repetition=1, split=s, background_pps=b,
                                   metric="rtt_median_us", value=v, unit="us")
                               for s, b, v in (("single", 0, 15), ("single", 1e5, 17), ("worst", 0, 15),
                                               ("worst", 1e5, 16))], d)
    return d


def test_fixture_figures_and_series(fixture_results, tmp_path):
    out = tmp_path / "fig"
    s = plot_all(fixture_results, out, "fx", progress=lambda m: None)
    for n in NAMES:
        for ext in ("png", "pdf"):
            assert (out / f"{n}.{ext}").stat().st_size > 1000, (n, ext)
    assert s["pps_vs_payload"]["xenoflow"][2] == pytest.approx(10e6 / 1e6 + 1.5e-6)
    assert s["pps_vs_payload"]["line_rate"][64] == pytest.approx(line_rate_pps(64) / 1e6)
    assert s["bandwidth_vs_payload"]["ebpf"][1024] == pytest.approx(3e6 * (1024 + 66) * 8 / 1e9, rel=1e-5)
    assert list(s["loss_vs_load"]["xenoflow"].values) == [0.0, 0.0, 12.5]
    assert s["rtt_lb_vs_none"] == {"none": 11.0, "xenoflow": 16.0}
    assert s["rtt_under_load"]["worst"].to_dict() == {0.0: 15, 0.1: 16}
    assert s["lb_comparison"]["measured"] == pytest.approx({"ebpf": 7.0000015, "xenoflow": 9.0000015})
    assert s["lb_comparison"]["published"]["katran"] == 38


def test_missing_kind_is_skipped_with_reason(tmp_path):
    d = tmp_path / "only_pps"
    write_tidy("pps", [row(testbed="x", lb="xenoflow", payload_bytes=22, metric="rx_pps", value=1.0, unit="p")], d)
    msgs = []
    done = plot_all(d, tmp_path / "f", "x", progress=msgs.append)
    assert "pps_vs_payload" in done and "loss_vs_load" not in done
    assert any(m.startswith("loss_vs_load: skipped (Failed to read tidy results") for m in msgs)


@needs_thesis
def test_thesis_figures_show_the_published_shape(thesis_tidy, tmp_path):
    s = plot_all(thesis_tidy, tmp_path, "thesis", progress=lambda m: None)
    x = s["pps_vs_payload"]["xenoflow"]
    assert abs(x[22] - 96.7) < 0.5 and abs(x[24] - 92.8) < 0.3
    assert s["rtt_lb_vs_none"]["xenoflow"] - s["rtt_lb_vs_none"]["none"] == pytest.approx(5.0, abs=0.5)
    assert set(s["rtt_under_load"]) == {"single", "worst", "50/50", "30/70"}


def test_cli_plot(fixture_results, tmp_path):
    p = subprocess.run([sys.executable, "-m", "xenobench", "plot", str(fixture_results), "--out", str(tmp_path / "f")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "f" / "lb_comparison.pdf").exists()
