"""Katran (facebookincubator/katran) as a load balancer: its Maglev ring and flow hash as Katran
computes them, its build from a located checkout, its real balancer program run on a fixture table
through BPF_PROG_TEST_RUN (bpftool prog run: the real kernel, no network), Katran's decap in front
of a backend's program, and Katran live on the namespace testbed (hidden-address check, DNS answers
by direct server return, nothing left behind).

Expected frames are built here with scapy from the rules they follow (RFC 2003 IPIP, and the outer
source address Katran derives from the flow in katran/lib/bpf/encap_helpers.h create_encap_ipv4_src),
not by running Katran's code; the real a flow goes to is the Maglev ring's (xenobench.agents.maglev).

The fixture table runs through its own small runner (`run` below), written so that a row is
(description, input, verdict, output) and can move to a shared BPF fixture-table runner as is.
"""

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment
from scapy.layers.l2 import ARP, Ether

from xenobench import katran
from xenobench.agents import maglev
from xenobench.agents.bpf import bpftool, load_pinned, percpu_sum
from xenobench.agents.katran_lb import GLOBAL, MAX_VIPS, VIP_NUM, fill_maps, plan, read_stats
from xenobench.lb import get_lb
from xenobench.testbed import Testbed

from .conftest import IS_ROOT, needs_root

XDP = {0: "XDP_ABORTED", 1: "XDP_DROP", 2: "XDP_PASS", 3: "XDP_TX", 4: "XDP_REDIRECT"}
VIP, GW, LB_IN, CLIENT = "198.18.0.100", "02:00:00:00:fe:00", "02:00:00:00:05:00", "02:00:00:00:01:00"
REALS = {"fips2": "198.18.0.2", "fips3": "198.18.0.3"}
BACKENDS = {"backends": [{"name": "fips2", "mac_address": "02:00:00:00:02:00"},
                         {"name": "fips3", "mac_address": "02:00:00:00:03:00"}]}


def test_stats_look_up_the_entries_they_count_instead_of_dumping_the_4096_reals(tmp_path):
    """Katran's agent reads its stats every interval while trials run: it looks up the reals of the
    backends file and the counters it reports, one entry each, and never dumps a map (a dump of
    reals_stats and its parse took ~0.1 s of CPU a second from the CPUs a trial measures)."""
    calls = []

    def run(*args):  # bpftool's JSON for a per-CPU entry on 2 CPUs: key * 10 + cpu packets, 64 bytes each
        calls.append(args)
        key = int.from_bytes(bytes(int(x) for x in args[5:9]), "little")
        return json.dumps({"key": [hex(b) for b in key.to_bytes(4, "little")],
                           "values": [{"cpu": c, "value": [hex(b) for b in (10 * key + c).to_bytes(8, "little")
                                                           + (64).to_bytes(8, "little")]} for c in (0, 1)]})
    bfile = tmp_path / "backends.json"
    bfile.write_text(json.dumps(BACKENDS))
    st = read_stats(tmp_path, bfile, "test", run=run)
    assert {a[:2] for a in calls} == {("map", "lookup")}
    asked = [(Path(a[3]).name, int.from_bytes(bytes(int(x) for x in a[5:9]), "little")) for a in calls]
    assert asked == [("reals_stats", 1), ("reals_stats", 2), ("stats", VIP_NUM),
                     *(("stats", MAX_VIPS + i) for i in GLOBAL.values())]
    assert [(b["name"], b["packets"], b["bytes"]) for b in st["backends"]] == [("fips2", 21, 128), ("fips3", 41, 128)]
    assert st["xdp_tx"] == 2 * 10 * (MAX_VIPS + GLOBAL["xdp_tx"]) + 1


def _checkout_error() -> str | None:
    try:
        katran.locate()
    except katran.KatranError as e:
        return str(e)
    return None


needs_katran = pytest.mark.skipif(_checkout_error() is not None, reason=f"no Katran checkout: {_checkout_error()}")


# --- the ring and the hashes, as Katran computes them (no root) -------------------------------------

# MurmurHash3_x64_128's first half over (a, b) as 16 little-endian bytes, seed: values from an
# independent implementation (PyPI mmh3 5.3.1, mmh3.hash64(struct.pack('<QQ', a, b), seed, signed=False)[0])
MURMUR = [((0, 0, 0), 0x4BBD1BF27DA918D6), ((1, 42, 0), 0x0B85E5B738EC6BA3),
          ((0xDEADBEEFCAFEBABE, 2718281828, 2307), 0x3945D7269E09CAB6)]


@pytest.mark.parametrize("args,want", MURMUR)
def test_murmur3_matches_an_independent_implementation(args, want):
    assert maglev.murmur3_x64_64(*args) == want


def test_folly_fnv_xors_bytes_as_signed_chars():
    # ASCII: plain FNV-1 (the published FNV-1 32-bit hash of "a" is 0x050c5d7e)
    assert maglev._fnv32_broken(b"a") == 0x050C5D7E
    # a byte >= 0x80 is sign-extended before the XOR (folly's fnv32_buf_BROKEN): not FNV-1's value
    prime_step = (2166136261 * 16777619) & 0xFFFFFFFF
    assert maglev._fnv32_broken(b"\xc6") == prime_step ^ 0xFFFFFFC6 != prime_step ^ 0xC6


def test_equal_weights_spread_within_one_slot():
    """Katran's CHHelpersTest.testMaglevCHSameWeight: 400 reals of weight 1 (hash = i) fill every
    slot, most and fewest slots differ by 1."""
    r = maglev.ring([(i, 1, i) for i in range(400)])
    assert -1 not in r and len(r) == maglev.RING_SIZE
    c = Counter(r)
    assert max(c.values()) - min(c.values()) == 1


