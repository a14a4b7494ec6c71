"""The paper's six figures, and NDR/PDR and the paired added RTT, from tidy CSVs only. Every function draws one figure for any testbed in
the schema, labels it with the testbed, overlays published values where they exist (black, marked
"published"), writes PNG and PDF, and returns the series it plotted so tests can check the numbers
rather than the pixels.

    fn(resdir, outdir, testbed) -> dict      one figure (names in FIGURES)
    plot_all(resdir, outdir, testbed=None, progress=print) -> {name: series}
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.cbook import boxplot_stats  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from . import latency  # noqa: E402
from .compare import THESIS_64B_PAYLOAD, read_published  # noqa: E402
from .errors import ConfigError, DataError  # noqa: E402
from .lb import LBS, by_hash, label as lb_label  # noqa: E402
from .definitions import NO_SPLIT, definitions, is_capacity_point  # noqa: E402
from .rateblocks import NOT_DISTINGUISHABLE, ratios_from_rows  # noqa: E402
from .layout import TrialDir, chosen_reasons  # noqa: E402
from .results import HEADERS, l1_gbps, l2_gbps, line_rate_pps, read_tidy  # noqa: E402

# One style for all figures, readable in print: Okabe-Ito colours (colour-blind safe), distinct
# markers and line styles so the figures also work in greyscale, 9-10 pt text at 6.4 in width.
STYLE = {"figure.figsize": (6.4, 3.9), "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10,
         "legend.fontsize": 8, "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.grid": True,
         "grid.alpha": 0.3, "lines.linewidth": 1.6, "lines.markersize": 5, "savefig.bbox": "tight",
         "savefig.dpi": 200, "pdf.fonttype": 42}
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
PUB = dict(color="black")  # every published value is drawn in black and labelled "published"
SPLIT_ORDER = ["single", "50/50", "70/30", "30/70", "worst"]
SPLIT_LABELS = {"single": "single endpoint (100/0)", "worst": "worst case (0/100)"}
ASSUMED_SPLIT = ("split X/Y from file names rtt_NNm_X_Y, assuming X % of the background went to "
                 "fips2 (the DNS backend) and Y % to fips3 (not recorded in the files)")


def _style(i: int) -> dict:
    return dict(color=COLORS[i % len(COLORS)], marker=MARKERS[i % len(MARKERS)])


def _name(lb: str) -> str:
    """An LB's label on a figure; a reference kind (the wire) is named the reference: an LB measured
    above it in another trial is the machine's drift between trials, not past a limit."""
    if _is_reference(lb):
        return f"{lb} (no-op, the reference)"
    return lb_label(lb)


def _tick(lb: str) -> str:
    """An LB's name under a tick: short, the reference marked as such."""
    return f"{lb}\n(reference)" if _is_reference(lb) else lb_label(lb).replace(" (", "\n(")


def _is_reference(lb: str) -> bool:
    """A reference kind (the wire: same backends and split, no LB program), drawn dashed and grey."""
    k = LBS.get(lb)
    return bool(k and k.reference)


#: the testbeds that stand in for the thesis's hardware on this machine (config/rehearsal*.yaml's
#: testbed.name): their figures say the numbers are the lab's path
REHEARSAL_TESTBEDS = ("rehearsal", "rehearsal-ci")


def rehearsal_note(testbed: str) -> str | None:
    """The caption line of a figure drawn from a rehearsal lab, None for any other testbed."""
    if testbed not in REHEARSAL_TESTBEDS:
        return None
    return (f"Rehearsal lab ({testbed}): every node a network namespace on one machine, reached over ssh; "
            "the numbers are this lab's path (veth, software switch, DOCA Flow emulation), not the hardware's.")


def runs_label(counts) -> str:
    """What a plotted median is over, from each point's number of runs (repetitions): "median of 3
    runs per point", "1 run per point", or the mix ("median of 3 runs at 18 points, 1 run at 2")."""
    by: dict[int, int] = {}
    for n in counts:
        by[int(n)] = by.get(int(n), 0) + 1
    if len(by) == 1:
        n = next(iter(by))
        return "1 run per point" if n == 1 else f"median of {n} runs per point"
    parts = [("1 run" if n == 1 else f"median of {n} runs") + f" at {k} point{'s' if k > 1 else ''}"
             for n, k in sorted(by.items(), reverse=True)]
    return ", ".join(parts)


def spread(values) -> tuple[float, float, float]:
    """(median, min, max) of one point's repetitions."""
    v = np.asarray(values, dtype=float)
    return float(np.median(v)), float(v.min()), float(v.max())


def _legend_outside(ax, **kw):
    """The legend right of the axes and of any label that reaches past their right edge, where it
    covers no data point and no label."""
    fig = ax.figure
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    right = max([ax.bbox.x1] + [t.get_window_extent(r).x1 for t in ax.texts if t.get_visible() and t.get_text()])
    x = ax.transAxes.inverted().transform((right, 0))[0]
    return ax.legend(loc="upper left", bbox_to_anchor=(x + 0.01, 1.0), borderaxespad=0.0, **kw)


def _legend_below(ax, **kw):
    """The legend under the axes' tick and axis labels (however many lines the tick labels have)."""
    fig = ax.figure
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()] + [ax.xaxis.label]
    bottom = min([ax.bbox.y0] + [t.get_window_extent(r).y0 for t in labels if t.get_text()])
    y = ax.transAxes.inverted().transform((0, bottom))[1]
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, y - 0.02), borderaxespad=0.0, **kw)


#: the verdict rows of the paired rate design (xenobench.measure.rank's rank_rows, also in the pps and
#: compare tables where those experiments are measured paired): <measure>_vs_<ref>_<part>
RATIO_MEASURE = "rate"
MAX_PAIRS_NAMED = 6  # a caption names at most this many pairs of the other LBs; more are counted


def pairs_note(pairs: list[str]) -> str:
    """The caption's sentence on the pairs of the non-reference LBs (each "<a> vs <b>...: verdict")."""
    if not pairs:
        return ""
    if len(pairs) <= MAX_PAIRS_NAMED:
        return " Other pairs: " + "; ".join(pairs) + "."
    nd = sum(p.endswith(NOT_DISTINGUISHABLE) for p in pairs)
    return (f" Other pairs: {len(pairs)} comparisons of the non-reference LBs, {nd} of them not distinguishable "
            "(rate_vs_<LB>_ rows of the CSV).")


def interval_note(absolute: str = "the absolute rate (rx_pps in the CSV)",
                  over: str = ", then their rounds (each round the LB's rate over the reference's, measured in "
                              "interleaved blocks)") -> str:
    """What a ratio figure's bar covers and what it does not (`absolute`: the figure's absolute values;
    `over`: what was resampled beyond this run's repetitions, and what one ratio is)."""
    return (f"Bar: bootstrap 95 % CI of the median ratio over this run's repetitions{over}. It does not "
            f"cover another machine kind, nor {absolute}.")


def ratio_rows(df: pd.DataFrame, measure: str = RATIO_MEASURE) -> pd.DataFrame:
    """The rows of a table that are the paired design's ratios (<measure>_vs_<ref>_<part>)."""
    return df[df.metric.astype(str).str.startswith(f"{measure}_vs_")]


def reference_of(ratios: list) -> str:
    """The reference of a point's ratios: the one a reference kind is compared with, else the one
    most LBs are compared with."""
    refs = [r.reference for r in ratios]
    marked = [r for r in refs if _is_reference(r)]
    pool = marked or refs
    return max(sorted(set(pool)), key=pool.count)


REFERENCE_TESTBEDS = ("thesis", "fips")
def local_note(df: pd.DataFrame | None = None) -> str:
    """The caption of a figure from a testbed that is not the thesis's; names the generator the
    trials recorded (the tidy rows' `generator` column), never an assumed one."""
    gens = sorted(set(df["generator"].dropna())) if df is not None and "generator" in df else []
    return (f"Namespace testbed on one machine (veth, {' and '.join(gens) or 'a local generator'}, XDP; XenoFlow "
            "on the DOCA Flow emulation): published values and the 100 Gbit/s line rate are not drawn, they are "
            "2-3 orders of magnitude away. Compare shapes and ratios, not absolute numbers.")


def reference(testbed: str) -> bool:
    """Whether published values and the 100 Gbit/s line rate belong on this testbed's figures."""
    return testbed in REFERENCE_TESTBEDS


def _published(metric: str, document: str | None = None, testbed: str | None = None) -> list:
    if testbed is not None and not reference(testbed):
        return []
    pub = read_published()
    pub = pub[pub.metric == metric]
    if document:
        pub = pub[pub.document == document]
    return list(pub.itertuples())


class FigureNotWritten(DataError):
    """A figure that could not be written (a full or read-only disk): the run stops, never a placeholder."""


def _finish(fig, name: str, resdir=None) -> None:
    """The figure's last notes before it is written: with the results tree it was drawn from
    (`resdir`), the points of its experiments that it does not draw because every trial of theirs
    was invalid (invalid_points_note); then every caption placed."""
    if resdir is not None:
        for exp in drawn_by().get(name, ()):
            _caption(fig, invalid_points_note(resdir, exp))
    _place_captions(fig)


def _save(fig, outdir: Path, name: str, resdir=None) -> None:
    """The figure finished (_finish) and written as PNG and PDF."""
    _finish(fig, name, resdir)
    outdir = Path(outdir)
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        for ext in ("png", "pdf"):
            # written beside and renamed: a full disk or a killed run leaves the old figure or none, never
            # half of one; no creation date in PDFs: re-drawing the same data gives the same bytes
            path, tmp = outdir / f"{name}.{ext}", outdir / f".{name}.{ext}.tmp"
            try:
                fig.savefig(tmp, format=ext, metadata={"CreationDate": None} if ext == "pdf" else None)
                tmp.replace(path)
            finally:
                tmp.unlink(missing_ok=True)
    except OSError as e:
        raise FigureNotWritten(f"Failed to write figure {outdir / name}: {e.strerror or e} (free space on that file "
                        "system or give another --out directory)") from None
    finally:
        plt.close(fig)


def _title(ax, title: str, testbed: str) -> None:
    ax.set_title(f"{title}   [testbed: {testbed}]")
    note = rehearsal_note(testbed)
    if note:
        _caption(ax.figure, note)


