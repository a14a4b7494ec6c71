"""The one RTT pairing rule (xenobench.pcap_rtt) on synthetic captures made here: byte-identical
probes with lost replies among noise frames, answers stamped before their query, the timeout,
direct server return, pcapng resolutions in exact integer ns, tcpdump -e text across midnight,
and the reader checked against dpkt's."""

import json
import struct
import subprocess
import sys

import dpkt
import numpy as np
import pytest
from scapy.layers.dns import DNS, DNSQR, DNSRR
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, LLC, STP, Dot3, Ether

from xenobench.errors import DataError
from xenobench.pcap_rtt import analyze_pcap

CLIENT, LB, BACKEND = "02:00:00:00:01:00", "02:00:00:00:05:00", "02:00:00:00:02:00"
T0 = 1_700_000_000 * 10 ** 9 + 123_456_789  # ns; large on purpose: float seconds lose ns here


def probe(qid=0, src="1.2.3.4", sport=12345, src_mac=CLIENT, dst_mac=LB) -> bytes:
    """The thesis's probe: always the same query (id 0, 1.2.3.4:12345 -> 10.3.10.45:53)."""
    return bytes(Ether(src=src_mac, dst=dst_mac) / IP(src=src, dst="10.3.10.45", id=1) /
                 UDP(sport=sport, dport=53) / DNS(id=qid, rd=1, qd=DNSQR(qname="example.com")))


def reflected(qid=0) -> bytes:
    """The reflector's answer: the same query back, MACs rewritten."""
    return bytes(Ether(src=BACKEND, dst=CLIENT) / IP(src="1.2.3.4", dst="10.3.10.45", id=1) /
                 UDP(sport=12345, dport=53) / DNS(id=qid, rd=1, qd=DNSQR(qname="example.com")))


def answer(qid=0, dst="1.2.3.4", dport=12345) -> bytes:
    return bytes(Ether(src=BACKEND, dst=CLIENT) / IP(src="10.3.10.45", dst=dst) / UDP(sport=53, dport=dport) /
                 DNS(id=qid, qr=1, aa=1, qd=DNSQR(qname="example.com"), an=DNSRR(rrname="example.com", rdata="1.1.1.1")))


NOISE = [bytes(Dot3(src=LB, dst="01:80:c2:00:00:00") / LLC() / STP()),                        # STP
         bytes(Ether(src=LB, dst="01:80:c2:00:00:0e", type=0x88CC) / (b"\x02\x07\x04" + b"\0" * 40)),  # LLDP
         bytes(Ether(src=CLIENT, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="1.2.3.4", pdst="10.3.10.45"))]  # ARP


