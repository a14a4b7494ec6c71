"""The RTT prober: matching, timeouts and mismatches against a scripted responder on loopback;
the summary and the per-query comparison with a capture on hand-made records and pcaps; and
probe() through the namespace testbed to the Python server and the XDP responder, with and
without the eBPF load balancer, where the prober's records must agree with the pcap analysis."""

import json
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import dns.message
import dns.rrset
import pytest

from xenobench.config import load_config
from xenobench.dns import start_server, stop_server
from xenobench.agents.dns_xdp import OBJ
from xenobench.errors import ConfigError
from xenobench.agents.prober import Prober, read_records, summarize
from xenobench.rtt import choose_source, compare_with_pcap, probe
from xenobench.testbed import get_testbed

from .conftest import needs_root

QNAME = "probe.example.com."


class Responder(threading.Thread):
    """Answers the prober on 127.0.0.1 by script, one entry per query in arrival order:
    'ok', 'mismatch' (a wrong id and a reply from another port first, then ok), 'bad' (wrong
    address), 'silent'."""

    def __init__(self, script):
        super().__init__(daemon=True)
        self.script = list(script)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.other.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def run(self):
        for action in self.script:
            wire, peer = self.sock.recvfrom(4096)
            q = dns.message.from_wire(wire)
            r = dns.message.make_response(q)
            addr = "10.9.9.9" if action == "bad" else "198.18.0.53"
            r.answer.append(dns.rrset.from_text(q.question[0].name, 300, "IN", "A", addr))
            if action == "silent":
                continue
            if action == "mismatch":
                wrong = dns.message.from_wire(r.to_wire())
                wrong.id = (q.id + 1000) & 0xFFFF
                self.sock.sendto(wrong.to_wire(), peer)
                self.other.sendto(r.to_wire(), peer)  # right id, wrong source port
            self.sock.sendto(r.to_wire(), peer)


def test_matching_timeouts_mismatches_and_bad_answers_are_counted_exactly():
    resp = Responder(["ok", "mismatch", "bad", "silent", "ok"])
    resp.start()
    p = Prober(src="127.0.0.1", dst="127.0.0.1", port=resp.port, qname=QNAME, expect="198.18.0.53",
               count=5, rate=50, timeout=0.3)
    recs = p.run()
    assert [r["status"] for r in recs] == ["ok", "ok", "bad_answer", "timeout", "ok"]
    assert p.mismatched == 2
    s = summarize(recs, mismatched=p.mismatched)
    assert (s["n"], s["lost"], s["bad_answer"], s["mismatched"], s["sent"]) == (3, 1, 1, 2, 5)
    ids = [r["id"] for r in recs]
    assert ids == [(ids[0] + i) & 0xFFFF for i in range(5)]
    for r in recs:
        if r["status"] == "ok":
            assert r["rtt_ns"] == r["recv_ns"] - r["send_ns"] > 0
            assert r["ts"] in ("kernel", "hardware", "user")
            assert r["user_rtt_ns"] == r["user_recv_ns"] - r["user_send_ns"]
    timed_out = recs[3]
    assert timed_out["recv_ns"] is None and timed_out["rtt_ns"] is None and timed_out["send_ns"] > 0


def test_loopback_gets_kernel_timestamps_on_both_sides():
    resp = Responder(["ok"] * 3)
    resp.start()
    recs = Prober(src="127.0.0.1", dst="127.0.0.1", port=resp.port, qname=QNAME, expect="198.18.0.53",
                  count=3, rate=100, timeout=0.5).run()
    assert [r["ts"] for r in recs] == ["kernel"] * 3
    # the kernel's send stamp comes after the user clock read before sendto
    assert all(r["send_ns"] >= r["user_send_ns"] for r in recs)


def _rec(i, rtt_us, status="ok", ts="kernel", user_extra_us=50):
    send = 1_000_000_000 + i * 1_000_000
    rtt = int(rtt_us * 1000) if status == "ok" else None
    return {"i": i, "id": 100 + i, "send_ns": send, "recv_ns": send + rtt if rtt else None, "rtt_ns": rtt,
            "status": status, "ts": ts, "user_send_ns": send - 10_000,
            "user_recv_ns": send + rtt + int((user_extra_us - 10) * 1000) if rtt else None,
            "user_rtt_ns": rtt + int(user_extra_us * 1000) if rtt else None}


