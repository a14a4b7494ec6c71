"""The rehearsal lab (standins/rehearsal) with the harness against it over real SSH: the day-one
defects of the thesis testbed, each as an operator meets it.

One lab for the module (config/rehearsal-ci.yaml, namespaces of the test prefix), built without
the DPU's sudoers rule: the tests run in file order, the last one takes the lab down (after a
half-failed `up` too) and checks nothing is left.
"""

import os
import re
import shlex
import socket
import subprocess
import time
from pathlib import Path

import pytest

from xenobench import REPO_ROOT
from xenobench.config import load_config
from xenobench.deploy import check_node, deploy, dpu_sudo_commands
from xenobench.errors import NodeError
from xenobench.lb import get_lb
from xenobench.dpu import sudoers_rule
from xenobench.testbed import get_testbed
from xenobench.testbed.topology import existing_namespaces

from .conftest import needs_root

CONFIG = REPO_ROOT / "config" / "rehearsal-ci.yaml"

pytestmark = [needs_root, pytest.mark.e2e]


@pytest.fixture(scope="module")
def lab():
    from standins.rehearsal.lab import Lab
    from xenobench.testbed import bpffs_mount_id
    had_bpffs = bpffs_mount_id() is not None
    lab = Lab(CONFIG)
    lab.up()  # mounts the host's bpffs for the switch's pins where the machine has none
    assert bpffs_mount_id() is not None
    yield lab
    lab.down()
    assert (bpffs_mount_id() is not None) == had_bpffs, "lab down left the host's bpffs other than found"


@pytest.fixture(scope="module")
def testbed(lab):
    tb = get_testbed(load_config(CONFIG))
    yield tb
    tb.down(purge=True)


def test_a_second_lab_is_refused_while_another_is_up(tmp_path):
    """Two labs share the management LAN of the config: the second `up` refuses by name before it
    builds anything (before, its sshds answered the first lab's addresses: "host key does not match")."""
    from standins.rehearsal.lab import Lab, LabError
    lab = Lab(CONFIG)
    lab.record_file = tmp_path / f"{lab.prefix}rehearsal.json"
    (tmp_path / "xzz-rehearsal.json").write_text("{}")
    before = existing_namespaces()
    with pytest.raises(LabError, match=rf"Failed to build the rehearsal lab {lab.prefix}: the lab xzz- is up "
                                       r".* take it down first \(XENOBENCH_NS_PREFIX=xzz- python -m standins.rehearsal down\)"):
        lab.up()
    assert existing_namespaces() == before and not lab.record_file.exists()


def _ssh(tb, node, script):
    return tb.node(node).run(["sh", "-c", script], check=False)


def test_bare_nodes_hold_nothing_before_deploy_and_run_the_agents_after(lab, testbed):
    """Day one, defect 2: the nodes have no xenobench until `deploy` ships it; then the agents run
    there (python3 -m xenobench.agents...) from the shipped artefact alone."""
    for n in testbed.nodes():
        r = _ssh(testbed, n.name, "ls -A /work; ls -A ~; ls -A /tmp; python3 -c 'import xenobench' 2>/dev/null || echo no-xenobench")
        assert r.stdout.split() == [".ssh", "no-xenobench"], \
            (n.name, r.stdout)
        assert not n.run(n.python_argv("xenobench.agents.udpcheck", "--help"), check=False).ok
    shipped, rows = deploy(testbed)
    assert {s["node"] for s in shipped if s.get("hash")} == set(testbed.cfg.nodes)
    assert all(s["copied"] for s in shipped)
    for n in testbed.nodes():
        r = n.run(n.python_argv("xenobench.agents.udpcheck", "--help"), check=False)
        assert r.ok and "udpcheck" in r.stdout, (n.name, r.stderr)
    # still nothing of the repository: the agents came from the artefact in the login's home
    n = testbed.node("fips5")
    r = n.run(["env", *(f"{k}={v}" for k, v in n.python_env().items()), "python3", "-c",
               "import xenobench, os; print(xenobench.__file__, os.listdir('/work'))"])
    assert r.stdout.strip() == "/root/xenobench-deploy/current/xenobench/__init__.py []", r.stdout
    # a second deploy copies nothing (content-addressed)
    again, _ = deploy(testbed)
    assert not any(s["copied"] for s in again)
    # the only rows missing: the DPU login's sudo (no rule yet), the checks it blocks (the eSwitch
    # mode is root's to read, the OVS bridges, hw-offload and flavour: its database socket is root's),
    # and the root-owned programs the operator installs
    missing = {(r.node, r.check) for r in rows if not r.ready}
    assert missing == {("fips5-dpu", c) for c in (
        "sudo -n (the rule)", "root-owned programs of the rule", "XenoFlow installed",
        "eSwitch mode p0 (0000:03:00.0)", "eSwitch mode p1 (0000:03:00.1)", "OVS bridge ovsbr2",
        "OVS hw-offload", "OVS flavour")}, missing