def _caption(fig, text: str, y: float | None = None) -> None:
    """A note under the figure. Notes are collected and placed when the figure is saved, as one
    block below everything the axes draw (rotated tick labels, a legend below the axes), so a note
    never covers a label; `y` is kept for callers and ignored."""
    notes = fig.__dict__.setdefault("_xenobench_captions", [])
    if text and text not in notes:
        notes.append(text)


def _place_captions(fig) -> None:
    notes = fig.__dict__.get("_xenobench_captions") or []
    if not notes:
        return
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [a.get_tightbbox(r) for a in fig.axes if a.get_visible()]
    bottom = min((b.y0 for b in boxes if b is not None), default=0.0) / fig.bbox.height
    fig.text(0.01, bottom - 0.02, "\n".join(notes), fontsize=7, ha="left", va="top", wrap=True)


def drawn_by() -> dict[str, tuple[str, ...]]:
    """Every figure a definition lists (experiments/<id>.yaml `figures`) with the experiments that
    list it, in plan order: the workflow's figures and the rows each draws. A name no figure
    function has is refused, naming the definition."""
    out: dict[str, list[str]] = {}
    for d in definitions().values():
        for f in d.figures:
            if f not in FIGURES:
                raise ConfigError(f"Failed to plan figure {f!r} of experiments/{d.id}.yaml: no such figure "
                                  f"(known: {', '.join(FIGURES)})")
            out.setdefault(f, []).append(d.id)
    return {f: tuple(ids) for f, ids in out.items()}


def _rows(resdir, table: str, figure: str) -> pd.DataFrame:
    """A tidy table's rows that a figure draws: those of the experiments listing it (drawn_by)."""
    x = read_tidy(resdir, table)
    return x[x.experiment.isin(drawn_by().get(figure, ()))]


def _need(df: pd.DataFrame, what: str, resdir) -> pd.DataFrame:
    if df.empty:
        raise DataError(f"Failed to plot {what}: no matching rows in {resdir}")
    return df


def _payload_ticks(ax, payloads: list[int]) -> None:
    """A categorical payload axis: every payload a tick, labelled frame (payload)."""
    ax.set_xticks(range(len(payloads)), [f"{p + HEADERS} ({p})" for p in payloads],
                  rotation=90 if len(payloads) > 4 else 0, fontsize=7)
    ax.set_xlim(-0.6, len(payloads) - 0.4)
    ax.set_xlabel("frame bytes without FCS (UDP payload bytes)")


def _ratio_panel(ax, ratios: dict, positions: dict, ref: str, join: bool = True,
                 over: str = "the rounds of ") -> tuple[dict, list[str]]:
    """Each LB's ratio to `ref` at each position with its CI; hollow where the verdict is "not
    distinguishable", filled where the CI excludes 1 (each named in the legend). ratios: {position
    key: [RateRatio]}; join: a line through an LB's positions (not where they are no axis); over:
    what the median is over, before the repetitions' count. Returns the series ({lb: {key: {median, ci, verdict}}}) and the pairs of the
    other LBs as caption text."""
    series: dict = {}
    pairs: list[str] = []
    lbs = sorted({r.lb for rs in ratios.values() for r in rs if r.reference == ref})
    n = max(len(lbs), 1)
    for i, lb in enumerate(lbs):
        st = _style(i)
        xs, meds, lo, hi, filled = [], [], [], [], []
        for key, rs in ratios.items():
            r = next((r for r in rs if r.lb == lb and r.reference == ref), None)
            if r is None:
                continue
            xs.append(positions[key] + (i - (n - 1) / 2) * min(0.12, 0.6 / n))
            meds.append(r.median)
            lo.append(r.median - r.ci_low)
            hi.append(r.ci_high - r.median)
            filled.append(r.verdict != NOT_DISTINGUISHABLE)
            series.setdefault(lb, {})[key] = {"median": r.median, "ci": [r.ci_low, r.ci_high], "verdict": r.verdict,
                                              "rounds": r.rounds, "repetitions": r.repetitions}
        if not xs:
            continue
        reps = sorted({series[lb][k]["repetitions"] for k in series[lb]})
        ax.errorbar(xs, meds, yerr=[lo, hi], color=st["color"], ls="-" if join and len(xs) > 1 else "none", capsize=3,
                    marker="none", lw=1.0, label=f"{_name(lb)} / {ref}: median over {over}"
                                                 f"{'-'.join(map(str, reps))} repetition{'s' if reps[-1] > 1 else ''}")
        fx = [x for x, f in zip(xs, filled) if f]
        if fx:
            ax.scatter(fx, [m for m, f in zip(meds, filled) if f], marker=st["marker"], color=st["color"], zorder=4,
                       label=f"{_name(lb)}: differs from {ref} (CI excludes 1)")
        hx = [x for x, f in zip(xs, filled) if not f]
        if hx:
            ax.scatter(hx, [m for m, f in zip(meds, filled) if not f], marker=st["marker"], facecolor="white",
                       edgecolor=st["color"], zorder=4,
                       label=f"{_name(lb)}: not distinguishable from {ref} (CI includes 1)")
    for key, rs in ratios.items():
        pairs += [f"{_name(r.lb)} vs {_name(r.reference)} at {key}: "
                  + (NOT_DISTINGUISHABLE if r.verdict == NOT_DISTINGUISHABLE else f"{r.verdict}, {r.median:.3f}")
                  for r in rs if r.reference != ref]
    ax.axhline(1, color="grey", ls="--", lw=1.0, label=f"{_name(ref)}: 1 by definition")
    ax.set_ylabel(f"rate relative to {ref}")
    return series, pairs


def pps_vs_payload(resdir, outdir, testbed) -> dict:
    """Packet rate vs payload (thesis Fig. 7.3 / paper Fig. 4) with the layer-1 line rate: each LB's
    median over its repetitions with their min-max. Where the pps table holds the paired design's
    ratios (every LB measured in the same repetition in interleaved blocks with the reference), each
    LB's rate relative to the reference's per payload with its CI instead."""
    rows = _rows(resdir, "pps", "pps_vs_payload")
    rr = ratio_rows(rows)
    if len(rr):
        return _pps_ratios(rows, rr, outdir, testbed, resdir)
    x = _need(rows.query("metric == 'rx_pps'"), "pps_vs_payload", resdir)
    payloads = sorted(int(p) for p in x.payload_bytes.unique())
    pos = {p: i for i, p in enumerate(payloads)}  # categorical axis, like the thesis's figure
    series: dict = {"spread": {}}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        lr = pd.Series([line_rate_pps(p) / 1e6 for p in payloads], index=payloads)
        series["line_rate"] = lr
        bound = [p for p in payloads if p > 64] if reference(testbed) else []
        if bound:  # the thesis marks the network-bound region in orange
            ax.axvspan(pos[bound[0]] - 0.5, len(payloads) - 0.5, color="#E69F00", alpha=0.12, lw=0,
                       label="network-bound (> 64 B payload)")
        if reference(testbed):
            ax.plot(range(len(payloads)), lr.values, ls="--", color="grey", marker="x", ms=4,
                    label="100 Gbit/s line rate, layer 1: frame+FCS+preamble+IFG\n"
                          "(the thesis's curve omitted preamble and IFG)")
        for i, (lb, g) in enumerate(x.groupby("lb")):
            agg = g.groupby("payload_bytes").value.agg(["median", "min", "max", "count"]).sort_index() / 1e6
            agg["count"] *= 1e6
            med = agg["median"]
            series[lb] = med
            series["spread"][lb] = {int(p): (float(r["min"]), float(r["max"])) for p, r in agg.iterrows()}
            st = dict(color="grey", ls="--", marker="x") if _is_reference(lb) else _style(i)
            ax.errorbar([pos[int(p)] for p in med.index], med.values,
                        yerr=[med - agg["min"], agg["max"] - med], capsize=2, **st,
                        label=f"{_name(lb)}, measured: {runs_label(agg['count'])}"
                              + (", bars: min-max" if agg["count"].max() > 1 else ""))
        published = {}
        for metric, rng, va in (("pps_small_payload_mpps", [p for p in payloads if p < 23], "bottom"),
                                ("pps_large_payload_mpps", [p for p in payloads if 23 <= p <= 64], "top")):
            for r in _published(metric, "paper", testbed):
                if rng:
                    published[metric] = float(r.value)
                    ax.hlines(r.value, pos[rng[0]] - 0.3, pos[rng[-1]] + 0.3, colors="black", lw=1.2,
                              linestyles=(0, (4, 2)), zorder=5)
        if published:
            ax.plot([], [], color="black", lw=1.2, ls=(0, (4, 2)), label="published (paper Sec. 5.2, text): "
                    + ", ".join(f"{v:g} Mpps" for v in published.values()))
        series["published"] = published
        _payload_ticks(ax, payloads)
        ax.set_ylabel("packet rate at the backends (Mpps)")
        if reference(testbed):
            ax.set_ylim(0, max(lr.max(), 100) * 1.08)
        else:
            ax.set_ylim(0, float(x.value.max()) / 1e6 * 1.15)
            _caption(fig, local_note(x))
        _legend_outside(ax)
        _title(ax, "Packet rate vs payload", testbed)
        _save(fig, outdir, "pps_vs_payload", resdir)
    return series


def _ratios_by(groups: dict, figure: str, measure: str = RATIO_MEASURE) -> tuple[dict, str]:
    """Each position's ratios from its ratio rows (`groups`: position -> rows), in position order,
    positions without a complete ratio left out, and the reference they are compared with; refuses
    (DataError naming `figure`) rows that hold no complete ratio. measure: the rows' metric prefix
    (<measure>_vs_<ref>_<part>)."""
    ratios = {k: rs for k in sorted(groups) if (rs := ratios_from_rows(groups[k], measure))}
    if not ratios:
        raise DataError(f"Failed to plot {figure}: its ratio rows ({measure}_vs_<ref>_...) lack a median, CI or "
                        "rounds (regenerate the tables with `xenobench experiment aggregate <results dir>`)")
    return ratios, reference_of([r for rs in ratios.values() for r in rs])


