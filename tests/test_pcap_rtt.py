"""pcap RTT analysis: the thesis captures, pairing rules on synthetic captures, malformed input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.dns import DNS, DNSQR, DNSRR
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import wrpcap

from xenobench import REPO_ROOT
from xenobench.errors import DataError
from xenobench.pcap_rtt import analyze_pcap, grouped_median

# the thesis's raw data sits beside the repository (../shared/thesis-data, as rules/common.smk and
# the benchmarks expect); XENOBENCH_THESIS_DATA points elsewhere (a git worktree's checkout)
THESIS_RTT = Path(os.environ.get("XENOBENCH_THESIS_DATA", REPO_ROOT.parent / "shared" / "thesis-data")) / "rtt"
needs_thesis = pytest.mark.skipif(not THESIS_RTT.exists(), reason="needs ../shared/thesis-data (or XENOBENCH_THESIS_DATA)")

CLIENT, SERVER, OTHER = "02:00:00:00:01:00", "02:00:00:00:02:00", "02:00:00:00:05:01"


def query(i, src_mac=CLIENT, dst_mac=SERVER, qid=7, sport=40000):
    return Ether(src=src_mac, dst=dst_mac) / IP(src="198.18.0.16", dst="198.18.0.100") / \
        UDP(sport=sport, dport=53) / DNS(id=qid, rd=1, qd=DNSQR(qname="example.com"))


def reply(qid, dst_mac=CLIENT, src_mac=OTHER, sport=40000):
    return Ether(src=src_mac, dst=dst_mac) / IP(src="198.18.0.100", dst="198.18.0.16") / \
        UDP(sport=53, dport=sport) / DNS(id=qid, qr=1, qd=DNSQR(qname="example.com"),
                                         an=DNSRR(rrname="example.com", rdata="198.18.0.2"))


def write(tmp_path, pkts_times, name="c.pcap", nano=False):
    pkts = []
    for p, t in pkts_times:
        p.time = t
        pkts.append(p)
    f = tmp_path / name
    wrpcap(str(f), pkts, nano=nano)
    return f


@needs_thesis
def test_thesis_captures_give_the_published_added_latency():
    lb = analyze_pcap(THESIS_RTT / "baseline/rtt_xenoflow.pcap")
    direct = analyze_pcap(THESIS_RTT / "baseline/pingpong_xenoflow.pcap")
    assert lb.client_mac == direct.client_mac == "a0:88:c2:b6:14:1a"
    assert lb.n == direct.n == 900 and lb.lost == direct.lost == 0
    assert lb.median_us - direct.median_us == pytest.approx(5.2, abs=0.1)
    assert lb.median_us == pytest.approx(23.1, abs=0.1)
    assert lb.skipped_frames > 0  # the STP frames


@needs_thesis
def test_thesis_under_load_capture_pairs_all_probes():
    r = analyze_pcap(THESIS_RTT / "under-load/rtt_90m_50_50.pcap")
    assert r.n >= 890 and 15 < r.median_us < 60


def test_replies_pair_by_id_and_reversed_addresses_and_losses_count(tmp_path):
    # probes id 1, 2, 3; id 2 is never answered; an ARP and a reply to a stranger are skipped
    f = write(tmp_path, [(query(0, qid=1), 1.000000), (ARP(), 1.000001),
                         (query(0, qid=2), 1.000010), (reply(1), 1.000025),
                         (query(0, qid=3), 1.000100), (reply(9, dst_mac="02:00:00:00:09:00"), 1.0002),
                         (reply(3), 1.000150)], nano=True)
    r = analyze_pcap(f)
    assert r.client_mac == CLIENT
    assert r.n == 2 and r.lost == 1
    assert np.allclose(r.rtts_us, [25.0, 50.0], atol=0.01)
    assert r.pairs == [(0, 3), (4, 6)]


def test_reflected_identical_queries_pair_in_order(tmp_path):
    rows = []
    for i in range(5):
        t = 2.0 + i * 0.001
        rows += [(query(i), t), (query(i, src_mac=OTHER, dst_mac=CLIENT), t + (10 + i) * 1e-6)]
    r = analyze_pcap(write(tmp_path, rows))
    assert r.n == 5 and list(np.round(r.rtts_us)) == [10, 11, 12, 13, 14]
    assert r.median_raw_us == 12 and r.resolution_us == 1.0


def test_client_mac_can_be_given(tmp_path):
    f = write(tmp_path, [(query(0), 1.0), (reply(7), 1.00002)])
    assert analyze_pcap(f, client_mac=CLIENT.upper()).n == 1
    assert analyze_pcap(f, "198.18.0.16").n == 1
    with pytest.raises(DataError, match=r"no probe from 02:00:00:00:02:00 was answered \(2 DNS frames: 0 queries from "
                                        r"02:00:00:00:02:00, 1 answer; clients seen: 02:00:00:00:01:00 \(1 query\); name "
                                        r"one of the clients seen with --client \(a MAC or an address\)\)$"):
        analyze_pcap(f, client_mac=SERVER)


def test_grouped_median_interpolates_inside_the_middle_bin():
    assert grouped_median(np.array([1.0, 2, 3]), 1) == 2.0
    assert grouped_median(np.array([22.0] * 2 + [23.0] * 4 + [24.0] * 2), 1) == 23.0
    assert grouped_median(np.array([22.0] * 3 + [23.0] * 4 + [24.0] * 1), 1) == pytest.approx(22.75)


@pytest.mark.parametrize("content,msg", [
    (b"", "the file is empty"),
    (b"\x0a\x0d\x0d\x0a" + b"\0" * 40, "bad pcapng byte-order magic 00000000 at byte 0"),
    (b"hello world, not a capture at all", r"not a pcap, pcapng or tcpdump -e text file \(magic 68656c6c\)"),
    (b"\xd4\xc3\xb2\xa1" + b"\0" * 10, r"truncated file header \(14 of 24 bytes\)"),
])
def test_malformed_files_name_the_file(tmp_path, content, msg):
    f = tmp_path / "bad.pcap"
    f.write_bytes(content)
    with pytest.raises(DataError, match=f"Failed to read capture {f}: {msg}"):
        analyze_pcap(f)


def test_truncated_capture_and_capture_without_probes(tmp_path):
    f = write(tmp_path, [(query(0), 1.0), (reply(7), 1.00002)])
    t = tmp_path / "trunc.pcap"
    t.write_bytes(f.read_bytes()[:-10])
    with pytest.raises(DataError, match=rf"Failed to read capture {t}: truncated packet 1"):
        analyze_pcap(t)
    n = write(tmp_path, [(Ether(src=CLIENT, dst=SERVER) / ARP(), 1.0)], name="noprobe.pcap")
    with pytest.raises(DataError, match=rf"Failed to analyze capture {n}: no DNS frames on UDP port 53"):
        analyze_pcap(n)


def test_cli_rtt_pcap_json(tmp_path):
    f = write(tmp_path, [(query(0), 1.0), (reply(7), 1.000020)])
    p = subprocess.run([sys.executable, "-m", "xenobench", "rtt", "pcap", str(f), "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["n"] == 1 and s["client_mac"] == CLIENT and s["median_us"] == pytest.approx(20, abs=0.5)
    p = subprocess.run([sys.executable, "-m", "xenobench", "rtt", "pcap", str(tmp_path / "none.pcap")],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "Failed to read capture" in p.stderr and "No such file" in p.stderr


# --- pcapng and other byte orders, built by hand here (struct) so the reader is checked against the
# format description (pcapng draft: SHB 0x0A0D0D0A + byte-order magic, IDB with if_tsresol, EPB)

import struct  # noqa: E402


def _block(e, btype, body):
    body += b"\0" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def pcapng(frames_times, e="<", tsresol=None, extra_iface=False, sll_first=False):
    """frames_times: (bytes, seconds). tsresol: if_tsresol byte (None = default µs)."""
    out = _block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))
    opts = b""
    if tsresol is not None:
        opts = struct.pack(e + "HH", 9, 1) + bytes([tsresol]) + b"\0\0\0" + struct.pack(e + "HH", 0, 0)
    if sll_first:  # a non-Ethernet interface 0 (Linux cooked): its packets are skipped
        out += _block(e, 1, struct.pack(e + "HHI", 113, 0, 65535))
    out += _block(e, 1, struct.pack(e + "HHI", 1, 0, 65535) + opts)
    iface = 1 if sll_first else 0
    unit = 1e-6 if tsresol is None else (2.0 ** -(tsresol & 0x7F) if tsresol & 0x80 else 10.0 ** -tsresol)
    for raw, t in frames_times:
        ts = round(t / unit)
        out += _block(e, 6, struct.pack(e + "IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(raw), len(raw)) + raw)
    if sll_first:
        out += _block(e, 6, struct.pack(e + "IIIII", 0, 0, 1, 4, 4) + b"\0\0\0\0")
    return out


@pytest.mark.parametrize("endian,tsresol,sll", [("<", None, False), (">", 9, False), ("<", 9, True)])
def test_pcapng_sections_resolutions_and_interfaces(tmp_path, endian, tsresol, sll):
    frames = [(bytes(query(0, qid=1)), 10.0), (bytes(reply(1)), 10.0000231),
              (bytes(query(0, qid=2)), 10.001), (bytes(reply(2)), 10.0010175)]
    f = tmp_path / "c.pcapng"
    f.write_bytes(pcapng(frames, endian, tsresol, sll_first=sll))
    r = analyze_pcap(f)
    assert r.n == 2 and r.client_mac == CLIENT
    if tsresol == 9:
        assert r.resolution_us == pytest.approx(0.001)
        assert np.allclose(r.rtts_us, [23.1, 17.5], atol=0.002)
    else:
        assert r.resolution_us == 1.0 and list(r.rtts_us) == [23.0, 18.0]
    assert r.pairs[0][1] - r.pairs[0][0] == 1


def test_pcapng_truncated_block_names_the_file(tmp_path):
    f = tmp_path / "t.pcapng"
    f.write_bytes(pcapng([(bytes(query(0)), 1.0), (bytes(reply(7)), 1.00002)])[:-7])
    with pytest.raises(DataError, match=rf"Failed to read capture {f}: truncated block at byte \d+ \(packet 1"):
        analyze_pcap(f)


def test_big_endian_microsecond_pcap_and_summary_percentiles(tmp_path):
    # classic pcap header written by hand in network byte order (magic a1b2c3d4)
    recs = b""
    rtts = [20, 21, 22, 23, 24, 25, 26, 27, 28, 40]
    for i, d in enumerate(rtts):
        for raw, us in ((bytes(query(0, qid=i)), 1000 * i), (bytes(reply(i)), 1000 * i + d)):
            recs += struct.pack(">IIII", 5, us, len(raw), len(raw)) + raw
    f = tmp_path / "be.pcap"
    f.write_bytes(struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + recs)
    r = analyze_pcap(f)
    s = r.summary()
    assert r.n == 10 and list(r.rtts_us) == rtts
    assert s["median_raw_us"] == 24.5 and s["min_us"] == 20 and s["max_us"] == 40
    assert s["p25_us"] == pytest.approx(22.25) and s["p75_us"] == pytest.approx(26.75)
    assert r.probe_range == (0, 18) and r.answer_range == (1, 19)
    assert s["first_packet"] == 0 and s["last_packet"] == 19 and s["dns_frames"] == 20


def test_dns_frames_of_other_stations_only_give_no_probe_error(tmp_path):
    # DNS traffic between two other stations, the client given explicitly: nothing to pair
    f = write(tmp_path, [(query(0, src_mac=OTHER, dst_mac=SERVER), 1.0)], name="other.pcap")
    with pytest.raises(DataError, match=rf"Failed to analyze capture {f}: no probe from {CLIENT} was answered \(1 DNS "
                                        rf"frames: 0 queries from {CLIENT}, 0 answers; clients seen: {OTHER} \(1 query\)"):
        analyze_pcap(f, client_mac=CLIENT)


# --- the fixture table of captures (tests/fixtures/captures, made by make_captures.py there) -------
# Every capture holds the same exchange (4 queries, answers to ids 1, 2 and 4 after 20.1, 23.456
# and 31 µs) unless the row says otherwise. Row: description, file, expected pairs (or pairs, lost
# and queries) and median (µs), or the expected refusal (a regular expression after "Failed to ...
# <file>: "). tests/test_pcap_conversations.py holds the captures whose direction the link layer
# does not give, and checks every capture here against tshark.
import io  # noqa: E402
import os as _os  # noqa: E402
import threading  # noqa: E402

from .dpkt_pairing import dpkt_rtts  # noqa: E402
from xenobench.capture import Capture  # noqa: E402
from xenobench.pcap_rtt import read_pcap  # noqa: E402

CAPTURES = REPO_ROOT / "tests" / "fixtures" / "captures"
US, NSM = 23.0, 23.456  # medians of the microsecond and the nanosecond captures

CAPTURE_TABLE = [
    ("Ethernet IPv4, microsecond pcap, an ARP frame", "eth_ipv4_us.pcap", 3, US, None),
    ("Ethernet IPv4, nanosecond pcap in network byte order", "eth_ipv4_ns_be.pcap", 3, NSM, None),
    ("QinQ (802.1ad + 802.1Q) in pcapng", "eth_qinq.pcapng", 3, NSM, None),
    ("802.1Q with EDNS (OPT) in query and answer", "eth_vlan_edns.pcap", 3, NSM, None),
    ("Ethernet IPv6", "eth_ipv6.pcap", 3, NSM, None),
    ("Linux cooked v1 (tcpdump -i any); a query on lo, held twice (outgoing, to us): the second copy "
     "skipped, the query lost", "sll_any.pcap", (3, 2, 5), NSM, None),
    ("Linux cooked v2, IPv6, pcapng", "sll2_any_ipv6.pcapng", 3, NSM, None),
    ("raw IP (LINKTYPE_RAW 101)", "raw_ip.pcap", 3, NSM, None),
    ("raw IPv4 (228)", "raw_ipv4.pcap", 3, NSM, None),
    ("raw IPv6 (229), pcapng", "raw_ipv6.pcapng", 3, NSM, None),
    ("id 3's answer in three IPv4 fragments, reassembled (RTT to the last, 25.002 µs)", "eth_fragments.pcap",
     (4, 0, 4), 23.4565, None),  # 4 RTTs: the grouped median sits at the lower middle one
    ("pcapng in 2^-30 s units", "eth_tsresol_2e-30.pcapng", 3, 23.455, None),
    ("gzip", "eth_ipv4_us.pcap.gz", 3, US, None),
    ("gzip in two members", "two_members.pcap.gz", 3, US, None),
    ("xz", "eth_ipv4_us.pcap.xz", 3, US, None),
    ("bzip2", "eth_ipv4_us.pcap.bz2", 3, US, None),
    ("zstd", "eth_ipv4_us.pcap.zst", 3, US, None),
    ("lz4 frame", "eth_ipv4_us.pcap.lz4", 3, US, None),
    ("zstd under a .pcap name (content decides)", "zstd_named.pcap", 3, NSM, None),
    ("gzip of xz of pcapng", "nested.pcapng.xz.gz", 3, NSM, None),
    ("tcpdump -e text, IPv6", "text_ipv6.txt", 3, US, None),
    ("tcpdump -e text, IPv6, zstd", "text_ipv6.txt.zst", 3, US, None),
    ("DNS over TCP only", "eth_tcp_dns.pcap", 0, None,
     r"no DNS frames on UDP port 53; found: 4 TCP frames on port 53 \(DNS over TCP is not paired\)"),
    ("DNS on port 5353", "eth_port5353.pcap", 0, None,
     r"no DNS frames on UDP port 53; found: 7 UDP frames on other ports, DNS on port 5353 \(7 of the first 7\): "
     r"ask for it with --port 5353"),
    ("an answer stamped at its query's instant (RTT 0)", "eth_zero_rtt.pcap", 0, None,
     r"no probe from 02:00:00:00:01:00 was answered \(2 DNS frames: 1 query, 1 answer; 1 answers carry their "
     r"query's timestamp \(resolution 0.001 µs\); clients seen: 02:00:00:00:01:00 \(1 query\)\)$"),
    ("pcapng if_tsresol 10^-127", "tsresol_10e-127.pcapng", 0, None,
     r"interface block at byte 28: if_tsresol 0x7f is 10\^-127 s, finer than a 64-bit timestamp can count"),
    ("pcapng if_tsresol 2^-127", "tsresol_2e-127.pcapng", 0, None,
     r"interface block at byte 28: if_tsresol 0xff is 2\^-127 s, finer than a 64-bit timestamp can count"),
    ("text time 99:99:91", "text_bad_time.txt", 0, None, r"line 2: time 99:99:91 is not a time of day"),
    ("text DNS id 99999", "text_big_id.txt", 0, None, r"line 1: DNS id 99999 is above 65535 \(16 bits\)"),
    ("gzip cut short", "truncated.pcap.gz", 0, None, r"the gzip stream cannot be read: ends early \(truncated file\)"),
    ("LZ4 legacy format", "lz4_legacy.pcap.lz4", 0, None, r"LZ4 legacy format \(lz4 -l\); recompress it"),
]


@pytest.mark.parametrize("desc,name,pairs,median,refusal", CAPTURE_TABLE, ids=[r[1] for r in CAPTURE_TABLE])
def test_capture_table(desc, name, pairs, median, refusal):
    f = CAPTURES / name
    if refusal:
        with pytest.raises(DataError, match=rf"^Failed to (read|analyze) (capture|tcpdump text) {f}: {refusal}"):
            analyze_pcap(f, port=53)
        return
    r = analyze_pcap(f)
    assert (r.n, r.lost, r.queries) == (pairs if isinstance(pairs, tuple) else (pairs, 1, 4)), desc
    assert r.median_us == pytest.approx(median, abs=0.0005), desc
    assert r.rtts_ns.min() > 0


def test_the_port_named_in_the_refusal_pairs_and_fragments_and_compression_are_named():
    r = analyze_pcap(CAPTURES / "eth_port5353.pcap", port=5353)
    assert r.n == 3 and r.median_us == pytest.approx(NSM)
    s = analyze_pcap(CAPTURES / "eth_fragments.pcap").summary()
    assert s["ip_fragments"] == 2 and s["skipped"] == {"IP fragment": 2} and s["ip_reassembled"] == 1 and s["lost"] == 0
    s = analyze_pcap(CAPTURES / "nested.pcapng.xz.gz").summary()
    assert (s["compression"], s["format"], s["link_types"]) == ("gzip+xz", "pcapng", "Ethernet")
    s = analyze_pcap(CAPTURES / "sll_any.pcap").summary()
    assert s["skipped"] == {"loopback copy": 1} and s["link_types"] == "Linux cooked v1"
    assert s["clients"] == {"this host": {"queries": 4, "answered": 3}, "127.0.0.1": {"queries": 1, "answered": 0}}
    assert s["client_mac"] == "2 clients: this host, 127.0.0.1"
    assert analyze_pcap(CAPTURES / "sll_any.pcap", "this host").summary()["clients"] == {
        "this host": {"queries": 4, "answered": 3}}


def test_uncompressed_fixtures_are_what_the_generator_makes():
    sys.path.insert(0, str(CAPTURES))
    try:
        import make_captures
    finally:
        sys.path.remove(str(CAPTURES))
    for name, data in make_captures.captures().items():
        assert (CAPTURES / name).read_bytes() == data, name




# dpkt does not reassemble IP fragments (tests/test_pcap_conversations.py checks them against tshark)
@pytest.mark.parametrize("name", [r[1] for r in CAPTURE_TABLE if r[4] is None and "text" not in r[1]
                                  and "fragments" not in r[1]])
def test_capture_table_pairs_as_dpkt_does(name):
    raw = b"".join(_chunks(Capture(CAPTURES / name)))
    want = dpkt_rtts(io.BytesIO(raw))
    got = analyze_pcap(CAPTURES / name).rtts_ns.tolist()
    if name == "eth_tsresol_2e-30.pcapng":  # dpkt: float seconds of 2^-30 s units; ours: exact ns per stamp
        assert np.abs(np.array(got) - want).max() <= 1 and len(got) == 3
        return
    assert got == want and len(got) == 3


def _chunks(cap):
    """The decompressed bytes of a capture, through the reader's own stream (head, then the rest)."""
    yield cap.head
    while chunk := cap._read(1 << 16):
        yield chunk
    cap.close()