def test_vip_not_configured_on_backends_and_the_testbed_check_passes(lab, testbed):
    """Day one, defect 3: the VIP is on no backend (as on the thesis testbed); `testbed check`
    still proves the VIP-addressed frame arrives (udpcheck receives on the interface)."""
    vip = testbed.cfg.service.vip
    for b in testbed.cfg.backend_nodes():
        addrs = _ssh(testbed, b.name, "ip -o addr show").stdout
        assert f" {vip}/" not in addrs, (b.name, addrs)
    rows = testbed.check()
    assert [(d, ok) for d, ok, _ in rows] == [(d, True) for d, _, _ in rows], rows
    assert sum(f"UDP to VIP {vip}" in d for d, _, _ in rows) == len(testbed.cfg.backend_nodes())


def test_dpu_sudo_asking_for_a_password_names_the_sudoers_rule(lab, testbed):
    """Day one, defect 4: the stock BFB login's sudo asks for a password; the deploy rows and the
    OVS step name the rule to install (not "is Open vSwitch running there?"). The eSwitch mode is
    read through the rule too: devlink's eswitch-get is the kernel's to root only, and the lab's
    devlink refuses the login as the kernel does. Once the lab installs exactly that rule, the
    rows pass, and the one left is the operator's install of the XenoFlow build."""
    dpu = testbed.node("fips5-dpu")
    rule = sudoers_rule("ubuntu", dpu_sudo_commands(testbed.cfg, home="/home/ubuntu"))
    r = dpu.run(["sudo", "-n", "/usr/bin/ovs-vsctl", "list-br"], check=False)
    assert r.stderr.strip() == "sudo: a password is required"
    r = dpu.run(["devlink", "dev", "eswitch", "show", "pci/0000:03:00.0"], check=False)
    assert (r.returncode, r.stderr.strip()) == (1, "kernel answers: Operation not permitted")
    rows = {r.check: r for r in check_node(testbed.cfg, dpu)}
    assert not rows["sudo -n (the rule)"].ready and shlex.quote(rule) in rows["sudo -n (the rule)"].fix
    assert not rows["OVS bridge ovsbr2"].ready and rows["OVS bridge ovsbr2"].detail == "sudo asks for a password"
    esw = [r for c, r in rows.items() if c.startswith("eSwitch mode")]
    assert len(esw) == 2 and all(not r.ready and shlex.quote(rule) in r.fix for r in esw), esw
    lb = get_lb("xenoflow", testbed)
    with pytest.raises(NodeError) as e:
        lb.apply_ovs(dpu)
    assert str(e.value) == ("Failed to apply the OVS rule on fips5-dpu: sudo asks ubuntu for a password "
                            "(xenoflow.sudo: true runs `sudo -n`); install the rule "
                            f"`{rule}` in /etc/sudoers.d/xenobench (`xenobench deploy` prints the command)")
    assert lab.install_sudo_rule() == rule
    rows = {r.check: r for r in check_node(testbed.cfg, dpu)}
    assert rows["sudo -n (the rule)"].ready and rows["OVS bridge ovsbr2"].ready, rows
    assert all(r.ready for c, r in rows.items() if c.startswith("eSwitch mode")), rows
    assert rows["OVS bridge ovsbr2"].detail == "bridges: ovsbr1, ovsbr2"
    assert not rows["XenoFlow installed"].ready  # nothing built yet: the operator installs the build
    assert rows["XenoFlow installed"].fix.startswith("sudo install -D -o root -g root -m 0755 ")
    assert lb.apply_ovs(dpu)[-1] == ("sudo -n /usr/bin/ovs-ofctl -O OpenFlow12 add-flow ovsbr2 "
                                     "ip,in_port=pf1hpf,actions=output:p1")
    flows = lab.in_node("fips5-dpu", "ovs-ofctl", "-O", "OpenFlow12", "--names", "dump-flows", "ovsbr2").stdout
    assert "ip,in_port=pf1hpf actions=output:p1" in flows
    lab.in_node("fips5-dpu", "ovs-ofctl", "-O", "OpenFlow12", "del-flows", "ovsbr2", "ip,in_port=pf1hpf")


