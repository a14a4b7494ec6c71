"""The trial runner: one measurement point, one repetition, one directory (xenobench.layout).

    settle → snapshot counters → run the procedure (load, probes, wait, collect) → snapshot →
    cool down → write the trial directory

A trial directory holds params.json (experiment, point, repetition, testbed, config hash),
metadata.json (kernel, drivers/firmware of the measured interfaces, tool versions, git commit, and
per attempt what the machine did to it: steal, frequency, other load on its CPUs, xenobench.machine),
per attempt the raw counters before/after, the procedure's outputs and validity, and last
result.json (final validity, attempts, the chosen attempt's outputs).

A trial whose validity fails (or that the machine rule judged disturbed: xenobench.machine.RULES,
`machine_undisturbed`; the retry then waits for the vCPUs' placement to come back) is retried up to
`max_attempts`; if every attempt fails it is kept
and marked invalid, never dropped. Every actor of an attempt (the LB, the DNS server, the prober:
xenobench.actors) is checked at its end: one that died, was restarted or could not be checked makes
it invalid by name (`<actor>_alive`), outputs["actors"] records each; so does a node's SSH connection
lost during the attempt (`ssh_<node>`, outputs["connections"]). An attempt that raises a fault no
retry can change (a config error, a missing file, what the kernel refuses: the error type's
`deterministic`) is recorded and not retried: the point stops with one line (PointStopped), and no
result.json is written. A directory with result.json is complete and is not re-run when its
params.json names the same point (trial_params, reusable); one recorded for another is set aside.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import machine
from .actors import Watch
from .counters import diff, snapshot
from .errors import ConfigError, DataError, NodeError, PointStopped, XenobenchError
from .results import source_commit
from .traffic import generator_summary
from .layout import POINT_SUMMARY, AttemptDir, ResultsTree, TrialDir, read_json, write_failed, write_json_atomic

log = logging.getLogger(__name__)


@dataclass
class Validity:
    """Named checks of one attempt; valid when all pass."""
    checks: dict[str, bool] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    def require(self, name: str, ok: bool, reason: str = "") -> None:
        self.checks[name] = bool(ok)
        if not ok:
            self.reasons.append(f"{name}: {reason}" if reason else name)

    @property
    def valid(self) -> bool:
        return all(self.checks.values())

    def as_dict(self) -> dict:
        return {"valid": self.valid, "checks": self.checks, "reasons": self.reasons}


@dataclass(frozen=True)
class PointPlan:
    """What a point was planned with (xenobench.procedures.point_plan): its experiment's definition
    (xenobench.experiments.Experiment), the config's experiments.<id> section with its schema
    defaults, and the (experiment, point) pairs whose maxima its background shares are of."""
    definition: Any = None
    section: dict = field(default_factory=dict)
    capacity: tuple = ()
    #: the LB kinds the RTT probes' one flow must reach the DNS backend through (xenobench.experiments.flow_lbs)
    flow_lbs: tuple = ()

    @property
    def profile(self) -> str | None:
        return getattr(self.definition, "profile", None)


_UNSET = object()


@dataclass
class TrialContext:
    """What a procedure gets: the testbed, the point, its plan, the attempt's directory and actors."""
    testbed: object
    experiment: str
    point: dict
    repetition: int
    attempt: AttemptDir
    params: dict
    #: the attempt's actors (xenobench.actors): procedures add theirs, run_trial judges them at the end
    watch: Watch = field(default_factory=Watch)
    plan: PointPlan = field(default_factory=PointPlan)
    #: the machine rule's cache-line prober (xenobench.machine.cpu_pair_rtt; None: not measured here),
    #: which run_trial samples at the attempt's ends and an interleaved design in each block
    pair_rtt: Any = None

    @property
    def section(self) -> dict:
        return self.plan.section

    def knob(self, name: str, default=_UNSET):
        """A setting of the trial: the point's variable of that name where the experiment sweeps it,
        else the experiment's config section (experiments.<id>.<name>), else `default`. Every
        procedure reads its settings through here, so any key a definition declares as a variable
        reaches the procedure."""
        if name in self.point:
            return self.point[name]
        if self.plan.section.get(name) is not None:
            return self.plan.section[name]
        if default is _UNSET:
            raise ConfigError(f"Failed to run {self.experiment} {_point_str(self.point) or '(no variables)'}: "
                              f"experiments.{self.experiment}.{name} is not set in {self.testbed.cfg.path} and no "
                              f"variable of the point is named {name!r}")
        return default


