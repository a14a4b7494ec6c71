"""Pairing where the link layer does not give the direction: loopback captures (Linux lo with zero
MACs, Linux cooked v1/v2, BSD null and loop), several clients, a resolver in the middle, captures
that start with an answer, IP fragments, DNS messages dnspython refuses. Every fixture capture is
also checked against Wireshark's own pairing (tshark's dns.response_to and dns.time) where tshark
is installed.

The captures sit in tests/fixtures/captures: the scapy-made ones come from make_captures.py there
(conversations()), the tcpdump_*.pcap ones were taken on a real lo by tcpdump_lo.sh there."""

import json
import struct
import subprocess
import sys

import pytest
from scapy.layers.dns import DNS, DNSQR
from scapy.layers.inet import IP, UDP, fragment
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, fragment6
from scapy.layers.l2 import Ether

from xenobench import REPO_ROOT
from xenobench.capture import LOOPBACK, NOT_IP, Datagrams, datagram
from xenobench.errors import DataError
from xenobench.pcap_rtt import analyze_pcap, normalize_client

from .tshark_pairing import TSHARK, compare

CAPTURES = REPO_ROOT / "tests" / "fixtures" / "captures"
NSM = 23.456  # the standard exchange's median (make_captures.py): 20.1, 23.456, 31 µs; id 3 lost
C = "02:00:00:00:01:00"

# file, what it holds, (pairs, lost, queries), median µs, the client(s) as the result names them
CONVERSATION_TABLE = [
    ("lo_zero_macs.pcap", "Ethernet on Linux lo: both MACs zero, 127.0.0.1 both ways", (3, 1, 4), NSM, "127.0.0.1"),
    ("lo_zero_macs_ipv6.pcap", "the same over ::1", (3, 1, 4), NSM, "::1"),
    ("null_le.pcap", "BSD loopback (link type 0), AF_INET little-endian", (3, 1, 4), NSM, "127.0.0.1"),
    ("null_be_ipv6.pcap", "BSD loopback, AF_INET6 30 (Darwin) big-endian", (3, 1, 4), NSM, "::1"),
    ("loop_108.pcap", "OpenBSD loopback (link type 108), network order", (3, 1, 4), NSM, "127.0.0.1"),
    ("sll_lo_both_copies.pcap", "cooked v1 on lo, every packet twice (outgoing, to us): second copies skipped",
     (3, 1, 4), NSM, "127.0.0.1"),
    ("eth_starts_with_answer.pcap", "the capture begins with id 1's answer (unmatched)", (2, 1, 3),
     (23.456 + 31) / 2 - 3.772, C),
    ("eth_one_mac_both_ways.pcap", "one MAC pair on both directions", (3, 1, 4), NSM, C),
    ("eth_answers_to_other_mac.pcap", "answers to another MAC than the queries came from", (3, 1, 4), NSM, C),
    ("eth_vrrp.pcap", "queries to the VRRP MAC, answers from two routers' MACs", (3, 1, 4), NSM, C),
    ("eth_three_clients.pcap", "three clients with the same ids and port; client 2's id 3 lost", (11, 1, 12), 21.0,
     "3 clients: 02:00:00:00:01:00, 02:00:00:00:01:01, 02:00:00:00:01:02"),
    ("eth_resolver.pcap", "a resolver's interface: 3 client queries (120 µs), 3 upstream (100 µs)", (6, 0, 6),
     100.0005, "2 clients: 02:00:00:00:01:00, 02:00:00:00:53:00"),
    ("eth_forward_pointer.pcap", "id 2's query has a forward compression pointer (dnspython refuses it)",
     (3, 1, 4), NSM, C),
    ("eth_ipv6_fragments.pcap", "id 3's answer in three IPv6 fragments, the last first", (4, 0, 4), 23.4565, C),
    ("eth_retransmitted.pcap", "id 5 sent twice 200 ms apart, answered 30 µs after the second", (2, 1, 3), 20.1005, C),
    ("eth_retransmitted_6s.pcap", "the same 6 s apart", (1, 1, 2), 30.0, C),
    ("eth_same_id_two_questions.pcap", "id 6 asks a. and b. from one port; answers 21 and 21 µs later", (2, 0, 2),
     21.0, C),
    # taken by tcpdump on a real lo (tcpdump_lo.sh): dig against BIND, microsecond stamps
    ("tcpdump_lo_eth.pcap", "tcpdump -i lo: 5 x dig @127.0.0.1", (5, 0, 5), 252.0, "127.0.0.1"),
    ("tcpdump_lo_starts_with_answer.pcap", "the same, its first query cut", (4, 0, 4), 226.5, "127.0.0.1"),
    ("tcpdump_any_sll.pcap", "tcpdump -i any -y LINUX_SLL on lo (one copy per packet)", (5, 0, 5), 238.0, "127.0.0.1"),
    ("tcpdump_any_sll2.pcap", "tcpdump -i any -y LINUX_SLL2 on lo", (5, 0, 5), 227.0, "127.0.0.1"),
    ("tcpdump_lo_frag4.pcap", "lo MTU 1280: 2 kB TXT answers in IPv4 fragments", (3, 0, 3), 190.0, "127.0.0.1"),
    ("tcpdump_lo_frag6.pcap", "the same over ::1 (IPv6 fragments)", (3, 0, 3), 295.0, "::1"),
    ("tcpdump_any_frag4_sll.pcap", "IPv4 fragments in cooked v1", (3, 0, 3), 335.0, "127.0.0.1"),
    ("tcpdump_any_frag6_sll2.pcap", "IPv6 fragments in cooked v2", (3, 0, 3), 224.0, "::1"),
    ("tcpdump_lo_resolver.pcap", "dig to a forwarding named (127.0.0.2) that asks 127.0.0.1", (10, 0, 10), 250.5,
     "2 clients: 127.0.0.1, 127.0.0.2"),
    ("tcpdump_lo_clients.pcap", "3 rounds of 3 digs at once from 127.0.0.3, .4, .5", (9, 0, 9), 238.0,
     "3 clients: 127.0.0.3, 127.0.0.4, 127.0.0.5"),
    ("tcpdump_any_clients_sll2.pcap", "cooked v2: clients 127.0.0.3, .4 and ::1", (9, 0, 9), 514.0,
     "3 clients: 127.0.0.3, 127.0.0.4, ::1"),
]


