"""`xenobench ingest thesis`, `xenobench compare`, `xenobench plot`."""

import functools
import json
import sys

import click


@click.group("ingest")
def ingest_group():
    """Bring raw measurements into the tidy results schema."""


@ingest_group.command("thesis")
@click.argument("datadir", type=click.Path(file_okay=False))
@click.option("--out", "outdir", required=True, type=click.Path(file_okay=False),
              help="Directory for the tidy CSVs and provenance.json (e.g. results/thesis).")
@click.option("--lb", help="Load balancer the captures went through (default: DATADIR/manifest.yaml, else xenoflow).")
@click.option("--server", help="DNS server that answered the probes (default: manifest, else reflector).")
@click.option("--testbed", help="Testbed label of every row (default: manifest, else thesis).")
@click.option("--split-map", "split_map", multiple=True, metavar="X_Y=NAME",
              help="Name of the split in rtt_NNm_X_Y files (repeatable; default 100_0=single, 0_100=worst, X_Y=X/Y).")
@click.option("--timeout", "timeout_s", type=float,
              help="Seconds a probe waits for its answer before it counts as lost (default: dns.prober.timeout_s).")
def ingest_thesis_cmd(datadir, outdir, lb, server, testbed, split_map, timeout_s):
    """Ingest raw data laid out like the thesis's (pps/, loss/, rtt/ as in ../shared/thesis-data;
    any subset). Every file is used or listed with the reason it was skipped or refused."""
    from ..ingest import ingest_thesis
    written = ingest_thesis(datadir, outdir, progress=lambda s: click.echo(s, err=True), lb=lb, server=server,
                            testbed=testbed, split_map=split_map, timeout_s=timeout_s)
    click.echo(json.dumps(written))


@click.command("compare")
@click.argument("resdir", type=click.Path(file_okay=False))
@click.option("--tolerance", "tolerance", type=float, default=5.0, show_default=True,
              help="Largest relative deviation (%) that still counts as reproduced.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
@click.option("--latex", "latex_out", type=click.Path(dir_okay=False), metavar="OUT.tex",
              help="Also write the table as LaTeX (booktabs; \\input it, \\usepackage{booktabs,tabularx}).")
def compare_cmd(resdir, tolerance, as_json, latex_out):
    """Each published number next to the reproduced one; exit 1 if any is beyond tolerance."""
    from ..compare import compare, failed
    rows = compare(resdir, tolerance)  # ConfigError (exit 2) unless the tolerance is finite and >= 0
    if latex_out:
        from .. import latex
        from pathlib import Path
        name = Path(resdir).name
        out = latex.write(latex_out, [latex.compare_table(rows, f"Published vs reproduced ({name}, tolerance "
                                                                f"{tolerance:g} %)", f"tab:published-vs-reproduced-{name}")],
                          f"xenobench compare {resdir} --tolerance {tolerance:g}")
        click.echo(f"LaTeX: {out}", err=True)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        for r in rows:
            verdict = ("ok  " if r["ok"] else "FAIL") if r["gating"] else ("(ok)" if r["ok"] else "(no)")
            ci = f"  95 % CI [{r['ci'][0]:g}, {r['ci'][1]:g}], {r['verdict']}" if "ci" in r else ""  # paired rows
            num = isinstance(r["reproduced"], (int, float))  # a shape not claimed: a sentence, and why
            rep = f"{r['reproduced']:>10.4g}" if num else str(r["reproduced"])
            dev = f"{r['deviation_pct']:+8.2f} %" if num else "       —"
            why = f"  ({r['why']})" if r.get("why") else ""
            click.echo(f"{verdict} {r['metric']:34} published {r['published']:>8g} reproduced "
                       f"{rep} {r['unit']:9} {dev}  {r['source']}{ci}{why}")
        click.echo(f"tolerance {tolerance} %; (..) = informational, does not set the exit status")
    if failed(rows):
        sys.exit(1)


@click.command("plot")
@click.argument("resdirs", nargs=-1, required=True, type=click.Path(file_okay=False), metavar="RESDIR [RESDIR...]")
@click.option("--out", "outdir", required=True, type=click.Path(file_okay=False), help="Figure directory.")
@click.option("--testbed", help="Label on every figure (default: the results directory's name; with several, "
                                "the testbeds their rows name).")
@click.option("--label", "labels", multiple=True, metavar="NAME",
              help="With several RESDIRs: each run's name in the figures, one per RESDIR in their order (default: "
                   "the folder's name, with its tables' commit where two share one).")
@click.option("--placeholders", is_flag=True,
              help="Write a figure stating the reason where the data is missing (the workflow uses this; one RESDIR).")
def plot_cmd(resdirs, outdir, testbed, labels, placeholders):
    """Write every figure the experiments' definitions list (PNG and PDF; xenobench.plots.drawn_by) that
    the tidy results allow; fails if none could be written (each figure's reason is printed), unless
    --placeholders. With two or more RESDIRs, the runs in one figure each, labelled (xenobench.plot_runs:
    a figure that draws one run only says so)."""
    from ..errors import ConfigError, DataError
    progress = functools.partial(click.echo, err=True)
    if len(resdirs) > 1:
        if placeholders:
            raise ConfigError(f"Failed to plot {len(resdirs)} results trees: --placeholders stands in for one tree's "
                              "missing figures; give one RESDIR with it, or drop it")
        from ..plot_runs import plot_runs
        done = plot_runs(resdirs, outdir, labels, testbed, progress=progress)
    else:
        if labels:
            raise ConfigError(f"Failed to plot {resdirs[0]}: --label names the runs of a comparison; give two or "
                              "more RESDIRs with it, or use --testbed for one")
        from ..plots import plot_all
        done = plot_all(resdirs[0], outdir, testbed, progress=progress, placeholders=placeholders)
    if not done and not placeholders:
        raise DataError(f"Failed to plot {' '.join(resdirs)}: no figure had the data it needs (reasons above"
                        + ("" if len(resdirs) > 1 else "; --placeholders writes a figure stating each reason instead")
                        + ")")
    click.echo(json.dumps(sorted(done)))


COMMANDS = [ingest_group, compare_cmd, plot_cmd]
