"""Two or more results trees in one figure, each run labelled, like npf-compare:
`xenobench plot A B [C...] --out DIR [--label NAME ...]`. In a figure the colour is the LB and the
line style and marker the run; the legend names both. A figure that cannot overlay runs says so in
one line (its single-run figure: `xenobench plot <tree>`; the judged differences: `xenobench diff A B`).

    plot_runs(resdirs, outdir, labels=(), testbed=None, progress=print) -> {name: series}
    run_labels(resdirs, labels=()) -> [label]
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from . import plots
from .errors import ConfigError, DataError
from .results import KINDS, read_sidecar, read_tidy

#: a run's line style and marker, in the order of the trees given (the colour is the LB's)
RUN_STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"), ((0, (1, 3)), "P")]


def _commit(resdir: Path) -> str | None:
    """The commit a tree's tables were written at (their sidecars), shortened ("-dirty" kept); several joined."""
    commits = {str(m["commit"]) for k in KINDS if (m := read_sidecar(resdir, k)) and m.get("commit")}
    return "+".join(sorted(c[:12] + ("-dirty" if c.endswith("-dirty") else "") for c in commits)) or None


def run_labels(resdirs, labels=()) -> list[str]:
    """Each tree's label: `labels` in order where given (one per tree), else the tree's folder name,
    with the commit its tables were written at where two trees share a folder name, else its path."""
    paths = [Path(d) for d in resdirs]
    if labels:
        if len(labels) != len(paths):
            raise ConfigError(f"Failed to plot {len(paths)} results trees: {len(labels)} --label given "
                              f"({', '.join(labels)}); give one per tree, in their order, or none")
        out = list(labels)
    else:
        names = [p.name for p in paths]
        out = [n if names.count(n) == 1 else f"{n} @{_commit(p) or p}" for n, p in zip(names, paths)]
        out = [o if out.count(o) == 1 else str(p) for o, p in zip(out, paths)]
    if len(set(out)) != len(out):
        raise ConfigError(f"Failed to plot {len(paths)} results trees: the labels {', '.join(out)} repeat; "
                          "give distinct --label values")
    return out


def repetitions_label(counts) -> str:
    """plots.runs_label in repetitions: here a run is a results tree."""
    return plots.runs_label(counts).replace(" run", " repetition")


def _rates(runs: dict[str, Path], figure: str) -> dict[str, pd.DataFrame]:
    """Each run's rx_pps rows of a figure's experiments; a run without any is refused by name."""
    out = {}
    for label, d in runs.items():
        x = plots._rows(d, "pps", figure)
        out[label] = x[x.metric == "rx_pps"]
        if out[label].empty:
            raise DataError(f"Failed to plot {figure} of {len(runs)} runs: run {label} ({d}) has no rx_pps rows of "
                            f"{', '.join(plots.drawn_by().get(figure, ()))}")
    return out


def _run_lines(ax, label: str, x: pd.DataFrame, style: tuple, pos: dict, lbs: list[str], scale: float) -> dict:
    """One run's line per LB: the median rx_pps per payload (at `pos`) with its min-max, in the run's
    line style and marker and the LB's colour (the reference grey). Returns {lb: medians / scale}."""
    out = {}
    for lb, g in x.groupby("lb"):
        agg = g.groupby("payload_bytes").value.agg(["median", "min", "max", "count"]).sort_index()
        med = agg["median"] / scale
        med.index = med.index.astype(int)
        out[lb] = med
        color = "grey" if plots._is_reference(lb) else plots.COLORS[lbs.index(lb) % len(plots.COLORS)]
        ax.errorbar([pos[p] for p in med.index], med.values,
                    yerr=[med - agg["min"].values / scale, agg["max"].values / scale - med],
                    ls=style[0], marker=style[1], color=color, capsize=2,
                    label=f"{label}: {plots._name(lb)}, {repetitions_label(agg['count'])}")
    return out


