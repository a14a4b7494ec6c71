"""The namespace testbed's switch fast path (switch/fastpath.bpf.c), the backends' receive sink
(switch/sink.bpf.c) and the CPU placement, on real namespaces: frames to every bound MAC arrive at
that MAC's port and nowhere else (exact counts), broadcast/unknown frames still go through the
bridge (ARP, the testbed check), load frames are dropped at the backends' XDP and still counted,
the LB's NAPI thread runs on testbed.cpus.dut, and `down` leaves nothing behind. Both programs
also run a fixture table (xenobench.bpftest: description, frame, verdict, output) through
BPF_PROG_TEST_RUN, as the testbed loaded and configured them."""

import collections
import contextlib
import dataclasses
import json
import re
import subprocess
import time

import pytest

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from xenobench import bpftest
from xenobench.bpftest import Fixture
from xenobench.config import load_config
from xenobench.counters import diff, snapshot
from xenobench.errors import TestbedError
from xenobench.testbed import FASTPATH_PROG, SINK_PROG, get_testbed

from .conftest import needs_root, send_udp
from .test_testbed import machine_state, own_prefix

pytestmark = needs_root

N = 50  # frames per destination


def all_ifaces(cfg):
    return [(n.name, i.name, i.mac) for n in cfg.nodes.values() for i in n.interfaces]


def rx_counts(tb) -> dict:
    return {(n, i): snapshot(tb.node(n), i) for n, i, _ in all_ifaces(tb.cfg)}


def rx_diff(before, after) -> dict:
    return {k: diff(before[k], after[k])["view"]["rx_packets"] for k in after}


def send(tb, dst_mac: str, count: int, src_ip: str = "198.18.0.4", dst_ip: str = "198.18.0.99"):
    """`count` UDP frames from the loadgen (fips4) to dst_mac, through the switch."""
    send_udp(tb, "loadgen", dst_mac=dst_mac, src_ip=src_ip, dst_ip=dst_ip, port=9, payload="fastpath-test",
             count=count, timeout=30)
    time.sleep(0.2)  # the receiving NAPI runs after the send returns


@contextlib.contextmanager
def captures(tb):
    """tcpdump on every node interface, only the test's frames (UDP to port 9: no ARP, no probe);
    yields a dict filled on exit: (node, iface) -> Counter of destination MACs seen there."""
    seen: dict = {}
    ifs = [(n, i) for n, i, _ in all_ifaces(tb.cfg)]
    hs, off = {}, {}
    for n, i in ifs:
        node = tb.node(n)
        off[(n, i)] = len(node.read_text(node.log_path(f"cap-{i}")))  # logs are appended to
        hs[(n, i)] = node.start(f"cap-{i}", ["tcpdump", "-i", i, "-Q", "in", "-n", "-e", "-l", "-p", "udp dst port 9"])
    try:
        for (n, i), h in hs.items():
            deadline = time.monotonic() + 10
            while "listening on" not in tb.node(n).read_text(h.log)[off[(n, i)]:] and time.monotonic() < deadline:
                time.sleep(0.05)
        yield seen
        time.sleep(0.3)  # the receiving NAPI runs after the send returns
    finally:
        for n, i in ifs:
            tb.node(n).stop(f"cap-{i}")
    for (n, i), h in hs.items():
        macs = re.findall(r"^\S+ \S+ > ([0-9a-f:]{17}),", tb.node(n).read_text(h.log)[off[(n, i)]:], re.M)
        seen[(n, i)] = collections.Counter(macs)


def test_frames_to_each_bound_mac_arrive_at_its_port_only(testbed):
    targets = [(n, i, mac) for n, i, mac in all_ifaces(testbed.cfg) if n != "fips4"]
    sw0 = testbed.switch_stats()
    with captures(testbed) as seen:
        for k, (n, i, mac) in enumerate(targets):
            send(testbed, mac, N + k)  # a different count per port: a frame at the wrong port shows
    sw1 = testbed.switch_stats()
    expect = {(n, i): collections.Counter({mac: N + k}) for k, (n, i, mac) in enumerate(targets)}
    expect[("fips4", "eth0")] = collections.Counter()
    assert seen == expect
    # forwarded at XDP (ARP replies of other traffic may add to both counters, never subtract)
    assert sw1["forwarded"] - sw0["forwarded"] >= sum(N + k for k in range(len(targets)))


