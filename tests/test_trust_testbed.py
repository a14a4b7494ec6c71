"""A trial is only as good as the testbed it ran on: a backends file naming a node that is not a
backend, an LB whose forwarded count the backends did not receive, a backend's namespace gone
mid-trial, a testbed state left behind by a killed harness, two XDP programs fighting over one
port, and faults that used to end in a traceback. Each refused or recorded by name."""

from __future__ import annotations

import json
import os

import pytest

from xenobench.traffic import GENERATORS

from .conftest import needs_root

from xenobench.backends import check_testbed, load_backends, load_for_testbed
from xenobench.errors import BackendsError


def _file(tmp_path, entries, name="b.json"):
    f = tmp_path / name
    f.write_text(json.dumps({"backends": [{"name": n, "mac_address": m} for n, m in entries]}))
    return f


# --- 1. a backends file against the testbed's backend nodes ------------------------------------------
def _backend_macs(cfg):
    return {n.name: n.iface().mac for n in cfg.backend_nodes()}


def test_backends_file_of_the_testbeds_backend_nodes_is_accepted(local_cfg, tmp_path):
    macs = _backend_macs(local_cfg)
    f = _file(tmp_path, sorted(macs.items()))
    assert [b.name for b in load_for_testbed(f, local_cfg).backends] == sorted(macs)


REFUSED = [
    # (what the entry names, expected message after "Failed to load backends <f> (testbed <cfg>): ")
    ("loadgen", "backends[1].name: '{name}' is not a backend node (node {name} has role loadgen; the load "
                "balancer would send it real traffic); name only backend nodes ({backends}: role backend or "
                "dns_backend in {cfg}) or remove the entry"),
    ("client", "backends[1].name: '{name}' is not a backend node (node {name} has role client; the load "
               "balancer would send it real traffic); name only backend nodes ({backends}: role backend or "
               "dns_backend in {cfg}) or remove the entry"),
    ("unknown", "backends[1].name: 'fips9' is not a backend node ({cfg} has no node 'fips9'; the load "
                "balancer would send it real traffic); name only backend nodes ({backends}: role backend or "
                "dns_backend in {cfg}) or remove the entry"),
    ("wrong_mac", "backends[1].mac_address: 02:00:00:00:09:09 is not a MAC of node {b1} ({b1mac} on {b1if} "
                  "in {cfg}); put in {b1mac}"),
]


@pytest.mark.parametrize("case, expect", REFUSED, ids=[c for c, _ in REFUSED])
def test_backends_file_naming_a_non_backend_is_refused(local_cfg, tmp_path, case, expect):
    b0, b1 = local_cfg.backend_nodes()[:2]
    other = {"loadgen": local_cfg.role("loadgen"), "client": local_cfg.role("client")}.get(case)
    second = {"unknown": ("fips9", "02:00:00:00:09:09"), "wrong_mac": (b1.name, "02:00:00:00:09:09")}.get(
        case) or (other.name, other.iface().mac)
    f = _file(tmp_path, [(b0.name, b0.iface().mac), second])
    with pytest.raises(BackendsError) as e:
        load_for_testbed(f, local_cfg)
    backends = ", ".join(n.name for n in local_cfg.nodes.values() if n.role in ("backend", "dns_backend"))
    assert str(e.value) == f"Failed to load backends {f} (testbed {local_cfg.path}): " + expect.format(
        name=other.name if other else "", backends=backends, cfg=local_cfg.path, b1=b1.name,
        b1mac=b1.iface().mac, b1if=b1.iface().name)


def test_katran_start_refuses_the_loadgen_as_a_backend(local_cfg, tmp_path):
    """What made a Katran trial valid at 83 % loss: half of the ring went to the generator."""
    from xenobench.lb.katran import KatranLB

    class Testbed:
        cfg = local_cfg
    gen = local_cfg.role("loadgen")
    b0 = local_cfg.backend_nodes()[0]
    f = _file(tmp_path, [(b0.name, b0.iface().mac), (gen.name, gen.iface().mac)])
    load_backends(f)  # the file itself is well formed
    with pytest.raises(BackendsError, match=rf"backends\[1\]\.name: '{gen.name}' is not a backend node"):
        KatranLB(Testbed()).start(f, dry_run=True)


def test_check_testbed_returns_the_set(local_cfg):
    bs = load_backends(local_cfg.service.backends)
    assert check_testbed(bs, local_cfg) is bs


