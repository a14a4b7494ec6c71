"""The experiments (thesis ch. 7) as data: definitions in experiments/<id>.yaml, sizes per testbed
in the config's `experiments:` section, expanded here into the plan of trials.

Every trial has an explicit key — experiment, point (its variables in order) and repetition — and
a directory in the results tree (xenobench.layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from . import REPO_ROOT
from .errors import ConfigError
from .layout import ResultsTree, TrialDir

EXPERIMENTS_DIR = REPO_ROOT / "experiments"
ORDER = ("pps", "loss", "ndr_pdr", "rtt", "rtt_load", "compare")
NO_SPLIT = "none"  # rtt_load's split at level 0 (xenobench.plots draws it on every split's line)


def definitions() -> dict[str, dict]:
    out = {}
    for f in sorted(EXPERIMENTS_DIR.glob("*.yaml")):
        d = yaml.safe_load(f.read_text())
        out[d["id"]] = d
    return out


@dataclass(frozen=True)
class PlannedTrial:
    experiment: str
    point: dict
    repetition: int

    def trial_dir(self, results_root: Path, testbed: str) -> TrialDir:
        return ResultsTree(Path(results_root), testbed).trial(self.experiment, self.point, self.repetition)


def points(cfg, experiment: str) -> list[dict]:
    """The measurement points of one experiment on this testbed, in sweep order."""
    ex = cfg.section("experiments")
    p = ex.get(experiment)
    if p is None:
        return []
    if experiment == "pps":
        return [{"lb": lb, "payload": pl} for lb in p["lbs"] for pl in p["payloads"]]
    if experiment == "loss":
        return [{"lb": p["lb"], "rate_pps": int(r)} for r in p["rates_pps"]]
    if experiment == "ndr_pdr":
        return [{"lb": lb, "payload": pl} for lb in p["lbs"] for pl in p["payloads"]]
    if experiment == "rtt":
        if paired(cfg, experiment):  # every LB inside each repetition (xenobench.latency)
            return [{"server": s} for s in p["servers"]]
        return [{"lb": lb, "server": s} for s in p["servers"] for lb in p["lbs"]]
    if experiment == "rtt_load":
        # no background, nothing to split: level 0 is one point (split "none"), every split's origin
        return [{"level_pps": int(lv), "split": sp if lv > 0 else NO_SPLIT} for lv in p["levels_pps"]
                for sp in (p["splits"] if lv > 0 else [NO_SPLIT])]
    if experiment == "compare":
        return [{"lb": lb} for lb in p["lbs"]]
    raise ConfigError(f"Failed to plan experiment {experiment!r}: unknown (known: {', '.join(ORDER)})")


def paired(cfg, experiment: str) -> bool:
    """Whether an RTT experiment runs the paired design: each repetition measures every LB variant
    in interleaved blocks (config `paired`, default true; false = the thesis's protocol of one point
    per LB, Sec. 7.4)."""
    p = cfg.section("experiments").get(experiment) or {}
    return experiment in ("rtt", "rtt_load") and bool(p.get("paired"))


def plan(cfg, only: list[str] | None = None) -> list[PlannedTrial]:
    reps = cfg.section("experiments")["repetitions"]
    out = []
    for e in only or ORDER:
        for pt in points(cfg, e):
            out += [PlannedTrial(e, pt, r) for r in range(1, reps + 1)]
    return out
