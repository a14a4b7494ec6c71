"""Throughput by search: NDR (no loss) and PDR (at most 0.5 % loss) found by MLRsearch, the
algorithm FD.io CSIT runs and the IETF BMWG draft "Multiple Loss Ratio Search" describes, from
the `mlrsearch` package (PyPI, 1.2.1). The thesis swept the offered load linearly (Sec. 7.4.3,
Fig. 7.8: 15...135 Mpps, 33 trials x 3) and read the loss onset off the plot; a search reaches a
given precision with far fewer trials and states the precision it reached.

Three layers, as the package's readme names them:
- manager: `run_search()` builds the search from the config's `experiments.ndr_pdr` section
  (`SearchSettings`), runs it and writes its record (search.json: goals, bounds, every trial);
- controller: `MLRsearch.MultipleLossRatioSearch`, asking for (duration, load) trials;
- measurer: `TrialMeasurer`, the adapter `measure(duration, load) -> offered/received` over a
  trial function. On a testbed that function runs a normal trial (xenobench.trials.run_trial:
  its own directory search/trial-<k>/, counters, validity, retries) with the traffic layer's
  `run_traffic` at the asked load (trafgen, xdpgen or TRex alike); a test gives a synthetic device.

Resuming: the search is deterministic in its measurements, so a rerun after an interruption
replays the completed trials from disk (checking that the search asks for the same duration and
load at the same index) and continues with the first one missing.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Callable

# MLRsearch is imported where a search is configured or run, not with this module: its Config
# class inspects the call stack when the package is imported (~0.5-1 s in a process that has
# pandas loaded), which every measurement point's process would pay through the kinds' list
if TYPE_CHECKING:
    from MLRsearch import Config, MeasurementResult

from .errors import ConfigError, XenobenchError
from .layout import SearchDir, chosen_reasons
from .trials import PointPlan, disturbed_only, run_trial

log = logging.getLogger(__name__)


class SearchError(XenobenchError):
    pass


@dataclass(frozen=True)
class Goal:
    name: str          # NDR, PDR
    loss_ratio: float  # 0 for NDR; CSIT's PDR: 0.005 (0.5 %)


@dataclass(frozen=True)
class SearchSettings:
    """What the search is asked (config: experiments.ndr_pdr; defaults in the schema are CSIT's)."""
    goals: tuple[Goal, ...]
    min_load_pps: float
    max_load_pps: float
    exceed_ratio: float = 0.5
    relative_width: float = 0.005
    initial_trial_duration_s: float = 1.0
    final_trial_duration_s: float = 1.0
    duration_sum_s: float = 21.0
    preceding_targets: int = 2
    expansion_coefficient: int = 2
    search_duration_max_s: float = 1200.0
    warmup_s: float = 1.0

    @classmethod
    def from_section(cls, ex: dict, where: str = "experiments.ndr_pdr", max_load_pps: float | None = None):
        """From a config section (schema defaults applied); max_load_pps overrides the section's
        (the procedure caps it at the frame size's line rate)."""
        try:
            goals = tuple(Goal(str(g["name"]), float(g["loss_ratio"])) for g in ex["goals"])
            s = cls(goals=goals, min_load_pps=float(ex["min_load_pps"]),
                    max_load_pps=float(max_load_pps if max_load_pps is not None else ex["max_load_pps"]),
                    exceed_ratio=float(ex["exceed_ratio"]), relative_width=float(ex["relative_width"]),
                    initial_trial_duration_s=float(ex["initial_trial_duration_s"]),
                    final_trial_duration_s=float(ex["final_trial_duration_s"]),
                    duration_sum_s=float(ex["duration_sum_s"]), preceding_targets=int(ex["preceding_targets"]),
                    expansion_coefficient=int(ex["expansion_coefficient"]),
                    search_duration_max_s=float(ex["search_duration_max_s"]), warmup_s=float(ex["warmup_s"]))
        except KeyError as e:
            raise ConfigError(f"Failed to read the search settings: {where}.{e.args[0]} is missing") from None
        s.mlr_config(where)  # the package's own checks, with the key path in the message
        return s

    def mlr_config(self, where: str = "search settings") -> Config:
        from MLRsearch import Config, SearchGoal
        if not self.goals:
            raise ConfigError(f"Failed to configure the search: {where}.goals is empty")
        names = [g.name for g in self.goals]
        if len(set(names)) != len(names):
            raise ConfigError(f"Failed to configure the search: {where}.goals: names {names} repeat")
        try:
            goals = [SearchGoal(loss_ratio=g.loss_ratio, exceed_ratio=self.exceed_ratio,
                                relative_width=self.relative_width,
                                initial_trial_duration=self.initial_trial_duration_s,
                                final_trial_duration=self.final_trial_duration_s,
                                duration_sum=self.duration_sum_s, preceding_targets=self.preceding_targets,
                                expansion_coefficient=self.expansion_coefficient,
                                # a min load that loses frames is a result ("NDR below min_load_pps"),
                                # recorded as such, not an exception
                                fail_fast=False) for g in self.goals]
            if len({(g.loss_ratio) for g in self.goals}) != len(self.goals):
                raise ValueError(f"two goals have the same loss ratio: {[asdict(g) for g in self.goals]}")
            c = Config()
            c.goals = goals
            c.max_load = self.max_load_pps  # max first: min must stay below it
            c.min_load = self.min_load_pps
            c.search_duration_max = self.search_duration_max_s
            c.warmup_duration = self.warmup_s or None
        except (ValueError, TypeError) as e:
            raise ConfigError(f"Failed to configure the search: {where}: {e}") from None
        return c


@dataclass
class Measured:
    """What one trial gives the search: packets offered by the generator and received after the
    device, and the packets intended (load x duration; None = as offered): a shortfall counts as
    loss (MLRsearch's unsent count), since a load the generator cannot offer is no load the device
    was shown to forward."""
    offered: int
    received: int
    offered_duration_s: float | None = None
    intended_count: int | None = None
    valid: bool = True
    reasons: list[str] = field(default_factory=list)
    path: str | None = None
    waited_s: float = 0.0  # searches taking turns: the time this trial waited for its turn (not its own)
    machine_only: bool = False  # invalid only because the machine rule judged every attempt disturbed

    @classmethod
    def from_result(cls, res: dict, path) -> "Measured":
        """A run_trial result (run or read back from disk) as the search sees it."""
        reasons = chosen_reasons(res)
        o, machine_only = res["outputs"], disturbed_only(res)
        if "offered" not in o:
            return cls(0, 0, valid=False, reasons=reasons or ["no counts recorded"], path=str(path),
                       machine_only=machine_only)
        return cls(int(o["offered"]), int(o["received"]), o.get("offered_duration_s"), o.get("intended_count"),
                   res["valid"], reasons, str(path), machine_only=machine_only)


TrialFn = Callable[[int, float, float], Measured]  # (k, duration_s, load_pps) -> Measured

#: trials of one search that the machine rule judged disturbed in every attempt (the trial's own
#: machine_retries used up) and that the next trial makes up at the same duration and load; one
#: more ends the search as any invalid trial does
MADE_UP_TRIALS = 3


class TrialMeasurer:
    """The adapter MLRsearch calls (an MLRsearch.AbstractMeasurer: registered as one when a search
    runs): every measure() is trial k = 1, 2, ... of `trial`."""

    def __init__(self, trial: TrialFn, progress=print):
        self.trial = trial
        self.progress = progress
        self.trials: list[dict] = []
        self.left_out: list[dict] = []  # trials the machine rule judged disturbed, made up by the next

    def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
        from MLRsearch import MeasurementResult
        t0 = time.monotonic()
        while True:
            k = len(self.trials) + len(self.left_out) + 1
            m = self.trial(k, float(intended_duration), float(intended_load))
            if m.valid or not m.machine_only or len(self.left_out) >= MADE_UP_TRIALS:
                break
            # the machine's state, not the device's: the same (duration, load) again as the next
            # trial, so that one disturbed stretch does not end the search (and its paired ones)
            self.left_out.append({"trial": k, "duration_s": intended_duration, "load_pps": intended_load,
                                  "reasons": m.reasons, "path": m.path})
            self.progress(f"[search] trial {k}: {intended_load:.0f} pps x {intended_duration:g} s left out "
                          f"(the machine: {'; '.join(m.reasons)}), made up by trial {k + 1}")
        if not m.valid:
            made_up = (f" ({len(self.left_out)} trials of this search already made up for the machine, "
                       f"at most {MADE_UP_TRIALS})" if m.machine_only else "")
            raise SearchError(f"Failed to measure search trial {k} ({m.path or 'no directory'}) at "
                              f"{intended_load:.0f} pps for {intended_duration:g} s: "
                              f"{'; '.join(m.reasons) or 'invalid'}{made_up}")
        # Frames received beyond those sent (a stray ARP at a backend) are no negative loss, and
        # frames sent beyond those intended (rounding) no negative shortfall: MLRsearch counts the
        # absolute value of either as bad.
        loss = max(0, m.offered - m.received)
        intended = None if m.intended_count is None else max(int(m.intended_count), m.offered)
        res = MeasurementResult(intended_duration=intended_duration, intended_load=intended_load,
                                offered_count=m.offered, loss_count=loss,
                                offered_duration=m.offered_duration_s, intended_count=intended)
        self.trials.append({"trial": k, "duration_s": intended_duration, "load_pps": intended_load,
                            "offered": m.offered, "received": m.received, "loss_count": loss,
                            "intended_count": intended, "loss_ratio": res.loss_ratio,
                            "seconds": round(time.monotonic() - t0 - m.waited_s, 3), "path": m.path})
        self.progress(f"[search] trial {k}: {intended_load:.0f} pps x {intended_duration:g} s -> "
                      f"loss ratio {res.loss_ratio:.6f}")
        return res


def _bound(stat) -> float | None:
    return None if stat is None else float(stat)


# Trial durations are sums of measured seconds; a remainder this small is rounding, not time.
_DURATION_EPS_S = 1e-9


def pessimistic_loss_ratio(stat) -> float:
    """The loss ratio MLRsearch's conditional throughput uses (`TargetStat.pessimistic_loss_ratio`
    of mlrsearch 1.2.1: the exceed-ratio quantile of the long trials' loss ratios, missing duration
    counted as full loss), with one change: a remainder below _DURATION_EPS_S is zero. The package
    compares the float sum of the trials' durations with the same durations subtracted in loss-ratio
    order, and where the two orders round apart (two good trials at the PDR load, exceed ratio 0:
    (a + b) - b - a = 3e-17) it returns 1.0 for a load it classed as a lower bound, whose
    conditional throughput then fails with "Not positive: 0.0"."""
    t = stat.target
    remaining = max(t.duration_sum, stat.good_long + stat.bad_long) * (1.0 - t.exceed_ratio)
    ratio = None
    for r, dursum in sorted(stat.long_losses.items()):
        if ratio is not None and remaining <= _DURATION_EPS_S:
            return ratio
        ratio, remaining = r, remaining - dursum
    return 1.0 if ratio is None or remaining > _DURATION_EPS_S else ratio


def conditional_throughput(result) -> float | None:
    """A goal's conditional throughput (MLRsearch's `GoalResult.conditional_throughput`: the relevant
    lower bound's load times one minus its pessimistic loss ratio), None without a lower bound."""
    rlb = result.relevant_lower_bound
    if not rlb:
        return None
    (stat,) = rlb.target_to_stat.values()  # a TrimmedStat holds the goal's final target only
    return float(rlb) * (1.0 - pessimistic_loss_ratio(stat))


def run_search(settings: SearchSettings, trial: TrialFn, sdir: SearchDir | None = None,
               progress=print) -> dict:
    """Search every goal at once; returns (and writes to sdir.record, if given) the record:
    per goal its conditional throughput (MLRsearch's result: the relevant lower bound's load times
    one minus its pessimistic loss ratio), relevant lower and upper bound, and the width reached;
    every trial asked; trial count and wall time. A complete record on disk is returned as is."""
    if sdir is not None and sdir.complete:
        return sdir.read_record()
    from MLRsearch import AbstractMeasurer, MultipleLossRatioSearch
    AbstractMeasurer.register(TrialMeasurer)
    measurer = TrialMeasurer(trial, progress)
    mlr = MultipleLossRatioSearch(config=settings.mlr_config())
    t0 = time.monotonic()
    try:
        found = mlr.search(measurer=measurer, debug=log.debug)
    except RuntimeError as e:  # MLRsearch: the search took longer than search_duration_max_s
        raise SearchError(f"Failed to search NDR/PDR{' in ' + str(sdir.path) if sdir else ''}: {e} "
                          f"(after {len(measurer.trials)} trials)") from None
    wall = time.monotonic() - t0
    goals = []
    for g, sg in zip(settings.goals, settings.mlr_config().goals):
        r = found[sg]
        lo, hi = _bound(r.relevant_lower_bound), _bound(r.relevant_upper_bound)
        goals.append({"name": g.name, "loss_ratio": g.loss_ratio,
                      "conditional_throughput_pps": conditional_throughput(r),
                      "lower_bound_pps": lo, "upper_bound_pps": hi,
                      # width reached, in the package's terms (relative to the upper bound);
                      # None where a bound is missing (max load forwarded, or min load lost)
                      "relative_width": (hi - lo) / hi if lo is not None and hi is not None else None,
                      "at_max_load": hi is None and lo is not None,
                      "below_min_load": lo is None})
    record = {"algorithm": "MLRsearch", "package": "mlrsearch==1.2.1", "settings": asdict(settings),
              "goals": goals, "trials": measurer.trials, "n_trials": len(measurer.trials),
              "trials_left_out": measurer.left_out,
              "trial_seconds": round(sum(t["duration_s"] for t in measurer.trials), 3),
              "wall_s": round(wall, 3)}
    if sdir is not None:
        sdir.path.mkdir(parents=True, exist_ok=True)
        sdir.write_record(record)
    return record


def replaying(sdir: SearchDir, run: TrialFn) -> TrialFn:
    """A trial function that returns trial k from disk when it is complete (after checking the
    search asks the same duration and load as recorded) and runs it otherwise."""
    def trial(k: int, duration: float, load: float) -> Measured:
        td = sdir.trial(k)
        if td.complete:
            res = td.read_result()
            asked = res.get("point") or {}
            if (not math.isclose(float(asked.get("intended_duration_s", -1)), duration, rel_tol=1e-9)
                    or not math.isclose(float(asked.get("intended_load_pps", -1)), load, rel_tol=1e-9)):
                raise SearchError(
                    f"Failed to resume the search in {sdir.path}: trial {k} on disk was "
                    f"{asked.get('intended_load_pps')} pps x {asked.get('intended_duration_s')} s, the search asks "
                    f"{load} pps x {duration} s (settings changed?); remove {sdir.path} to search again")
            return Measured.from_result(res, td.path)
        return run(k, duration, load)
    return trial


def trial_runner(testbed, experiment: str, point: dict, repetition: int, sdir: SearchDir,
                 procedure: Callable, *, ifaces, max_attempts: int, progress=print,
                 plan: PointPlan | None = None) -> TrialFn:
    """The search's trial function on a testbed: trial k is a normal trial (run_trial) in
    sdir.trial(k) whose procedure is `procedure(ctx, duration_s, load_pps)`, returning outputs
    with offered, received (packet counts), intended_duration_s, intended_load_pps and, on a
    generator shortfall, intended_count. No settle or cool-down between the search's trials (as in
    CSIT: the repetition settles once; the procedure waits for frames in flight); completed trials
    are replayed from disk (`replaying`)."""

    def run(k: int, duration: float, load: float) -> Measured:
        td = sdir.trial(k)
        pt = {**point, "search_trial": k, "intended_load_pps": load, "intended_duration_s": duration}
        res = run_trial(testbed, experiment, pt, repetition, td, lambda ctx: procedure(ctx, duration, load),
                        ifaces=ifaces, max_attempts=max_attempts, settle_s=0.0, cooldown_s=0.0,
                        progress=progress, plan=plan)
        return Measured.from_result(res, td.path)
    return replaying(sdir, run)


def goal(record: dict, name: str) -> dict | None:
    return next((g for g in record.get("goals", []) if g["name"] == name), None)


def linear_sweep_trials(min_load: float, max_load: float, result_pps: float, relative_width: float,
                        trials_per_load: int = 1) -> int:
    """Trials a linear sweep over [min_load, max_load] needs for a step as fine as the search's
    width at the result (step = relative_width x result): the thesis's method at the search's
    precision. trials_per_load: repetitions per load (the thesis: 3)."""
    step = relative_width * result_pps
    if step <= 0:
        raise ValueError(f"relative width {relative_width} x result {result_pps} pps is no step")
    return (math.floor((max_load - min_load) / step) + 1) * int(trials_per_load)


# --- searches taking turns (the paired design of the search kind) ---------------------------------
class TurnsStopped(XenobenchError):
    """Raised in a search's thread at its next turn once another search of the same turns failed."""


class TurnError(SearchError):
    """One of the searches taking turns failed: `search` (its name), `trial` (the trial it was asking
    for, 0 before its first) and `error` (what it raised); the others were stopped at their turn."""

    def __init__(self, search: str, trial: int, error: BaseException, stopped: list[str]):
        self.search, self.trial, self.error, self.stopped = search, trial, error, stopped
        super().__init__(f"Failed to search NDR/PDR of {search} in turns: "
                         + (f"trial {trial}" if trial else "before its first trial") + f": {error}"
                         + (f"; the other searches ({', '.join(stopped)}) stopped at their next turn" if stopped else ""))


class Turns:
    """Strict round-robin among named searches: one trial at a time, in the names' order, a finished
    search leaving the ring (a condition variable hands the turn on). After a failure every waiting
    search raises TurnsStopped at its turn."""

    def __init__(self, names: list[str]):
        self.names = list(names)          # the ring's order
        self.active = list(names)         # the searches still in it
        self.turn = self.active[0] if self.active else None
        self.cond = threading.Condition()
        self.failed: str | None = None
        self.log: list[tuple[str, int]] = []  # (search, trial) in the order the trials ran

    def _next(self, name: str) -> str | None:
        """The active search after `name` in the ring (name itself may have left it)."""
        if not self.active:
            return None
        i = self.names.index(name)
        return next(n for n in self.names[i + 1:] + self.names[:i + 1] if n in self.active)

    def run(self, name: str, k: int, fn: Callable[[], Measured]) -> Measured:
        """Trial k of search `name`, at its turn (its result's waited_s: the wait); the turn passes on
        after it (also when it raised)."""
        t0 = time.monotonic()
        with self.cond:
            self.cond.wait_for(lambda: self.failed is not None or self.turn == name)
            if self.failed is not None:
                raise TurnsStopped(f"stopped before trial {k}: search {self.failed} failed")
        waited = time.monotonic() - t0
        try:
            return replace(fn(), waited_s=waited)
        finally:
            with self.cond:
                self.log.append((name, k))
                self.turn = self._next(name)
                self.cond.notify_all()

    def leave(self, name: str, failed: bool = False) -> None:
        with self.cond:
            if failed and self.failed is None:
                self.failed = name
            self.active.remove(name)
            if self.turn == name:
                self.turn = self._next(name)
            self.cond.notify_all()


def run_searches_in_turns(searches: dict[str, tuple[SearchSettings, TrialFn, SearchDir | None]],
                          progress=print) -> tuple[dict[str, dict], list[tuple[str, int]]]:
    """One MLRsearch per entry (name -> settings, trial function, directory), all at once, each in a
    thread of its own, their trials strictly taking turns in the entries' order (Turns): the machine's
    state drifts over minutes, and searches whose trials alternate measure it alike. A search that
    finishes leaves the ring, the others go on. A record's trial seconds leave out the waits for
    the turn; its wall_s is the whole run's. Returns each search's record (run_search) and the
    (search, trial) order the trials ran in. The first failure stops the others at their next turn
    and is raised as TurnError naming the search and its trial, after every thread has ended."""
    turns = Turns(list(searches))
    records: dict[str, dict] = {}
    errors: list[TurnError] = []
    asked: dict[str, int] = dict.fromkeys(searches, 0)

    def one(name: str, settings: SearchSettings, trial: TrialFn, sdir) -> None:
        def in_turn(k: int, duration: float, load: float) -> Measured:
            asked[name] = k
            return turns.run(name, k, lambda: trial(k, duration, load))
        try:
            records[name] = run_search(settings, in_turn, sdir,
                                       progress=lambda m: progress(m.replace("[search]", f"[search {name}]", 1)))
        except TurnsStopped:
            turns.leave(name)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread, raised there
            with turns.cond:
                stopped = [n for n in turns.active if n != name]
            errors.append(TurnError(name, asked[name], e, stopped))
            turns.leave(name, failed=True)
        else:
            turns.leave(name)

    threads = [threading.Thread(target=one, args=(n, *a), name=f"search-{n}", daemon=True)
               for n, a in searches.items()]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:  # ^C: the others stop at their next turn, the running trial ends first
        with turns.cond:
            turns.failed = turns.failed or "interrupted"
            turns.cond.notify_all()
        for t in threads:
            t.join()
        raise
    if errors:
        raise errors[0]
    return records, turns.log
