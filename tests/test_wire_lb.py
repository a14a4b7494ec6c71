"""The wire reference LB (switch/wire.bpf.c, xenobench/agents/wire_lb.py, xenobench/lb/wire.py):
frame fixtures through BPF_PROG_TEST_RUN (bpftool prog run, real kernel, no network), the layouts
its loader packs against the object's BTF, its refusals, and a live run on the namespace testbed
where every frame reaches the backends file's first backend and the counters agree exactly.

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

from xenobench.agents.bpf import bpftool, load_pinned, map_update
from xenobench.agents.wire_lb import OBJ, config_bytes, read_stats
from xenobench.counters import diff, snapshot
from xenobench.errors import BackendsError, ConfigError
from xenobench.lb import KINDS, get_lb
from xenobench.testbed import SINK_OBJ, ensure_bpffs, unmount_bpffs_if_unused

from .conftest import needs_root, send_udp

pytestmark = [needs_root, pytest.mark.skipif(not OBJ.exists(), reason="switch/ not built (make -C switch)")]

XDP = {0: "XDP_ABORTED", 1: "XDP_DROP", 2: "XDP_PASS", 3: "XDP_TX", 4: "XDP_REDIRECT"}
LB_IN, LB_OUT, BACKEND = "02:00:00:00:05:00", "02:00:00:00:05:01", "02:00:00:00:0a:00"


def mac(m: str) -> bytes:
    return bytes.fromhex(m.replace(":", ""))


def udp(payload=b"q" * 22) -> bytes:
    return bytes(Ether(src="02:00:00:00:04:00", dst=LB_IN) / IP(src="198.19.0.16", dst="198.18.0.100")
                 / UDP(sport=1024, dport=53) / payload)


@pytest.fixture
def prog(tmp_path):
    """The wire loaded and pinned outside any testbed, its maps filled as the controller does."""
    mounted = ensure_bpffs()
    pindir = Path("/sys/fs/bpf") / f"xbt-wire-{tmp_path.name[-12:]}"
    load_pinned(OBJ, pindir, "make -C switch")
    map_update(pindir / "maps" / "wire_config", struct.pack("<I", 0), config_bytes(BACKEND, LB_OUT))
    map_update(pindir / "maps" / "wire_egress", struct.pack("<I", 0), struct.pack("<I", 1))  # lo: never sent to

    def run(data: bytes):
        (tmp_path / "in").write_bytes(data)
        p = bpftool("prog", "run", "pinned", str(pindir / "progs" / "wire"), "data_in", str(tmp_path / "in"),
                    "data_out", str(tmp_path / "out"))
        rv = int(re.search(r"Return value: (\d+)", p.stdout + p.stderr).group(1))
        return XDP[rv], (tmp_path / "out").read_bytes()

    yield run, pindir
    shutil.rmtree(pindir, ignore_errors=True)
    if mounted:
        unmount_bpffs_if_unused(mounted)


FIXTURES = [  # description, input frame, expected verdict, expected output (None: the input)
    ("64 B UDP frame to the VIP: MACs rewritten, everything after them untouched",
     udp(), "XDP_REDIRECT", mac(BACKEND) + mac(LB_OUT) + udp()[12:]),
    ("1514 B frame: the same, no look past the Ethernet header", udp(b"x" * 1472), "XDP_REDIRECT",
     mac(BACKEND) + mac(LB_OUT) + udp(b"x" * 1472)[12:]),
    ("ARP: a wire forwards what it gets", bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:04:00") / ARP()),
     "XDP_REDIRECT", mac(BACKEND) + mac(LB_OUT) + bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:04:00") / ARP())[12:]),
    ("an Ethernet header and nothing else: forwarded", udp()[:14], "XDP_REDIRECT", mac(BACKEND) + mac(LB_OUT) + udp()[12:14]),
]  # (BPF_PROG_TEST_RUN refuses XDP input shorter than an Ethernet header: the runt branch is not reachable here)


@pytest.mark.parametrize("desc,data,verdict,out", FIXTURES, ids=[f[0][:40] for f in FIXTURES])
def test_frame_fixtures(prog, desc, data, verdict, out, tmp_path):
    run, pindir = prog
    got_v, got = run(data)
    assert (got_v, got.hex()) == (verdict, (out if out is not None else data).hex()), desc
    f = tmp_path / "b.json"
    f.write_text(json.dumps({"backends": [{"name": "b0", "mac_address": BACKEND},
                                          {"name": "b1", "mac_address": "02:00:00:00:0a:01"}]}))
    st = read_stats(pindir, f, "native")
    fwd = int(verdict == "XDP_REDIRECT")
    assert [b["packets"] for b in st["backends"]] == [fwd, 0]
    assert st["backends"][0]["bytes"] == fwd * len(data)
    assert st["malformed"] == 0


def btf_struct_size(obj: Path, name: str) -> int:
    raw = subprocess.run(["bpftool", "btf", "dump", "file", str(obj), "format", "raw"],
                         capture_output=True, text=True, check=True).stdout
    return int(re.search(rf"STRUCT '{name}' size=(\d+)", raw).group(1))


def test_loader_layouts_match_the_objects_btf():
    assert btf_struct_size(OBJ, "wire_config") == len(config_bytes(BACKEND, LB_OUT)) == 12
    assert btf_struct_size(OBJ, "sw_counter") == struct.calcsize("<QQ")
    assert btf_struct_size(SINK_OBJ, "sink_config") == 8  # the testbed packs net + mask


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


def test_live_every_frame_reaches_the_first_backend_counted_exactly(testbed):
    lb = get_lb("wire", testbed)
    n = 200
    ifs = [("fips2", "eth0"), ("fips3", "eth0"), ("fips5", "p0"), ("fips5", "p1")]
    lb.start()
    try:
        with pytest.raises(Exception, match="already running"):
            lb.start()
        before, st0 = {k: snapshot(testbed.node(k[0]), k[1]) for k in ifs}, lb.stats()
        send_udp(testbed, "loadgen", src_ip="198.19.0.9", dst_mac=testbed.cfg.lb_mac,
                 dst_ip=testbed.cfg.service.vip, port=53, payload="w" * 22, count=n)
        time.sleep(0.3)
        got = {k: diff(before[k], snapshot(testbed.node(k[0]), k[1]))["view"] for k in ifs}
        st1 = lb.stats()
    finally:
        assert lb.stop() is True
    assert got[("fips5", "p0")]["xdp_redirect"] == n
    assert (got[("fips2", "eth0")]["rx_packets"], got[("fips3", "eth0")]["rx_packets"]) == (n, 0)
    assert [b1["packets"] - b0["packets"] for b0, b1 in zip(st0["backends"], st1["backends"])] == [n, 0]
    assert st1["mode"] == "native" and not lb.pindir.exists()
    ns = f"{testbed.cfg.prefix}fips5"
    link = json.loads(subprocess.run(["ip", "-n", ns, "-j", "link", "show", "dev", "p0"], capture_output=True,
                                     text=True).stdout)[0]
    assert not link.get("xdp")  # detached on stop