def pcap_ns(path, records):
    """Classic nanosecond pcap (magic a1b23c4d, little endian) from (ts_ns, frame bytes)."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)]
    for ts, raw in records:
        out.append(struct.pack("<IIII", ts // 10 ** 9, ts % 10 ** 9, len(raw), len(raw)) + raw)
    path.write_bytes(b"".join(out))
    return path


def test_identical_probes_with_one_percent_lost_replies_and_noise_give_the_exact_median(tmp_path):
    # 1000 identical probes every 214 ms (the thesis's spacing, well inside the 1 s timeout);
    # replies to 10 of them (1 %) are lost; STP, LLDP and ARP frames in between
    rng = np.random.default_rng(7)
    rtts = rng.integers(15_000, 60_000, 1000)  # ns
    lost = set(rng.choice(999, 10, replace=False).tolist())
    q, r = probe(), reflected()
    recs, t = [], T0
    for i in range(1000):
        recs.append((t, q))
        if i not in lost:
            recs.append((t + int(rtts[i]), r))
        recs.append((t + 100_000_000, NOISE[i % 3]))
        t += 214_000_000 + int(rng.integers(0, 2_000_000))
    res = analyze_pcap(pcap_ns(tmp_path / "lossy.pcap", recs))
    kept = [int(v) for i, v in enumerate(rtts) if i not in lost]
    assert res.n == 990 and res.lost == 10 and res.superseded == 10 and res.unmatched == 0
    assert res.rtts_ns.tolist() == kept  # every reply with its own probe, to the ns
    assert res.median_raw_us == np.median(kept) / 1000
    assert res.skipped_frames == 1000 and res.flags() == []


def test_without_superseding_the_lost_replies_would_shift_every_later_pair(tmp_path):
    # the same situation at a small scale, to show what the rule prevents: probe 1's reply is
    # lost; probe 2's reply must pair with probe 2 (20 µs), not with probe 1 (214 ms + 20 µs)
    q, r = probe(), reflected()
    f = pcap_ns(tmp_path / "c.pcap", [(T0, q), (T0 + 214_000_000, q), (T0 + 214_020_000, r)])
    res = analyze_pcap(f)
    assert res.rtts_ns.tolist() == [20_000] and res.pairs == [(1, 2)] and res.lost == 1


def test_reply_stamped_before_its_query_never_gives_a_negative_rtt(tmp_path):
    q, r = probe(), reflected()
    # file order query, reply; the reply's stamp is 50 µs before the query's
    recs = [(T0, q), (T0 - 50_000, r), (T0 + 214_000_000, q), (T0 + 214_020_000, r)]
    res = analyze_pcap(pcap_ns(tmp_path / "early.pcap", recs))
    assert res.rtts_ns.tolist() == [20_000] and res.lost == 1 and res.unmatched == 1 and res.out_of_order == 1
    assert res.rtts_ns.min() >= 0
    flags = " | ".join(res.flags())
    assert "1 answers with no awaited query" in flags and "1 frames stamped earlier than the frame before" in flags
    only = pcap_ns(tmp_path / "only_early.pcap", [(T0, q), (T0 - 50_000, r)])
    with pytest.raises(DataError, match=rf"Failed to analyze capture {only}: no probe from {CLIENT} was answered"):
        analyze_pcap(only)


def test_answers_after_the_timeout_do_not_pair_and_rtts_stay_within_it(tmp_path):
    recs = [(T0, probe(1)), (T0 + 1_500_000_000, answer(1)),       # 1.5 s: too late for 1 s
            (T0 + 2 * 10 ** 9, probe(2)), (T0 + 2 * 10 ** 9 + 900_000_000, answer(2))]  # 0.9 s: in time
    f = pcap_ns(tmp_path / "late.pcap", recs)
    res = analyze_pcap(f)
    assert res.rtts_ns.tolist() == [900_000_000] and res.lost == 1 and res.unmatched == 1
    assert res.timeout_ns == 10 ** 9
    assert any("more than 0.5 x the timeout" in x for x in res.flags())
    assert analyze_pcap(f, timeout_s=2).rtts_ns.tolist() == [1_500_000_000, 900_000_000]
    p = subprocess.run([sys.executable, "-m", "xenobench", "rtt", "pcap", str(f)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "n=1 lost=1" in p.stdout and "  flag: RTT up to 900.000 ms, more than 0.5 x the timeout (1000 ms)" in p.stdout
    p = subprocess.run([sys.executable, "-m", "xenobench", "rtt", "pcap", str(f), "--timeout", "2", "--json"],
                       capture_output=True, text=True)
    assert json.loads(p.stdout)["n"] == 2 and json.loads(p.stdout)["timeout_s"] == 2.0
    with pytest.raises(DataError, match="timeout inf s, expected a finite number > 0"):
        analyze_pcap(f, timeout_s=float("inf"))


def test_direct_server_return_answer_prefers_the_mirrored_query_then_the_earliest(tmp_path):
    # two clients' queries with the same id; the answer goes back to the second one's address
    # and port (mirrored 5-tuple), a later DSR answer to a third address takes the remaining one
    recs = [(T0, probe(9, src="1.2.3.4", sport=1111)), (T0 + 1000, probe(9, src="1.2.3.5", sport=2222)),
            (T0 + 30_000, answer(9, dst="1.2.3.5", dport=2222)), (T0 + 41_000, answer(9, dst="1.2.3.99", dport=5353))]
    res = analyze_pcap(pcap_ns(tmp_path / "dsr.pcap", recs))
    assert res.pairs == [(1, 2), (0, 3)] and res.rtts_ns.tolist() == [29_000, 41_000] and res.lost == 0
    assert res.pair_stamps == [(9, 2222, T0 + 1000, T0 + 30_000), (9, 1111, T0, T0 + 41_000)]


# --- pcapng in exact integer ns (pcapng draft: SHB, IDB with if_tsresol/if_tsoffset, EPB) --------
def _block(btype, body):
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def pcapng(records, tsresol=None, tsoffset_s=0):
    """records: (timestamp in the interface's units, frame bytes)."""
    opts = b""
    if tsresol is not None:
        opts += struct.pack("<HH", 9, 1) + bytes([tsresol]) + b"\0\0\0"
    if tsoffset_s:
        opts += struct.pack("<HHq", 14, 8, tsoffset_s)
    if opts:
        opts += struct.pack("<HH", 0, 0)
    out = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += _block(1, struct.pack("<HHI", 1, 0, 65535) + opts)
    for ts, raw in records:
        out += _block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(raw), len(raw)) + raw)
    return out