def test_ring_edge_cases_follow_maglevhash():
    assert maglev.ring([], 7) == [-1] * 7
    assert maglev.ring([(5, 1, 42)], 7) == [5] * 7                 # one endpoint fills the ring
    c = Counter(maglev.ring([(0, 2, 1000), (1, 1, 2000)], 7))       # MaglevHashTest: 4 vs 3 slots
    assert c[0] > c[1] and c[0] + c[1] == 7
    # endpoints are sorted by hash first, so the order they are given in does not matter
    eps = [(1, 1, 99), (2, 1, 7), (3, 1, 12345)]
    assert maglev.ring(eps) == maglev.ring(eps[::-1])
    assert maglev.ring([(1, 0, 5), (2, 1, 6)], 11) == [2] * 11       # weight 0: left out


def test_weights_count_only_in_the_first_round():
    """MaglevHash (Katran's default) gives a weight-3 real 3 slots in its first turn and one a turn
    after: on 65537 slots 3:1 weights split 32769:32768 (fips3's hash sorts first: 1 + 32767 slots,
    fips2's 3 + 32766); MaglevHashV2 would split 3:1."""
    nums, r = maglev.reals_ring([("198.18.0.2", 3), ("198.18.0.3", 1)])
    c = Counter(r)
    assert nums == [1, 2] and (c[1], c[2]) == (32769, 32768)


# Whole rings as fixed vectors: sha256 of the ring as little-endian i32, first 16 hex digits, made
# by xenobench.agents.maglev at 2f8b6d8 (before the update path's batched writes; the ring code
# itself unchanged since): `hashlib.sha256(struct.pack(f"<{len(r)}i", *r)).hexdigest()[:16]`
RING_VECTORS = [
    ("fips2, fips3 1:1", [("198.18.0.2", 1), ("198.18.0.3", 1)], "5794f4cc6f14bb68"),
    ("fips2, fips3 3:1", [("198.18.0.2", 3), ("198.18.0.3", 1)], "aea1adab61b40ead"),
    # equal weights: the first round's extra slots fall where the alternation would put them
    ("fips2, fips3 128:128", [("198.18.0.2", 128), ("198.18.0.3", 128)], "5794f4cc6f14bb68"),
    ("five reals 1, 2, 1, 4, 8", [("198.18.0.2", 1), ("198.18.0.3", 2), ("198.18.0.4", 1), ("198.18.0.5", 4),
                                  ("10.0.0.1", 8)], "907383f738797c80"),
]


@pytest.mark.parametrize("desc,reals,digest", RING_VECTORS, ids=[v[0] for v in RING_VECTORS])
def test_rings_match_their_recorded_vectors(desc, reals, digest):
    import hashlib
    import struct
    _, r = maglev.reals_ring(reals)
    assert hashlib.sha256(struct.pack(f"<{len(r)}i", *r)).hexdigest()[:16] == digest, desc


# Weighted reals as Katran takes them (any positive uint32 weight, no power-of-two total), each
# set's ring as sha256 of little-endian i32, first 16 hex digits (as RING_VECTORS). The digests were
# made by Katran's own MaglevHash (katran/lib/MaglevHash.cpp, MaglevBase.cpp, MurmurHash3.cpp,
# CHHelpers.cpp at 19f08fec, compiled unmodified by test_ring_equals_katrans_own_maglevhash below)
# and equal xenobench.agents.maglev's ring on every set.
WEIGHTED_SETS = [
    ("three reals of weight 1", [("10.0.0.1", 1), ("10.0.0.2", 1), ("10.0.0.3", 1)], "2790e8c3fe9ecc1f"),
    ("three reals 1, 2, 3", [("10.0.0.1", 1), ("10.0.0.2", 2), ("10.0.0.3", 3)], "71d03bf6d146b976"),
    # 7:5 gives the 3:1 ring of RING_VECTORS: MaglevHash counts weights in its first turn only
    ("two reals 7, 5", [("198.18.0.2", 7), ("198.18.0.3", 5)], "aea1adab61b40ead"),
    ("two reals 100, 1", [("198.18.0.2", 100), ("198.18.0.3", 1)], "a4879bfd25c51720"),
    ("a weight above the ring's 65537 slots", [("198.18.0.2", 1), ("198.18.0.3", 65538), ("198.18.0.4", 1)], "00e618d3d38484c0"),
    ("uint32's largest weight", [("198.18.0.2", 4294967295), ("198.18.0.3", 1)], "c47845649407089a"),
    ("ten reals 1..10", [(f"10.1.0.{i}", i) for i in range(1, 11)], "7c8c427e6ff09ed8"),
    ("forty reals, weights 1..1000", [(f"10.2.{i // 250}.{i % 250 + 1}", (i * 7919) % 1000 + 1) for i in range(40)], "f986276539c4ea2c"),
]


def _digest(r: list[int]) -> str:
    import hashlib
    import struct
    return hashlib.sha256(struct.pack(f"<{len(r)}i", *r)).hexdigest()[:16]


@pytest.mark.parametrize("desc,reals,digest", WEIGHTED_SETS, ids=[v[0] for v in WEIGHTED_SETS])
def test_weighted_rings_match_katrans_recorded_rings(desc, reals, digest):
    _, r = maglev.reals_ring(reals)
    assert _digest(r) == digest, desc


