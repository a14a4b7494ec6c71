"""Publication readiness: per point of a results tree, whether its numbers can be published as they are.

A point is **publication-ready** when every condition holds, on a real testbed:

- `repetitions`: at least as many valid repetitions as the config plans for its experiment
  (xenobench.experiments.repetitions; supplementary ones count);
- `interval`: every 95 % interval of what it publishes within experiments.publication.max_ci_rel of
  the value: the intervals it printed (the paired and ranked rows: half the interval over the
  median; an RTT difference over the LB's median RTT at the point), and per LB the t interval of the
  mean of each HEADLINE metric over its valid repetitions (xenobench.diff.relative_half_width: a
  rate on its logs, a loss over the delivered share);
- `machine`: nothing the machine rule (xenobench.machine) judged disturbed in any attempt of its
  trials, retried or not: an attempt over a limit (metadata.json `machine`), one invalid for the
  machine's checks (machine.CHECKS), rounds an interleaved design left out;
- `generator-bound`: no LB's rate set by the generator in a repetition (more than GENERATOR_BOUND_ABOVE
  of its blocks at the generator's own rate: the tidy rows generator_bound_share, block_generator_bound);
- `commit`: every trial recorded one commit, without uncommitted changes;
- `config`: every trial recorded one config hash, the hash of the config judged against (the given
  one, else the one the trials recorded) as it is now.

A point of a testbed that is no real one (namespaces; a lab of virtual interfaces behind SSH, veth)
is at most **local-ready**: its numbers describe the machine it ran on (`testbed`). Any other
unmet condition: **not ready**. `readiness(resdir)` gives each point's Mark; `summary_lines` the
counts and the reasons grouped (the run report, `xenobench diff`).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import machine
from .diff import DIFFERENCE_UNITS, INTERVAL_PARTS, KEY, keyed, printed_parts, relative_half_width, rep_values
from .errors import DataError, XenobenchError
from .layout import TrialDir, read_json, trial_results
from .results import read_tidy

PUBLICATION, LOCAL, NOT_READY = "publication-ready", "local-ready", "not ready"
MARKS = (PUBLICATION, LOCAL, NOT_READY)
REPETITIONS, INTERVAL, MACHINE, GENERATOR, COMMIT, CONFIG, TESTBED = (
    "repetitions", "interval", "machine", "generator-bound", "commit", "config", "testbed")
CONDITIONS = (REPETITIONS, INTERVAL, MACHINE, GENERATOR, COMMIT, CONFIG, TESTBED)  # the order reasons are shown in
#: per table, what a point publishes per LB (the run report's headline numbers, the thesis's figures)
HEADLINE = {"pps": ("rx_pps",), "compare": ("max_pps",), "loss": ("loss_pct",), "ndr_pdr": ("ndr_pps", "pdr_pps"),
            "rtt_summary": ("rtt_median_us",), "rtt_capacity": ("max_pps",),
            "update": ("remove_control_ms", "add_control_ms"), "update_burst": ("rx_pps",)}
#: an LB's rate in a repetition is the generator's where more of its blocks than this were generator-bound
#: (the share above which the run report labels a rate generator-bound)
GENERATOR_BOUND_ABOVE = 0.5
#: the tables read: the headline values, the printed intervals, the blocks' generator-bound flags (not
#: rtt_samples: the largest, and nothing here reads a probe)
TABLES = (*HEADLINE, "rtt_paired", "rate_ranking", "rate_blocks")
SHOWN_PER_REASON = 4  # points named per grouped reason; the rest counted


@dataclass(frozen=True)
class PointRecord:
    """What a point's trials and tidy rows say, as `judge` reads it."""
    experiment: str
    point: str
    planned: int | None  # valid repetitions the config plans; None: unknown (`config_why`)
    valid: int
    intervals: tuple[tuple[str, float | None], ...]  # (what, half-width over the value; None: no interval)
    disturbed: tuple[str, ...]  # what the machine rule judged disturbed ("rep-2 attempt-1")
    generator_bound: tuple[str, ...]  # "wire rep-1 (75 % of its blocks)"
    commits: tuple[str | None, ...]  # per trial, the commit it recorded
    config_hashes: tuple[str | None, ...]  # per trial, the config hash it recorded
    config_hash: str | None  # the config judged against, as it is now; None: none readable (`config_why`)
    local: str | None  # why its testbed is no real one; None: a real one
    config_why: str = ""


@dataclass(frozen=True)
class Mark:
    experiment: str
    point: str
    mark: str  # PUBLICATION | LOCAL | NOT_READY
    unmet: tuple[tuple[str, str], ...]  # (condition, what), in CONDITIONS order

    @property
    def where(self) -> str:
        return f"{self.experiment}/{self.point}"