@pytest.mark.parametrize("name,desc,counts,median,client", CONVERSATION_TABLE, ids=[r[0] for r in CONVERSATION_TABLE])
def test_conversation_table(name, desc, counts, median, client):
    r = analyze_pcap(CAPTURES / name)
    assert (r.n, r.lost, r.queries) == counts, desc
    assert r.median_us == pytest.approx(median, abs=0.0005), desc
    assert r.client_mac == client, desc
    assert r.rtts_ns.min() > 0


def test_what_the_captures_hold_besides_the_pairs():
    s = analyze_pcap(CAPTURES / "sll_lo_both_copies.pcap").summary()
    assert s["skipped"] == {"loopback copy": 7} and s["link_types"] == "Linux cooked v1"
    s = analyze_pcap(CAPTURES / "eth_forward_pointer.pcap").summary()
    assert s["dns_refused"] == {"BadPointer: A DNS compression pointer points forward instead of backward": 1}
    assert s["clients"] == {C: {"queries": 4, "answered": 3}}  # the refused query stays the client's
    r = analyze_pcap(CAPTURES / "eth_ipv6_fragments.pcap")
    s = r.summary()
    assert (s["ip_reassembled"], s["ip_fragments"], s["skipped"]) == (1, 3, {"IP fragment": 3})  # 4 fragments
    # id 3's answer is taken at the frame that completes it: the fourth fragment, 25.003 µs
    assert r.rtts_ns.tolist() == [20_100, 23_456, 25_003, 31_000] and r.pairs[2] == (4, 8)
    s = analyze_pcap(CAPTURES / "eth_starts_with_answer.pcap").summary()
    assert s["unmatched_answers"] == 1 and s["answers"] == 3
    s = analyze_pcap(CAPTURES / "eth_resolver.pcap").summary()
    assert s["clients"] == {C: {"queries": 3, "answered": 3}, "02:00:00:00:53:00": {"queries": 3, "answered": 3}}
    assert (s["min_us"], s["max_us"]) == (100.0, 120.0)
    assert analyze_pcap(CAPTURES / "null_be_ipv6.pcap").link_types == "BSD loopback"