def test_broadcast_arp_and_unknown_macs_go_through_the_bridge(testbed):
    rows = testbed.check()  # ARP, ping and UDP to the VIP with each backend's MAC (and IPIP: Katran runs)
    assert len(rows) >= 4, rows
    assert [r for r in rows if not r[1]] == []  # a failed row shown whole (the list of all was cut)
    others = [(n, i) for n, i, _ in all_ifaces(testbed.cfg) if n != "fips4"]
    for mac in ("ff:ff:ff:ff:ff:ff", "02:00:00:00:99:00"):  # broadcast; unbound unicast (flooded)
        sw0 = testbed.switch_stats()
        with captures(testbed) as seen:
            send(testbed, mac, 3)
        sw1 = testbed.switch_stats()
        assert seen == {**{k: collections.Counter({mac: 3}) for k in others},
                        ("fips4", "eth0"): collections.Counter()}, mac
        assert sw1["to_bridge"] - sw0["to_bridge"] >= 3


def test_the_checks_datagram_goes_out_once_its_receiver_listens(testbed):
    """The UDP rows of testbed.check send their datagram once the receiver says it listens (a fixed
    wait lost it when the receiver's interpreter started slowly on a busy machine); a receiver that
    cannot bind is a failed row that says why, not a traceback."""
    client, b = testbed.node_for_role("client"), testbed.cfg.backend_nodes()[0]
    _, ok, detail = testbed._check_vip_to_backend(client, b)
    assert ok and detail.startswith("received "), detail
    gone = dataclasses.replace(b, interfaces=(dataclasses.replace(b.iface(), name="xbnosuch0"),))
    _, ok, detail = testbed._check_vip_to_backend(client, gone)
    assert (ok, detail) == (False, f"Failed to start the check's UDP receiver (xbnosuch0) on {b.name}: "
                                   "OSError: [Errno 19] No such device")


def test_backend_sink_drops_load_frames_and_counts_them(testbed):
    src = testbed.cfg.section("traffic")["src_ip_base"].rsplit(".", 1)[0] + ".77"  # in the generator's block
    for b in testbed.cfg.backend_nodes():
        k = (b.name, b.iface().name)
        no_ports0 = udp_no_ports(testbed, b.name)
        before, s0 = rx_counts(testbed), testbed.sink_stats()
        send(testbed, b.iface().mac, N, src_ip=src, dst_ip=testbed.cfg.service.vip)
        after, s1 = rx_counts(testbed), testbed.sink_stats()
        # counted by the veth although dropped at XDP (rx_packets also counts an ARP refresh, if any)
        assert diff(before[k], after[k])["view"]["xdp_drops"] == N
        assert rx_diff(before, after)[k] >= N
        # all N load frames dropped; anything the sink passed meanwhile (an ARP refresh) is not load
        assert s1["dropped"] - s0["dropped"] == N, b.name
        # the backend's stack never saw them: no UDP datagram reached it (the counter lives as long
        # as the namespace, so earlier tests' datagrams are in it: compare before and after)
        assert udp_no_ports(testbed, b.name) == no_ports0, b.name


def eth(dst: str, src_ip: str = "198.18.0.4", dst_ip: str = "198.18.0.99") -> bytes:
    return bytes(Ether(src="02:00:00:00:04:00", dst=dst) / IP(src=src_ip, dst=dst_ip) / UDP(sport=1024, dport=9)
                 / b"fastpath-fixture")


def test_fastpath_fixture_table(testbed):
    """Every bound MAC is redirected to its port (under test-run: the verdict, the frame untouched),
    group and unbound MACs go to the bridge; as loaded and bound by the testbed."""
    bound = [(n, i, mac) for n, i, mac in all_ifaces(testbed.cfg) if mac]
    rows = [Fixture(f"to {n}/{i} ({mac}): its port", eth(mac), "XDP_REDIRECT") for n, i, mac in bound]
    rows += [
        Fixture("an Ethernet header alone to a bound MAC: its port", eth(bound[0][2])[:14], "XDP_REDIRECT"),
        Fixture("broadcast ARP: to the bridge", bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:04:00") / ARP()),
                "XDP_PASS"),
        Fixture("IPv4 multicast MAC (group bit): to the bridge", eth("01:00:5e:00:00:01"), "XDP_PASS"),
        Fixture("unbound unicast MAC: to the bridge (it floods)", eth("02:00:00:00:99:00"), "XDP_PASS"),
    ]
    sw0 = testbed.switch_stats()
    bpftest.check(testbed.fastpath_pindir / "progs" / FASTPATH_PROG, rows)
    sw1 = testbed.switch_stats()
    # live traffic (an ARP refresh) may add to these, never subtract
    assert sw1["forwarded"] - sw0["forwarded"] >= len(bound) + 1
    assert sw1["to_bridge"] - sw0["to_bridge"] >= 3
    assert sw1["malformed"] == sw0["malformed"]


