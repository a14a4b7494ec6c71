"""The LB program's cost per frame (xenobench.progcost, xenobench.agents.bpf_stats): the agent turns
the kernel's BPF run-time statistics on exactly while it lives (also when killed), and on the
namespace testbed the phase counts one program run per frame the LB received."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xenobench.agents.bpf import bpftool
from xenobench.lb import get_lb
from xenobench.progcost import TAG, measure, prog_run_stats, run_time_stats, xdp_prog_id
from xenobench.testbed import SINK_OBJ, ensure_bpffs, unmount_bpffs_if_unused

from .conftest import needs_root, send_udp
from .test_ssh_transport import sshd, ssh_node  # noqa: F401  (module fixture: a real OpenSSH server)

pytestmark = [needs_root, pytest.mark.skipif(not SINK_OBJ.exists(), reason="switch/ not built (make -C switch)")]


@pytest.fixture
def sink(tmp_path):
    """A trivial XDP program loaded outside any testbed, and a way to run it N times."""
    mounted = ensure_bpffs()
    pin = Path("/sys/fs/bpf") / f"xbt-progcost-{tmp_path.name[-12:]}"
    bpftool("prog", "load", str(SINK_OBJ), str(pin), "type", "xdp")
    (tmp_path / "frame").write_bytes(bytes(64))
    pid = json.loads(bpftool("-j", "prog", "show", "pinned", str(pin)).stdout)["id"]

    def run(n: int) -> dict:
        bpftool("prog", "run", "pinned", str(pin), "data_in", str(tmp_path / "frame"), "repeat", str(n))
        d = json.loads(bpftool("-j", "prog", "show", "id", str(pid)).stdout)
        return {"run_cnt": d.get("run_cnt", 0), "run_time_ns": d.get("run_time_ns", 0)}

    yield run
    pin.unlink()
    if mounted:
        unmount_bpffs_if_unused(mounted)


def hold():
    p = subprocess.Popen([sys.executable, "-m", "xenobench.agents.bpf_stats", "hold"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert json.loads(p.stdout.readline()) == {"event": "started", "stats": "run_time"}
    return p


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_statistics_are_on_exactly_while_the_agent_lives(sink, how):
    off = sink(300)
    p = hold()
    try:
        on = sink(500)
    finally:
        p.send_signal(how)
        rc = p.wait(timeout=5)
    assert on["run_cnt"] - off["run_cnt"] == 500
    assert on["run_time_ns"] > off["run_time_ns"]
    if how == signal.SIGTERM:
        assert rc == 0 and json.loads(p.stdout.read()) == {"event": "stopped"}
    after = sink(700)
    assert after == on  # nothing left switched on, however the agent ended


def test_live_phase_times_one_run_per_frame_on_the_lb_ingress(testbed):
    lb = get_lb("wire", testbed)
    node, n = testbed.node("fips5"), 300
    assert measure(testbed, lambda: None) == {
        "skipped": "no XDP program on fips5:p0 to time (a hardware LB has none)"}
    def send():
        send_udp(testbed, "loadgen", src_ip="198.19.0.9", dst_mac=testbed.cfg.lb_mac,
                 dst_ip=testbed.cfg.service.vip, port=53, payload="w" * 22, count=n)
        time.sleep(0.2)
        return "sent"

    lb.start()
    try:
        pid = xdp_prog_id(node, "p0")
        got = measure(testbed, send)
        running_after = node.running(TAG)
        later = prog_run_stats(node, pid)
        send()
        untimed = prog_run_stats(node, pid)
    finally:
        lb.stop()
    assert (got["iface"], got["prog_id"], got["prog_name"], got["phase"]) == ("fips5:p0", pid, "wire", "sent")
    assert n <= got["runs"] <= n + 3  # an ARP refresh may pass meanwhile
    assert 0 < got["ns_per_run"] < 100_000 and got["run_time_ns"] == pytest.approx(got["ns_per_run"] * got["runs"])
    assert not running_after
    assert untimed["run_cnt"] == later["run_cnt"]  # statistics off again after the phase


def test_agent_refusal_is_reported_not_hung(testbed):
    """An agent that cannot turn the statistics on (here: an unknown architecture) fails the start
    with its own message and leaves no process behind."""
    from xenobench.errors import NodeError
    node = testbed.node("fips5")
    code = ("import platform, sys; platform.machine = lambda: 'vax'; "
            "from xenobench.agents.bpf_stats import hold; sys.exit(hold())")
    with pytest.raises(NodeError, match=r"Failed to start stats on fips5: Failed to turn BPF run-time "
                                        r"statistics on: bpf\(2\) syscall number unknown for vax"):
        node.start_until("xbt-stats", [sys.executable, "-c", code], '"event": "started"', what="stats", timeout=5)
    assert not node.running("xbt-stats")


def test_over_ssh_the_agent_and_the_program_counters_work_on_the_node(testbed, sshd):
    """The thesis testbed reaches fips5 over ssh: the same agent, started and stopped through a
    real OpenSSH server (in the dns_backend's namespace, whose eth0 carries the backends' sink),
    times the program there; the program id agrees with the one seen from the namespace."""
    d, server = sshd
    n = ssh_node(testbed, d, server, python=sys.executable)  # the node's python with xenobench
    count = 200
    try:
        pid = xdp_prog_id(n, server.iface().name)
        assert pid is not None and pid == xdp_prog_id(testbed.node(server.name), server.iface().name)
        with run_time_stats(n):
            assert n.running(TAG)
            before = prog_run_stats(n, pid)
            send_udp(testbed, "loadgen", src_ip="198.19.0.9", dst_mac=server.iface().mac,
                     dst_ip=server.iface().addr, port=9, payload="s" * 22, count=count)
            time.sleep(0.2)
            after = prog_run_stats(n, pid)
        assert not n.running(TAG)
        # the program also ran for the ssh session's own segments of the commands in between (5 here)
        assert count <= after["run_cnt"] - before["run_cnt"] <= count + 40
        assert after["run_time_ns"] > before["run_time_ns"] and after["name"] == "backend_sink"
    finally:
        n.remove_work_dir()
        n.close()
