"""`xenobench experiment plan|run|aggregate|report`: the measurements of thesis ch. 7."""

import json
import signal
from pathlib import Path

import click


@click.group("experiment")
def experiment_group():
    """Plan and run the measurements, aggregate trials into tidy CSVs, write the run report."""


@experiment_group.command("plan")
@click.option("--only", multiple=True, help="Only this experiment (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One object per point: experiment, point, point_id, trials.")
@click.pass_obj
def plan_cmd(obj, only, as_json):
    """List the points and trial counts of the configured testbed (touches nothing)."""
    from ..errors import ConfigError
    from ..experiments import order, points, repetitions
    from ..layout import point_id
    unknown = [e for e in only if e not in order()]
    if unknown:  # a typo would otherwise plan 0 trials and exit 0
        raise ConfigError(f"Failed to plan experiment {unknown[0]!r}: unknown (known: {', '.join(order())})")
    cfg = obj.config
    rows = [{"experiment": e, "point": p, "point_id": point_id(p), "trials": repetitions(cfg, e)}
            for e in (only or order()) for p in points(cfg, e)]
    if as_json:
        click.echo(json.dumps(rows))
        return
    for e in only or order():
        n, reps = sum(1 for r in rows if r["experiment"] == e), repetitions(cfg, e)
        click.echo(f"{e:9} {n:4} points × {reps} repetitions = {n * reps} trials")
    click.echo(f"{'total':9} {len(rows):4} points, {sum(r['trials'] for r in rows)} trials (testbed {cfg.name})")


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@experiment_group.command("run")
@click.argument("experiment")
@click.argument("point")
@click.option("--results", "results_root", default="results", show_default=True,
              type=click.Path(file_okay=False), help="Results root; trials go to <root>/<testbed>/trials/.")
@click.pass_obj
def run_cmd(obj, experiment, point, results_root):
    """Run every missing repetition of one point (POINT is its id, see `experiment plan`)."""
    from ..experiments import order
    from ..errors import ConfigError
    from ..procedures import find_point, run_point
    if experiment not in order():
        raise ConfigError(f"Failed to run experiment {experiment!r}: unknown (known: {', '.join(order())})")
    pt = find_point(obj.config, experiment, point)
    from ..layout import check_results_root
    # before the testbed goes up, not after
    check_results_root(Path(results_root), obj.config.section("experiments")["min_free_mb"])
    tb = obj.testbed()
    # SIGTERM (Snakemake stopping a job) unwinds like Ctrl-C: the LB, servers and load are stopped
    signal.signal(signal.SIGTERM, _interrupt)
    s = run_point(tb, experiment, pt, Path(results_root), progress=lambda m: click.echo(m, err=True))
    click.echo(json.dumps(s))


@experiment_group.command("retry-invalid")
@click.option("--results", "results_root", default="results", show_default=True,
              type=click.Path(file_okay=False), help="Results root (trials under <root>/<testbed>/trials/).")
@click.option("--only", multiple=True, help="Only this experiment's trials (repeatable).")
@click.option("--dry-run", is_flag=True, help="List the invalid trials, move nothing.")
@click.pass_obj
def retry_invalid_cmd(obj, results_root, only, dry_run):
    """Measure the invalid trials again on the next run: each is moved to <point>/stale/ (kept,
    never deleted) and its point's point.json removed; then `snakemake --cores 1 all` (make all)
    re-runs those points, reusing their valid trials."""
    from ..errors import ConfigError
    from ..experiments import order
    from ..layout import ResultsTree
    from ..trials import retry_invalid
    unknown = [e for e in only if e not in order()]
    if unknown:
        raise ConfigError(f"Failed to retry experiment {unknown[0]!r}: unknown (known: {', '.join(order())})")
    tree = ResultsTree(Path(results_root), obj.config.name)
    if not tree.trials_dir.is_dir():
        raise ConfigError(f"Failed to retry the invalid trials of testbed {obj.config.name}: no trials under "
                          f"{tree.trials_dir} (give --results, or --config of the run)")
    done = retry_invalid(tree, tuple(only), dry_run, progress=lambda m: click.echo(m, err=True))
    verb = "would set aside" if dry_run else "set aside"
    click.echo(f"{len(done)} invalid trial(s) {verb} under {tree.trials_dir}"
               + ("" if dry_run or not done else "; `snakemake --cores 1 all` measures them again"))


@experiment_group.command("aggregate")
@click.argument("resdir", type=click.Path(file_okay=False))
def aggregate_cmd(resdir):
    """Tidy CSVs (pps, loss, rtt_samples, rtt_summary, compare) and invalid.csv from the trials."""
    from ..aggregate import aggregate
    click.echo(json.dumps(aggregate(resdir, progress=lambda m: click.echo(m, err=True))))


@experiment_group.command("report")
@click.argument("resdir", type=click.Path(file_okay=False))
@click.option("--figures", "figdir", required=True, type=click.Path(file_okay=False), help="Figure directory.")
@click.option("--thesis-compare", type=click.Path(dir_okay=False, exists=True),
              help="compare.json of the thesis data (`xenobench compare results/thesis`).")
@click.option("--out", type=click.Path(dir_okay=False), help="Default: RESDIR/report.md.")
def report_cmd(resdir, figdir, thesis_compare, out):
    """Write the run report (figures, invalid trials, wall times, published vs reproduced)."""
    from ..report import write_report
    click.echo(str(write_report(resdir, figdir, thesis_compare, out)))


COMMANDS = [experiment_group]