HOST_FRAMES = 200
#: fips1 sends HOST_FRAMES frames to the lb host's MAC: they cross the DPU's p0 to pf0hpf (ethertype
#: 0x88b5, IEEE 802 local experimental: nothing on the way answers them)
SEND_TO_HOST = ("import socket; s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); "
                "s.bind(('enp24s0f0np0', 0)); f = bytes.fromhex('c470bda056ac' 'a088c2b6141a' '88b5') + bytes(50); "
                f"[s.send(f) for _ in range({HOST_FRAMES})]")


def test_ovs_hw_offload_off_is_named_by_deploy_and_by_the_xenoflow_check(lab, testbed):
    """The thesis's first state of the BlueField (§6.1: the load bound to one Arm core until OVS was set
    up): the lab's OVS with other_config:hw-offload false keeps its bridges on OVS's userspace path,
    so frames for the host reach p0's kernel stack (the lab's mlx5 counters stand-in: rx_packets =
    rx_packets_phy); deploy's row names the fix and XenoFlow's per-trial check fails naming the
    frames and the setting. On (the lab's default), the eSwitch stand-in takes them before the
    stack: the row and the check pass, and the frames still reach the host."""
    from xenobench import dpu as dpu_mod
    from xenobench.lb.inhardware import CHECK
    lab.install_sudo_rule()
    dpu, client = testbed.node("fips5-dpu"), testbed.node("fips1")
    proof = get_lb("xenoflow", testbed).in_hardware
    fix = dpu_mod.ovs_hw_offload_fix()

    def host_rx():
        return int(lab.in_node("fips5", "cat", "/sys/class/net/enp13s0f0np0/statistics/rx_packets").stdout)

    def window():
        r0, h0 = proof.read(), host_rx()
        client.run(["python3", "-c", SEND_TO_HOST])
        time.sleep(0.5)
        return proof.judge(r0, proof.read()), host_rx() - h0

    try:
        lab.set_hw_offload(False)
        row = {r.check: r for r in check_node(testbed.cfg, dpu)}["OVS hw-offload"]
        assert (row.ready, row.fix) == (False, fix), row
        v, got = window()
        assert v["check"] == CHECK and not v["ok"]
        sw, phy = v["values"]["software_rx"], v["values"]["phy_rx"]
        assert HOST_FRAMES <= phy <= HOST_FRAMES + 5 and sw == phy, v  # every frame through the node's stack
        assert v["reason"] == (f"fips5-dpu: {sw} of the {phy} frames p0 received reached the Arm's kernel (100.0%; "
                               "rx_packets + rx_out_of_buffer against rx_packets_phy; limit 1.0%, "
                               "xenoflow.max_software_rx_share); OVS other_config:hw-offload is not true (false at the "
                               f"start; false at the end; fix: {fix})")
        assert got >= HOST_FRAMES  # OVS's userspace path forwards them
        eth = dpu.run(["ethtool", "-S", "p0"]).stdout
        assert "Rehearsal stand-in (standins/rehearsal): mlx5 uplink counters from this veth:" in eth
        lab.set_hw_offload(True)
        row = {r.check: r for r in check_node(testbed.cfg, dpu)}["OVS hw-offload"]
        assert (row.ready, row.detail) == (True, "other_config:hw-offload=true"), row
        v, got = window()
        assert v["ok"] and v["values"]["software_rx"] == 0 and v["values"]["phy_rx"] >= HOST_FRAMES, v
        assert v["values"]["ovs_hw_offload"] == {"start": "true", "end": "true"}
        assert HOST_FRAMES <= got <= HOST_FRAMES + 5  # the stand-in forwards each once (OVS's copy dropped)
        assert not [x for x in lab.leftovers() if "fips5-dpu" in x and "XDP" in x]  # the stand-in is the lab's
    finally:
        lab.set_hw_offload(True)


