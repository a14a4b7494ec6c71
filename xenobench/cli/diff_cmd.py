"""`xenobench diff A B`: two results trees compared point by point (xenobench.diff)."""

import sys

import click

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
def diff_cmd(a, b, fail_worse, as_json, csv_out, figure_out, resamples, seed):
    """Compare results tree B with A (two runs, commits or testbeds: directories of tidy CSVs) on
    what both measured: per point and metric B/A of the medians (B-A for us and %) with a bootstrap
    95 % interval, and a verdict: better, worse, not distinguishable. Keys only one side measured
    are listed apart."""
    from .. import diff as d
    res = d.diff(a, b, resamples=resamples, seed=seed)
    if as_json:
        click.echo(d.dumps(res, fail_worse))
    else:
        click.echo("\n".join(d.table_lines(res)))
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


COMMANDS = [diff_cmd]