# --- 1b. an LB's forwarded count against the backends' rx, both ways -----------------------------------
def _lb_stats(packets: dict[str, int]) -> dict:
    return {"backends": [{"name": n, "packets": p} for n, p in packets.items()]}


RING = "(more than the 25% a ring on the way may lose)"
LB_COUNTS = [
    # (forwarded per backend, backends rx, dropped on the way, generator tx, reason or None when consistent)
    ({"fips2": 500, "fips3": 500}, 1000, 0, 1000, None),
    ({"fips2": 500, "fips3": 500}, 995, 0, 1000, None),            # within the tolerance (+10 frames)
    ({"fips2": 496832, "fips3": 496832}, 896502, 0, 993664, None),  # the rehearsal's DPU path: 90 % arrive
    ({"fips2": 1000, "fips3": 1000}, 1000, 0, 2000,                 # twice what the backends received
     f"lb forwarded 2000, backends received 1000, generator sent 2000: forwarded 1000 more than the backends "
     f"received or dropped on the way {RING}"),
    ({"fips2": 1000, "fips3": 1000}, 1000, 1000, 2000, None),      # a full ring dropped the rest, counted
    ({"fips2": 1000, "fips3": 1000}, 1000, 300, 2000,
     f"lb forwarded 2000, backends received 1000 and dropped 300, generator sent 2000: forwarded 700 more than "
     f"the backends received or dropped on the way {RING}"),
    ({"fips2": 500, "fips3": 500}, 2000, 0, 2000,
     "lb forwarded 1000, backends received 2000, generator sent 2000: forwarded fewer than the backends received"),
    ({"fips2": 1500, "fips3": 1500}, 3000, 0, 1000,
     "lb forwarded 3000, backends received 3000, generator sent 1000: forwarded more than the generator sent"),
    # half of Katran's ring on the generator: 83 % of the offered load lost, the trial used to be valid
    ({"fips2": 850, "fips4": 830}, 340, 0, 2000,
     f"lb forwarded 1680, backends received 340, generator sent 2000: forwarded 1340 more than the backends "
     f"received or dropped on the way {RING}; 830 to fips4, not a backend node of {{cfg}} (fips2, fips3)"),
]


@pytest.mark.parametrize("fwd, rx, dropped, tx, reason", LB_COUNTS)
def test_lb_counters_consistent_both_ways(local_cfg, fwd, rx, dropped, tx, reason):
    from xenobench.measure.common import lb_checks
    from xenobench.trials import Validity

    class LB:
        kind = "katran"
        cfg = local_cfg
    v = Validity()
    zero = {n: 0 for n in fwd}
    assert lb_checks(v, LB(), _lb_stats(zero), _lb_stats(fwd), rx, tx, dropped) == fwd
    assert v.valid is (reason is None)
    if reason is not None:
        assert v.reasons == [f"lb_counters_consistent: {reason.format(cfg=local_cfg.path)}"]


# --- 2. a backend's namespace deleted mid-trial ---------------------------------------------------------
SNAPS = [
    # (before, after, diffs' keys, failed)
    ({"a:x": "ok", "b:y": "ok"}, {"a:x": "ok", "b:y": "ok"}, ["a:x", "b:y"], []),
    ({"a:x": "ok", "b:y": "ok"}, {"a:x": "ok", "b:y": "E gone"}, ["a:x"],
     [{"node": "b", "iface": "y", "when": "after", "error": "E gone"}]),
    ({"a:x": "E down", "b:y": "ok"}, {"a:x": "E down", "b:y": "ok"}, ["b:y"],
     [{"node": "a", "iface": "x", "when": "both", "error": "E down"}]),
    ({"a:x": "E one", "b:y": "ok"}, {"a:x": "E two", "b:y": "ok"}, ["b:y"],
     [{"node": "a", "iface": "x", "when": "both", "error": "before: E one; after: E two"}]),
    ({"a:x": "ok"}, {"a:x": "ok", "b:y": "ok"}, ["a:x"],
     [{"node": "b", "iface": "y", "when": "before", "error": "not snapshotted"}]),
]


def _snap(key, what):
    node, _, iface = key.partition(":")
    if what.startswith("E "):
        return {"node": node, "iface": iface, "error": what}
    return {"node": node, "iface": iface, "driver": "veth", "time": 0.0, "monotonic": 0.0,
            "view": {"rx_packets": 1}, "ethtool": {}, "sysfs": {"rx_packets": 1}}


