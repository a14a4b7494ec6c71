"""Runtime backend changes of every LB (LoadBalancer.update) on the namespace testbed, live: after a
change is reported done, the classes it moved reach their new backend and a removed backend
receives nothing; a bad file, or one the running LB cannot take, is refused and the LB keeps
forwarding on its old set. The wire has no backend set and refuses by name.

Backends fips2 and fips3 (config/backends.json); frames from the client to the VIP's service port
with sources of known classes (even → class 0, odd → class 1), counted by the backends' UDP stacks
(udp_in) and, for XenoFlow and the eBPF LB, by the LB's own tables."""

import json
import time

import pytest

from xenobench.errors import BackendsError, NodeError
from xenobench.lb import get_lb
from xenobench.lb.base import UpdateRefused, log_events

from .conftest import needs_root, send_udp
from .test_ebpf_lb import LB_IN, VIP, udp_in

pytestmark = [needs_root]

M2, M3 = "02:00:00:00:02:00", "02:00:00:00:03:00"
SRC = {"198.18.0.16": 20, "198.18.0.17": 10}   # class 0 and class 1 (1 class bit)


def write(path, backends, class_bits=None):
    doc = {"backends": [{"name": n, "mac_address": m} for n, m in backends]}
    if class_bits is not None:
        doc["class_bits"] = class_bits
    path.write_text(json.dumps(doc))
    return path


def send_and_count(testbed, port=53) -> tuple[int, int]:
    """Frames of both classes to the VIP; what fips2 and fips3 received of them."""
    b2, b3 = testbed.node("fips2"), testbed.node("fips3")
    before = (udp_in(b2), udp_in(b3))
    for src, n in SRC.items():
        send_udp(testbed, "client", dst_mac=LB_IN, src_ip=src, dst_ip=VIP, port=port, payload="x", count=n)
    time.sleep(0.3)
    return udp_in(b2) - before[0], udp_in(b3) - before[1]


def _lookup(node, how: list[str], key: int) -> bytes:
    d = json.loads(node.run(["bpftool", "-j", "map", "lookup", *how, "key", "hex",
                             *[f"{b:02x}" for b in key.to_bytes(4, "little")]]).stdout)
    return bytes(int(x, 16) for x in d["value"])