def test_thesis_captures_pair_as_dpkt_does():
    if not THESIS_RTT.exists():
        pytest.skip("needs ../shared/thesis-data (or XENOBENCH_THESIS_DATA)")
    for f in sorted(THESIS_RTT.rglob("*.pcap"))[:6]:
        ours = analyze_pcap(f)
        theirs = dpkt_rtts(io.BytesIO(f.read_bytes()), ours.client_mac, round(ours.resolution_us * 1000))
        if ours.superseded or ours.unmatched:
            continue  # identical probes with losses: the simple dpkt FIFO does not supersede
        assert ours.rtts_ns.tolist() == theirs, f


# --- streams: no size assumed, nothing read whole ----------------------------------------------
def test_dev_zero_is_refused_at_once_not_read_to_the_end(tmp_path):
    with pytest.raises(DataError, match=r"Failed to read capture /dev/zero: not a pcap, pcapng or tcpdump -e text "
                                        r"file \(magic 00000000\)"):
        analyze_pcap("/dev/zero")
    # gzip of zeros: the decompressed stream is refused after its first 4 kB as well
    with pytest.raises(DataError, match=r"not a pcap, pcapng or tcpdump -e text file \(magic 00000000 after gzip\)"):
        analyze_pcap(_gzip_of_zeros(tmp_path / "zeros.gz"))


