"""What the machine did to a trial (xenobench.machine): steal, frequency and other load read from
/proc snapshots (fixture texts in the format SNAPSHOT_SCRIPT prints, made by running it on this
machine and editing the numbers), the flag and retry in run_trial, and the report's section."""

import json

import pytest

from xenobench import machine
from xenobench.layout import TrialDir
from xenobench.report import _machine_section
from xenobench.trials import Validity, disturbed_only, run_trial

from .conftest import needs_root

# /proc/stat cpu lines: user nice system idle iowait irq softirq steal
BEFORE = """#hz
100
#stat
cpu0 1000 0 500 8000 0 0 100 0 0 0
cpu1 2000 0 500 7000 0 0 100 50 0 0
#freq
/sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq 2400000
#cpuinfo
processor\t: 0
cpu MHz\t\t: 2596.140
processor\t: 1
cpu MHz\t\t: 2596.140
#vmstat
pgalloc_dma 0
pgalloc_dma32 1000
pgalloc_normal 50000
pgalloc_movable 0
#tasks
10 (xdpgen) R 1 10 10 0 -1 4194304 0 0 0 0 100 50 0 0 20 0 1 0 5000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0
11 (napi/p0-8193) S 2 0 0 0 -1 4194304 0 0 0 0 0 300 0 0 20 0 1 0 6000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0
12 (my (odd) prog) S 1 12 12 0 -1 4194304 0 0 0 0 10 10 0 0 20 0 1 0 7000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0
13 (gone) S 1 13 13 0 -1 4194304 0 0 0 0 10 10 0 0 20 0 1 0 7100 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0
#end
"""
# 200 ticks later on each CPU: cpu0 160 busy / 40 idle; cpu1 100 busy, 60 idle, 40 steal
AFTER = """#hz
100
#stat
cpu0 1120 0 520 8040 0 0 120 0 0 0
cpu1 2050 0 530 7060 0 0 120 90 0 0
#freq
/sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq 1800000
#cpuinfo
processor\t: 0
cpu MHz\t\t: 2596.140
processor\t: 1
cpu MHz\t\t: 2596.140
#vmstat
pgalloc_dma 0
pgalloc_dma32 1000
pgalloc_normal 1150000
pgalloc_movable 0
#tasks
10 (xdpgen) R 1 10 10 0 -1 4194304 0 0 0 0 180 90 0 0 20 0 1 0 5000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0
11 (napi/p0-8193) S 2 0 0 0 -1 4194304 0 0 0 0 0 340 0 0 20 0 1 0 6000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0
12 (my (odd) prog) S 1 12 12 0 -1 4194304 0 0 0 0 30 20 0 0 20 0 1 0 7000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0
14 (python3) S 1 14 14 0 -1 4194304 0 0 0 0 6 4 0 0 20 0 1 0 9000 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0
#end
"""
PLACEMENT = {"generator_cpu": 0, "dut_cpu": 1}


def lim(steal=0.05, other=None, pair=None, allocs=None) -> dict:
    """The machine rule's limits, as machine.limits reads them from a config"""
    return {"max_steal_share": steal, "max_other_load_share": other, "max_cpu_pair_rtt_ns": pair,
            "max_page_allocs_per_frame": allocs}


def test_snapshot_text_is_parsed_field_by_field():
    s = machine.parse_snapshot(BEFORE)
    assert s["hz"] == 100
    assert s["cpus"][1] == [2000, 0, 500, 7000, 0, 0, 100, 50]
    assert s["freq_khz"] == {1: 2400000} and s["cpuinfo_mhz"] == {0: 2596.14, 1: 2596.14}
    # a comm with spaces and parentheses: split at the last ')'
    assert s["tasks"][12] == ("my (odd) prog", 7000, 20, 1)
    assert s["tasks"][10] == ("xdpgen", 5000, 150, 0)
    assert s["page_allocs"] == 51000 and machine.parse_snapshot("#vmstat\nnr_free_pages 3\n")["page_allocs"] is None