def _mac(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def table(lb, nslots: int = 2) -> list[str | None]:
    """Class → the destination MAC in the LB's own table (None: no valid entry), read from its maps:
    the eBPF LB's pinned slots and backends; XenoFlow's emulated datapath's direct table (port 0's
    slots; struct emu_action: dst_mac at byte 8, flags at 4 with EMU_VALID = 1 << 4)."""
    node = lb.node
    if lb.kind == "ebpf":
        m = lb.pindir / "maps"
        out = []
        for c in range(nslots):
            bi = int.from_bytes(_lookup(node, ["pinned", str(m / "slots")], c)[:4], "little")
            be = _lookup(node, ["pinned", str(m / "backends")], bi)
            out.append(_mac(be[:6]) if be[6] else None)
        return out
    link = json.loads(node.run(["ip", "-j", "link", "show", "dev", lb.ing.name]).stdout)[0]
    prog = json.loads(node.run(["bpftool", "-j", "prog", "show", "id", str(link["xdp"]["prog"]["id"])]).stdout)
    ids = [i for i in prog["map_ids"]
           if json.loads(node.run(["bpftool", "-j", "map", "show", "id", str(i)]).stdout)["name"] == "direct"]
    out = []
    for c in range(nslots):
        v = _lookup(node, ["id", str(ids[0])], c)
        out.append(_mac(v[8:14]) if int.from_bytes(v[4:8], "little") & (1 << 4) else None)
    return out


def check_update_cycle(testbed, lb, tmp_path):
    """{fips2, fips3} → {fips2} (fips3 removed) → {fips2, fips3} (fips3 back): frames follow each
    change once it is reported done; a bad file and a class_bits change are refused on the way."""
    both = write(tmp_path / "both.json", [("fips2", M2), ("fips3", M3)])
    only2 = write(tmp_path / "only2.json", [("fips2", M2)], class_bits=1)
    lb.start(both)
    try:
        assert send_and_count(testbed) == (20, 10)
        assert table(lb) == [M2, M3]
        r = lb.update(only2)
        assert r["t_sent"] <= r["t_done"] and r["lb_report"]["event"] == "updated"
        assert r["lb_report"]["removed"] == ["fips3"]
        # what the update kind's "entries per second" counts, named by the driver
        assert (r["entries_key"], r["entry_unit"]) == (lb.update_entries_key, lb.update_entry_unit)
        if lb.kind == "xenoflow":  # class 1 moved: one update in place, one queue operation
            rep = r["lb_report"]
            assert (rep["changed"], rep["ops"], rep["entry_unit"]) == (1, 1, lb.update_entry_unit)
        assert table(lb) == [M2, M2]
        assert send_and_count(testbed) == (30, 0)        # the removed backend receives nothing
        # refused by the harness's strict reader: nothing reaches the LB
        bad = tmp_path / "bad.json"
        bad.write_text('{"backends": [{"name": "x", "mac_address": "02:zz:00:00:00:01"}]}')
        with pytest.raises(BackendsError, match="not a MAC address"):
            lb.update(bad)
        # refused by the LB itself: another class mask than the running one
        wide = write(tmp_path / "wide.json", [("fips2", M2), ("fips3", M3)], class_bits=2)
        with pytest.raises(UpdateRefused, match="class_bits 1 -> 2.*keeps forwarding on its previous"):
            lb.update(wide)
        assert send_and_count(testbed) == (30, 0)        # still the set of the last good update
        assert table(lb) == [M2, M2]
        r = lb.update(both)
        assert r["lb_report"]["added"] == ["fips3"]
        assert table(lb) == [M2, M3]
        assert send_and_count(testbed) == (20, 10)       # class 1 at its new (returned) backend
        return lb.stats()
    finally:
        lb.stop()


def sighup_behind_the_harness(lb, text: str) -> list[dict]:
    """Write `text` into XenoFlow's -b file behind the harness's back (its strict reader never sees
    it), SIGHUP, and return XenoFlow's log events once it answered; the good file is put back."""
    import signal as sig

    from xenobench.lb.xenoflow import TAG
    node = lb.node
    h = node.handle(TAG)
    path = h.argv[h.argv.index("-b") + 1]
    good = open(path).read()
    with open(path, "w") as f:
        f.write(text)
    try:
        node.signal(h, sig.SIGHUP)
        deadline = time.monotonic() + 5
        while not log_events(node.read_text(h.log)) and time.monotonic() < deadline:
            time.sleep(0.01)
        return log_events(node.read_text(h.log))
    finally:
        with open(path, "w") as f:
            f.write(good)


def test_ebpf_update_moves_classes_and_refuses_bad_input(testbed, tmp_path):
    from xenobench.agents.ebpf_lb import OBJ
    if not OBJ.exists():
        pytest.skip("ebpf_baseline not built (make -C ebpf_baseline)")
    lb = get_lb("ebpf", testbed)
    st = check_update_cycle(testbed, lb, tmp_path)
    # the maps hold the last set: both backends, slot 1 → fips3
    assert [b["name"] for b in st["backends"]] == ["fips2", "fips3"]


def test_wire_refuses_update_by_name(testbed, tmp_path):
    lb = get_lb("wire", testbed)
    with pytest.raises(NodeError, match="Failed to update wire: the wire has no backend set"):
        lb.update(write(tmp_path / "b.json", [("fips2", M2)]))


def test_xenoflow_update_moves_classes_and_refuses_bad_input(testbed, tmp_path):
    from xenobench.lb.xenoflow import BINARY
    if not BINARY.exists():
        pytest.skip("XenoFlow not built (make -C lb)")
    lb = get_lb("xenoflow", testbed)
    st = check_update_cycle(testbed, lb, tmp_path)
    assert [b["name"] for b in st["backends"]] == ["fips2", "fips3"]


def test_xenoflow_refuses_a_bad_file_behind_the_harness(testbed, tmp_path):
    """The C reader refuses on its own (the harness's check bypassed: a bad file written straight
    over the running one) and XenoFlow keeps forwarding on its set."""
    from xenobench.lb.xenoflow import BINARY
    if not BINARY.exists():
        pytest.skip("XenoFlow not built (make -C lb)")
    both = write(tmp_path / "both.json", [("fips2", M2), ("fips3", M3)])
    lb = get_lb("xenoflow", testbed)
    lb.start(both)
    try:
        ev = sighup_behind_the_harness(lb, '{"backends": [{"name": "fips2", "mac_address": "02:00:00:00:02:00"}], "extra": 1}')
        assert ev and ev[-1]["event"] == "update_refused" and "extra" in ev[-1]["error"], ev
        assert send_and_count(testbed) == (20, 10)
    finally:
        lb.stop()


def test_katran_update_reals_and_ring_as_its_control_plane(testbed, tmp_path):
    """Katran: fips3 removed, then added back. New flows follow the ring of the reals at that
    moment (only the ring slots that changed are written); a flow Katran has in its connection
    table (LRU) keeps its real even when that real was removed (Katran's connection consistency):
    the frames the update experiment counts as delivered to a removed backend."""
    import sys
    from collections import Counter
    from .test_katran import REALS, SEND, needs_katran, real_for
    from xenobench.agents.katran_lb import plan
    if needs_katran.args[0]:
        pytest.skip(needs_katran.kwargs["reason"])
    lb = get_lb("katran", testbed)
    nodes = {n: testbed.node(n) for n in REALS}
    ci, cn = testbed.cfg.role("client").iface(), testbed.node("fips1")
    both = write(tmp_path / "both.json", [("fips2", M2), ("fips3", M3)])
    only2 = write(tmp_path / "only2.json", [("fips2", M2)])
    _, ring = plan(both, REALS)

    def send(flows) -> dict:
        before = {n: udp_in(node) for n, node in nodes.items()}
        cn.run([sys.executable, "-c", SEND, ci.name, ci.mac, testbed.cfg.lb_mac, VIP, json.dumps(flows)])
        time.sleep(0.5)
        return {n: udp_in(node) - before[n] for n, node in nodes.items()}

    def flows(block: int) -> list:
        return [(f"198.18.{10 + block}.{k % 200 + 1}", 1024 + (k * 7919) % 60000) for k in range(200)]

    lb.start(both)
    try:
        first = flows(0)
        want = Counter(real_for(ring, s, sp) for s, sp in first)
        assert send(first) == {n: want[a] for n, a in REALS.items()}
        r = lb.update(only2)
        assert r["lb_report"]["removed"] == ["fips3"] and r["lb_report"]["ring_slots_changed"] > 0
        # the changed slots in one batched write (write_u32); ch_rings now holds the new ring
        assert r["lb_report"]["ring_write"] == "batch"
        _, ring2 = plan(only2, REALS)
        changed = [i for i, (x, y) in enumerate(zip(ring, ring2)) if x != y]
        assert r["lb_report"]["ring_slots_changed"] == len(changed)
        for slot in (changed[0], changed[len(changed) // 2], changed[-1]):
            assert int.from_bytes(_lookup(lb.node, ["pinned", str(lb.pindir / "maps" / "ch_rings")], slot)[:4],
                                  "little") == 1, slot  # fips2 (real 1) everywhere
        assert send(flows(1)) == {"fips2": 200, "fips3": 0}      # new flows: the ring has fips2 only
        cached = [f for f in first if real_for(ring, *f) == REALS["fips3"]]
        assert send(cached) == {"fips2": 0, "fips3": len(cached)}  # known flows keep their real
        r = lb.update(both)
        assert r["lb_report"]["added"] == ["fips3"]
        fresh = flows(2)
        want = Counter(real_for(ring, s, sp) for s, sp in fresh)  # the same reals: the same ring
        assert send(fresh) == {n: want[a] for n, a in REALS.items()}
    finally:
        lb.stop()


# --- (b) installation sizes, live ------------------------------------------------------------------
def _install_run(testbed, tmp_path, kind):
    from xenobench.measure.update import install_rates, install_sets
    lb = get_lb(kind, testbed)
    both = write(tmp_path / "both.json", [("fips2", M2), ("fips3", M3)])
    sets = install_sets(both, lb.install_unit, 9)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(sets["base"]))
    lb.start(base)
    return lb, sets, lambda: install_rates(testbed, lb, sets, tmp_path / "install", load_pps=30000, settle_s=0.2)


@pytest.mark.parametrize("kind", ["ebpf", "xenoflow"])
def test_class_installation_sizes_and_the_refusal_above_the_limit(testbed, tmp_path, kind):
    """2^1..2^8 classes moved and back under a background, each answered with the LB's own count
    (XenoFlow: classes replaced = 2^k; eBPF: 2^k slots + B's backends entry, at k = 8 only A's
    entry rewritten); 2^9 refused with the reader's reason while the old set keeps forwarding:
    after it every class is A's (fips2) in the LB's table, and frames of two classes reach fips2."""
    from xenobench.agents.ebpf_lb import OBJ
    from xenobench.lb.xenoflow import BINARY
    if not (OBJ if kind == "ebpf" else BINARY).exists():
        pytest.skip(f"{kind} not built (scripts/build.sh)")
    lb, sets, run = _install_run(testbed, tmp_path, kind)
    try:
        r = run()
        info = json.dumps(r, default=str)[:3000]
        got = [(c["k"], c["direction"], c["entries"], c["lb_entries"]) for c in r["changes"]]
        own = {"xenoflow": lambda k: 2 ** k, "ebpf": lambda k: 1 if k == 8 else 2 ** k + 1}[kind]
        assert got == [(k, d, 2 ** k, own(k)) for k in range(1, 9) for d in ("install", "revert")], info
        assert all(c["control_s"] > 0 and c["entries_per_s"] > 0 for c in r["changes"]), info
        o = r["over"]
        assert o["refused"] is True and "class_bits: 9 is not an integer in 0..8" in o["error"], info
        assert o["frames_at_old_set_after"] > 0 and o["backend"] == "fips2", info
        assert r["tx_packets"] > 0 and r["rx_packets"] > 0, info  # the background ran through the LB
        assert table(lb, 256) == [M2] * 256
        assert send_and_count(testbed) == (30, 0)
    finally:
        lb.stop()


def test_xenoflow_refuses_2_to_the_9_classes_behind_the_harness(testbed, tmp_path):
    """XenoFlow's own reader refuses class_bits 9 (the file written straight over the running one)
    and keeps forwarding on its set."""
    from xenobench.lb.xenoflow import BINARY
    if not BINARY.exists():
        pytest.skip("XenoFlow not built (make -C lb)")
    lb, sets, _ = _install_run(testbed, tmp_path, "xenoflow")
    try:
        ev = sighup_behind_the_harness(lb, json.dumps(sets["over"]))
        assert ev and ev[-1]["event"] == "update_refused" and "class_bits" in ev[-1]["error"], ev
        assert send_and_count(testbed) == (30, 0)
        assert table(lb, 256) == [M2] * 256
    finally:
        lb.stop()


def test_katran_installation_sizes_are_ring_slots(testbed, tmp_path):
    """Katran: 2^k of weight moved between its two reals rewrites 2^k ring slots (k <= 6), the
    removal of a real 32769; its own count of each, there and back; nothing is refused for size."""
    from .test_katran import needs_katran
    if needs_katran.args[0]:
        pytest.skip(needs_katran.kwargs["reason"])
    lb, sets, run = _install_run(testbed, tmp_path, "katran")
    try:
        r = run()
        got = [(c["k"], c["entries"]) for c in r["changes"] if c["direction"] == "install"]
        assert got == [(1, 2), (2, 4), (3, 8), (4, 16), (5, 32), (6, 64), (None, 32769)], r
        assert [c["lb_entries"] for c in r["changes"]] == [c["entries"] for c in r["changes"]]
        assert r["over"] is None
    finally:
        lb.stop()
