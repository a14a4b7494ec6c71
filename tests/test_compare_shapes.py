"""Published vs measured claims a shape only beyond its interval (the 22 -> 24 B step of pps, the
loss onset), and the agreement checks across one run's tables (compare vs rate_ranking, the
reference's rate flat below the network limit), from fixture tables."""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from xenobench.compare import (FLAT_PERMUTATIONS, NOT_DISTINGUISHABLE_HERE, Finding, agreement, compare, flat_p_value,
                               reproduced, smallest_p_value)
from xenobench.lb import LBS
from xenobench.measure.rank import rank_rows
from xenobench.results import read_tidy, row, write_tidy

WIRE = next(k for k, v in LBS.items() if v.reference)
SMALL = Path(__file__).parent / "fixtures" / "results" / "small"


def pps(d, by_payload: dict, lb="xenoflow", experiment="pps"):
    rows = [row(testbed="fx", experiment=experiment, point=f"lb-{lb}_payload-{p}", lb=lb, payload_bytes=p,
                repetition=r, measured_pps=v, metric="rx_pps", value=v, unit="packets/s", source="fixture")
            for p, vals in by_payload.items() for r, v in enumerate(vals, 1)]
    return rows


def by_metric(rows, metric):
    return {r["source"].split(":")[0]: r for r in rows if r["metric"] == metric}


def test_a_step_made_of_noise_is_not_claimed(tmp_path):
    # CV ~30 % at both payloads: the 22 -> 24 B drop of the medians (20 kpps) lies inside the spread
    write_tidy("pps", pps(tmp_path, {22: [1.0e5, 1.4e5, 0.7e5], 24: [0.8e5, 1.2e5, 0.6e5]}), tmp_path)
    unclaimed = {}
    assert "pps_drop_payload_bytes" not in reproduced(tmp_path, unclaimed)
    assert unclaimed["pps_drop_payload_bytes"] == (
        "22 B → 24 B: medians 0.1 and 0.08 Mpps, the drop 0.02 Mpps does not exceed the wider min-max of the "
        "repetitions (0.07 Mpps)")
    r = by_metric(compare(tmp_path), "pps_drop_payload_bytes")["paper"]
    assert (r["reproduced"], r["ok"], r["gating"]) == (NOT_DISTINGUISHABLE_HERE, False, False)


def test_a_step_beyond_both_spreads_is_claimed(tmp_path):
    write_tidy("pps", pps(tmp_path, {22: [1.00e5, 1.01e5, 1.02e5], 24: [0.90e5, 0.91e5, 0.92e5]}), tmp_path)
    assert reproduced(tmp_path)["pps_drop_payload_bytes"] == 24
    r = by_metric(compare(tmp_path), "pps_drop_payload_bytes")["paper"]
    assert (r["reproduced"], r["ok"]) == (24, True)


def test_a_step_from_one_repetition_has_no_spread_to_be_judged_by(tmp_path):
    write_tidy("pps", pps(tmp_path, {22: [1.0e5], 24: [0.9e5]}), tmp_path)
    unclaimed = {}
    reproduced(tmp_path, unclaimed)
    assert unclaimed["pps_drop_payload_bytes"] == (
        "22 B → 24 B: 1 repetition at one of them, no spread to judge the drop against")


def test_a_rate_already_low_at_the_smallest_payload_is_no_step(tmp_path):
    """The smallest payload's rate below the plateaus' midpoint: nothing measured before it, no step claimed."""
    write_tidy("pps", pps(tmp_path, {2: [0.80e5, 0.81e5], 22: [1.00e5, 1.01e5], 24: [0.85e5, 0.86e5],
                                     64: [0.85e5, 0.86e5]}), tmp_path)
    unclaimed = {}
    assert "pps_drop_payload_bytes" not in reproduced(tmp_path, unclaimed)
    assert unclaimed["pps_drop_payload_bytes"] == (
        "the rate is below the midpoint of the two plateaus already at 2 B, the smallest payload measured: there is "
        "no step into it to judge")


