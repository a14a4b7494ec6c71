"""Property tests of the DNS responders' input (Hypothesis; strategies in tests/strategies.py):
- the Python server (xenobench.agents.dns_server.respond) on generated and mutated queries: never
  an exception; a drop only for what has no header or is an answer; anything it sends parses as a
  DNS response with QR set, the query's id and the rcode its outcome names;
- the XDP responder (dns_server/xdp_responder.bpf.c) through BPF_PROG_TEST_RUN on frames carrying
  them, with the IPv4/UDP headers mutated too: the verdict is DROP, PASS or TX; PASS leaves the
  frame as it was; TX sends a well-formed reply (Ethernet to the client, IPv4 with a valid
  checksum and matching lengths, UDP from port 53) whose DNS payload parses with the query's id."""

import ipaddress
import os
import re
import shutil
import struct
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.rcode
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from xenobench.agents.bpf import bpftool
from xenobench.agents.dns_server import parse_records, respond
from xenobench.agents.dns_xdp import OBJ, fill_maps, load
from xenobench.testbed import ensure_bpffs, unmount_bpffs_if_unused

from .conftest import needs_root
from .strategies import PROPERTY, dns_queries, mutated

ZONE = dns.name.from_text("example.com.")
RECORDS = parse_records(ZONE, ["probe=198.18.0.53", "www=198.18.0.80", "www=198.18.0.81"])
RCODE = {"formerr": dns.rcode.FORMERR, "notimp": dns.rcode.NOTIMP, "refused": dns.rcode.REFUSED,
         "nxdomain": dns.rcode.NXDOMAIN, "answered": dns.rcode.NOERROR, "nodata": dns.rcode.NOERROR}
VIP, CLIENT, CLIENT_MAC, BACKEND_MAC, LB_OUT = ("198.18.0.100", "198.18.0.16", "02:00:00:00:01:00",
                                                "02:00:00:00:02:00", "02:00:00:00:05:01")
XDP = {0: "XDP_ABORTED", 1: "XDP_DROP", 2: "XDP_PASS", 3: "XDP_TX", 4: "XDP_REDIRECT"}


@PROPERTY
@given(wire=dns_queries())
def test_python_server_answers_or_drops_every_query(wire):
    out, outcome = respond(wire, ZONE, RECORDS, 300)
    if out is None:
        assert (outcome, len(wire) < 12 or bool(wire[2] & 0x80)) in (("dropped_short", True),
                                                                     ("dropped_response", True))
        return
    m = dns.message.from_wire(out)
    assert m.flags & dns.flags.QR and m.id == struct.unpack_from("!H", wire)[0]
    assert m.rcode() == RCODE[outcome]
    if outcome == "answered":
        assert sorted(rd.address for rd in m.answer[0]) == sorted(RECORDS[m.question[0].name])


# --- the XDP responder ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def xdp_run(tmp_path_factory):
    """Run one frame through the responder (answer mode, TX egress): (verdict, output frame)."""
    if os.geteuid() != 0 or not OBJ.exists():
        pytest.skip("needs root and dns_server built (make -C dns_server)")
    d = tmp_path_factory.mktemp("xdp")
    mounted = ensure_bpffs()
    pindir = Path("/sys/fs/bpf") / f"{os.environ['XENOBENCH_NS_PREFIX']}dnsprop-{d.name[-8:]}"
    load(pindir)
    fill_maps(pindir, vip=VIP, port=53, mode="answer", zone="example.com.", answer="198.18.0.53", ttl=300,
              src_mac=BACKEND_MAC, peers={CLIENT: CLIENT_MAC}, egress="tx")

    def run(data: bytes):
        (d / "in").write_bytes(data)
        p = bpftool("prog", "run", "pinned", str(pindir / "progs" / "xdns_responder"), "data_in", str(d / "in"),
                    "data_out", str(d / "out"))
        return XDP[int(re.search(r"Return value: (\d+)", p.stdout + p.stderr).group(1))], (d / "out").read_bytes()

    yield run
    shutil.rmtree(pindir, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused(mounted)


@st.composite
def frames(draw) -> bytes:
    """A query as the LB forwards it to the backend, sometimes with a byte of its Ethernet type,
    IPv4 or UDP header (bytes 12..41) overwritten, or the bytes after the Ethernet header mutated."""
    data = bytes(Ether(src=LB_OUT, dst=BACKEND_MAC) / IP(src=CLIENT, dst=VIP, id=7, flags="DF")
                 / UDP(sport=draw(st.integers(1, 0xFFFF)), dport=53) / draw(dns_queries()))
    kind = draw(st.integers(0, 3))
    if kind == 1:  # a header field overwritten: ethertype, ihl, lengths, fragment bits, protocol, ports
        b = bytearray(data)
        pos = draw(st.sampled_from([12, 13, 14, 16, 17, 20, 21, 23, 34, 35, 36, 37, 38, 39, 40, 41]))
        b[pos] = draw(st.integers(0, 255))
        data = bytes(b)
    elif kind == 2:  # past the Ethernet header: BPF_PROG_TEST_RUN takes no frame shorter than it
        data = data[:14] + draw(mutated(data[14:]))
    return data


def assert_well_formed_reply(query_frame: bytes, out: bytes):
    q = Ether(query_frame)
    assert out[:12] == bytes.fromhex(CLIENT_MAC.replace(":", "") + BACKEND_MAC.replace(":", "")) and out[12:14] == b"\x08\x00"
    ver_ihl, _, tot_len = struct.unpack_from("!BBH", out, 14)
    assert ver_ihl == 0x45 and tot_len == len(out) - 14
    words = struct.unpack_from("!10H", out, 14)
    assert (sum(words) & 0xFFFF) + (sum(words) >> 16) == 0xFFFF  # header checksum
    assert out[23] == 17 and out[26:30] == ipaddress.IPv4Address(VIP).packed
    assert out[30:34] == ipaddress.IPv4Address(q[IP].src).packed
    sport, dport, ulen = struct.unpack_from("!HHH", out, 34)
    assert (sport, dport, ulen) == (53, q[UDP].sport, tot_len - 20)
    m = dns.message.from_wire(out[42:])
    assert m.flags & dns.flags.QR and m.id == struct.unpack_from("!H", bytes(q[UDP].payload))[0]
    # answer mode: every A question in the zone gets the one configured address, others REFUSED
    assert (m.rcode(), [rd.address for rrset in m.answer for rd in rrset]) in ((dns.rcode.NOERROR, ["198.18.0.53"]),
                                                                                (dns.rcode.REFUSED, []))


@needs_root
@PROPERTY
@given(data=frames())
def test_xdp_responder_drops_passes_or_sends_a_well_formed_reply(xdp_run, data):
    verdict, out = xdp_run(data)
    assert verdict in ("XDP_DROP", "XDP_PASS", "XDP_TX"), data.hex()
    if verdict == "XDP_PASS":
        assert out == data, data.hex()
    elif verdict == "XDP_TX":
        assert_well_formed_reply(data, out)
