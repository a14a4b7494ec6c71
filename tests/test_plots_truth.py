"""The figures show what their printed numbers and captions say, read back from the matplotlib
artists of figures drawn from small fixture tables (written here with xenobench.results.row):
rtt_lb_vs_none's median line is the printed median, its labels apart; lb_comparison's caption
names the design its rows came from; a load axis starts at 0; no caption doubles a word; and
plot_all names every figure it does not draw."""

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from xenobench import plots
from xenobench.lb import LBS
from xenobench.results import row, write_tidy

from .test_plots_layout import figures, overlapping_texts  # noqa: F401  (fixture)

WIRE = next(k for k, v in LBS.items() if v.reference)
SMALL = Path(__file__).parent / "fixtures" / "results" / "small"


def write(d, **tables):
    for kind, rows in tables.items():
        write_tidy(kind, rows, d, how="tests/test_plots_truth.py fixture")
    return d


# --- rtt_lb_vs_none: the drawn median is the printed one ---------------------------------------------

#: per path two repetitions of six probes (µs) and the repetition's median as the summary has it
#: (interpolated inside the capture's bins: not the probes' median); the median of the repetitions'
#: medians lies away from the pooled probes' median, as in a run whose repetitions differ
RTT = {"none": (([5, 6, 7, 8, 9, 10], 7.4), ([10, 11, 12, 13, 14, 15], 12.8)),
       "katran": (([9, 9, 10, 10, 11, 11], 10.2), ([14, 15, 16, 17, 18, 19], 16.6)),
       WIRE: (([6, 7, 7, 8, 8, 9], 7.6), ([7, 7, 8, 8, 9, 9], 8.2)),
       "xenoflow": (([6, 6, 7, 7, 8, 8], 7.0), ([8, 9, 9, 10, 10, 11], 9.4))}


def rtt_tables() -> dict:
    samples, summary = [], []
    for lb, reps in RTT.items():
        for rep, (probes, med) in enumerate(reps, 1):
            common = dict(testbed="fx", experiment="rtt", point="server-xdp", lb=lb, server="xdp", repetition=rep)
            samples += [row(**common, metric="rtt_us", value=float(v), unit="us", source=f"fixture:{i}")
                        for i, v in enumerate(probes)]
            summary.append(row(**common, metric="rtt_median_us", value=med, unit="us", source="fixture"))
    return {"rtt_samples": samples, "rtt_summary": summary}


def median_lines(ax) -> dict[int, float]:
    """The boxes' median lines (bxp's medianprops colour), by the box's position: their y."""
    out = {}
    for ln in ax.lines:
        x, y = ln.get_xdata(), ln.get_ydata()
        if ln.get_color() == plots.COLORS[1] and len(x) == 2 and y[0] == y[1]:
            out[round((x[0] + x[1]) / 2)] = float(y[0])
    return out


def test_rtt_box_median_line_is_the_printed_median_and_labels_stay_apart(tmp_path, figures):  # noqa: F811
    d = write(tmp_path / "r", **rtt_tables())
    s = plots.rtt_lb_vs_none(d, tmp_path / "f", "fx")
    fig = figures["rtt_lb_vs_none"]
    ax = fig.axes[0]
    fig.draw_without_rendering()
    lines = median_lines(ax)
    printed = {round(t.xy[0] - 0.27): (t.xy[1], t.get_text()) for t in ax.texts}
    order = ["none", "katran", WIRE, "xenoflow"]  # no LB first, then by name
    assert sorted(lines) == sorted(printed) == [0, 1, 2, 3]
    for i, lb in enumerate(order):
        study = (RTT[lb][0][1] + RTT[lb][1][1]) / 2  # the median of the two repetitions' medians
        assert lines[i] == pytest.approx(study), lb
        assert printed[i][0] == lines[i] and float(printed[i][1]) == pytest.approx(lines[i], abs=0.05), lb
        assert s[lb] == pytest.approx(study), lb
    r = fig.canvas.get_renderer()
    ticks = [t.get_window_extent(r) for t in ax.get_xticklabels() if t.get_text()]
    assert len(ticks) == 4
    assert [(a.x1 <= b.x0) for a, b in zip(ticks, ticks[1:])] == [True] * 3, [(b.x0 - a.x1) for a, b in
                                                                             zip(ticks, ticks[1:])]
    assert overlapping_texts(fig) == []