@pytest.mark.parametrize("tsresol,unit_ns,rtt_units,want_ns", [
    (9, 1, 19_555, 19_555),                 # ns resolution: 19.555 µs exactly (float gave 19.2)
    (None, 1000, 23, 23_000),               # default µs resolution
    (6, 1000, 18, 18_000),                  # explicit µs
    (0x80 | 20, None, 21, 20_027),          # 2^-20 s units: 21 x 953.674 ns = 20027.08 ns -> 20027
])
def test_pcapng_timestamps_are_exact_integer_ns(tmp_path, tsresol, unit_ns, rtt_units, want_ns):
    t0 = T0 // unit_ns if unit_ns else (T0 // 10 ** 9) << 20
    recs = [(t0, probe(1)), (t0 + rtt_units, answer(1)), (t0 + 1000 * rtt_units, probe(2)),
            (t0 + 1001 * rtt_units, answer(2))]
    f = tmp_path / "c.pcapng"
    f.write_bytes(pcapng(recs, tsresol))
    res = analyze_pcap(f)
    assert res.rtts_ns.tolist() == [want_ns, want_ns] and res.fmt == "pcapng"


def test_pcapng_tsoffset_is_added_in_seconds(tmp_path):
    f = tmp_path / "o.pcapng"
    f.write_bytes(pcapng([(5_000_000, probe(1)), (5_000_031, answer(1))], tsresol=6, tsoffset_s=1_700_000_000))
    from xenobench.pcap_rtt import read_pcap
    assert [ts for _, ts, _ in read_pcap(f)] == [1_700_000_005_000_000_000, 1_700_000_005_000_031_000]
    assert analyze_pcap(f).rtts_ns.tolist() == [31_000]


