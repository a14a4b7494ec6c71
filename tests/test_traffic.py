"""Traffic: the TRex profiles, their compilation to trafgen, trafgen on the namespace testbed
(byte identity via tcpdump, rate accuracy), the CLI, and the TRex statistics evaluation (the TRex
driver with the real STLClient against a TRex server double: test_trex_client.py).

Profiles are loaded by the real TRex client library (lbr-trex-client, STLProfile.load_py) in a
child process; checksums are re-computed with scapy here, independently of the compiler."""

import ipaddress
import json
import os
import subprocess
import time
from collections import Counter

import pytest
from click.testing import CliRunner
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from xenobench import REPO_ROOT as REPO
from xenobench.cli import main as cli
from xenobench.config import load_config, section_with_defaults
from xenobench.errors import XenobenchError
from xenobench.traffic import TrafficError, TrialSpec, compile_for, run_traffic, start_traffic, to_trafgen
from xenobench.traffic.profiles import compile_frames, profile_names, read_pcap
from xenobench.traffic.trex import TrexDriver
from xenobench.traffic.trex import evaluate as trex_evaluate

from .conftest import needs_root
from .profile_loads import preload

@pytest.fixture(autouse=True)
def trafgen_generator(local_cfg, monkeypatch):
    """This module tests trafgen, whatever config/local.yaml's default generator (xdpgen: test_xdpgen.py)."""
    monkeypatch.setitem(local_cfg.raw["traffic"], "generator", "trafgen")


@pytest.fixture(scope="module", autouse=True)
def profiles_loaded(local_cfg):
    """The profiles this module compiles and runs, loaded in one TRex loader process
    (tests/profile_loads.py); what each test asserts about the loaded streams is unchanged, and the
    loads that fail (bad tunables) still go through load_streams' own child process."""
    preload([*[(p, {**LOCAL, **t}, None) for p, t, _, _ in VALID_FRAMES],
             *[("background_split", {**LOCAL, "split": s, "class_bits": k, "dns_classes": d}, None)
               for k, d, s, _ in SPLITS],
             ("background_split", {**LOCAL, "split": "70/30", "hosts": 4}, None),
             ("background_split", {**LOCAL, "split": "70/30", "class_bits": 2, "dns_classes": "0,2", "payload": 40},
              None),
             ("background_split", {"split": "70/30", "class_bits": 2}, local_cfg),
             ("background_split", {"split": "70/30"}, local_cfg),
             ("background_split", GOLDEN_TUN, local_cfg),
             *[(p, t, local_cfg) for p, t, _, _ in LIVE_FRAMES],
             ("udp_payload", {"payload": 22}, local_cfg), ("udp_payload", {}, local_cfg),
             ("udp_payload", {"payload": 64}, local_cfg),
             ("tests/fixtures/traffic/two_streams.py", {}, None),
             ("tests/fixtures/traffic/two_streams.py", {"random": 1}, None),
             ("udp_payload", {**LOCAL, "flows": 2}, None),
             *[(REFUSED, {"case": c}, local_cfg) for c, _ in [*REFUSALS, ("ok", "")]],
             (REFUSED, {"case": "ok"}, None)])


LOCAL = {"vip": "198.18.0.100", "dst_mac": "02:00:00:00:05:00", "src_mac": "02:00:00:00:04:00",
         "src_ip_base": "198.19.0.0"}


def ipv4_src(f: bytes) -> ipaddress.IPv4Address:
    """The source address of an untagged Ethernet/IPv4 frame, read at its offset: scapy's dissection
    (check_frame's) is slow over the thousands of frames of a random sample."""
    assert f[12:14] == b"\x08\x00" and f[14] >> 4 == 4, f"not an untagged IPv4 frame: {f[:34].hex()}"
    return ipaddress.IPv4Address(f[26:30])


def cls_hist(frames, k):
    return Counter(int(ipv4_src(f)) & ((1 << k) - 1) for f in frames)


def check_frame(f, payload, vip="198.18.0.100", dst_mac="02:00:00:00:05:00"):
    e = Ether(f)
    want = max(60, payload + 42)  # TRex pads a frame under 60 bytes (the Ethernet minimum without FCS)
    assert len(f) == want, f"frame {len(f)} B, payload {payload}: expected {want} (+4 FCS on the wire)"
    assert e.dst == dst_mac and e[IP].dst == vip and e[UDP].dport == 53 and e[UDP].len - 8 == payload
    # recompute both checksums with scapy and compare with what the compiler wrote
    ip_c, udp_c = e[IP].chksum, e[UDP].chksum
    e[IP].chksum = None
    e[UDP].chksum = None
    r = Ether(bytes(e))
    assert (ip_c, udp_c) == (r[IP].chksum, r[UDP].chksum), f"bad checksums in {f.hex()}"
    assert udp_c != 0


# --- profiles ------------------------------------------------------------------------------------
VALID_FRAMES = [
    ("udp_payload", {"payload": 2, "flows": 4}, 2, 4),
    ("udp_payload", {"payload": 22, "flows": 256}, 22, 256),
    ("udp_payload", {"payload": 1472, "flows": 1}, 1472, 1),
    ("trex_profiles/udp_payload.py", {"payload": 64}, 64, 256),
    ("background_split", {"split": "single", "payload": 22}, 22, 1),
    ("background_split", {"split": "worst", "class_bits": 2, "dns_classes": "0,2", "payload": 100}, 100, 2),
    ("background_split", {"split": "70/30", "hosts": 3, "payload": 1000}, 1000, 30),
]


@pytest.mark.parametrize("profile,tun,payload,cycle", VALID_FRAMES)
def test_profile_loads_and_yields_valid_frames(profile, tun, payload, cycle):
    c = compile_frames(profile, {**LOCAL, **tun})
    assert c.cycle == cycle
    assert c.streams and c.streams[0]["mode"]["type"] == "continuous"
    for f in c.frames:
        check_frame(f, payload)
    if c.profile.stem == "udp_payload":
        assert len(set(c.frames)) == len(c.frames), "every frame of a cycle has its own source"