def _gzip_of_zeros(f: Path) -> Path:
    import gzip
    with gzip.open(f, "wb") as g:
        for _ in range(64):
            g.write(b"\0" * (1 << 20))  # 64 MB of zeros, 64 kB on disk
    return f


def test_a_fifo_fed_slowly_in_small_pieces_is_read_and_paired(tmp_path):
    fifo = tmp_path / "cap.fifo"
    _os.mkfifo(fifo)
    data = (CAPTURES / "eth_ipv4_us.pcap.zst").read_bytes()

    def feed():
        with open(fifo, "wb") as w:
            for i in range(0, len(data), 7):
                w.write(data[i:i + 7])
                w.flush()

    t = threading.Thread(target=feed)
    t.start()
    r = analyze_pcap(fifo)
    t.join()
    assert r.n == 3 and r.median_us == US and r.compression == "zstd"


def test_a_growing_file_is_read_up_to_what_was_written_when_the_reader_gets_there(tmp_path):
    # the reader takes no size at open: records appended while it reads are read too
    data = (CAPTURES / "eth_ipv4_ns_be.pcap").read_bytes()
    first = 24 + 16 + len(bytes(query(0)))  # the file header and about the first record
    f = tmp_path / "growing.pcap"
    f.write_bytes(data[:first + 200])
    it = read_pcap(f)
    assert next(it)[0] == 0
    with open(f, "ab") as w:
        w.write(data[first + 200:])
    assert [i for i, _, _ in it] == [1, 2, 3, 4, 5, 6]