# Katran's ring code (C++, no folly) beside a driver of our own that feeds it endpoints as
# Vip::getEndpoints does (weight 0 left out, sorted by hash) and prints the ring.
ORACLE_SOURCES = ("MaglevHash.cpp", "MaglevBase.cpp", "MaglevHashV2.cpp", "CHHelpers.cpp", "MurmurHash3.cpp")
ORACLE_DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "katran/lib/CHHelpers.h"
int main(int argc, char **argv) {
  unsigned long size = argc > 1 ? strtoul(argv[1], nullptr, 10) : katran::kDefaultChRingSize;
  std::vector<katran::Endpoint> eps;
  unsigned long num, weight;
  unsigned long long hash;
  while (scanf("%lu %lu %llu", &num, &weight, &hash) == 3)
    eps.push_back({(uint32_t)num, (uint32_t)weight, (uint64_t)hash});
  auto ring = katran::CHFactory::make(katran::HashFunction::Maglev)->generateHashRing(eps, size);
  for (int v : ring) printf("%d\n", v);
}
"""


def _ring_sources() -> Path | None:
    try:
        root = katran.locate()
    except katran.KatranError:
        return None
    return root if all((root / "katran/lib" / f).is_file() for f in ORACLE_SOURCES) else None


@pytest.fixture(scope="module")
def maglevhash(tmp_path_factory):
    """Katran's MaglevHash compiled unmodified from the located checkout, in a temporary directory
    outside the repository: endpoints [(num, weight, hash)] -> its ring."""
    root = _ring_sources()
    if root is None:
        pytest.skip("the located Katran checkout has no katran/lib ring sources (MaglevHash.cpp ...): point "
                    "XENOBENCH_KATRAN_DIR at a full clone of facebookincubator/katran")
    if shutil.which("g++") is None:
        pytest.skip("no g++ to compile Katran's MaglevHash")
    d = tmp_path_factory.mktemp("maglevhash")
    (d / "driver.cpp").write_text(ORACLE_DRIVER)
    exe = d / "maglevhash"
    subprocess.run(["g++", "-std=c++17", "-O2", f"-I{root}", str(d / "driver.cpp"),
                    *[str(root / "katran/lib" / f) for f in ORACLE_SOURCES], "-o", str(exe)], check=True,
                   capture_output=True)

    def ring(endpoints, ring_size=maglev.RING_SIZE):
        eps = sorted((e for e in endpoints if e[1] > 0), key=lambda e: e[2])
        out = subprocess.run([str(exe), str(ring_size)], input="".join(f"{n} {w} {h}\n" for n, w, h in eps),
                             capture_output=True, text=True, check=True, timeout=60).stdout
        return [int(x) for x in out.split()]
    return ring


@pytest.mark.parametrize("desc,reals,digest", WEIGHTED_SETS, ids=[v[0] for v in WEIGHTED_SETS])
def test_ring_equals_katrans_own_maglevhash(maglevhash, desc, reals, digest):
    eps = [(n, w, maglev.address_hash(a)) for n, (a, w) in enumerate(reals, 1)]
    want = maglevhash(eps)
    assert maglev.ring(eps) == want, desc
    assert _digest(want) == digest, desc


def test_ring_equals_katrans_own_maglevhash_on_small_rings(maglevhash):
    """Small prime rings, where the first round's weights and the ring's end meet often."""
    import random
    rnd = random.Random(2307)
    for size in (7, 11, 13, 101, 1009):
        for _ in range(20):
            eps = [(n, rnd.randint(1, 2 * size), rnd.getrandbits(64)) for n in range(1, rnd.randint(2, 9))]
            assert maglev.ring(eps, size) == maglevhash(eps, size), (size, eps)


def test_real_numbers_start_at_1_and_shares_sum_to_1():
    rs, r = plan(_write(BACKENDS), REALS)
    assert [(x["name"], x["num"], x["address"]) for x in rs] == [("fips2", 1, "198.18.0.2"), ("fips3", 2, "198.18.0.3")]
    assert set(r) == {1, 2} and sum(x["share"] for x in rs) == pytest.approx(1.0)


# (description, weights of fips2, fips3, fips4): accepted as Katran takes them, no power-of-two total
KATRAN_WEIGHTS = [("three reals of weight 1 (Katran's tester)", [1, 1, 1]), ("1, 2, 3", [1, 2, 3]),
                  ("7, 5, 1", [7, 5, 1]), ("uint32's largest, 1, 1", [4294967295, 1, 1])]


@pytest.mark.parametrize("desc,weights", KATRAN_WEIGHTS, ids=[k[0] for k in KATRAN_WEIGHTS])
def test_katran_takes_any_positive_weights(desc, weights):
    names = ["fips2", "fips3", "fips4"]
    doc = {"backends": [{"name": n, "mac_address": f"02:00:00:00:0{i + 2}:00", "weight": w}
                        for i, (n, w) in enumerate(zip(names, weights))]}
    reals = {n: f"198.18.0.{i + 2}" for i, n in enumerate(names)}
    rs, r = plan(_write(doc), reals)
    assert [x["weight"] for x in rs] == weights, desc
    _, want = maglev.reals_ring([(reals[n], w) for n, w in zip(names, weights)])
    assert r == want and len(r) == maglev.RING_SIZE and -1 not in r
    assert sum(x["share"] for x in rs) == pytest.approx(1.0)
    assert sum(round(x["share"] * maglev.RING_SIZE) for x in rs) == maglev.RING_SIZE


def test_katran_refuses_a_weight_katran_cannot_hold():
    doc = {"backends": [{"name": "fips2", "mac_address": "02:00:00:00:02:00", "weight": 4294967296}]}
    f = _write(doc)
    with pytest.raises(Exception, match=rf"^Failed to load backends {f}: backends\[0\].weight: 4294967296 is not an "
                                         r"integer in 1..4294967295$"):
        plan(f, REALS)


def test_a_backend_without_address_is_refused_by_name():
    with pytest.raises(Exception, match=r"no address for fips3 \(give --real NAME=IPV4"):
        plan(_write(BACKENDS), {"fips2": "198.18.0.2"})


def _write(doc) -> Path:
    import tempfile
    f = Path(tempfile.mkdtemp(prefix="xbk-")) / "b.json"
    f.write_text(json.dumps(doc))
    return f


# --- locating and building --------------------------------------------------------------------------

def test_missing_checkout_names_where_it_looked_and_the_tested_commit(tmp_path, monkeypatch):
    monkeypatch.setenv(katran.ENV, str(tmp_path / "nowhere"))
    with pytest.raises(katran.KatranError) as e:
        katran.locate()
    msg = str(e.value)
    assert msg.startswith(f"Failed to locate a Katran checkout: {tmp_path / 'nowhere'} (from ${katran.ENV}")
    assert katran.TESTED_COMMIT in msg and "katran/lib/bpf/balancer.bpf.c" in msg


def test_checkout_from_the_config_key(tmp_path, monkeypatch, local_cfg):
    import dataclasses
    monkeypatch.delenv(katran.ENV, raising=False)
    raw = dict(local_cfg.raw, katran={"checkout": str(tmp_path), "gateway_mac": GW})
    cfg = dataclasses.replace(local_cfg, raw=raw)
    with pytest.raises(katran.KatranError, match=rf"{tmp_path} \(from katran.checkout of {local_cfg.path}, default ../shared/katran"):
        katran.locate(cfg)


@needs_katran
def test_build_is_keyed_by_content_outside_the_checkout(tmp_path, monkeypatch):
    src = katran.locate()
    copy = tmp_path / "katran"
    for d in katran.SOURCE_DIRS:
        shutil.copytree(src / d, copy / d)
    monkeypatch.setenv(katran.ENV, str(copy))
    monkeypatch.setattr(katran, "BUILD_ROOT", tmp_path / "build")
    a = katran.build()
    assert a.balancer.is_file() and a.decap_chain.is_file() and a.dir.parent == tmp_path / "build"
    mtime = a.balancer.stat().st_mtime_ns
    assert katran.build().balancer.stat().st_mtime_ns == mtime          # unchanged: reused
    h = copy / "katran/lib/bpf/balancer_consts.h"
    h.write_text(h.read_text() + "\n/* changed */\n")
    b = katran.build()
    assert b.dir != a.dir and b.balancer.is_file() and not a.dir.exists()   # rebuilt, the old one gone
    assert not list(copy.rglob("*.o"))                                    # nothing written into the checkout


# --- the real balancer on a fixture table (BPF_PROG_TEST_RUN) ---------------------------------------

@pytest.fixture(scope="module")
def balancer(tmp_path_factory):
    if not IS_ROOT:
        pytest.skip("needs root: bpftool prog run")
    if _checkout_error():
        pytest.skip(_checkout_error())
    from xenobench.testbed import ensure_bpffs, unmount_bpffs_if_unused
    mounted = ensure_bpffs()
    tmp = tmp_path_factory.mktemp("katran")
    pindir = Path("/sys/fs/bpf") / f"{os.environ.get('XENOBENCH_NS_PREFIX', 'xbt-')}katran-unit-{tmp.name[-10:]}"
    b = katran.build()
    load_pinned(b.balancer, pindir, "katran.build")
    bfile = tmp / "b.json"
    bfile.write_text(json.dumps(BACKENDS))
    fill_maps(pindir, bfile, vip=VIP, port=53, proto="udp", gateway_mac=GW, reals=REALS)
    _, ring = plan(bfile, REALS)

    def run(data: bytes, prog: Path = pindir / "progs" / "balancer_ingress"):
        (tmp / "in").write_bytes(data)
        p = bpftool("prog", "run", "pinned", str(prog), "data_in", str(tmp / "in"), "data_out", str(tmp / "out"))
        rv = int(re.search(r"Return value: (\d+)", p.stdout + p.stderr).group(1))
        return XDP[rv], (tmp / "out").read_bytes()

    yield run, ring, pindir, bfile, b
    shutil.rmtree(pindir, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused()


def udp(src="198.18.0.1", sport=1234, dst=VIP, dport=53, payload=b"q" * 22, **ip) -> bytes:
    return bytes(Ether(src=CLIENT, dst=LB_IN) / IP(src=src, dst=dst, **ip) / UDP(sport=sport, dport=dport) / payload)


def real_for(ring, src: str, sport: int, dport: int = 53) -> str:
    num = ring[maglev.flow_slot(src, sport, dport)]
    return list(REALS.values())[num - 1]


def encapsulated(frame: bytes, real: str) -> bytes:
    """IPIP (RFC 2003) to the real, to the gateway MAC from the MAC the frame was sent to, TTL 64,
    id 0, the inner TOS; outer source 172.16.<src[2] ^ sport low byte>.<src[3] ^ sport high byte>
    (katran/lib/bpf/encap_helpers.h create_encap_ipv4_src with IPIP_V4_PREFIX 172.16.0.0/16)."""
    eth, inner = Ether(frame), frame[14:]
    src = ipaddress.IPv4Address(eth[IP].src).packed
    sport = eth[IP].payload.sport
    outer_src = f"172.16.{src[2] ^ (sport & 0xFF)}.{src[3] ^ (sport >> 8)}"
    return bytes(Ether(dst=GW, src=eth.dst) / IP(src=outer_src, dst=real, ttl=64, id=0, tos=eth[IP].tos, proto=4)
                 / inner)


def echo_reply(frame: bytes) -> bytes:
    e = Ether(frame)
    return bytes(Ether(src=e.dst, dst=e.src) / IP(src=e[IP].dst, dst=e[IP].src, ttl=64, id=e[IP].id)
                 / ICMP(type=0, id=e[ICMP].id, seq=e[ICMP].seq) / bytes(e[ICMP].payload))


def big_udp() -> bytes:
    return udp(payload=b"x" * (1515 - 42))


def fixtures(ring):
    """(description, input frame, expected verdict, expected output frame)."""
    hit = udp()
    tos = udp(src="198.18.7.9", sport=53000, tos=0x28)
    icmp = bytes(Ether(src=CLIENT, dst=LB_IN) / IP(src="198.18.0.1", dst=VIP, id=7) / ICMP(id=0x1234, seq=1) / b"ping")
    rows = [
        ("UDP to the VIP: IPIP to the real the ring names", hit, "XDP_TX", encapsulated(hit, real_for(ring, "198.18.0.1", 1234))),
        ("inner TOS copied to the outer header", tos, "XDP_TX", encapsulated(tos, real_for(ring, "198.18.7.9", 53000))),
        ("UDP to another address passes", udp(dst="198.18.0.5"), "XDP_PASS", udp(dst="198.18.0.5")),
        ("UDP to the VIP on another port passes (no port-0 VIP)", udp(dport=54), "XDP_PASS", udp(dport=54)),
        ("TCP to the VIP:53 passes (the VIP is UDP)",
         bytes(Ether(src=CLIENT, dst=LB_IN) / IP(src="198.18.0.1", dst=VIP) / TCP(sport=1234, dport=53)), "XDP_PASS",
         bytes(Ether(src=CLIENT, dst=LB_IN) / IP(src="198.18.0.1", dst=VIP) / TCP(sport=1234, dport=53))),
        ("first fragment to the VIP is dropped", udp(flags="MF"), "XDP_DROP", udp(flags="MF")),
        ("later fragment to the VIP is dropped", udp(frag=100), "XDP_DROP", udp(frag=100)),
        ("IPv4 with options is dropped", udp(options=b"\x01\x01\x01\x00"), "XDP_DROP", udp(options=b"\x01\x01\x01\x00")),
        ("UDP header cut short is dropped", udp()[:14 + 20 + 4], "XDP_DROP", udp()[:14 + 20 + 4]),
        ("IPv4 header cut short is dropped", udp()[:14 + 10], "XDP_DROP", udp()[:14 + 10]),
        ("Ethernet header only (IPv4 type) is dropped", udp()[:14], "XDP_DROP", udp()[:14]),
        ("frame over 1514 bytes to the VIP is dropped", big_udp(), "XDP_DROP", big_udp()),
        ("ICMP echo to any address is answered in place", icmp, "XDP_TX", echo_reply(icmp)),
        ("IPv6 UDP passes (no IPv6 VIP)",
         bytes(Ether(src=CLIENT, dst=LB_IN) / IPv6(src="2001:db8::1", dst="2001:db8::64") / UDP(sport=1, dport=53)),
         "XDP_PASS",
         bytes(Ether(src=CLIENT, dst=LB_IN) / IPv6(src="2001:db8::1", dst="2001:db8::64") / UDP(sport=1, dport=53))),
        ("IPv6 fragment is dropped",
         bytes(Ether(src=CLIENT, dst=LB_IN) / IPv6(src="2001:db8::1", dst="2001:db8::64") / IPv6ExtHdrFragment()
               / UDP(sport=1, dport=53)), "XDP_DROP",
         bytes(Ether(src=CLIENT, dst=LB_IN) / IPv6(src="2001:db8::1", dst="2001:db8::64") / IPv6ExtHdrFragment()
               / UDP(sport=1, dport=53))),
        ("ARP passes", bytes(Ether(src=CLIENT, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="198.18.0.1", pdst=VIP)), "XDP_PASS",
         bytes(Ether(src=CLIENT, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="198.18.0.1", pdst=VIP))),
    ]
    return rows


FIXTURE_IDS = ["vip-hit", "tos", "other-dst", "other-port", "tcp", "mf", "frag", "options", "short-udp", "short-ip",
               "eth-only", "too-big", "icmp-echo", "ipv6", "ipv6-frag", "arp"]


@pytest.mark.parametrize("i", range(len(FIXTURE_IDS)), ids=FIXTURE_IDS)
def test_balancer_fixture_table(balancer, i):
    run, ring, *_ = balancer
    desc, frame, verdict, out = fixtures(ring)[i]
    got, data = run(frame)
    assert (got, data.hex()) == (verdict, out.hex()), desc


def test_the_ring_in_ch_rings_is_the_models(balancer):
    """fill_maps writes the ring with one batched update (BPF_MAP_UPDATE_BATCH): slots across the
    ring read back as the model's, and the slot after it (the next VIP's first) stays empty."""
    import struct
    _, ring, pindir, *_ = balancer
    for slot in (0, 1, 2, 4097, 32768, 65535, 65536, 65537):
        out = bpftool("-j", "map", "lookup", "pinned", str(pindir / "maps" / "ch_rings"),
                      "key", *[str(x) for x in struct.pack("<I", slot)]).stdout
        got = int.from_bytes(bytes(int(x, 16) for x in json.loads(out)["value"]), "little")
        assert got == (ring[slot] if slot < maglev.RING_SIZE else 0), slot


def test_every_flow_goes_to_the_real_its_ring_slot_names(balancer, tmp_path):
    """64 flows: the program's choice matches the model's slot for each (a wrong flow hash would
    miss about half), and reals_stats counts them per real."""
    run, ring, pindir, bfile, _ = balancer
    st0 = read_stats(pindir, bfile, "test")
    before = {b["name"]: b["packets"] for b in st0["backends"]}
    want = Counter()
    for k in range(64):
        src, sport = f"198.19.{k // 8}.{k * 37 % 256}", 1024 + k * 811 % 60000
        frame = udp(src=src, sport=sport)
        verdict, data = run(frame)
        real = real_for(ring, src, sport)
        assert (verdict, data.hex()) == ("XDP_TX", encapsulated(frame, real).hex()), (src, sport)
        want[[n for n, a in REALS.items() if a == real][0]] += 1
    st1 = read_stats(pindir, bfile, "test")
    after = {b["name"]: b["packets"] for b in st1["backends"]}
    assert {n: after[n] - before[n] for n in after} == dict(want) and set(want) == set(REALS)
    # 64 new flows: 64 misses of this CPU's own connection table, none through the fallback table
    assert (st1["lru_miss"] - st0["lru_miss"], st1["fallback_lru"]) == (64, 0)
    # a new flow twice on one CPU (the tables are per CPU): one miss, then a hit
    (tmp_path / "in").write_bytes(udp(src="198.19.99.1", sport=999))
    for _ in range(2):
        p = subprocess.run(["taskset", "-c", "0", "bpftool", "prog", "run", "pinned", str(pindir / "progs" / "balancer_ingress"),
                            "data_in", str(tmp_path / "in")], capture_output=True, text=True)
        assert "Return value: 3" in p.stdout + p.stderr
    assert read_stats(pindir, bfile, "test")["lru_miss"] == st1["lru_miss"] + 1


def test_three_equal_reals_in_katrans_balancer_get_the_flows_their_ring_names(balancer, tmp_path):
    """Katran's tester's shape, three reals of weight 1 (a total no class split takes), filled into
    the real balancer by the agent's fill_maps: 96 flows each go to the real the ring names, and all
    three get flows."""
    from xenobench.testbed import ensure_bpffs
    ensure_bpffs()
    b = balancer[4]
    reals = {"fips2": "198.18.0.2", "fips3": "198.18.0.3", "fips4": "198.18.0.4"}
    bfile = tmp_path / "three.json"
    bfile.write_text(json.dumps({"backends": [{"name": n, "mac_address": f"02:00:00:00:0{i + 2}:00", "weight": 1}
                                              for i, n in enumerate(reals)]}))
    pindir = Path(f"{balancer[2]}-three")
    load_pinned(b.balancer, pindir, "katran.build")
    try:
        info = fill_maps(pindir, bfile, vip=VIP, port=53, proto="udp", gateway_mac=GW, reals=reals)
        assert [(r["name"], r["weight"]) for r in info["reals"]] == [(n, 1) for n in reals]
        _, ring = plan(bfile, reals)
        got = Counter()
        for k in range(96):
            src, sport = f"198.20.{k // 16}.{k * 53 % 256}", 2000 + k * 613 % 60000
            frame = udp(src=src, sport=sport)
            (tmp_path / "in").write_bytes(frame)
            p = bpftool("prog", "run", "pinned", str(pindir / "progs" / "balancer_ingress"), "data_in",
                        str(tmp_path / "in"), "data_out", str(tmp_path / "out"))
            assert "Return value: 3" in p.stdout + p.stderr, (src, sport)
            real = list(reals.values())[ring[maglev.flow_slot(src, sport, 53)] - 1]
            assert (tmp_path / "out").read_bytes().hex() == encapsulated(frame, real).hex(), (src, sport)
            got[real] += 1
        assert set(got) == set(reals.values()) and sum(got.values()) == 96
    finally:
        shutil.rmtree(pindir, ignore_errors=True)


def test_katran_decap_in_front_restores_the_inner_frame(balancer, tmp_path):
    """The decap chain (Katran's decap.bpf.c + our tail call) turns the balancer's output back into
    the client's IP packet behind the outer Ethernet header, and passes it on (empty next slot)."""
    run, ring, pindir, _, b = balancer
    chain = Path(str(pindir) + "-decap")
    load_pinned(b.decap_chain, chain, "katran.build")
    try:
        frame = udp(src="198.18.3.3", sport=4242)
        _, enc = run(frame)
        verdict, data = run(enc, chain / "progs" / katran.DECAP_CHAIN_PROG)
        assert (verdict, data.hex()) == ("XDP_PASS", (enc[:14] + frame[14:]).hex())
        plain = udp(dst="198.18.0.2")
        assert run(plain, chain / "progs" / katran.DECAP_CHAIN_PROG) == ("XDP_PASS", plain)
        st = percpu_sum(chain / "maps" / "decap_counters", "<QQQ")
        assert st[0] == (1, 0, 1)   # decap_v4, decap_v6, total: the IPIP frame only
    finally:
        shutil.rmtree(chain, ignore_errors=True)


def test_the_probe_flow_reaches_the_dns_backend_through_the_real_balancer(balancer, local_cfg):
    """rtt.probe_flow through the eBPF LB (the class rule) and Katran (its ring): the probes'
    address is in the DNS backend's class and their fixed source port makes Katran's ring send them
    there too; through the real program."""
    from xenobench.backends import load_backends
    from xenobench.rtt import probe_flow
    run, ring, *_ = balancer
    tb = Testbed(local_cfg)
    lbs = [get_lb("ebpf", tb), get_lb("katran", tb)]
    flow = probe_flow(local_cfg, "fips2", lbs)
    assert flow["through"] == ["ebpf", "katran"]
    assert flow["sport"] >= local_cfg.section("dns")["prober"]["source_port"]
    assert load_backends(local_cfg.service.backends).backend_for_source(flow["src"]).name == "fips2"
    frame = udp(src=flow["src"], sport=flow["sport"])
    assert run(frame) == ("XDP_TX", encapsulated(frame, REALS["fips2"]))
    other = probe_flow(local_cfg, "fips3", lbs)
    frame = udp(src=other["src"], sport=other["sport"])
    assert run(frame) == ("XDP_TX", encapsulated(frame, REALS["fips3"]))


def test_probe_flow_steps_the_port_until_every_lb_agrees(local_cfg, monkeypatch):
    """From dns.prober.source_port up: the first port whose flow Katran's ring sends to the backend,
    from an address of its class (the eBPF LB's rule); each port tried before it missed from every
    such address. Katran's answer is the ring's (flow_real on its plan)."""
    from xenobench.backends import load_backends
    from xenobench.lb.katran import flow_real, ring_plan
    from xenobench.rtt import probe_flow
    tb = Testbed(local_cfg)
    lbs = [get_lb("ebpf", tb), get_lb("katran", tb)]
    plan = ring_plan(local_cfg)
    ci = local_cfg.role("client").iface()
    bs = load_backends(local_cfg.service.backends)
    fits = [str(a.ip) for a in (ci.ip, *ci.extra_ips) if bs.backend_for_source(str(a.ip)).name == "fips2"]
    first = local_cfg.section("dns")["prober"]["source_port"]
    flow = probe_flow(local_cfg, "fips2", lbs)
    for sport in range(first, flow["sport"]):
        assert all(flow_real(plan, a, sport, 53) == "fips3" for a in fits), sport
    assert flow_real(plan, flow["src"], flow["sport"], 53) == "fips2"
    # with no flow reaching it through Katran (a ring that sends everything to fips3), refused by name
    monkeypatch.setattr(type(lbs[1]), "backend_of", lambda self, flow, backends: "fips3")
    with pytest.raises(Exception, match=rf"Failed to choose the probes' flow: no flow from 198\.18\.0\.1, .* with a "
                                        rf"source port from {first} \(dns.prober.source_port in .*\) to \d+ reaches "
                                        r"fips2 through every LB of ebpf, katran: katran sends none of them to fips2"):
        probe_flow(local_cfg, "fips2", lbs)


def test_the_prober_sends_every_query_from_its_fixed_port(tmp_path):
    """--sport: one flow; a UDP responder on loopback sees every query from that port."""
    import socket
    import threading
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.settimeout(5)
    seen = []

    def answer():
        import dns.message
        for _ in range(5):
            data, addr = srv.recvfrom(512)
            seen.append(addr[1])
            srv.sendto(dns.message.make_response(dns.message.from_wire(data)).to_wire(), addr)
    t = threading.Thread(target=answer)
    t.start()
    p = subprocess.run([sys.executable, "-m", "xenobench.agents.prober", "run", "--src", "127.0.0.1", "--sport", "10077",
                        "--dst", "127.0.0.1", "--port", str(srv.getsockname()[1]), "--qname", "probe.example.com.",
                        "--count", "5", "--rate", "100", "--out", str(tmp_path / "r.jsonl")],
                       capture_output=True, text=True, timeout=60)
    t.join(10)
    srv.close()
    assert p.returncode == 0, p.stderr
    assert seen == [10077] * 5 and json.loads(p.stdout.splitlines()[-1])["sport"] == 10077


# --- live on the namespace testbed ------------------------------------------------------------------

SEND = """
import socket, sys, json
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
iface, src_mac, dst_mac, dst, flows = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sk:
    sk.bind((iface, 0))
    for s, sp in flows:
        sk.send(bytes(Ether(src=src_mac, dst=dst_mac) / IP(src=s, dst=dst) / UDP(sport=sp, dport=53) / b"x"))
"""


def udp_in(node) -> int:
    lines = [ln.split() for ln in node.run(["cat", "/proc/net/snmp"]).stdout.splitlines() if ln.startswith("Udp:")]
    row = dict(zip(lines[0][1:], map(int, lines[1][1:])))
    return row["InDatagrams"] + row["NoPorts"]


def xdp_of(testbed, ns: str, dev: str) -> str | None:
    from xenobench.nodes import NETNS_RUN_DIR
    import subprocess
    p = subprocess.run(["nsenter", f"--net={NETNS_RUN_DIR / ns}", "--", "ip", "-j", "link", "show", "dev", dev],
                       capture_output=True, text=True, check=True)
    xdp = json.loads(p.stdout)[0].get("xdp")
    return xdp["prog"]["name"] if xdp else None


def attachments(testbed) -> dict:
    cfg, p = testbed.cfg, testbed.cfg.prefix
    return {"lb": xdp_of(testbed, f"{p}fips5", "p0"),
            "gateway_port": xdp_of(testbed, testbed.switch_ns, testbed.switch_port("fips5", "p0")),
            **{b.name: xdp_of(testbed, f"{p}{b.name}", b.iface().name) for b in cfg.backend_nodes()}}


@needs_root
@needs_katran
def test_live_hidden_address_check_and_nothing_left_behind(testbed):
    lb = get_lb("katran", testbed)
    for b in ("fips2", "fips3"):  # the session testbed's idle state (an earlier test may have left a sink released)
        testbed.restore_backend_sink(b)
    idle = attachments(testbed)
    assert idle == {"lb": None, "gateway_port": "sw_fastpath", "fips2": "backend_sink", "fips3": "backend_sink"}
    nodes = {n: testbed.node(n) for n in REALS}
    res = lb.start()
    try:
        assert res["mode"] == "native"
        assert attachments(testbed) == {"lb": "balancer_ingres", "gateway_port": "l3_gateway",  # names: 15 chars
                                        "fips2": katran.DECAP_CHAIN_PROG, "fips3": katran.DECAP_CHAIN_PROG}
        _, ring = plan(lb.backends_file(), REALS)
        flows = [(f"198.18.{1 + k // 200}.{k % 200 + 1}", 1024 + (k * 7919) % 60000) for k in range(400)]
        want = Counter(real_for(ring, s, sp) for s, sp in flows)
        want = {n: want[a] for n, a in REALS.items()}
        before = {n: udp_in(node) for n, node in nodes.items()}
        ci, cn = testbed.cfg.role("client").iface(), testbed.node("fips1")
        cn.run([sys.executable, "-c", SEND, ci.name, ci.mac, testbed.cfg.lb_mac, VIP, json.dumps(flows)])
        time.sleep(0.5)
        got = {n: udp_in(node) - before[n] for n, node in nodes.items()}
        st = lb.stats()
        # every frame arrived at (and only at) the backend the ring names, decapsulated by Katran's decap
        assert got == want
        assert {b["name"]: b["packets"] for b in st["backends"]} == want
        assert lb.forwarded() == sum(want.values())  # the interleaved designs' one-map read
        assert st["xdp_tx"] == 400 and st["miss"] == 0 and st["tx_error"] == 0 and st["fallback_lru"] == 0
        from xenobench.fabric import NamespaceFabric
        fab = NamespaceFabric(testbed)
        assert {n: s["decap_v4"] for n, s in fab.decap_stats().items()} == want
        assert fab.gateway_stats()["routed"] == 400
        # the split is the ring's: each backend's count within 4 sigma of its share of 400
        rs, _ = plan(lb.backends_file(), REALS)
        for r in rs:
            sigma = (400 * r["share"] * (1 - r["share"])) ** 0.5
            assert abs(want[r["name"]] - 400 * r["share"]) <= 4 * sigma
    finally:
        assert lb.stop() is True
    assert attachments(testbed) == idle
    assert not (testbed.bpffs_dir / "katran").exists() and not list((testbed.bpffs_dir / "fabric").glob("*"))


@needs_root
@needs_katran
@pytest.mark.parametrize("server", ["xdp", "python", "bind9"])
def test_live_dns_answers_through_katran_by_direct_server_return(testbed, tmp_path, server):
    """Both backends behind Katran (each about half its ring): the probes' one flow (rtt.probe_flow:
    fixed source port, chosen by the ring) reaches the DNS server through the gateway and Katran's
    decap in front of it, every one of them, and answers go straight back to the client."""
    from xenobench.dns import start_server, stop_server
    from xenobench.rtt import probe
    lb = get_lb("katran", testbed)
    start_server(testbed, server)
    try:
        lb.start()
        try:
            st0 = lb.stats()
            s = probe(testbed, count=20, rate_qps=200, out=tmp_path / "p.jsonl", capture=False,
                      through=("xenoflow", "katran"))
            st1 = lb.stats()
        finally:
            assert lb.stop() is True
    finally:
        stop_server(testbed, server)
    assert s["n"] == 20 and s.get("lost", 0) == 0 and s["flow_through"] == ["xenoflow", "katran"]
    split = lb.split_record(st0, st1)
    assert split["packets"] == {"fips2": 20, "fips3": 0} and split["by"] == "flow hash" and split["measured"] is True
    assert split["ring_share"] == {r["name"]: round(r["share"], 4) for r in plan(lb.backends_file(), REALS)[0]}
    assert xdp_of(testbed, f"{testbed.cfg.prefix}fips2", "eth0") == "backend_sink"


@needs_root
@needs_katran
def test_live_ipip_probe_to_each_real_arrives_decapsulated(testbed):
    """testbed check's Katran rows: an IPIP frame from the LB node to the gateway MAC reaches each
    real, decapsulated there; the fabric is set up for the check and gone after it. Without the
    decap in front, the backend sees the frame still encapsulated, and the row says so."""
    from xenobench.fabric import NamespaceFabric
    for b in ("fips2", "fips3"):
        testbed.restore_backend_sink(b)
    idle = attachments(testbed)
    rows = testbed.check_ipip()
    assert [(ok, d.split(" (")[0]) for d, ok, _ in rows] == [(True, "IPIP to fips2"), (True, "IPIP to fips3")], rows
    assert all(detail.startswith("received ") for _, _, detail in rows)
    assert attachments(testbed) == idle
    fab = NamespaceFabric(testbed)
    fab.gateway_up()   # the gateway routes, but no backend decapsulates
    try:
        _, ok, detail = testbed._check_arrives(
            testbed.node("fips5"), testbed.cfg.nodes["fips2"], "no decap",
            ["--iface", "p0", "--src-mac", LB_IN, "--dst-mac", GW, "--src-ip", "198.18.0.1", "--ipip-to", "198.18.0.2"])
    finally:
        fab.gateway_down()
    assert ok is False and detail == "still encapsulated: IPIP from 172.16.0.1 to 198.18.0.2 arrived, not decapsulated on eth0"
    assert attachments(testbed) == idle


def test_report_sums_the_measured_hash_split_per_point():
    """report: Katran's measured split per experiment, point and LB, from the trials' and paired
    blocks' lb_split (summed over valid trials), beside the ring's shares; class-based LBs (no
    lb_split) and invalid trials are left out."""
    from xenobench.report import _hash_split_rows
    ring = {"fips2": 0.5, "fips3": 0.5}

    def block(lb, p2, p3):
        return {"lb": lb, "lb_split": {"by": "flow hash", "measured": True, "packets": {"fips2": p2, "fips3": p3},
                                       "ring_share": ring}}
    trials = [
        (None, {"experiment": "rtt_load", "valid": True, "point": {"level_pps": 100000, "split": "50/50"},
                "outputs": {"facts": {"lb": "none"}, "blocks": [block("katran", 30, 70), {"lb": "xenoflow"},
                                                                 block("katran", 10, 90)]}}),
        (None, {"experiment": "rtt_load", "valid": True, "point": {"level_pps": 100000, "split": "50/50"},
                "outputs": {"facts": {"lb": "none"}, "blocks": [block("katran", 60, 40)]}}),
        (None, {"experiment": "rtt_load", "valid": False, "point": {"level_pps": 100000, "split": "50/50"},
                "outputs": {"blocks": [block("katran", 1000, 0)]}}),
        (None, {"experiment": "rtt", "valid": True, "point": {"server": "xdp"},
                "outputs": {"facts": {"lb": "katran"}, "lb_split": block("katran", 20, 0)["lb_split"]}}),
    ]
    assert _hash_split_rows(trials) == [
        ["rtt", "idle", "katran", "fips2 20, fips3 0", "fips2 100.0 %, fips3 0.0 %", "fips2 50.0 %, fips3 50.0 %", 1],
        ["rtt_load", "split 50/50, 100 kpps", "katran", "fips2 100, fips3 200", "fips2 33.3 %, fips3 66.7 %",
         "fips2 50.0 %, fips3 50.0 %", 3]]


def test_rtt_under_load_with_katran_says_its_split_is_by_hash(tmp_path):
    """The figure of a hash-based LB captions its splits as the profile's classes, not what each
    backend got; a class-based LB's figure keeps its split captions."""
    from xenobench.plots import hash_split_note, rtt_under_load
    assert hash_split_note("katran").startswith("Katran splits by flow hash, not by class")
    assert hash_split_note("ebpf") is None and hash_split_note("xenoflow") is None
    d = tmp_path / "res"
    d.mkdir()
    head = ("testbed,experiment,point,lb,server,payload_bytes,frame_bytes,offered_pps,measured_pps,repetition,split,"
            "background_pps,metric,value,unit,source\n")
    (d / "rtt_summary.csv").write_text(head + "".join(
        f"fx,rtt_load,level_pps-{bg}_split-{sp},katran,xdp,,,,,1,{sp},{bg},rtt_{k}_us,{15 + dv},us,fixture\n"
        for sp, bg in (("none", 0), ("50/50", 100000)) for k, dv in (("median", 0), ("p25", -1), ("p75", 1))))
    s = rtt_under_load(d, tmp_path / "f", "fx")
    assert set(s) == {"50/50"} and (tmp_path / "f" / "rtt_under_load.png").stat().st_size > 1000