def test_backend_sink_fixture_table(testbed):
    """The sink drops IPv4 from the generator's source block and passes everything else untouched."""
    base = testbed.cfg.section("traffic")["src_ip_base"]
    block = base.rsplit(".", 1)[0]
    be = testbed.cfg.backend_nodes()[0].iface().mac
    rows = [
        Fixture(f"load frame from {base}: dropped", eth(be, src_ip=base), "XDP_DROP"),
        Fixture(f"load frame from {block}.77: dropped", eth(be, src_ip=f"{block}.77"), "XDP_DROP"),
        Fixture("a probe from the client (outside the block): to the stack", eth(be, src_ip="198.18.0.16"), "XDP_PASS"),
        Fixture("ARP: to the stack", bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:04:00") / ARP()), "XDP_PASS"),
        Fixture("IPv4 header cut short: to the stack", eth(be, src_ip=base)[:30], "XDP_PASS"),
    ]
    s0 = testbed.sink_stats()
    bpftest.check(testbed.sink_pindir / "progs" / SINK_PROG, rows)
    s1 = testbed.sink_stats()
    assert s1["dropped"] - s0["dropped"] == 2
    assert s1["passed"] - s0["passed"] >= 3


def test_backend_sink_records_arrival_times_on_the_harness_clock(testbed):
    """While recording is on, each backend's generator frames land in sink_arrivals under their
    destination MAC with bpf_ktime_get_ns() times inside the harness's time.monotonic_ns() window
    around the send: the two are the same clock (CLOCK_MONOTONIC) on this machine. Off, nothing
    is recorded; a fresh recording starts empty."""
    src = testbed.cfg.section("traffic")["src_ip_base"].rsplit(".", 1)[0] + ".78"
    rec = testbed.arrival_recorder()
    bes = testbed.cfg.backend_nodes()
    send(testbed, bes[0].iface().mac, 3, src_ip=src, dst_ip=testbed.cfg.service.vip)  # before: not recorded
    t0 = rec.start_arrivals(1_000_000_000)  # one bucket per second
    windows = {}
    for b in bes:
        lo = time.monotonic_ns()
        send(testbed, b.iface().mac, N, src_ip=src, dst_ip=testbed.cfg.service.vip)
        windows[b.iface().mac] = (lo, time.monotonic_ns())
    recs = rec.stop_arrivals()
    send(testbed, bes[0].iface().mac, 3, src_ip=src, dst_ip=testbed.cfg.service.vip)  # after: not recorded
    assert {a.mac for a in recs} == set(windows), recs
    for mac, (lo, hi) in windows.items():
        mine = [a for a in recs if a.mac == mac]
        assert sum(a.packets for a in mine) == N, mine
        first, last = min(a.first_ns for a in mine), max(a.last_ns for a in mine)
        assert t0 <= lo <= first <= last <= hi, (mac, t0, lo, first, last, hi)
        assert all(a.bucket == (a.first_ns - t0) // 1_000_000_000 for a in mine)
    assert rec.arrivals() == []  # read once, then cleared


def test_a_recording_refuses_a_backend_without_the_sink(testbed):
    """A backend whose interface runs no sink would count 0 frames, a wrong split: refused by name,
    and nothing is recorded; the sink back on it, a recording starts."""
    rec, b = testbed.arrival_recorder(), testbed.cfg.backend_nodes()[0]
    testbed.release_backend_sink(b.name)
    try:
        with pytest.raises(TestbedError, match=rf"Failed to record arrivals: {b.name}'s {b.iface().name} runs "
                                               rf"no XDP program, not the backend sink \({SINK_PROG}\).*uncounted"):
            rec.start_arrivals(1_000_000_000)
    finally:
        testbed.restore_backend_sink(b.name)
    rec.start_arrivals(1_000_000_000)
    assert rec.stop_arrivals() == []


def udp_no_ports(testbed, node: str) -> int:
    snmp = testbed.node(node).run(["cat", "/proc/net/snmp"]).stdout
    udp = [l.split() for l in snmp.splitlines() if l.startswith("Udp:")]
    return int(dict(zip(udp[0], udp[1]))["NoPorts"])


def test_dut_napi_thread_is_pinned_and_recorded(testbed):
    pl = testbed.cpu_placement()
    cpu = testbed.cfg.section("testbed")["cpus"]["dut"]
    assert pl["dut_cpu"] == cpu and pl["dut_napi"]["dev"] == "p0"
    assert len(pl["dut_napi"]["threads"]) == 1
    (comm, cpus), = pl["dut_napi"]["threads"].items()
    assert comm.startswith("napi/p0-") and cpus == str(cpu)
    prio = testbed.cfg.section("testbed")["cpus"]["dut_rt_priority"]
    assert pl["dut_napi"]["scheduling"][comm] == f"SCHED_FIFO {prio}"
    ns = f"{testbed.cfg.prefix}fips5"
    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/p0/threaded"],
                         capture_output=True, text=True).stdout.strip()
    assert out in ("1", "enabled")


def test_dut_napi_priority_changes_for_a_while_and_back(testbed):
    """The interleaved rate design runs the DUT's NAPI thread at normal scheduling for a repetition
    (experiments.rank.dut_rt_priority) and gives it back the testbed's SCHED_FIFO after it."""
    from xenobench.errors import TestbedError
    prio = testbed.cfg.section("testbed")["cpus"]["dut_rt_priority"]
    (comm, sched), = testbed.cpu_placement()["dut_napi"]["scheduling"].items()
    assert sched == f"SCHED_FIFO {prio}" and prio == 50
    try:
        assert testbed.napi.dut_priority(0) == {comm: "SCHED_OTHER 0"}
        assert testbed.cpu_placement()["dut_napi"]["scheduling"][comm] == "SCHED_OTHER 0"
        with pytest.raises(TestbedError, match=r"Failed to set SCHED_FIFO 100 on the LB port's NAPI thread \d+ "
                                               r"\(napi/p0-\d+\): chrt"):
            testbed.napi.dut_priority(100)
    finally:
        assert testbed.napi.dut_priority(prio) == {comm: f"SCHED_FIFO {prio}"}
    assert testbed.cpu_placement()["dut_napi"]["scheduling"][comm] == f"SCHED_FIFO {prio}"


def test_dut_napi_goes_inline_for_latency_and_back_to_a_pinned_thread(testbed):
    ns = f"{testbed.cfg.prefix}fips5"

    def threaded():
        return subprocess.run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/p0/threaded"],
                              capture_output=True, text=True).stdout.strip()

    first = testbed.cpu_placement()["dut_napi"]
    assert first["mode"] == "threaded"
    try:
        testbed.place_dut("inline")
        inline = testbed.cpu_placement()["dut_napi"]
        assert (inline["mode"], inline["threads"], threaded()) == ("inline", {}, "0")
        testbed.place_dut("inline")  # idempotent
        assert testbed.cpu_placement()["dut_napi"]["mode"] == "inline"
        with pytest.raises(Exception, match=r"Failed to place the LB's NAPI: mode 'busy' is not one of threaded, inline"):
            testbed.place_dut("busy")
    finally:
        testbed.place_dut("threaded")
    again = testbed.cpu_placement()["dut_napi"]
    cpu, prio = (testbed.cfg.section("testbed")["cpus"][k] for k in ("dut", "dut_rt_priority"))
    (comm, cpus), = again["threads"].items()
    assert again["mode"] == "threaded" and threaded() in ("1", "enabled") and cpus == str(cpu)
    assert again["scheduling"][comm] == f"SCHED_FIFO {prio}"  # a new kthread, placed like the first
    testbed.place_dut("threaded")
    assert testbed.cpu_placement()["dut_napi"]["threads"] == again["threads"]  # idempotent: not re-created