def test_rtt_boxes_take_the_probes_median_without_a_summary(tmp_path):
    d = write(tmp_path / "r", rtt_samples=rtt_tables()["rtt_samples"])
    s = plots.rtt_lb_vs_none(d, tmp_path / "f", "fx")
    assert s["none"] == 10.0 and s["katran"] == 12.5  # the pooled probes' medians


# --- lb_comparison: the caption names the design of its rows ------------------------------------------

def rate_rows(paired: bool) -> list[dict]:
    """rx_pps of the wire and of eBPF above it, two repetitions: paired, one point whose repetitions
    hold both LBs (interleaved blocks of one trial); separate, a point per LB (a trial of its own)."""
    out = []
    for lb, vals in ((WIRE, (1.00e5, 1.02e5)), ("ebpf", (1.05e5, 1.06e5))):
        for rep, v in enumerate(vals, 1):
            out.append(row(testbed="fx", experiment="pps", point="payload-22" if paired else f"lb-{lb}_payload-22",
                           lb=lb, generator="xdpgen", payload_bytes=22, repetition=rep, measured_pps=v, metric="rx_pps",
                           value=v, unit="packets/s", source="fixture"))
    return out


@pytest.mark.parametrize("paired", [True, False])
def test_lb_comparison_caption_names_the_design_of_its_rows(tmp_path, figures, paired):  # noqa: F811
    d = write(tmp_path / "r", pps=rate_rows(paired))
    s = plots.lb_comparison(d, tmp_path / "f", "local")
    assert s["above_reference"] == ["ebpf"]
    fig = figures["lb_comparison"]
    caption = " ".join(t.get_text() for t in fig.texts)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    head = f"eBPF/XDP LB measured above {WIRE} (no-op, the reference): "
    if paired:
        assert head + "the LBs alternated in blocks of the same trials (the interleaved design)" in caption
        assert "minutes apart" not in caption and "trials of its own" not in caption
        assert f"{WIRE} (no-op, the reference): measured in blocks of the same trials as the LBs" in legend
    else:
        assert head + "each LB was measured in trials of its own, minutes apart" in caption
        assert "interleaved" not in caption
        assert f"{WIRE} (no-op, the reference): measured in trials of its own" in legend


def test_interleaved_reads_the_design_from_the_rows():
    import pandas as pd
    assert plots.interleaved(pd.DataFrame(rate_rows(True)))
    assert not plots.interleaved(pd.DataFrame(rate_rows(False)))


# --- rtt_under_load: the load axis starts at 0 -----------------------------------------------------------

@pytest.mark.parametrize("levels", [[("none", 0.0), ("single", 8e5)], [("single", 8e5)]])
def test_rtt_under_load_axis_never_below_zero(tmp_path, figures, levels):  # noqa: F811
    """One load point (with and without the level-0 origin): the margin once put the axis at -0.04 Mpps."""
    rows = [row(testbed="fx", experiment="rtt_load", point=f"level-{bg:g}_split-{sp}", lb="xenoflow", server="xdp",
                repetition=1, split=sp, background_pps=bg, metric=f"rtt_{k}_us", value=15.0 + dv, unit="us",
                source="fixture")
            for sp, bg in levels for k, dv in (("median", 0), ("p25", -1), ("p75", 1))]
    d = write(tmp_path / "r", rtt_summary=rows)
    plots.rtt_under_load(d, tmp_path / "f", "fx")
    ax = figures["rtt_under_load"].axes[0]
    lo, hi = ax.get_xlim()
    assert lo >= 0 and hi >= 0.8, (lo, hi)
    drawn = [x for ln in ax.lines for x in ln.get_xdata()]
    assert sorted(drawn) == sorted(bg / 1e6 for _, bg in levels)  # the origin at 0 itself, not shifted below
    assert all(lo <= x <= hi for x in drawn)