SPLITS = [
    (1, "0", "single", {0: 1}),
    (1, "0", "worst", {1: 1}),
    (1, "0", "50/50", {0: 1, 1: 1}),
    (1, "0", "70/30", {0: 7, 1: 3}),
    (1, "1", "70/30", {1: 7, 0: 3}),
    (2, "0,2", "70/30", {0: 7, 2: 7, 1: 3, 3: 3}),
    (2, "0,2", "single", {0: 1, 2: 1}),
    (2, "0", "70/30", {0: 7, 1: 1, 2: 1, 3: 1}),  # 7 : (1+1+1)
    (2, "0,2", "1:2:3:4", {0: 1, 1: 2, 2: 3, 3: 4}),
]


@pytest.mark.parametrize("k,dns,split,expected", SPLITS)
def test_split_is_exact_over_one_cycle(k, dns, split, expected):
    c = compile_frames("background_split", {**LOCAL, "split": split, "class_bits": k, "dns_classes": dns})
    assert dict(cls_hist(c.frames, k)) == expected
    assert c.cycle == sum(expected.values())


def test_split_exact_with_hosts_and_interleaved():
    c = compile_frames("background_split", {**LOCAL, "split": "70/30", "hosts": 4})
    assert dict(cls_hist(c.frames, 1)) == {0: 28, 1: 12}
    # every window of one split cycle (10 frames, aligned) is already 7:3
    for i in range(0, 40, 10):
        assert dict(cls_hist(c.frames[i:i + 10], 1)) == {0: 7, 1: 3}
    srcs = Counter(Ether(f)[IP].src for f in c.frames)
    assert len(srcs) == 8 and set(srcs.values()) == {7, 3}


def test_dns_classes_derived_from_backends_file(local_cfg):
    c = compile_for(local_cfg, "background_split", {"split": "70/30", "class_bits": 2})
    assert c.tunables["dns_classes"] == "0,2"  # fips2 is backend 0: class & 1 == 0
    assert dict(cls_hist(c.frames, 2)) == {0: 7, 2: 7, 1: 3, 3: 3}
    assert Ether(c.frames[0]).dst == "02:00:00:00:05:00" and Ether(c.frames[0])[IP].src.startswith("198.19.")


@pytest.mark.parametrize("tun,msg", [
    ({"payload": 1473}, "argument --payload: 1473 is outside 2..1472 (UDP payload bytes)"),
    ({"payload": "abc"}, "argument --payload: 'abc' is not an integer (UDP payload bytes)"),
    ({"flows": 0}, "argument --flows: 0 is outside 1..65535 (number of source addresses)"),
    ({"vip": "1.2.3"}, "argument --vip: '1.2.3' is not an IPv4 address"),
    ({"nonsense": 1}, "unrecognized arguments: --nonsense 1"),
])
def test_bad_tunable_is_named(tun, msg):
    with pytest.raises(TrafficError) as e:
        compile_frames("udp_payload", tun)
    assert str(e.value).startswith("Failed to load profile ") and "udp_payload.py" in str(e.value)
    assert str(e.value).endswith(msg)


@pytest.mark.parametrize("tun,msg", [
    ({"split": "60-40"}, "argument --split: '60-40' is not single, worst, X/Y (like 70/30) or w0:w1:... weights"),
    ({"split": "1:2:3", "class_bits": 2}, "argument --split: '1:2:3' has 3 weights, class-bits 2 needs 4"),
    ({"split": "70/30", "dns_classes": "0,1"},
     "argument --split: '70/30' sends load to the other backend but every class is a DNS class"),
    ({"split": "50/50", "src_ip_base": "198.19.0.1"},
     "argument --src-ip-base: 198.19.0.1 has class bits set (its low 1 bits must be 0)"),
])
def test_bad_split_is_named(tun, msg):
    with pytest.raises(TrafficError) as e:
        compile_frames("background_split", tun)
    assert str(e.value).endswith(msg)


def test_unknown_profile():
    with pytest.raises(TrafficError, match=rf"^Failed to load profile nope: no such file .*profiles: "
                                           rf"{', '.join(profile_names())}$"):
        compile_frames("nope", {})


def test_trafgen_config_round_trips_through_trafgen(tmp_path):
    """trafgen itself parses the compiled configuration and writes the same frames to a pcap."""
    c = compile_frames("background_split", {**LOCAL, "split": "70/30", "class_bits": 2, "dns_classes": "0,2",
                                            "payload": 40})
    cfg = tmp_path / "c.cfg"
    cfg.write_text(to_trafgen(c))
    out = tmp_path / "o.pcap"
    p = subprocess.run(["trafgen", "-i", str(cfg), "-o", str(out), "-n", str(c.cycle), "-P", "1"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert read_pcap(out) == c.frames


# --- CLI -----------------------------------------------------------------------------------------
def test_cli_compile_cfg_and_pcap(tmp_path):
    r = CliRunner()
    res = r.invoke(cli, ["traffic", "compile", "background_split", "-t", "split=70/30", "--out", str(tmp_path / "a.cfg")])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "a.cfg").read_text()
    assert text.count("{ ") == 10 and "--split 70/30" in text
    res = r.invoke(cli, ["traffic", "compile", "background_split", "-t", "split=70/30", "--out",
                         str(tmp_path / "a.pcap"), "--count", "25"])
    assert res.exit_code == 0, res.output
    frames = read_pcap(tmp_path / "a.pcap")
    c = compile_for(load_config(), "background_split", {"split": "70/30"})
    assert frames == [c.frames[i % 10] for i in range(25)]
    res = r.invoke(cli, ["traffic", "compile", "udp_payload", "-t", "payload=3000"])
    assert res.exit_code == 1
    assert res.output.strip().endswith("argument --payload: 3000 is outside 2..1472 (UDP payload bytes)")
    res = r.invoke(cli, ["traffic", "compile", "udp_payload", "-t", "payload"])
    assert res.output.strip() == ("xenobench: Failed to parse tunable 'payload': expected KEY=VALUE (like payload=64) "
                                  "or TRex's form '--payload 64'")
    res = r.invoke(cli, ["traffic", "compile", "udp_payload", "--out", str(tmp_path / "x.txt")])
    assert "must end in .cfg or .pcap" in res.output and res.exit_code == 1


# --- namespace testbed -------------------------------------------------------------------------------
def _capture(testbed, n, path):
    # at the LB's ingress: the switch forwards bound MACs at XDP, before any capture on its ports
    ns, port = f"{testbed.cfg.prefix}fips5", "p0"
    p = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{ns}", "tcpdump", "-i", port, "-Q", "in",
                          "-n", "-U", "-s", "0", "-c", str(n), "-w", str(path)],
                         stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()  # "tcpdump: listening on ..." once the capture is open
    assert "listening on" in line, line
    return p


