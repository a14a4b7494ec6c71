"""The DNS backends: the Python server's answers on wire bytes, the XDP responder's frames through
BPF_PROG_TEST_RUN (real kernel, no network), and real queries (well-formed and malformed) from the
client namespace to each server, with and without the eBPF load balancer.

XDP fixture frames are built with scapy by the code below: description, input frame, expected
verdict, expected output frame."""

import ipaddress
import json
import re
import shutil
import struct
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.rcode
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from xenobench.config import load_config
from xenobench.dns import TAGS, last_counts, render_bind9, settings, start_server, stop_server
from xenobench.agents.dns_server import formerr, parse_records, respond
from xenobench.agents.dns_xdp import CONFIG_SIZE, OBJ, STATS_NAMES, fill_maps, load, read_stats
from xenobench.errors import ConfigError, NodeError
from xenobench.agents.bpf import bpftool
from xenobench.testbed import SINK_PROG, ensure_bpffs, unmount_bpffs_if_unused

from .conftest import needs_root
from .fixtures.dns.malformed import MALFORMED, QUERY

ZONE = dns.name.from_text("example.com.")
RECORDS = parse_records(ZONE, ["probe=198.18.0.53", "www=198.18.0.80", "www=198.18.0.81"])
VIP, CLIENT, CLIENT_MAC, BACKEND_MAC, LB_OUT = "198.18.0.100", "198.18.0.16", "02:00:00:00:01:00", "02:00:00:00:02:00", "02:00:00:00:05:01"
XDP = {0: "XDP_ABORTED", 1: "XDP_DROP", 2: "XDP_PASS", 3: "XDP_TX", 4: "XDP_REDIRECT"}
needs_xdp_obj = pytest.mark.skipif(not OBJ.exists(), reason="dns_server not built (make -C dns_server)")


def query(name="probe.example.com.", rdtype="A", qid=0x1234, rdclass="IN", **kw) -> bytes:
    q = dns.message.make_query(name, rdtype, rdclass=rdclass, **kw)
    q.id = qid
    return q.to_wire()


def hdr(wire: bytes) -> tuple:
    return struct.unpack_from("!6H", wire)


# --- the Python server's answers ------------------------------------------------------------------
def test_a_query_in_the_zone_is_answered_authoritatively():
    out, outcome = respond(query(), ZONE, RECORDS, 300)
    assert outcome == "answered"
    # id, flags QR|AA|RD, 1 question, 1 answer; the A record is the last 16 bytes
    assert hdr(out) == (0x1234, 0x8500, 1, 1, 0, 0)
    assert out[-16:] == bytes.fromhex("c00c 0001 0001 0000012c 0004") + ipaddress.IPv4Address("198.18.0.53").packed
    r = dns.message.from_wire(out)
    assert [rd.address for rd in r.answer[0]] == ["198.18.0.53"]


def test_two_records_for_one_name_are_both_answered():
    r = dns.message.from_wire(respond(query("WWW.Example.COM."), ZONE, RECORDS, 60)[0])
    assert sorted(rd.address for rd in r.answer[0]) == ["198.18.0.80", "198.18.0.81"]
    assert r.answer[0].ttl == 60


@pytest.mark.parametrize("desc,wire,outcome,flags", [
    ("name in the zone without a record", query("nx.example.com."), "nxdomain", 0x8503),
    ("name outside the zone", query("probe.example.org."), "refused", 0x8105),
    ("the zone's parent", query("com."), "refused", 0x8105),
    ("class CH", query(rdclass="CH"), "refused", 0x8105),
    ("AAAA for a name with only A", query(rdtype="AAAA"), "nodata", 0x8500),
    ("qdcount 0", struct.pack("!6H", 0x1234, 0x0100, 0, 0, 0, 0), "formerr", 0x8101),
])
def test_rcodes(desc, wire, outcome, flags):
    out, got = respond(wire, ZONE, RECORDS, 300)
    assert got == outcome, desc
    assert hdr(out)[0] == 0x1234 and hdr(out)[1] == flags, f"{desc}: flags {hdr(out)[1]:#06x}"
    assert hdr(out)[3] == 0, f"{desc}: no answer records expected"


