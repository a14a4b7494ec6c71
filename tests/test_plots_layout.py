"""The figures' layout over the sizes a run makes (1-6 LBs, 1-20 points), checked on the matplotlib
objects: tick labels present, no two text labels' window extents overlapping, the legend covering no
plotted point; and what the figures say: loss per nominal rate with its true run count, the paired
design's ratios with their CIs (rows made by xenobench.measure.rank.rank_rows, the producer's own
code), the reference named the reference, a rehearsal lab's caption, placeholders that name why."""

import json

import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Text

from xenobench import plots
from xenobench.lb import LBS
from xenobench.measure.latency import paired_rows
from xenobench.measure.rank import rank_rows
from xenobench.results import row, write_tidy

WIRE = next(k for k, v in LBS.items() if v.reference)
NAMES = [k for k, v in LBS.items() if not v.reference] + ["lb-five", "lb-six"]  # beyond the built-in kinds
PAYLOADS = [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 48, 64, 128, 256]


def lbs_of(n: int, with_reference: bool = True) -> list[str]:
    """n LBs: the reference first (where asked), then the others."""
    return ([WIRE] if with_reference else [])[:n] + NAMES[: n - (1 if with_reference else 0)]


@pytest.fixture
def figures(monkeypatch):
    """The figures the functions draw, kept open (captions placed as when saved, nothing written)."""
    kept = {}

    def keep(fig, outdir, name, resdir=None):
        plots._finish(fig, name, resdir)
        kept[name] = fig

    monkeypatch.setattr(plots, "_save", keep)
    yield kept
    import matplotlib.pyplot as plt
    for f in kept.values():
        plt.close(f)


# --- fixture tables --------------------------------------------------------------------------------

def pps_rows(lbs, payloads, reps=3, paired=False, seed=1, experiment="pps") -> list[dict]:
    """rx_pps per LB, payload and repetition; with paired=True also the point rows rank_rows makes
    (the ratio of each LB's per-round rate to the reference's)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in payloads:
        blocks = []
        for r in range(1, reps + 1):
            for i, lb in enumerate(lbs):
                rounds = [1e5 * (1 - 0.05 * i) * (1 + 0.01 * rng.standard_normal()) for _ in range(4)]
                blocks += [(r, k + 1, lb, v) for k, v in enumerate(rounds)]
                out.append(row(testbed="fx", experiment=experiment, point=f"payload-{p}" if paired else f"lb-{lb}_payload-{p}",
                               lb=lb, generator="xdpgen", payload_bytes=p, repetition=r, measured_pps=float(np.median(rounds)),
                               metric="rx_pps", value=float(np.median(rounds)), unit="packets/s", source="fixture"))
        if paired and len(lbs) > 1:
            common = dict(testbed="fx", experiment=experiment, point=f"payload-{p}", generator="xdpgen",
                          payload_bytes=p, source="fixture")
            out += rank_rows(blocks, lbs, WIRE, common, 200, 7)
    return out


def loss_rows(lbs, rates, reps=3, seed=2) -> list[dict]:
    """loss_pct per LB, nominal rate and repetition; repetitions of one rate offer slightly
    different rates (as a generator does), and the nominal rate is its own row."""
    rng = np.random.default_rng(seed)
    out = []
    for lb in lbs:
        for k, rate in enumerate(rates):
            for r in range(1, reps + 1):
                off = rate * (1 + 0.003 * rng.standard_normal())
                pt = f"lb-{lb}_rate_pps-{int(rate)}"
                loss = max(0.0, (k - len(rates) / 2)) + 0.05 * rng.standard_normal()
                out.append(row(testbed="fx", experiment="loss", point=pt, lb=lb, payload_bytes=22, offered_pps=off,
                               measured_pps=off * (1 - loss / 100), repetition=r, metric="loss_pct", value=loss,
                               unit="%", source="fixture"))
                out.append(row(testbed="fx", experiment="loss", point=pt, lb=lb, payload_bytes=22, offered_pps=off,
                               repetition=r, metric="nominal_offered_pps", value=rate, unit="packets/s", source="fixture"))
    return out


def paired_loss_rows(ratios: dict, rates, reps=3) -> list[dict]:
    """The paired loss design's rows: per nominal rate each LB's loss and nominal rate per repetition
    (the reference among them), and rank_rows' ratio of each LB's per-round delivered rate to the
    reference's; `ratios`: {lb: {rate: ratio}}, every round at that ratio."""
    lbs = [WIRE, *ratios]
    out = []
    for rate in rates:
        pt = f"rate_pps-{int(rate)}"
        blocks = [(r, k, lb, rate * (1.0 if lb == WIRE else ratios[lb][rate])) for r in range(1, reps + 1)
                  for k in (1, 2, 3) for lb in lbs]
        for r in range(1, reps + 1):
            for lb in lbs:
                got = rate * (1.0 if lb == WIRE else ratios[lb][rate])
                out += [row(testbed="fx", experiment="loss", point=pt, lb=lb, payload_bytes=22, offered_pps=rate,
                            measured_pps=got, repetition=r, metric="loss_pct", value=100 * (1 - got / rate), unit="%",
                            source="fixture"),
                        row(testbed="fx", experiment="loss", point=pt, lb=lb, payload_bytes=22, offered_pps=rate,
                            repetition=r, metric="nominal_offered_pps", value=rate, unit="packets/s", source="fixture")]
        out += rank_rows(blocks, lbs, WIRE, dict(testbed="fx", experiment="loss", point=pt, payload_bytes=22,
                                                 source="fixture"), 200, 7)
    return out