@pytest.mark.parametrize("before, after, keys, failed", SNAPS)
def test_counter_diffs_names_every_interface_it_could_not_diff(before, after, keys, failed):
    from xenobench.trials import counter_diffs
    d = counter_diffs({k: _snap(k, w) for k, w in before.items()}, {k: _snap(k, w) for k, w in after.items()})
    assert list(d) == keys
    assert d.failed == failed
    assert json.loads(json.dumps(d)) == dict(d)  # written into outputs.json as before


def _netns(name):
    import subprocess
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:  # a veth pair inside it (no dummy module on every kernel)
        subprocess.run(["ip", "-n", name, "link", "add", "d0", "type", "veth", "peer", "name", "d1"], check=True)
        subprocess.run(["ip", "-n", name, "link", "set", "d0", "up"], check=True)
    except subprocess.CalledProcessError:
        subprocess.run(["ip", "netns", "del", name])
        raise


@needs_root
def test_kept_reader_notices_its_namespace_deleted(local_cfg):
    """The reader's program keeps a deleted namespace alive (and its counters counting): the read
    after `ip netns del` fails by name instead of reading the orphan."""
    import subprocess

    from xenobench.errors import NodeError
    from xenobench.nodes import NetnsNode
    from xenobench.sampler import CounterReader
    node = NetnsNode(local_cfg, local_cfg.nodes[local_cfg.backend_nodes()[0].name])
    node.netns = f"{local_cfg.prefix}gone"
    _netns(node.netns)
    r = None
    try:
        r = CounterReader(node, "d0")
        assert r.read() == 0 and r.read_dropped() == 0
        subprocess.run(["ip", "netns", "del", node.netns], check=True)
        with pytest.raises(NodeError) as e:
            r.read()
        assert str(e.value) == (f"Failed to read /proc/net/dev of {node.name}: its network namespace {node.netns} "
                                f"was deleted (/var/run/netns/{node.netns}: No such file or directory); bring the "
                                "testbed up again (`xenobench testbed up`) and rerun the trial")
        _netns(node.netns)  # another namespace under the same name: the reader's is still the old one
        with pytest.raises(NodeError, match=rf"namespace {node.netns} was replaced since the reader started"):
            r.read()
    finally:
        if r is not None:
            r.close()
        subprocess.run(["ip", "netns", "del", node.netns], capture_output=True)


@needs_root
def test_snapshot_of_a_deleted_namespace_is_a_failed_interface(local_cfg):
    import subprocess

    from xenobench.nodes import NetnsNode
    from xenobench.trials import _snap_all, counter_diffs
    node = NetnsNode(local_cfg, local_cfg.nodes[local_cfg.backend_nodes()[0].name])
    node.netns = f"{local_cfg.prefix}gone"

    class Testbed:
        def node(self, name):
            return node
    _netns(node.netns)
    try:
        before = _snap_all(Testbed(), [(node.name, "d0")])
    finally:
        subprocess.run(["ip", "netns", "del", node.netns], check=True)
    after = _snap_all(Testbed(), [(node.name, "d0")])
    d = counter_diffs(before, after)
    assert dict(d) == {}
    assert [(f["node"], f["iface"], f["when"]) for f in d.failed] == [(node.name, "d0", "after")]
    assert d.failed[0]["error"].startswith(f"Failed to read counters of {node.name}:d0: ")


# --- 3. a harness killed inside a point: the testbed's state read back, not its record ----------------
def test_place_dut_resets_the_napi_threads_scheduling_left_by_a_killed_rank(testbed):
    """rank runs the DUT's NAPI thread at other priorities and restores it in a `finally`; a
    SIGKILL skips that, and place_dut trusted its record ("threaded")."""
    testbed.place_dut("threaded")
    prio = int(testbed.cfg.section("testbed")["cpus"]["dut_rt_priority"])
    want = f"SCHED_FIFO {prio}" if prio else "SCHED_OTHER 0"
    napi = testbed.napi
    dut = napi.placed_threads()["dut"]
    cpu = testbed.cfg.section("testbed")["cpus"]["dut"]
    other_cpu = (cpu + 1) % (os.cpu_count() or 1)
    napi.dut_priority(0 if prio else 10)  # what a killed rank repetition leaves behind
    import subprocess
    for pid in dut:
        subprocess.run(["taskset", "-pc", str(other_cpu), pid], check=True, capture_output=True)
    assert set(napi.read_back()["dut_napi"]["scheduling"].values()) != {want}
    testbed.place_dut("threaded")
    back = napi.read_back()["dut_napi"]
    assert set(back["scheduling"].values()) == {want}, back
    assert set(back["threads"].values()) == {str(cpu)}, back
    assert napi.restore() == []  # nothing left to put back