# --- faults over SSH mid-trial: each named in the trial's record, the next trial runs ---------
def _sleeper_trial(testbed, lab, trial, fault):
    """One trial whose actor is a process the harness started on fips2 (`sleep`, in its own session
    as every started process); `fault` hits 0.3 s in; the attempt then checks its actors until one is
    gone (at most 5 s): the record is what the harness made of the fault."""
    from xenobench.actors import tagged
    from xenobench.trials import Validity, run_trial
    node = testbed.node("fips2")
    if not node.running("fault-sleeper"):
        node.start("fault-sleeper", ["sleep", "300"])

    def procedure(ctx):
        ctx.watch.add("sleeper", "sleeper on fips2", tagged(node, "fault-sleeper"))
        time.sleep(0.3)
        if fault:
            fault()
        for _ in range(50 if fault else 3):  # without a fault: a few checks, all alive
            if ctx.watch.check():
                break
            time.sleep(0.1)
        return {}, Validity()
    return run_trial(testbed, "pps", {"fault": "ssh"}, 1, trial, procedure, ifaces=[("fips2", "enp24s0f0np0")],
                     max_attempts=1, settle_s=0, cooldown_s=0, progress=lambda m: None)


SSH_FAULTS = [  # case, the fault, whether the sleeper outlives it
    ("connection_drops", lambda lab: lab.drop_ssh("fips2"), True),
    ("sshd_restarts", lambda lab: lab.restart_sshd("fips2", down_s=1.0), True),
    ("host_reboots", lambda lab: lab.reboot("fips2", down_s=0.5), False),
]


@pytest.mark.parametrize("case,fault,survives", SSH_FAULTS, ids=[c[0] for c in SSH_FAULTS])
def test_ssh_fault_mid_trial_is_named_and_the_next_trial_runs(lab, testbed, tmp_path, case, fault, survives):
    """The SSH connection to fips2 drops (its session's sshd killed), sshd restarts with its sessions,
    or the host reboots (namespace deleted and made again) while a trial watches a process there:
    the trial is invalid, `ssh_fips2` names the node, the login and when the loss was found; a
    dead or unreadable actor is named too. The next trial, in the same harness, reconnects and is
    valid (with the sleeper started again where the reboot ended it); nothing is left on the node."""
    from xenobench.layout import TrialDir
    from xenobench.nodes.ssh import SshNode
    node = testbed.node("fips2")
    assert isinstance(node, SshNode)
    res = _sleeper_trial(testbed, lab, TrialDir(tmp_path / "rep-1"), lambda: fault(lab))
    [a] = res["attempts"]
    assert res["valid"] is False and a["checks"]["ssh_fips2"] is False, a
    [reason] = [r for r in a["reasons"] if r.startswith("ssh_fips2: ")]
    assert re.fullmatch(r"ssh_fips2: the SSH connection to fips2 \(root@203\.0\.113\.6:22\) was lost: found "
                        r"\d+\.\d\d s into the attempt \(.+\), (connected again at \d+\.\d\d s|not connected again)"
                        r"(; .+)?", reason), reason
    assert res["outputs"]["connections"]["fips2"][0]["found_s"] >= 0.3
    if survives and case == "connection_drops":  # the process outlived the connection (setsid)
        assert a["checks"]["sleeper_alive"] is True, a["reasons"]
    if not survives:  # the reboot ended it: named, by pid and node
        [gone] = [r for r in a["reasons"] if r.startswith("sleeper_alive: ")]
        assert re.match(r"sleeper_alive: sleeper on fips2 \(pid \d+ on fips2\) (died|could not be checked)", gone), gone
    lab.wait_sshd("fips2")
    again = _sleeper_trial(testbed, lab, TrialDir(tmp_path / "rep-2"), None)
    assert again["valid"] is True, again["attempts"]
    assert "connections" not in again["outputs"]
    testbed.node("fips2").stop("fault-sleeper")
    assert [x for x in lab.leftovers() if x.startswith("fips2: process")] == []


