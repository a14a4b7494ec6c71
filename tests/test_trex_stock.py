"""Every stock STL profile of trex-core (scripts/stl, commit 27e0153b, Apache-2.0), compiled as TRex
runs it, against TRex's own simulator where it left an expected capture.

Third-party data, located, never copied: a trex-core checkout's `scripts/` (or the unpacked copy
named by XENOBENCH_TREX_CORE, or ../shared/trex-core beside the worktree) with `stl/` (the
profiles), `exp/` (the captures of TRex's simulator) and the functional test
`stl_basic_tests.py` that says which profile, with which simulator options and tunables, wrote
which capture. The table of cases is read from that test, not copied.

How a capture is compared (frame for frame, in time order, timestamps within the simulator's own
5 µs): frames that leave at the same instant form a set (the simulator's std::priority_queue does
not keep an order among equal times); a frame padded to 60 bytes is compared up to the end of its
IP packet (the simulator pads with whatever the buffer held); a frame the simulator left for the
NIC's checksum offload (fix_checksum_hw: IP checksum 0, the L4 checksum the pseudo header's sum) is
compared as the NIC sends it.

Fixture table: EXPECTED names each simulator case's verdict; STOCK_REFUSED each stock profile the
compiler refuses, with the exact reason; every other stock profile compiles, each stream's share
of the cycle equal to its share of TRex's rates.
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from xenobench import REPO_ROOT
from xenobench.errors import TrafficError
from xenobench.traffic.profiles import MAX_CYCLE_BYTES, MAX_CYCLE_FRAMES, SIM_PORT
from xenobench.traffic.stl_sim import FieldEngine, compile_cycle, csum16, fix_ipv4, fix_l4, simulate, stream_pps


def _locate() -> Path | None:
    env = os.environ.get("XENOBENCH_TREX_CORE")
    cands = [Path(env), Path(env) / "scripts"] if env else []
    cands += [REPO_ROOT.parent / "shared" / "trex-core", REPO_ROOT.parent.parent / "shared" / "trex-core"]
    return next((c for c in cands if (c / "stl").is_dir() and (c / "exp").is_dir()), None)


TREX = _locate()
pytestmark = pytest.mark.skipif(TREX is None, reason="trex-core's scripts/stl and scripts/exp not found (set "
                                                      "XENOBENCH_TREX_CORE to a checkout's scripts/ directory)")


# --- the simulator's cases, read from trex-core's own functional test ------------------------
def sim_cases() -> list[tuple[str, str, dict, str]]:
    """(profile under stl/, simulator options, tunables, expected capture under exp/), as
    stl_basic_tests.py runs them (test_stl_profiles, test_hlt_profiles, test_dependent_vars_params)."""
    text = (TREX / "stl_basic_tests.py").read_text()
    out, seen = [], set()
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    for m in re.finditer(r'\["([\w/]+\.py)",\s*"([^"]*)",\s*True\]', text):
        out.append((m.group(1), m.group(2).strip(), {}, Path(m.group(1)).stem + ".pcap"))
    for m in re.finditer(r"\['(hlt/[\w]+\.py)', '([^']*)', True, (None|\{[^}]*\})\]", text):
        tun = json.loads(m.group(3).replace("'", '"')) if m.group(3) != "None" else {}
        out.append((m.group(1), m.group(2).strip(), tun, Path(m.group(1)).stem + ".pcap"))
    dep = re.search(r"profile_name = '(\w+\.py)'\s+options = (\[[^\]]*\])", text)
    for op in ("inc", "dec"):
        for size in (1, 2):
            for step in (1, 2):
                for opt in json.loads(dep.group(2).replace("'", '"')):
                    out.append((dep.group(1), opt, {"size": size, "step": step, "op": op},
                                f"{Path(dep.group(1)).stem}_{op}_{size}_{step}.pcap"))
    uniq = []
    for c in out:
        k = (c[0], c[1], json.dumps(c[2], sort_keys=True))
        if k not in seen:
            seen.add(k)
            uniq.append(c)
    return uniq


def case_id(c) -> str:
    tun = ",".join(f"{k}={v}" for k, v in c[2].items())
    return f"{c[0]} {c[1]}" + (f" {tun}" if tun else "")


def options(opt: str) -> tuple[int, int]:
    """(frame limit, DP cores) from the simulator's options (trex_stl_sim.py: -l 5000, -c 1)."""
    lim = re.search(r"-l\s+(\d+)", opt)
    cores = re.search(r"-c\s+(\d+)", opt)
    return (int(lim.group(1)) if lim else 5000), (int(cores.group(1)) if cores else 1)