Procedure = Callable[[TrialContext], tuple[dict, Validity]]


def config_hash(cfg) -> str:
    """The config file's bytes (provenance only: an `extends:` parent or a comment changes nothing it
    names; what a trial is reused for is point_config)."""
    return hashlib.sha256(Path(cfg.path).read_bytes()).hexdigest()[:16]


def point_config(cfg, experiment: str, definition: dict | None = None) -> dict:
    """What defines a point besides its variables: the resolved configuration it runs under (every
    section, `extends:` applied) with only this experiment's part of `experiments` (its own section
    and the shared settings but the repetition count and the cap of supplementary ones, so adding a
    rate to loss or a repetition keeps the other trials), and the experiment's definition
    (experiments/<id>.yaml as loaded, but its place in the plan, `order`; None for a procedure run
    outside the definitions, as in tests)."""
    if isinstance(definition, dict):
        definition = {k: v for k, v in definition.items() if k != "order"}
    ex = cfg.section("experiments")
    shared = {k: v for k, v in ex.items() if not isinstance(v, dict) and k not in ("repetitions", "max_repetitions")}
    own = ex.get(experiment)
    if isinstance(own, dict):  # its own repetition count (xenobench.experiments.repetitions) neither
        own = {k: v for k, v in own.items() if k != "repetitions"}
    sections = {k: v for k, v in cfg.raw.items() if k not in ("experiments", "extends")}
    return json.loads(json.dumps({**sections, "experiments": {**shared, experiment: own},
                                  "definition": definition}, default=str))


def trial_params(cfg, experiment: str, point: dict, repetition: int, plan: PointPlan | None = None) -> dict:
    """params.json: what was asked. A trial is reused only when all but config_hash are equal."""
    d = plan.definition if plan is not None else None
    return {"experiment": experiment, "point": point, "repetition": repetition, "testbed": cfg.name,
            "config_hash": config_hash(cfg),
            "point_config": point_config(cfg, experiment, getattr(d, "raw", None))}


def _differences(old, new, key="") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new), key=str)
                for d in _differences(old.get(k, "(unset)"), new.get(k, "(unset)"), f"{key}.{k}" if key else k)]
    return [] if old == new else [f"{key}: {json.dumps(old, default=str)[:60]} -> {json.dumps(new, default=str)[:60]}"]


def reusable(trial: TrialDir, params: dict, progress=print) -> bool:
    """True when the trial is complete and was recorded for this point (params.json equal to
    `params` but for config_hash). A complete trial recorded for another point (another testbed,
    payload, duration, generator, LB list, definition...) is moved aside to
    <point>/stale/<rep>-<time> with what differed printed, never deleted, and False returned: it
    is run again."""
    if not trial.complete:
        return False
    try:
        old = read_json(trial.params, "trial parameters")
        diffs = (_differences({k: v for k, v in old.items() if k != "config_hash"},
                              {k: v for k, v in params.items() if k != "config_hash"})
                 if isinstance(old, dict) else ["params.json: not an object"])
    except DataError as e:
        diffs = [str(e)]
    if not diffs:
        return True
    stale = set_aside(trial)
    shown = "; ".join(diffs[:5]) + (f"; and {len(diffs) - 5} more" if len(diffs) > 5 else "")
    progress(f"{trial.path} was recorded for another point ({shown}): moved to {stale}, running it again")
    return False