def test_paired_loss_draws_each_lbs_delivered_rate_relative_to_the_reference(tmp_path, figures):
    """Below the LB's limit both deliver the offered rate (ratio 1: not distinguishable); above it
    the LB delivers 0.8 of what the reference does at the same rate, in the same rounds."""
    rates = [1e5, 2e5, 4e5]
    d = write(tmp_path / "r", loss=paired_loss_rows({"xenoflow": {1e5: 1.0, 2e5: 1.0, 4e5: 0.8}}, rates))
    s = plots.loss_vs_load(d, tmp_path / "f", "local")
    assert s["reference"] == WIRE and list(s["ratios"]) == ["xenoflow"]
    got = s["ratios"]["xenoflow"]
    assert list(got) == rates
    assert [got[r]["median"] for r in rates] == pytest.approx([1.0, 1.0, 0.8])
    assert [got[r]["verdict"] for r in rates] == ["not distinguishable", "not distinguishable", "slower"]
    ax = figures["loss_vs_load"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["100", "200", "400"]
    assert ax.get_xlabel() == "nominal offered load (kpps, the rate requested of the generator, paced)"
    caption = " ".join(t.get_text() for t in figures["loss_vs_load"].texts)
    assert "below 1 the LB lost frames the reference did not at that rate" in caption
    assert "nor each LB's own loss, which holds the machine's (loss_pct in the CSV)" in caption
    check_layout(figures["loss_vs_load"], "loss_vs_load (ratios)")


def rtt_rows(lbs, n=40, seed=3) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [row(testbed="fx", experiment="rtt", point=f"lb-{lb}", lb=lb, server="xdp", repetition=1, metric="rtt_us",
                value=float(15 + 2 * i + rng.gamma(2.0)), unit="us", source=f"fixture:{j}")
            for i, lb in enumerate(lbs) for j in range(n)]


def write(d, **tables):
    for kind, rows in tables.items():
        write_tidy(kind, rows, d, how="tests/test_plots_layout.py fixture")
    return d


# --- layout checks ---------------------------------------------------------------------------------

def _visible_ticklabels(axis) -> list[Text]:
    """The tick labels drawn: inside the view, with text (minor ones too: a log axis spanning less
    than a decade labels its minor ticks)."""
    lo, hi = sorted(axis.get_view_interval())
    span = (hi - lo) or 1.0
    pairs = list(zip(axis.get_majorticklocs(), axis.get_majorticklabels()))
    pairs += list(zip(axis.get_minorticklocs(), axis.get_minorticklabels()))
    return [t for loc, t in pairs if t.get_visible() and t.get_text() and lo - 1e-9 * span <= loc <= hi + 1e-9 * span]


def text_boxes(fig) -> list[tuple[str, object]]:
    """Every text the figure shows, with its window extent; a legend as one box."""
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        items = _visible_ticklabels(ax.xaxis) + _visible_ticklabels(ax.yaxis)
        items += [t for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_text()]
        items += [t for t in ax.texts if t.get_visible() and t.get_text()]
        out += [(f"{ax.get_label() or 'axes'}: {t.get_text()!r}", t.get_window_extent(r)) for t in items]
        if ax.get_legend() is not None:
            out.append((f"legend of {ax.get_title()!r}", ax.get_legend().get_window_extent(r)))
    out += [(f"figure text {t.get_text()[:40]!r}", t.get_window_extent(r)) for t in fig.texts if t.get_text()]
    return out


def overlapping_texts(fig) -> list[str]:
    boxes = text_boxes(fig)
    bad = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            if ba.width and bb.width and ba.overlaps(bb) and ba.intersection(ba, bb).width > 0.5 \
                    and ba.intersection(ba, bb).height > 0.5:
                bad.append(f"{a} overlaps {b}")
    return bad


def points_under_legend(fig) -> list[str]:
    """Plotted data points (lines' vertices in data coordinates, scatter offsets) inside a legend."""
    r = fig.canvas.get_renderer()
    bad = []
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        box = leg.get_window_extent(r)
        pts = []
        for a in fig.axes:
            drawn = []  # points outside their axes are clipped away: not drawn, not covered
            for ln in a.lines:
                if ln.get_transform() == a.transData and len(ln.get_xydata()):
                    drawn += list(a.transData.transform(ln.get_xydata()))
            for c in a.collections:
                off = c.get_offsets()
                if len(off) and c.get_offset_transform() == a.transData:
                    drawn += list(a.transData.transform(off))
            pts += [p for p in drawn if np.all(np.isfinite(p)) and a.bbox.contains(*p)]
        bad += [f"point at {p} under the legend of {ax.get_title()!r}" for p in pts
                if np.all(np.isfinite(p)) and box.contains(*p)]
    return bad


def check_layout(fig, name):
    # the layout as a draw places it (legend "best" spot, captions, text extents), without rasterising
    # the pixels: the checks read positions only
    fig.draw_without_rendering()
    data_axes = [a for a in fig.axes if a.get_visible() and (a.lines or a.collections or a.patches)]
    assert data_axes, name
    for a in data_axes:
        assert _visible_ticklabels(a.xaxis), f"{name}: no x tick label on {a.get_title()!r}"
        assert _visible_ticklabels(a.yaxis), f"{name}: no y tick label on {a.get_title()!r}"
    assert overlapping_texts(fig) == [], name
    assert points_under_legend(fig) == [], name


SIZES = [(1, 1), (1, 20), (2, 2), (3, 7), (4, 20), (5, 3), (6, 1), (6, 20)]


@pytest.mark.parametrize("n_lbs,n_points", SIZES)
def test_rate_figures_hold_their_layout(tmp_path, figures, n_lbs, n_points):
    lbs = lbs_of(n_lbs)
    d = write(tmp_path / "r", pps=pps_rows(lbs, PAYLOADS[:n_points]), compare=[
        dict(r, experiment="compare", point=f"lb-{r['lb']}", metric="max_pps") for r in pps_rows(lbs, [22], seed=5)],
        loss=loss_rows(lbs, [1e4 * (k + 1) for k in range(n_points)]))
    for name in ("pps_vs_payload", "bandwidth_vs_payload", "loss_vs_load", "lb_comparison"):
        plots.FIGURES[name](d, tmp_path / "f", "local")
        check_layout(figures[name], f"{name} with {n_lbs} LBs, {n_points} points")


@pytest.mark.parametrize("n_lbs,n_points", [(2, 1), (3, 20), (6, 7)])
def test_ratio_figures_hold_their_layout(tmp_path, figures, n_lbs, n_points):
    lbs = lbs_of(n_lbs)
    d = write(tmp_path / "r", pps=pps_rows(lbs, PAYLOADS[:n_points], paired=True),
              compare=pps_rows(lbs, [22], paired=True, experiment="compare"))
    for name in ("pps_vs_payload", "lb_comparison", "bandwidth_vs_payload"):
        plots.FIGURES[name](d, tmp_path / "f", "local")
        check_layout(figures[name], f"{name} (ratios) with {n_lbs} LBs, {n_points} points")


def rtt_paired_rows(n_load: int, lbs=("none", "xenoflow"), seed=4) -> list[dict]:
    """rtt_paired rows (made by the producer, xenobench.measure.latency.paired_rows) of rtt's idle
    point and of n_load rtt_load points: the level-0 origin, then splits in turn at backgrounds with
    as many digits as a run's shares of a measured capacity have."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n_load + 1):
        blocks = [(rep, rnd, lb, 9 + 2 * i + k / 4 + rng.gamma(2.0)) for rep in (1, 2, 3) for rnd in (1, 2)
                  for i, lb in enumerate(lbs)]
        if k == 0:
            common = dict(testbed="fx", experiment="rtt", point="server-xdp", server="xdp", source="fixture")
        else:
            split = "none" if k == 1 else ("single", "50/50", "70/30", "worst")[k % 4]
            bg = 0.0 if k == 1 else 1.8e6 * (0.5 + 0.4 * k / (n_load + 1)) * (1 + 1e-5 * k) + 0.37
            common = dict(testbed="fx", experiment="rtt_load", point=f"p{k}", server="xdp", split=split,
                          background_pps=bg, source="fixture")
        out += paired_rows(blocks, list(lbs), common, 200, 1)
    return out


@pytest.mark.parametrize("n_load", [1, 9, 20])
def test_rtt_added_under_load_labels_hold_for_up_to_twenty_points(tmp_path, figures, n_load):
    """The load panel's tick labels (split and background rate) stay apart for up to 20 points, and
    a rate measured to the packet is written with three significant digits, not six."""
    d = write(tmp_path / "r", rtt_paired=rtt_paired_rows(n_load))
    plots.rtt_added(d, tmp_path / "f", "local")
    fig = figures["rtt_added"]
    check_layout(fig, f"rtt_added with {n_load} points under load")
    labels = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert len(labels) == n_load
    assert all(len(x.split()[-2].replace(".", "").lstrip("0")) <= 3 for x in labels), labels


@pytest.mark.parametrize("n_lbs", [1, 2, 5, 6])
def test_rtt_lb_vs_none_labels_hold_for_up_to_six_paths(tmp_path, figures, n_lbs):
    lbs = (["none"] + NAMES)[:n_lbs]
    d = write(tmp_path / "r", rtt_samples=rtt_rows(lbs))
    plots.rtt_lb_vs_none(d, tmp_path / "f", "local")
    check_layout(figures["rtt_lb_vs_none"], f"rtt_lb_vs_none with {n_lbs} paths")


def test_loss_groups_repetitions_by_nominal_rate_and_states_the_run_count(tmp_path, figures):
    """Three repetitions of each rate offer three different measured rates: still one point per
    nominal rate (their median, bars min-max), and the legend says how many runs each is."""
    rows = loss_rows(["xenoflow"], [1e4, 2e4, 3e4])
    rows = [r for r in rows if not (r["point"].endswith("-30000") and r["repetition"] > 1)]  # one run at 30 kpps
    d = write(tmp_path / "r", loss=rows)
    s = plots.loss_vs_load(d, tmp_path / "f", "local")
    assert list(s["xenoflow"].index) == [0.01, 0.02, 0.03]
    assert s["runs"]["xenoflow"] == {0.01: 3, 0.02: 3, 0.03: 1}
    ax = figures["loss_vs_load"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["XenoFlow: median of 3 runs at 2 points, 1 run at 1 point, bars: min-max"]
    line = ax.lines[0]  # the curve: one vertex per nominal rate
    assert list(line.get_xdata()) == pytest.approx([10, 20, 30])


def test_one_run_per_point_is_called_one_run():
    assert plots.runs_label([1, 1, 1]) == "1 run per point"
    assert plots.runs_label([2, 2]) == "median of 2 runs per point"


def test_pps_ratios_with_their_cis_and_the_reference_as_a_line_at_one(tmp_path, figures):
    lbs = [WIRE, "xenoflow", "ebpf"]
    rows = pps_rows(lbs, [22, 64], paired=True)
    d = write(tmp_path / "r", pps=rows)
    s = plots.pps_vs_payload(d, tmp_path / "f", "local")
    assert s["reference"] == WIRE and sorted(s["ratios"]) == ["ebpf", "xenoflow"]
    mine = [r for r in rows if r["lb"] == "xenoflow" and r["payload_bytes"] == 64
            and r["metric"].startswith(f"rate_vs_{WIRE}_")]
    got = s["ratios"]["xenoflow"][64]
    assert got["median"] == pytest.approx(next(r["value"] for r in mine if r["metric"].endswith("_median")))
    assert got["ci"] == pytest.approx([next(r["value"] for r in mine if r["metric"].endswith("_ci_low")),
                                       next(r["value"] for r in mine if r["metric"].endswith("_ci_high"))])
    assert len(mine) == 9  # rank_rows' nine parts of one pair
    fig = figures["pps_vs_payload"]
    ax = fig.axes[0]
    ref_line = [ln for ln in ax.lines if list(ln.get_ydata()) == [1, 1]]
    assert ref_line and ref_line[0].get_label() == f"{WIRE} (no-op, the reference): 1 by definition"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for lb, points in s["ratios"].items():  # a filled marker and a hollow one each say what they mean
        verdicts = {p["verdict"] for p in points.values()}
        differs = f"{plots._name(lb)}: differs from {WIRE} (CI excludes 1)"
        same = f"{plots._name(lb)}: not distinguishable from {WIRE} (CI includes 1)"
        assert (differs in labels, same in labels) == (verdicts != {plots.NOT_DISTINGUISHABLE},
                                                       plots.NOT_DISTINGUISHABLE in verdicts), (lb, verdicts, labels)
    caption = " ".join(t.get_text() for t in fig.texts)
    assert "bootstrap 95 % CI of the median ratio over this run's repetitions, then their rounds" in caption
    assert "does not cover another machine kind, nor the absolute rate (rx_pps in the CSV)" in caption


def test_lb_comparison_says_not_distinguishable_instead_of_a_difference(tmp_path, figures):
    """Two LBs at the same rate: the ratio's CI includes 1 and the figure writes the verdict, not
    the ratio."""
    rows = []
    blocks = [(r, k, lb, 1e5 * (1 + 0.02 * np.sin(7 * r + 3 * k + (lb == "ebpf"))))
              for r in (1, 2, 3) for k in (1, 2, 3, 4) for lb in (WIRE, "ebpf")]
    common = dict(testbed="fx", experiment="compare", point="payload-22", payload_bytes=22, source="fixture")
    rows += rank_rows(blocks, [WIRE, "ebpf"], WIRE, common, 200, 7)
    d = write(tmp_path / "r", compare=rows)
    s = plots.lb_comparison(d, tmp_path / "f", "local")
    assert s["ratios"]["ebpf"]["verdict"] == "not distinguishable"
    texts = [t.get_text() for t in figures["lb_comparison"].axes[0].texts]
    assert texts == ["not\ndistinguishable"]


def test_absolute_lb_comparison_names_the_wire_the_reference_and_says_why_an_lb_is_above_it(tmp_path, figures):
    rows = [row(testbed="fx", experiment="compare", point=f"lb-{lb}", lb=lb, payload_bytes=22, repetition=r,
                measured_pps=v, metric="max_pps", value=v, unit="packets/s", source="fixture")
            for lb, vals in ((WIRE, (1.00e5, 1.02e5)), ("ebpf", (1.05e5, 1.06e5))) for r, v in enumerate(vals, 1)]
    d = write(tmp_path / "r", compare=rows)
    s = plots.lb_comparison(d, tmp_path / "f", "local")
    assert s["above_reference"] == ["ebpf"]
    assert s["spread"]["ebpf"] == pytest.approx((0.105, 0.106))
    fig = figures["lb_comparison"]
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert all("limit" not in t for t in ticks) and any(t.startswith(f"{WIRE}\n(reference)") for t in ticks)
    caption = " ".join(t.get_text() for t in fig.texts)
    assert (f"eBPF/XDP LB measured above {WIRE} (no-op, the reference): each LB was measured in trials of its own"
            in caption)


def test_rehearsal_lab_figures_say_the_numbers_are_the_labs_path(tmp_path, figures):
    d = write(tmp_path / "r", pps=pps_rows([WIRE, "xenoflow"], [22, 64]))
    for tb in plots.REHEARSAL_TESTBEDS:
        plots.pps_vs_payload(d, tmp_path / "f", tb)
        caption = " ".join(t.get_text() for t in figures["pps_vs_payload"].texts)
        assert f"Rehearsal lab ({tb})" in caption and "not the hardware's" in caption
    plots.pps_vs_payload(d, tmp_path / "f", "local")
    assert "Rehearsal" not in " ".join(t.get_text() for t in figures["pps_vs_payload"].texts)


def _trial(resdir, exp, point, rep, valid, reasons, pt=None):
    t = resdir / "trials" / exp / point / f"rep-{rep}"
    t.mkdir(parents=True)
    (t / "result.json").write_text(json.dumps({
        "experiment": exp, "point": pt or {"payload": 22}, "repetition": rep, "valid": valid, "chosen_attempt": 2,
        "attempts": [{"attempt": 1, "reasons": ["not this attempt's"]}, {"attempt": 2, "reasons": reasons}],
        "outputs": {}}))


def test_placeholder_names_every_invalid_trial_and_its_reasons(tmp_path, monkeypatch):
    from .test_plots import _drawn_not_written
    _drawn_not_written(monkeypatch, written=("pps_vs_payload",))
    d = tmp_path / "local"
    for rep, why in ((1, "generator_ok: xdpgen stopped"), (2, "generator_ok: xdpgen stopped"),
                     (3, "sampler_ok: no samples")):
        _trial(d, "pps", "lb-xenoflow_payload-22", rep, False, [why])
    msgs = []
    plots.plot_all(d, tmp_path / "f", "local", progress=msgs.append, placeholders=True)
    line = next(m for m in msgs if m.startswith("pps_vs_payload:"))
    assert line == ("pps_vs_payload: no data, placeholder written (every trial of pps was invalid (3 of 3): "
                    "generator_ok: xdpgen stopped (2 trials); sampler_ok: no samples)")
    assert (tmp_path / "f" / "pps_vs_payload.png").stat().st_size > 1000


def test_a_point_whose_every_trial_is_invalid_is_named_under_the_figure(tmp_path, figures):
    """rtt_under_load draws the levels with a valid trial; a level whose every trial is invalid is
    named under it with the checks that failed (block numbers aside), a level with a valid trial and
    a capacity point (no figure draws one) are not."""
    d = tmp_path / "local"
    lost = "block_{}_loss_below_1pct: block {} (xenoflow): 61 of 100 probes lost (> 1 %)"
    _trial(d, "rtt_load", "level-0.8_split-50-50", 1, False, [lost.format(1, 1), lost.format(4, 4)])
    _trial(d, "rtt_load", "level-0.8_split-50-50", 2, False, [lost.format(2, 2), "actors_alive: dns server gone"])
    _trial(d, "rtt_load", "level-0.8_split-single", 1, False, [lost.format(1, 1)])
    _trial(d, "rtt_load", "level-0.8_split-single", 2, True, [])
    _trial(d, "rtt_load", "level-max_split-worst_lb-xenoflow", 1, False, ["generator_ok: stopped"],
           pt={"level": "max", "split": "worst", "lb": "xenoflow"})
    assert plots.invalid_points(d, "rtt_load") == {
        "level-0.8_split-50-50": {"block_loss_below_1pct": 2, "actors_alive": 1}}
    head = ("testbed,experiment,point,lb,server,payload_bytes,frame_bytes,offered_pps,measured_pps,repetition,split,"
            "background_pps,metric,value,unit,source\n")
    (d / "rtt_summary.csv").write_text(head + "".join(
        f"local,rtt_load,{p},xenoflow,xdp,,,,,1,{sp},{bg},rtt_{k}_us,{15 + dv},us,fixture\n"
        for p, sp, bg in (("level-0_split-none", "none", 0), ("level-0.8_split-single", "single", 2e6))
        for k, dv in (("median", 0), ("p25", -1), ("p75", 1))))
    plots.rtt_under_load(d, tmp_path / "f", "local")
    caption = " ".join(t.get_text() for t in figures["rtt_under_load"].texts)
    assert ("Not drawn, every trial invalid (rtt_load; the checks that failed, in how many trials; invalid.csv has the "
            "reasons): level-0.8_split-50-50 (block_loss_below_1pct in 2, actors_alive in 1).") in caption
    assert plots.invalid_points_note(tmp_path / "none", "rtt_load") is None


def test_placeholder_of_valid_trials_without_a_table_says_to_aggregate(tmp_path):
    d = tmp_path / "local"
    _trial(d, "loss", "lb-xenoflow_rate_pps-10000", 1, True, [])
    assert plots.why_no_data(d, "loss_vs_load", "Failed to read tidy results x: no such file") == (
        "1 of 1 trials of loss are valid, but its table has no rows for loss_vs_load: Failed to read tidy results "
        f"x: no such file (make the tables with `xenobench experiment aggregate {d}`)")


def test_placeholder_without_a_trials_tree_reads_invalid_csv(tmp_path):
    d = tmp_path / "copied"
    d.mkdir()
    pd.DataFrame([{"trial": "trials/rtt/lb-none/rep-1", "experiment": "rtt", "point": "lb-none", "attempts": 2,
                   "reasons": "probes_answered: 12 of 100"}]).to_csv(d / "invalid.csv", index=False)
    assert plots.why_no_data(d, "rtt_lb_vs_none", "no file") == (
        "every trial of rtt was invalid (1 of 1): probes_answered: 12 of 100")


def test_a_caption_counts_the_other_pairs_beyond_six():
    pairs = [f"a{i} vs b: faster, 1.050" for i in range(6)] + ["a6 vs b: not distinguishable"]
    assert plots.pairs_note(pairs[:2]) == " Other pairs: a0 vs b: faster, 1.050; a1 vs b: faster, 1.050."
    assert plots.pairs_note(pairs) == (" Other pairs: 7 comparisons of the non-reference LBs, 1 of them not "
                                       "distinguishable (rate_vs_<LB>_ rows of the CSV).")


@pytest.mark.parametrize("payload", [22, 1000])
def test_bandwidth_with_one_payload_keeps_its_tick_label(tmp_path, figures, payload):
    """One payload that is no power of two: its own tick (there is no power of two in its range)."""
    d = write(tmp_path / "r", pps=pps_rows(lbs_of(2), [payload]))
    s = plots.bandwidth_vs_payload(d, tmp_path / "f", "local")
    fig = figures["bandwidth_vs_payload"]
    check_layout(fig, f"bandwidth_vs_payload at {payload} B alone")
    assert [t.get_text() for t in _visible_ticklabels(fig.axes[0].xaxis)] == [str(payload)]
    assert s["spread"]["xenoflow"][payload][0] < s["l2"]["xenoflow"][payload] < s["spread"]["xenoflow"][payload][1]


@pytest.mark.parametrize("testbed", ["fips", "local"])
def test_every_figure_of_the_small_fixture_holds_its_layout(tmp_path, figures, testbed):
    """Every figure, with the published overlay (fips) and without (local)."""
    from pathlib import Path
    done = plots.plot_all(Path(__file__).parent / "fixtures" / "results" / "small", tmp_path, testbed,
                          progress=lambda m: None)
    assert set(done) == set(plots.drawn_by())
    for name, fig in figures.items():
        check_layout(fig, f"{name} on {testbed}")


def test_rate_ranking_with_four_lbs_and_both_measures_holds_its_layout(tmp_path, figures):
    lbs = lbs_of(4)
    rng = np.random.default_rng(4)
    rows = []
    for p in (22, 64):
        blocks = [(r, k, lb, 1e5 * (1 - 0.05 * i) * (1 + 0.01 * rng.standard_normal()))
                  for r in (1, 2, 3) for k in (1, 2, 3, 4) for i, lb in enumerate(lbs)]
        common = dict(testbed="fx", experiment="rank", point=f"payload-{p}", payload_bytes=p, source="fixture")
        rows += rank_rows(blocks, lbs, WIRE, common, 200, 7) + rank_rows(blocks, lbs, WIRE, common, 200, 7, "rate_per_cpu")
    d = write(tmp_path / "r", rate_ranking=rows)
    s = plots.rate_ranking(d, tmp_path / "f", "local")
    assert len(s) == 3 * 2 * 2  # three LBs against the wire, two payloads, two measures
    check_layout(figures["rate_ranking"], "rate_ranking with 4 LBs")


def test_a_figure_that_cannot_be_written_stops_the_run_by_name(tmp_path, monkeypatch):
    """A full disk while saving: one error naming the figure and the fix, no placeholder, no
    half-written file left (the save goes through a temporary file)."""
    import errno

    import matplotlib.figure
    from xenobench import plots

    def full(self, fname, **kw):
        open(fname, "wb").write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    fig = plots.plt.figure()
    with pytest.raises(plots.FigureNotWritten) as e:
        plots._save(fig, tmp_path, "pps_vs_payload")
    assert str(e.value) == (f"Failed to write figure {tmp_path / 'pps_vs_payload'}: No space left on device (free "
                            "space on that file system or give another --out directory)")
    assert list(tmp_path.iterdir()) == []
