"""The TRex path against the real client library: lbr-trex-client 3.4.0's STLClient, unmodified,
talking ZeroMQ JSON-RPC to a test double of the TRex server (tests/trex_server_double.py; there is
no TRex server or DPDK NIC here). The client's own checks run: decode_multiplier, port validation,
stream JSON, ownership; so a call the real client or server would refuse fails here too.

The client runs where the harness runs it: in the TRex worker process (trex_worker.py); importing
the TRex client replaces scapy and PyYAML, so it never enters this process either (decode_multiplier
is asked in a child process).
"""

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from xenobench import REPO_ROOT
from xenobench.cli import main as cli
from xenobench.config import load_config, section_with_defaults
from xenobench.experiments import plan
from xenobench.traffic import TrafficError, TrialSpec, run_traffic, traffic_config
from xenobench.traffic.profiles import compile_frames, compile_stream, load_streams
from xenobench.traffic.trex import TrexDriver, pps_mult

from .profile_loads import preload
from .trex_server_double import TrexServerDouble

FIPS = REPO_ROOT / "config" / "fips.yaml"
LOCAL = {"vip": "198.18.0.100", "dst_mac": "02:00:00:00:05:00", "src_mac": "02:00:00:00:04:00",
         "src_ip_base": "198.19.0.0"}


@pytest.fixture(scope="module", autouse=True)
def profiles_loaded():
    """The profiles this module compiles in its own process, loaded in one TRex loader process
    (tests/profile_loads.py); the driver's trials load theirs in the TRex worker, as a trial does."""
    preload([("udp_payload", {**LOCAL, "flows": 16}, None), ("udp_payload", {**LOCAL, "flows": 16, "cache_size": 0}, None),
             ("udp_payload", {**LOCAL, "flows": 4}, None), ("udp_payload", {"payload": "22"}, load_config(FIPS))])