def _no_leftovers(testbed):
    lg = testbed.node("fips4")
    assert not lg.running("trafgen")
    q = lg.run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
    assert "tbf" not in q, q


LIVE_FRAMES = [
    ("udp_payload", {"payload": 22, "flows": 8}, 20, 0),
    ("udp_payload", {"payload": 300, "flows": 5}, 13, 5000),
    ("background_split", {"split": "70/30", "class_bits": 2, "payload": 2}, 45, 0),
]


@needs_root
@pytest.mark.parametrize("profile,tun,n,rate", LIVE_FRAMES)
def test_trafgen_emits_the_compiled_frames_in_order(testbed, tmp_path, profile, tun, n, rate):
    cap = tmp_path / "cap.pcap"
    p = _capture(testbed, n, cap)
    try:
        res = run_traffic(testbed, profile, tun, rate, count=n)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert res["tx_packets"] == n and res["valid"], res
    got = read_pcap(cap)
    # the CLI's pcap is "exactly as the local executor emits them"
    want_file = tmp_path / "want.pcap"
    r = CliRunner().invoke(cli, ["traffic", "compile", profile, *[f"-t{k}={v}" for k, v in tun.items()],
                                 "--out", str(want_file), "--count", str(n)])
    assert r.exit_code == 0, r.output
    want = read_pcap(want_file)
    assert len(got) == n
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"frame {i}: captured {g.hex()} expected {w.hex()}"
    _no_leftovers(testbed)


@needs_root
def test_rate_ladder_is_reached(testbed):
    for rate in (5_000, 20_000, 40_000):
        res = run_traffic(testbed, "udp_payload", {"payload": 22}, rate, duration_s=1.0)
        ratio = res["achieved_pps"] / rate
        assert res["valid"], res
        assert 0.99 <= ratio <= 1.02, f"{rate} pps: achieved {res['achieved_pps']:.0f} ({ratio:.4f})"
        assert res["tx_packets"] == rate  # count = rate x duration
    _no_leftovers(testbed)


@needs_root
def test_unreachable_rate_is_flagged_invalid(testbed):
    res = run_traffic(testbed, "udp_payload", {"payload": 22}, 50_000_000, count=100_000)
    assert not res["valid"]
    assert res["reason"].startswith(f"achieved {res['achieved_pps']:.0f} pps < 99 % of requested 50000000 pps")
    assert res["tx_packets"] == 100_000
    _no_leftovers(testbed)


@needs_root
def test_max_rate_run_and_background_start_stop(testbed):
    res = run_traffic(testbed, "udp_payload", {}, 0, duration_s=0.5)
    assert res["valid"] and res["achieved_pps"] > 10_000 and res["requested_pps"] == 0
    h = start_traffic(testbed, "background_split", {"split": "70/30"}, 10_000)
    assert testbed.node("fips4").running("trafgen")
    time.sleep(0.8)
    r = h.stop()
    assert r["valid"], r
    assert r["generator"] == "trafgen" and 0.99 <= r["achieved_pps"] / 10_000 <= 1.05
    assert h.stop() is r  # idempotent
    _no_leftovers(testbed)


@needs_root
def test_bad_input_raises_and_leaves_nothing(testbed):
    with pytest.raises(TrafficError, match=r"argument --split: 'x' is not single"):
        start_traffic(testbed, "background_split", {"split": "x"}, 1000)
    with pytest.raises(TrafficError, match=r"^Failed to start traffic: rate -5 pps must be a number >= 0"):
        run_traffic(testbed, "udp_payload", {}, -5, count=10)
    with pytest.raises(TrafficError, match=r"^Failed to run traffic: give a duration or a count$"):
        run_traffic(testbed, "udp_payload", {}, 1000)
    _no_leftovers(testbed)


@needs_root
def test_cli_run_json(testbed, tmp_path):
    env = {"XENOBENCH_NS_PREFIX": os.environ["XENOBENCH_NS_PREFIX"]}
    # the CLI reads its own config: the local testbed with trafgen as the generator
    conf = tmp_path / "trafgen.yaml"
    conf.write_text(f"extends: {testbed.cfg.path.resolve()}\ntraffic: {{generator: trafgen}}\n")
    res = CliRunner().invoke(cli, ["--config", str(conf), "traffic", "run", "udp_payload", "-t", "payload=64",
                                   "--rate", "8000", "--count", "4000", "--json"], env=env)
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert list(d)[:5] == ["requested_pps", "achieved_pps", "tx_packets", "valid", "reason"]
    assert d["tx_packets"] == 4000 and d["valid"] and d["frame_len"] == 106 and d["frame_len_fcs"] == 110
    assert d["trafgen_version"].startswith("trafgen 0.6.")


# --- TRex driver: validity from TRex statistics --------------------------------------------------
# The driver against the real STLClient and a TRex server double: tests/test_trex_client.py.
def test_trex_evaluate_validity_from_statistics():
    def spec(rate):
        return TrialSpec.of(rate, duration_s=2, counts=False)
    def evaluate(*a):
        return trex_evaluate(*a, queue_full_max_pct=2.0)
    ok = evaluate({0: {"opackets": 1980}, "global": {"queue_full": 0}}, {}, [0], spec(1000), 2)
    assert ok["valid"] and ok["achieved_pps"] == 990
    low = evaluate({0: {"opackets": 1979}, "global": {"queue_full": 70}}, {}, [0], spec(1000), 2)
    assert low["reason"] == ("achieved 990 pps < 99 % of requested 1000 pps; "
                             "queue full: TRex ports [0] reported queue_full 70, 3.54 % of the 1979 frames sent, "
                             "above the 2 % allowed (traffic.trex.queue_full_max_pct)")
    assert low.failed == ["rate", "queue"]
    assert evaluate({0: {"opackets": 5}, "global": {}}, {}, [0], spec(0), 2)["valid"]  # rate 0: no ratio check
    assert evaluate({0: {"opackets": 0}, "global": {}}, {}, [0], spec(0), 2)["reason"] == "no frames left TRex ports [0]"


