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
    with pytest.raises(DataError, match="no probe from 02:00:00:00:02:00 was answered"):
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
    with pytest.raises(DataError, match=rf"Failed to analyze capture {f}: no probe from {CLIENT} was answered \(1 DNS frames\)"):
        analyze_pcap(f, client_mac=CLIENT)