@pytest.mark.parametrize("name,client,n,median", [
    ("eth_resolver.pcap", C, 3, 120.0),                       # the client's wait
    ("eth_resolver.pcap", "198.18.0.53", 3, 100.0),           # the resolver's, to upstream, by address
    ("eth_resolver.pcap", "02-00-00-00-53-00", 3, 100.0),     # ... by MAC
    ("eth_three_clients.pcap", "198.18.0.18", 3, 22.0),
    ("tcpdump_lo_resolver.pcap", "127.0.0.2", 4, 193.5),
])
def test_client_keeps_one_clients_queries(name, client, n, median):
    r = analyze_pcap(CAPTURES / name, client)
    assert (r.n, r.median_us) == (n, pytest.approx(median, abs=0.0005))


def test_an_answer_past_the_timeout_is_lost_unless_the_timeout_is_longer():
    f = CAPTURES / "eth_late_answer_3s.pcap"
    with pytest.raises(DataError, match=r"answers that paired with no query awaited within the 1 s timeout, to: "
                                        rf"{C} \(1\)\)$"):
        analyze_pcap(f)
    assert analyze_pcap(f, timeout_s=5).rtts_ns.tolist() == [3 * 10 ** 9]


def test_empty_pairings_name_what_the_capture_holds():
    f = CAPTURES / "eth_answers_only.pcap"
    with pytest.raises(DataError) as e:
        analyze_pcap(f)
    assert str(e.value) == (
        f"Failed to analyze capture {f}: no probe from any client was answered (3 DNS frames: 0 queries, 3 answers; "
        f"answers that paired with no query awaited within the 1 s timeout, to: {C} (3); the capture starts after "
        "the queries, or holds only answers)")
    f = CAPTURES / "eth_three_clients.pcap"
    with pytest.raises(DataError) as e:
        analyze_pcap(f, "198.18.0.99")
    assert str(e.value) == (
        f"Failed to analyze capture {f}: no probe from 198.18.0.99 was answered (23 DNS frames: 0 queries from "
        "198.18.0.99, 11 answers; clients seen: 02:00:00:00:01:00 (4 queries), 02:00:00:00:01:01 (4 queries), "
        "02:00:00:00:01:02 (4 queries); name one of the clients seen with --client (a MAC or an address))")


@pytest.mark.parametrize("given,want", [
    ("02:00:00:00:01:0A", "02:00:00:00:01:0a"), ("02-00-00-00-01-0a", "02:00:00:00:01:0a"),
    ("02000000010a", "02:00:00:00:01:0a"), ("198.18.0.16", "198.18.0.16"), ("2001:DB8:0::16", "2001:db8::16"),
    ("This Host", "this host"), ("example.com", None), ("02:00:00:00:01", None), ("", None),
])
def test_client_values(given, want):
    if want is None:
        with pytest.raises(ValueError, match=r"is neither a MAC \(02:00:00:00:01:00\) nor an IP address"):
            normalize_client(given)
    else:
        assert normalize_client(given) == want