def test_summary_statistics_over_ok_records_only():
    recs = [_rec(0, 10), _rec(1, 20), _rec(2, 30), _rec(3, 40), _rec(4, 0, "timeout"), _rec(5, 0, "late"),
            _rec(6, 0, "bad_answer")]
    s = summarize(recs, mismatched=3)
    assert (s["n"], s["lost"], s["bad_answer"], s["mismatched"]) == (4, 2, 1, 3)
    assert (s["median_us"], s["mean_us"], s["std_us"]) == (25.0, 25.0, 12.91)
    assert s["p99_us"] == 39.7 and s["timestamps"] == "kernel"
    assert s["user_median_us"] == 75.0 and s["overhead_median_us"] == 50.0
    empty = summarize([_rec(0, 0, "timeout")])
    assert empty["n"] == 0 and empty["median_us"] is None and empty["timestamps"] == "user"


def _write_pcap_ns(path: Path, frames: list[tuple[int, bytes]]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for ts, b in frames:
            f.write(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(b), len(b)) + b)


def test_per_query_comparison_with_a_capture(tmp_path):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    client, server = "02:00:00:00:01:00", "02:00:00:00:02:00"
    recs = [_rec(0, 20), _rec(1, 30), _rec(2, 0, "timeout")]
    frames = []
    for r in recs:
        q = dns.message.make_query(QNAME, "A")
        q.id = r["id"]
        a = dns.message.make_response(q)
        frames.append((r["send_ns"] - 2_000, bytes(Ether(src=client, dst=server) / IP(src="198.18.0.16", dst="198.18.0.100")
                                                   / UDP(sport=40000, dport=53) / q.to_wire())))
        if r["status"] == "ok":  # captured 2 µs before the kernel's send stamp, 0.5 µs after its receive stamp
            frames.append((r["recv_ns"] + 500, bytes(Ether(src=server, dst=client) / IP(src="198.18.0.100", dst="198.18.0.16")
                                                     / UDP(sport=53, dport=40000) / a.to_wire())))
    # a probe from another socket with the same id is not ours
    frames.append((recs[0]["send_ns"], bytes(Ether(src=client, dst=server) / IP(src="198.18.0.16", dst="198.18.0.100")
                                             / UDP(sport=40001, dport=53) / dns.message.make_query(QNAME, "A").to_wire())))
    pcap = tmp_path / "c.pcap"
    _write_pcap_ns(pcap, sorted(frames, key=lambda f: f[0]))
    c = compare_with_pcap(recs, pcap, client_mac=client, sport=40000)
    assert c == {"matched": 2, "rtt_diff_median_us": -2.5, "rtt_diff_p99_abs_us": 2.5, "rtt_diff_max_abs_us": 2.5,
                 "tx_offset_median_us": 2.0, "rx_offset_median_us": -0.5}


