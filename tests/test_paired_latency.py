"""The paired latency design (xenobench.latency, the rtt/rtt_load procedures' blocks, the
rtt_paired rows): block order from the recorded seed, the bootstrap CI of the median of per-round
differences, verdicts and ranking; a hand-made trial directory through the aggregation (exact
numbers); and a small paired run on the namespace testbed (real LBs switched between blocks)."""

import json

import numpy as np
import pytest

from tests.conftest import needs_root
from xenobench import latency
from xenobench.aggregate import aggregate
from xenobench.layout import ResultsTree
from xenobench.lb import get_lb
from xenobench.results import read_tidy


def test_block_order_is_rounds_of_permutations_reproducible_from_the_seed():
    lbs = ["none", "xenoflow", "ebpf"]
    a = latency.block_order(lbs, 4, seed=18)
    assert a == latency.block_order(lbs, 4, seed=18)
    assert len(a) == 12
    for r in range(4):
        assert sorted(a[3 * r: 3 * r + 3]) == sorted(lbs)
    orders = {tuple(latency.block_order(lbs, 4, seed=s)) for s in range(20)}
    assert len(orders) > 10  # the seed matters: not one fixed order


def test_paired_differences_pair_by_round_and_skip_incomplete_rounds():
    blocks = [(1, 1, "none", 10.0), (1, 1, "ebpf", 19.0), (1, 2, "ebpf", 21.0), (1, 2, "none", 11.5),
              (2, 1, "none", 30.0), (2, 1, "ebpf", 38.0),  # drift between repetitions cancels
              (2, 2, "ebpf", 99.0)]                        # no 'none' in this round: left out
    d = latency.paired_differences(blocks, "ebpf", "none")
    assert d.tolist() == [9.0, 9.5, 8.0]


def test_bootstrap_ci_of_the_median():
    med, lo, hi = latency.bootstrap_median_ci([5.0, 5.2, 4.9, 5.1, 5.3, 4.8, 5.0], 2000, seed=3)
    assert med == 5.0 and 4.8 <= lo <= 5.0 <= hi <= 5.3
    assert latency.bootstrap_median_ci([2.0], 100, seed=1) == (2.0, 2.0, 2.0)
    again = latency.bootstrap_median_ci([5.0, 5.2, 4.9, 5.1, 5.3, 4.8, 5.0], 2000, seed=3)
    assert again == (med, lo, hi)  # the seed reproduces the interval
    with pytest.raises(ValueError, match="no values"):
        latency.bootstrap_median_ci([], 100, 1)


def test_verdict_and_ranking_claim_an_order_only_where_the_ci_excludes_zero():
    mk = lambda lb, ref, m, lo, hi: latency.PairedDiff(lb, ref, m, lo, hi, 9, 17, 1000)  # noqa: E731
    x = mk("xenoflow", "none", 5.0, 4.0, 6.0)
    e = mk("ebpf", "none", 5.5, 4.2, 6.9)
    xe = mk("xenoflow", "ebpf", -0.4, -1.5, 0.8)
    assert (x.verdict, xe.verdict) == ("higher", latency.NOT_DISTINGUISHABLE)
    assert mk("a", "b", -2, -3, -1).verdict == "lower"
    assert latency.ranking([x, e, xe]) == "none < xenoflow ~ ebpf"
    assert latency.ranking([x, e, mk("xenoflow", "ebpf", -0.5, -0.9, -0.1)]) == "none < xenoflow < ebpf"
    assert latency.ranking([mk("xenoflow", "none", 0.2, -0.3, 0.6)]) == "none ~ xenoflow"
    # a distinguishable pair with an indistinguishable variant between them is named after the chain
    w = mk("wire", "none", 5.2, 1.0, 9.0)
    chain = [mk("ebpf", "none", 1.0, 0.5, 1.5), w, mk("xenoflow", "none", 9.0, 8.0, 10.0),
             mk("wire", "ebpf", 4.0, -1.0, 9.0), mk("xenoflow", "wire", 3.0, -2.0, 8.0),
             mk("xenoflow", "ebpf", 8.0, 7.0, 9.0)]
    assert latency.ranking(chain) == "none < ebpf ~ wire ~ xenoflow; ebpf < xenoflow"