# --- loading: one child process for every profile (the TRex client replaces scapy) -----------
@pytest.fixture(scope="module")
def loaded() -> dict:
    """key → {"ok", "streams" | "error"}; the simulator's cases load as trex_stl_sim.py loads them
    (key=value tunables as argv and as get_streams keywords), the stock profiles without tunables."""
    jobs = []
    for c in sim_cases():
        argv = [a for k, v in c[2].items() for a in (f"--{k}", str(v))]
        jobs.append([case_id(c), str(TREX / "stl" / c[0]), argv, c[2]])
    for p in stock_files():
        jobs.append([p, str(TREX / "stl" / p), [], {}])
    r = subprocess.run([sys.executable, "-m", "xenobench.traffic.stl_loader", "--batch"], input=json.dumps(jobs),
                       capture_output=True, text=True, timeout=900, cwd=TREX,   # the simulator runs in scripts/
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def stock_files() -> list[str]:
    root = TREX / "stl"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# --- comparison ----------------------------------------------------------------------------
def read_capture(path: Path) -> list[tuple[float, bytes]]:
    data = path.read_bytes()
    e = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    out, off = [], 24
    while off + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack_from(e + "IIII", data, off)
        off += 16
        out.append((sec + usec / 1e6, data[off:off + incl]))
        off += incl
    return out


def _l3(frame: bytes) -> tuple[int, int] | None:
    """(offset, ethertype) of the L3 header after Ethernet, 802.1Q/QinQ tags and MPLS labels."""
    off = 12
    while off + 2 <= len(frame):
        et = struct.unpack_from("!H", frame, off)[0]
        if et in (0x8100, 0x88A8, 0x9100):
            off += 4
            continue
        off += 2
        if et == 0x8847:   # MPLS: labels until bottom of stack, then IPv4/IPv6 by version
            while off + 4 <= len(frame) and not frame[off + 2] & 1:
                off += 4
            off += 4
            et = {4: 0x0800, 6: 0x86DD}.get(frame[off] >> 4 if off < len(frame) else 0, 0)
        return off, et
    return None


def wire(frame: bytes) -> bytes:
    """A frame as it leaves the NIC: offloaded checksums filled in, Ethernet padding left out."""
    l3 = _l3(frame)
    if l3 is None:
        return frame
    off, et = l3
    b = bytearray(frame)
    if et == 0x0800 and off + 20 <= len(b):
        ihl = (b[off] & 0x0F) * 4
        if b[off + 10:off + 12] == b"\0\0" and ihl >= 20:
            fix_ipv4(b, off)
            proto = b[off + 9]
            if proto in (6, 17):
                fix_l4(b, off, off + ihl, 16 if proto == 6 else 6)
        end = off + struct.unpack_from("!H", b, off + 2)[0]
    elif et == 0x86DD and off + 40 <= len(b):
        end = off + 40 + struct.unpack_from("!H", b, off + 4)[0]
    else:
        return bytes(b)
    return bytes(b[:end]) if len(b) == 60 and end < 60 else bytes(b)


def compare(ours: list[tuple[float, bytes]], gold: list[tuple[float, bytes]]) -> str:
    """"agree", or what first differs. Frames the compiler sends at exactly the same time form a
    set, matched against the capture's frames at the same positions."""
    if len(ours) != len(gold):
        return f"{len(ours)} frames, the capture {len(gold)}"
    i = 0
    while i < len(ours):
        j = i
        while j + 1 < len(ours) and ours[j + 1][0] == ours[i][0]:
            j += 1
        for k in range(i, j + 1):
            if abs(ours[k][0] - gold[k][0]) > 5e-6:
                return f"frame {k}: sent at {ours[k][0]:.6f} s, the capture's at {gold[k][0]:.6f} s"
        a = sorted(wire(f) for _, f in ours[i:j + 1])
        b = sorted(wire(f) for _, f in gold[i:j + 1])
        if a != b:
            x, y = next((x, y) for x, y in zip(a, b) if x != y)
            at = next((k for k, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            return f"frame {i} ({ours[i][0]:.6f} s): differs at byte {at} ({len(x)} B, the capture's {len(y)} B)"
        i = j + 1
    return "agree"


# Where TRex's simulator and the compiler do not agree, and why: the expected capture is older
# than the profile beside it (trex-core keeps both; its functional test is not run on them since).
# flow_stats.py now pads by the length of its pkt_type's name (a 97-byte frame), the capture holds
# the earlier 60-byte frame; flow_stats_latency.py builds a 60-byte frame, the capture a 96-byte
# one. Both captures also predate TRex's TOS bit 0x01 ("to CPU", CFlowStatParser::set_tos_to_cpu,
# byte 15), which hlt_ipv6_ranges.py's capture (per-stream stats on IPv6) carries and agrees with.
STALE = {
    "flow_stats.py -m 1 -l 1": "frame 0 (0.000000 s): differs at byte 15 (97 B, the capture's 60 B)",
    "flow_stats_latency.py -m 1 -l 1": "frame 0 (0.000000 s): differs at byte 15 (60 B, the capture's 96 B)",
}


@pytest.mark.parametrize("case", sim_cases(), ids=case_id)
def test_stock_profile_agrees_with_trex_simulator(loaded, case):
    """The compiler's TRex data plane (stl_sim.simulate, TRex's simulator's port: its MACs, 10 Gb/s,
    reserved IP ids from 0xff00) against the capture TRex's simulator wrote for the same options."""
    prof, opt, _, exp = case
    res = loaded[case_id(case)]
    assert res["ok"], res["error"]
    limit, cores = options(opt)
    ours = [(s.t, s.frame) for s in simulate(res["streams"], prof, SIM_PORT, limit=limit, cores=cores)]
    got = compare(ours, read_capture(TREX / "exp" / exp))
    assert got == STALE.get(case_id(case), "agree")


# --- every stock profile ----------------------------------------------------------------------
# The stock profiles the compiler refuses, and the exact reason (the loader's own where TRex's
# client refuses them too).
STOCK_REFUSED = {
    "imix_wlc.py": "the following arguments are required: --src, --dst",
    "tpg_tags_conf.json": "from_json: missing field 'packet' from JSON",
    "tpg_tags_conf.py": "AttributeError: 'TPGTagConf' object has no attribute 'get_streams'",
    "tpg_1tag_stream.py": "Failed to compile stream vlan_1 of tpg_1tag_stream.py: its flow_stats are a tagged packet "
                          "group (tpg), which TRex adds only to a port with TPG enabled (\"Trying to add a TPG "
                          "stream but TPG isn't enabled in this port.\"); the local generators have no TPG",
    "tpg_dot1q_vm.py": "Failed to compile stream dot1q_tpg of tpg_dot1q_vm.py: its flow_stats are a tagged packet "
                          "group (tpg), which TRex adds only to a port with TPG enabled (\"Trying to add a TPG "
                          "stream but TPG isn't enabled in this port.\"); the local generators have no TPG",
    "tests/multi_core_test.py": "Failed to compile stream 0 of tests/multi_core_test.py: its field engine repeats "
                                "after {big} frames, more than 4194304 (the most one compiled cycle holds)",
}


def test_every_stock_file_is_a_case(loaded):
    """Each file of scripts/stl is either refused for a named reason or compiled below."""
    assert len(stock_files()) == 108
    assert set(STOCK_REFUSED) <= set(stock_files())


@pytest.mark.parametrize("name", stock_files() if TREX else [])
def test_stock_profile_compiles_with_trex_shares_or_is_refused(loaded, name):
    """A cycle of every stock profile: each stream's frames in proportion to TRex's rate for it
    (continuous), or all of its bursts (bursts only); or the exact reason it is refused."""
    res = loaded[name]
    want = STOCK_REFUSED.get(name)
    if not res["ok"]:
        assert res["error"] == want
        return
    try:
        cyc = compile_cycle(res["streams"], name, SIM_PORT, MAX_CYCLE_FRAMES, MAX_CYCLE_BYTES)
    except TrafficError as e:
        assert want is not None, str(e)
        pattern = re.escape(want).replace(re.escape("{big}"), r"\d{7,}")
        assert re.fullmatch(pattern, str(e)), str(e)
        return
    assert want is None, f"compiled, expected refused: {want}"
    streams = res["streams"]
    live = [i for i, s in enumerate(streams) if s.get("enabled", True) and not s.get("start_paused")
            and not s.get("flags", 0) & 8]
    if cyc.finite:   # every burst, and the bursts' streams chained by `next`
        totals = Counter()
        out = simulate(streams, name, SIM_PORT, limit=MAX_CYCLE_FRAMES)
        totals.update(s.stream for s in out)
        assert cyc.per_stream == dict(totals) and len(cyc.frames) == len(out)
        return
    rates = {}
    for i in live:
        s = streams[i]
        eng = FieldEngine(s, name, SIM_PORT)
        rates[i] = Fraction(stream_pps(s, eng.expected_len(), SIM_PORT, name)).limit_denominator(1_000_000)
    total = sum(cyc.per_stream.values())
    for i, n in cyc.per_stream.items():
        assert Fraction(n, total) == rates[i] / sum(rates.values()), (i, n, total)
    assert all(len(f) >= 60 for f in cyc.frames)


def test_latency_stream_gets_trex_id_and_header():
    """A latency (payload-rule) stream: IP id 0xffff, the frame's last 16 bytes TRex's latency
    header (magic 0xAB, flow sequence 1, hardware id, sequence number per frame); a stats stream: the
    reserved id of its counter; the IP checksum right after both."""
    from xenobench.traffic.stl_sim import Port
    pkt = bytes.fromhex("ffffffffffff000000000000080045000046000100004011") + b"\0\0" + \
        bytes.fromhex("1000000130000001") + bytes.fromhex("0401000c00320000") + b"x" * 42
    b = bytearray(pkt)
    fix_ipv4(b, 14)
    base = {"flags": 0, "enabled": True, "self_start": True, "isg": 0.0, "core_id": -1,
            "mode": {"type": "continuous", "rate": {"type": "pps", "value": 10}},
            "packet": {"binary": base64.b64encode(bytes(b)).decode(), "meta": ""}, "vm": {"instructions": []}}
    lat = {**base, "flow_stats": {"enabled": True, "rule_type": "latency", "stream_id": 7}}
    st = {**base, "flow_stats": {"enabled": True, "rule_type": "stats", "stream_id": 3}}
    port = Port(bytes(6), bytes.fromhex("020000000500"), 10e9)
    out = simulate([st, lat], "t", port, limit=4)
    frames = {(s.stream, k): s.frame for k, s in enumerate(out)}
    stats = [f for (i, _), f in frames.items() if i == 0]
    lats = [f for (i, _), f in frames.items() if i == 1]
    assert [struct.unpack_from("!H", f, 18)[0] for f in stats] == [0xFFFF - 1023] * 2
    assert [struct.unpack_from("!H", f, 18)[0] for f in lats] == [0xFFFF] * 2
    assert [f[-16:] for f in lats] == [struct.pack("<BBHIQ", 0xAB, 1, 0, n, 0) for n in (0, 1)]
    assert all(csum16(f[14:34]) == 0 for f in stats + lats)
    assert all(len(f) == len(pkt) and f[:6] == bytes.fromhex("020000000500") for f in stats + lats)