def test_trex_server_killed_mid_trial_is_named_and_started_again(lab, testbed, tmp_path, monkeypatch):
    """The TRex server (the stand-in on fips4, started by the harness) killed mid-trial: the trial
    is invalid naming the generator, its pid and node; the next repetition starts the server again
    and runs (the run resumes); nothing of the trials is left on fips4."""
    import threading

    from xenobench.layout import ResultsTree
    from xenobench.procedures import run_point
    from xenobench.traffic.trex import SERVER_TAG, start_server, stop_server
    ex = testbed.cfg.raw["experiments"]
    for k, v in (("repetitions", 2), ("max_attempts", 1), ("settle_s", 0.1), ("cooldown_s", 0.1)):
        monkeypatch.setitem(ex, k, v)
    monkeypatch.setitem(ex, "pps", {**ex["pps"], "rate_pps": 50000, "duration_s": 3})
    point = {"lb": "ebpf", "payload": 22}
    loadgen = testbed.node("fips4")
    start_server(testbed, testbed.cfg.section("traffic"))
    first = loadgen.handle(SERVER_TAG).pid
    trial = ResultsTree(tmp_path, testbed.cfg.name).trial("pps", point, 1)

    over = threading.Event()

    def kill():
        while not (trial.attempt(1).counters_before.exists() and lab.pids("fips4", "xdpgen")) and not over.is_set():
            time.sleep(0.05)
        if not over.wait(0.5):  # the server's xdpgen sends: the trial is under way
            lab.in_node("fips4", "kill", "-9", str(first))
    t = threading.Thread(target=kill)
    t.start()
    try:
        run_point(testbed, "pps", point, results_root=tmp_path, progress=lambda m: None)
    finally:
        over.set()
        t.join()
        stop_server(testbed)
    r1 = trial.read_result()
    [a] = r1["attempts"]
    assert r1["valid"] is False and a["checks"].get("generator_trex_alive") is False, a
    [reason] = [r for r in a["reasons"] if r.startswith("generator_trex_alive: ")]
    assert re.fullmatch(rf"generator_trex_alive: generator trex \(TRex server\) \(pid {first} on fips4\) died: "
                        r"last seen alive \d+\.\d\d s into the attempt, found gone at \d+\.\d\d s", reason), reason
    r2 = ResultsTree(tmp_path, testbed.cfg.name).trial("pps", point, 2).read_result()
    assert r2["outputs"]["actors"]["generator_trex"]["alive"] is True  # a new server, watched to the end
    assert r2["outputs"]["actors"]["generator_trex"]["pid"] != first
    # nothing of the harness on fips4; the stand-in in TRex's place, killed -9, could not remove its
    # temporary directory (what a crashed server leaves is its own): removed as an operator would
    # (the deployed artefact and the harness's private directory stay until `testbed down`, the last test)
    left = [x for x in lab.leftovers() if x.startswith("fips4: ")]
    assert [x for x in left if x.startswith("fips4: process")] == [], left
    assert len([x for x in left if re.fullmatch(r"fips4: file /tmp/trex-standin-\w+", x)]) == 1, left
    lab.in_node("fips4", "sh", "-c", "rm -rf /tmp/trex-standin-*")