def pps_vs_payload(runs: dict[str, Path], outdir, testbed: str) -> dict:
    """Packet rate vs payload of every run: per run and LB the median rx_pps over its repetitions
    with their min-max, absolute (a paired run's ratios are its single-run figure)."""
    rates = _rates(runs, "pps_vs_payload")
    allx = pd.concat(rates.values())
    payloads = sorted(int(p) for p in allx.payload_bytes.unique())
    pos = {p: i for i, p in enumerate(payloads)}
    lbs = sorted(allx.lb.unique())
    scale, unit = plots._rate_unit(allx.value)
    series: dict = {"unit": unit, "runs": {}}
    with plt.rc_context(plots.STYLE):
        fig, ax = plt.subplots(figsize=(7.4, 3.9))
        for j, (label, x) in enumerate(rates.items()):
            shift = (j - (len(rates) - 1) / 2) * min(0.1, 0.5 / len(rates))  # runs side by side at a payload
            series["runs"][label] = _run_lines(ax, label, x, RUN_STYLES[j % len(RUN_STYLES)],
                                               {p: i + shift for p, i in pos.items()}, lbs, scale)
        plots._payload_ticks(ax, payloads)
        ax.set_ylabel(f"packet rate at the backends ({unit})")
        ax.set_ylim(bottom=0)
        plots._legend_outside(ax, title="run: LB", fontsize=7)
        ax.set_title(f"Packet rate vs payload, {len(runs)} runs   [testbed: {testbed}]")
        trees = [str(d) for d in runs.values()]
        plots._caption(fig, "Line style and marker: the run; colour: the LB; bars: min-max over the run's repetitions. "
                            "Runs measured at other times differ by the machine's state as well as by what changed; "
                            f"`xenobench diff {trees[0]} {trees[1]}`" + (" (two trees at a time)" if len(trees) > 2 else "")
                            + " judges each difference with an interval.")
        if any(plots.interleaved(x) for x in rates.values()):
            plots._caption(fig, "Runs of the paired design are drawn by their absolute rates (rx_pps) here; their "
                                "rates relative to the reference are each run's own pps_vs_payload.")
        plots._save(fig, outdir, "pps_vs_payload")
    return series


#: the figures that overlay runs, by name (the others say they draw one run)
OVERLAYS = {"pps_vs_payload": pps_vs_payload}


def _testbeds(runs: dict[str, Path]) -> str:
    """The testbeds the runs' rows name (each table's testbed column), else the trees' folder names."""
    found: list[str] = []
    for d in runs.values():
        for k in KINDS:
            try:
                found += [t for t in read_tidy(d, k).testbed.unique() if t not in found]
                break
            except DataError:
                continue
    return ", ".join(found or [d.name for d in runs.values()])


def plot_runs(resdirs, outdir, labels=(), testbed: str | None = None, progress=print) -> dict[str, dict]:
    """Every figure the definitions list (plots.drawn_by), drawn from all runs at once where it can
    overlay them (OVERLAYS); every other figure, and one without data, is named with the reason in one line."""
    if len(resdirs) < 2:
        raise ConfigError(f"Failed to plot runs: {len(resdirs)} results tree given; a comparison needs two or more")
    runs = dict(zip(run_labels(resdirs, labels), (Path(d) for d in resdirs)))
    testbed = testbed or _testbeds(runs)
    out: dict[str, dict] = {}
    for name in plots.drawn_by():
        fn = OVERLAYS.get(name)
        if fn is None:
            progress(f"{name}: not drawn: it draws one run (overlaid: {', '.join(OVERLAYS)}; `xenobench plot <tree>` "
                     "draws it for each)")
            continue
        try:
            out[name] = fn(runs, outdir, testbed)
            progress(f"{name}: written ({', '.join(runs)})")
        except plots.FigureNotWritten:
            raise
        except DataError as e:
            progress(f"{name}: skipped ({' '.join(str(e).split())})")
    return out