def test_other_opcode_gets_notimp():
    wire = bytearray(query())
    wire[2] = (wire[2] & 0x87) | (2 << 3)  # opcode STATUS
    out, outcome = respond(bytes(wire), ZONE, RECORDS, 300)
    assert outcome == "notimp" and out[3] & 0x0F == dns.rcode.NOTIMP and out[2] & 0x80


@pytest.mark.parametrize("desc,wire,outcome,_xdp", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_queries_are_dropped_or_get_formerr(desc, wire, outcome, _xdp):
    out, got = respond(wire, ZONE, RECORDS, 300)
    assert got == outcome, desc
    if outcome == "formerr":
        qid, flags = struct.unpack_from("!HH", wire)
        assert out == struct.pack("!6H", qid, 0x8000 | (flags & 0x7900) | 1, 0, 0, 0, 0), desc
    else:
        assert out is None


def test_formerr_keeps_id_opcode_and_rd():
    assert formerr(bytes.fromhex("beef0100") + b"\0" * 8) == bytes.fromhex("beef8101") + b"\0" * 8


@pytest.mark.parametrize("item,msg", [
    ("probe", "Failed to parse record 'probe': expected name=address"),
    ("probe=1.2.3", "Failed to parse record 'probe=1.2.3': '1.2.3' is not an IPv4 address"),
    ("x.example.org.=1.2.3.4", "Failed to parse record 'x.example.org.=1.2.3.4': x.example.org. is outside the zone example.com."),
    ("a..b=1.2.3.4", "Failed to parse record 'a..b=1.2.3.4': 'a..b' is not a domain name (A DNS label is empty.)"),
])
def test_bad_records_are_refused_with_the_value(item, msg):
    with pytest.raises(ValueError) as e:
        parse_records(ZONE, [item])
    assert str(e.value) == msg


@pytest.mark.parametrize("arg,value,msg", [
    ("--port", "70000", "argument --port: '70000' is out of range for a port (1-65535)"),
    ("--port", "0", "argument --port: '0' is out of range for a port (1-65535)"),
    ("--zone", "a..b", "argument --zone: 'a..b' is not a domain name (A DNS label is empty.)"),
    ("--bind", "127.0.0.256", "argument --bind: '127.0.0.256' is not an IPv4 address"),
    ("--ttl", "-1", "argument --ttl: '-1' is out of range (0-2147483647)"),
    ("--stats-interval", "nan", "argument --stats-interval: 'nan' must be a finite number, 0 or more"),
    ("--record", "a..b=1.2.3.4", "Failed to parse record 'a..b=1.2.3.4': 'a..b' is not a domain name"),
])
def test_server_process_refuses_impossible_values_by_name(arg, value, msg):
    # --port 70000, --zone a..b and --record a..b=... ended in a traceback before
    import subprocess
    import sys
    argv = {"--bind": "127.0.0.1", "--port": "53", "--zone": "example.com."} | {arg: value}
    p = subprocess.run([sys.executable, "-m", "xenobench.agents.dns_server", *(x for kv in argv.items() for x in kv)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "Traceback" not in p.stderr and msg in p.stderr, p.stderr
    assert p.stdout == ""  # refused before it listens


# --- config and bind9 rendering --------------------------------------------------------------------
def _cfg_with(tmp_path, dns_yaml: str):
    text = Path("config/local.yaml").read_text().split("\n# DNS backends")[0] + "\n" + dns_yaml
    f = tmp_path / "c.yaml"
    f.write_text(text)
    return f


def test_bad_dns_section_names_key_and_value(tmp_path):
    f = _cfg_with(tmp_path, "dns: {records: {probe: 198.18.0.999}}\n")
    with pytest.raises(ConfigError, match=r"dns\.records\.probe: '198\.18\.0\.999' is not a 'ipv4'"):
        load_config(f)
    f = _cfg_with(tmp_path, "dns: {qname: nothere, records: {probe: 198.18.0.53}}\n")
    with pytest.raises(ConfigError, match=r"dns\.qname: 'nothere\.example\.com\.' has no record in dns\.records"):
        settings(load_config(f))
    f = _cfg_with(tmp_path, "dns: {server: knot}\n")
    with pytest.raises(ConfigError, match=r"dns\.server: 'knot' is not one of"):
        load_config(f)


def test_bind9_config_and_zone_pass_named_checkconf(tmp_path):
    import subprocess
    s = settings(load_config())
    conf, zone = render_bind9(s, str(tmp_path))
    (tmp_path / "named.conf").write_text(conf)
    (tmp_path / "zone.db").write_text(zone)
    assert "listen-on port 53 { 198.18.0.100; };" in conf and "recursion no;" in conf
    assert "probe\tIN\tA\t198.18.0.53" in zone and "www\tIN\tA\t198.18.0.80" in zone
    p = subprocess.run(["named-checkconf", "-z", str(tmp_path / "named.conf")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "zone example.com/IN: loaded serial 1" in p.stdout


# --- the XDP responder through BPF_PROG_TEST_RUN ----------------------------------------------------
@pytest.fixture
def xdp(tmp_path):
    mounted = ensure_bpffs()
    pindir = Path("/sys/fs/bpf") / f"xbc-dnsunit-{tmp_path.name[-12:]}"
    load(pindir)

    def configure(mode="answer", egress="tx", zone="example.com.", peers=None):
        fill_maps(pindir, vip=VIP, port=53, mode=mode, zone=zone, answer="198.18.0.53", ttl=300,
                  src_mac=BACKEND_MAC, peers={CLIENT: CLIENT_MAC} if peers is None else peers, egress=egress)

    def run(data: bytes):
        (tmp_path / "in").write_bytes(data)
        p = bpftool("prog", "run", "pinned", str(pindir / "progs" / "xdns_responder"), "data_in",
                    str(tmp_path / "in"), "data_out", str(tmp_path / "out"))
        rv = int(re.search(r"Return value: (\d+)", p.stdout + p.stderr).group(1))
        return XDP[rv], (tmp_path / "out").read_bytes()

    yield configure, run, pindir
    shutil.rmtree(pindir, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused(mounted)


def frame(payload: bytes, src=CLIENT, dport=53, dst=VIP) -> bytes:
    # as the LB forwards it: source MAC the LB's egress port
    return bytes(Ether(src=LB_OUT, dst=BACKEND_MAC) / IP(src=src, dst=dst, id=7, flags="DF")
                 / UDP(sport=4000, dport=dport) / payload)


def reply_frame(dns_payload: bytes, dst_mac=CLIENT_MAC) -> bytes:
    return bytes(Ether(src=BACKEND_MAC, dst=dst_mac) / IP(src=VIP, dst=CLIENT, id=7, flags="DF", ttl=64)
                 / UDP(sport=53, dport=4000, chksum=0) / dns_payload)


ANSWER_RR = bytes.fromhex("c00c 0001 0001 0000012c 0004 c6120035")  # 198.18.0.53, TTL 300


@needs_root
@needs_xdp_obj
def test_map_layouts_match_dns_common_h(xdp):
    _, _, pindir = xdp
    # the maps of this pin dir (other programs on the machine may have maps of the same names)
    maps = {n: json.loads(bpftool("map", "show", "pinned", str(pindir / "maps" / n), "-j").stdout)
            for n in ("config", "stats", "peers")}
    assert maps["config"]["bytes_value"] == CONFIG_SIZE
    assert maps["stats"]["max_entries"] == len(STATS_NAMES)
    assert maps["peers"]["bytes_key"] == 4 and maps["peers"]["bytes_value"] == 8


@needs_root
@needs_xdp_obj
@pytest.mark.parametrize("desc,payload,expected_dns,counter", [
    ("A query in the zone: QR|AA|RD, one A record appended",
     QUERY, QUERY[:2] + bytes.fromhex("8500 0001 0001 0000 0000") + QUERY[12:] + ANSWER_RR, "answered"),
    ("mixed-case name: the zone compares case-insensitively",
     query("PROBE.Example.COM."), query("PROBE.Example.COM.")[:2] + bytes.fromhex("8500 0001 0001 0000 0000")
     + query("PROBE.Example.COM.")[12:] + ANSWER_RR, "answered"),
    ("EDNS query: the OPT record is cut, the answer takes its place",
     query(use_edns=0), QUERY[:2] + bytes.fromhex("8500 0001 0001 0000 0000") + QUERY[12:] + ANSWER_RR, "answered"),
    ("name outside the zone: REFUSED, question kept",
     query("probe.example.org."), query("probe.example.org.")[:2] + bytes.fromhex("8505 0001 0000 0000 0000")
     + query("probe.example.org.")[12:], "refused"),
    ("a name ending in the zone's bytes but not at a label boundary: REFUSED",
     query("xexample.com."), query("xexample.com.")[:2] + bytes.fromhex("8505 0001 0000 0000 0000")
     + query("xexample.com.")[12:], "refused"),
])
def test_xdp_answers(xdp, desc, payload, expected_dns, counter):
    configure, run, pindir = xdp
    configure()
    verdict, out = run(frame(payload))
    expected = reply_frame(expected_dns)
    assert verdict == "XDP_TX", desc
    assert out == expected, f"{desc}\n expected {expected.hex()}\n got      {out.hex()}"
    words = struct.unpack("!10H", out[14:34])  # the rebuilt IPv4 header sums to 0xffff
    assert (sum(words) & 0xFFFF) + (sum(words) >> 16) == 0xFFFF
    assert read_stats(pindir)[counter] == 1


@needs_root
@needs_xdp_obj
def test_xdp_reflect_mode_and_peer_miss(xdp):
    configure, run, pindir = xdp
    configure(mode="reflect", peers={})
    verdict, out = run(frame(QUERY))
    # reflected: QR set, everything else as sent; no peer entry, so back to the frame's source MAC
    assert verdict == "XDP_TX"
    assert out == reply_frame(QUERY[:2] + bytes([QUERY[2] | 0x80]) + QUERY[3:], dst_mac=LB_OUT)
    st = read_stats(pindir)
    assert (st["answered"], st["peer_miss"]) == (1, 1)


@needs_root
@needs_xdp_obj
def test_xdp_redirect_egress_returns_redirect(xdp):
    configure, run, _ = xdp
    configure(egress="redirect")
    verdict, out = run(frame(QUERY))
    assert verdict == "XDP_REDIRECT" and out[:6] == bytes.fromhex(CLIENT_MAC.replace(":", ""))


@needs_root
@needs_xdp_obj
@pytest.mark.parametrize("desc,data,counter", [
    ("ARP", bytes(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP()), "passed"),
    ("UDP to another port", frame(QUERY, dport=5353), "passed"),
    ("UDP to another address", frame(QUERY, dst="198.18.0.2"), "passed"),
    ("AAAA query", frame(query(rdtype="AAAA")), "not_a"),
])
def test_xdp_passes_what_it_does_not_serve(xdp, desc, data, counter):
    configure, run, pindir = xdp
    configure()
    verdict, out = run(data)
    assert (verdict, out) == ("XDP_PASS", data), desc
    assert read_stats(pindir)[counter] == 1


@needs_root
@needs_xdp_obj
def test_xdp_drops_and_counts_every_malformed_query(xdp):
    configure, run, pindir = xdp
    configure()
    want = {}
    for desc, payload, _py, counter in MALFORMED:
        verdict, _ = run(frame(payload))
        assert verdict == "XDP_DROP", desc
        want[counter] = want.get(counter, 0) + 1
    # truncated UDP header: the frame ends inside it
    assert run(frame(QUERY)[:14 + 20 + 4])[0] == "XDP_DROP"
    want["malformed"] += 1
    st = read_stats(pindir)
    assert {k: st[k] for k in want} == want
    assert st["answered"] == 0
    # and it still answers afterwards
    assert run(frame(QUERY))[0] == "XDP_TX"


# --- live: real queries through the namespace testbed -----------------------------------------------
def ask(testbed, payloads: list[bytes], timeout=0.5) -> list[bytes | None]:
    c = testbed.node("fips1")
    r = c.run(c.python_argv("xenobench.agents.dns_ask", "--src", CLIENT, "--dst", VIP, "--timeout", str(timeout),
                            *[p.hex() for p in payloads]), timeout=60)
    return [bytes.fromhex(d["reply"]) if d["reply"] else None for d in map(json.loads, r.stdout.splitlines())]


@pytest.fixture
def direct(testbed):
    """Queries to the VIP go straight to the DNS backend's MAC (no load balancer)."""
    c = testbed.node("fips1")
    c.run(["ip", "neigh", "replace", VIP, "lladdr", BACKEND_MAC, "dev", "eth0", "nud", "permanent"])
    yield
    c.run(["ip", "neigh", "del", VIP, "dev", "eth0"], check=False)


@pytest.fixture
def server(testbed, request):
    kind = request.param
    if kind == "xdp" and not OBJ.exists():
        pytest.skip("dns_server not built")
    res = start_server(testbed, kind)
    yield kind, res
    stop_server(testbed, kind)


@needs_root
@pytest.mark.parametrize("server", ["python", "bind9", "xdp"], indirect=True)
def test_live_answers_from_each_server(testbed, direct, server):
    kind, res = server
    assert res["listen"] == "198.18.0.100:53"
    replies = ask(testbed, [query(qid=1), query("www.example.com.", qid=2), query("probe.example.org.", qid=3)])
    a = [dns.message.from_wire(r) for r in replies]
    assert [m.id for m in a] == [1, 2, 3]
    assert a[0].rcode() == dns.rcode.NOERROR and a[0].flags & dns.flags.AA
    assert [rd.address for rd in a[0].answer[0]] == ["198.18.0.53"]
    # the XDP responder answers every name in the zone with the qname's address (it holds one record)
    assert [rd.address for rd in a[1].answer[0]] == (["198.18.0.53"] if kind == "xdp" else ["198.18.0.80"])
    assert a[2].rcode() == dns.rcode.REFUSED and not a[2].answer
    if kind != "xdp":
        nx = dns.message.from_wire(ask(testbed, [query("nx.example.com.", qid=4)])[0])
        assert nx.rcode() == dns.rcode.NXDOMAIN


@needs_root
@pytest.mark.parametrize("server", ["python", "xdp"], indirect=True)
def test_live_fuzz_never_stops_the_server(testbed, direct, server):
    kind, _ = server
    payloads = [m[1] for m in MALFORMED]
    replies = ask(testbed, payloads, timeout=0.3)
    for (desc, _, py, _x), r in zip(MALFORMED, replies):
        if kind == "xdp" or py != "formerr":
            assert r is None, f"{kind}: {desc}: expected no answer, got {r.hex()}"
        else:
            assert r is not None and r[3] & 0x0F == dns.rcode.FORMERR and r[2] & 0x80, f"{desc}: {r!r}"
    ok = dns.message.from_wire(ask(testbed, [query(qid=99)])[0])
    assert ok.id == 99 and ok.answer
    node = testbed.node("fips2")
    assert node.running(TAGS[kind])
    stop_server(testbed, kind)
    counts = last_counts(testbed, kind)
    if kind == "python":
        assert counts["received"] == len(MALFORMED) + 1
        assert counts["formerr"] == sum(m[2] == "formerr" for m in MALFORMED)
        assert counts["dropped_short"] == 1 and counts["dropped_response"] == 1
        assert counts["answered"] == 1 and "internal_errors" not in counts
    else:
        assert counts["malformed"] == sum(m[3] == "malformed" for m in MALFORMED)
        assert counts["not_query"] == sum(m[3] == "not_query" for m in MALFORMED)
        assert counts["answered"] == 1
        # the responder is detached: what is attached now, if anything, is the testbed's backend sink
        xdp = testbed.status()["nodes"]["fips2"]["interfaces"]["eth0"]["xdp"]
        assert xdp is None or json.loads(bpftool("prog", "show", "id", str(xdp), "-j").stdout)["name"] == "backend_sink"


@needs_root
def test_second_server_is_refused_and_bad_kind_named(testbed):
    with pytest.raises(ConfigError, match=r"Failed to select DNS server: unknown kind 'knot' \(known: python, bind9, xdp\)"):
        start_server(testbed, "knot")
    start_server(testbed, "python")
    try:
        with pytest.raises(NodeError, match="Failed to start DNS server bind9 on fips2: python is running; stop it first"):
            start_server(testbed, "bind9")
    finally:
        assert stop_server(testbed, "python") is True
    assert stop_server(testbed, "python") is False


@needs_root
def test_bind9_missing_binary_leaves_nothing_running(testbed, tmp_path, monkeypatch):
    import dataclasses

    import xenobench.dns as d
    real = d.settings
    monkeypatch.setattr(d, "settings", lambda cfg: dataclasses.replace(real(cfg), bind9_binary="/nonexistent/named"))
    with pytest.raises(NodeError, match=r"Failed to start DNS server bind9 on fips2: .*nonexistent/named"):
        start_server(testbed, "bind9")
    assert not testbed.node("fips2").running(TAGS["bind9"])
    # the interface given back as it was found: the backends' sink counts its frames again
    assert testbed.sink.program("fips2") == SINK_PROG


def _mutations(n=150, seed=6):
    """Deterministic fuzz corpus: a valid query with bit flips, truncations, label-length and
    pointer bytes written at random places, random tails and pure random bytes."""
    import random
    rng = random.Random(seed)
    out = []
    for i in range(n):
        b = bytearray(QUERY)
        kind = i % 5
        if kind == 0:
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(len(b))
                b[pos] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b = b[:rng.randrange(len(b))]
        elif kind == 2:
            b[rng.randrange(12, len(b))] = rng.choice([0xC0, 0x3F, 0x40, 0x80, 0xFF, 0x00])
        elif kind == 3:
            b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        else:
            b = bytearray(rng.randrange(256) for _ in range(rng.randint(0, 80)))
        b[2:3] = bytes([b[2] & 0x7F]) if len(b) > 2 else b[2:3]  # keep QR clear: these are queries
        out.append(bytes(b))
    return out


def test_fuzzed_queries_never_raise_in_the_python_server():
    outcomes = {}
    for wire in _mutations():
        out, outcome = respond(wire, ZONE, RECORDS, 300)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if out is not None:
            assert out[2] & 0x80 and out[:2] == wire[:2]  # an answer, same id
    assert "internal_errors" not in outcomes and sum(outcomes.values()) == 150
    assert outcomes.get("formerr", 0) > 10 and outcomes.get("answered", 0) > 0


@needs_root
@needs_xdp_obj
def test_fuzzed_queries_through_the_xdp_responder(xdp):
    configure, run, pindir = xdp
    configure()
    verdicts = {}
    for wire in _mutations():
        verdict, out = run(frame(wire))
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        assert verdict in ("XDP_TX", "XDP_DROP", "XDP_PASS"), wire.hex()
        if verdict == "XDP_TX":  # whatever it sends is a well-formed reply to the same id
            m = dns.message.from_wire(bytes(Ether(out)[UDP].payload))
            assert m.flags & dns.flags.QR and m.id == struct.unpack_from("!H", wire)[0], wire.hex()
    st = read_stats(pindir)
    assert st["answered"] + st["refused"] + st["not_a"] + st["malformed"] + st["not_query"] == 150
    assert verdicts.get("XDP_TX", 0) == st["answered"] + st["refused"]