# TRex counts queue_full once per retry while the NIC's ring is full (main_dpdk.cpp
# CCoreEthIF::send_burst): routine at "100%". A trial is invalid only above queue_full_max_pct % of
# its opackets (default 2, as TRex's NDR bench's q_full_resolution).
@pytest.mark.parametrize("opackets,queue_full,max_pct,failed,pct", [
    (100_000, 0, 2.0, [], 0.0),
    (100_000, 1, 2.0, [], 0.001),            # one retry: routine, valid (today's main refused it)
    (100_000, 2_000, 2.0, [], 2.0),          # exactly 2 %: valid
    (100_000, 2_001, 2.0, ["queue"], 2.001),
    (100_000, 1, 0.0, ["queue"], 0.001),     # 0: any queue_full invalidates
    (100_000, 50_000, 50.0, [], 50.0),
    (0, 5, 2.0, ["sent", "queue"], None),    # nothing sent and queue full
], ids=["none", "one-retry", "at-2pct", "above-2pct", "zero-allowed", "at-50pct", "nothing-sent"])
def test_trex_queue_full_is_judged_against_a_share_of_opackets(opackets, queue_full, max_pct, failed, pct):
    res = trex_evaluate({0: {"opackets": opackets}, "global": {"queue_full": queue_full}}, {}, [0],
                   TrialSpec.of(0, duration_s=1, counts=False), 1, queue_full_max_pct=max_pct)
    assert res.failed == failed and res["queue_full_count"] == queue_full and res["queue_full_max_pct"] == max_pct
    assert res["queue_full_pct"] == (pytest.approx(pct) if pct is not None else None)
    assert res["queue_full"] is (queue_full > 0)
    if "queue" in failed:
        assert res["reason"].endswith(f"reported queue_full {queue_full}, "
                                      + (f"{queue_full * 100 / opackets:.3g} % of the {opackets}" if opackets else
                                         "with no") + f" frames sent, above the {max_pct:g} % allowed "
                                      "(traffic.trex.queue_full_max_pct)"), res["reason"]


def test_trex_queue_full_max_pct_is_a_config_key_with_the_schemas_default(tmp_path):
    base = {"generator": "trex", "trex": {"server": "h", "version": "v3.04"}}
    assert TrexDriver(section_with_defaults("traffic", base)).queue_full_max_pct == 2.0
    base["trex"]["queue_full_max_pct"] = 0.5
    assert TrexDriver(section_with_defaults("traffic", base)).queue_full_max_pct == 0.5
    conf = tmp_path / "bad.yaml"
    conf.write_text("extends: " + str(REPO / "config" / "fips.yaml") + "\ntraffic:\n  trex:\n    server: fips4\n"
                    "    version: v3.04\n    queue_full_max_pct: -1\n")
    with pytest.raises(XenobenchError) as e:
        load_config(conf)
    assert "traffic.trex.queue_full_max_pct" in str(e.value) and "-1" in str(e.value)


@needs_root
def test_trex_server_start_stop_with_a_test_double_binary(testbed, tmp_path):
    """Deploy step: a stand-in t-rex-64 (test double: a shell script) started from the configured
    directory on the loadgen node and stopped again; the real one needs DPDK NICs."""
    from xenobench.traffic.trex import start_server, stop_server
    (tmp_path / "t-rex-64").write_text('#!/bin/sh\necho "fake t-rex-64 $* in $(pwd)"\nexec sleep 30\n')
    (tmp_path / "t-rex-64").chmod(0o755)
    tcfg = section_with_defaults("traffic", {"trex": {
        "server": "fips4", "version": "v3.04",
        "daemon": {"path": str(tmp_path), "args": ["-i", "-c", 2], "ready_s": 0.3, "wait_rpc_s": 0}}})
    lg = testbed.node("fips4")
    h = start_server(testbed, tcfg)
    try:
        assert lg.running("trex-server")
        # as TRex's own daemon starts it (trex_server.py: --iom 0 --no-key, so TRex never reads a key)
        assert f"fake t-rex-64 -i -c 2 --iom 0 --no-key in {tmp_path}" in lg.read_text(h.log)
    finally:
        assert stop_server(testbed) is True
    assert not lg.running("trex-server") and stop_server(testbed) is False
    with pytest.raises(TrafficError, match=r"^Failed to start the TRex server: traffic.trex.daemon.path is not set"):
        start_server(testbed, section_with_defaults("traffic", {"trex": {"server": "fips4", "version": "v3.04"}}))
    with pytest.raises(TrafficError, match=r"^Failed to use TRex: traffic.trex \(server, version\) is not set"):
        TrexDriver(section_with_defaults("traffic", {"generator": "trafgen"}))


# --- compiler details ------------------------------------------------------------------------------
GOLDEN_TUN = {"split": "70/30", "class_bits": "2", "dns_classes": "0,2", "payload": "22", "vip": "198.18.0.100",
              "dst_mac": "02:00:00:00:05:00", "src_mac": "02:00:00:00:04:00", "src_ip_base": "198.19.0.0"}


def test_trafgen_config_matches_golden_fixture(local_cfg):
    from pathlib import Path
    golden = (Path(__file__).parent / "fixtures/traffic/background_split_70_30_k2.cfg").read_text()
    text = to_trafgen(compile_for(local_cfg, "background_split", GOLDEN_TUN))
    assert text == golden.split("\n", 1)[1]
    assert text.count("fill(0x78, 22)") == 20