def _pps_ratios(rows, rr, outdir, testbed, resdir=None) -> dict:
    ratios, ref = _ratios_by({int(p): rr[rr.payload_bytes == p] for p in rr.payload_bytes.dropna().unique()},
                             "pps_vs_payload")
    payloads = list(ratios)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        series, pairs = _ratio_panel(ax, ratios, {p: i for i, p in enumerate(payloads)}, ref)
        series = {"ratios": series, "reference": ref}
        _payload_ticks(ax, payloads)
        _legend_outside(ax)
        _title(ax, "Packet rate relative to the reference vs payload", testbed)
        _caption(fig, interval_note() + pairs_note(pairs))
        if not reference(testbed):
            _caption(fig, local_note(rows))
        _save(fig, outdir, "pps_vs_payload", resdir)
    return series


SHARED_MACHINE_NOTE = ("On a shared machine the absolute rate moves with the machine's state (other tasks, where the "
                       "host runs the vCPUs) between trials; bars: min-max over the repetitions.")


def _log2_ticks(ax, payloads: list[int]) -> None:
    """Ticks on a log2 payload axis: the powers of two inside the measured range, or the payloads
    themselves where fewer than two powers fall inside (one payload still has its tick)."""
    lo, hi = min(payloads), max(payloads)
    ticks = [2 ** k for k in range(0, 17) if lo <= 2 ** k <= hi]
    if len(ticks) < 2:
        ticks = payloads if len(payloads) <= 4 else [payloads[0], payloads[-1]]
    ax.set_xticks(ticks, [str(p) for p in ticks])
    ax.minorticks_off()
    ax.set_xlim(lo / 1.4, hi * 1.4)


def bandwidth_vs_payload(resdir, outdir, testbed) -> dict:
    """Bandwidth vs payload with the line rate (thesis Fig. 7.4 / paper Fig. 6): absolute, each LB's
    median over its repetitions with their min-max."""
    x = _need(_rows(resdir, "pps", "bandwidth_vs_payload").query("metric == 'rx_pps'"), "bandwidth_vs_payload", resdir)
    series: dict = {"l2": {}, "l1": {}, "line_rate_gbps": 100.0, "spread": {}}
    payloads = sorted(int(p) for p in x.payload_bytes.unique())
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        for i, (lb, g) in enumerate(x.groupby("lb")):
            agg = g.groupby("payload_bytes").value.agg(["median", "min", "max", "count"]).sort_index()
            l2 = pd.Series([l2_gbps(v, p) for p, v in agg["median"].items()], index=agg.index)
            l1 = pd.Series([l1_gbps(v, p) for p, v in agg["median"].items()], index=agg.index)
            lo = pd.Series([l2_gbps(v, p) for p, v in agg["min"].items()], index=agg.index)
            hi = pd.Series([l2_gbps(v, p) for p, v in agg["max"].items()], index=agg.index)
            series["l2"][lb], series["l1"][lb] = l2, l1
            series["spread"][lb] = {int(p): (float(lo[p]), float(hi[p])) for p in agg.index}
            st = dict(color="grey", ls="--", marker="x") if _is_reference(lb) else _style(i)
            ax.errorbar(l2.index, l2.values, yerr=[l2 - lo, hi - l2], capsize=2, **st,
                        label=f"{_name(lb)}: pps x frame bytes x 8 (as the paper), {runs_label(agg['count'])}"
                              + (", bars: min-max" if agg["count"].max() > 1 else ""))
            ax.plot(l1.index, l1.values, color=st["color"], marker=st["marker"], mfc="none", ls=":",
                    label=f"{_name(lb)}: on the wire (+ FCS, preamble, IFG)")
        if reference(testbed):
            ax.axhline(100, ls="--", color="grey", label="100 Gbit/s line rate")
        for r in _published("line_rate_reached_above_payload_bytes", testbed=testbed):
            ax.axvline(r.value, color="black", ls=(0, (4, 2)), lw=1.2,
                       label=f"published: line rate only above {r.value:g} B payload (text)")
            series["published_line_rate_above_payload"] = float(r.value)
        ax.set_xscale("log", base=2)
        _log2_ticks(ax, payloads)
        ax.set_xlabel("UDP payload bytes (log scale)")
        ax.set_ylabel("bandwidth at the backends (Gbit/s)")
        if reference(testbed):
            ax.set_ylim(0, 110)
        else:
            ax.set_ylim(bottom=0)
            _caption(fig, SHARED_MACHINE_NOTE)
            _caption(fig, local_note(x))
        _legend_outside(ax)
        _title(ax, "Bandwidth vs payload", testbed)
        _save(fig, outdir, "bandwidth_vs_payload", resdir)
    return series


def nominal_rates(x: pd.DataFrame) -> pd.Series:
    """The nominal (requested) rate of each loss row, packets/s: its point's nominal_offered_pps row
    where the table has one, else the median offered rate of its point's repetitions. Repetitions of
    one point are one nominal rate: grouped by it, never by their measured offered rates (which differ)."""
    nom = x[x.metric == "nominal_offered_pps"].groupby(["lb", "point"]).value.median()
    off = x.groupby(["lb", "point"]).offered_pps.median()
    keys = list(zip(x.lb, x.point))
    return pd.Series([float(nom[k]) if k in nom.index else float(off[k]) for k in keys], index=x.index)


def loss_vs_load(resdir, outdir, testbed) -> dict:
    """Loss vs offered load (thesis Fig. 7.8 / paper Fig. 5): per LB and nominal rate the median loss
    over its repetitions, bars min-max; the curve joins medians of successive nominal rates only.
    Where the loss table holds the paired design's ratios (each rate offered through every LB in
    interleaved blocks with the reference), each LB's delivered rate relative to the reference's
    per nominal rate with its CI instead: below 1, the LB lost what the reference did not."""
    rows = _rows(resdir, "loss", "loss_vs_load")
    rr = ratio_rows(rows)
    if len(rr):
        return _loss_ratios(rows, rr, outdir, testbed, resdir)
    x = _need(rows[rows.metric == "loss_pct"].copy(), "loss_vs_load", resdir)
    x["nominal"] = nominal_rates(pd.concat([x, rows[rows.metric == "nominal_offered_pps"]])).loc[x.index]
    scale, unit = _rate_unit(x.nominal)
    # the series' index: Mpps rounded to 0.1 on hardware, 0.1 kpps on a namespace testbed
    x["offered"] = (x.nominal / 1e6).round(1 if reference(testbed) else 4)
    series: dict = {"runs": {}}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        zoom = ax.inset_axes([0.08, 0.47, 0.42, 0.45]) if reference(testbed) else None
        for i, (lb, g) in enumerate(x.groupby("lb")):
            st = _style(i)
            agg = g.groupby("offered").value.agg(["median", "min", "max", "count"]).sort_index()
            series[lb] = agg["median"]
            series["runs"][lb] = {float(k): int(n) for k, n in agg["count"].items()}
            xs = agg.index * 1e6 / scale
            label = f"{_name(lb)}: {runs_label(agg['count'])}" + (", bars: min-max" if agg["count"].max() > 1 else "")
            for a in (ax, zoom) if zoom is not None else (ax,):
                a.errorbar(xs, agg["median"], yerr=[agg["median"] - agg["min"], agg["max"] - agg["median"]],
                           capsize=2, **st, label=label if a is ax else None)
        onsets = {}
        for r in _published("loss_onset_mpps", testbed=testbed):
            onsets[r.document] = float(r.value)
            if r.document == "thesis" and not pd.isna(r.low):
                for a in (ax, zoom):
                    a.axvspan(r.low, r.high, color="black", alpha=0.08, lw=0)
                ax.fill_between([], [], color="black", alpha=0.08,
                                label=f"published: losses from {r.low:g}-{r.high:g} Mpps\n(thesis Sec. 8.1, text)")
            elif r.document == "paper":
                for a in (ax, zoom):
                    a.axvline(r.value, color="black", ls=(0, (4, 2)), lw=1.2)
                ax.plot([], [], color="black", ls=(0, (4, 2)), label=f"published: onset {r.value:g} Mpps (paper Sec. 5.2)")
        series["published_onset"] = onsets
        if zoom is not None:
            z = x[(x.offered >= 89) & (x.offered <= 101)]
            if len(z):
                zoom.set_xlim(z.offered.min() - 0.5, z.offered.max() + 0.5)
                zoom.set_ylim(min(-0.5, z.value.min() - 0.2), z.value.max() + 0.5)
                zoom.tick_params(labelsize=7)
                zoom.set_title("zoom", fontsize=7, pad=2)
            else:
                zoom.remove()
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel(f"nominal offered load ({unit}, the rate requested of the generator)")
        ax.set_ylabel("packet loss (%)")
        _legend_outside(ax)
        _title(ax, "Loss vs offered load (22 B payload)", testbed)
        if not reference(testbed):
            _caption(fig, local_note(x))
        _save(fig, outdir, "loss_vs_load", resdir)
    return series


def _loss_ratios(rows, rr, outdir, testbed, resdir=None) -> dict:
    nominal = rows[rows.metric == "nominal_offered_pps"].groupby("point").value.median()
    missing = sorted(set(rr.point) - set(nominal.index))
    if missing:
        raise DataError(f"Failed to plot loss_vs_load: points {', '.join(missing)} have ratio rows but no "
                        "nominal_offered_pps row (regenerate the tables with `xenobench experiment aggregate "
                        "<results dir>`)")
    ratios, ref = _ratios_by({float(nominal[pt]): rr[rr.point == pt] for pt in rr.point.unique()}, "loss_vs_load")
    scale, unit = _rate_unit(pd.Series(list(ratios)))
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        series, pairs = _ratio_panel(ax, ratios, {k: i for i, k in enumerate(ratios)}, ref)
        series = {"ratios": series, "reference": ref}
        ax.set_xticks(range(len(ratios)), [f"{k / scale:g}" for k in ratios], fontsize=7)
        ax.set_xlim(-0.6, len(ratios) - 0.4)
        ax.set_xlabel(f"nominal offered load ({unit}, the rate requested of the generator, paced)")
        ax.set_ylabel(f"delivered rate relative to {ref}")
        _legend_outside(ax)
        _title(ax, "Delivered rate relative to the reference vs offered load", testbed)
        _caption(fig, "Each rate offered, paced, through every LB in interleaved blocks: below 1 the LB lost frames "
                 "the reference did not at that rate. "
                 + interval_note("each LB's own loss, which holds the machine's (loss_pct in the CSV)") + pairs_note(pairs))
        if not reference(testbed):
            _caption(fig, local_note(rows))
        _save(fig, outdir, "loss_vs_load", resdir)
    return series


