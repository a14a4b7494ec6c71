"""The wire reference LB (switch/wire.bpf.c, xenobench/agents/wire_lb.py, xenobench/lb/wire.py):
frame fixtures through BPF_PROG_TEST_RUN (xenobench.bpftest: bpftool prog run, real kernel, no network), the layouts
its loader packs against the object's BTF, its refusals, and a live run on the namespace testbed
where every frame reaches the backend the LBs' class split picks and the counters agree exactly.

Fixture frames are built here with scapy (the command that makes them is the code below); each
row: description, input frame, expected verdict, expected output frame."""

import json
import re
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from xenobench import bpftest
from xenobench.agents.bpf import load_pinned, map_update, map_update_batch
from xenobench.agents.wire_lb import CLASSES, OBJ, class_table, config_bytes, read_stats
from xenobench.backends import load_backends
from xenobench.counters import diff, snapshot
from xenobench.errors import BackendsError, ConfigError
from xenobench.lb import KINDS, get_lb
from xenobench.testbed import SINK_OBJ, ensure_bpffs, unmount_bpffs_if_unused
from xenobench.testbed.switch import SINK_ARRIVAL, SINK_ARRIVAL_KEY, SINK_CONFIG

from .conftest import backend_arrivals, needs_root, send_udp

pytestmark = [needs_root, pytest.mark.skipif(not OBJ.exists(), reason="switch/ not built (make -C switch)")]

LB_IN, LB_OUT, BACKEND, BACKEND1 = "02:00:00:00:05:00", "02:00:00:00:05:01", "02:00:00:00:0a:00", "02:00:00:00:0a:01"
# two backends, 2 classes (class_bits 1): an even source's frames go to b0, an odd one's to b1
BACKENDS = {"backends": [{"name": "b0", "mac_address": BACKEND}, {"name": "b1", "mac_address": BACKEND1}]}


def mac(m: str) -> bytes:
    return bytes.fromhex(m.replace(":", ""))


def udp(payload=b"q" * 22, src="198.19.0.16") -> bytes:
    return bytes(Ether(src="02:00:00:00:04:00", dst=LB_IN) / IP(src=src, dst="198.18.0.100")
                 / UDP(sport=1024, dport=53) / payload)


def arp(psrc: str) -> bytes:
    return bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:04:00")
                 / ARP(hwsrc="02:00:00:00:04:00", psrc=psrc, pdst="198.18.0.5"))


