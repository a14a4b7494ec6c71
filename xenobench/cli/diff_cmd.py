"""`xenobench diff A B`: two results trees compared point by point (xenobench.diff)."""

import sys
from pathlib import Path

import click

from ..errors import XenobenchError

WORSE_EXIT = 3  # a point got worse beyond --fail-worse (1: bad data, 2: bad input)


@click.command("diff")
@click.argument("a", type=click.Path(file_okay=False))
@click.argument("b", type=click.Path(file_okay=False))
@click.option("--fail-worse", "fail_worse", type=click.FloatRange(min=0), metavar="PCT",
              help=f"Exit {WORSE_EXIT} when a point is worse (its interval excludes no change) by more than PCT "
                   "(relative change of the medians in %; percentage points for % metrics).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result on stdout instead of the table.")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False), metavar="OUT",
              help="Write one row per comparison (and per key one side measured) to OUT.")
@click.option("--figure", "figure_out", type=click.Path(dir_okay=False), metavar="OUT.png",
              help="Write B/A per point with its interval, coloured by verdict.")
@click.option("--resamples", type=click.IntRange(min=100), default=2000, show_default=True,
              help="Bootstrap draws per comparison.")
@click.option("--seed", type=click.IntRange(min=0), default=1, show_default=True, help="Bootstrap seed (recorded).")
@click.option("--all", "everything", is_flag=True,
              help="List what was not judged as well (keys without an interval, keys one side measured), and "
                   "every point's readiness with what it lacks.")
def diff_cmd(a, b, fail_worse, as_json, csv_out, figure_out, resamples, seed, everything):
    """Compare results tree B with A (two runs, commits or testbeds: directories of tidy CSVs) on
    what both measured: per point and metric B/A of the medians (B-A for us and %) with a 95 %
    interval (bootstrap; for rates of 2-3 repetitions a t interval on their logs), and a verdict:
    better, worse, not distinguishable. What cannot be judged is counted per table; each point's
    publication readiness (xenobench.readiness) is shown where the tree holds its trials."""
    from .. import diff as d, readiness
    res = d.diff(a, b, resamples=resamples, seed=seed)
    marks = {side: _marks(path) for side, path in (("A", a), ("B", b))}
    if as_json:
        click.echo(d.dumps(res, fail_worse, {"readiness": {
            s: (m if isinstance(m, str) else readiness.to_json(m)) for s, m in marks.items()}}))
    else:
        ready = {s: readiness.by_point(m) for s, m in marks.items() if isinstance(m, list)}
        click.echo("\n".join(d.table_lines(res, everything, ready or None) + _readiness_lines(marks, everything)))
    if csv_out:
        click.echo(f"table: {d.write_csv(res, csv_out)}", err=True)
    if figure_out:
        click.echo(f"figure: {d.write_figure(res, figure_out)}", err=True)
    if fail_worse is not None:
        worse = res.worse(fail_worse)
        if worse:
            click.echo(f"xenobench diff: {len(worse)} comparison(s) worse by more than {fail_worse:g}: "
                       + "; ".join(f"{c.where['experiment']}/{c.where['point']} {c.where['lb']} {c.where['metric']} "
                                   f"{c.change:+.1f} {c.change_unit}" for c in worse[:5])
                       + (" ..." if len(worse) > 5 else ""), err=True)
            sys.exit(WORSE_EXIT)


def _marks(path: str) -> list | str:
    """A tree's readiness marks, or why there are none (no trials in it, a record unreadable)."""
    from .. import readiness
    if not (Path(path) / "trials").is_dir():
        return "no trial records in it (a tree of tidy tables only)"
    try:
        return readiness.readiness(path)
    except XenobenchError as e:
        return f"not judged: {e}"


def _readiness_lines(marks: dict, everything: bool) -> list[str]:
    from .. import readiness
    L = []
    for side, m in marks.items():
        if isinstance(m, str):
            L += ["", f"Readiness of {side}: {m}"]
            continue
        L += ["", f"Readiness of {side} (its trials; ready A/B above: pub, local, no):"]
        L += [f"  {x}" for x in (readiness.point_lines(m) if everything else readiness.summary_lines(m))]
    return L


COMMANDS = [diff_cmd]