def set_aside(trial: TrialDir) -> Path:
    """Move a trial directory to <point>/stale/<rep>-<time>-<pid> (never deleted: a record is
    kept, out of what aggregation reads); returns where it went."""
    stale = trial.path.parent / "stale" / f"{trial.path.name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    try:
        if stale.parent.exists() and not stale.parent.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(stale.parent))
        stale.parent.mkdir(exist_ok=True)
        trial.path.rename(stale)
    except OSError as e:
        raise _set_aside_failed(trial.path, stale.parent, e) from None
    return stale


def _set_aside_failed(path: Path, stale_dir: Path, e: OSError) -> DataError:
    """Why a trial (or its point's summary) could not be moved or removed, and the fix."""
    if e.errno == errno.ENOTDIR:
        return DataError(f"Failed to set aside {path}: {stale_dir} is not a directory (trials set aside go there); "
                         f"move it away (`mv {stale_dir} {stale_dir}.old`) and run the command again")
    where = e.filename or path
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return DataError(f"Failed to set aside {path}: {where}: {e.strerror} (the trial moves to {stale_dir}); "
                         "make the results tree writable (remount it read-write or fix its permissions) and run "
                         "the command again, or copy it somewhere writable and give --results")
    return DataError(f"Failed to set aside {path}: {where}: {e.strerror or e}")


def retry_invalid(tree: ResultsTree, only: tuple[str, ...] = (), dry_run: bool = False,
                  progress=print) -> list[tuple[Path, str]]:
    """Make the next run measure the invalid trials again: each complete trial whose result says
    invalid is set aside (set_aside) and its point's point.json removed, so Snakemake re-runs the
    point (run_point skips its valid trials: they are reused). A trial invalid by the measurement
    itself (a loss the level causes) comes back invalid: the report says why. Returns
    [(trial path, reasons)]; dry_run moves nothing."""
    out = []
    for t in tree.completed_trials():
        res = t.read_result()
        if res["valid"] is True or (only and res["experiment"] not in only):
            continue
        reasons = "; ".join(x for a in res["attempts"] if a.get("attempt") == res.get("chosen_attempt")
                            for x in a.get("reasons", [])) or "(no reason recorded)"
        out.append((t.path, reasons))
        if dry_run:
            progress(f"would set aside {t.path}: {reasons}")
            continue
        summary = t.path.parent / POINT_SUMMARY
        stale = set_aside(t)
        try:
            summary.unlink(missing_ok=True)
        except OSError as e:
            raise _set_aside_failed(summary, stale.parent, e) from None
        progress(f"set aside {t.path} -> {stale} ({reasons})")
    return out


def host_metadata(testbed, ifaces: list[tuple[str, str]]) -> dict:
    """Kernel, drivers and firmware of the measured interfaces, tool versions where present."""
    meta = {"harness_host": platform.node(), "harness_kernel": platform.release(),
            "git_commit": source_commit(), "config": str(testbed.cfg.path),
            "config_hash": config_hash(testbed.cfg), "time": time.time(), "nodes": {}}
    for node_name, iface in ifaces:
        node = testbed.node(node_name)
        ent = meta["nodes"].setdefault(node_name, {})
        try:
            ent.setdefault("kernel", node.run(["uname", "-r"], check=False).stdout.strip())
            drv = node.run(["ethtool", "-i", iface], check=False).stdout
            ent[iface] = {k.strip(): v.strip() for k, _, v in (l.partition(":") for l in drv.splitlines()) if v}
        except NodeError as e:
            ent[iface] = {"error": str(e)}
    for tool, argv in (("trafgen", ["trafgen", "-v"]), ("bpftool", ["bpftool", "version"])):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=5)
            meta[tool] = (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr) else None
        except (OSError, subprocess.TimeoutExpired):
            meta[tool] = None
    # which generator, and how it sends here (xdpgen: its driver); None for a testbed double without nodes
    meta["generator"] = generator_summary(testbed) if hasattr(testbed, "node_for_role") else None
    # generator and DUT CPUs, read back (None: not placed, or a testbed double without the method)
    meta["cpu_placement"] = getattr(testbed, "cpu_placement", lambda: None)()
    return meta