def rtt_boxes(samples: pd.DataFrame, medians: dict) -> tuple[list[str], list[dict]]:
    """Each path's box, the one computation the figure both draws and prints: matplotlib's
    boxplot_stats of its probes (quartiles, whiskers at 1.5 IQR), its median the study's where the
    summary has one (`medians`: the median of the repetitions' medians, interpolated inside the
    capture's timestamp bins by pcap_rtt, as `xenobench compare` reads it), else the probes'. Paths
    in order: no LB first."""
    lbs = sorted(samples.lb.unique(), key=lambda lb: (lb != "none", lb))
    stats = []
    for lb in lbs:
        st = boxplot_stats(samples[samples.lb == lb].value.to_numpy(dtype=float))[0]
        if lb in medians:
            st["med"] = float(medians[lb])
        stats.append(st)
    return lbs, stats


def _separate_labels(fig, ax, pad: float = 4.0) -> None:
    """Widen the axes until no two of its x tick labels or value labels (annotations) overlap; the
    figure grows by as much, the other axes of its row keep their width. Two labels anchored dx
    pixels apart that overlap by w (each padded by pad / 2) need the axes w / dx wider."""
    for _ in range(5):  # the margins and the space between axes take a share of each widening: repeat
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        anchored = [(t.get_position()[0], t) for t in ax.get_xticklabels()] + [(t.xy[0], t) for t in ax.texts
                                                                                if hasattr(t, "xy")]
        boxes = [(x, t.get_window_extent(r).padded(pad / 2, 0)) for x, t in anchored if t.get_visible() and t.get_text()]
        px = ax.bbox.width / abs(np.diff(ax.get_xlim())[0])  # pixels per data unit
        k = 1.0
        for i, (xa, a) in enumerate(boxes):
            for xb, b in boxes[i + 1:]:
                inter = a.intersection(a, b)
                if abs(xa - xb) > 1e-9 and inter is not None and inter.width > 0 and inter.height > 0.5:
                    k = max(k, 1 + inter.width / (abs(xa - xb) * px))
        if k == 1.0:
            return
        gs = ax.get_subplotspec().get_gridspec()
        row = [a for a in fig.axes if a.get_subplotspec() is not None and a.get_subplotspec().get_gridspec() is gs]
        widths = [a.bbox.width * (k if a is ax else 1.0) for a in sorted(row, key=lambda a: a.bbox.x0)]
        fig.set_figwidth(fig.get_figwidth() + ax.bbox.width * (k - 1) / fig.dpi)
        gs.set_width_ratios(widths)


def rtt_lb_vs_none(resdir, outdir, testbed) -> dict:
    """RTT with and without load balancer: spread over all probes and CDF (paper Fig. 7)."""
    s = _rows(resdir, "rtt_samples", "rtt_lb_vs_none")
    s = _need(s[s.metric == "rtt_us"], "rtt_lb_vs_none (samples of " + ", ".join(drawn_by().get("rtt_lb_vs_none", ()))
              + ")", resdir)
    medians = {}
    try:  # the summary's median is interpolated inside the capture's timestamp bins (pcap_rtt)
        m = _rows(resdir, "rtt_summary", "rtt_lb_vs_none")
        m = m[m.metric == "rtt_median_us"]
        medians = m.groupby("lb").value.median().to_dict()
    except DataError:
        pass
    lbs, boxes = rtt_boxes(s, medians)
    data = [s[s.lb == lb].value.to_numpy() for lb in lbs]
    series: dict = {lb: st["med"] for lb, st in zip(lbs, boxes)}
    pub = {r.lb: float(r.value) for r in _published("rtt_xenoflow_median_us", testbed=testbed)
           + _published("rtt_none_median_us", testbed=testbed)}
    for r in _published("rtt_added_ebpf_us", testbed=testbed):
        if "none" in pub:  # published only as "+9.3 µs over no LB"
            pub.setdefault("ebpf", pub["none"] + float(r.value))
    series["published"] = pub
    with plt.rc_context(STYLE):
        cols = lbs + [lb for lb in pub if lb not in lbs]
        # a column per path needs room for its tick label and its two value labels side by side
        width = max(9.6, 4.6 + 1.15 * len(cols))
        fig, (ax, cdf) = plt.subplots(1, 2, figsize=(width, 3.9),
                                      gridspec_kw={"width_ratios": [max(1.1, 0.3 * len(cols)), 1]})
        ax.bxp(boxes, positions=range(len(lbs)), showfliers=False, widths=0.5,
               medianprops=dict(color=COLORS[1], lw=2))
        for i, st in enumerate(boxes):  # the drawn median right of its box, the published one left of it
            ax.annotate(f"{st['med']:.1f}", (i + 0.27, st["med"]), xytext=(1, 0), textcoords="offset points",
                        fontsize=7, ha="left", va="center")
        for i, lb in enumerate(cols):
            if lb in pub:
                ax.scatter([i], [pub[lb]], marker="*", s=110, zorder=6, **PUB)
                ax.annotate(f"{pub[lb]:.1f}", (i - 0.27, pub[lb]), xytext=(-1, 0), textcoords="offset points",
                            fontsize=7, ha="right", va="center")
        if pub:
            ax.scatter([], [], marker="*", s=110, label="published median (paper Fig. 7)", **PUB)
        ax.plot([], [], color=COLORS[1], lw=2, label=("measured median, over the repetitions' medians" if medians
                                                       else "measured median of all probes")
                + "\n(box: quartiles of all probes, whiskers 1.5 IQR)")
        ax.set_xticks(range(len(cols)), [_name(lb).replace(" (", "\n(").replace("/", "/\n")
                                         + ("" if lb in lbs else "\n(published only:\nno LB + added)")
                                         for lb in cols], fontsize=7 if len(cols) > 4 else 9)
        ax.set_xlim(-0.6, len(cols) - 0.4)
        ax.set_ylabel("DNS RTT (µs)")
        _separate_labels(fig, ax)
        _legend_below(ax, ncols=1)
        for i, (lb, d) in enumerate(zip(lbs, data)):
            xs = np.sort(d)
            cdf.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", color=COLORS[i % len(COLORS)],
                     ls=["-", "--", "-.", ":"][i % 4], label=f"{_name(lb)} (n={len(xs)})")
        allv = np.concatenate(data)
        cdf.set_xlim(np.percentile(allv, 0.2) - 1, np.percentile(allv, 99.5) + 1)
        cdf.set_xlabel("DNS RTT (µs); x-axis cut at the 99.5th percentile")
        cdf.set_ylabel("CDF over probes")
        _legend_outside(cdf)
        _title(ax, "RTT with and without LB", testbed)
        cdf.set_title("CDF")
        _save(fig, outdir, "rtt_lb_vs_none", resdir)
    return series


def hash_split_note(lb: str) -> str | None:
    """The caption of a figure whose splits an LB does not follow (it splits by flow hash: Katran),
    None for a class-based LB (the profile's split is what each backend got)."""
    if not by_hash(lb):
        return None
    return (f"{_name(lb)} splits by flow hash, not by class: the splits name the profile's class split, not "
            "what each backend got; the measured per-backend shares are in the report.")


def rtt_under_load(resdir, outdir, testbed) -> dict:
    """RTT under background load for the splits (thesis Fig. 7.7 / paper Fig. 8)."""
    m = _rows(resdir, "rtt_summary", "rtt_under_load")
    m = m[m.split.notna() & m.background_pps.notna() & (m.lb != "none")]
    _need(m[m.metric == "rtt_median_us"], "rtt_under_load (rtt_median_us summaries with a split and background)", resdir)
    if m.lb.nunique() > 1:  # the paired design measured several LBs: the figure is the thesis's, XenoFlow's
        m = m[m.lb == ("xenoflow" if (m.lb == "xenoflow").any() else sorted(m.lb.unique())[0])]
    # the level without background was measured once (split "none"): the origin of every split's line
    origin, split_rows = m[m.split == NO_SPLIT], m[m.split != NO_SPLIT]
    if len(split_rows):
        m = pd.concat([split_rows] + [origin.assign(split=sp) for sp in split_rows.split.unique()])
    splits = sorted(m.split.unique(), key=lambda s: (SPLIT_ORDER.index(s) if s in SPLIT_ORDER else 99, s))
    series: dict = {}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        levels = m.background_pps.dropna() / 1e6
        span = float(levels.max() - levels.min()) or 1.0
        for i, split in enumerate(splits):
            # small horizontal offset per split so the bars do not overlap (0.6 Mpps on 0-90 Mpps)
            off = (i - (len(splits) - 1) / 2) * span / 150
            g = m[m.split == split]
            stat = {k: g[g.metric == f"rtt_{k}_us"].groupby("background_pps").value.median()
                    for k in ("median", "p25", "p75")}
            med = stat["median"].sort_index()
            med.index = med.index / 1e6
            series[split] = med
            st = _style(i)
            xs = med.index + np.where(med.index > 0, off, 0.0)  # no background: one point, every split's origin
            # on the axis at 0, drawn whole (not clipped at the axes' edge)
            ax.plot(xs, med.values, **st, label=SPLIT_LABELS.get(split, split), clip_on=False)
            if len(stat["p25"]) == len(stat["median"]) and len(stat["p75"]) == len(stat["median"]):
                ax.vlines(xs, stat["p25"].sort_index().values, stat["p75"].sort_index().values, color=st["color"],
                          lw=1, alpha=0.6, clip_on=False)
        ax.set_xlim(left=0)  # a load is never below 0 (the margin would start the axis there)
        ax.set_xlabel("background load (Mpps)")
        ax.set_ylabel("DNS RTT through the LB (µs)\nmedian, bars: quartiles")
        top = m[m.metric.isin(["rtt_median_us", "rtt_p75_us"])].value.max()
        ax.set_ylim(0, top * 1.15)  # headroom for the note at the top
        note = hash_split_note(m.lb.iloc[0]) if len(m) else None
        ax.text(0.01, 0.97, "published (paper Sec. 5.5, text): flat below 90 Mpps, slight increase at 90 Mpps",
                transform=ax.transAxes, fontsize=7, va="top")
        _legend_outside(ax, title="background split" + (" (the profile's classes)" if note else ""))
        if note:
            _caption(fig, note)
        elif testbed == "thesis":
            _caption(fig, ASSUMED_SPLIT + "; the thesis's figure calls the uneven case 70/30.")
        _title(ax, "RTT under background load", testbed)
        _save(fig, outdir, "rtt_under_load", resdir)
    return series