# --- judging -----------------------------------------------------------------------------------------
def judge(r: PointRecord, max_ci_rel: float) -> Mark:
    """A point's mark and its unmet conditions (module docstring)."""
    unmet = _repetitions(r) + _interval(r.intervals, max_ci_rel)
    if r.disturbed:
        unmet.append((MACHINE, "disturbed: " + ", ".join(r.disturbed)))
    if r.generator_bound:
        unmet.append((GENERATOR, ", ".join(r.generator_bound)))
    unmet += _commit(r.commits) + _config(r)
    mark = NOT_READY if unmet else LOCAL if r.local else PUBLICATION
    if r.local:
        unmet.append((TESTBED, r.local))
    return Mark(r.experiment, r.point, mark, tuple(unmet))


def _repetitions(r: PointRecord) -> list[tuple[str, str]]:
    if r.planned is None:
        return [(REPETITIONS, f"{r.valid} valid, the planned count unknown ({r.config_why})")]
    return [(REPETITIONS, f"{r.valid} of {r.planned} valid")] if r.valid < r.planned else []


def _interval(intervals, max_ci_rel: float) -> list[tuple[str, str]]:
    if not intervals:
        return [(INTERVAL, "none (no headline value, no printed interval)")]
    none = [w for w, h in intervals if h is None]
    if none:
        return [(INTERVAL, f"none for {', '.join(none)} (fewer than 2 valid repetitions)")]
    what, h = max(intervals, key=lambda x: x[1])
    return [(INTERVAL, f"±{100 * h:.1f} % ({what}) > {100 * max_ci_rel:g} %")] if h > max_ci_rel else []


def _commit(commits) -> list[tuple[str, str]]:
    missing = sum(1 for c in commits if not c)
    if missing:
        return [(COMMIT, f"none recorded ({missing} of {len(commits)} trials)")]
    got = sorted(set(commits))
    dirty = [c for c in got if c.endswith("-dirty")]
    if dirty:
        return [(COMMIT, f"uncommitted changes ({', '.join(c[:12] + '-dirty' for c in dirty)})")]
    return [(COMMIT, f"{len(got)} commits across its trials ({', '.join(c[:12] for c in got)})")] if len(got) > 1 else []


def _config(r: PointRecord) -> list[tuple[str, str]]:
    missing = sum(1 for h in r.config_hashes if not h)
    if missing:
        return [(CONFIG, f"no hash recorded ({missing} of {len(r.config_hashes)} trials)")]
    got = sorted(set(r.config_hashes))
    if len(got) > 1:
        return [(CONFIG, f"{len(got)} configs across its trials ({', '.join(got)})")]
    if r.config_hash is None:
        return [(CONFIG, f"recorded {got[0]}, not checked: {r.config_why}")]
    return [(CONFIG, f"recorded {got[0]}, the config is now {r.config_hash}")] if r.config_hash != got[0] else []


# --- reading a results tree ----------------------------------------------------------------------------
def readiness(resdir: str | Path, config: str | Path | None = None) -> list[Mark]:
    """Every point's Mark, in the trials' order; `config`: the run's config (default: the one its
    trials recorded)."""
    recs, max_ci_rel = records(resdir, config)
    return [judge(r, max_ci_rel) for r in recs]


def records(resdir: str | Path, config: str | Path | None = None) -> tuple[list[PointRecord], float]:
    """Every point's PointRecord and the max_ci_rel to judge them by."""
    resdir = Path(resdir)
    trials = _planned(resdir)
    metas = {t.path: _metadata(t) for t, _ in trials}
    cfg, why = _run_config(config, list(metas.values()))
    if cfg is not None:
        max_ci_rel = float(cfg.section("experiments")["publication"]["max_ci_rel"])
    else:
        from .config import section_with_defaults
        max_ci_rel = float(section_with_defaults("experiments", {})["publication"]["max_ci_rel"])
    tidy = {k: read_tidy(resdir, k) for k in TABLES if (resdir / f"{k}.csv").exists()}
    rows = {k: dict(list(df.groupby(["experiment", "point"], sort=False))) for k, df in tidy.items()}
    points: dict[tuple[str, str], list[tuple[TrialDir, dict]]] = {}
    for t, r in trials:
        points.setdefault((t.path.parent.parent.name, t.path.parent.name), []).append((t, r))
    return [_record(e, p, ts, metas, {k: g[(e, p)] for k, g in rows.items() if (e, p) in g}, cfg, why)
            for (e, p), ts in points.items()], max_ci_rel


