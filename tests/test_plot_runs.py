"""Two results trees in one figure (xenobench.plot_runs, `xenobench plot A B --out DIR`): from two
copies of the small fixture's pps table (tests/fixtures/results/small, the second's rates halved),
pps_vs_payload draws a line per run and LB with that run's medians, the run's own style, the
legend naming run and LB; every figure that draws one run says so in one line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xenobench import plot_runs, plots
from xenobench.results import read_sidecar, read_tidy, sidecar_path, write_tidy

from .test_plots_layout import check_layout, figures  # noqa: F401  (fixture)

SMALL = Path(__file__).parent / "fixtures" / "results" / "small"


def two_trees(root: Path) -> tuple[Path, Path]:
    """before/pps.csv: the fixture's; after/pps.csv: its received rates halved."""
    a, b = root / "before", root / "after"
    pps = read_tidy(SMALL, "pps")
    write_tidy("pps", pps, a, how="tests/test_plot_runs.py: the small fixture's pps table")
    half = pps.copy()
    for c in ("value", "measured_pps"):
        half.loc[half.metric == "rx_pps", c] *= 0.5
    write_tidy("pps", half, b, how="tests/test_plot_runs.py: the small fixture's pps table, rx_pps halved")
    return a, b


def expected_medians(d: Path) -> dict[str, dict[int, float]]:
    x = read_tidy(d, "pps")
    x = x[x.metric == "rx_pps"]
    return {lb: {int(p): v / 1e6 for p, v in g.groupby("payload_bytes").value.median().items()}
            for lb, g in x.groupby("lb")}


def test_pps_vs_payload_draws_each_run_with_its_values(tmp_path, figures):  # noqa: F811
    a, b = two_trees(tmp_path)
    msgs = []
    s = plot_runs.plot_runs([a, b], tmp_path / "f", progress=msgs.append)
    assert list(s) == ["pps_vs_payload"] and s["pps_vs_payload"]["unit"] == "Mpps"
    fig = figures["pps_vs_payload"]
    ax = fig.axes[0]
    payloads = sorted({p for t in (a, b) for m in expected_medians(t).values() for p in m})
    drawn = {c.get_label(): c for c in ax.containers}
    styles = {}
    for run, tree in (("before", a), ("after", b)):
        for lb, med in expected_medians(tree).items():
            label = next(k for k in drawn if k.startswith(f"{run}: {plots._name(lb)}, "))
            line = drawn[label].lines[0]
            assert list(line.get_ydata()) == pytest.approx([med[p] for p in sorted(med)]), label
            assert [payloads[round(x)] for x in line.get_xdata()] == sorted(med), label
            styles.setdefault(run, set()).add((line.get_linestyle(), line.get_marker()))
            assert line.get_color() == drawn[next(k for k in drawn if k.startswith(f"before: {plots._name(lb)}, "))
                                              ].lines[0].get_color(), "an LB keeps its colour across runs"
    assert len(styles["before"]) == len(styles["after"]) == 1 and styles["before"] != styles["after"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "after: XenoFlow, median of 2 repetitions per point" in legend
    assert ax.get_legend().get_title().get_text() == "run: LB"
    check_layout(fig, "pps_vs_payload of two runs")
    one_run = [m for m in msgs if not m.startswith("pps_vs_payload:")]
    assert sorted(m.split(":", 1)[0] for m in one_run) == sorted(set(plots.drawn_by()) - set(plot_runs.OVERLAYS))
    assert "bandwidth_vs_payload: not drawn: it draws one run (overlaid: pps_vs_payload; `xenobench plot <tree>` " \
           "draws it for each)" in one_run


def _set_commit(tree: Path, commit: str) -> None:
    meta = read_sidecar(tree, "pps")
    sidecar_path(tree, "pps").write_text(json.dumps({**meta, "commit": commit}))


def test_run_labels_default_to_folder_then_commit_and_take_overrides(tmp_path):
    a, b = two_trees(tmp_path)
    assert plot_runs.run_labels([a, b]) == ["before", "after"]
    same = tmp_path / "x" / "before"  # another run's tree of the same name
    write_tidy("pps", read_tidy(a, "pps"), same, how="test")
    _set_commit(a, "1111111111112222")
    _set_commit(same, "3333333333334444-dirty")
    assert plot_runs.run_labels([a, same]) == ["before @111111111111", "before @333333333333-dirty"]
    _set_commit(same, "1111111111112222")  # same name, same commit: the paths tell them apart
    assert plot_runs.run_labels([a, same]) == [str(a), str(same)]
    assert plot_runs.run_labels([a, b], ("v1", "v2")) == ["v1", "v2"]
    with pytest.raises(plot_runs.ConfigError) as e:
        plot_runs.run_labels([a, b], ("v1",))
    assert str(e.value) == ("Failed to plot 2 results trees: 1 --label given (v1); give one per tree, in their order, "
                            "or none")


def test_cli_plots_two_trees_with_labels(tmp_path):
    a, b = two_trees(tmp_path)
    out = tmp_path / "fig"
    p = subprocess.run([sys.executable, "-m", "xenobench", "plot", str(a), str(b), "--out", str(out),
                        "--label", "v1", "--label", "v2"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == '["pps_vs_payload"]'
    assert (out / "pps_vs_payload.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "pps_vs_payload: written (v1, v2)" in p.stderr.splitlines()
    bad = subprocess.run([sys.executable, "-m", "xenobench", "plot", str(a), "--out", str(out), "--label", "v1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert f"Failed to plot {a}: --label names the runs of a comparison" in bad.stderr