def decode(mults: list[str]) -> list:
    """trex.utils.parsing_opts.decode_multiplier (what STLClient.start applies to `mult`) on each
    string, in a child process."""
    code = ("import json, sys, warnings; warnings.simplefilter('ignore'); import lbr_trex_client; "
            "from trex.utils.parsing_opts import decode_multiplier; "
            "print(json.dumps([decode_multiplier(m) for m in json.loads(sys.argv[1])]))")
    p = subprocess.run([sys.executable, "-c", code, json.dumps(mults)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def fips_rates() -> list[float]:
    """Every rate the fips plan sends with TRex: loss rates, background levels, and the pps and
    compare experiments' rate (0: as fast as possible)."""
    cfg = load_config(FIPS)
    rates = set()
    for t in plan(cfg):
        for key in ("rate_pps", "level_pps"):
            if key in t.point:
                rates.add(float(t.point[key]))
    ex = cfg.section("experiments")
    rates |= {float(ex[e]["rate_pps"]) for e in ("pps", "compare")}
    return sorted(rates)


def test_every_fips_plan_rate_passes_the_real_decode_multiplier():
    cfg = load_config(FIPS)
    drv = TrexDriver(traffic_config(cfg))
    rates = fips_rates()
    assert 15e6 in rates and 135e6 in rates and 90e6 in rates and 0.0 in rates
    mults = [drv.mult(r) for r in rates]
    got = decode(mults)
    for r, m, d in zip(rates, mults, got):
        assert d is not None, f"decode_multiplier refuses {m!r} (rate {r:g} pps)"
        if r > 0:
            assert d == {"type": "pps", "value": r / len(drv.ports), "op": "abs"}, (m, d)
        else:
            assert d == {"type": "percentage", "value": 100.0, "op": "abs"}
    # the old formatting (f"{rate:.6g}pps") fails this test: exponent form from 1 Mpps on
    old = [f"{r:.6g}pps" for r in rates if r > 0]
    assert "1.5e+07pps" in old and all(d is None for m, d in zip(old, decode(old)) if "e+" in m)


@pytest.mark.parametrize("rate,mult", [(15e6, "15000000pps"), (135e6, "135000000pps"), (1000, "1000pps"),
                                       (0.5, "0.5pps"), (96.7e6 / 3, "32233333.333pps"), (0, "100%")])
def test_pps_mult_is_plain_decimal(rate, mult):
    assert pps_mult(rate) == mult


def test_pps_mult_below_resolution_is_refused():
    with pytest.raises(TrafficError, match=r"^Failed to start traffic on TRex: rate 0.0001 pps per port rounds to 0"):
        pps_mult(0.0001)


def _tcfg(srv, ports=(0,), version="v3.04"):
    return section_with_defaults("traffic", {
        "generator": "trex", "trex": {"server": "127.0.0.1", "sync_port": srv.sync_port,
                                      "async_port": srv.async_port, "ports": list(ports), "version": version}})


def test_trex_server_double_real_client_full_trial_at_15_mpps():
    with TrexServerDouble(ports=2) as srv:
        res = TrexDriver(_tcfg(srv)).run("udp_payload", {**LOCAL, "payload": 22}, TrialSpec.of(15e6, duration_s=0.3, counts=False))
    assert res["valid"], res["reason"]
    assert res["tx_packets"] == 4_500_000 and res["achieved_pps"] == pytest.approx(15e6)
    assert res["server_version"] == "v3.04" and res["client_version"] == "lbr-trex-client 3.4.0"
    starts = srv.call("start_traffic")
    assert [(s["port_id"], s["mul"], s["duration"]) for s in starts] == [(0, {"type": "pps", "value": 15e6, "op": "abs"}, 0.3)]
    # what the client sent: one stream of 64 B frames; the driver read the server's 14 cores
    # (get_system_info dp_core_count_per_port) and the profile cached lcm(256 sources, 14) frames,
    # which 14 cores divide evenly into whole cycles (xb_common.cache_size)
    assert res["server_cores"] == 14 and res["tunables"]["cores"] == 14
    (add,) = srv.call("add_stream")
    assert add["port_id"] == 0 and add["stream"]["vm"]["cache"] == 1792
    assert add["stream"]["mode"] == {"type": "continuous", "rate": {"type": "pps", "value": 1}}
    m = srv.methods()
    assert m.index("api_sync_v2") < m.index("acquire") < m.index("add_stream") < m.index("start_traffic") \
        < m.index("release")


def test_trex_server_double_two_ports_share_the_rate():
    with TrexServerDouble(ports=2) as srv:
        res = TrexDriver(_tcfg(srv, ports=(0, 1))).run("udp_payload", {**LOCAL}, TrialSpec.of(30e6, duration_s=0.2, counts=False))
    assert res["valid"] and res["tx_packets"] == 6_000_000
    assert sorted((s["port_id"], s["mul"]["value"]) for s in srv.call("start_traffic")) == [(0, 15e6), (1, 15e6)]


@pytest.mark.parametrize("queue_full,max_pct,reason", [
    (9, None, "achieved 980 pps < 99 % of requested 1000 pps"),     # 1.84 % of 490: under the default 2 %
    (10, None, "achieved 980 pps < 99 % of requested 1000 pps; queue full: TRex ports [0] reported queue_full 10, "
               "2.04 % of the 490 frames sent, above the 2 % allowed (traffic.trex.queue_full_max_pct)"),
    (10, 2.5, "achieved 980 pps < 99 % of requested 1000 pps"),
])
def test_trex_server_double_low_rate_and_queue_full_make_the_trial_invalid(queue_full, max_pct, reason):
    tcfg = None
    with TrexServerDouble(ports=2, achieved=0.98, queue_full=queue_full) as srv:
        tcfg = _tcfg(srv)
        if max_pct is not None:
            tcfg["trex"]["queue_full_max_pct"] = max_pct
        res = TrexDriver(tcfg).run("udp_payload", {**LOCAL}, TrialSpec.of(1000, duration_s=0.5, counts=False))
    assert not res["valid"] and res["tx_packets"] == 490 and res["queue_full_count"] == queue_full
    assert res["queue_full_max_pct"] == (max_pct or 2.0)
    assert res["reason"] == reason


def test_trex_server_double_version_mismatch_and_unknown_port_are_refused():
    with TrexServerDouble(ports=2, version="v2.99") as srv:
        with pytest.raises(TrafficError) as e:
            TrexDriver(_tcfg(srv)).run("udp_payload", {**LOCAL}, TrialSpec.of(1000, duration_s=0.2, counts=False))
    assert str(e.value) == ("Failed to connect to TRex server 127.0.0.1:%d: server version 'v2.99' does not match "
                            "traffic.trex.version 'v3.04' in the config" % srv.sync_port)
    assert "start_traffic" not in srv.methods()
    # port 3 on a two-port server: the client's own port validation refuses it, nothing is acquired
    with TrexServerDouble(ports=2) as srv:
        with pytest.raises(TrafficError) as e:
            TrexDriver(_tcfg(srv, ports=(3,))).run("udp_payload", {**LOCAL}, TrialSpec.of(1000, duration_s=0.2, counts=False))
    assert str(e.value).startswith("Failed to start traffic on TRex server 127.0.0.1 ports [3]: ")
    assert "3" in str(e.value) and "acquire" not in srv.methods()


def test_run_traffic_dispatches_to_trex_on_fips_config_server_double(tmp_path):
    from xenobench.testbed import get_testbed
    with TrexServerDouble(ports=2) as srv:
        # the fips config with its TRex server moved to the double (the registry starts TRex from
        # the testbed's own config)
        conf = tmp_path / "fips-double.yaml"
        conf.write_text(f"extends: {FIPS}\ntraffic:\n  trex: {json.dumps(_tcfg(srv)['trex'])}\n")
        tb = get_testbed(load_config(conf))
        res = run_traffic(tb, "background_split", {"split": "70/30"}, 2000, duration_s=0.5)
    assert res["generator"] == "trex" and res["valid"] and res["tx_packets"] == 1000
    assert res["tunables"]["dst_mac"] == "c4:70:bd:a0:56:ac" and res["tunables"]["vip"] == "10.3.10.45"
    assert res["tunables"]["dns_classes"] == "0"
    assert res["spec"] == {"rate_pps": 2000.0, "duration_s": 0.5, "count": None, "deadline_s": 2.625}
    (add,) = srv.call("add_stream")
    assert add["stream"]["vm"]["cache"] == 70  # a 70/30 cycle of 10 frames, whole on each of 14 cores


# --- the dry run ----------------------------------------------------------------------------------
def test_traffic_run_dry_run_on_fips_prints_the_stlclient_calls_without_connecting():
    res = CliRunner().invoke(cli, ["--config", str(FIPS), "traffic", "run", "udp_payload", "-t", "payload=22",
                                   "--rate", "135000000", "--duration", "30", "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["mult"] == "135000000pps" and d["ports"] == [0] and d["server"] == "fips4:4501"
    assert d["streams"] == [{"frame_len": 64, "mode": "continuous", "rate": {"pps": 1},
                             "flow_vars": [{"name": "src", "op": "inc", "values": 256}], "cache_size": 256}]
    assert "start(ports=[0], mult='135000000pps', duration=30.0, force=True)" in d["calls"]
    # the profile declares cores: the server's count goes to it once connected
    assert d["calls"][5].endswith("tunables=['--vip', '10.3.10.45', '--dport', '53', '--dst_mac', "
                                  "'c4:70:bd:a0:56:ac', '--src_mac', '08:c0:eb:a5:61:26', '--src_ip_base', '16.0.0.0', "
                                  "'--payload', '22', "
                                  "'--cores', 'N']).get_streams(), ports=[0])"), d["calls"][5]
    assert [c.split("(")[0] for c in d["calls"]] == [
        "STLClient", "connect", "get_server_version", "get_server_system_info", "reset", "add_streams", "clear_stats", "start",
        "wait_on_traffic", "stop", "get_stats", "get_xstats", "disconnect"]
    assert decode([d["mult"]]) == [{"type": "pps", "value": 135e6, "op": "abs"}]
    text = CliRunner().invoke(cli, ["--config", str(FIPS), "traffic", "run", "udp_payload", "-t", "payload=22",
                                    "--rate", "45000000", "--count", "90000000", "--dry-run"])
    assert text.exit_code == 0, text.output
    assert "start(ports=[0], mult='45000000pps', duration=2.0, force=True)" in text.output.splitlines()


# --- the field-engine cache -----------------------------------------------------------------------
def test_field_engine_cache_keeps_the_compiled_frames_identical():
    cached = compile_frames("udp_payload", {**LOCAL, "flows": 16})
    plain = compile_frames("udp_payload", {**LOCAL, "flows": 16, "cache_size": 0})
    assert cached.streams[0]["vm"]["cache"] == 16 and "cache" not in plain.streams[0]["vm"]
    assert cached.frames == plain.frames and len(set(cached.frames)) == 16
    # two whole cycles replay the cycle twice: the same compiled cycle
    two = compile_stream({**cached.streams[0], "vm": {**cached.streams[0]["vm"], "cache": 32}}, "test stream")
    assert two == cached.frames


def test_field_engine_cache_not_a_whole_cycle_is_refused_and_replays_its_first_frames():
    with pytest.raises(TrafficError, match=r"argument --cache-size: 254 is not a multiple of the stream cycle of 256"):
        compile_frames("udp_payload", {**LOCAL, "cache_size": 254})
    # a stream from elsewhere with such a cache: the compiler sends what TRex replays
    _, (s,) = load_streams("udp_payload", {**LOCAL, "flows": 4})
    s = {**s, "vm": {**s["vm"], "cache": 6}}
    fr = compile_stream(s, "test stream")
    assert len(fr) == 6 and fr[4:] == fr[:2] and len(set(fr)) == 4


@pytest.mark.parametrize("started, stopped, elapsed, uncertain", [
    ((10.0, 10.0), (10.5, 10.5), 0.5, 0.0),        # instant replies: the times themselves
    ((10.0, 10.02), (10.5, 10.52), 0.5, 0.02),     # 20 ms round trips: midpoint to midpoint
    ((10.0, 10.04), (10.5, 10.50), 0.48, 0.02),    # a slow start reply: the server began ~20 ms in
])
def test_the_send_time_runs_from_the_start_requests_midpoint_to_the_stops(started, stopped, elapsed, uncertain):
    """A TRex trial's rate is opackets over this time (xenobench.traffic.trex.send_time): the time
    after stop() returned counted an RPC round trip as sending (0.5 s bursts: 2-4 % short)."""
    from xenobench.traffic.trex import send_time
    e, u = send_time(started, stopped)
    assert e == pytest.approx(elapsed) and u == pytest.approx(uncertain)


@pytest.mark.parametrize("a, b, pps", [
    ((10.0, 1000, 0.001), (11.0, 31000, 0.002), 30000.0),   # 1 s apart: the growth per second
    ((10.0, 1000, 0.001), (10.1, 4000, 0.001), None),       # under 0.2 s: too short to judge
    (None, (11.0, 31000, 0.002), None),                     # a read failed: not known
])
def test_an_open_ended_runs_rate_is_its_opackets_growth_between_two_reads(a, b, pps):
    from xenobench.traffic.trex import live_rate
    w = live_rate(a, b)
    assert (w and w["pps"]) == pps
    if w:
        assert w["uncertainty_s"] == pytest.approx(0.003)


def test_an_open_ended_run_is_judged_inside_it_not_on_a_slow_starts_edge():
    """A server that takes 60 ms to begin sending within its start request (the stand-in writes a
    pcap and starts xdpgen) and sends exactly the asked rate: over the whole run between the
    requests' midpoints it looked ~3 % short and invalid (the rehearsal's update backgrounds); over
    the window between two reads of its opackets it is the rate asked. The same server sending
    2 % short stays invalid."""
    for achieved, valid in ((1.0, True), (0.98, False)):
        with TrexServerDouble(ports=2, start_delay=0.06, achieved=achieved) as srv:
            run = TrexDriver(_tcfg(srv)).start("udp_payload", {**LOCAL}, TrialSpec.of(20000, counts=False))
            time.sleep(0.9)
            res = run.stop()
        assert res["valid"] is valid, res["reason"]
        assert res["achieved_pps"] == pytest.approx(20000 * achieved, rel=0.005)
        assert res["rate_window"]["seconds"] > 0.8
        assert res["achieved_pps_whole_run"] < 0.99 * 20000 * achieved  # what the edges made of it
        assert srv.methods().count("get_port_stats") >= 2