def _snap_all(testbed, ifaces):
    """Every measured interface's counters (xenobench.counters.snapshot), keyed node:iface; one that
    cannot be read is {"node", "iface", "error"}, so the trial names it (counter_diffs)."""
    out = {}
    for node_name, iface in ifaces:
        try:
            out[f"{node_name}:{iface}"] = snapshot(testbed.node(node_name), iface)
        except NodeError as e:
            out[f"{node_name}:{iface}"] = {"node": node_name, "iface": iface, "error": str(e)}
    return out


class CounterDiffs(dict):
    """node:iface → diff (xenobench.counters.diff) of every interface read at both ends; `failed`:
    the measured interfaces whose snapshot failed at either end, each {"node", "iface", "when"
    ("before", "after" or "both"), "error"}: a backend whose namespace was deleted mid-trial, a node
    that stopped answering. A trial missing one measured nothing there."""

    def __init__(self, diffs: dict, failed: list[dict]):
        super().__init__(diffs)
        self.failed = failed

    def reason(self) -> str:
        """The failed interfaces as one validity reason ("" when none)."""
        return "; ".join(f"{f['node']}:{f['iface']} ({f['when']}): {f['error']}" for f in self.failed)


def counter_diffs(before: dict, after: dict) -> CounterDiffs:
    """The diffs of the interfaces read at both ends, and (`.failed`) those read at one end or none:
    never dropped silently."""
    diffs, failed = {}, []
    for k in [*before, *(k for k in after if k not in before)]:
        b, a = before.get(k), after.get(k)
        bad = [(when, x) for when, x in (("before", b), ("after", a)) if x is None or "error" in x]
        if not bad:
            diffs[k] = diff(b, a)
            continue
        node, _, iface = k.partition(":")
        errors = [x["error"] if x is not None else "not snapshotted" for _, x in bad]
        failed.append({"node": node, "iface": iface, "when": bad[0][0] if len(bad) == 1 else "both",
                       "error": errors[0] if len(set(errors)) == 1 else "; ".join(
                           f"{w}: {e}" for (w, _), e in zip(bad, errors))})
    return CounterDiffs(diffs, failed)


def run_trial(testbed, experiment: str, point: dict, repetition: int, trial: TrialDir,
              procedure: Procedure, *, ifaces: list[tuple[str, str]], max_attempts: int,
              settle_s: float, cooldown_s: float, progress=print,
              check: Callable[[TrialDir, dict], None] | None = None, plan: PointPlan | None = None,
              headline: Callable[[dict], str] | None = None, judge_machine: bool = True,
              metadata: dict | None = None) -> dict:
    """Run one trial (with retries) and write its directory; returns result.json's content.
    An attempt that raises a deterministic fault (errors.XenobenchError.deterministic: a config, a
    missing file, what the kernel refuses) is recorded and not retried: PointStopped is raised,
    one line naming the fault, and no result.json is written, so the next run measures the trial
    again once the cause is fixed. `metadata`: recorded in metadata.json besides the host's
    (run_point: whether the repetition is a supplementary one).
    `headline(outputs)`: a valid attempt's measured value for its progress line (the kind's).
    `check(trial, result)`: raises DataError where a valid attempt's outputs cannot exist (the
    experiments pass xenobench.procedures.check_trial): the attempt is invalid as `values_possible`
    and retried, instead of stopping the study's aggregation later. `judge_machine` False: the
    machine's figures are recorded, not judged (a procedure whose own trials are run_trial's, each
    judged: the search's)."""
    if trial.complete:
        return trial.read_result()
    # attempts without result.json are a killed run's: start over, so that the directory holds
    # only the attempts result.json lists (a stale attempt-2 beside a new attempt-1 is not data)
    for stale in sorted(trial.path.glob("attempt-*")):
        shutil.rmtree(stale)
    trial.path.mkdir(parents=True, exist_ok=True)
    plan = plan or PointPlan()
    params = trial_params(testbed.cfg, experiment, point, repetition, plan)
    write_json_atomic(trial.params, params, indent=1)
    meta = {**host_metadata(testbed, ifaces), **(metadata or {})}
    write_json_atomic(trial.metadata, meta, indent=1)
    limits = machine.limits(testbed.cfg)
    if not judge_machine:
        limits = dict.fromkeys(limits)
    pair = machine.cpu_pair_rtt(testbed) if limits["max_cpu_pair_rtt_ns"] is not None else None
    try:
        return _attempts(testbed, experiment, point, repetition, trial, procedure, ifaces, max_attempts, settle_s,
                         cooldown_s, progress, check, plan, headline, params, meta, limits, pair)
    finally:
        if pair is not None:
            pair.close()