def test_restore_state_reports_what_it_put_back(testbed):
    testbed.place_dut("threaded")
    prio = int(testbed.cfg.section("testbed")["cpus"]["dut_rt_priority"])
    testbed.napi.dut_priority(0 if prio else 10)
    fixed = testbed.restore_state()
    (pid, comm), = testbed.napi.placed_threads()["dut"].items()
    ns, dev = testbed.napi._lb_ingress()
    was = "SCHED_OTHER 0" if prio else "SCHED_FIFO 10"
    assert fixed == [f"{comm} (pid {pid}) of {ns}:{dev}: scheduling {was} -> "
                     f"{'SCHED_FIFO ' + str(prio) if prio else 'SCHED_OTHER 0'}"]
    assert testbed.restore_state() == []


KILLED_HARNESS = """
import os, sys, time
from xenobench.config import load_config
from xenobench.testbed import get_testbed
from xenobench.traffic import start_traffic
tb = get_testbed(load_config(sys.argv[1]))
start_traffic(tb, "udp_payload", {"payload": 22, "flows": 4}, 2000)  # open-ended: no duration
print("sending", flush=True)
time.sleep(60)
"""


def _leftover_generator(tb):
    """An open-ended run of the testbed's generator, of a harness killed with SIGKILL inside it."""
    import signal
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", KILLED_HARNESS, str(tb.cfg.path)], stdout=subprocess.PIPE,
                         text=True, env={**os.environ})
    assert p.stdout.readline().strip() == "sending"
    p.send_signal(signal.SIGKILL)
    p.wait()


#: the local generators (those a harness starts as a process on the loadgen node)
LOCAL_GENERATORS = [name for name, g in GENERATORS.items() if g.leftover is not None]


@pytest.fixture(scope="module", params=LOCAL_GENERATORS)
def gtb(testbed, tmp_path_factory, request):
    """The session's namespace testbed through a config that selects each local generator."""
    from xenobench.config import load_config
    from xenobench.testbed import get_testbed
    p = tmp_path_factory.mktemp("trust") / f"{request.param}.yaml"
    p.write_text(f"extends: {testbed.cfg.path.resolve()}\ntraffic:\n  generator: {request.param}\n")
    return get_testbed(load_config(p))


def _tag(tb) -> str:
    return tb.cfg.section("traffic")["generator"]


def test_a_killed_harness_leaves_no_generator_that_blocks_later_trials(gtb):
    from xenobench.traffic import run_traffic
    lg = gtb.node(gtb.cfg.role("loadgen").name)
    _leftover_generator(gtb)
    assert lg.running(_tag(gtb))  # still sending, the harness gone
    r = run_traffic(gtb, "udp_payload", {"payload": 22, "flows": 4}, 2000, count=200)
    assert r["tx_packets"] == 200, r  # sent, where it used to fail "already running"
    assert not lg.running(_tag(gtb))


def test_restore_state_puts_back_what_this_prefixs_generator_left(gtb):
    """Whichever local generator a killed harness ran: its process, and trafgen's pacing qdisc (which
    would pace every later trial on the port) are put back and named."""
    tag = _tag(gtb)
    lg = gtb.node(gtb.cfg.role("loadgen").name)
    iface = lg.ncfg.iface().name
    _leftover_generator(gtb)
    pid = lg.handle(tag).pid
    fixed = gtb.restore_state()
    assert fixed[0].startswith(f"{tag} pid {pid} on {lg.name} (recorded, "), fixed
    if tag == "trafgen":
        assert fixed[1:] == [f"trafgen's tbf qdisc on {lg.name}:{iface}"], fixed
    assert not lg.running(tag)
    assert "tbf" not in lg.run(["tc", "qdisc", "show", "dev", iface, "root"]).stdout
    assert gtb.restore_state() == []