def test_trex_not_running_is_started_by_the_workflow_rule(lab, testbed, tmp_path):
    """Day one, defect 1: no TRex server runs on fips4; the workflow's rule trex_server starts
    the one at traffic.trex.daemon.path (the stand-in, with fips4's /etc/trex_cfg.yaml), and the
    workflow's end stops it and collects its log."""
    t = testbed.cfg.section("traffic")["trex"]
    with pytest.raises(OSError):
        socket.create_connection((t["server"], t["sync_port"]), timeout=2).close()
    name = f"rehearsal-test-{testbed.cfg.prefix.rstrip('-')}"
    res = REPO_ROOT / "results" / name
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    # day one as the operator (scripts/rehearsal.sh): the DPU's rule installed, a deploy that builds
    # XenoFlow as the login, the build installed root-owned as its table says; the workflow's deploy
    # then finds every row ready
    from xenobench.deploy import deploy
    lab.install_sudo_rule()
    deploy(testbed)
    lab.install_xenoflow()
    try:
        p = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "snakemake"), "--cores", "1", f"results/{name}/trex_server.txt",
                            "--configfile", str(CONFIG), "--config", f"testbed={{name: {name}}}"],
                           cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        # the workflow's end (onsuccess) stopped the server and collected its log from fips4
        log = (res / "logs" / "trex_server.log").read_text()
        assert log.split(" ", 1)[1].startswith("trex stand-in v3.04: 2 ports (enp24s0f0np0, dummy), 14 cores per "
                                               "dual port, RPC 4501, async 4500, xdpgen /opt/trex/v3.04/xdpgen"), log
        with pytest.raises(OSError):
            socket.create_connection((t["server"], t["sync_port"]), timeout=2).close()
    finally:
        # what that testbed name left on the nodes (its private directories), as `make rehearsal` does
        cfg = tmp_path / "test.yaml"
        cfg.write_text(f"extends: {CONFIG}\ntestbed: {{name: {name}}}\n")
        get_testbed(load_config(cfg)).down(purge=True)
        subprocess.run(["rm", "-rf", str(res), str(REPO_ROOT / "figures" / name)])


def test_a_trex_whose_port_is_down_stops_the_study_at_its_start(lab, testbed, tmp_path):
    """Day one: TRex starts and answers, but its port is down (a cable, a wrong port in
    /etc/trex_cfg.yaml): `traffic server start` (the workflow's rule trex_server) sends the smoke
    test's frames, none arrives, and it fails with one line naming what did not arrive, stopping the
    server it started, before any trial."""
    deploy(testbed)  # the agents on every node, as the workflow's deploy leaves them
    port = testbed.cfg.role("loadgen").iface().name
    lab.in_node("fips4", "ip", "link", "set", "dev", port, "down")
    try:
        p = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "xenobench"), "--config", str(CONFIG), "traffic", "server",
                            "start"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    finally:
        lab.in_node("fips4", "ip", "link", "set", "dev", port, "up")
    said = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert len(said) == 1 and said[0].startswith("xenobench: Failed to start the study's generator: the TRex server at "), said
    assert "did not arrive" in said[0], said
    t = testbed.cfg.section("traffic")["trex"]
    with pytest.raises(OSError):  # the server it started is stopped again
        socket.create_connection((t["server"], t["sync_port"]), timeout=2).close()


def test_lab_down_leaves_nothing_even_after_a_half_failed_up(lab, testbed, monkeypatch):
    testbed.down(purge=True)
    assert lab.leftovers() == []
    created = [str(lab.root), str(lab.record_file)]
    lab.down()

    def fail(node):
        raise RuntimeError("the OVS step failed half-way")
    monkeypatch.setattr(lab, "_start_ovs", fail)
    with pytest.raises(RuntimeError):
        lab.up()
    mine = {ns for ns in existing_namespaces() if ns.startswith(lab.prefix)}
    assert not mine & set(lab.record().get("namespaces", []) or [lab.ns(n) for n in lab.cfg.nodes])
    assert not {lab.ns(n) for n in lab.cfg.nodes} & existing_namespaces()
    assert not any(Path(p).exists() for p in created)
    assert not [lk for lk in os.listdir("/sys/class/net") if lk.startswith(f"{lab.prefix}m")]
    assert not Path(f"/sys/fs/bpf/{lab.prefix}rehearsal").exists()
    p = subprocess.run(["pgrep", "-f", str(lab.root)], capture_output=True, text=True)
    assert p.stdout.strip() == "", p.stdout
    lab.down()  # idempotent
