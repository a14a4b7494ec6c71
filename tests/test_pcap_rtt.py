"""pcap RTT analysis: the thesis captures, pairing rules on synthetic captures, malformed input."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.dns import DNS, DNSQR, DNSRR
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import wrpcap

from xenobench.errors import DataError
from xenobench.pcap_rtt import analyze_pcap, grouped_median

THESIS_RTT = Path("/work/shared/thesis-data/rtt") if Path("/work/shared/thesis-data").exists() else \
    Path(__file__).resolve().parents[2] / "shared/thesis-data/rtt"
needs_thesis = pytest.mark.skipif(not THESIS_RTT.exists(), reason="needs ../shared/thesis-data")

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
    (b"\x0a\x0d\x0d\x0a" + b"\0" * 40, "pcapng is not supported"),
    (b"hello world, not a capture at all", "not a pcap file"),
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