def _planned(resdir: Path) -> list[tuple[TrialDir, dict]]:
    """The trials of the points the run's config plans: all but those unplanned.csv lists."""
    trials = trial_results(resdir)
    path = resdir / "unplanned.csv"
    if not path.exists():
        return trials
    try:
        with open(path, newline="") as f:
            listed = {r["trial"] for r in csv.DictReader(f)}
    except (OSError, KeyError, csv.Error) as e:
        raise DataError(f"Failed to read {path}: {e} (regenerate it: xenobench experiment aggregate {resdir})") from None
    return [(t, r) for t, r in trials if str(t.path.relative_to(resdir)) not in listed]


def _metadata(t: TrialDir) -> dict:
    m = read_json(t.metadata, "trial metadata") if t.metadata.exists() else {}
    return m if isinstance(m, dict) else {}


def _run_config(config, metas: list[dict]):
    """(the loaded config to judge by, or None; why none): `config`, else the one the trials recorded."""
    from .config import load_config
    if config is None:
        recorded = sorted({str(m["config"]) for m in metas if m.get("config")})
        if len(recorded) != 1:
            return None, (f"the trials recorded {len(recorded)} configs: give the run's" if recorded
                          else "no trial recorded its config: give the run's")
        config = recorded[0]
    try:
        return load_config(config), ""
    except XenobenchError as e:
        return None, str(e)


def _record(experiment, point, trials, metas, rows, cfg, why) -> PointRecord:
    """`rows`: the point's rows of each table that has any."""
    meta = [metas[t.path] for t, _ in trials]
    recorded = tuple(m.get("config_hash") or r.get("config_hash") for m, (_, r) in zip(meta, trials))
    return PointRecord(
        experiment, point, _planned_repetitions(cfg, experiment) if cfg is not None else None,
        sum(1 for _, r in trials if r.get("valid")), tuple(_intervals(rows)), tuple(_disturbed(trials, meta)),
        tuple(_generator_bound(rows)), tuple(m.get("git_commit") for m in meta), recorded,
        _hash_now(cfg, recorded) if cfg is not None else None, _local(trials, meta), why)


def _planned_repetitions(cfg, experiment: str) -> int:
    """Its section's `repetitions`, else the study's: xenobench.experiments.repetitions's rule, which
    analysis cannot import (it reaches the testbed and the measurements)."""
    ex = cfg.section("experiments")
    return int((ex.get(experiment) or {}).get("repetitions") or ex["repetitions"])


def _hash_now(cfg, recorded: tuple) -> str:
    """The config file's hash as the trials record it (xenobench.trials.config_hash: the leading hex
    digits of the sha256 of its bytes), as long as the recorded one."""
    full = hashlib.sha256(Path(cfg.path).read_bytes()).hexdigest()
    return full[:max((len(h) for h in recorded if h), default=16)]


def _intervals(rows: dict[str, pd.DataFrame]) -> list[tuple[str, float | None]]:
    """(what, half-width over the value) of each interval the point publishes (module docstring)."""
    out = []
    rtt = rows.get("rtt_summary")
    for table, df in rows.items():
        x = keyed(df)
        head = x[x.metric.isin(HEADLINE.get(table, ())) & x.repetition.notna()]
        for kv, g in head.groupby([f"k_{c}" for c in KEY], sort=True):
            out.append((_what(dict(zip(KEY, kv))), relative_half_width(rep_values(g), str(g.unit.iloc[0]))))
        for kv, parts in printed_parts(x).items():
            if all(parts.get(p) for p in INTERVAL_PARTS):
                out.append(_printed_interval(dict(zip(KEY, kv)), parts, rtt))
    return [x for x in out if x is not None]


_CONDITION = {"payload_bytes": "{} B", "server": "server {}", "split": "split {}", "changes_per_s": "{} changes/s"}


def _what(w: dict) -> str:
    """'rx_pps ebpf (22 B)': a metric or printed interval, its LB and the conditions of its key."""
    cond = [f.format(w[c]) for c, f in _CONDITION.items() if w.get(c)]
    return f"{w['metric']} {w['lb']}" + (f" ({', '.join(cond)})" if cond else "")


def _printed_interval(w: dict, parts: dict, rtt: pd.DataFrame | None) -> tuple[str, float] | None:
    """A printed interval's half-width over its median; a difference in us over the LB's median RTT
    at the point (None where the point has none)."""
    (med, unit), lo, hi = parts["median"], parts["ci_low"][0], parts["ci_high"][0]
    scale = abs(med)
    if unit in DIFFERENCE_UNITS:
        own = None if rtt is None else rtt[(rtt.metric == "rtt_median_us") & (rtt.lb == w["lb"])].value
        if own is None or own.empty:
            return None
        scale = abs(float(own.median()))
    return _what(w), ((hi - lo) / 2 / scale if scale else float("inf"))


