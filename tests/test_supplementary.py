"""Supplementary repetitions (xenobench.procedures.repeat): a point whose headline comparison stays
undecided after its repetitions (the rank kind's ratio CI includes 1, as aggregate's rate_ranking
rows say) gets more, one at a time, up to experiments.max_repetitions; a decided one gets none.
A fake rank procedure (per round a fixed xenoflow/wire ratio) through the real trial runner, no
testbed: the decision is the kind's own bootstrap over what is on disk."""

import json

import pytest

from xenobench.config import load_config
from xenobench.layout import ResultsTree
from xenobench.procedures import max_repetitions, point_summary, repeat, undecided
from xenobench.rateblocks import MIN_ROUNDS
from xenobench.trials import Validity, point_config, run_trial

POINT = {"payload": 22}
ROUNDS = 3  # per repetition: 2 planned repetitions are MIN_ROUNDS ratios, enough for a verdict
FACTS = {"kind": "rank", "lb": "none", "paired": True, "lbs": ["wire", "xenoflow"], "server": None,
         "profile": "udp_payload", "generator": "xdpgen"}
#: per round, xenoflow's rate over the wire's: decided (all below 1) or not (either side of 1)
DECIDED = [0.90, 0.91, 0.89]
UNDECIDED = [0.95, 1.05, 1.0]


class ConfigOnly:
    """What run_trial reads of a testbed when no interface is measured: its config."""

    def __init__(self, cfg):
        self.cfg = cfg


def rank_procedure(ratios):
    def procedure(ctx):
        blocks = [{"block": 2 * k + i + 1, "round": k + 1, "lb": lb, "rate_pps": rate, "round_kept": True}
                  for k, ratio in enumerate(ratios)
                  for i, (lb, rate) in enumerate((("wire", 1e6), ("xenoflow", ratio * 1e6)))]
        return {"facts": FACTS, "payload": 22, "lbs": ["wire", "xenoflow"], "reference": "wire", "blocks": blocks,
                "bootstrap_resamples": 200, "bootstrap_seed": 1}, Validity()
    return procedure


def run_point_like(tmp_path, ratios, reps=2, cap=5):
    """repeat() as run_point calls it: `run` a trial per repetition, its metadata recorded."""
    tb = ConfigOnly(load_config("config/ci.yaml"))
    tree = ResultsTree(tmp_path, "ci")
    ran, lines = [], []

    def run(r, metadata):
        ran.append(r)
        run_trial(tb, "rank", POINT, r, tree.trial("rank", POINT, r), rank_procedure(ratios), ifaces=[],
                  max_attempts=1, settle_s=0, cooldown_s=0, progress=lambda m: None, judge_machine=False,
                  metadata=metadata)
    last, still = repeat(tree, "rank", POINT, reps, cap, lambda r: not tree.trial("rank", POINT, r).complete, run,
                         lines.append)
    return tree, ran, lines, last, still


def test_two_repetitions_make_enough_rounds_for_a_verdict():
    assert 2 * ROUNDS == MIN_ROUNDS


def test_an_undecided_point_gets_supplementary_repetitions_up_to_the_cap(tmp_path):
    tree, ran, lines, last, still = run_point_like(tmp_path, UNDECIDED)
    assert (ran, last, still) == ([1, 2, 3, 4, 5], 5, ["xenoflow vs wire"])
    assert lines == [f"[rank] payload-22: xenoflow vs wire undecided after {n} repetitions: supplementary "
                     f"repetition {n + 1} (at most 5, experiments.max_repetitions)" for n in (2, 3, 4)]
    meta = [json.loads(tree.trial("rank", POINT, r).metadata.read_text())["supplementary"] for r in range(1, 6)]
    assert meta == [False, False, True, True, True]
    s = point_summary(tree, "rank", POINT, 2, last, still)
    assert (s["supplementary"], s["undecided"], s["valid"]) == ([3, 4, 5], ["xenoflow vs wire"], 5)
    assert [r["repetition"] for r in s["repetitions"]] == [1, 2, 3, 4, 5]
    # the same call again: every repetition kept, none measured again
    _, again, _, last2, still2 = run_point_like(tmp_path, UNDECIDED)
    assert (again, last2, still2) == ([], 5, ["xenoflow vs wire"])


def test_a_decided_point_gets_none(tmp_path):
    tree, ran, lines, last, still = run_point_like(tmp_path, DECIDED)
    assert (ran, lines, last, still) == ([1, 2], [], 2, [])
    assert not tree.trial("rank", POINT, 3).path.exists()
    assert point_summary(tree, "rank", POINT, 2, last, still)["supplementary"] == []


def test_too_few_rounds_for_a_verdict_is_undecided(tmp_path):
    """One repetition of 3 rounds: rank claims no order from fewer than MIN_ROUNDS ratios."""
    tree, ran, _, last, still = run_point_like(tmp_path, DECIDED, reps=1, cap=2)
    assert (ran, last, still) == ([1, 2], 2, [])
    assert undecided(tree, "rank", POINT, 1) == ["xenoflow vs wire"]


def test_without_a_cap_above_the_repetitions_nothing_is_judged(tmp_path):
    assert run_point_like(tmp_path, UNDECIDED, reps=2, cap=2)[1:] == ([1, 2], [], 2, None)


@pytest.mark.parametrize("cap,want", [(None, 2), (1, 2), (6, 6)])
def test_the_cap_is_the_config_key_and_not_what_a_trial_is_reused_for(cap, want):
    cfg = load_config("config/ci.yaml")  # rank: 2 repetitions
    before = point_config(cfg, "rank")
    cfg.section("experiments")["max_repetitions"] = cap
    assert max_repetitions(cfg, "rank") == want
    assert point_config(cfg, "rank") == before  # raising the cap keeps every recorded trial