def _compare_ratios(c: pd.DataFrame, outdir, testbed, resdir=None) -> dict:
    """lb_comparison from the paired design's rows: each LB's rate relative to the reference with
    its CI; "not distinguishable" written where the CI includes 1, no difference drawn."""
    rr = ratio_rows(c)
    got, ref = _ratios_by({0: rr}, "lb_comparison")
    ratios = got[0]
    vs = sorted((r for r in ratios if r.reference == ref), key=lambda r: r.lb)
    pay = sorted(int(p) for p in rr.payload_bytes.dropna().unique())
    series: dict = {"ratios": {}, "reference": ref, "measured": {}, "published": {}, "prog_ns": {}}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(6.4, 3.2 + 1.1 * len(vs)), 3.9))
        for i, r in enumerate(vs):
            ok = r.verdict != NOT_DISTINGUISHABLE
            ax.errorbar([i], [r.median], yerr=[[r.median - r.ci_low], [r.ci_high - r.median]], fmt="o",
                        color=COLORS[0], mfc=COLORS[0] if ok else "white", capsize=4,
                        label=("median ratio, bar: 95 % CI" if i == 0 else None))
            ax.annotate(f"{r.median:.3f}" if ok else "not\ndistinguishable", (i + 0.08, r.median), xytext=(2, 0),
                        textcoords="offset points", fontsize=7, ha="left", va="center")
            series["ratios"][r.lb] = {"median": r.median, "ci": [r.ci_low, r.ci_high], "verdict": r.verdict,
                                      "rounds": r.rounds, "repetitions": r.repetitions}
        ax.axhline(1, color="grey", ls="--", lw=1.0, label=f"{_name(ref)}: 1 by definition")
        ax.set_xticks(range(len(vs)), [_name(r.lb).replace(" (", "\n(") for r in vs], fontsize=8)
        ax.set_xlim(-0.5, len(vs) - 0.2)
        ax.set_ylabel(f"rate relative to {ref}")
        _legend_outside(ax)
        _title(ax, "Load balancers relative to the reference" + (f", {pay[0] + HEADERS} B frames" if len(pay) == 1 else ""),
               testbed)
        pairs = [f"{_name(r.lb)} vs {_name(r.reference)}: "
                 + (NOT_DISTINGUISHABLE if r.verdict == NOT_DISTINGUISHABLE else f"{r.verdict}, {r.median:.3f}")
                 for r in ratios if r.reference != ref]
        _caption(fig, interval_note() + pairs_note(pairs))
        if not reference(testbed):
            _caption(fig, local_note(c))
        _save(fig, outdir, "lb_comparison", resdir)
    return series


def interleaved(rows: pd.DataFrame) -> bool:
    """Whether rate rows come from the paired design (xenobench.measure.rank): its LBs alternate in
    blocks of one trial, so a point's repetition holds rows of several LBs; a trial of the separate
    design (the thesis's protocol) holds one LB's."""
    if rows.empty:
        return False
    return bool(rows.groupby(["experiment", "point", "repetition"], dropna=False).lb.nunique().max() > 1)


def above_reference_note(above: list[str], ref: str, same_trials: bool) -> str:
    """lb_comparison's caption on the LBs whose absolute rate lies above the reference's, by the
    design the rows came from (`same_trials`: interleaved)."""
    head = ", ".join(_name(k) for k in above) + f" measured above {_name(ref)}: "
    if same_trials:
        return head + ("the LBs alternated in blocks of the same trials (the interleaved design), so the machine's "
                       "drift between trials is not in this difference; the reference is no bound either: whether an "
                       f"LB differs from it is its ratio's CI (the rate_vs_{ref}_ rows of the CSV), not two medians.")
    return head + ("each LB was measured in trials of its own, minutes apart, and the machine's state between them "
                   "moves absolute rates by more than that; the wire is a reference measured the same way, not a bound.")