def test_cli_client_option_by_address_and_its_refusal():
    run = [sys.executable, "-m", "xenobench", "rtt", "pcap", str(CAPTURES / "eth_resolver.pcap"), "--json"]
    p = subprocess.run(run + ["--client", "198.18.0.53"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert (s["n"], s["median_us"], s["client_mac"]) == (3, 100.0, "198.18.0.53")
    p = subprocess.run(run + ["--client", "resolver"], capture_output=True, text=True)
    assert p.returncode != 0 and "Failed to use --client: 'resolver' is neither a MAC" in p.stderr


# --- the reflector's returned probe, told from a retransmission by the link layer alone ------------
def _frame(src_mac, dst_mac, qid=7):
    return bytes(Ether(src=src_mac, dst=dst_mac) / IP(src="1.2.3.4", dst="10.3.10.45", id=1) /
                 UDP(sport=12345, dport=53) / DNS(id=qid, rd=1, qd=DNSQR(qname="example.com")))


def _pcap_ns(path, recs):
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)]
    for ts, raw in recs:
        out.append(struct.pack("<IIII", ts // 10 ** 9, ts % 10 ** 9, len(raw), len(raw)) + raw)
    path.write_bytes(b"".join(out))
    return path


@pytest.mark.parametrize("back,pairs,queries", [
    (("02:00:00:00:02:00", C), 1, 1),   # another station sends it back to the sender: the answer
    ((C, "02:00:00:00:05:00"), 0, 2),   # the sender sends it again: a retransmission
    (("00:00:00:00:00:00", "00:00:00:00:00:00"), 0, 2),  # on lo nothing tells the two apart
])
def test_a_returned_probe_is_an_answer_only_where_the_stations_say_so(tmp_path, back, pairs, queries):
    first = _frame(C, "02:00:00:00:05:00") if back[0] != "00:00:00:00:00:00" else _frame(*back)
    f = _pcap_ns(tmp_path / "r.pcap", [(10 ** 12, first), (10 ** 12 + 18_000, _frame(*back))])
    if pairs:
        r = analyze_pcap(f)
        assert (r.n, r.queries, r.rtts_ns.tolist()) == (pairs, queries, [18_000])
    else:
        with pytest.raises(DataError, match=rf"\(2 DNS frames: {queries} queries, 0 answers; clients seen"):
            analyze_pcap(f)


# --- the reader's state across frames: fragments and loopback copies -----------------------------
def test_ipv4_fragments_in_any_order_with_overlap_and_duplicates_are_made_whole():
    payload = bytes(range(256)) * 3
    whole = IP(src="10.0.0.1", dst="10.0.0.2", id=99, proto=17) / UDP(sport=53, dport=4000) / payload
    frags = [bytes(Ether() / f) for f in fragment(whole, 256)]
    assert len(frags) == 4
    d = Datagrams()
    order = [3, 1, 1, 0, 2]  # the last first, one twice
    got = [d(1, frags[i]) for i in order]
    assert got[:-1] == ["IP fragment"] * 4
    proto, sport, dport, *_, body = got[-1]
    assert (proto, sport, dport, body) == (17, 53, 4000, payload) and d.reassembled == 1 and d.incomplete == 0


def test_ipv6_fragments_are_made_whole_and_unfinished_ones_counted():
    payload = b"z" * 900
    pkt = IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrFragment(id=5) / UDP(sport=53, dport=4000) / payload
    frags = [bytes(Ether() / f) for f in fragment6(pkt, 400)]
    d = Datagrams()
    assert [d(1, f) for f in frags[:-1]] == ["IP fragment"] * (len(frags) - 1)
    assert d(1, frags[-1])[-1] == payload
    d(1, frags[0])  # a datagram whose other fragments never come
    assert d.incomplete == 1 and d.reassembled == 1
    small = Datagrams()
    small.MAX_PENDING = 1
    small(1, frags[0])
    other = bytes(Ether() / fragment6(IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrFragment(id=6) /
                                      UDP(sport=53, dport=4000) / payload, 400)[0])
    small(1, other)  # the first datagram is given up to keep memory bounded
    assert small.given_up == 1 and small.incomplete == 2
    assert datagram(1, frags[0]) == "IP fragment"  # without state: named, not reassembled


def test_bsd_loopback_header_in_either_byte_order_and_an_unknown_family():
    ip4 = bytes(IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=4000, dport=53) / (b"x" * 12))
    for hdr in (struct.pack("<I", 2), struct.pack(">I", 2)):
        assert datagram(0, hdr + ip4)[:3] == (17, 4000, 53)
    assert datagram(108, struct.pack(">I", 2) + ip4)[:3] == (17, 4000, 53)
    assert datagram(0, struct.pack("<I", 7) + ip4) == NOT_IP


def test_a_loopback_copy_is_dropped_only_after_its_outgoing_twin():
    ip4 = bytes(IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=4000, dport=53) / (b"x" * 12))

    def sll(ptype):
        return struct.pack("!HHH8sH", ptype, 772, 6, b"\0" * 8, 0x0800) + ip4

    d = Datagrams()
    assert d(113, sll(0))[0] == 17        # to us, no outgoing twin seen: kept
    assert d(113, sll(4))[0] == 17        # outgoing: kept
    assert d(113, sll(0)) == LOOPBACK     # its twin: dropped
    assert d(113, sll(0))[0] == 17        # a third copy is a packet of its own


