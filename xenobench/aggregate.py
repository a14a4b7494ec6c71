"""Trial directories → tidy CSVs (docs/results.md). Nothing but the trial directories is read, so
the CSVs can be regenerated at any time: `xenobench experiment aggregate results/<testbed>`.

Only valid trials become rows, made by the measurement kind that measured them
(xenobench.measure); every row names its experiment and point. Invalid trials are listed in
invalid.csv (and in the run report) with their reasons, never dropped silently. Given the config's
plan, only the points it plans become rows: trials recorded for another plan (an earlier config's
splits, payloads or LBs) are listed in unplanned.csv, never drawn as if planned.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import measure
from .errors import ConfigError, DataError
from .experiments import definition, order, points
from .layout import TrialDir, chosen_reasons, point_id, trial_results
from .measure import TrialRecord
from .results import COLUMNS, KINDS, remove_rows, remove_tidy, validate, write_rows, write_tidy


def trial_record(testbed: str, trial: TrialDir, res: dict, resdir: Path) -> TrialRecord:
    """A valid trial as its kind's rows read it, with the columns every one of its rows carries."""
    exp = res["experiment"]
    try:
        d = definition(exp)
    except ConfigError:
        raise DataError(f"Failed to aggregate trial {trial.path}: unknown experiment {exp!r}") from None
    facts = _facts(trial, res)
    common = dict(testbed=testbed, experiment=exp, point=point_id(res["point"]), lb=facts.get("lb"),
                  generator=facts.get("generator"), repetition=int(res["repetition"]),
                  source=str(trial.path.relative_to(resdir)))
    return TrialRecord(trial, res, d, facts, Path(resdir), common)


def _guarded(what, fn, *args):
    try:
        return fn(*args)
    except KeyError as e:
        raise DataError(f"Failed to aggregate {what}: {e.args[0]!r} is missing (not a result xenobench wrote?)") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise DataError(f"Failed to aggregate {what}: malformed ({e})") from None


def trial_rows(t: TrialRecord) -> dict[str, list[dict]]:
    """The rows of one valid trial, checked against the metrics' units and ranges
    (xenobench.results.validate) before any is written; a malformed result is named by its file."""
    rows = _guarded(f"trial {t.trial.result}", measure.trial_rows, t)
    _check_rows(rows, f"of trial {t.trial.result}")
    return rows


def rows_for_trial(testbed: str, trial: TrialDir, res: dict, resdir: Path) -> dict[str, list[dict]]:
    """The rows of one valid trial (result.json `res`) of a results tree, by table."""
    return trial_rows(_guarded(f"trial {trial.result}", trial_record, testbed, trial, res, resdir))


def point_rows(records: list[TrialRecord]) -> dict[str, list[dict]]:
    """The rows one point's kind makes over its valid repetitions (records: one point's)."""
    if not records:
        return {}
    rows = _guarded(f"point {records[0].trial.path.parent}", measure.point_rows, records[0].definition.kind, records)
    _check_rows(rows, f"of point {records[0].trial.path.parent}")
    return rows


def _check_rows(rows: dict[str, list[dict]], where: str) -> None:
    for k, rs in rows.items():
        if k not in KINDS:
            raise DataError(f"Failed to aggregate {where}: table {k!r} is not a table of xenobench.results.KINDS")
        if rs:
            validate(k, pd.DataFrame(rs, columns=COLUMNS), where, by_source=True)


def check_trial(trial: TrialDir, result: dict) -> None:
    """The rows aggregate would make of a trial just measured (its result as it would be written,
    valid), and its point's rows from this repetition alone, checked as aggregate checks them: a
    DataError names what cannot exist."""
    resdir = trial.results_dir
    t = trial_record(resdir.name, trial, result, resdir)
    trial_rows(t)
    point_rows([t])


def _facts(trial: TrialDir, res: dict) -> dict:
    """What the trial recorded it ran with (xenobench.procedures.point_facts)."""
    f = res["outputs"].get("facts")
    if not isinstance(f, dict):
        raise DataError(f"Failed to aggregate trial {trial.path}: its result.json records no facts (which LB, "
                        "server, generator); it was written by an older xenobench: delete the trial directory "
                        "and run the point again")
    return f


def planned_points(cfg) -> set[tuple[str, str]]:
    """(experiment, point id) of every point the config plans (capacity points included)."""
    return {(e, point_id(pt)) for e in order() for pt in points(cfg, e)}


UNPLANNED_FIELDS = ["trial", "experiment", "point", "valid"]


def aggregate(resdir: str | Path, testbed: str | None = None, progress=print,
              planned: set[tuple[str, str]] | None = None) -> dict:
    """Write <resdir>/<kind>.csv for every kind with rows, <resdir>/invalid.csv, and, given the
    config's plan (`planned`: planned_points), <resdir>/unplanned.csv listing the trials of points
    it does not plan (no rows: a figure draws what the config plans)."""
    resdir = Path(resdir)
    testbed = testbed or resdir.name
    rows: dict[str, list[dict]] = {k: [] for k in KINDS}
    invalid, unplanned = [], []
    by_point: dict[tuple[str, str], list[TrialRecord]] = {}
    for trial, res in trial_results(resdir):
        if planned is not None and (res["experiment"], point_id(res["point"])) not in planned:
            unplanned.append({"trial": str(trial.path.relative_to(resdir)), "experiment": res["experiment"],
                              "point": point_id(res["point"]), "valid": bool(res.get("valid"))})
            continue
        if not res.get("valid"):
            reasons = chosen_reasons(res)
            invalid.append({"trial": str(trial.path.relative_to(resdir)), "experiment": res["experiment"],
                            "point": point_id(res["point"]), "attempts": len(res["attempts"]),
                            "reasons": "; ".join(reasons)})
            continue
        t = _guarded(f"trial {trial.result}", trial_record, testbed, trial, res, resdir)
        by_point.setdefault((t.common["experiment"], t.common["point"]), []).append(t)
        for k, rs in trial_rows(t).items():
            rows[k] += rs
    for _, recs in sorted(by_point.items()):  # per point, over its valid repetitions
        for k, rs in point_rows(sorted(recs, key=lambda t: t.repetition)).items():
            rows[k] += rs
    written = {}
    for k, rs in rows.items():
        if rs:
            write_tidy(k, rs, resdir, how=f"xenobench experiment aggregate {resdir}: the valid trials of "
                                          f"{resdir}/trials (invalid ones in invalid.csv)")
            written[k] = len(rs)
            progress(f"{k}.csv: {len(rs)} rows")
        else:  # this directory's CSVs are ours: none stale
            remove_tidy(k, resdir)
    write_rows(resdir / "invalid.csv", ["trial", "experiment", "point", "attempts", "reasons"], invalid, "the list of invalid trials")
    written["invalid"] = len(invalid)
    progress(f"invalid.csv: {len(invalid)} invalid trials")
    if planned is not None:
        write_rows(resdir / "unplanned.csv", UNPLANNED_FIELDS, unplanned, "the list of unplanned points")
        written["unplanned"] = len(unplanned)
        if unplanned:
            progress(f"unplanned.csv: {len(unplanned)} trials of points this config does not plan (not drawn)")
    else:
        remove_rows(resdir / "unplanned.csv")
    return written