def test_placement_on_a_missing_cpu_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("XENOBENCH_NS_PREFIX", own_prefix("f"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"extends: {load_config().path}\ntestbed: {{name: cpus, cpus: {{dut: 4096}}}}\n")
    tb = get_testbed(load_config(cfg))
    before = machine_state(own_prefix("f"))
    with pytest.raises(Exception, match=r"Failed to pin the LB's NAPI: testbed.cpus.dut: CPU 4096 does not exist"):
        tb.up()
    assert machine_state(own_prefix("f")) == before  # a failed bring-up removes what it created


def test_down_leaves_no_program_pin_or_thread(monkeypatch):
    monkeypatch.setenv("XENOBENCH_NS_PREFIX", own_prefix("f"))
    tb = get_testbed(load_config())
    tb.down()
    before = machine_state(own_prefix("f"))
    tb.up()
    sw = tb.switch_ns
    links = json.loads(subprocess.run(["ip", "-n", sw, "-j", "link", "show"], capture_output=True, text=True).stdout)
    progs = {l["xdp"]["prog"]["id"] for l in links if l.get("xdp")}
    ports = [l for l in links if l["ifname"] != "lo" and l["ifname"] != "br0"]
    assert len(progs) == 1 and all(l.get("xdp") for l in ports)  # one program on every port
    b = tb.cfg.role("backend")
    sink = json.loads(subprocess.run(["ip", "-n", f"{tb.cfg.prefix}{b.name}", "-j", "link", "show", "dev",
                                      b.iface().name], capture_output=True, text=True).stdout)[0]["xdp"]["prog"]["id"]
    threads = [int(p) for placed in tb._placed_threads().values() for p in placed]
    tb.down()
    assert machine_state(own_prefix("f")) == before
    # the kernel dismantles a deleted namespace in a work queue: wait for it, then nothing is left
    def left():
        return ([i for i in progs | {sink} if subprocess.run(["bpftool", "prog", "show", "id", str(i)],
                                                             capture_output=True).returncode == 0]
                + [t for t in threads if subprocess.run(["ps", "-p", str(t)], capture_output=True).returncode == 0])
    deadline = time.monotonic() + 20
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left() == []


def test_switch_hops_run_as_pinned_threads_and_forward(tmp_path, monkeypatch):
    """testbed.cpus.hops (for machines with more CPUs; here both hops on CPU 0): the switch ports
    fed by the generator and by the LB's egress get pinned SCHED_FIFO NAPI threads for rates, are
    recorded in the placement, still forward every frame (the wire LB's path to the sink), go
    inline with the DUT for latency, and leave nothing behind."""
    from xenobench.lb import get_lb
    monkeypatch.setenv("XENOBENCH_NS_PREFIX", own_prefix("h"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"extends: {load_config().path}\ntestbed: {{name: hops, cpus: {{hops: {{from_generator: 0, from_lb: 0}}}}}}\n")
    tb = get_testbed(load_config(cfg))
    before = machine_state(own_prefix("h"))
    prio = tb.cfg.section("testbed")["cpus"]["dut_rt_priority"]

    def threaded(dev):
        return subprocess.run(["ip", "netns", "exec", tb.switch_ns, "cat", f"/sys/class/net/{dev}/threaded"],
                              capture_output=True, text=True).stdout.strip()
    tb.up()
    try:
        hops = tb.cpu_placement()["hop_napi"]
        assert {w: h["dev"] for w, h in hops.items()} == {"from_generator": "fips4-eth0", "from_lb": "fips5-p1"}
        for what, h in hops.items():
            (comm, cpus), = h["threads"].items()
            assert comm.startswith(f"napi/{h['dev']}"[:15]) and cpus == "0", (what, h)
            assert h["scheduling"][comm] == f"SCHED_FIFO {prio}" and h["mode"] == "threaded"
            assert threaded(h["dev"]) in ("1", "enabled")
        lb = get_lb("wire", tb)
        lb.start()
        try:
            s0 = tb.sink_stats()
            send_udp(tb, "loadgen", src_ip="198.19.0.9", dst_mac=tb.cfg.lb_mac, dst_ip=tb.cfg.service.vip,
                     port=53, payload="h" * 22, count=N)
            time.sleep(0.3)
            assert tb.sink_stats()["dropped"] - s0["dropped"] == N  # all of them through both threaded hops
        finally:
            lb.stop()
        tb.place_dut("inline")
        pl = tb.cpu_placement()
        assert all(h["threads"] == {} and h["mode"] == "inline" for h in pl["hop_napi"].values())
        assert (threaded("fips4-eth0"), threaded("fips5-p1")) == ("0", "0")
        tb.place_dut("threaded")
        placed = tb.cpu_placement()
        assert all(len(h["threads"]) == 1 for h in placed["hop_napi"].values())
        # a placement naming a missing CPU is refused before anything changes (the running
        # testbed, seen through a config that differs only there, keeps its threads)
        bad = tmp_path / "bad.yaml"
        bad.write_text(f"extends: {load_config().path}\ntestbed: {{name: hops, cpus: {{hops: {{from_generator: 0, from_lb: 4096}}}}}}\n")
        with pytest.raises(Exception, match=r"testbed.cpus.hops.from_lb: CPU 4096 does not exist"):
            get_testbed(load_config(bad)).place_dut("inline")
        assert tb.cpu_placement() == placed and threaded("fips5-p1") in ("1", "enabled")
    finally:
        tb.down()
    assert machine_state(own_prefix("h")) == before
    cfg.write_text(f"extends: {load_config().path}\ntestbed: {{name: hops, cpus: {{hops: {{from_lb: 4096}}}}}}\n")
    with pytest.raises(Exception, match=r"Failed to pin the NAPI of switch port fips5-p1: "
                                         r"testbed.cpus.hops.from_lb: CPU 4096 does not exist"):
        get_testbed(load_config(cfg)).up()
    assert machine_state(own_prefix("h")) == before