def _attempts(testbed, experiment, point, repetition, trial, procedure, ifaces, max_attempts, settle_s, cooldown_s,
              progress, check, plan, headline, params, meta, limits, pair) -> dict:
    attempts = []
    chosen = None
    sec = testbed.cfg.section("experiments")
    wait_s = float(sec.get("machine_wait_s") or 0)
    # an attempt invalid only because the machine was disturbed is the machine's, not the trial's:
    # it does not use up one of max_attempts, up to machine_retries times (each after the wait)
    spare = int(sec.get("machine_retries") or 0)
    n = 0
    while n < max_attempts + min(spare, _machine_only(attempts)):
        n += 1
        att = trial.attempt(n)
        att.path.mkdir(exist_ok=True)
        waited = None
        if chosen is not None and chosen[3]:  # the last attempt was disturbed: wait for the placement first
            calm, secs, seen = machine.wait_calm(pair, limits["max_cpu_pair_rtt_ns"], wait_s)
            waited = {"seconds": secs, "calm": calm, "cpu_pair_rtt_ns": seen}
            progress(f"[{experiment}] {_point_str(point)} rep {repetition}: waited {secs:.1f} s for the machine "
                     f"({'calm' if calm else 'still disturbed'}; cache-line round trips {_ns(seen)})")
        time.sleep(settle_s)
        before = _snap_all(testbed, ifaces)
        write_json_atomic(att.counters_before, before, indent=1)
        ctx = TrialContext(testbed, experiment, point, repetition, att, params, plan=plan, pair_rtt=pair)
        ctx.watch.connections(getattr(testbed, "nodes", list)())  # a node's SSH connection lost: judged
        m0 = machine.snapshot(testbed)
        rtts = [pair() if pair is not None else None]
        t0 = time.monotonic()
        fault = None  # a deterministic fault: recorded, then the point stops
        try:
            outputs, validity = procedure(ctx)
        except XenobenchError as e:
            outputs, validity = {"error": str(e)}, Validity()
            validity.require("procedure_completed", False, str(e))
            fault = deterministic(e)
            if fault is not None:
                outputs["deterministic"] = True
        except OSError as e:  # a record the procedure wrote (probes, a capture): the results disk
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise write_failed(e.filename or att.path, e) from None
        outputs["actors"] = ctx.watch.judge(validity)  # every actor alive to the end, or the trial is invalid
        # what the machine did meanwhile, judged by its one rule (xenobench.machine.RULES): disturbed, retried
        rtts.append(pair() if pair is not None else None)
        # an interleaved design judges these per round of its own (outputs machine_judged_per_round): the
        # attempt leaves them to it, recorded, and judges the rest
        inside = set(outputs.get("machine_judged_per_round") or ())
        judged = {r.key: (None if r.figure in inside else limits[r.key]) for r in machine.RULES}
        load = machine.record(m0, machine.snapshot(testbed), meta.get("cpu_placement"), judged,
                              [x for x in rtts if x is not None], outputs.get(machine.MEASURED_KEY))
        if waited is not None:
            load["waited"] = waited
        meta.setdefault("machine", {})[att.path.name] = load
        write_json_atomic(trial.metadata, meta, indent=1)
        if load["disturbed"]:
            validity.require(machine.UNDISTURBED, False, machine.reason(load))
        after = _snap_all(testbed, ifaces)
        write_json_atomic(att.counters_after, after, indent=1)
        lost = ctx.watch.judge_connections(validity)
        if lost:
            outputs["connections"] = lost
        outputs["counters"] = diffs = counter_diffs(before, after)
        validity.require("counters_read", not diffs.failed, diffs.reason())  # a measured node read at both ends
        outputs["seconds"] = round(time.monotonic() - t0, 3)
        if check is not None and validity.valid:  # what it recorded can exist
            try:
                check(trial, {**params, "valid": True, "chosen_attempt": n, "outputs": outputs})
            except DataError as e:
                validity.require("values_possible", False, str(e))
        write_json_atomic(att.outputs, outputs, indent=1, default=str)
        write_json_atomic(att.validity, validity.as_dict(), indent=1)
        attempts.append({"attempt": n, **validity.as_dict()})
        if fault is not None:
            raise _stopped(fault, experiment, point, repetition, att)
        spare_note = f" (of {max_attempts}, +{n - max_attempts} for the machine)" if n > max_attempts else ""
        progress(f"[{experiment}] {_point_str(point)} rep {repetition} attempt {n}{spare_note}: "
                 f"{'valid' + _headline(headline, outputs) if validity.valid else 'INVALID (' + '; '.join(validity.reasons) + ')'}")
        # disturbed as a whole or in too many of its rounds: the retry waits for the placement first
        chosen = (n, outputs, validity, load["disturbed"] or _disturbed_only(attempts[-1]))
        time.sleep(cooldown_s)
        if validity.valid:
            break
    n, outputs, validity, _ = chosen
    result = {**params, "valid": validity.valid, "attempts": attempts, "chosen_attempt": n,
              "outputs": outputs}
    trial.write_result(result)  # atomic: a trial is complete only once result.json exists
    return result