def test_page_allocations_per_second_of_the_trial():
    # 1.1 M pages over the 2 s of the trial (200 ticks at 100 Hz)
    rec = machine.record({"local": machine.parse_snapshot(BEFORE)}, {"local": machine.parse_snapshot(AFTER)},
                         PLACEMENT, lim())
    assert rec["hosts"]["local"]["page_allocs_per_s"] == 550000
    no = machine.parse_snapshot(AFTER.replace("#vmstat", "#other"))  # a host without the counters
    assert machine.record({"h": machine.parse_snapshot(BEFORE)}, {"h": no}, PLACEMENT, lim())["hosts"]["h"]["page_allocs_per_s"] is None


@pytest.mark.parametrize("cpu, field, value", [
    ("0", "steal_share", 0.0), ("1", "steal_share", 0.2),
    ("0", "busy_share", 0.8), ("1", "busy_share", 0.5), ("1", "idle_share", 0.3),
    ("0", "packet_tasks_share", 0.6),   # xdpgen: 120 of 200 ticks
    ("1", "packet_tasks_share", 0.2),   # the NAPI thread: 40
    ("1", "other_share", 0.15),         # 30 by the odd program (13 exited: not counted)
    ("0", "other_share", 0.05),         # a task born during the trial: all its 10 ticks
    ("1", "freq_mhz", 1800.0), ("0", "freq_mhz", "unavailable"), ("0", "cpuinfo_mhz", 2596.14),
])
def test_load_of_the_trials_cpus(cpu, field, value):
    rec = machine.record({"local": machine.parse_snapshot(BEFORE)}, {"local": machine.parse_snapshot(AFTER)},
                         PLACEMENT, lim())
    assert rec["hosts"]["local"]["cpus"][cpu][field] == value


def test_steal_above_the_share_is_disturbed_with_cpu_and_key_named():
    b, a = {"local": machine.parse_snapshot(BEFORE)}, {"local": machine.parse_snapshot(AFTER)}
    rec = machine.record(b, a, PLACEMENT, lim())
    assert rec["disturbed"] and rec["over"] == {"steal_share": 0.2} and rec["trial_cpus"] == [0, 1]
    assert machine.reason(rec) == ("a trial CPU's time the hypervisor gave to someone else (steal share) 0.2 > "
                                   "experiments.max_steal_share 0.05 (CPU 1 of local: 20.0 %): the machine's state, "
                                   "not the LB's")
    assert not machine.record(b, a, PLACEMENT, lim(0.25))["disturbed"]
    # only the generator's CPU placed: CPU 1's steal is not the trial's
    assert not machine.record(b, a, {"generator_cpu": 0}, lim())["disturbed"]
    top = machine.record(b, a, PLACEMENT, lim())["hosts"]["local"]
    assert [t["comm"] for t in top["other_tasks"]] == ["my (odd) prog", "python3"]
    assert [t["comm"] for t in top["packet_tasks"]] == ["xdpgen", "napi/p0-8193"]


# the one rule over the fixture's attempt (steal 0.2 and other load 0.15 on CPU 1) and sampled
# cache-line round trips: limits, samples -> the figures over their limits
RULE_CASES = [
    ("nothing judged", lim(None), [], {}),
    ("steal only", lim(0.05), [], {"steal_share": 0.2}),
    ("other load over 0.1", lim(None, 0.1), [], {"other_load_share": 0.15}),
    ("other load at its limit is not over", lim(None, 0.15), [], {}),
    ("the vCPUs apart at the end", lim(None, None, 200), [90.0, 412.5], {"cpu_pair_rtt_ns": 412.5}),
    ("a shared cache throughout", lim(None, None, 200), [88.0, 95.0], {}),
    ("no prober: placement not judged", lim(None, None, 200), [], {}),
    ("all three", lim(0.05, 0.1, 200), [300.0], {"steal_share": 0.2, "other_load_share": 0.15, "cpu_pair_rtt_ns": 300.0}),
]


