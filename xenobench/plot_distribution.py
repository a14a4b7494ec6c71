"""The distribution experiment's figure (experiments/distribution.yaml): each backend's share of a
population's frames, counted where they arrive, per LB and population. A module of its own, entered
in xenobench.plots' FIGURES as `distribution_shares`, which hands it that module (`plots`: its
helpers, STYLE and _save; this module imports nothing of it, so there is no import circle).

    distribution_shares(resdir, outdir, testbed, plots) -> {population: {lb: {backend: median share}}}
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Patch
import pandas as pd

from .fairness import population_of, populations, split_backend
from .lb import LBS

NAME = "distribution_shares"


def share_rows(plots, resdir, figure: str = NAME) -> pd.DataFrame:
    """The per-trial rows of a measure per backend (`<measure>@<backend>`) with their population,
    measure and backend as columns, of the experiments drawing `figure` (plots._rows)."""
    x = plots._rows(resdir, "distribution", figure)
    x = x[x.repetition.notna()]
    parts = x.metric.map(split_backend)
    return x.assign(measure=[p[0] for p in parts], backend=[p[1] for p in parts],
                    population=x.point.map(population_of))


def _ordered(values, known) -> list[str]:
    """The distinct values, those of `known` first in its order (the profile's populations, the
    LB kinds' list), then the others as they come."""
    seen = list(pd.unique(values))
    return [k for k in known if k in seen] + [v for v in seen if v not in known]


def _panel(plots, ax, g: pd.DataFrame, lbs: list[str], backends: list[str]) -> dict:
    """Grouped bars, one group per LB, a bar per backend: the median share over the repetitions,
    whiskers their min-max; the backends file's weight share dashed; Jain's index above each group."""
    width = 0.8 / max(len(backends), 1)
    drawn: dict = {}
    for i, lb in enumerate(lbs):
        for j, b in enumerate(backends):
            v = g[(g.lb == lb) & (g.measure == "frame_share") & (g.backend == b)].value.to_numpy()
            if not len(v):
                continue
            med, lo, hi = plots.spread(v)
            at = i + (j - (len(backends) - 1) / 2) * width
            ax.bar(at, med, width * 0.9, color=plots.COLORS[j % len(plots.COLORS)], yerr=[[med - lo], [hi - med]],
                   capsize=2)
            if hi == 0:  # a bar of height 0 is not seen: say it
                ax.text(at, 0.01, "0", ha="center", va="bottom", fontsize=6)
            drawn.setdefault(lb, {})[b] = med
        if lb not in drawn:
            ax.text(i, 0.5, "not measured", rotation=90, ha="center", va="center", fontsize=6, color="grey")
        jain = g[(g.lb == lb) & (g.metric == "jain_index")].value
        if len(jain):
            ax.text(i, 1.02, f"J {float(jain.median()):.2f}", ha="center", va="bottom", fontsize=7)
    for b in backends:
        w = g[(g.measure == "weight_share") & (g.backend == b)].value
        if len(w):
            ax.axhline(float(w.median()), ls="--", lw=0.8, color="grey")
    ax.set_xticks(range(len(lbs)), [plots._tick(lb) for lb in lbs], fontsize=7, rotation=35, ha="right")
    ax.set_ylim(0, 1.12)
    return drawn


def distribution_shares(resdir, outdir, testbed, plots) -> dict:
    """One panel per population: per LB each backend's share of the frames measured at the backends
    (module docstring)."""
    x = plots._need(share_rows(plots, resdir), NAME, resdir)
    pops, lbs = _ordered(x.population, populations()), _ordered(x.lb, LBS)
    backends = [b for b in pd.unique(x.backend) if isinstance(b, str)]
    reps = x[x.measure == "frame_share"].groupby("point").repetition.nunique()
    series: dict = {}
    with plt.rc_context(plots.STYLE):
        cols = min(3, len(pops))
        rows = -(-len(pops) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols + 1.2, 3.0 * rows + 0.6), squeeze=False, sharey=True,
                                 gridspec_kw={"hspace": 0.6})
        for ax, pop in zip(axes.flat, pops):
            series[pop] = _panel(plots, ax, x[x.population == pop], lbs, backends)
            ax.set_title(pop, fontsize=9)
        for ax in list(axes.flat)[len(pops):]:
            ax.axis("off")
        for ax in axes[:, 0]:
            ax.set_ylabel("share of the frames")
        fig.suptitle(f"Each backend's share of a client population, per LB   [testbed: {testbed}]", fontsize=10)
        if plots.rehearsal_note(testbed):
            plots._caption(fig, plots.rehearsal_note(testbed))
        plots._caption(fig, "Bars: each backend's share of the population's frames counted where they arrive (the "
                            "backends' sink per MAC; on hosts each backend's rx counter), the "
                            f"{plots.runs_label(reps)}, whiskers min-max; dashed: each backend's weight in the "
                            "backends file; J: Jain's index of the shares over the weights (1: as the weights, 1/n: "
                            "one backend got everything). Populations: trex_profiles/population.py.")
        handles = [Patch(color=plots.COLORS[j % len(plots.COLORS)], label=b) for j, b in enumerate(backends)]
        plots._legend_outside(axes[0, -1], handles=handles, title="backend", fontsize=7)
        plots._save(fig, outdir, NAME, resdir)
    return series

