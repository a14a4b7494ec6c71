"""XenoFlow's hash mode (lb/src/hash.h, `xenoflow -H FIELDS`) and LB kind xenoflow-hash.

- the hash: one fixture table (lb/tests/hash_vectors.txt, made from Python's zlib by
  lb/tests/hash_vectors.py) that the C function, doca_flow_pipe_calc_hash and the XDP datapath
  (lb/tests/test_hash.c, BPF_PROG_TEST_RUN) and the driver's backend_of (here) all follow;
- the emulation refusing what DOCA refuses of a hash pipe: the return values are test_hash.c's
  assertions, the messages this file's table (lb/README.md, "Hash pipes");
- the kind in the registry, its DOCA deploy (the -H start in the sudo rule's place, no route on
  a BlueField), a bad -H refused by the binary;
- live on the namespace testbed: every frame of several flows reaches the backend backend_of
  names (counted by the backends' sink), before and after a runtime change applied in place.
"""

from __future__ import annotations

import json
import subprocess
import time
import zlib

import pytest

from xenobench import REPO_ROOT
from xenobench.lb import LBS, get_lb, label, split_measured
from xenobench.lb.base import Flow, UpdateRefused
from xenobench.lb.xenoflow import BINARY, HASH_FIELDS, XenoFlowHashLB, hash_index, hash_tag

from .conftest import backend_arrivals, needs_root, send_udp

VECTORS = REPO_ROOT / "lb" / "tests" / "hash_vectors.txt"
TEST_HASH = REPO_ROOT / "lb" / "build" / "tests" / "test_hash"
built = pytest.mark.skipif(not BINARY.exists() or not TEST_HASH.exists(), reason="lb not built (make -C lb)")


def vectors() -> list[dict]:
    """The fixture table's rows (its header names the columns)."""
    out = []
    for line in VECTORS.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        f, n, src, sport, dst, dport, proto, crc, h, idx, *what = line.split()
        out.append({"fields": f, "n": int(n), "flow": Flow(src, int(sport), dst, int(dport), int(proto)),
                    "crc": int(crc, 16), "hash": int(h, 16), "index": int(idx), "what": " ".join(what)})
    return out


ROWS = vectors()


def field_names(fields: str) -> tuple[str, ...]:
    return ("src_ip", "dst_ip", "proto", "src_port", "dst_port") if fields == "5-tuple" else tuple(fields.split(","))