# --- captions: no doubled word ---------------------------------------------------------------------------

DOUBLED = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)


def test_no_figure_caption_of_any_definition_doubles_a_word(tmp_path):
    """Every report caption (report/*figure.rst, rendered as `snakemake --report` does, over every
    experiment definition listing the figure) reads without a doubled word ("thesis thesis ch. 8")."""
    jinja2 = pytest.importorskip("jinja2")
    from xenobench.report import RunSummary
    summary = RunSummary(tmp_path / "fx")
    config = {"xenobench_report": summary, "testbed": {"name": "fx"}}
    root = Path(__file__).parent.parent / "report"
    checked = 0
    for template, names in (("figure", list(plots.drawn_by())), ("thesis_figure", list(plots.THESIS_FIGURES))):
        body = jinja2.Template((root / f"{template}.rst").read_text())
        for name in names:
            text = body.render(snakemake={"config": config}, figure=name)
            assert DOUBLED.search(text) is None, (template, name, DOUBLED.search(text).group(0), text)
            checked += 1
    assert checked == len(plots.drawn_by()) + len(plots.THESIS_FIGURES)


def test_no_drawn_caption_doubles_a_word(tmp_path, figures):  # noqa: F811
    for testbed in ("fips", "local", "rehearsal"):
        plots.plot_all(SMALL, tmp_path, testbed, progress=lambda m: None)
        for name, fig in figures.items():
            for t in fig.texts + [a.title for a in fig.axes]:
                assert DOUBLED.search(t.get_text()) is None, (testbed, name, t.get_text())
            plt.close(fig)
        figures.clear()


# --- plot_all names every figure it does not draw ----------------------------------------------------------

def test_plot_all_names_every_figure_it_does_not_draw_in_one_line(tmp_path, figures, monkeypatch):  # noqa: F811
    """Tables whose rows draw nothing (ratio rows without a CI, paired RTT rows without a
    difference) and a figure no definition lists: each said, one line each, none written silently."""
    monkeypatch.setitem(plots.FIGURES, "unlisted_figure", plots.pps_vs_payload)
    half = dict(testbed="fx", point="payload-22", lb="ebpf", payload_bytes=22, source="fixture")
    d = write(tmp_path / "r", rate_ranking=[row(**half, experiment="rank", metric=f"rate_vs_{WIRE}_median", value=1.0,
                                               unit="ratio")],
              rtt_paired=[row(testbed="fx", experiment="rtt", point="server-xdp", lb="ebpf", server="xdp",
                              metric="rtt_vs_none_median_us", value=1.0, unit="us", source="fixture")])
    msgs = []
    done = plots.plot_all(d, tmp_path / "f", "fx", progress=msgs.append)
    assert done == {} and figures == {}
    assert sorted(m.split(":", 1)[0] for m in msgs) == sorted(plots.FIGURES)
    assert all("\n" not in m for m in msgs)
    said = {m.split(":", 1)[0]: m for m in msgs}
    assert said["unlisted_figure"] == "unlisted_figure: not drawn (no experiments/<id>.yaml lists it under `figures`)"
    assert said["rate_ranking"] == (f"rate_ranking: skipped (Failed to plot rate_ranking: its rows in {d} hold no "
                                    "complete ratio (rate_vs_<ref>_median, _ci_low, _ci_high, _rounds); regenerate the "
                                    f"tables with `xenobench experiment aggregate {d}`)")
    assert said["rtt_added"].startswith(f"rtt_added: skipped (Failed to plot rtt_added: the rtt_paired rows in {d} "
                                        "hold no complete paired difference")