@pytest.fixture
def prog(tmp_path):
    """The wire loaded and pinned outside any testbed, its maps filled as the controller does."""
    mounted = ensure_bpffs()
    pindir = Path("/sys/fs/bpf") / f"xbt-wire-{tmp_path.name[-12:]}"
    load_pinned(OBJ, pindir, "make -C switch")
    f = tmp_path / "b.json"
    f.write_text(json.dumps(BACKENDS))
    bs = load_backends(f)
    map_update_batch([(pindir / "maps" / "wire_slots", struct.pack("<I", c), config_bytes(bs.backends[bi].mac, LB_OUT))
                      for c, bi in enumerate(class_table(bs))])
    map_update(pindir / "maps" / "wire_egress", struct.pack("<I", 0), struct.pack("<I", 1))  # lo: never sent to

    yield pindir / "progs" / "wire", pindir, f
    shutil.rmtree(pindir, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused(mounted)


FIXTURES = [  # description, input frame, expected verdict, expected output (None: the input), backend
    ("64 B UDP frame from an even source: class 0, MACs rewritten to b0's, the rest untouched",
     udp(), "XDP_REDIRECT", mac(BACKEND) + mac(LB_OUT) + udp()[12:], 0),
    ("64 B UDP frame from an odd source: class 1, to b1", udp(src="198.19.0.17"), "XDP_REDIRECT",
     mac(BACKEND1) + mac(LB_OUT) + udp(src="198.19.0.17")[12:], 1),
    ("class from the low bits only: .255 is class 1 as for the LBs", udp(src="198.19.1.255"), "XDP_REDIRECT",
     mac(BACKEND1) + mac(LB_OUT) + udp(src="198.19.1.255")[12:], 1),
    ("1514 B frame: the same, no look past the class byte", udp(b"x" * 1472, src="198.19.0.17"), "XDP_REDIRECT",
     mac(BACKEND1) + mac(LB_OUT) + udp(b"x" * 1472, src="198.19.0.17")[12:], 1),
    # an ARP frame's byte 29 is its sender address's second byte (198.[19].0.4): odd, b1
    ("ARP: a wire forwards what it gets, classed by the byte at offset 29", arp("198.19.0.4"), "XDP_REDIRECT",
     mac(BACKEND1) + mac(LB_OUT) + arp("198.19.0.4")[12:], 1),
    ("an Ethernet header and nothing else: no class byte, dropped as malformed", udp()[:14], "XDP_DROP", None, None),
]  # (BPF_PROG_TEST_RUN refuses XDP input shorter than an Ethernet header)


@pytest.mark.parametrize("desc,data,verdict,out,backend", FIXTURES, ids=[f[0][:40] for f in FIXTURES])
def test_frame_fixtures(prog, desc, data, verdict, out, backend):
    wire, pindir, f = prog
    bpftest.check(wire, [bpftest.Fixture(desc, data, verdict, out)])
    st = read_stats(pindir, f, "native")
    assert [b["packets"] for b in st["backends"]] == [int(backend == i) for i in range(2)]
    assert sum(b["bytes"] for b in st["backends"]) == (len(data) if backend is not None else 0)
    assert st["malformed"] == int(backend is None)


@pytest.mark.parametrize("class_bits, weights, slots", [
    (1, None, [0, 1]), (2, None, [0, 1, 0, 1]), (2, (3, 1), [0, 0, 0, 1]), (8, None, [0, 1] * 128)])
def test_class_table_repeats_the_lbs_slots_over_256_classes(tmp_path, class_bits, weights, slots):
    doc = {"backends": [{**b, **({"weight": weights[i]} if weights else {})} for i, b in enumerate(BACKENDS["backends"])],
           "class_bits": class_bits}
    f = tmp_path / "b.json"
    f.write_text(json.dumps(doc))
    bs = load_backends(f)
    table = class_table(bs)
    assert len(table) == CLASSES and list(bs.slots) == slots
    assert all(bs.backends[table[c]] == bs.backend_for_class(c) for c in range(CLASSES))


def btf_struct_size(obj: Path, name: str) -> int:
    raw = subprocess.run(["bpftool", "btf", "dump", "file", str(obj), "format", "raw"],
                         capture_output=True, text=True, check=True).stdout
    return int(re.search(rf"STRUCT '{name}' size=(\d+)", raw).group(1))


def test_map_sizes_are_the_loaders(prog):
    """WIRE_CLASSES entries of wire_slots; wire_stats one more (the malformed count)."""
    _, pindir, _ = prog

    def entries(name):
        return json.loads(subprocess.run(["bpftool", "map", "show", "pinned", str(pindir / "maps" / name), "-j"],
                                         capture_output=True, text=True, check=True).stdout)["max_entries"]
    assert (entries("wire_slots"), entries("wire_stats")) == (CLASSES, CLASSES + 1)


def test_loader_layouts_match_the_objects_btf():
    assert btf_struct_size(OBJ, "wire_config") == len(config_bytes(BACKEND, LB_OUT)) == 12

    assert btf_struct_size(OBJ, "sw_counter") == struct.calcsize("<QQ")
    # the testbed packs net, mask, t0_ns, bucket_ns and reads the arrival records by these layouts
    assert btf_struct_size(SINK_OBJ, "sink_config") == struct.calcsize(SINK_CONFIG) == 24
    assert btf_struct_size(SINK_OBJ, "sink_arrival_key") == struct.calcsize(SINK_ARRIVAL_KEY) == 8
    assert btf_struct_size(SINK_OBJ, "sink_arrival") == struct.calcsize(SINK_ARRIVAL) == 24


def test_wire_is_selectable_like_the_other_lbs(testbed):
    assert "wire" in KINDS
    cmd = get_lb("wire", testbed).start(dry_run=True)["commands"][0]
    assert "xenobench.agents.wire_lb run" in cmd and "--ingress p0 --egress p1" in cmd
    assert "--src-mac 02:00:00:00:05:01" in cmd


def test_bad_backends_file_and_missing_egress_port_start_nothing(testbed, tmp_path):
    lb = get_lb("wire", testbed)
    bad = tmp_path / "b.json"
    bad.write_text('{"backends": [{"name": "x", "mac_address": "02:zz:00:00:00:00"}]}')
    with pytest.raises(BackendsError, match="Failed to"):
        lb.start(bad)
    assert not lb.running() and not lb.pindir.exists()
    one_port = tmp_path / "one.yaml"
    one_port.write_text(f"extends: {testbed.cfg.path}\nnodes:\n  fips5:\n    role: lb\n    interfaces:\n"
                        "      - {name: p0, mac: '02:00:00:00:05:00', ip: 198.18.0.5/24, lb_port: ingress}\n")
    from xenobench.config import load_config
    from xenobench.testbed import get_testbed
    with pytest.raises(ConfigError, match=r"Failed to start wire on fips5: it needs an egress port \(nodes.fips5"):
        get_lb("wire", get_testbed(load_config(one_port))).start(dry_run=True)


def test_live_frames_reach_the_backend_of_their_class_counted_exactly(testbed):
    """config/backends.json: fips2 and fips3, class_bits 1: even sources to fips2, odd to fips3,
    each backend's share counted by the sink (conftest.backend_arrivals)."""
    lb = get_lb("wire", testbed)
    n = 200
    ifs = [("fips2", "eth0"), ("fips3", "eth0"), ("fips5", "p0"), ("fips5", "p1")]
    lb.start()
    try:
        with pytest.raises(Exception, match="already running"):
            lb.start()
        before, st0 = {k: snapshot(testbed.node(k[0]), k[1]) for k in ifs}, lb.stats()
        f0 = lb.forwarded()
        with backend_arrivals(testbed) as arrived:
            for src, count in (("198.19.0.8", n), ("198.19.0.9", n // 2)):
                send_udp(testbed, "loadgen", src_ip=src, dst_mac=testbed.cfg.lb_mac,
                         dst_ip=testbed.cfg.service.vip, port=53, payload="w" * 22, count=count)
            time.sleep(0.3)
        got = {k: diff(before[k], snapshot(testbed.node(k[0]), k[1]))["view"] for k in ifs}
        st1, f1 = lb.stats(), lb.forwarded()
    finally:
        assert lb.stop() is True
    assert got[("fips5", "p0")]["xdp_redirect"] == n + n // 2
    assert arrived == {"fips2": n, "fips3": n // 2}
    assert got[("fips2", "eth0")]["rx_packets"] >= n and got[("fips3", "eth0")]["rx_packets"] >= n // 2
    assert [b1["packets"] - b0["packets"] for b0, b1 in zip(st0["backends"], st1["backends"])] == [n, n // 2]
    assert f1 - f0 == n + n // 2  # the interleaved designs' one-map read (malformed frames not counted)
    assert st1["mode"] == "native" and not lb.pindir.exists()
    ns = f"{testbed.cfg.prefix}fips5"
    link = json.loads(subprocess.run(["ip", "-n", ns, "-j", "link", "show", "dev", "p0"], capture_output=True,
                                     text=True).stdout)[0]
    assert not link.get("xdp")  # detached on stop