def test_every_cut_of_a_compressed_and_a_plain_capture_is_a_result_or_a_clear_error(tmp_path):
    for name in ("eth_ipv4_us.pcap.gz", "eth_ipv4_us.pcap.zst", "eth_ipv4_us.pcap.lz4", "sll2_any_ipv6.pcapng"):
        data = (CAPTURES / name).read_bytes()
        for cut in range(len(data)):
            f = tmp_path / f"cut{cut}"
            f.write_bytes(data[:cut])
            try:
                analyze_pcap(f)
            except DataError as e:
                assert str(e).startswith(f"Failed to read capture {f}: ") or \
                    str(e).startswith(f"Failed to analyze capture {f}: "), (name, cut, e)


@pytest.mark.parametrize("record,msg", [
    (struct.pack("<IIII", 1, 1_000_000, 4, 4) + b"abcd", r"packet 0 at byte 24: sub-second field 1000000 is not below 1000000"),
    (struct.pack("<IIII", 1, 0, 300_000, 300_000), r"packet 0 at byte 24 announces 300000 bytes, more than 262144"),
])
def test_pcap_record_fields_that_cannot_exist_are_refused(tmp_path, record, msg):
    f = tmp_path / "bad.pcap"
    f.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + record)
    with pytest.raises(DataError, match=rf"Failed to read capture {f}: {msg}"):
        analyze_pcap(f)