# --- 4. DNS through Katran, whichever starts first ------------------------------------------------------
def _katran_missing() -> str | None:
    from xenobench import katran
    try:
        katran.locate()
    except katran.KatranError as e:
        return str(e)
    return None


def _backend_xdp(testbed) -> dict:
    import subprocess

    from xenobench.nodes import NETNS_RUN_DIR
    out = {}
    for b in testbed.cfg.backend_nodes():
        p = subprocess.run(["nsenter", f"--net={NETNS_RUN_DIR / (testbed.cfg.prefix + b.name)}", "--", "ip", "-j",
                            "link", "show", "dev", b.iface().name], capture_output=True, text=True, check=True)
        xdp = json.loads(p.stdout)[0].get("xdp")
        out[b.name] = xdp["prog"]["name"] if xdp else None
    return out


@needs_root
@pytest.mark.skipif(_katran_missing() is not None, reason=f"no Katran checkout: {_katran_missing()}")
@pytest.mark.parametrize("server", ["xdp", "python"])
def test_dns_answers_through_katran_started_after_it(testbed, tmp_path, server):
    """The DNS server started after Katran used to replace Katran's decap chain on the backend (the
    XDP responder, or the sink's release taking the chain off for the kernel's servers): 0 of 50
    answered. Its decap goes back in front of the server, and of the sink when the server stops."""
    from xenobench import katran
    from xenobench.dns import start_server, stop_server
    from xenobench.lb import get_lb
    from xenobench.rtt import probe
    for b in testbed.cfg.backend_nodes():
        testbed.restore_backend_sink(b.name)
    idle = _backend_xdp(testbed)
    dns_node = testbed.cfg.role("dns_backend").name
    lb = get_lb("katran", testbed)
    lb.start()
    try:
        started = start_server(testbed, server)
        try:
            assert started["behind_decap"] is True
            assert set(_backend_xdp(testbed).values()) == {katran.DECAP_CHAIN_PROG}
            s = probe(testbed, count=50, rate_qps=200, out=tmp_path / "p.jsonl", capture=False)
        finally:
            stop_server(testbed, server)
        assert s["n"] == 50 and s.get("lost", 0) == 0, s
        # the server gone, Katran still running: its decap is in front of the sink again
        assert _backend_xdp(testbed)[dns_node] == katran.DECAP_CHAIN_PROG
    finally:
        assert lb.stop() is True
    assert _backend_xdp(testbed) == idle


# --- 5. faults that used to end in a traceback ----------------------------------------------------------
def _invalid_trial(tmp_path):
    from .test_aggregate_report import _trial
    root = tmp_path / "results"
    kw = dict(point={"lb": "xenoflow", "payload": 22}, outputs={"payload": 22, "rx_pps": 1.0})
    bad = _trial(root / "local", "pps", "lb-xenoflow_payload-22", 2, valid=False, reasons=["lb_alive: gone"], **kw)
    (bad.parent / "point.json").write_text("{}")
    return root, bad


def _retry(root):
    from click.testing import CliRunner

    from xenobench.cli import main
    return CliRunner().invoke(main, ["--config", "config/local.yaml", "experiment", "retry-invalid", "--results",
                                     str(root)])


RETRY_FAULTS = [
    ("stale_is_a_file", "Failed to set aside {bad}: {stale} is not a directory (trials set aside go there); move it "
                        "away (`mv {stale} {stale}.old`) and run the command again"),
    ("read_only_tree", "Failed to set aside {bad}: {stale}: Read-only file system (the trial moves to {stale}); make "
                       "the results tree writable (remount it read-write or fix its permissions) and run the command "
                       "again, or copy it somewhere writable and give --results"),
]


@pytest.mark.parametrize("fault, expect", RETRY_FAULTS, ids=[f for f, _ in RETRY_FAULTS])
def test_retry_invalid_refuses_what_it_cannot_move_by_name(tmp_path, fault, expect):
    import subprocess
    root, bad = _invalid_trial(tmp_path)
    stale = bad.parent / "stale"
    mounted = False
    if fault == "stale_is_a_file":
        stale.write_text("not a directory\n")
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root: a read-only bind mount (root ignores file modes)")
        subprocess.run(["mount", "--bind", str(root), str(root)], check=True)
        mounted = True
        subprocess.run(["mount", "-o", "remount,ro,bind", str(root)], check=True)
    try:
        res = _retry(root)
    finally:
        if mounted:
            subprocess.run(["umount", str(root)], check=True)
    assert res.exit_code != 0 and (res.exception is None or isinstance(res.exception, SystemExit)), res.output
    assert "Traceback" not in res.output
    assert expect.format(bad=bad, stale=stale) in res.output, res.output
    assert bad.is_dir() and (bad.parent / "point.json").exists()  # nothing moved, nothing removed