def _disturbed(trials, metas) -> list[str]:
    out = []
    for (t, r), m in zip(trials, metas):
        rep = t.path.name
        for a in r["attempts"]:
            failed = {k for k, ok in (a.get("checks") or {}).items() if not ok}
            if failed & machine.CHECKS:
                out.append(f"{rep} attempt-{a['attempt']}")
        for name, rec in sorted((m.get("machine") or {}).items()):
            if isinstance(rec, dict) and (rec.get("disturbed") or rec.get("over") or rec.get("flagged")):
                out.append(f"{rep} {name}")
        left = (r.get("outputs") or {}).get("rounds_left_out")
        if left:
            out.append(f"{rep}: {len(left)} round(s) left out")
    return list(dict.fromkeys(out))


def _generator_bound(rows: dict[str, pd.DataFrame]) -> list[str]:
    """LB and repetition where the generator set most of the LB's blocks' rates."""
    out = []
    for df in rows.values():
        share = df[df.metric == "generator_bound_share"]
        blocks = df[df.metric == "block_generator_bound"]
        per = pd.concat([share, blocks]).groupby(["lb", "repetition"], sort=True).value.mean()
        out += [f"{lb} rep-{int(rep)} ({v:.0%} of its blocks)" for (lb, rep), v in per.items()
                if v > GENERATOR_BOUND_ABOVE]
    return out


def _local(trials, metas) -> str | None:
    """Why the point's testbed is no real one, from what its trials recorded; None: a real one."""
    r = trials[0][1]
    pc = r.get("point_config") if isinstance(r.get("point_config"), dict) else {}
    tb = pc.get("testbed") or {}
    nodes = pc.get("nodes") or {}
    name = r.get("testbed") or tb.get("name")
    if tb.get("kind") == "namespaces" or any((n or {}).get("transport") == "netns" for n in nodes.values()):
        return f"namespace testbed {name}: its numbers describe the machine it ran on"
    drivers = {i.get("driver") for m in metas for n in (m.get("nodes") or {}).values() if isinstance(n, dict)
               for i in n.values() if isinstance(i, dict)}
    if "veth" in drivers:
        return f"testbed {name}: virtual interfaces (veth), a lab, not hardware"
    return None


# --- output ----------------------------------------------------------------------------------------
def summary_lines(marks: list[Mark], max_shown: int = SHOWN_PER_REASON) -> list[str]:
    """'publication-ready: X of Y points (local-ready: Z)', then per condition the points not
    publication-ready for it, with what (said once where it is the same for every point)."""
    n = {m: sum(1 for x in marks if x.mark == m) for m in MARKS}
    L = [f"publication-ready: {n[PUBLICATION]} of {len(marks)} points (local-ready: {n[LOCAL]})"]
    for cond in CONDITIONS:
        hit = [(x.where, what) for x in marks if x.mark != PUBLICATION for c, what in x.unmet if c == cond]
        if not hit:
            continue
        head = f"- {cond} ({len(hit)} point{'s' if len(hit) != 1 else ''}): "
        if len({w for _, w in hit}) == 1:
            L.append(head + hit[0][1])
            continue
        more = f"; ... ({len(hit) - max_shown} more)" if len(hit) > max_shown else ""
        L.append(head + "; ".join(f"{p} {w}" for p, w in hit[:max_shown]) + more)
    return L


def point_lines(marks: list[Mark]) -> list[str]:
    """One line per point: its mark and what it lacks."""
    return [f"{m.where}: {m.mark}" + (" — " + "; ".join(f"{c}: {w}" for c, w in m.unmet) if m.unmet else "")
            for m in marks]


def report_lines(resdir: str | Path, config: str | Path | None = None) -> list[str]:
    """The run report's section: the counts and the reasons grouped (never fails the report)."""
    L = ["## Publication readiness (xenobench.readiness)", ""]
    try:
        marks = readiness(resdir, config)
    except XenobenchError as e:
        return L + [f"Not judged: {e}", ""]
    return L + (summary_lines(marks) if marks else ["No trials."]) + [""]


def by_point(marks: list[Mark] | None) -> dict[tuple[str, str], str] | None:
    """{(experiment, point): mark}, for xenobench.diff's column."""
    return None if marks is None else {(m.experiment, m.point): m.mark for m in marks}


def to_json(marks: list[Mark]) -> list[dict]:
    return [{"experiment": m.experiment, "point": m.point, "mark": m.mark,
             "unmet": [{"condition": c, "what": w} for c, w in m.unmet]} for m in marks]