@pytest.mark.parametrize("nano", [False, True])
def test_reader_agrees_with_dpkt_on_pcap_and_pcapng(tmp_path, nano):
    # dpkt (a maintained reader) as an independent oracle for frame bytes and timestamps
    from xenobench.pcap_rtt import read_pcap
    frames = [probe(1), NOISE[0], answer(1), NOISE[2], probe(2), answer(2)]
    recs = [(T0 + i * 12_345_678, raw) for i, raw in enumerate(frames)]
    if nano:
        f = pcap_ns(tmp_path / "n.pcap", recs)
    else:
        f = tmp_path / "u.pcapng"
        f.write_bytes(pcapng([(ts // 1000, raw) for ts, raw in recs]))
    ours = list(read_pcap(f))
    with open(f, "rb") as fh:
        theirs = list(dpkt.pcap.UniversalReader(fh))
    assert [b for _, _, b in ours] == [bytes(b) for _, b in theirs] == frames
    for (_, ts, _), (dts, _) in zip(ours, theirs):
        want = int(dts * 10 ** 9) if nano else round(float(dts) * 10 ** 6) * 1000  # dpkt: Decimal / float s
        assert ts == want


# --- tcpdump -e text ------------------------------------------------------------------------------
def tcpdump_line(clock: str, src_mac, dst_mac, rest: str) -> str:
    return f"{clock} {src_mac} > {dst_mac}, {rest}"


def test_tcpdump_text_with_dsr_answers_and_a_midnight_crossing(tmp_path):
    # the thesis's Python DNS server (Fig. 7.7): every query id 4660 from 10.0.0.1.44444 to the
    # VIP; answers come straight from the backend to another address and port; times of day only
    q = "ethertype IPv4 (0x0800), length 73: 10.0.0.1.44444 > 10.0.0.45.53: 4660+ A? example.local. (31)"
    a = "ethertype IPv4 (0x0800), length 102: 10.0.0.45.53 > 10.0.0.3.5353: 4660*- 1/0/0 A 1.1.1.1 (60)"
    lines = [
        tcpdump_line("23:59:59.700000", CLIENT, LB, q),
        tcpdump_line("23:59:59.700031", BACKEND, CLIENT, a),                                   # 31 µs
        tcpdump_line("23:59:59.800000", LB, "01:80:c2:00:00:0e",
                     "ethertype LLDP (0x88cc), length 60: LLDP, length 46"),                    # noise
        tcpdump_line("23:59:59.900000", CLIENT, LB, q),                                       # lost
        tcpdump_line("23:59:59.999990", CLIENT, "ff:ff:ff:ff:ff:ff",
                     "ethertype ARP (0x0806), length 42: Request who-has 10.0.0.45 tell 10.0.0.1, length 28"),
        tcpdump_line("23:59:59.999995", CLIENT, LB, q),
        tcpdump_line("00:00:00.000020", BACKEND, CLIENT, a),                                   # 25 µs, next day
        tcpdump_line("00:00:00.214000", CLIENT, LB, q),
        tcpdump_line("00:00:00.214040", BACKEND, CLIENT, a),                                   # 40 µs
        "\t0x0000:  4500 0049 0001 0000 4011 6b6c 0a00 0001  E..I....@.kl....",              # -X continuation
    ]
    f = tmp_path / "rtt_python.txt"
    f.write_text("\n".join(lines) + "\n")
    res = analyze_pcap(f)
    assert res.fmt == "tcpdump-text" and res.client_mac == CLIENT
    assert res.rtts_ns.tolist() == [31_000, 25_000, 40_000] and res.lost == 1 and res.superseded == 1
    assert res.pairs == [(0, 1), (5, 6), (7, 8)]  # line indexes
    assert res.skipped_frames == 2 and res.resolution_us == 1.0
    assert res.flags() == ["lost 1 of 4 probes (25.0 % > 5 %)"]


def test_tcpdump_text_nanosecond_dates_and_questions(tmp_path):
    # -tttt --time-stamp-precision=nano -vv: a date, 9 digits, and the answer's question shown
    q = "ethertype IPv4 (0x0800), length 73: 10.0.0.1.44444 > 10.0.0.45.53: {} [1au] A? {}. (42)"
    a = "ethertype IPv4 (0x0800), length 102: 10.0.0.45.53 > 10.0.0.1.44444: {}* q: A? {}. 1/0/0 example.local. A 1.1.1.1 (60)"
    lines = [tcpdump_line("2026-11-22 23:59:59.999999990", CLIENT, LB, q.format("7+", "a.example")),
             tcpdump_line("2026-11-22 23:59:59.999999995", CLIENT, LB, q.format("7+", "b.example")),
             tcpdump_line("2026-11-23 00:00:00.000019545", BACKEND, CLIENT, a.format(7, "b.example")),
             tcpdump_line("2026-11-23 00:00:00.000021000", BACKEND, CLIENT, a.format(7, "a.example"))]
    f = tmp_path / "t.log"
    f.write_text("\n".join(lines) + "\n")
    res = analyze_pcap(f)
    assert res.resolution_us == 0.001
    assert res.pairs == [(1, 2), (0, 3)] and res.rtts_ns.tolist() == [19_550, 21_010]


def test_tcpdump_text_verbose_two_line_records(tmp_path):
    # tcpdump -e -n -vv: IP header fields in parentheses, the addresses on the next indented line,
    # "[udp sum ok]" before the DNS id, the answer's question shown
    ip = "ethertype IPv4 (0x0800), length {}: (tos 0x0, ttl 64, id 1, offset 0, flags [none], proto UDP (17), length {})"
    lines = [tcpdump_line("10:00:00.000100", CLIENT, LB, ip.format(73, 59)),
             "    10.0.0.1.44444 > 10.0.0.45.53: [udp sum ok] 4660+ A? example.local. (31)",
             tcpdump_line("10:00:00.000127", BACKEND, CLIENT, ip.format(102, 88)),
             "    10.0.0.45.53 > 10.0.0.3.5353: [udp sum ok] 4660*- q: A? example.local. 1/0/0 example.local. A 1.1.1.1 (60)"]
    f = tmp_path / "vv.txt"
    f.write_text("\n".join(lines) + "\n")
    res = analyze_pcap(f)
    assert res.rtts_ns.tolist() == [27_000] and res.pairs == [(0, 2)] and res.lost == 0


def test_text_that_is_not_tcpdump_output_is_refused_by_name(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("these are my notes\nnothing to see\n")
    with pytest.raises(DataError, match=rf"Failed to read capture {f}: not a pcap, pcapng or tcpdump -e text file"):
        analyze_pcap(f)


# --- the rule as a property: sequential identical probes, any spacing, any losses ------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from xenobench.pcap_rtt import Frame, pair  # noqa: E402

from .strategies import examples  # noqa: E402


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(1_000_000, 900_000_000),   # gap to the next probe, ns
                          st.integers(1, 10_000),                  # RTT as per-mille of half the gap (> 0)
                          st.booleans()),                          # reply lost
                min_size=1, max_size=40),
       st.booleans())
def test_identical_sequential_probes_pair_exactly_whatever_is_lost(probes, reflect):
    # a prober that sends the same query again after each gap; every reply that comes back comes
    # within half the gap (and within the 1 s timeout): each must pair with its own probe
    frames, want, t = [], [], T0
    for gap, permille, lost in probes:
        rtt = min(gap // 2 * permille // 10_000, 10 ** 9)
        frames.append(Frame(len(frames), t, CLIENT, LB, "1.2.3.4", "10.3.10.45", 12345, 53, 0, False, "example.com."))
        if not lost:
            want.append((len(frames) - 1, len(frames), rtt))
            frames.append(Frame(len(frames), t + rtt, BACKEND, CLIENT, *(("1.2.3.4", "10.3.10.45", 12345, 53)
                                if reflect else ("10.3.10.45", "1.2.3.4", 53, 12345)), 0, not reflect, "example.com."))
        t += gap
    p = pair(frames, CLIENT, 10 ** 9)
    assert p["pairs"] == [(q, a) for q, a, _ in want]
    assert p["rtts_ns"].tolist() == [r for _, _, r in want]
    assert p["lost"] == sum(lost for *_, lost in probes) and p["unmatched"] == 0