def test_prober_process_refuses_bad_arguments(tmp_path):
    base = [sys.executable, "-m", "xenobench.agents.prober", "run", "--dst", "127.0.0.1", "--qname", QNAME,
            "--out", str(tmp_path / "r.jsonl")]
    p = subprocess.run(base + ["--src", "127.0.0.256", "--count", "1", "--rate", "1"], capture_output=True, text=True)
    assert p.returncode == 2 and "Failed to parse --src: '127.0.0.256' is not an IPv4 address" in p.stderr
    p = subprocess.run(base + ["--src", "127.0.0.1", "--count", "0", "--rate", "1"], capture_output=True, text=True)
    assert p.returncode == 2 and "Failed to start the prober" in p.stderr
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("arg,value,msg", [
    ("--rate", "nan", "argument --rate: 'nan' must be a rate from 1e-6 to 1e9 queries per second"),
    ("--rate", "1e-300", "argument --rate: '1e-300' must be a rate from 1e-6 to 1e9 queries per second"),
    ("--port", "70000", "argument --port: '70000' is out of range for a port (1-65535)"),
    ("--port", "0", "argument --port: '0' is out of range for a port (1-65535)"),
    ("--qname", "a..b", "argument --qname: 'a..b' is not a domain name (A DNS label is empty.)"),
    ("--qname", "x" * 64 + ".example", "is not a domain name (A DNS label is > 63 octets long.)"),
    ("--timeout", "inf", "argument --timeout: 'inf' must be a finite number above 0"),
    ("--timeout", "nan", "argument --timeout: 'nan' must be a finite number above 0"),
    ("--expect", "1.2.3", "argument --expect: '1.2.3' is not an IPv4 address"),
])
def test_prober_process_refuses_impossible_values_by_name(tmp_path, arg, value, msg):
    # each gave a traceback (or, for --expect, a run whose every answer was "bad_answer") before
    argv = {"--src": "127.0.0.1", "--dst": "127.0.0.1", "--qname": QNAME, "--count": "1", "--rate": "1",
            "--out": str(tmp_path / "r.jsonl")} | {arg: value}
    p = subprocess.run([sys.executable, "-m", "xenobench.agents.prober", "run", *(x for kv in argv.items() for x in kv)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.splitlines()[-1].startswith("python -m xenobench.agents.prober run: error: ") and msg in p.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_source_address_lands_in_the_dns_backends_class(tmp_path):
    cfg = load_config()
    assert choose_source(cfg, "fips2") == "198.18.0.16"  # class 0 (even) → fips2
    assert choose_source(cfg, "fips3") == "198.18.0.1"   # class 1 (odd) → fips3
    # eight classes, fips2 only in class 5: no client address (classes 1, 0, 1, 2, 3) fits
    names = [f"b{i}" for i in range(8)]
    names[5] = "fips2"
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"class_bits": 3, "backends": [{"name": n, "mac_address": f"02:00:00:00:0b:0{i}"}
                                                           for i, n in enumerate(names)]}))
    text = Path("config/local.yaml").read_text().replace("backends: config/backends.json", f"backends: {b}")
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"Failed to choose a probe source address: none of 198\.18\.0\.1, "
                                          r"198\.18\.0\.16, .* falls in fips2's classes \[5\]"):
        choose_source(load_config(tmp_path / "c.yaml"), "fips2")


def test_probe_refuses_bad_arguments(tmp_path):
    tb = get_testbed(load_config())
    with pytest.raises(ConfigError, match="Failed to probe: via must be 'lb' or 'direct', got 'switch'"):
        probe(tb, count=1, rate_qps=1, out=tmp_path / "r.jsonl", via="switch")
    with pytest.raises(ConfigError, match=r"Failed to probe: count must be >= 1 and rate > 0 \(got count=0"):
        probe(tb, count=0, rate_qps=1, out=tmp_path / "r.jsonl")
    with pytest.raises(ConfigError, match=r"Failed to probe: out .*/r\.pcap ends in \.pcap"):
        probe(tb, count=1, rate_qps=1, out=tmp_path / "r.pcap")


# --- live ---------------------------------------------------------------------------------------
def _no_leftovers(testbed):
    c = testbed.node("fips1")
    assert not c.running("rtt-tcpdump")
    assert "198.18.0.100" not in c.run(["ip", "neigh", "show", "dev", "eth0"]).stdout