def test_streams_interleaved_by_rate_and_random_sampled():
    """TRex's time order (both streams start at t = 0, 200 and 100 pps); a random variable has no
    cycle, so a sample of stl_sim.RANDOM_SAMPLE frames from TRex's generator stands for it, the
    streams' shares exact."""
    from xenobench.traffic.stl_sim import RANDOM_SAMPLE
    c = compile_frames("tests/fixtures/traffic/two_streams.py", {})
    assert [Ether(f)[IP].src for f in c.frames] == ["10.0.0.1", "10.9.0.1", "10.0.0.2"]
    assert c.times == [0.0, 0.0, 0.005] and c.period_s == 0.01 and not c.finite
    r = compile_frames("tests/fixtures/traffic/two_streams.py", {"random": 1})
    srcs = Counter(str(ipv4_src(f)) for f in r.frames)
    assert r.cycle == RANDOM_SAMPLE * 3 // 2 and srcs["10.9.0.1"] == RANDOM_SAMPLE // 2
    assert srcs["10.0.0.1"] + srcs["10.0.0.2"] == RANDOM_SAMPLE and 0.45 < srcs["10.0.0.1"] / RANDOM_SAMPLE < 0.55


def test_steady_rate_leaves_out_start_burst_and_drain():
    from xenobench.steady import steady_state_of_counter
    # 1000 pps from t=1.0 s, a start burst of 50 frames, sampled every 20 ms, drained at the end
    s = [(0.98, 0), (1.0, 0)] + [(1.0 + i * 0.02, 50 + i * 20) for i in range(1, 101)] + [(3.1, 2100)]
    r = steady_state_of_counter(s)
    assert r.rate == pytest.approx(1000)
    assert (r.first, r.last) == (1, 101)  # the idle first interval and the drain are left out


@needs_root
def test_stalled_trafgen_is_stopped_and_flagged(testbed):
    """With the switch-side peer down the device refuses frames and trafgen retries forever
    (ignoring SIGTERM); the run ends after STALL_S, invalid, and leaves nothing behind."""
    port = testbed.switch_port("fips4", "eth0")
    sw = ["nsenter", f"--net=/var/run/netns/{testbed.switch_ns}", "ip", "link", "set", port]
    subprocess.run(sw + ["down"], check=True)
    t = time.monotonic()
    try:
        res = run_traffic(testbed, "udp_payload", {}, 0, count=500)
    finally:
        subprocess.run(sw + ["up"], check=True)
    assert time.monotonic() - t < 6
    assert not res["valid"] and res["tx_packets"] < 500
    assert res["reason"].startswith("trafgen stalled: no frame left fips4:eth0 for 2 s")
    _no_leftovers(testbed)
    time.sleep(0.5)
    ok = run_traffic(testbed, "udp_payload", {}, 0, count=500)
    assert ok["valid"] and ok["tx_packets"] == 500, ok


def test_trafgen_validity_from_counters(local_cfg):
    """Validity of a trafgen trial from recorded counters and trafgen output (no testbed needed)."""
    from xenobench.testbed import get_testbed
    from xenobench.traffic.trafgen import TrafgenRun
    c = compile_frames("udp_payload", {**LOCAL, "flows": 2})
    out = "      1000 packets outgoing\n     64000 bytes outgoing\n   1 sec, 0 usec on CPU0 (1000 packets)\n"

    def collect(rate, count, link, dropped, text=out):
        r = TrafgenRun(get_testbed(local_cfg), c, TrialSpec.of(rate, count=count))
        r.before, r.t0, r.t1 = {"view": {"tx_packets": 5, "tx_dropped": 1}}, 0.0, 1.01
        return r._collect(text, {"view": {"tx_packets": 5 + link, "tx_dropped": 1 + dropped}}, [])

    ok = collect(1000, 1000, 1000, 0)
    assert ok["valid"] and ok["achieved_pps"] == 1000 and ok["rate_method"] == "tx / trafgen loop time"
    slow = collect(1011, 1000, 1000, 0)
    assert slow["reason"] == "achieved 1000 pps < 99 % of requested 1011 pps"
    # trafgen sent 1000 frames, the link took 990: the peer refused 10 (loss at the receiving end,
    # still offered load); tx_dropped (here 25, with the refused retries) is reported, not used
    peer = collect(0, 1000, 990, 25)
    assert peer["valid"] and peer["tx_packets"] == 1000 and peer["peer_dropped"] == 10 and not peer["queue_full"]
    assert peer["tx_dropped"] == 25 and peer["tx_link_packets"] == 990
    short = collect(0, 1200, 1000, 0)
    assert not short["valid"] and short["reason"] == "only 1000 of 1200 frames were sent"
    failed = collect(1000, 1000, 0, 0, "trafgen: invalid option -- 'A'\n")
    assert failed["reason"].startswith("trafgen printed no summary (did it fail? log: trafgen: invalid option -- 'A')")


def test_trex_driver_real_client_without_server_reports_connection_failure():
    """The real STLClient (in the worker process) against a port where no TRex server listens."""
    d = TrexDriver(section_with_defaults("traffic", {"trex": {"server": "127.0.0.1", "sync_port": 45999,
                                                              "async_port": 45998, "version": "v3.04"}}))
    with pytest.raises(TrafficError) as e:
        d.run("udp_payload", {"payload": 22}, TrialSpec.of(1000, duration_s=1, counts=False))
    assert str(e.value).startswith("Failed to connect to TRex server 127.0.0.1:45999: "
                                   "*** [RPC] - Failed to get server response from tcp://127.0.0.1:45999")
    import sys
    assert "trex" not in sys.modules  # the TRex client never entered the harness process


# --- the profile compiler refuses what TRex refuses ------------------------------------------------
# tests/fixtures/traffic/refused.py builds each case with the real TRex client (which accepts them
# all); the TRex server refuses each (trex-core src/stx/stl/, cited in profiles.py). Before the
# compiler checked them: tracebacks (ZeroDivisionError, ValueError, OverflowError, IndexError from
# to_trafgen) or, worse, frames silently grown past the packet or an empty capture.
REFUSED = "tests/fixtures/traffic/refused.py"


