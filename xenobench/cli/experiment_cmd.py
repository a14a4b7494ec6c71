"""`xenobench experiment plan|run|aggregate|summary|report`: the measurements of thesis ch. 7."""

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
    from ..experiments import order, plan, points, repetitions
    from ..layout import point_id
    unknown = [e for e in only if e not in order()]
    if unknown:  # a typo would otherwise plan 0 trials and exit 0
        raise ConfigError(f"Failed to plan experiment {unknown[0]!r}: unknown (known: {', '.join(order())})")
    cfg = obj.config
    plan(cfg, list(only) or None)  # refuses what `experiment run` and the workflow refuse, with their line
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


def _duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s" if s >= 60 \
        else f"{s} s"


class StudyProgress:
    """Where the whole study stands, from the results tree: trials done of those planned, and the
    time left at each experiment's mean trial time so far (a trial's wall time: from its params.json
    to its result.json, settle, retries and cool-down included; an experiment without a finished
    trial counts the mean of all)."""

    def __init__(self, cfg, results_root: Path):
        from ..experiments import plan
        from ..layout import ResultsTree
        tree = ResultsTree(Path(results_root), cfg.name)
        self.trials = [(t.experiment, tree.trial(t.experiment, t.point, t.repetition)) for t in plan(cfg)]
        self.seconds: dict[Path, float] = {}

    def done(self) -> int:
        return sum(1 for _, t in self.trials if t.complete)

    def line(self) -> str:
        per: dict[str, list[float]] = {}
        left: dict[str, int] = {}
        for e, t in self.trials:
            if not t.complete:
                left[e] = left.get(e, 0) + 1
                continue
            if t.path not in self.seconds:
                try:
                    self.seconds[t.path] = max(0.0, t.result.stat().st_mtime - t.params.stat().st_mtime)
                except OSError:
                    continue
            per.setdefault(e, []).append(self.seconds[t.path])
        n, todo = len(self.trials), sum(left.values())
        head = f"[study] {n - todo}/{n} trials done"
        if not todo:
            return head
        means = {e: sum(v) / len(v) for e, v in per.items()}
        if not means:
            return f"{head}, {todo} to go (time left: after the first trial)"
        overall = sum(sum(v) for v in per.values()) / sum(len(v) for v in per.values())
        eta = sum(k * means.get(e, overall) for e, k in left.items())
        return (f"{head}, {todo} to go: about {_duration(eta)} left at the mean trial time so far ("
                + ", ".join(f"{e} {m:.1f} s" for e, m in means.items()) + ")")

    def watch(self, echo, every_s: float = 1.0):
        """A daemon thread that echoes line() whenever a trial finishes; stop() ends it."""
        import threading
        stop, last = threading.Event(), [self.done()]

        def loop():
            while not stop.wait(every_s):
                d = self.done()
                if d != last[0]:
                    last[0] = d
                    echo(self.line())
        threading.Thread(target=loop, name="study-progress", daemon=True).start()
        return stop


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
    # the results directory before anything of the testbed (a path under a file, a full disk)
    check_results_root(Path(results_root), obj.config.section("experiments")["min_free_mb"])
    tb = obj.testbed()  # not root: refused here, before anything is brought up
    # SIGTERM (Snakemake stopping a job) unwinds like Ctrl-C: the LB, servers and load are stopped
    signal.signal(signal.SIGTERM, _interrupt)
    echo = lambda m: click.echo(m, err=True)  # noqa: E731
    study = StudyProgress(obj.config, Path(results_root))
    echo(study.line())
    watching = study.watch(echo)  # after each trial: done / planned and the time left
    try:
        s = run_point(tb, experiment, pt, Path(results_root), progress=echo)
    finally:
        watching.set()
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
@click.option("--planned-only", is_flag=True,
              help="Rows only for the points the config plans, as the workflow makes them; the trials of other "
                   "points (an earlier config's) are listed in unplanned.csv.")
@click.pass_obj
def aggregate_cmd(obj, resdir, planned_only):
    """Tidy CSVs from the valid trials, one per table the experiments' definitions and the measurement
    kinds name (docs/results.md), and invalid.csv listing the invalid trials with their reasons."""
    from ..aggregate import aggregate, planned_points
    planned = planned_points(obj.config) if planned_only else None
    click.echo(json.dumps(aggregate(resdir, progress=lambda m: click.echo(m, err=True), planned=planned)))


@experiment_group.command("summary")
@click.argument("resdir", type=click.Path(file_okay=False))
@click.option("--check", is_flag=True, help="Exit non-zero when a planned experiment has no valid trial, or one "
                                            "cause invalidated most trials.")
@click.pass_obj
def summary_cmd(obj, resdir, check):
    """The closing summary of a run (RESDIR: results/<testbed>) for the points --config plans: valid and
    invalid trials per experiment, the commonest causes of the invalid ones (the workflow prints it last)."""
    from ..closing import closing, judge, summary_lines
    from ..errors import RunFailed
    from ..experiments import order, points
    from ..layout import point_id
    c = closing(resdir, [(e, point_id(p)) for e in order() for p in points(obj.config, e)])
    for line in summary_lines(c):
        click.echo(line, err=True)
    failed = judge(c) if check else []
    if failed:
        raise RunFailed(f"Failed to measure the study of {resdir}: {'; '.join(failed)}: fix what the causes above "
                        "name, then `xenobench experiment retry-invalid` and run the study again (its valid trials kept)")


@experiment_group.command("report")
@click.argument("resdir", type=click.Path(file_okay=False))
@click.option("--figures", "figdir", required=True, type=click.Path(file_okay=False), help="Figure directory.")
@click.option("--thesis-compare", type=click.Path(dir_okay=False, exists=True),
              help="compare.json of the thesis data (`xenobench compare results/thesis`).")
@click.option("--out", type=click.Path(dir_okay=False), help="Default: RESDIR/report.md (report.html beside it).")
@click.pass_obj
def report_cmd(obj, resdir, figdir, thesis_compare, out):
    """Write the run report, Markdown and HTML: the run's header (commit, date, config and its sha256
    (--config, else the one the trials recorded), machine, validity), figures by experiment, invalid
    trials, wall times, headline numbers, published vs reproduced."""
    from ..experiments import left_out
    from ..report import write_report
    gone = [x.line() for x in left_out(obj.config)] if obj.config_path else []
    click.echo(str(write_report(resdir, figdir, thesis_compare, out, config=obj.config_path, left_out=gone)))


COMMANDS = [experiment_group]