# --- Wireshark's pairing (tshark), on every capture of the folder ---------------------------------
# the captures where the verdict is not "agree", and why
TSHARK_EXCEPTIONS = {
    "eth_retransmitted.pcap": ("differ", "a repeated query within 5 s: Wireshark measures from the first copy"),
    "eth_same_id_two_questions.pcap": ("differ", "Wireshark takes the second question for a retransmission"),
    "eth_late_answer_3s.pcap": ("we refuse", "3 s is past the 1 s timeout; Wireshark has none"),
    "eth_zero_rtt.pcap": ("we refuse", "an RTT of 0 cannot exist; tshark gives dns.time 0"),
    "truncated.pcap.gz": ("we refuse", "a cut gzip stream is refused; tshark reads up to the cut"),
    "tsresol_10e-127.pcapng": ("we refuse", "if_tsresol 10^-127 s: no 64-bit count of such units"),
    "tsresol_2e-127.pcapng": ("we refuse", "if_tsresol 2^-127 s: the same"),
    "eth_tcp_dns.pcap": ("both refuse", "DNS over TCP only (handshake frames, no messages)"),
    "eth_port5353.pcap": ("both refuse", "DNS on port 5353, asked for on 53"),
    "eth_answers_only.pcap": ("both refuse", "no queries"),
    "lz4_legacy.pcap.lz4": ("not a pcap", "the LZ4 legacy format is refused by name"),
}
# every capture tshark reads, less the compressed copies of eth_ipv4_us.pcap (a reader test, not a
# pairing one) and the tcpdump -e text files (tshark does not read text)
TSHARK_FILES = sorted(p.name for p in CAPTURES.iterdir()
                      if not p.name.endswith((".py", ".sh")) and not p.name.startswith(("text_", "eth_ipv4_us.pcap.")))


@pytest.mark.skipif(TSHARK is None, reason="needs tshark (apt-get install tshark)")
@pytest.mark.parametrize("name", TSHARK_FILES)
def test_every_fixture_capture_pairs_as_tshark_does(name):
    verdict, detail = compare(CAPTURES / name)
    want = TSHARK_EXCEPTIONS.get(name, ("agree", ""))[0]
    assert verdict == want, (name, detail)


def test_many_clients_are_summed_beyond_the_twenty_shown(tmp_path):
    # 50 raw-IP clients (named by address), one query each, answered after i+1 µs
    recs = []
    for i in range(50):
        c, t = f"10.1.0.{i + 1}", 10 ** 12 + i * 10 ** 6
        recs += [(t, bytes(IP(src=c, dst="10.0.0.53") / UDP(sport=5000, dport=53) / DNS(id=1, qd=DNSQR(qname="a.")))),
                 (t + 1000 * (i + 1), bytes(IP(src="10.0.0.53", dst=c) / UDP(sport=53, dport=5000) /
                                            DNS(id=1, qr=1, qd=DNSQR(qname="a."))))]
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 101)]
    out += [struct.pack("<IIII", ts // 10 ** 9, ts % 10 ** 9, len(b), len(b)) + b for ts, b in recs]
    f = tmp_path / "many.pcap"
    f.write_bytes(b"".join(out))
    s = analyze_pcap(f).summary()
    # RTTs 1..50 µs: the grouped median of an even count sits at the lower middle value
    assert (s["n"], s["median_us"], s["median_raw_us"]) == (50, 25.0, 25.5)
    assert s["client_mac"] == "50 clients: 10.1.0.1, 10.1.0.2, 10.1.0.3, 47 more"
    assert len(s["clients"]) == 21 and s["clients"]["30 others"] == {"queries": 30, "answered": 30}
    assert s["clients"]["10.1.0.20"] == {"queries": 1, "answered": 1}


@pytest.mark.parametrize("payload", [b"x" * 40, b"\0" * 40, b"\x12\x34\x01"])
def test_filler_on_port_53_is_not_dns(tmp_path, payload):
    # a load generator's filler (TRex's 'xxxx...', zeros, a short datagram) has no DNS header to pair by
    b = bytes(Ether(src=C, dst="02:00:00:00:05:00") / IP(src="198.18.0.16", dst="198.18.0.100") /
              UDP(sport=53, dport=53) / payload)
    f = _pcap_ns(tmp_path / "filler.pcap", [(10 ** 12, b), (10 ** 12 + 1000, b)])
    with pytest.raises(DataError, match=r"no DNS frames on UDP port 53; found: 2 UDP frames on port 53 that are not "
                                        r"DNS$"):
        analyze_pcap(f)