SSH_PEERS = [
    # (what the peer does, paramiko's one line, the NodeError's reason)
    ("garbage", "Exception (client): Expecting packet from (20,), got 255", "Expecting packet from (20,), got 255"),
    ("silent", "Exception (client): Error reading SSH protocol banner",
     "its sshd did not answer (no SSH banner within 1 s: paramiko: "),
]


@pytest.mark.parametrize("peer, line, reason", SSH_PEERS, ids=[p for p, _, _ in SSH_PEERS])
def test_paramiko_logs_one_line_per_failed_connection(local_cfg, caplog, peer, line, reason):
    """A node's sshd that stays silent or talks garbage: paramiko's transport thread logged the
    failure and then its traceback, one record per line, through the root logger."""
    import dataclasses
    import logging
    import socket
    import threading
    import time

    from xenobench.config import SshConfig
    from xenobench.errors import NodeError
    from xenobench.nodes import SshNode
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        c, _ = srv.accept()
        if peer == "garbage":  # a banner, then a packet of a type no key exchange starts with
            c.sendall(b"SSH-2.0-x\r\n" + b"\x00\x00\x00\x2c\x04" + b"\xff" * 60)
        time.sleep(2.5)
        c.close()
    threading.Thread(target=serve, daemon=True).start()
    sc = SshConfig(host="127.0.0.1", port=srv.getsockname()[1], user="root", key=__file__, known_hosts="/dev/null",
                   connect_timeout=1)
    name = local_cfg.backend_nodes()[0].name
    node = SshNode(local_cfg, dataclasses.replace(local_cfg.nodes[name], transport="ssh", ssh=sc))
    with caplog.at_level(logging.DEBUG, logger="paramiko.transport"):
        with pytest.raises(NodeError) as e:
            node.run(["true"])
        time.sleep(0.3)  # the transport thread's last records
    srv.close()
    assert f"Failed to connect to node {name} (root@127.0.0.1:{sc.port}): {reason}" in str(e.value)
    errors = [r.getMessage() for r in caplog.records if r.name == "paramiko.transport" and r.levelno >= logging.ERROR]
    assert errors == [line]


@needs_root
def test_agent_on_a_node_without_bpffs_names_the_mount():
    """An agent whose /sys/fs/bpf is the bare sysfs directory (no bpf mount: a fresh host) failed
    with FileNotFoundError from mkdir; it names the mount to make and exits 2."""
    import shutil
    import subprocess
    import sys

    from xenobench.agents.dns_xdp import OBJ
    if not OBJ.exists():
        pytest.skip(f"{OBJ} is not built (scripts/build.sh)")
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1): a mount namespace without the bpf mount")
    pin = "/sys/fs/bpf/xh3-nobpffs/dns-xdp"
    agent = shlex_join([sys.executable, "-m", "xenobench.agents.dns_xdp", "run", "--pin-dir", pin, "--iface", "lo",
                        "--vip", "198.18.0.100", "--zone", "example.", "--answer", "198.18.0.2",
                        "--src-mac", "02:00:00:00:02:00"])
    p = subprocess.run(["unshare", "-m", "sh", "-c", f"umount -l /sys/fs/bpf 2>/dev/null; exec {agent}"],
                       capture_output=True, text=True, timeout=60)
    assert "Traceback" not in p.stderr
    assert (p.returncode, p.stderr.strip()) == (2, f"Failed to pin under {pin}: /sys/fs/bpf is not a BPF file system "
                                                   "(sysfs 0x62656572); mount one there: `mount -t bpf bpf /sys/fs/bpf`")


def shlex_join(argv):
    import shlex
    return shlex.join(argv)


BPFFS_ROWS = [
    # (`stat -f -c '%t %T' /sys/fs/bpf` on the node: exit status, stdout, stderr), (ready, detail, fix)
    ((0, "cafe4a11 bpf_fs\n", ""), (True, "bpf_fs", "")),
    ((0, "62656572 sysfs\n", ""), (False, "sysfs (0x62656572), not bpf", "mount -t bpf bpf /sys/fs/bpf")),
    ((1, "", "stat: cannot read file system information for '/sys/fs/bpf': No such file or directory\n"),
     (False, "stat: cannot read file system information for '/sys/fs/bpf': No such file or directory, not bpf",
      "mount -t bpf bpf /sys/fs/bpf")),
]