# --- the hash --------------------------------------------------------------------------------------
def test_fixture_table_is_what_its_generator_writes():
    p = subprocess.run(["python3", str(REPO_ROOT / "lb" / "tests" / "hash_vectors.py")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout == VECTORS.read_text()
    assert len(ROWS) >= 10 and any(r["index"] >= r["n"] for r in ROWS)  # a row whose frame misses


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['fields']}-{r['n']}-{r['flow'].src}:{r['flow'].sport}" for r in ROWS])
def test_driver_hash_follows_the_fixture_table(row):
    tag = hash_tag(row["flow"], field_names(row["fields"]))
    assert len(tag) == 32 and zlib.crc32(tag, 0xFFFFFFFF) ^ 0xFFFFFFFF == row["crc"], row["what"]
    assert hash_index(row["flow"], field_names(row["fields"]), row["n"]) == row["index"], row["what"]


def test_hash_selects_udp_when_ports_are_hashed():
    tcp = Flow("198.19.0.8", 40000, "198.18.0.100", 53, proto=6)
    assert hash_index(tcp, HASH_FIELDS, 2) is None  # its frames miss the pipe (l4 UDP selected)
    assert hash_index(tcp, ("src_ip",), 4) == hash_index(Flow("198.19.0.8", 1, "1.2.3.4", 2), ("src_ip",), 4)


#: what the emulation logs for each refusal of lb/tests/test_hash.c's test_hash_pipe_refusals (its
#: return values are asserted there): (level, message)
REFUSALS = [
    ("ERR", "not supported by the DOCA Flow emulation: hash pipe HASH of DOCA's default 8192 entries (at most 4096: "
            "doca_flow_pipe_cfg_set_nr_entries)"),
    ("ERR", "not supported by the DOCA Flow emulation: match values on hash pipe HASH (outer.ip4.src_ip: it hashes "
            "the fields of its match_mask; pass match NULL)"),
    ("ERR", "Failed to create hash pipe HASH: its match_mask names no field to hash "
            "(doca_flow_pipe_cfg_set_match(cfg, NULL, match_mask))"),
    ("ERR", "Failed to create hash pipe HASH: L4 ports hashed without outer.l4_type_ext"),
    ("ERR", "not supported by the DOCA Flow emulation: hash map algorithm flags 0x2 (only "
            "DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_HASH)"),
    ("ERR", "Failed to create pipe BASIC: a hash map algorithm is set, and only a hash pipe has one"),
    ("WARN", "hash pipe HASH: nr_entries 3 is not a power of 2: its hash picks one of 4 indices and the frames of the "
             "1 without an entry miss"),
    ("ERR", "Failed to add entry to pipe HASH: it is a hash pipe, whose entries are added by index "
            "(doca_flow_pipe_hash_add_entry)"),
    ("ERR", "Failed to add entry 3 to hash pipe HASH: entry_index is beyond its 3 entries "
            "(doca_flow_pipe_cfg_set_nr_entries)"),
    ("ERR", "not supported by the DOCA Flow emulation: per-entry fwd (pipe HASH: give fwd at doca_flow_pipe_create)"),
    ("ERR", "Failed to add entry 2 to hash pipe HASH: another entry has that index"),
    ("ERR", "Failed to calculate a hash: the match is NULL"),
    ("ERR", "Failed to calculate the hash of pipe BASIC: not a hash pipe"),
    ("ERR", "Failed to add entry 0 to pipe BASIC: not a hash pipe (doca_flow_pipe_add_entry adds a BASIC pipe's "
            "entries)"),
]


@needs_root
@built
def test_c_function_calc_hash_and_datapath_follow_the_table_and_refusals_are_named():
    """lb/tests/test_hash.c: the C hash, doca_flow_pipe_calc_hash and BPF_PROG_TEST_RUN frames against
    the same table, the hash pipe's refusals (return values), XenoFlow's hash mode updated in place;
    with the emulation's log on, each refusal's message once."""
    p = subprocess.run([str(TEST_HASH)], env={"EMU_TEST_VERBOSE": "1", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "[  PASSED  ] 5 test(s)." in out, out[-4000:]
    logged = [ln.split("]", 1)[1] for ln in out.splitlines() if ln.startswith("[") and "][DOCA_FLOW_EMU] " in ln]
    for level, msg in REFUSALS:
        line = f"[{level}][DOCA_FLOW_EMU] {msg}"
        assert logged.count(line) == 1, f"{line!r} logged {logged.count(line)} times"


# --- the kind ----------------------------------------------------------------------------------------
def test_kind_is_registered_and_splits_by_hash(local_cfg):
    from xenobench.testbed import Testbed
    k = LBS["xenoflow-hash"]
    assert (k.label, k.module, k.split_by, k.bpf_dir) == ("XenoFlow (hash)", "xenoflow_hash",
                                                          "hash of source address and port", "lb")
    assert label("xenoflow-hash") == "XenoFlow (hash)" and split_measured("xenoflow-hash")
    lb = get_lb("xenoflow-hash", Testbed(local_cfg))
    assert isinstance(lb, XenoFlowHashLB) and lb.tag == "lb-xenoflow-hash" and lb.can_update
    assert lb.no_route is None and lb.install_unit == "class" and lb.update_entries_key == "changed"
    assert lb.app_argv("/b.json")[-2:] == ["-H", "src_ip,src_port"]
    assert lb.prog_pin.endswith("/xenoflow-hash/xb_emu")


def test_doca_deploy_starts_with_hash_fields_and_cannot_route():
    """On the thesis testbed (config/fips.yaml, DOCA): the start and the sudo rule's start carry -H;
    backend_of cannot say (the BlueField hashes its own layout of the fields)."""
    from xenobench.config import load_config
    from xenobench.testbed import get_testbed
    lb = get_lb("xenoflow-hash", get_testbed(load_config(REPO_ROOT / "config" / "fips.yaml")))
    cmds = lb.start(dry_run=True)["commands"]
    assert cmds[0] == "# xenoflow-hash (doca) on fips5-dpu"
    assert cmds[-1].split("   #")[0].endswith("-m vnf-hairpin -H src_ip,src_port")
    lb._home = "/home/ubuntu"  # the login's home, not asked over SSH
    starts = [c for c in lb.sudo_commands() if "start" in c]  # one rule for both modes: class, then hash
    assert len(starts) == 2 and starts[1] == [*starts[0], "-H", "src_ip,src_port"]
    assert "BlueField hashes its own layout" in lb.no_route
    assert lb.backend_of(Flow("198.19.0.8", 40000, "198.18.0.100", 53), None) is None


@needs_root
@built
def test_binary_refuses_bad_hash_fields_before_any_port(testbed):
    node = testbed.node("fips5")
    b = str(REPO_ROOT / "config" / "backends.json")
    for fields, why in (("sport", "'sport' has 'sport', which is not a field"),
                        ("src_ip,src_ip", "'src_ip,src_ip' names 'src_ip' twice"),
                        ("src_ip,", "'src_ip,' has an empty field name")):
        r = node.run([str(BINARY), "-a", "p0", "-a", "p1", "--", "-b", b, "-s", "02:00:00:00:05:01", "-H", fields],
                     check=False)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"Failed to parse --hash: {why}; give a comma-separated list of src_ip, dst_ip, proto, src_port, " \
               "dst_port (each once) or 5-tuple (default src_ip,src_port)" in r.stdout + r.stderr
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None


# --- live ---------------------------------------------------------------------------------------------
#: (source, source port, frames): two sources, four ports each
FLOWS = [(src, 40000 + i, 25 + 5 * i) for src in ("198.19.0.8", "198.19.0.9") for i in range(4)]


def routed(testbed, lb, backends_file=None) -> dict[str, int]:
    """The frames of FLOWS each backend gets by the driver's answer (LoadBalancer.route)."""
    out = {b.name: 0 for b in testbed.cfg.backend_nodes()}
    for src, sport, n in FLOWS:
        out[lb.route(Flow(src, sport, testbed.cfg.service.vip, 53), backends_file)] += n
    return out


def send_flows(testbed) -> dict[str, int]:
    with backend_arrivals(testbed) as arrived:
        for src, sport, n in FLOWS:
            send_udp(testbed, "loadgen", src_ip=src, sport=sport, dst_mac=testbed.cfg.lb_mac,
                     dst_ip=testbed.cfg.service.vip, port=53, payload="h" * 22, count=n)
        time.sleep(0.3)
    return arrived


def per_backend(before: dict, after: dict) -> dict[str, int]:
    b0 = {b["name"]: b["packets"] for b in before["backends"]}
    return {b["name"]: b["packets"] - b0.get(b["name"], 0) for b in after["backends"]}


@needs_root
@built
@pytest.mark.parametrize("kind,split,of_8", [("xenoflow-hash", "hash", {"fips2", "fips3"}),
                                             ("xenoflow", "class", {"fips2"})], ids=["hash", "class"])
def test_live_every_frame_where_backend_of_says_and_after_an_update_in_place(testbed, tmp_path, kind, split, of_8):
    """Both kinds, the same binary: hash mode splits one source's flows by port (of_8: the backends
    198.19.0.8's flows reach), class mode by the source's class; each frame where backend_of says,
    before and after the backends are swapped (both entries updated in place)."""
    lb = get_lb(kind, testbed)
    want = routed(testbed, lb)
    assert {lb.route(Flow(src, sport, testbed.cfg.service.vip, 53)) for src, sport, _ in FLOWS
            if src.endswith(".8")} == of_8
    res = lb.start()
    try:
        assert (res["lb"], res["split"], res["slots"]) == (kind, split, [0, 1])
        assert res["hash_fields"] == (["src_ip", "src_port"] if split == "hash" else [])
        st0 = lb.stats()
        assert send_flows(testbed) == want
        st1 = lb.stats()
        assert per_backend(st0, st1) == {k: v for k, v in want.items() if k in ("fips2", "fips3")}
        assert st1["miss"] == st0["miss"]
        swapped = tmp_path / "swapped.json"
        swapped.write_text(json.dumps({"backends": [{"name": "fips3", "mac_address": "02:00:00:00:03:00"},
                                                    {"name": "fips2", "mac_address": "02:00:00:00:02:00"}]}))
        u = lb.update(swapped)
        assert (u["lb_report"]["changed"], u["lb_report"]["entry_unit"]) == (2, lb.update_entry_unit)
        after = routed(testbed, lb, swapped)
        assert (after["fips2"], after["fips3"]) == (want["fips3"], want["fips2"])
        assert send_flows(testbed) == after
        # 4 slots: another pipe size, refused; the running set stays
        wider = tmp_path / "wider.json"
        wider.write_text(json.dumps({"class_bits": 2, "backends": json.loads(swapped.read_text())["backends"]}))
        what = "number of entries" if split == "hash" else "class mask"
        with pytest.raises(UpdateRefused, match=f"class_bits 1 -> 2 changes the {what} of the running pipe; restart it "
                                                "with the new file; it keeps forwarding on its previous backend set"):
            lb.update(wider)
        assert send_flows(testbed) == after
    finally:
        assert lb.stop() is True
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None
