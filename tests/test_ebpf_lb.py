"""The eBPF baseline: frame fixtures through BPF_PROG_TEST_RUN (xenobench.bpftest: bpftool prog run,
real kernel, no network), the loader's refusals, and a live split on the namespace testbed.

Fixture frames are built here with scapy (the command that makes them is the code below); each
row (bpftest.Fixture): description, input frame, expected verdict, expected output frame."""

import json
import shutil
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether

from xenobench import bpftest
from xenobench.bpftest import Fixture
from xenobench.errors import BackendsError
from xenobench.lb import get_lb
from xenobench.agents.ebpf_lb import OBJ, fill_maps, load, read_stats
from xenobench.testbed import ensure_bpffs, unmount_bpffs_if_unused

from .conftest import needs_root, send_udp

pytestmark = [needs_root, pytest.mark.skipif(not OBJ.exists(), reason="ebpf_baseline not built (make -C ebpf_baseline)")]

VIP, LB_IN, LB_OUT = "198.18.0.100", "02:00:00:00:05:00", "02:00:00:00:05:01"
MACS = ["02:00:00:00:0a:0%d" % i for i in range(4)]


def frame(src="198.18.0.16", dport=53, payload=b"q" * 22, **ip):
    return bytes(Ether(src="02:00:00:00:04:00", dst=LB_IN) / IP(src=src, dst=VIP, **ip)
                 / UDP(sport=1024, dport=dport) / payload)