@pytest.mark.parametrize("stat, row", BPFFS_ROWS)
def test_deploy_readiness_row_for_bpffs(stat, row):
    from xenobench.deploy import bpffs_row
    from xenobench.nodes import CommandResult
    rc, out, err = stat
    r = bpffs_row("fips5", "lb", CommandResult(["stat"], rc, out, err, "fips5"))
    assert (r.node, r.role, r.check) == ("fips5", "lb", "bpffs /sys/fs/bpf")
    assert (r.ready, r.detail, r.fix) == row


def test_restore_state_of_another_prefix_leaves_this_generator_running(gtb, monkeypatch):
    """Concurrent testbeds on one machine differ by prefix: another prefix's set-up must not stop
    this one's generator (its record lives under its own state directory, its processes in its own
    namespaces)."""
    from xenobench.config import load_config
    from xenobench.testbed import get_testbed
    TAG = _tag(gtb)
    lg = gtb.node(gtb.cfg.role("loadgen").name)
    _leftover_generator(gtb)
    try:
        monkeypatch.setenv("XENOBENCH_NS_PREFIX", gtb.cfg.prefix.rstrip("-") + "o-")
        other = get_testbed(load_config(gtb.cfg.path))
        assert other.cfg.prefix != gtb.cfg.prefix
        assert other.restore_state() == []
        assert lg.running(TAG)
    finally:
        monkeypatch.undo()
        gtb.restore_state()
    assert not lg.running(TAG)


# --- 4. the harness's own CPUs while the NAPI runs inline ----------------------------------------------
HARNESS_CPUS = [
    # (mode, generator's CPU, CPUs the harness was started with, CPUs it keeps to)
    ("inline", 0, {0, 1}, {1}),
    ("inline", 1, {0, 1, 2, 3}, {0, 2, 3}),
    ("inline", 0, {0}, {0}),  # nothing else to run on: left as started
    ("inline", 2, {0, 1}, {0, 1}),  # started away from the generator already
    ("inline", None, {0, 1}, {0, 1}),  # the generator not pinned, or harness_off_generator false
    ("threaded", 0, {0, 1}, {0, 1}),  # rates: the DUT's CPU runs its NAPI thread at SCHED_FIFO
]


@pytest.mark.parametrize("mode,gen,allowed,want", HARNESS_CPUS)
def test_harness_cpus(mode, gen, allowed, want):
    from xenobench.testbed.napi import harness_cpus
    assert harness_cpus(mode, gen, allowed) == want


def _cpu_list(text: str) -> set[int]:
    """/proc's Cpus_allowed_list ("1", "0,2-3") as a set."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


@needs_root
def test_inline_placement_keeps_the_harness_and_what_it_starts_off_the_generators_cpu(testbed):
    """A paced background through an inline path leaves the generator's CPU little to spare: the
    harness's threads (one started before the placement too) and a process it starts afterwards on
    a node keep off it, the trial's metadata says where the harness ran, and the rates' placement
    gives the harness back every CPU it was started with."""
    import threading
    gen = testbed.napi.generator_cpu()
    started = set(os.sched_getaffinity(0))
    if gen is None or started <= {gen}:
        pytest.skip(f"the generator's CPU {gen} is the only CPU this process may use ({sorted(started)})")
    want = started - {gen}
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        testbed.place_dut("inline")
        assert {int(x): os.sched_getaffinity(int(x)) for x in os.listdir("/proc/self/task")} == \
            dict.fromkeys(map(int, os.listdir("/proc/self/task")), want)
        assert os.sched_getaffinity(t.native_id) == want
        r = testbed.node_for_role("loadgen").run(["grep", "^Cpus_allowed_list:", "/proc/self/status"])
        assert _cpu_list(r.stdout.split()[-1]) == want
        assert testbed.cpu_placement()["harness_cpus"] == sorted(want)
    finally:
        testbed.place_dut("threaded")
        stop.set()
    assert os.sched_getaffinity(0) == started
    assert os.sched_getaffinity(t.native_id) == started
    assert testbed.cpu_placement()["harness_cpus"] == sorted(started)