@pytest.mark.parametrize("desc, limits, pair, over", RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_the_machine_rule(desc, limits, pair, over):
    b, a = {"local": machine.parse_snapshot(BEFORE)}, {"local": machine.parse_snapshot(AFTER)}
    rec = machine.record(b, a, PLACEMENT, limits, pair)
    assert rec["over"] == over and rec["disturbed"] == bool(over)


# what an unpaced trial's procedure hands the rule (machine.MEASURED_KEY) -> the figures over the limit
MEASURED_CASES = [
    ("the rate moved within the trial", {"unpaced_cv_pct": 22.5}, {"unpaced_cv_pct": 22.5}),
    ("a steady rate", {"unpaced_cv_pct": 4.0}, {}),
    ("at the limit is not over", {"unpaced_cv_pct": 10.0}, {}),
    ("too few intervals for a spread", {"unpaced_cv_pct": None}, {}),
    ("a paced trial hands nothing", None, {}),
    # a procedure measures only what MEASURED names: it cannot override a figure of the snapshots
    # (the fixture's steal share, 0.2, judged here against 0.05)
    ("no say over steal", {"steal_share": 0.0, "unpaced_cv_pct": 1.0}, {"steal_share": 0.2}),
]


@pytest.mark.parametrize("desc, measured, over", MEASURED_CASES, ids=[c[0] for c in MEASURED_CASES])
def test_a_figure_the_procedure_measured_is_judged_by_the_same_rule(desc, measured, over):
    b, a = {"local": machine.parse_snapshot(BEFORE)}, {"local": machine.parse_snapshot(AFTER)}
    steal = 0.05 if "steal_share" in (measured or {}) else None
    rec = machine.record(b, a, PLACEMENT, {**lim(steal), "max_unpaced_cv_pct": 10.0}, [], measured)
    assert rec["over"] == over and rec["disturbed"] == bool(over)
    if "unpaced_cv_pct" in over:
        assert machine.reason(rec) == (
            "an unpaced trial's rate moved within it, nothing but the machine changing (CV of the rates of its steady "
            "span's quarters, %) 22.5 > experiments.max_unpaced_cv_pct 10: the machine's state, not the LB's")


def test_a_span_too_short_judges_no_share():
    """3 ticks: one tick of steal would be a third of it"""
    short = AFTER.replace("cpu0 1120 0 520 8040 0 0 120 0 0 0", "cpu0 1001 0 501 8001 0 0 100 0 0 0").replace(
        "cpu1 2050 0 530 7060 0 0 120 90 0 0", "cpu1 2001 0 500 7001 0 0 100 51 0 0")
    rec = machine.record({"l": machine.parse_snapshot(BEFORE)}, {"l": machine.parse_snapshot(short)}, PLACEMENT,
                         lim(0.05, 0.1))
    assert rec["figures"]["steal_share"] is None and not rec["disturbed"]


def test_waiting_for_the_placement_to_come_back():
    """two samples in a row at or below the limit end the wait; a timeout says not calm"""
    clock = iter(range(100))
    samples = iter([450.0, 90.0, 460.0, 95.0, 80.0])
    calm, secs, seen = machine.wait_calm(lambda: next(samples), 200, 30, clock=lambda: next(clock), sleep=lambda s: None)
    assert calm and seen == [450.0, 90.0, 460.0, 95.0, 80.0]
    always = iter([450.0] * 50)
    clock = iter(range(100))
    calm, secs, seen = machine.wait_calm(lambda: next(always), 200, 3, clock=lambda: next(clock), sleep=lambda s: None)
    assert not calm and seen == [450.0] * 3  # samples at 1, 2, 3 s: the third reaches the timeout
    assert machine.wait_calm(None, 200, 30) == (True, 0.0, [])


def test_an_unreadable_host_is_recorded_not_flagged():
    rec = machine.record({"fips5": {"error": "ssh: timed out"}}, {"fips5": machine.parse_snapshot(AFTER)}, None, lim(0.0))
    assert rec["hosts"]["fips5"] == {"error": "ssh: timed out"} and not rec["disturbed"]


def _snapshots(monkeypatch, texts):
    """The hypervisor's steal cannot be made on demand: a double at that boundary hands
    run_trial the fixture snapshots in turn (before, after, before, after, ...)."""
    it = iter(texts)
    monkeypatch.setattr(machine, "snapshot", lambda testbed: {"local": machine.parse_snapshot(next(it))})


def _ok(ctx):
    return {"x": 1}, Validity()


def test_run_trial_records_the_machine_and_retries_a_stolen_attempt(local_cfg, tmp_path, monkeypatch):
    class Testbed:  # what run_trial reads of a testbed when no interface is measured
        cfg = local_cfg

        def cpu_placement(self):
            return PLACEMENT
    _snapshots(monkeypatch, [BEFORE, AFTER, BEFORE, BEFORE])  # attempt 1: 20 % steal; attempt 2: none
    lines = []
    res = run_trial(Testbed(), "unit", {"x": 1}, 1, TrialDir(tmp_path / "t"), _ok, ifaces=[], max_attempts=2,
                    settle_s=0, cooldown_s=0, progress=lines.append)
    assert res["valid"] and res["chosen_attempt"] == 2
    assert res["attempts"][0]["reasons"] == ["machine_undisturbed: a trial CPU's time the hypervisor gave to someone "
                                             "else (steal share) 0.2 > experiments.max_steal_share 0.05 (CPU 1 of "
                                             "local: 20.0 %): the machine's state, not the LB's"]
    meta = json.loads((tmp_path / "t" / "metadata.json").read_text())
    assert meta["machine"]["attempt-1"]["disturbed"] and not meta["machine"]["attempt-2"]["disturbed"]
    assert meta["machine"]["attempt-1"]["hosts"]["local"]["cpus"]["1"]["steal_share"] == 0.2
    # the report names the trial although its retry was valid
    text = "\n".join(_machine_section([(TrialDir(tmp_path / "t"), res)], tmp_path))
    assert "| t | attempt-1: steal_share 0.2 | valid (a later attempt) |" in text
    assert "## Trials the machine disturbed (1 of 1 trials;" in text
    assert "largest a trial CPU's time the hypervisor gave to someone else (steal share) 0.2;" in text


def test_an_unpaced_trial_whose_rate_moved_is_retried(tmp_path, monkeypatch):
    from xenobench.config import load_config
    cfg = load_config()  # config/local.yaml judges an unpaced trial's steadiness

    class Testbed:
        def cpu_placement(self):
            return PLACEMENT
    Testbed.cfg = cfg
    _snapshots(monkeypatch, [BEFORE, BEFORE] * 2)  # no steal, no load: only the procedure's figure judges
    cvs = iter([22.5, 3.1])

    def unpaced(ctx):
        return {machine.MEASURED_KEY: {"unpaced_cv_pct": next(cvs)}}, Validity()
    res = run_trial(Testbed(), "unit", {"x": 3}, 1, TrialDir(tmp_path / "t"), unpaced, ifaces=[], max_attempts=1,
                    settle_s=0, cooldown_s=0, progress=lambda m: None)
    limit = cfg.section("experiments")["max_unpaced_cv_pct"]
    assert res["valid"] and res["chosen_attempt"] == 2  # a spare attempt: the machine's, not the trial's
    assert res["attempts"][0]["reasons"] == [
        "machine_undisturbed: an unpaced trial's rate moved within it, nothing but the machine changing (CV of the "
        f"rates of its steady span's quarters, %) 22.5 > experiments.max_unpaced_cv_pct {limit:g}: the machine's state, not the LB's"]
    meta = json.loads((tmp_path / "t" / "metadata.json").read_text())["machine"]
    assert [meta[a]["figures"]["unpaced_cv_pct"] for a in ("attempt-1", "attempt-2")] == [22.5, 3.1]


@needs_root
def test_a_real_trial_records_this_machines_cpus(testbed, tmp_path):
    res = run_trial(testbed, "unit", {"x": 2}, 1, TrialDir(tmp_path / "t"), _ok, ifaces=[], max_attempts=1,
                    settle_s=0, cooldown_s=0, progress=lambda m: None)
    meta = json.loads((tmp_path / "t" / "metadata.json").read_text())
    rec = meta["machine"]["attempt-1"]
    place = meta["cpu_placement"]
    assert rec["trial_cpus"] == sorted({place["generator_cpu"], place["dut_cpu"]})
    assert list(rec["hosts"]) == ["fips4"]  # the loadgen's and the LB's node: one machine, read once
    cpus = rec["hosts"]["fips4"]["cpus"]
    assert sorted(cpus) == [str(c) for c in rec["trial_cpus"]]
    for c in cpus.values():  # shares of one CPU's ticks: they add up
        assert abs(c["busy_share"] + c["idle_share"] + c["steal_share"] - 1) < 0.02
    assert res["valid"] == (not rec["disturbed"])


class _Apart:
    """The cache-line prober, as a double (the host's placement of the vCPUs cannot be made on
    demand): every sample 450 ns, the vCPUs on cores without a shared cache."""
    error = None

    def __call__(self):
        return 450.0

    def close(self):
        pass


@pytest.mark.parametrize("inside, disturbed", [((), True), (("cpu_pair_rtt_ns",), False)])
def test_an_interleaved_design_judges_the_placement_per_round_not_per_repetition(tmp_path, monkeypatch, inside,
                                                                                  disturbed):
    from xenobench.config import load_config
    cfg = load_config()  # the rule's default limits (the suite's local_cfg turns placement off)

    class Testbed:
        def __init__(self):
            self.cfg = cfg

        def cpu_placement(self):
            return PLACEMENT
    _snapshots(monkeypatch, [BEFORE, BEFORE] * (1 + cfg.section("experiments")["machine_retries"]))
    monkeypatch.setattr(machine, "cpu_pair_rtt", lambda testbed: _Apart())
    monkeypatch.setattr(machine, "wait_calm", lambda *a, **k: (False, 0.0, [450.0]))  # the wait, not waited
    res = run_trial(Testbed(), "unit", {"x": 3}, 1, TrialDir(tmp_path / "t"),
                    lambda ctx: ({"machine_judged_per_round": list(inside)}, Validity()), ifaces=[], max_attempts=1,
                    settle_s=0, cooldown_s=0, progress=lambda m: None)
    rec = json.loads((tmp_path / "t" / "metadata.json").read_text())["machine"]["attempt-1"]
    assert rec["cpu_pair_rtt_ns"] == [450.0, 450.0]  # recorded either way
    assert rec["disturbed"] == disturbed and res["valid"] == (not disturbed)
    # disturbed every time: one attempt and the machine's spares, then recorded invalid
    assert len(res["attempts"]) == (1 + cfg.section("experiments")["machine_retries"] if disturbed else 1)


# attempts in turn: "stolen" (20 % steal: the machine's alone), "broken" (the procedure's own check
# fails, on a calm machine), "ok"; machine_retries; the attempts run and the trial's validity
RETRIES = [
    (["stolen", "ok"], 1, 2, True),
    (["stolen", "stolen", "ok"], 2, 3, True),
    (["stolen", "stolen", "ok"], 1, 2, False),     # the spare attempt used up: recorded invalid
    (["stolen", "ok"], 0, 1, False),                # no spare: max_attempts alone
    (["broken", "ok"], 3, 1, False),                # a failure of the trial's own is never the machine's
    (["stolen", "broken", "ok"], 3, 2, False),      # the spare covers the stolen one, not the broken one
    (["rounds", "ok"], 1, 2, True),                 # an interleaved design's rounds left out by the rule
    (["rounds", "rounds", "ok"], 1, 2, False),
    (["rounds+broken", "ok"], 3, 1, False),         # with a failure of its own: the trial's
]


@pytest.mark.parametrize("attempts, retries, ran, valid", RETRIES)
def test_a_disturbed_attempt_uses_a_spare_not_one_of_max_attempts(local_cfg, tmp_path, monkeypatch, attempts,
                                                                    retries, ran, valid):
    sec = {**local_cfg.section("experiments"), "machine_retries": retries, "machine_wait_s": 0,
           "max_steal_share": 0.05}

    class Cfg:
        def __getattr__(self, name):
            return getattr(local_cfg, name)

        def section(self, name):
            return sec if name == "experiments" else local_cfg.section(name)

    class Testbed:
        cfg = Cfg()

        def cpu_placement(self):
            return PLACEMENT
    _snapshots(monkeypatch, [x for a in attempts for x in ((BEFORE, AFTER) if a == "stolen" else (BEFORE, BEFORE))])
    kinds = iter(attempts)

    def proc(ctx):
        v, kind = Validity(), next(kinds)
        v.require("procedure_check", "broken" not in kind, "the procedure's own check")
        v.require(machine.ROUNDS_KEPT, "rounds" not in kind, "fewer than rounds kept in max_rounds")
        return {"x": 1}, v
    res = run_trial(Testbed(), "unit", {"x": 4}, 1, TrialDir(tmp_path / "t"), proc, ifaces=[], max_attempts=1,
                    settle_s=0, cooldown_s=0, progress=lambda m: None)
    assert (len(res["attempts"]), res["valid"]) == (ran, valid)
    # what a search makes up by its next trial: invalid with every attempt the machine's alone
    assert disturbed_only(res) == (not valid and all(a in ("stolen", "rounds") for a in attempts[:ran]))