@needs_root
@pytest.mark.parametrize("kind", ["python", "bind9", "xdp"])
def test_probe_direct_and_through_the_ebpf_lb_agrees_with_pcap(testbed, tmp_path, kind):
    from xenobench.lb import get_lb
    from xenobench.agents.ebpf_lb import OBJ as LB_OBJ
    if kind == "xdp" and not OBJ.exists() or not LB_OBJ.exists():
        pytest.skip("dns_server or ebpf_baseline not built")
    n = 60
    start_server(testbed, kind)
    lb = get_lb("ebpf", testbed)
    try:
        # one flow both ways, which the eBPF LB's class and Katran's ring both send to the DNS backend
        through = ("ebpf", "katran")
        results = {"direct": probe(testbed, count=n, rate_qps=300, out=tmp_path / "direct.jsonl", via="direct",
                                   through=through)}
        lb.start()
        try:
            results["lb"] = probe(testbed, count=n, rate_qps=300, out=tmp_path / "lb.jsonl", via="lb",
                                  through=through)
            per_backend = {b["name"]: b["packets"] for b in lb.stats()["backends"]}
        finally:
            lb.stop()
    finally:
        stop_server(testbed, kind)
    assert per_backend == {"fips2": n, "fips3": 0}  # every probe went through the LB, to the DNS backend
    for via, s in results.items():
        msg = f"{kind} via {via}: {json.dumps(s)[:600]}"
        assert (s["n"], s["lost"], s["mismatched"], s["bad_answer"]) == (n, 0, 0, 0), msg
        # the probes' one flow (rtt.probe_flow): fips2's class and Katran's ring agree on it
        assert s["flow_through"] == ["ebpf", "katran"], msg
        assert s["timestamps"] == "kernel" and (s["src"], s["sport"]) == ("198.18.0.18", 10055), msg
        assert s["dst_mac"] == ("02:00:00:00:05:00" if via == "lb" else "02:00:00:00:02:00")
        assert (s["pcap"]["n"], s["pcap"]["lost"]) == (n, 0), msg
        assert s["per_query"]["matched"] == n, msg
        # the same frames seen by the socket and by the capture: receive stamps identical,
        # RTTs within the configured tolerance
        assert abs(s["per_query"]["rx_offset_median_us"]) < 1.0, msg
        assert abs(s["pcap_median_diff_us"]) <= s["tolerance_us"], msg
        recs = read_records(s["raw"])
        assert len(recs) == n and all(r["status"] == "ok" and r["rtt_ns"] > 0 for r in recs)
        assert Path(s["pcap_file"]).stat().st_size > 24 * 2 * n
    _no_leftovers(testbed)


@needs_root
def test_probe_without_a_running_lb_counts_every_query_lost(testbed, tmp_path):
    start_server(testbed, "python")
    try:
        s = probe(testbed, count=4, rate_qps=50, out=tmp_path / "r.jsonl", via="lb")
    finally:
        stop_server(testbed, "python")
    assert (s["n"], s["lost"], s["median_us"]) == (0, 4, None)
    assert s["pcap"] is None and "no probe from 02:00:00:00:01:00 was answered" in s["pcap_error"]
    assert [r["status"] for r in read_records(tmp_path / "r.jsonl")] == ["timeout"] * 4
    _no_leftovers(testbed)


@needs_root
def test_server_and_prober_over_the_ssh_transport(testbed, tmp_path):
    """bind9 on fips2 and the prober on fips1, both reached over SSH (real sshd in their
    namespaces): configuration files go up by SFTP, raw records and the capture come back."""
    import dataclasses

    from xenobench.config import SshConfig
    from xenobench.nodes import SshNode

    from .conftest import start_sshd

    (tmp_path / "s2").mkdir()
    (tmp_path / "s1").mkdir()
    k2, kh2, a2 = start_sshd(testbed, "fips2", tmp_path / "s2", 2224)
    try:
        k1, kh1, a1 = start_sshd(testbed, "fips1", tmp_path / "s1", 2225)
        try:
            nodes = dict(testbed.cfg.nodes)
            nodes["fips2"] = dataclasses.replace(nodes["fips2"], transport="ssh", ssh=SshConfig(
                host=a2, port=2224, key=str(k2), known_hosts=str(kh2), netns=f"{testbed.cfg.prefix}fips1",
                python=sys.executable))
            nodes["fips1"] = dataclasses.replace(nodes["fips1"], transport="ssh", ssh=SshConfig(
                host=a1, port=2225, key=str(k1), known_hosts=str(kh1), netns=f"{testbed.cfg.prefix}fips3",
                python=sys.executable))
            tb = get_testbed(dataclasses.replace(testbed.cfg, nodes=nodes))
            assert isinstance(tb.node("fips2"), SshNode) and isinstance(tb.node("fips1"), SshNode)
            res = start_server(tb, "bind9")
            try:
                assert res["argv"][-4:-2] == ["-c", f"{tb.node('fips2').remote_dir}/dns/bind9/named.conf"]
                s = probe(tb, count=20, rate_qps=200, out=tmp_path / "ssh.jsonl", via="direct")
            finally:
                assert stop_server(tb, "bind9") is True
                tb.node("fips2").close()
                tb.node("fips1").close()
            assert (s["n"], s["lost"], s["timestamps"]) == (20, 0, "kernel")
            assert len(read_records(tmp_path / "ssh.jsonl")) == 20
            assert s["pcap"]["n"] == 20 and Path(s["pcap_file"]) == tmp_path / "ssh.pcap"
        finally:
            testbed.node("fips1").stop("sshd-test")
    finally:
        testbed.node("fips2").stop("sshd-test")