def lb_comparison(resdir, outdir, testbed) -> dict:
    """Max packet rate at 64 B frames: measured (median over repetitions, bar min-max) next to
    published (thesis Fig. 7.6). Where the compare table holds the paired design's ratios, each LB's
    rate relative to the reference with its CI instead (_compare_ratios)."""
    try:
        c = _rows(resdir, "compare", "lb_comparison")
    except DataError:
        c = None
    if c is not None and len(ratio_rows(c)):
        return _compare_ratios(c, outdir, testbed, resdir)
    pub = read_published()
    pub = pub[pub.metric.str.startswith("compare_") & (pub.unit == "Mpps")]
    if not reference(testbed):
        pub = pub.iloc[0:0]
    measured: dict = {}
    bars: dict = {}  # (min, max, runs) per measured bar
    paired: dict = {}  # per measured bar: whether its rows come from the interleaved design (interleaved)
    prog_ns: dict = {}  # xenobench.progcost: the LB program's own time per frame, where measured
    rate_tables: list = []  # the tables read (their generator column names the caption's generator)
    try:
        pps = _rows(resdir, "pps", "pps_vs_payload")
        rate_tables.append(pps)
        x = pps[pps.metric == "rx_pps"]
        for lb, g in x.groupby("lb"):
            paired[lb] = paired[f"{lb} @{THESIS_64B_PAYLOAD} B payload"] = interleaved(x)
            for p, key in ((22, lb), (THESIS_64B_PAYLOAD, f"{lb} @{THESIS_64B_PAYLOAD} B payload")):
                v = g[g.payload_bytes == p].value
                if len(v):  # 22 B: a 64 B frame without FCS; 24 B: what the thesis's 92.8 Mpps bar measured
                    med, lo, hi = spread(v / 1e6)
                    measured[key], bars[key] = med, (lo, hi, len(v))
    except DataError:
        pass
    if c is not None:  # a live comparison trial (max rate at 64 B frames) overrides the pps-derived value
        rate_tables.append(c)
        rates = c[c.metric.isin(["max_pps", "rx_pps"])]
        for lb, g in rates.groupby("lb"):
            paired[lb] = interleaved(rates)
            med, lo, hi = spread(g.value / 1e6)
            measured[lb], bars[lb] = med, (lo, hi, len(g))
        for lb, g in c[c.metric == "lb_prog_ns_per_frame"].groupby("lb"):
            prog_ns[lb] = float(g.value.median())
    if not measured and pub.empty:
        raise DataError(f"Failed to plot lb_comparison: no 64 B rates in {resdir} and no published values")
    refs = [k for k in measured if _is_reference(k)]
    above = {k: v for k, v in measured.items() if refs and " @" not in k and k not in refs
             and v > measured[refs[0]]}
    same_trials = bool(refs) and all(paired.get(k) for k in [*above, refs[0]])
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(7.2, 2.0 + 1.2 * (len(measured) + len(pub))), 3.9))
        labels, vals = [], []
        for i, (k, v) in enumerate(measured.items()):
            lb, _, at = k.partition(" @")
            labels.append(f"{_tick(lb)}\nmeasured\n" + (at if at else "64 B frame")
                          + (f"\nprogram {prog_ns[lb]:.0f} ns" if lb in prog_ns and not at else ""))
            vals.append(v)
            lo, hi, n = bars[k]
            ax.bar(i, v, width=0.7, color="lightgrey" if _is_reference(lb) else COLORS[0], edgecolor="black",
                   hatch="//" if _is_reference(lb) else None)
            ax.errorbar([i], [v], yerr=[[v - lo], [hi - v]], color="black", capsize=4, lw=1.2)
            ax.annotate(f"{v:.1f}" if v >= 10 else f"{v:.3g}", (i, hi), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
        # published numbers (the thesis's own, and Katran's and Kakao's from other works on other
        # hardware) are markers right of a separator, never bars beside the measured ones: a measured
        # Katran and the published 38 Mpps are two different things
        n_measured = len(vals)
        for p in pub.itertuples():
            i = len(vals)
            labels.append(f"{_name(p.lb)}\npublished".replace(" ", "\n", 1)
                          + ("\n(thesis)" if p.lb == "xenoflow" else "\n(other work,\nother hardware)"))
            vals.append(float(p.value))
            ax.scatter([i], [p.value], marker="*", s=140, zorder=5, **PUB)
            ax.annotate(f"{p.value:.1f}", (i, p.value), xytext=(0, 7), textcoords="offset points", ha="center",
                        va="bottom", fontsize=8)
        if n_measured and len(vals) > n_measured:
            ax.axvline(n_measured - 0.5, color="grey", lw=0.8, ls=":")
        ax.set_xticks(range(len(vals)), labels, fontsize=7)
        ax.set_ylabel("max packet rate (Mpps)")
        top = max([hi for lo, hi, n in bars.values()] + vals)
        ax.set_ylim(0, top * 1.15)
        runs = [n for lo, hi, n in bars.values()]
        handles = [Patch(facecolor=COLORS[0], edgecolor="black",
                         label=f"measured ({testbed}): {runs_label(runs)}"
                               + (", bar: min-max" if runs and max(runs) > 1 else ""))]
        if refs:
            handles.append(Patch(facecolor="lightgrey", edgecolor="black", hatch="//",
                                 label=f"{_name(refs[0])}: measured in "
                                       + ("blocks of the same trials as the LBs" if same_trials
                                          else "trials of its own")))
        if len(pub):
            handles.append(plt.Line2D([], [], ls="none", marker="*", ms=11, **PUB,
                                      label="published, read from thesis Fig. 7.6 (not measured here)"))
        _legend_outside(ax, handles=handles)
        _title(ax, "Load balancers at 64 B", testbed)
        if above:
            _caption(fig, above_reference_note(list(above), refs[0], same_trials))
        if reference(testbed):
            _caption(fig, "The thesis labels its 92.8 Mpps bar '64 B' but measured it at 24 B UDP payload "
                          "(66 B frame without FCS); a 64 B frame (22 B payload) runs at the higher plateau.")
        else:
            _caption(fig, SHARED_MACHINE_NOTE)
            _caption(fig, local_note(pd.concat(rate_tables) if rate_tables else None))
        _save(fig, outdir, "lb_comparison", resdir)
    return {"measured": measured, "spread": {k: (lo, hi) for k, (lo, hi, n) in bars.items()}, "above_reference":
            sorted(above), "prog_ns": prog_ns, "published": dict(zip(pub.lb, pub.value.astype(float)))}


def _rate_unit(values) -> tuple[float, str]:
    """Mpps where the values reach millions (the thesis's scale), kpps below (a namespace testbed)."""
    return (1e6, "Mpps") if max(values, default=0) >= 1e6 else (1e3, "kpps")


#: the ndr_pdr table's goals whose paired ratios the figure draws (xenobench.measure.search: <goal>_vs_<ref>_<part>)
NDR_PDR_GOALS = (("ndr", "NDR"), ("pdr", "PDR"))


def ndr_pdr(resdir, outdir, testbed) -> dict:
    """NDR and PDR per LB and frame size (MLRsearch, xenobench.search): median over repetitions,
    each repetition a dot; on the thesis's testbed the published loss onset (thesis Sec. 7.4.3:
    ~95 Mpps, paper Sec. 5.2: 96.7 Mpps, 22 B payload) as a band. Where the table holds the paired
    design's ratios (the LBs' searches taking turns), each LB's NDR and PDR relative to the
    reference's per frame size with its CI instead (the absolute values stay in the CSV)."""
    rows = _rows(resdir, "ndr_pdr", "ndr_pdr")
    if any(len(ratio_rows(rows, m)) for m, _ in NDR_PDR_GOALS):
        return _ndr_pdr_ratios(rows, outdir, testbed, resdir)
    x = _need(rows[rows.metric.isin(["ndr_pps", "pdr_pps"])], "ndr_pdr", resdir)
    groups = sorted({(lb, int(p)) for lb, p in zip(x.lb, x.payload_bytes)}, key=lambda g: (g[1], g[0]))
    scale, unit = _rate_unit(x.value)
    onset = [float(r.value) for r in _published("loss_onset_mpps", testbed=testbed)]
    series: dict = {}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        for j, (metric, label) in enumerate((("ndr_pps", "NDR (0 % loss)"), ("pdr_pps", "PDR (0.5 % loss)"))):
            for i, (lb, pl) in enumerate(groups):
                v = x[(x.metric == metric) & (x.lb == lb) & (x.payload_bytes == pl)].value.to_numpy() / scale
                if not len(v):
                    continue
                med = float(np.median(v))
                series.setdefault(metric, {})[f"{lb}@{pl}"] = med * scale
                xpos = i + (j - 0.5) * 0.38
                ax.bar(xpos, med, width=0.36, color=COLORS[j], edgecolor="black", label=label if i == 0 else None)
                ax.scatter(np.full(len(v), xpos), v, s=12, color="black", zorder=5)
                ax.text(xpos, med * 1.01, f"{med:.4g}", ha="center", va="bottom", fontsize=7)
        if onset:
            lo, hi = min(onset), max(onset)
            ax.axhspan(lo, hi, color="black", alpha=0.12, zorder=0)
            ax.axhline(hi, **PUB, ls="--", lw=1, label=f"published loss onset {lo:g}-{hi:g} Mpps (22 B payload)")
            series["published_onset_mpps"] = [lo, hi]
        ax.set_xticks(range(len(groups)), [f"{_name(lb)}\n{pl + 42} B frame" for lb, pl in groups])
        ax.set_ylabel(f"throughput ({unit})")
        top = max([float(x.value.max()) / scale] + ([max(onset)] if onset else []))
        ax.set_ylim(0, top * 1.18)
        _legend_outside(ax, fontsize=7)
        _title(ax, "NDR / PDR by MLRsearch", testbed)
        n = x.groupby(["lb", "payload_bytes"]).repetition.nunique().min()
        _caption(fig, f"Bars: median over {n}+ searches (dots: each search); NDR/PDR = the highest offered load "
                      "MLRsearch classed as a lower bound at 0 % / 0.5 % loss (its relevant lower bound; the "
                      "exceed ratio, widths and every trial are in each search's search.json)."
                      + ("" if reference(testbed) else " " + local_note(x)), y=-0.1)
        _save(fig, outdir, "ndr_pdr", resdir)
    return series


def _ndr_pdr_ratios(rows, outdir, testbed, resdir=None) -> dict:
    ratios: dict = {}
    refs = []
    for m, name in NDR_PDR_GOALS:
        rr = ratio_rows(rows, m)
        if len(rr):
            got, ref = _ratios_by({f"{name}, {int(p) + HEADERS} B": rr[rr.payload_bytes == p]
                                   for p in sorted(rr.payload_bytes.dropna().unique())}, "ndr_pdr", m)
            ratios.update(got)
            refs.append(ref)
    ref = max(sorted(set(refs)), key=refs.count)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        series, pairs = _ratio_panel(ax, ratios, {k: i for i, k in enumerate(ratios)}, ref, join=False, over="")
        series = {"ratios": series, "reference": ref}
        ax.set_xticks(range(len(ratios)), [k.replace(", ", "\n") + " frame" for k in ratios], fontsize=7)
        ax.set_xlim(-0.6, len(ratios) - 0.4)
        ax.set_ylabel(f"NDR / PDR relative to {ref}")
        _legend_outside(ax)
        _title(ax, "NDR / PDR by MLRsearch relative to the reference", testbed)
        _caption(fig, "Each repetition searched every LB at once, their trials taking turns with the port's program "
                 "switched to the trial's LB; below 1 the LB's NDR (PDR) lay below the reference's in the same "
                 "stretch of the machine's time; hollow: not distinguishable (the CI includes 1). "
                 + interval_note("the absolute NDR and PDR (ndr_pps, pdr_pps in the CSV)",
                                 " only (each ratio one repetition's, no rounds within it)") + pairs_note(pairs))
        if not reference(testbed):
            _caption(fig, local_note(rows))
        _save(fig, outdir, "ndr_pdr", resdir)
    return series


def _paired_panel(ax, diffs: list, title: str) -> dict:
    vs = sorted((d for d in diffs if d.reference == "none"), key=lambda d: d.lb)
    out = {}
    for i, d in enumerate(vs):
        ok = d.verdict != latency.NOT_DISTINGUISHABLE
        ax.errorbar([i], [d.median_us], yerr=[[d.median_us - d.ci_low_us], [d.ci_high_us - d.median_us]],
                    fmt="o", mfc=COLORS[0] if ok else "white", color=COLORS[0], capsize=4)
        ax.annotate(f"{d.median_us:+.1f} µs\n[{d.ci_low_us:+.1f}, {d.ci_high_us:+.1f}]"
                    + ("" if ok else "\nnot distinguishable\nfrom no LB"),
                    (i, d.median_us), xytext=(10, -6), textcoords="offset points", fontsize=7)
        out[d.lb] = {"median_us": d.median_us, "ci": [d.ci_low_us, d.ci_high_us], "verdict": d.verdict}
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(range(len(vs)), [_name(d.lb).replace(" (", "\n(") for d in vs], fontsize=8)
    ax.set_xlim(-0.5, len(vs) - 0.2)
    ax.set_ylabel("added RTT vs no LB (µs)")
    ax.set_title(title)
    return out


def rtt_added(resdir, outdir, testbed) -> dict:
    """The paired design (xenobench.latency): each LB's added RTT against no LB as the median of
    per-round paired differences with its bootstrap 95 % CI; the ranking names an order only where
    the pair's CI excludes zero ('~' = not distinguishable)."""
    x = _need(_rows(resdir, "rtt_paired", "rtt_added"), "rtt_added (paired RTT rows)", resdir)
    if not latency.diffs_from_rows(x):
        raise DataError(f"Failed to plot rtt_added: the rtt_paired rows in {resdir} hold no complete paired difference "
                        "(rtt_vs_<ref>_median_us, _ci_low_us, _ci_high_us, _pairs); regenerate the tables with "
                        f"`xenobench experiment aggregate {resdir}`")
    idle = x[x.split.isna()]
    load = x[x.split.notna()]
    series: dict = {}
    with plt.rc_context(STYLE):
        ncol = 1 + (not load.empty)
        fig, axes = plt.subplots(1, ncol, figsize=(5.6 * ncol, 3.9), squeeze=False)
        ax = axes[0][0]
        lines = []
        for (exp, pt), g in idle.groupby(["experiment", "point"], sort=False):  # a panel per point
            srv = g.server.fillna("-").iloc[0]
            key = f"idle/{srv}" if exp == drawn_by()["rtt_added"][0] else f"{exp}/{pt}"
            diffs = latency.diffs_from_rows(g)
            series[key] = _paired_panel(ax, diffs, f"idle, server {srv}" if key.startswith("idle/") else key)
            lines.append(f"{key.replace('/', ', server ', 1) if key.startswith('idle/') else key}: "
                         f"{latency.ranking(diffs)}")
            series[key]["ranking"] = latency.ranking(diffs)
        _title(ax, "Added RTT, paired", testbed)
        if not load.empty:
            lx = axes[0][1]
            keys = sorted({(sp, bg) for sp, bg in zip(load.split, load.background_pps)}, key=lambda k: (k[1], k[0]))
            for i, lb in enumerate(sorted(set(load.lb))):
                pts = []
                for j, (sp, bg) in enumerate(keys):
                    g = load[(load.split == sp) & (load.background_pps == bg)]
                    d = next((d for d in latency.diffs_from_rows(g) if d.lb == lb and d.reference == "none"), None)
                    if d is None:
                        continue
                    ok = d.verdict != latency.NOT_DISTINGUISHABLE
                    lx.errorbar([j + 0.12 * i], [d.median_us], yerr=[[d.median_us - d.ci_low_us], [d.ci_high_us - d.median_us]],
                                fmt=MARKERS[i], color=COLORS[i], mfc=COLORS[i] if ok else "white", capsize=3,
                                label=_name(lb) if not pts else None)
                    pts.append(d.median_us)
                    series.setdefault("load", {})[f"{lb}/{sp}/{bg:g}"] = {"median_us": d.median_us, "verdict": d.verdict}
            scale, unit = _rate_unit([k[1] for k in keys])
            # a share of a measured capacity has as many digits as the packet count: three are read
            upright = len(keys) > 4  # one line each, turned upright, where more than four share the axis
            lx.set_xticks(range(len(keys)), [f"{sp}{' ' if upright else chr(10)}{bg / scale:.3g} {unit}" for sp, bg in keys],
                          fontsize=7, rotation=90 if upright else 0)
            lx.axhline(0, color="grey", lw=0.8)
            lx.set_ylabel("added RTT vs no LB (µs)")
            lx.set_title("under background load (hollow: CI includes 0)")
            lx.legend(fontsize=7)
        _caption(fig, "Median of per-round differences to no LB, bar: bootstrap 95 % CI (seed recorded in "
                      "rtt_paired.csv). Ranking ('<' only where the pair's CI excludes zero, '~' not "
                      "distinguishable): " + "; ".join(lines), y=-0.08)
        _save(fig, outdir, "rtt_added", resdir)
    return series


UPDATE_LATENCIES = (("remove_control_ms", "removal: command → LB's report"),
                    ("remove_last_frame_ms", "removal: command → last frame at removed"),
                    ("add_control_ms", "add-back: command → LB's report"),
                    ("add_first_frame_ms", "add-back: command → first frame at added"))


def update_latency(resdir, outdir, testbed) -> dict:
    """One backend change's latencies per LB (xenobench.measure.update): every change a dot, the median a
    bar, on a log axis (the LBs differ by orders of magnitude)."""
    x = _rows(resdir, "update", "update_latency")
    x = _need(x[x.metric.isin([m for m, _ in UPDATE_LATENCIES])], "update_latency", resdir)
    lbs = sorted(x.lb.unique())
    series: dict = {}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 3.9))
        w = 0.8 / len(UPDATE_LATENCIES)
        for j, (m, lab) in enumerate(UPDATE_LATENCIES):
            for i, lb in enumerate(lbs):
                v = x[(x.lb == lb) & (x.metric == m)].value.to_numpy()
                v = v[v > 0]  # a log axis: a last frame before the command has no place on it (counted in the table)
                if not len(v):
                    continue
                series[(lb, m)] = sorted(v.tolist())
                pos = i + (j - (len(UPDATE_LATENCIES) - 1) / 2) * w
                ax.scatter(np.full(len(v), pos), v, s=10, color=COLORS[j], alpha=0.6,
                           label=lab if i == 0 or (lb, m) not in series else None)
                ax.hlines(np.median(v), pos - w / 2, pos + w / 2, color=COLORS[j])
        ax.set_yscale("log")
        ax.set_xticks(range(len(lbs)), [_name(lb) for lb in lbs])
        ax.set_ylabel("time after the command (ms)")
        h, l_ = ax.get_legend_handles_labels()
        seen = dict(zip(l_, h))
        ax.legend(seen.values(), seen.keys(), loc="upper left", fontsize=7)
        _title(ax, "One backend change under load", testbed)
        _caption(fig, "Each dot one change; bars: medians. Frame times are stamped where the frames arrive "
                      "(the backends' XDP sink, bpf_ktime_get_ns = the harness's CLOCK_MONOTONIC).", y=-0.06)
        _save(fig, outdir, "update_latency", resdir)
    return series


