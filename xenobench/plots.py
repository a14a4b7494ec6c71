"""The paper's figures from tidy CSVs only. Every function draws one figure for any testbed in
the schema, overlays published values where they exist (marked as such), writes PNG and PDF, and
returns the series it plotted so tests can check the numbers rather than the pixels."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .compare import PUBLISHED  # noqa: E402
from .errors import DataError  # noqa: E402
from .results import line_rate_pps, read_tidy  # noqa: E402

STYLE = {"figure.figsize": (6.4, 3.8), "font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
         "savefig.bbox": "tight", "savefig.dpi": 150, "legend.fontsize": 8}
PUB = dict(marker="*", s=90, color="black", zorder=5, label="published")


def _published() -> pd.DataFrame:
    return pd.read_csv(PUBLISHED)


def _save(fig, outdir: Path, name: str) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    for ext in ("png", "pdf"):
        fig.savefig(outdir / f"{name}.{ext}")
    plt.close(fig)


def _label(ax, testbed: str, title: str) -> None:
    ax.set_title(f"{title}  [testbed: {testbed}]", fontsize=10)


def pps_vs_payload(resdir, outdir, testbed) -> dict:
    pps = read_tidy(resdir, "pps")
    x = pps[pps.metric == "rx_pps"]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        series = {}
        for lb, g in x.groupby("lb"):
            med = g.groupby("payload_bytes").value.median().sort_index() / 1e6
            series[lb] = med
            ax.plot(range(len(med)), med.values, "o-", label=f"{lb} (median of {g.repetition.nunique()} runs)")
        payloads = sorted(x.payload_bytes.unique())
        lr = np.array([line_rate_pps(p) for p in payloads]) / 1e6
        series["line_rate"] = pd.Series(lr, index=payloads)
        ax.plot(range(len(payloads)), lr, "--", color="grey",
                label="100 Gbit/s line rate incl. preamble+IFG (thesis curve omitted them)")
        ax.set_xticks(range(len(payloads)), [f"{p + 42} ({p})" for p in payloads], fontsize=7, rotation=90)
        ax.set_xlabel("frame bytes without FCS (UDP payload)")
        ax.set_ylabel("Mpps at the backends")
        pub = _published()
        for m, rng in (("pps_small_payload_mpps", [p for p in payloads if p < 23]),
                       ("pps_large_payload_mpps", [p for p in payloads if 23 <= p <= 64])):
            v = pub[pub.metric == m].value
            if len(v) and rng:
                ax.scatter([payloads.index(p) for p in rng], [float(v.iloc[0])] * len(rng), **PUB)
        h, l = ax.get_legend_handles_labels()
        uniq = dict(zip(l, h))
        ax.legend(uniq.values(), uniq.keys())
        ax.set_ylim(bottom=0)
        _label(ax, testbed, "Packet rate vs payload")
        _save(fig, Path(outdir), "pps_vs_payload")
    return series


def bandwidth_vs_payload(resdir, outdir, testbed) -> dict:
    pps = read_tidy(resdir, "pps")
    x = pps[pps.metric == "rx_pps"]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        series = {}
        for lb, g in x.groupby("lb"):
            med = g.groupby("payload_bytes").value.median().sort_index()
            gbps = med * (med.index + 42 + 4 + 20) * 8 / 1e9  # layer-1 bits on the wire
            series[lb] = gbps
            ax.plot(med.index, gbps.values, "o-", label=f"{lb} (layer-1 Gbit/s)")
        ax.axhline(100, ls="--", color="grey", label="100 Gbit/s line rate")
        series["line_rate_gbps"] = 100.0
        ax.set_xscale("log", base=2)
        ax.set_xlabel("UDP payload bytes")
        ax.set_ylabel("Gbit/s (frame + FCS + preamble + IFG)")
        ax.legend()
        _label(ax, testbed, "Bandwidth vs payload")
        _save(fig, Path(outdir), "bandwidth_vs_payload")
    return series


def loss_vs_load(resdir, outdir, testbed) -> dict:
    loss = read_tidy(resdir, "loss")
    x = loss[loss.metric == "loss_pct"].copy()
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        series = {}
        for lb, g in x.groupby("lb"):
            g = g.assign(offered=(g.offered_pps / 1e6).round(1))
            med = g.groupby("offered").value.median().sort_index()
            series[lb] = med
            ax.plot(med.index, med.values, "o-", label=f"{lb} (median)")
            ax.scatter(g.offered, g.value, s=8, alpha=0.4)
        v = _published()
        v = v[v.metric == "loss_onset_mpps"].value
        if len(v):
            ax.axvline(float(v.iloc[0]), color="black", ls=":", label=f"published loss onset ≈ {float(v.iloc[0])} Mpps")
        ax.set_xlabel("offered load (Mpps, measured at the generator)")
        ax.set_ylabel("loss %")
        ax.legend()
        _label(ax, testbed, "Loss vs offered load")
        _save(fig, Path(outdir), "loss_vs_load")
    return series


def rtt_lb_vs_none(resdir, outdir, testbed) -> dict:
    s = read_tidy(resdir, "rtt_samples")
    s = s[(s.metric == "rtt_us") & s.split.isna()]
    if s.empty:
        raise DataError(f"Failed to plot rtt_lb_vs_none: no idle-path RTT samples in {resdir}")
    with plt.rc_context(STYLE):
        fig, (ax, cdf) = plt.subplots(1, 2, figsize=(9, 3.8))
        series = {}
        lbs = sorted(s.lb.unique(), key=lambda l: (l != "none", l))
        data = [s[s.lb == lb].value.values for lb in lbs]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(range(1, len(lbs) + 1), ["no LB" if l == "none" else l for l in lbs])
        for i, (lb, d) in enumerate(zip(lbs, data), 1):
            series[lb] = float(np.median(d))
            ax.annotate(f"{np.median(d):.1f} µs", (i, np.median(d)), textcoords="offset points",
                        xytext=(18, 0), fontsize=8)
            xs = np.sort(d)
            cdf.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=f"{'no LB' if lb == 'none' else lb} (n={len(xs)})")
        ax.set_ylabel("RTT µs (box: quartiles, whiskers 1.5 IQR)")
        cdf.set_xlabel("RTT µs")
        cdf.set_ylabel("CDF")
        cdf.set_xlim(0, np.percentile(np.concatenate(data), 99.5))
        cdf.legend()
        _label(ax, testbed, "RTT with and without LB")
        _save(fig, Path(outdir), "rtt_lb_vs_none")
    return series


def rtt_under_load(resdir, outdir, testbed) -> dict:
    m = read_tidy(resdir, "rtt_summary")
    m = m[(m.metric == "rtt_median_us") & m.split.notna()]
    if m.empty:
        raise DataError(f"Failed to plot rtt_under_load: no RTT-under-load summaries in {resdir}")
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        series = {}
        for split, g in m.groupby("split"):
            med = g.groupby("background_pps").value.median().sort_index()
            med.index = med.index / 1e6
            series[split] = med
            ax.plot(med.index, med.values, "o-", label=split)
        ax.set_xlabel("background load (Mpps)")
        ax.set_ylabel("median RTT µs")
        ax.legend(title="split (share to the DNS backend / other)")
        if testbed == "thesis":
            ax.text(0.01, 0.02, "split from file names rtt_NNm_X_Y, assuming X % went to the DNS backend",
                    transform=ax.transAxes, fontsize=7)
        _label(ax, testbed, "RTT under background load")
        _save(fig, Path(outdir), "rtt_under_load")
    return series


def lb_comparison(resdir, outdir, testbed) -> dict:
    pub = _published()
    pub = pub[pub.metric.str.startswith("compare_")]
    measured = {}
    try:
        pps = read_tidy(resdir, "pps")
        x = pps[(pps.metric == "rx_pps") & (pps.payload_bytes == 64)]
        measured = (x.groupby("lb").value.median() / 1e6).to_dict()
    except DataError:
        pass
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        labels, vals, colors = [], [], []
        for lb, v in measured.items():
            labels.append(f"{lb}\nmeasured ({testbed})")
            vals.append(v)
            colors.append("tab:blue")
        for p in pub.itertuples():
            labels.append(f"{p.lb}\npublished ({p.how})")
            vals.append(float(p.value))
            colors.append("lightgrey")
        ax.bar(range(len(vals)), vals, color=colors, edgecolor="black")
        ax.set_xticks(range(len(vals)), labels, fontsize=7)
        ax.set_ylabel("Mpps at 64 B")
        _label(ax, testbed, "Load balancers at 64 B (grey: published values)")
        _save(fig, Path(outdir), "lb_comparison")
    return {"measured": measured, "published": dict(zip(pub.lb, pub.value))}


FIGURES = {"pps_vs_payload": pps_vs_payload, "bandwidth_vs_payload": bandwidth_vs_payload,
           "loss_vs_load": loss_vs_load, "rtt_lb_vs_none": rtt_lb_vs_none,
           "rtt_under_load": rtt_under_load, "lb_comparison": lb_comparison}


def plot_all(resdir, outdir, testbed=None, progress=print) -> dict[str, dict]:
    """Every figure the data allows; a figure whose data is missing is reported, not fatal."""
    testbed = testbed or Path(resdir).name
    out = {}
    for name, fn in FIGURES.items():
        try:
            out[name] = fn(resdir, outdir, testbed)
            progress(f"{name}: written")
        except DataError as e:
            progress(f"{name}: skipped ({e})")
    return out