def test_a_step_in_the_paired_design_is_judged_by_the_ratios_cis(tmp_path):
    """Where the pps table holds the ratio rows, the drop of XenoFlow's ratio to the reference is
    compared with the CIs (rank_rows' rows, every round at the same ratio: a zero-width CI)."""
    rows = []
    for p, ratio in ((22, 0.95), (24, 0.90)):
        blocks = [(r, k, lb, 1e5 * (ratio if lb == "xenoflow" else 1.0)) for r in (1, 2) for k in (1, 2, 3)
                  for lb in (WIRE, "xenoflow")]
        common = dict(testbed="fx", experiment="pps", point=f"payload-{p}", payload_bytes=p, source="fixture")
        rows += rank_rows(blocks, [WIRE, "xenoflow"], WIRE, common, 100, 3)
        rows += pps(tmp_path, {p: [1e5 * ratio - 2e4, 1e5 * ratio + 2e4]})  # absolute: inside the spread
    write_tidy("pps", rows, tmp_path)
    assert reproduced(tmp_path)["pps_drop_payload_bytes"] == 24


def loss(d, by_rate: dict):
    rows = [row(testbed="fx", experiment="loss", point=f"lb-xenoflow_rate_pps-{int(rate)}", lb="xenoflow",
                payload_bytes=22, offered_pps=rate * (1 + 0.001 * r), measured_pps=rate * (1 - v / 100), repetition=r,
                metric="loss_pct", value=v, unit="%", source="fixture")
            for rate, vals in by_rate.items() for r, v in enumerate(vals, 1)]
    write_tidy("loss", rows, d)


def test_a_loss_onset_inside_the_no_loss_spread_is_not_claimed(tmp_path):
    loss(tmp_path, {1e6: [0.0, 0.5], 2e6: [-0.2, 0.3], 3e6: [0.3, 0.6], 4e6: [0.2, 0.7]})
    unclaimed = {}
    assert "loss_onset_mpps" not in reproduced(tmp_path, unclaimed)
    assert unclaimed["loss_onset_mpps"] == (
        "loss 0.45 % at 3 Mpps against the no-loss level 0.15 % (min-max -0.2 to 0.5 %): no rate's loss lies "
        "outside the spread of the no-loss level and its own repetitions")


def test_a_loss_onset_beyond_the_spread_is_claimed(tmp_path):
    loss(tmp_path, {1e6: [0.0, 0.05], 2e6: [-0.05, 0.0], 3e6: [0.02, 0.04], 4e6: [2.0, 2.2]})
    assert reproduced(tmp_path)["loss_onset_mpps"] == 4.0


@pytest.mark.parametrize("ratios, onset, why", [
    ({1e6: 1.0, 2e6: 1.0, 3e6: 0.8}, 3.0, None),
    ({1e6: 1.0, 2e6: 0.9, 3e6: 0.8}, 2.0, None),
    ({1e6: 1.0, 2e6: 1.0, 3e6: 1.0}, None,
     "at every offered rate up to 3 Mpps XenoFlow's delivered rate is not distinguishable from the reference's in "
     "the same rounds (its ratio's CI includes 1)"),
    # below 1 beyond the CI, but by less than an onset's 0.1 percentage points: not an onset
    ({1e6: 1.0, 2e6: 0.9995, 3e6: 0.8}, 3.0, None),
    ({1e6: 1.0, 2e6: 0.9995, 3e6: 0.9992}, None,
     "at 2 Mpps XenoFlow delivered less than the reference in the same rounds, but by less than an onset's 0.1 "
     "percentage points (its ratio's CI reaches 0.9995), and by no more at any rate up to 3 Mpps"),
])
def test_the_paired_loss_onset_is_where_the_lb_delivers_less_than_the_reference(tmp_path, ratios, onset, why):
    """In the paired design the onset is the lowest rate whose ratio's CI lies below 1, even where
    the absolute losses (the machine's as much as the LB's) rose earlier for both."""
    from .test_plots_layout import paired_loss_rows
    write_tidy("loss", paired_loss_rows({"xenoflow": ratios}, list(ratios)), tmp_path)
    unclaimed = {}
    got = reproduced(tmp_path, unclaimed)
    assert got.get("loss_onset_mpps") == onset
    assert unclaimed.get("loss_onset_mpps") == why