def rewritten(f: bytes, mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", "")) + bytes.fromhex(LB_OUT.replace(":", "")) + f[12:]


@pytest.fixture
def prog(tmp_path):
    """The LB program loaded and pinned outside any testbed; maps filled per test."""
    mounted = ensure_bpffs()
    pindir = Path("/sys/fs/bpf") / f"xbt-unit-{tmp_path.name[-12:]}"
    load(pindir)

    def configure(backends: dict, egress="tx", policy="pass"):
        f = tmp_path / "b.json"
        f.write_text(json.dumps(backends))
        fill_maps(pindir, f, vip=VIP, port=53, policy=policy, egress=egress, src_mac=LB_OUT, egress_ifindex=None)
        return f

    def run(data: bytes, name="xb_lb"):
        r = bpftest.run(pindir / "progs" / name, data)
        return r.verdict, r.out

    yield configure, run, pindir
    shutil.rmtree(pindir, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused(mounted)


def two(k=None, weights=None):
    d = {"backends": [{"name": f"b{i}", "mac_address": MACS[i]} for i in range(2)]}
    if weights:
        for b, w in zip(d["backends"], weights):
            b["weight"] = w
    if k is not None:
        d["class_bits"] = k
    return d


def to_backend(desc: str, f: bytes, mac: str) -> Fixture:
    """A service frame forwarded out of the ingress port (egress tx) with its MACs rewritten."""
    return Fixture(desc, f, "XDP_TX", rewritten(f, mac))


def test_even_odd_sources_go_to_backend_0_and_1(prog):
    configure, _, pindir = prog
    configure(two())
    bpftest.check(pindir / "progs" / "xb_lb", [
        to_backend(f"source {src}: class {cls}, backend {cls}", frame(src), MACS[cls])
        for src, cls in (("198.18.0.16", 0), ("198.18.0.17", 1), ("10.0.0.254", 0))])


def test_four_backends_two_class_bits_and_weights(prog):
    configure, _, pindir = prog
    four = {"backends": [{"name": f"b{i}", "mac_address": MACS[i]} for i in range(4)]}
    configure(four)
    bpftest.check(pindir / "progs" / "xb_lb", [
        to_backend(f"198.18.1.{last}: class {last % 4}", frame(f"198.18.1.{last}"), MACS[last % 4]) for last in range(8)])


def test_weights_3_to_1(prog, tmp_path):
    configure, _, pindir = prog
    f = configure(two(weights=[3, 1]))
    bpftest.check(pindir / "progs" / "xb_lb", [
        to_backend(f"198.18.2.{i}: slot {i % 4} of [b0, b0, b0, b1]", frame(f"198.18.2.{i}"), MACS[int(i % 4 == 3)])
        for i in range(8)])
    st = read_stats(pindir, f, "test")
    assert [b["packets"] for b in st["backends"]] == [6, 2]
    assert st["backends"][0]["bytes"] == 6 * len(frame())


NON_SERVICE = [
    ("ARP", bytes(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP()), "non_ipv4"),
    ("IPv6 UDP/53", bytes(Ether(dst=LB_IN) / IPv6() / UDP(dport=53)), "non_ipv4"),
    ("VLAN-tagged IPv4", bytes(Ether(dst=LB_IN) / Dot1Q(vlan=5) / IP(dst=VIP) / UDP(dport=53)), "non_ipv4"),
    ("UDP to another port", frame(dport=54), "non_service"),
    ("TCP to the VIP", bytes(Ether(dst=LB_IN) / IP(dst=VIP) / TCP(dport=53)), "non_service"),
    ("UDP to another address", bytes(Ether(dst=LB_IN) / IP(dst="198.18.0.3") / UDP(dport=53)), "non_service"),
]


@pytest.mark.parametrize("policy,verdict", [("pass", "XDP_PASS"), ("drop", "XDP_DROP")])
def test_non_service_frames_follow_policy_and_are_counted(prog, policy, verdict):
    configure, _, pindir = prog
    f = configure(two(), policy=policy)
    # out None: the frame leaves untouched
    bpftest.check(pindir / "progs" / "xb_lb", [Fixture(desc, data, verdict) for desc, data, _ in NON_SERVICE])
    st = read_stats(pindir, f, "test")
    assert st["non_ipv4"] == 3 and st["non_service"] == 3 and st["malformed"] == 0


def test_ipv4_with_options_is_classified_past_the_options(prog):
    configure, _, pindir = prog
    configure(two())
    f = bytes(Ether(src="02:00:00:00:04:00", dst=LB_IN) / IP(src="198.18.0.17", dst=VIP, options=b"\x01\x01\x01\x00")
              / UDP(dport=53) / b"x")
    assert f[14] == 0x46  # IHL 6
    bpftest.check(pindir / "progs" / "xb_lb", [to_backend("IPv4 with 4 B of options (IHL 6), class 1", f, MACS[1])])


def test_truncated_at_every_header_boundary_is_dropped_and_counted(prog):
    configure, _, pindir = prog
    f = configure(two())
    full = frame()
    # BPF_PROG_TEST_RUN refuses XDP input shorter than an Ethernet header (EINVAL), so the cuts
    # start at 14: at the end of Ethernet, inside IPv4, one byte short of it, at its end, inside UDP
    cuts = [14, 20, 33, 34, 41]
    bpftest.check(pindir / "progs" / "xb_lb", [Fixture(f"cut at {n} B: dropped untouched", full[:n], "XDP_DROP")
                                               for n in cuts])
    st = read_stats(pindir, f, "test")
    assert st["malformed"] == len(cuts) and st["non_ipv4"] == 0
    bpftest.check(pindir / "progs" / "xb_lb", [
        to_backend("headers complete, empty payload: a valid service frame", full[:42], MACS[0])])


def test_noop_program_only_redirects(prog):
    configure, _, pindir = prog
    configure(two())
    # empty devmap under test-run: the redirect lookup fails, the frame is untouched
    bpftest.check(pindir / "progs" / "xb_noop_redirect", [Fixture("no-op redirect, empty devmap", frame(), "XDP_ABORTED")])


BAD = [("bad MAC", '{"backends":[{"name":"a","mac_address":"zz"}]}', "is not a MAC address"),
       ("no backends", '{"backends":[]}', "no backends given"),
       ("too many backends", '{"class_bits":1,"backends":[{"name":"a","mac_address":"02:00:00:00:00:01"},'
        '{"name":"b","mac_address":"02:00:00:00:00:02"},{"name":"c","mac_address":"02:00:00:00:00:03"}]}',
        "do not fit in 2 slots"),
       ("unknown key", '{"backends":[{"name":"a","mac_address":"02:00:00:00:00:01","vlan":3}]}', "unknown key")]


@pytest.mark.parametrize("desc,text,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_backends_file_attaches_nothing(testbed, tmp_path, desc, text, msg):
    f = tmp_path / "bad.json"
    f.write_text(text)
    lb = get_lb("ebpf", testbed)
    with pytest.raises(BackendsError, match=msg):
        lb.start(f)
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None
    assert not lb.running()


def udp_in(node) -> int:
    """UDP datagrams the node's kernel received (delivered + to closed ports), /proc/net/snmp."""
    lines = [l.split() for l in node.run(["cat", "/proc/net/snmp"]).stdout.splitlines() if l.startswith("Udp:")]
    row = dict(zip(lines[0][1:], map(int, lines[1][1:])))
    return row["InDatagrams"] + row["NoPorts"]


def test_live_split_matches_backend_counters_and_refuses_second_start(testbed):
    lb = get_lb("ebpf", testbed)
    b2, b3 = testbed.node("fips2"), testbed.node("fips3")
    res = lb.start()
    try:
        assert res["mode"] == "native"
        with pytest.raises(Exception, match="already running"):
            lb.start()
        before = (udp_in(b2), udp_in(b3))
        sent = {"198.18.0.16": 70, "198.18.0.17": 30, "198.18.0.18": 40}
        for src, n in sent.items():
            send_udp(testbed, "client", dst_mac=LB_IN, src_ip=src, dst_ip=VIP, port=9053, payload="x", count=n)
        time.sleep(0.3)
        # port 9053 is not the service port: everything passes to the LB's kernel, nothing is forwarded
        assert [b["packets"] for b in lb.stats()["backends"]] == [0, 0]
        for src, n in sent.items():
            send_udp(testbed, "client", dst_mac=LB_IN, src_ip=src, dst_ip=VIP, port=53, payload="x", count=n)
        time.sleep(0.3)
        after = (udp_in(b2), udp_in(b3))
        st = lb.stats()
        got = {b["name"]: b["packets"] for b in st["backends"]}
        assert got == {"fips2": 110, "fips3": 30}  # even sources → fips2, odd → fips3
        assert lb.forwarded() == 140  # the interleaved designs' one-map read: the same sum
        # counted at the backends by their UDP stacks (the interface counters also see the ARP
        # that the backends' ICMP port-unreachable answers cause)
        assert (after[0] - before[0], after[1] - before[1]) == (110, 30)
        assert st["non_service"] == 140
    finally:
        assert lb.stop() is True
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None
    assert not (testbed.bpffs_dir / "ebpf").exists()


def test_over_ssh_transport_start_stats_stop(testbed, tmp_path):
    """The same LB driven over the ssh transport: sshd runs in the LB's namespace, the harness
    connects from the client namespace, the controller runs there and stats come back over SSH."""
    import dataclasses
    import sys

    from xenobench.config import SshConfig
    from xenobench.nodes import SshNode
    from xenobench.testbed import get_testbed

    from .conftest import start_sshd

    key, known, addr = start_sshd(testbed, "fips5", tmp_path, 2223)
    try:
        sc = SshConfig(host=addr, port=2223, key=str(key), known_hosts=str(known),
                       netns=f"{testbed.cfg.prefix}fips1", python=sys.executable)
        nodes = dict(testbed.cfg.nodes)
        nodes["fips5"] = dataclasses.replace(nodes["fips5"], transport="ssh", ssh=sc)
        cfg = dataclasses.replace(testbed.cfg, nodes=nodes)
        tb = get_testbed(cfg)
        assert isinstance(tb.node("fips5"), SshNode)
        lb = get_lb("ebpf", tb)
        res = lb.start()
        try:
            assert res["mode"] == "native"
            send_udp(testbed, "client", dst_mac=LB_IN, src_ip="198.18.0.17", dst_ip=VIP, port=53, payload="x",
                     count=25)
            time.sleep(0.3)
            st = lb.stats()
            assert {b["name"]: b["packets"] for b in st["backends"]} == {"fips2": 0, "fips3": 25}
        finally:
            assert lb.stop() is True
            tb.node("fips5").close()
        assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None
    finally:
        testbed.node("fips5").stop("sshd-test")