def update_disruption(resdir, outdir, testbed) -> dict:
    """Per LB: frames delivered to a removed backend after the LB reported the change done (median
    and every cycle), and the cycles' loss."""
    x = _rows(resdir, "update", "update_disruption")
    x = _need(x[x.metric.isin(["after_done_frames", "loss_pct"])], "update_disruption", resdir)
    lbs = sorted(x.lb.unique())
    series: dict = {}
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.4))
        for ax, (m, ylab) in zip(axes, (("after_done_frames", "frames to the removed backend\nafter done"),
                                        ("loss_pct", "frames lost over the cycle (%)"))):
            for i, lb in enumerate(lbs):
                v = x[(x.lb == lb) & (x.metric == m)].value.to_numpy()
                series[(lb, m)] = sorted(v.tolist())
                if len(v):
                    ax.bar(i, np.median(v), width=0.6, color=COLORS[i % len(COLORS)], alpha=0.5)
                    ax.scatter(np.full(len(v), i), v, s=10, color="black")
            ax.set_xticks(range(len(lbs)), [_name(lb) for lb in lbs], fontsize=8)
            ax.set_ylabel(ylab)
        _title(axes[0], "Disruption", testbed)
        _caption(fig, "Frames after done: whole 1 ms buckets after the LB's report (a lower bound). An LB whose "
                      "connection table keeps flows on a removed backend (Katran's LRU) keeps delivering to it.",
                 y=-0.06)
        _save(fig, outdir, "update_disruption", resdir)
    return series


def update_throughput(resdir, outdir, testbed) -> dict:
    """Received rate during a burst of changes vs the changes per second achieved, per LB; the
    same LB without changes at 0."""
    x = _rows(resdir, "update_burst", "update_throughput")
    x = _need(x[x.metric == "rx_pps"], "update_throughput", resdir)
    series: dict = {}
    scale, unit = _rate_unit(x.value)
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        for i, (lb, g) in enumerate(sorted(x.groupby("lb"), key=lambda t: t[0])):
            med = g.groupby("changes_per_s").value.median().sort_index()
            series[lb] = {float(k): float(v) for k, v in med.items()}
            ax.plot(med.index, med.values / scale, label=_name(lb), **_style(i))
            ax.scatter(g.changes_per_s, g.value / scale, s=8, color=COLORS[i % len(COLORS)], alpha=0.4)
        bg = x.background_pps.dropna()
        if len(bg):
            ax.axhline(float(bg.median()) / scale, ls=":", color="grey", label="background offered")
        ax.set_xlabel("backend changes per second requested (0: none)")
        ax.set_ylabel(f"received ({unit})")
        ax.set_ylim(bottom=0)
        ax.legend()
        _title(ax, "Throughput during a burst of changes", testbed)
        _caption(fig, local_note(x), y=-0.06)
        _save(fig, outdir, "update_throughput", resdir)
    return series


def install_points(x) -> dict:
    """update_install's rows → {lb: {entries: [(entries/s, apply entries/s or None)...]}}: one
    change's rows share their source (xenobench.aggregate)."""
    out: dict = {}
    for (lb, _), g in x.groupby(["lb", "source"]):
        m = dict(zip(g.metric, g.value))
        if "entries" in m and "entries_per_s" in m:
            out.setdefault(lb, {}).setdefault(float(m["entries"]), []).append(
                (float(m["entries_per_s"]), float(m["apply_entries_per_s"]) if "apply_entries_per_s" in m else None))
    return out


def update_install(resdir, outdir, testbed) -> dict:
    """Installation rate per LB (xenobench.measure.update (b)): entries per second against the entries of
    one change, log-log, from the command to the LB's report (line: medians) and by the LB's own
    apply time (dashed)."""
    x = _rows(resdir, "update_install", "update_install")
    x = _need(x[x.metric.isin(["entries", "entries_per_s", "apply_entries_per_s"])], "update_install", resdir)
    pts = install_points(x)
    if not pts:
        raise DataError(f"Failed to plot update_install: no change in {resdir} has both its entries and entries_per_s "
                        "rows (one change's rows share their source)")
    series: dict = {}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        for i, lb in enumerate(sorted(pts)):
            by = pts[lb]
            n = sorted(by)
            med = [float(np.median([r for r, _ in by[e]])) for e in n]
            series[lb] = dict(zip(n, med))
            ax.plot(n, med, label=f"{_name(lb)}: command → report", **_style(i))
            ax.scatter([e for e in n for _ in by[e]], [r for e in n for r, _ in by[e]], s=8,
                       color=COLORS[i % len(COLORS)], alpha=0.4)
            ap = [(e, float(np.median([a for _, a in by[e] if a]))) for e in n if any(a for _, a in by[e])]
            if ap:
                series[f"{lb}/apply"] = dict(ap)
                ax.plot(*zip(*ap), ls="--", color=COLORS[i % len(COLORS)], label=f"{_name(lb)}: its own apply time")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("entries in one change")
        ax.set_ylabel("entries per second")
        ax.legend(fontsize=7)
        _title(ax, "Installation rate under load", testbed)
        _caption(fig, "An entry: XenoFlow a class's pipe entry (remove + add), eBPF a class's slot, Katran a ring "
                      "slot whose real changed. Each change and its way back are samples.", y=-0.06)
        _save(fig, outdir, "update_install", resdir)
    return series