REFUSALS = [
    ("all_disabled", ": none of its 2 streams is enabled and self-starting, so there is nothing to send "
                     "(set enabled=True, self_start=True on one)"),
    ("not_self_start", ": none of its 2 streams is enabled and self-starting, so there is nothing to send "
                       "(set enabled=True, self_start=True on one)"),
    ("two_zero_pps", "stream 0 of profile {}: mode.rate pps 0 is not a finite number > 0 "
                     "(TRex refuses it, enabled or not: give the stream a positive rate)"),
    ("one_zero_pps", "stream 0 of profile {}: mode.rate pps 0 is not a finite number > 0 "
                     "(TRex refuses it, enabled or not: give the stream a positive rate)"),
    ("nan_pps", "stream 0 of profile {}: mode.rate pps nan is not a finite number > 0 "
                "(TRex refuses it, enabled or not: give the stream a positive rate)"),
    ("inf_pps", "stream 0 of profile {}: mode.rate pps inf is not a finite number > 0 "
                "(TRex refuses it, enabled or not: give the stream a positive rate)"),
    ("empty_value_list", "stream 0 of profile {}: flow variable 'src' has an empty value_list; "
                         "give it at least one value"),
    ("write_past", "stream 0 of profile {}: write_flow_var of 'src' (4 B) at pkt_offset 58 reaches byte 61, "
                   "past the 60-byte packet"),
    ("mask_past", "stream 0 of profile {}: write_mask_flow_var of 'src' (1 B) at pkt_offset 60 reaches byte 60, "
                  "past the 60-byte packet"),
    ("ipv4_past", "stream 0 of profile {}: fix_checksum_ipv4 (a 20-byte IPv4 header) at pkt_offset 50 reaches "
                  "byte 69, past the 60-byte packet"),
    ("hw_past", "stream 0 of profile {}: fix_checksum_hw (l2_len 14, l3_len 42, l4_type 11) at pkt_offset 14 "
                "reaches byte 63, past the 60-byte packet"),
]


@pytest.mark.parametrize("case,msg", REFUSALS)
def test_profile_trex_refuses_is_refused_naming_stream_and_field(case, msg, tmp_path):
    from xenobench import REPO_ROOT
    path = REPO_ROOT / REFUSED
    want = "xenobench: Failed to compile " + (msg.format(path) if "{}" in msg else f"profile {path}{msg}")
    for out in ([], ["--out", str(tmp_path / "x.pcap")]):  # stdout (.cfg) and a capture alike
        res = CliRunner().invoke(cli, ["traffic", "compile", str(path), "-t", f"case={case}", *out])
        assert (res.exit_code, res.output.strip()) == (1, want), res.output
        assert not (tmp_path / "x.pcap").exists()


def test_profile_refusal_baseline_compiles():
    c = compile_frames(REFUSED, {"case": "ok"})
    # 100 : 50 pps: 2 frames of the first stream (sources 10.0.0.1, .2) per 1 of the second (no field
    # engine: its one frame, source 10.0.0.1), interleaved; every frame the packet's 60 bytes
    assert [Ether(f)[IP].src for f in c.frames] == ["10.0.0.1", "10.0.0.1", "10.0.0.2"]
    assert c.cycle == 3 and {len(f) for f in c.frames} == {60}


# --- the generator contract --------------------------------------------------------------------------
@pytest.mark.parametrize("args,kw,want", [
    # (rate, duration, count), options → (rate_pps, duration_s, count, deadline_s)
    ((50_000, 2, None), {}, (50_000.0, 2.0, 100_000, 4.5)),
    ((3, 0.5, None), {}, (3.0, 0.5, 2, 2 / 3 * 1.25 + 2)),          # ceil(1.5) frames
    ((0, 2, None), {}, (0.0, 2.0, None, 4.5)),                       # as fast as possible, for 2 s
    ((1000, None, 500), {}, (1000.0, None, 500, 2.625)),
    ((0, None, 500), {}, (0.0, None, 500, None)),                    # the generator's stall rule ends it
    ((1000, None, None), {}, (1000.0, None, None, None)),            # background: until stopped
    ((1000, None, 500), {"counts": False}, (1000.0, 0.5, None, 2.625)),   # TRex: for count / rate s
    ((1000, 2, None), {"counts": False}, (1000.0, 2.0, None, 4.5)),
])
def test_trial_spec_counts_and_deadline(args, kw, want):
    s = TrialSpec.of(*args, **kw)
    assert (s.rate_pps, s.duration_s, s.count) == want[:3]
    assert s.deadline_s == (pytest.approx(want[3]) if want[3] is not None else None)


@pytest.mark.parametrize("args,kw,msg", [
    ((-5, 1, None), {}, "Failed to start traffic: rate -5 pps must be a number >= 0 (0: as fast as possible)"),
    ((float("nan"), 1, None), {}, "Failed to start traffic: rate nan pps must be a number >= 0 (0: as fast as possible)"),
    ((float("inf"), 1, None), {}, "Failed to start traffic: rate inf pps must be a number >= 0 (0: as fast as possible)"),
    ((True, 1, None), {}, "Failed to start traffic: rate True pps must be a number >= 0 (0: as fast as possible)"),
    (("fast", 1, None), {}, "Failed to start traffic: rate 'fast' pps must be a number >= 0 (0: as fast as possible)"),
    ((1000, 0, None), {}, "Failed to start traffic: duration 0 s must be a number > 0"),
    ((1000, float("nan"), None), {}, "Failed to start traffic: duration nan s must be a number > 0"),
    ((1000, None, 0), {}, "Failed to start traffic: count 0 must be a positive integer"),
    ((1000, None, 2.5), {}, "Failed to start traffic: count 2.5 must be a positive integer"),
    ((1000, None, float("inf")), {}, "Failed to start traffic: count inf must be a positive integer"),
    ((1000, 1, 10), {}, "Failed to start traffic: give a duration or a count, not both"),
    ((1000, None, None), {"blocking": True}, "Failed to run traffic: give a duration or a count"),
    ((0, None, 10), {"counts": False}, "Failed to run traffic: a count needs a rate with this generator, which "
                                       "sends for a duration (count / rate)"),
])
def test_trial_spec_refuses_with_the_value_named(args, kw, msg):
    with pytest.raises(TrafficError) as e:
        TrialSpec.of(*args, **kw)
    assert str(e.value) == msg


