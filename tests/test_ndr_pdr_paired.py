"""The search kind's paired design (xenobench.search.run_searches_in_turns, xenobench.measure.search):
one MLRsearch per LB, the searches' trials strictly taking turns, each against a synthetic device of
its own (the real MLRsearch; a fake measurer at the traffic boundary); the ratio rows and verdicts
per repetition and per point; the figure's "not distinguishable"; and one short live run on the
namespace testbed whose every trial was forwarded by its own LB."""

import math
import threading

import pytest

from xenobench.search import Goal, Measured, SearchSettings, TurnError, run_search, run_searches_in_turns

CEILINGS = {"wire": 150_000.0, "xenoflow": 100_000.0, "ebpf": 60_000.0}  # each device forwards all up to here


def settings(**kw) -> SearchSettings:
    base = dict(goals=(Goal("NDR", 0.0), Goal("PDR", 0.005)), min_load_pps=10_000, max_load_pps=200_000,
                exceed_ratio=0.0, relative_width=0.02, initial_trial_duration_s=0.5,
                final_trial_duration_s=1.0, duration_sum_s=1.0, preceding_targets=1, warmup_s=0)
    return SearchSettings(**{**base, **kw})


def device(name: str, ran: list, fail_at: int | None = None):
    """A fake measurer for search `name`: half of the load above its ceiling lost; `ran` gets
    (name, k) per trial measured; trial `fail_at` raises."""
    def trial(k: int, duration: float, load: float) -> Measured:
        if k == fail_at:
            raise ConnectionError(f"the generator of {name} vanished")
        ran.append((name, k))
        offered = int(round(load * duration))
        c = CEILINGS[name]
        lost = 0 if load <= c else math.ceil(offered * 0.5 * (load - c) / load)
        return Measured(offered, offered - lost, duration)
    return trial


def round_robin(names: list[str], counts: dict[str, int]) -> list[tuple[str, int]]:
    """The strict turn order: round r runs trial r of every search that asks for one."""
    return [(n, r) for r in range(1, max(counts.values()) + 1) for n in names if r <= counts[n]]


TURNS = [  # (case, names, max_load_pps per search (None: the default))
    ("three searches, the slowest device needs the most trials", ["wire", "xenoflow", "ebpf"], {}),
    ("a search ending early leaves the ring, the others go on", ["wire", "ebpf"], {"wire": 160_000}),
    ("one search alone", ["xenoflow"], {}),
]


@pytest.mark.parametrize("case, names, max_load", TURNS, ids=[t[0] for t in TURNS])
def test_searches_take_turns_trial_by_trial_and_find_what_each_finds_alone(case, names, max_load):
    ran: list = []
    searches = {n: (settings(**({"max_load_pps": max_load[n]} if n in max_load else {})), device(n, ran), None)
                for n in names}
    records, order = run_searches_in_turns(searches, progress=lambda *_: None)
    counts = {n: records[n]["n_trials"] for n in names}
    assert order == ran == round_robin(names, counts)
    if len(names) > 1:
        assert len(set(counts.values())) > 1, counts  # one ended before another: the ring went on without it
    for n in names:  # taking turns changes nothing of what a search asks or finds
        alone = run_search(searches[n][0], device(n, []), progress=lambda *_: None)
        assert [g["lower_bound_pps"] for g in records[n]["goals"]] == [g["lower_bound_pps"] for g in alone["goals"]]
        assert records[n]["trials"] == [dict(t, seconds=records[n]["trials"][i]["seconds"])
                                        for i, t in enumerate(alone["trials"])]


def test_an_exception_in_one_search_stops_all_at_their_next_turn_naming_the_trial():
    ran: list = []
    names = ["wire", "xenoflow", "ebpf"]
    searches = {n: (settings(), device(n, ran, fail_at=3 if n == "xenoflow" else None), None) for n in names}
    before = threading.active_count()
    with pytest.raises(TurnError) as e:
        run_searches_in_turns(searches, progress=lambda *_: None)
    assert str(e.value) == ("Failed to search NDR/PDR of xenoflow in turns: trial 3: the generator of xenoflow "
                            "vanished; the other searches (wire, ebpf) stopped at their next turn")
    assert (e.value.search, e.value.trial, type(e.value.error)) == ("xenoflow", 3, ConnectionError)
    # wire's third trial ran before xenoflow's turn; nothing after the failure
    assert ran == [("wire", 1), ("xenoflow", 1), ("ebpf", 1), ("wire", 2), ("xenoflow", 2), ("ebpf", 2), ("wire", 3)]
    assert threading.active_count() == before  # every search's thread ended