def _fake_paired_trial(tree: ResultsTree, rep: int, rtts: dict[tuple[int, str], list[int]]) -> None:
    """A completed paired rtt trial as the procedure writes it; rtts: (block, lb) -> RTTs in ns."""
    t = tree.trial("rtt", {"server": "xdp"}, rep)
    att = t.attempt(1)
    blocks = []
    lbs = []
    for (b, lb), values in sorted(rtts.items()):
        bd = att.block(b, lb)
        bd.path.mkdir(parents=True)
        bd.probe_records.write_text("".join(json.dumps({"rtt_ns": v, "status": "ok"}) + "\n" for v in values))
        lbs += [lb] if lb not in lbs else []
        blocks.append({"block": b, "round": (b - 1) // 2 + 1, "lb": lb, "captured": b <= 2,
                       "records": str(bd.probe_records.relative_to(att.path)), "probe": {"lost": 0}})
    out = {"paired": True, "lbs": lbs, "order": [b["lb"] for b in blocks], "order_seed": 17 + rep, "rounds": 2,
           "block_probes": 3, "bootstrap_seed": 17, "bootstrap_resamples": 1000, "server": "xdp", "blocks": blocks,
           # what xenobench.procedures.point_facts records for a paired point
           "facts": {"kind": "latency", "lb": "none", "paired": True, "lbs": lbs, "server": "xdp", "profile": None,
                     "generator": None}}
    t.write_result({"experiment": "rtt", "point": {"server": "xdp"}, "repetition": rep, "testbed": "fx",
                    "valid": True, "attempts": [{"attempt": 1, "valid": True, "checks": {}, "reasons": []}],
                    "chosen_attempt": 1, "outputs": out})


def test_aggregation_of_paired_trials_gives_exact_differences(tmp_path):
    tree = ResultsTree(tmp_path, "fx")
    # per round: ebpf block median - none block median = 4, 6 (rep 1) and 5, 5 (rep 2); the
    # repetitions sit 20 µs apart (drift), which the pairing removes
    _fake_paired_trial(tree, 1, {(1, "none"): [10_000, 11_000, 12_000], (2, "ebpf"): [15_000, 15_000, 16_000],
                                 (3, "ebpf"): [17_000, 18_000, 19_000], (4, "none"): [12_000, 12_000, 12_000]})
    _fake_paired_trial(tree, 2, {(1, "ebpf"): [36_000, 36_000, 36_000], (2, "none"): [31_000, 31_000, 31_000],
                                 (3, "none"): [30_000, 31_000, 32_000], (4, "ebpf"): [35_000, 36_000, 37_000]})
    aggregate(tree.dir, progress=lambda *_: None)
    p = read_tidy(tree.dir, "rtt_paired")
    m = dict(zip(p[p.lb == "ebpf"].metric, p[p.lb == "ebpf"].value))
    assert m["rtt_vs_none_pairs"] == 4
    assert m["rtt_vs_none_median_us"] == 5.0      # median of 4, 6, 5, 5
    assert 4.0 <= m["rtt_vs_none_ci_low_us"] <= 5.0 <= m["rtt_vs_none_ci_high_us"] <= 6.0
    assert m["rtt_vs_none_verdict"] == 1 and m["rtt_vs_none_bootstrap_seed"] == 17
    s = read_tidy(tree.dir, "rtt_summary")
    med = s[s.metric == "rtt_median_us"].set_index(["repetition", "lb"]).value
    assert med[(1.0, "none")] == 12.0 and med[(2.0, "ebpf")] == 36.0  # one summary per LB and repetition
    samples = read_tidy(tree.dir, "rtt_samples")
    assert len(samples) == 24 and samples.source.str.contains(r"attempt-1/block-\d-(?:none|ebpf)/probes.jsonl:").all()