@pytest.mark.parametrize("rate,count,tx,achieved,qfull,faults,failed", [
    (1000, 1000, 1000, 990.0, 0, [], []),                      # exactly 99 %: valid
    (1000, 1000, 1000, 989.9, 0, [], ["rate"]),
    (1000, 1000, 999, 1000.0, 0, [], ["count"]),
    (1000, None, 0, 0.0, 0, [], ["sent"]),                     # nothing sent: no rate verdict on top
    (0, None, 5, 1.0, 0, [], []),                              # rate 0: no ratio check
    (0, 10, 5, 1.0, 0, ["x stalled"], ["fault", "count"]),
    (1000, None, 2000, 1000.0, 41, [], ["queue"]),             # 2.05 % of the frames sent: above 2 %
    (1000, None, 2000, 1000.0, 40, [], []),                    # 2 %: allowed
])
def test_judge_is_the_one_validity_rule(rate, count, tx, achieved, qfull, faults, failed):
    from xenobench.traffic import judge
    spec = TrialSpec.of(rate, count=count)
    assert list(judge(spec, tx_packets=tx, achieved_pps=achieved, where="n:e", queue_full=qfull,
                      queue_full_max_pct=2.0, faults=faults)) == failed


def test_registry_is_the_schemas_list_of_generators():
    import yaml

    from xenobench import REPO_ROOT
    from xenobench.traffic import GENERATORS
    schema = yaml.safe_load((REPO_ROOT / "config/schema/traffic.schema.yaml").read_text())
    # the schema names no list of its own (checked at plan time against the registry); its default is one
    assert "enum" not in schema["properties"]["generator"]
    assert schema["properties"]["generator"]["default"] in GENERATORS
    assert {n: g.counts for n, g in GENERATORS.items()} == {"trafgen": True, "xdpgen": True, "trex": False}


def _results(local_cfg):
    """One result of each generator, from recorded counters and outputs (no testbed needed)."""
    from xenobench.testbed import get_testbed
    from xenobench.traffic.trafgen import TrafgenRun
    from xenobench.traffic.xdpgen import XdpgenRun
    tb = get_testbed(local_cfg)
    tun = {**LOCAL, "flows": 2}
    c = compile_frames("udp_payload", tun)
    spec = TrialSpec.of(1000, duration_s=1)
    tg = TrafgenRun(tb, c, spec)
    tg.before, tg.t0, tg.t1 = {"view": {"tx_packets": 5, "tx_dropped": 0}}, 0.0, 1.0
    yield tg._collect("1000 packets outgoing\n  1 sec, 0 usec on CPU0 (1000 packets)\n",
                      {"view": {"tx_packets": 1005, "tx_dropped": 0}}, [])
    xg = XdpgenRun(tb, c, spec)
    xg.t0, xg.t1 = 0.0, 1.0
    yield xg._collect(json.dumps({"frames": 1000, "xdp_xmit": 1000, "xdp_xmit_errors": 0, "elapsed_s": 1.0,
                                  "achieved_pps": 1000.0, "stopped_by": "count"}))
    yield trex_evaluate({0: {"opackets": 1000}, "global": {}}, {}, [0], TrialSpec.of(1000, duration_s=1, counts=False),
                   1.0, profile=str(c.profile), tunables=tun, queue_full_max_pct=2.0)


def test_every_generators_result_has_the_contracts_keys_and_survives_json(local_cfg):
    from xenobench.traffic import TrialResult
    got = list(_results(local_cfg))
    assert [r["generator"] for r in got] == ["trafgen", "xdpgen", "trex"]
    for r in got:
        assert isinstance(r, TrialResult) and set(TrialResult.COMMON) <= set(r), (r["generator"], r)
        assert r["valid"] and r["reason"] == "" and r["failed"] == [] and r["tx_packets"] == 1000, r
        assert r["tunables"]["dst_mac"] == "02:00:00:00:05:00" and r["profile"].endswith("udp_payload.py")
        assert r["spec"]["rate_pps"] == 1000.0 and r["spec"]["duration_s"] == 1.0
        assert json.loads(json.dumps(r)) == r  # records store it as it is
    assert [r["spec"]["count"] for r in got] == [1000, 1000, None]  # TRex sends for the duration


# --- /proc/net/dev: one reader (counters), used by the rate sampler and trafgen's tx sampler -----------
PROC_NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
  eth0: 9135040  137001    0    0    0     0          0         0     1242      17    0    3    0     0       0          0
