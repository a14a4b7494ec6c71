"""The trial runner on the namespace testbed: trial directory contents, counters around a real
procedure, retries of invalid trials, completed trials not re-run."""

import json

from xenobench.layout import TrialDir, point_id
from xenobench.trials import Validity, run_trial

from .conftest import needs_root, send_udp

pytestmark = needs_root

IFACES = [("fips1", "eth0"), ("fips2", "eth0")]


def send_frames(ctx):
    """A real procedure: N raw frames client → dns backend MAC, to an address nobody owns."""
    tb = ctx.testbed
    bi = tb.cfg.role("dns_backend").iface()
    n = ctx.point["frames"]
    r = send_udp(tb, "client", dst_mac=bi.mac, dst_ip="198.18.0.251", port=9, payload="t", count=n, check=False)
    v = Validity()
    v.require("sender_ok", r.ok)
    return {"sender": r.stdout.strip()}, v


def test_trial_directory_and_counters(testbed, tmp_path):
    out = tmp_path / point_id({"frames": 50})
    res = run_trial(testbed, "unit", {"frames": 50}, 1, TrialDir(out), send_frames, ifaces=IFACES,
                    max_attempts=1, settle_s=0.1, cooldown_s=0, progress=lambda s: None)
    assert res["valid"] and res["chosen_attempt"] == 1
    for f in ("params.json", "metadata.json", "result.json", "attempt-1/counters_before.json",
              "attempt-1/counters_after.json", "attempt-1/outputs.json", "attempt-1/validity.json"):
        assert (out / f).is_file(), f
    assert res["outputs"]["counters"]["fips2:eth0"]["view"]["rx_packets"] == 50
    assert res["outputs"]["counters"]["fips1:eth0"]["view"]["tx_packets"] == 50
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["nodes"]["fips2"]["eth0"]["driver"] == "veth" and meta["config_hash"]
    raw = json.loads((out / "attempt-1/counters_after.json").read_text())
    assert "rx_packets" in raw["fips2:eth0"]["raw"]["sysfs"]  # raw snapshot kept verbatim


def test_invalid_trial_is_retried_then_recorded_not_dropped(testbed, tmp_path):
    calls = []

    def always_invalid(ctx):
        calls.append(ctx.attempt.path.name)
        v = Validity()
        v.require("rate_reached", False, "achieved 10 of 100 pps")
        return {}, v

    lines = []
    res = run_trial(testbed, "unit", {"x": 1}, 1, TrialDir(tmp_path / "t"), always_invalid, ifaces=IFACES,
                    max_attempts=3, settle_s=0, cooldown_s=0, progress=lines.append)
    assert calls == ["attempt-1", "attempt-2", "attempt-3"]
    assert res["valid"] is False and len(res["attempts"]) == 3
    assert res["attempts"][0]["reasons"] == ["rate_reached: achieved 10 of 100 pps"]
    assert "INVALID (rate_reached: achieved 10 of 100 pps)" in lines[-1]
    # complete: a second run does not call the procedure again
    again = run_trial(testbed, "unit", {"x": 1}, 1, TrialDir(tmp_path / "t"), always_invalid, ifaces=IFACES,
                      max_attempts=3, settle_s=0, cooldown_s=0, progress=lines.append)
    assert len(calls) == 3 and again == res


def test_interrupted_trial_has_no_result_and_reruns(testbed, tmp_path):
    def interrupted(ctx):
        raise KeyboardInterrupt

    try:
        run_trial(testbed, "unit", {"x": 2}, 1, TrialDir(tmp_path / "t"), interrupted, ifaces=IFACES,
                  max_attempts=1, settle_s=0, cooldown_s=0, progress=lambda s: None)
    except KeyboardInterrupt:
        pass
    assert not (tmp_path / "t" / "result.json").exists()
    res = run_trial(testbed, "unit", {"frames": 5}, 1, TrialDir(tmp_path / "t"), send_frames, ifaces=IFACES,
                    max_attempts=1, settle_s=0, cooldown_s=0, progress=lambda s: None)
    assert res["valid"]


def test_an_impossible_value_makes_the_attempt_invalid_and_it_is_retried(testbed, tmp_path):
    """The check the experiments pass (xenobench.aggregate.check_trial): a pps attempt that recorded
    3x the offered rate is invalid as values_possible, by name, and the next attempt is kept; the
    trial's rows pass aggregate afterwards."""
    from xenobench.aggregate import aggregate, check_trial

    rx = iter([3_000_000.0, 1_000_000.0])

    def pps_attempt(ctx):
        facts = {"kind": "rate", "lb": "ebpf", "paired": False, "lbs": None, "server": None,
                 "profile": "udp_payload", "generator": "xdpgen"}
        return {"facts": facts, "payload": 22, "rx_pps": next(rx),
                "generator": {"achieved_pps": 1_000_000.0}}, Validity()

    trial = TrialDir(tmp_path / "local" / "trials" / "pps" / point_id({"lb": "ebpf", "payload": 22}) / "rep-1")
    lines = []
    res = run_trial(testbed, "pps", {"lb": "ebpf", "payload": 22}, 1, trial, pps_attempt, ifaces=IFACES,
                    max_attempts=2, settle_s=0, cooldown_s=0, progress=lines.append, check=check_trial)
    first = res["attempts"][0]
    assert not first["valid"] and first["checks"]["values_possible"] is False
    assert "column measured_pps: 3e+06 is out of range (must be >= 0 and <= 1e+12 and <= offered_pps x 1.5" \
        in first["reasons"][0], first
    assert "INVALID (values_possible: " in lines[0]
    assert res["valid"] and res["chosen_attempt"] == 2 and res["outputs"]["rx_pps"] == 1e6
    assert aggregate(tmp_path / "local", progress=lambda s: None)["pps"] == 1