@needs_root
def test_paired_rtt_run_on_the_namespace_testbed(testbed, tmp_path, monkeypatch):
    """One small paired run: 2 repetitions x 2 rounds x {none, xenoflow}, the LBs started and
    stopped between blocks, the order from the recorded seed, every block's records on disk."""
    from xenobench.procedures import run_point
    ex = testbed.cfg.raw["experiments"]
    monkeypatch.setitem(ex, "rtt", {**ex["rtt"], "lbs": ["none", "xenoflow"], "paired": True, "blocks": 2,
                                    "block_probes": 30, "rate_qps": 500, "seed": 5, "bootstrap": 1000})
    monkeypatch.setitem(ex, "repetitions", 2)
    summary = run_point(testbed, "rtt", {"server": "xdp"}, results_root=tmp_path, progress=lambda *_: None)
    tree = ResultsTree(tmp_path, testbed.cfg.name)
    for rep in (1, 2):
        res = tree.trial("rtt", {"server": "xdp"}, rep).read_result()
        o = res["outputs"]
        assert o["order"] == latency.block_order(["none", "xenoflow"], 2, 5 + rep) and o["order_seed"] == 5 + rep
        att = tree.trial("rtt", {"server": "xdp"}, rep).attempt(res["chosen_attempt"])
        for b in o["blocks"]:
            recs = (att.path / b["records"]).read_text().splitlines()
            assert len(recs) == 30, b
        assert [b["captured"] for b in o["blocks"]] == [True, True, False, False]
    assert summary["valid"] + summary["invalid"] == 2
    assert summary["valid"] == 2, summary
    aggregate(tree.dir, progress=lambda *_: None)
    p = read_tidy(tree.dir, "rtt_paired")
    m = dict(zip(p.metric, p.value))
    assert set(p.lb) == {"xenoflow"} and m["rtt_vs_none_pairs"] == 4
    assert m["rtt_vs_none_ci_low_us"] <= m["rtt_vs_none_median_us"] <= m["rtt_vs_none_ci_high_us"]
    print(f"paired added RTT xenoflow vs none: {m['rtt_vs_none_median_us']:+.2f} us "
          f"[{m['rtt_vs_none_ci_low_us']:+.2f}, {m['rtt_vs_none_ci_high_us']:+.2f}]")
    assert not any(get_lb(k, testbed).running() for k in ("xenoflow", "ebpf"))  # none left running
    assert np.isfinite(m["rtt_vs_none_median_us"])


@needs_root
def test_paired_blocks_under_a_background_keep_one_lb_carrying_it(testbed, tmp_path, monkeypatch):
    """rtt_load's paired blocks under a background (procedures.BlockLBs): the LB is up before the
    background starts and stays up through the 'none' blocks (started once, recorded per block
    as background_via), so the background never meets the LB node's bare port and reaches its
    level; the 'none' blocks still probe directly. The seed puts a 'none' block first."""
    from xenobench.lb.xenoflow import XenoFlowLB
    from xenobench.procedures import run_point
    seed = next(s for s in range(100) if latency.block_order(["none", "xenoflow"], 2, s + 1)[0] == "none")
    ex = testbed.cfg.raw["experiments"]
    monkeypatch.setitem(ex, "rtt_load", {**ex["rtt_load"], "lbs": ["none", "xenoflow"], "paired": True,
                                         "blocks": 2, "block_probes": 30, "rate_qps": 500, "seed": seed,
                                         "levels": [200000], "level_unit": "pps", "splits": ["50/50"]})
    monkeypatch.setitem(ex, "repetitions", 1)
    starts = []
    real_start = XenoFlowLB.start
    monkeypatch.setattr(XenoFlowLB, "start", lambda self, *a, **k: (starts.append(1), real_start(self, *a, **k))[1])
    point = {"level": 200000, "split": "50/50"}
    run_point(testbed, "rtt_load", point, results_root=tmp_path, progress=lambda *_: None)
    res = ResultsTree(tmp_path, testbed.cfg.name).trial("rtt_load", point, 1).read_result()
    o = res["outputs"]
    assert o["order"][0] == "none"
    assert len(starts) == len(res["attempts"])  # once per attempt, not once per block
    assert [(b["lb"], b["background_via"]) for b in o["blocks"]] == [(k, "xenoflow") for k in o["order"]]
    assert [b["probe"]["via"] for b in o["blocks"]] == ["direct" if k == "none" else "lb" for k in o["order"]]
    assert o["background"]["valid"], o["background"]
    assert o["background"]["achieved_pps"] >= 0.99 * 200000
    assert not get_lb("xenoflow", testbed).running()