@needs_root
def test_cli_dns_start_probe_json_stop(testbed, tmp_path):
    import os
    env = {**os.environ, "XENOBENCH_NS_PREFIX": testbed.cfg.prefix}
    x = [sys.executable, "-m", "xenobench"]

    def cli(*args):
        return subprocess.run(x + list(args), capture_output=True, text=True, env=env, timeout=120)
    p = cli("dns", "start", "--server", "python")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["server"] == "python"
    try:
        p = cli("dns", "start", "--server", "xdp")
        assert p.returncode != 0 and "Failed to start DNS server xdp on fips2: python is running" in p.stderr
        p = cli("rtt", "probe", "--count", "10", "--rate", "100", "--via", "direct", "--json",
                "--out", str(tmp_path / "cli.jsonl"))
        assert p.returncode == 0, p.stderr
        s = json.loads(p.stdout)
        assert {"n", "lost", "mismatched", "median_us", "mean_us", "std_us", "p99_us", "timestamps", "pcap",
                "pcap_median_diff_us", "raw", "pcap_file"} <= set(s)
        assert (s["n"], s["lost"], s["timestamps"], s["raw"]) == (10, 0, "kernel", str(tmp_path / "cli.jsonl"))
        p = cli("rtt", "probe", "--count", "0", "--rate", "100")
        assert p.returncode == 2 and "Invalid value for '--count'" in p.stderr
    finally:
        p = cli("dns", "stop", "--server", "python")
    assert p.returncode == 0 and p.stdout.startswith("python: stopped ")
    assert json.loads(p.stdout.split(" ", 2)[2])["answered"] == 10


@needs_root
def test_xdp_reflector_replies_pair_in_prober_and_pcap(testbed, tmp_path, monkeypatch):
    """Reflect mode: the query comes back with swapped addresses and QR set, no record; the prober
    accepts it without an answer check, pcap_rtt pairs it as a reply."""
    import dataclasses

    import xenobench.dns as d
    if not OBJ.exists():
        pytest.skip("dns_server not built")
    real = d.settings
    monkeypatch.setattr(d, "settings", lambda cfg: dataclasses.replace(real(cfg), xdp_mode="reflect"))
    start_server(testbed, "xdp")
    try:
        s = probe(testbed, count=30, rate_qps=200, out=tmp_path / "r.jsonl", via="direct")
    finally:
        stop_server(testbed, "xdp")
    assert (s["server"], s["n"], s["lost"], s["bad_answer"], s["pcap"]["n"]) == ("xdp", 30, 0, 0, 30)
    assert all(r["rcode"] == 0 for r in read_records(tmp_path / "r.jsonl"))
    assert d.last_counts(testbed, "xdp")["answered"] == 30


def test_hardware_timestamping_request_on_a_device_without_it_falls_back_to_kernel():
    resp = Responder(["ok"] * 2)
    resp.start()
    p = Prober(src="127.0.0.1", dst="127.0.0.1", port=resp.port, qname=QNAME, expect="198.18.0.53",
               count=2, rate=100, timeout=0.5, iface="lo", enable_hw=True)
    recs = p.run()
    assert p.hw_note is not None  # lo refuses SIOCSHWTSTAMP; the reason is recorded
    assert [r["ts"] for r in recs] == ["kernel", "kernel"]