def deterministic(e: BaseException | None) -> XenobenchError | None:
    """The fault behind `e` that no retry can change (its type's `deterministic`), following what `e`
    wraps (`raise ... from`, a failed search turn's `error`); None for a fault that may pass."""
    seen = set()
    while isinstance(e, BaseException) and id(e) not in seen:
        if isinstance(e, XenobenchError) and e.deterministic:
            return e
        seen.add(id(e))
        e = e.__cause__ or getattr(e, "error", None)
    return None


def _stopped(fault: XenobenchError, experiment: str, point: dict, repetition: int, att: AttemptDir) -> PointStopped:
    """The one line a point stops with (a nested trial's, as a search's, passed on as it is)."""
    if isinstance(fault, PointStopped):
        return fault
    return PointStopped(f"{fault} ({experiment} {_point_str(point) or '(no variables)'} rep {repetition}: not "
                        f"retried, no attempt changes it (recorded in {att.path}); fixed, the same command measures "
                        "the point again, its completed repetitions kept)", fault.exit_code)


def disturbed_only(result: dict) -> bool:
    """Whether a trial's result (run_trial's) is invalid for the machine rule alone: every attempt
    was judged disturbed, and nothing else failed."""
    return not result["valid"] and bool(result["attempts"]) and all(_disturbed_only(a) for a in result["attempts"])


def _machine_only(attempts: list[dict]) -> int:
    """How many of the attempts were invalid for the machine rule alone (machine.CHECKS)."""
    return sum(1 for a in attempts if _disturbed_only(a))


def _disturbed_only(a: dict) -> bool:
    failed = {k for k, ok in a["checks"].items() if not ok}
    return not a["valid"] and bool(failed) and failed <= machine.CHECKS


def _headline(headline: Callable[[dict], str] | None, outputs: dict) -> str:
    """': <value>' for the progress line; '' without one, or where the outputs lack what it reads."""
    if headline is None:
        return ""
    try:
        return f": {headline(outputs)}"
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError):
        return ""


def _ns(samples: list) -> str:
    return ", ".join(f"{x:.0f}" for x in samples[-4:]) + " ns" if samples else "not measured"


def _point_str(point: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items())