# --- agreement -------------------------------------------------------------------------------------

def paired(experiment, ratios: dict, payload=22):
    """rank_rows of blocks where every round gives each LB the same ratio to the reference."""
    lbs = [WIRE, *ratios]
    blocks = [(r, k, lb, 1e5 * (1.0 if lb == WIRE else ratios[lb])) for r in (1, 2) for k in (1, 2, 3) for lb in lbs]
    common = dict(testbed="fx", experiment=experiment, point=f"payload-{payload}", payload_bytes=payload,
                  source="fixture")
    return rank_rows(blocks, lbs, WIRE, common, 100, 3)


def with_rank_fixture(d):
    d.mkdir(exist_ok=True)
    for f in ("rate_ranking.csv", "rate_ranking.csv.json"):
        shutil.copy(SMALL / f, d)
    return read_tidy(d, "rate_ranking")


def test_compare_and_rank_agree_where_their_cis_overlap(tmp_path):
    rk = with_rank_fixture(tmp_path)  # xenoflow/wire 0.93 [0.90, 0.96], ebpf/wire 0.95 [0.95, 0.95]
    assert set(rk.lb) == {"xenoflow", "ebpf"}
    write_tidy("compare", paired("compare", {"xenoflow": 0.93, "ebpf": 0.95}), tmp_path)
    f = {x.check: x for x in agreement(tmp_path)}
    assert f[f"compare_vs_rank/xenoflow/{WIRE}/22"] == Finding(
        f"compare_vs_rank/xenoflow/{WIRE}/22", True,
        f"xenoflow/{WIRE} at 22 B payload: compare 0.930 [0.930, 0.930], rate_ranking 0.930 [0.900, 0.960]: "
        "the CIs overlap")
    assert all(x.ok for x in f.values()) and len(f) == 3


def test_compare_and_rank_that_contradict_are_named(tmp_path):
    with_rank_fixture(tmp_path)
    write_tidy("compare", paired("compare", {"xenoflow": 0.80, "ebpf": 0.95}), tmp_path)
    bad = [x for x in agreement(tmp_path) if not x.ok]
    assert [x.text for x in bad] == [
        "xenoflow/ebpf at 22 B payload: compare 0.842 [0.842, 0.842], rate_ranking 0.979 [0.947, 1.011]: the CIs "
        "do not overlap: the two experiments disagree (the machine's state moved between them, or one of them "
        "measured another path)",
        f"xenoflow/{WIRE} at 22 B payload: compare 0.800 [0.800, 0.800], rate_ranking 0.930 [0.900, 0.960]: the CIs "
        "do not overlap: the two experiments disagree (the machine's state moved between them, or one of them "
        "measured another path)"]


def test_the_references_rate_is_flat_below_the_network_limit(tmp_path):
    write_tidy("pps", pps(tmp_path, {2: [1.00e5, 1.03e5, 1.01e5], 22: [1.02e5, 1.00e5, 1.04e5],
                                     48: [0.99e5, 1.025e5, 1.005e5], 128: [0.5e5, 0.52e5, 0.51e5]}, lb=WIRE), tmp_path)
    [f] = agreement(tmp_path)
    assert (f.check, f.ok) == (f"reference_flat/{WIRE}", True)
    assert f.text.startswith(f"{WIRE}'s rate below 64 B payload: flat: its 3 payloads' medians range from "
                             "0.1005 Mpps at 48 B to 0.102 Mpps at 22 B, no further apart than its repetitions' own "
                             "spread gives (permutation test of the payloads, p = ")
    assert f.text.endswith(" ≥ 0.05)")