def test_unsupported_link_type_is_named_with_the_supported_ones(tmp_path):
    f = tmp_path / "ppp.pcap"
    f.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 9))
    with pytest.raises(DataError, match=r"link type 9 \(file header\) is not one of Ethernet \(1\), raw IP \(101\), "
                                        r"Linux cooked v1 \(113\)"):
        analyze_pcap(f)


def test_cli_reads_a_compressed_capture_with_bounded_output(tmp_path):
    p = subprocess.run([sys.executable, "-m", "xenobench", "rtt", "pcap", str(CAPTURES / "eth_ipv4_us.pcap.xz"), "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert (s["n"], s["median_us"], s["compression"], s["first_packet"], s["last_packet"]) == (3, 23.0, "xz", 0, 7)


def test_pairing_state_stays_bounded_on_many_distinct_probes():
    # 30,000 probes from ever new client ports, every 7th unanswered: the awaited and identical-
    # query records are swept (Pairer.SWEEP_AT), the pairs stay exact
    from xenobench.pcap_rtt import Frame, Pairer
    p, peak, t = Pairer(CLIENT, 10 ** 9), 0, 10 ** 12
    for i in range(30_000):
        sport = 1024 + i % 50_000
        p.add(Frame(2 * i, t, CLIENT, SERVER, "198.18.0.16", "198.18.0.100", sport, 53, i & 0xFFFF, False, "a."))
        if i % 7:
            p.add(Frame(2 * i + 1, t + 20_000, SERVER, CLIENT, "198.18.0.100", "198.18.0.16", 53, sport, i & 0xFFFF,
                        True, "a."))
        peak = max(peak, len(p.last_identical), sum(map(len, p.by_flow.values())))
        t += 1_000_000  # 1000 probes a second: 2000 within the 2 s (twice the timeout) a sweep keeps
    r = p.result()
    assert r["lost"] == 30_000 // 7 + 1 and set(r["rtts_ns"].tolist()) == {20_000} and r["unmatched"] == 0
    assert peak <= Pairer.SWEEP_AT + 1, peak