def rate_ranking(resdir, outdir, testbed) -> dict:
    """The interleaved rate design (xenobench.measure.rank): each LB's rate as a ratio to the reference's
    (the wire) in the same round, median over the rounds of the valid repetitions with its bootstrap
    95 % CI; hollow where the CI includes 1 (not distinguishable from the reference). Beside it the
    same ratio of rx per CPU-second of the DUT's NAPI thread, where recorded (its CPU share divided out)."""
    x = _need(_rows(resdir, "rate_ranking", "rate_ranking"), "rate_ranking (interleaved rate rows)", resdir)
    series: dict = {}
    combos = [(pay, m) for pay in sorted(set(x.payload_bytes.dropna())) for m in ("rate", "rate_per_cpu")
              if ratios_from_rows(x[x.payload_bytes == pay], m)]
    if not combos:
        raise DataError(f"Failed to plot rate_ranking: its rows in {resdir} hold no complete ratio (rate_vs_<ref>_median, "
                        f"_ci_low, _ci_high, _rounds); regenerate the tables with `xenobench experiment aggregate {resdir}`")
    what = {"rate": "rx/s", "rate_per_cpu": "rx per DUT CPU-s"}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6.8, 3.9))
        pairs, ref = [], "wire"
        for j, (pay, m) in enumerate(combos):
            rs = ratios_from_rows(x[x.payload_bytes == pay], m)
            ref = reference_of(rs)  # the reference kind, not whichever pair sorts first
            vs = sorted((r for r in rs if r.reference == ref), key=lambda r: r.lb)
            for i, r in enumerate(vs):
                ok = r.verdict != NOT_DISTINGUISHABLE
                xi = i + 0.2 * j
                ax.errorbar([xi], [r.median], yerr=[[r.median - r.ci_low], [r.ci_high - r.median]],
                            fmt=MARKERS[j], color=COLORS[j], mfc=COLORS[j] if ok else "white", capsize=4,
                            label=f"{what[m]}, {pay:g} B payload" if i == 0 else None)
                ax.annotate(f"{r.median:.3f}", (xi, r.median), xytext=(6, -3), textcoords="offset points", fontsize=7)
                series[f"{m}/{r.lb}/{pay:g}"] = {"median": r.median, "ci": [r.ci_low, r.ci_high],
                                                 "verdict": r.verdict, "rounds": r.rounds,
                                                 "repetitions": r.repetitions}
            ax.set_xticks(range(len(vs)), [_name(r.lb).replace(" (", "\n(") for r in vs], fontsize=8)
            pairs += [f"{_name(r.lb)} vs {_name(r.reference)} ({what[m]}): {r.median:.3f} "
                      f"({r.verdict if r.verdict == NOT_DISTINGUISHABLE else r.verdict + ' by the CI'})"
                      for r in rs if r.reference != ref]
        ax.axhline(1, color="grey", lw=0.8, ls="--")
        ax.set_ylabel(f"ratio to {_name(ref)}")
        _legend_outside(ax, fontsize=7)
        _title(ax, "Rate ratio to the reference, interleaved blocks", testbed)
        _caption(fig, "Per round: an LB's rate over the reference's (same backends and split) in the same round, "
                      "the LB port's XDP program switched atomically between blocks. Dot: median over the rounds, bar: "
                      "95 % CI (bootstrap of the repetitions, then of their rounds), "
                      "hollow: CI includes 1. " + "; ".join(pairs)
                      + ("" if reference(testbed) else " " + local_note(x)), y=-0.14)
        _save(fig, outdir, "rate_ranking", resdir)
    return series


def _distribution_shares(resdir, outdir, testbed) -> dict:
    """xenobench.plot_distribution's figure, drawn with this module's helpers, which it is handed (it
    imports nothing of this module: no import circle)."""
    import sys
    from .plot_distribution import distribution_shares
    return distribution_shares(resdir, outdir, testbed, sys.modules[__name__])


# every figure function, by name; which are drawn, from which experiments' rows: the definitions'
# `figures` (drawn_by)
FIGURES = {"pps_vs_payload": pps_vs_payload, "bandwidth_vs_payload": bandwidth_vs_payload,
           "loss_vs_load": loss_vs_load, "rtt_lb_vs_none": rtt_lb_vs_none,
           "rtt_under_load": rtt_under_load, "lb_comparison": lb_comparison, "ndr_pdr": ndr_pdr,
           "rtt_added": rtt_added, "update_latency": update_latency, "update_disruption": update_disruption,
           "update_throughput": update_throughput, "update_install": update_install,
           "rate_ranking": rate_ranking, "distribution_shares": _distribution_shares}


# the figures the thesis's own raw data feeds (rules/thesis.smk; xenobench.ingest writes their tables)
THESIS_FIGURES = ("pps_vs_payload", "bandwidth_vs_payload", "loss_vs_load", "rtt_lb_vs_none", "rtt_under_load",
                  "lb_comparison")


def _trial_outcomes(resdir, experiments) -> dict[str, tuple[int, int, dict[str, int]]] | None:
    """Per experiment (valid trials, all trials, {reason: trials}) from the results tree's
    result.json files (the chosen attempt's reasons of each invalid trial); None where the
    directory holds no trials (a copied table directory): then from invalid.csv, which aggregate
    writes beside the tables (invalid trials only)."""
    root = Path(resdir)
    out: dict[str, tuple[int, int, dict[str, int]]] = {}
    found = False
    for exp in experiments:
        valid, total, reasons = 0, 0, {}
        for d in sorted((root / "trials" / exp).glob("*/rep-*")):
            t = TrialDir(d)
            if not t.complete:
                continue
            found = True
            try:
                res = t.read_result()
            except DataError as e:
                total += 1
                reasons[f"unreadable result ({e})"] = reasons.get(f"unreadable result ({e})", 0) + 1
                continue
            total += 1
            if res["valid"]:
                valid += 1
                continue
            chosen = chosen_reasons(res)
            for r in chosen or ["(no reason recorded)"]:
                reasons[str(r)] = reasons.get(str(r), 0) + 1
        out[exp] = (valid, total, reasons)
    if found:
        return out
    inv = root / "invalid.csv"
    if not inv.is_file():
        return None
    try:
        t = pd.read_csv(inv, dtype=str).fillna("")
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        return None
    if not {"experiment", "reasons"} <= set(t.columns):
        return None
    for exp in experiments:
        g = t[t.experiment == exp]
        if len(g):
            reasons: dict[str, int] = {}
            for rs in g.reasons:
                for r in [x.strip() for x in rs.split("; ") if x.strip()] or ["(no reason recorded)"]:
                    reasons[r] = reasons.get(r, 0) + 1
            out[exp] = (0, len(g), reasons)  # invalid.csv lists invalid trials only: the valid ones are unknown
    return out or None


MAX_REASONS = 3  # the most frequent reasons a placeholder names


def invalid_points(resdir, experiment: str) -> dict[str, dict[str, int]]:
    """The measured points of `experiment` whose every completed trial is invalid (none of them is in a
    table, so no figure draws them), capacity points left out (no figure draws those): point id ->
    {check: trials}, the checks of each trial's chosen attempt, block numbers left out
    ("block_3_loss_below_1pct" counts as "block_loss_below_1pct")."""
    out: dict[str, dict[str, int]] = {}
    for pdir in sorted((Path(resdir) / "trials" / experiment).glob("*")):
        checks: dict[str, int] = {}
        valid = total = 0
        for d in sorted(pdir.glob("rep-*")):
            t = TrialDir(d)
            if not t.complete:
                continue
            try:
                res = t.read_result()
            except DataError:
                continue
            if is_capacity_point(res.get("point") or {}):
                break
            total += 1
            if res["valid"]:
                valid += 1
                continue
            seen = {re.sub(r"^block_\d+_", "block_", r.split(":", 1)[0].strip()) for r in chosen_reasons(res)}
            for c in seen or {"(no reason recorded)"}:
                checks[c] = checks.get(c, 0) + 1
        if total and not valid:
            out[pdir.name] = checks
    return out


def invalid_points_note(resdir, experiment: str) -> str | None:
    """A figure's caption line naming the points invalid_points finds, with each one's reasons; None
    where there are none."""
    bad = invalid_points(resdir, experiment)
    if not bad:
        return None
    parts = [f"{p} ({', '.join(f'{c} in {n}' for c, n in sorted(ch.items(), key=lambda kv: (-kv[1], kv[0])))})"
             for p, ch in bad.items()]
    return (f"Not drawn, every trial invalid ({experiment}; the checks that failed, in how many trials; invalid.csv "
            f"has the reasons): {'; '.join(parts)}.")


def why_no_data(resdir, name: str, error: str) -> str:
    """Why a figure has no data, from the results tree where it tells: every trial of its
    experiments invalid (with how many and the most frequent reasons), none run, or valid trials
    but no table (aggregate not run); else the error reading its table."""
    exps = drawn_by().get(name, ())
    outcomes = _trial_outcomes(resdir, exps)
    if not outcomes:
        return error
    parts = []
    for exp in exps:
        if exp not in outcomes:
            continue
        valid, total, reasons = outcomes[exp]
        if total == 0:
            parts.append(f"no trial of {exp} has run ({Path(resdir) / 'trials' / exp} holds no result.json)")
        elif valid == 0:
            top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_REASONS]
            parts.append(f"every trial of {exp} was invalid ({total} of {total}): "
                         + "; ".join(r + (f" ({n} trials)" if n > 1 else "") for r, n in top)
                         + (f"; and {len(reasons) - MAX_REASONS} other reasons" if len(reasons) > MAX_REASONS else ""))
        else:
            parts.append(f"{valid} of {total} trials of {exp} are valid, but its table has no rows for {name}: {error} "
                         f"(make the tables with `xenobench experiment aggregate {resdir}`)")
    return "; ".join(parts) if parts else error


def placeholder(outdir, name: str, testbed: str, reason: str) -> None:
    """A figure that says why it has no data (e.g. every trial of its experiment was invalid), so a
    workflow that promises every figure still finishes and the gap is visible, not silent."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        ax.axis("off")
        ax.text(0.5, 0.5, f"{name}: no data\n\n" + "\n".join(textwrap.wrap(reason, 90)), ha="center", va="center",
                fontsize=8)
        _title(ax, name, testbed)
        _save(fig, outdir, name)


def plot_all(resdir, outdir, testbed=None, progress=print, placeholders: bool = False) -> dict[str, dict]:
    """Every figure the definitions list that the data allows; every other figure is named with the
    reason in one line of `progress`, never fatal and never silent (a figure no definition lists; one
    whose data is missing, and with placeholders=True a figure stating the reason is written in its place)."""
    testbed = testbed or Path(resdir).name
    try:
        Path(outdir).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"Failed to write figures {outdir}: {e.strerror or e}") from None
    out = {}
    listed = drawn_by()
    for name in (n for n in FIGURES if n not in listed):
        progress(f"{name}: not drawn (no experiments/<id>.yaml lists it under `figures`)")
    for name in listed:
        try:
            out[name] = FIGURES[name](resdir, outdir, testbed)
            progress(f"{name}: written")
        except FigureNotWritten:
            raise
        except DataError as e:
            if placeholders:
                why = " ".join(why_no_data(resdir, name, str(e)).split())
                placeholder(outdir, name, testbed, why)
                progress(f"{name}: no data, placeholder written ({why})")
            else:
                progress(f"{name}: skipped ({' '.join(str(e).split())})")
    return out