def test_a_reference_rate_that_moves_between_payloads_is_named(tmp_path):
    write_tidy("pps", pps(tmp_path, {2: [1.00e5, 1.01e5, 1.005e5], 22: [1.02e5, 1.03e5, 1.025e5],
                                     48: [0.90e5, 0.91e5, 0.905e5]}, lb=WIRE), tmp_path)
    [(ok, text)] = [(x.ok, x.text) for x in agreement(tmp_path)]
    head, p, tail = re.fullmatch(r"(.*, p = )([0-9.e-]+)( < 0\.05\).*)", text).groups()
    assert (ok, head, tail) == (False, (
        f"{WIRE}'s rate below 64 B payload: not flat: its 3 payloads' medians range from 0.0905 Mpps at 48 B to "
        "0.1025 Mpps at 22 B, further apart than its repetitions' own spread gives (permutation test of the "
        "payloads, p = "), " < 0.05): the machine's state moved between payloads, or the path depends on the payload")
    # the observed partition is the most extreme one: p is the design's smallest, 1/280, up to the
    # Monte Carlo error of FLAT_PERMUTATIONS relabellings
    assert abs(float(p) - smallest_p_value([3, 3, 3])) < 4 * (smallest_p_value([3, 3, 3]) / FLAT_PERMUTATIONS) ** 0.5


@pytest.mark.parametrize("step, share_flat", [
    # a flat rate, repetitions with a 5 % CV: judged flat in about 95 % of studies (the test's level);
    # the min-max overlap this check used before judged it flat in about 43 % (six payloads of three)
    (1.00, (0.92, 1.0)),
    # two of six payloads 15 % slower: judged not flat in nearly every study
    (0.85, (0.0, 0.05)),
])
def test_how_often_the_flat_check_says_flat(step, share_flat):
    rng = np.random.default_rng(7)
    flat = 0
    for _ in range(200):
        groups = [rng.normal(1e5 * (step if i < 2 else 1.0), 5e3, 3) for i in range(6)]
        flat += flat_p_value(groups, permutations=400, seed=int(rng.integers(1 << 30))) >= 0.05
    assert share_flat[0] <= flat / 200 <= share_flat[1]


@pytest.mark.parametrize("sizes, smallest", [
    ([2, 2], 1 / 3),             # {a,b}{c,d}: 3 partitions into two pairs
    ([2, 2, 2], 1 / 15),         # 15 partitions into three pairs: never below 0.05
    ([3, 3, 3], 1 / 280),
    ([2, 3], 1 / 10),
])
def test_the_smallest_p_value_a_design_can_give(sizes, smallest):
    assert smallest_p_value(sizes) == pytest.approx(smallest)


def test_too_few_repetitions_to_tell_are_not_judged(tmp_path):
    write_tidy("pps", pps(tmp_path, {2: [1.00e5, 1.01e5], 22: [1.02e5, 1.03e5], 48: [0.90e5, 0.91e5]}, lb=WIRE),
               tmp_path)
    assert [(x.ok, x.text) for x in agreement(tmp_path)] == [
        (None, f"{WIRE}'s rate below 64 B payload: not judged, 3 payloads of 2/2/2 repetitions cannot show a "
               "difference at 95% (the smallest p-value they can give is 0.067)")]


def test_nothing_to_check_is_no_finding(tmp_path):
    write_tidy("pps", pps(tmp_path, {22: [1e5, 1.1e5]}), tmp_path)
    assert agreement(tmp_path) == []


@pytest.mark.parametrize("n", [1, 2])
def test_a_reference_with_one_repetition_is_not_judged(tmp_path, n):
    write_tidy("pps", pps(tmp_path, {2: [1e5] * n, 22: [1e5]}, lb=WIRE), tmp_path)
    assert [(x.ok, x.text) for x in agreement(tmp_path)] == [
        (None, f"{WIRE}'s rate below 64 B payload: not judged, a payload with one repetition (no spread to "
               "judge the payloads' differences against)")]