"""


def test_proc_net_dev_reader_names_every_column(tmp_path):
    from xenobench.counters import parse_proc_net_dev, read_proc_net_dev
    from xenobench.traffic.trafgen import TxSampler
    assert [parse_proc_net_dev(PROC_NET_DEV, "eth0", k) for k in ("rx_packets", "tx_packets", "tx_drop")] == \
        [137001, 17, 3]
    f = tmp_path / "dev"
    f.write_text(PROC_NET_DEV)
    assert read_proc_net_dev(str(f), "eth0", "tx_bytes") == 1242
    assert read_proc_net_dev(str(f), "p9", "tx_bytes") is None and read_proc_net_dev(str(tmp_path / "x"), "eth0",
                                                                                     "tx_bytes") is None
    # trafgen's sampler reads the loopback of this process's namespace, without a process spawn
    s = TxSampler(os.getpid(), "lo")
    try:
        assert isinstance(s.read(), int)
    finally:
        s.stop()


@pytest.mark.parametrize("edit,msg", [
    ({"step": 0}, "flow variable 'src' has step 0; TRex takes a whole number > 0"),
    ({"size": 3}, "flow variable 'src' has size 3; TRex takes 1, 2, 4 or 8 bytes"),
    ({"min_value": 9, "max_value": 2, "init_value": 9},
     "flow variable 'src' needs min_value <= init_value <= max_value, has 9 <= 9 <= 2"),
    ({"init_value": 1}, "flow variable 'src' needs min_value <= init_value <= max_value, "
                        "has 167772161 <= 1 <= 167772162"),
    ({"size": 1}, "flow variable 'src' has min_value 167772161, not a whole number in 0..255 (1 bytes)"),
    ({"value_list": [1, 256], "size": 1}, "flow variable 'src' lists value 256, not a whole number in 0..255 (1 bytes)"),
    ({"value_list": [1, 2], "step": 3}, "flow variable 'src' steps 3 through a value_list of 2; TRex takes a "
                                        "step no larger than the list"),
])
def test_flow_variable_trex_refuses_is_refused(edit, msg):
    """The flow variable checks of the TRex server (trex_stl_rpc_cmds.cpp check_min_max,
    check_value_list), on the fixture's stream as the real client wrote it."""
    from xenobench.traffic.profiles import compile_stream, load_streams
    _, (s, _) = load_streams(REFUSED, {"case": "ok"})
    var = {**s["vm"]["instructions"][0], **edit}
    s = {**s, "vm": {**s["vm"], "instructions": [var, *s["vm"]["instructions"][1:]]}}
    with pytest.raises(TrafficError) as e:
        compile_stream(s, "stream 0")
    assert str(e.value) == f"Failed to compile stream 0: {msg}"


# --- TRex's port fills, and what a local generator cannot do (no testbed needed) ----------------
def _stream(pkt: bytes, mode: dict, **kw) -> dict:
    import base64
    return {"flags": 0, "enabled": True, "self_start": True, "isg": 0.0, "core_id": -1, "action_count": 0,
            "mode": mode, "packet": {"binary": base64.b64encode(pkt).decode(), "meta": ""},
            "vm": {"instructions": []}, "flow_stats": {"enabled": False}, **kw}


def test_testbed_port_fills_scapys_default_macs_and_pads(local_cfg):
    """A profile that sets no Ether src/dst gets the loadgen's MAC and the LB's (TRex:
    update_mac_addr), one that names them keeps its own; frames under 60 bytes are padded to 60."""
    from xenobench.traffic.profiles import compile_streams, port_for
    port = port_for(local_cfg)
    bare = bytes(12) + bytes.fromhex("0800") + bytes(IP(src="10.0.0.1", dst="198.18.0.100") / UDP(dport=53))
    own = bytes.fromhex("020000000099020000000098") + bare[12:]
    cont = {"type": "continuous", "rate": {"type": "pps", "value": 10}}
    frames = compile_streams([_stream(bare, cont), _stream(own, cont, flags=3)], "t", port)
    assert [(f[:6].hex(":"), f[6:12].hex(":"), len(f)) for f in frames] == [
        ("02:00:00:00:05:00", local_cfg.role("loadgen").iface().mac, 60),
        ("02:00:00:00:00:99", "02:00:00:00:00:98", 60)]
    assert frames[0][12:42] == bare[12:] and frames[0][42:] == bytes(18)


@pytest.mark.parametrize("mode,spec,msg", [
    ({"type": "single_burst", "total_pkts": 5, "rate": {"type": "pps", "value": 100}}, {"count": 5}, None),
    ({"type": "single_burst", "total_pkts": 5, "rate": {"type": "pps", "value": 100}}, {"count": 6},
     "Failed to start xdpgen: profile t.py is bursts of 5 frames in all, which TRex sends once; the trial asks "
     "for 6 frames (give count=5 or fewer)"),
    ({"type": "single_burst", "total_pkts": 5, "rate": {"type": "pps", "value": 100}}, {"duration_s": 1},
     "Failed to start xdpgen: profile t.py is bursts of 5 frames in all, which TRex sends once; the trial asks "
     "for 1000 frames (give count=5 or fewer)"),
    ({"type": "multi_burst", "pkts_per_burst": 2, "count": 3, "ibg": 1e6, "rate": {"type": "pps", "value": 1000}},
     {"count": 6}, "Failed to start xdpgen: profile t.py's bursts are not evenly spaced (frames 1000 µs to "
                   "1e+06 µs apart at TRex's rates); xdpgen sends at one rate, so run it with TRex "
                   "(traffic.generator: trex)"),
])
def test_local_generator_refuses_what_it_cannot_send_as_trex(mode, spec, msg):
    from pathlib import Path

    from xenobench.traffic.profiles import SIM_PORT, Compiled, check_local
    from xenobench.traffic.stl_sim import compile_cycle
    pkt = bytes(12) + bytes.fromhex("0800") + bytes(IP() / UDP()) + bytes(18)
    cyc = compile_cycle([_stream(pkt, mode)], "t.py", SIM_PORT, 1000, 1 << 20)
    c = Compiled(Path("t.py"), {}, [], cyc.frames, [], cyc.times, cyc.period_s, cyc.finite)
    s = TrialSpec.of(1000, **spec)
    if msg is None:
        check_local("xdpgen", c, s)
        assert c.finite and c.cycle == 5 and c.times == pytest.approx([0, 0.01, 0.02, 0.03, 0.04])
        return
    with pytest.raises(TrafficError) as e:
        check_local("xdpgen", c, s)
    assert str(e.value) == msg


@pytest.mark.parametrize("rate,pps", [
    ({"type": "pps", "value": 1000}, 1000),
    ({"type": "bps_L2", "value": 8 * 64 * 1000}, 1000),               # 60-byte frame + FCS = 64 B
    ({"type": "bps_L1", "value": 8 * 84 * 1000}, 1000),               # + 20 B preamble and gap
    ({"type": "percentage", "value": 100}, 10e9 / (8 * 84)),          # 10 Gb/s line: 14.88 Mpps
])
def test_rates_as_trex_computes_them(rate, pps):
    from xenobench.traffic.profiles import SIM_PORT
    from xenobench.traffic.stl_sim import stream_pps
    assert stream_pps({"mode": {"rate": rate}}, 60, SIM_PORT, "s") == pytest.approx(pps)
