"""XenoFlow (lb/) and the DOCA Flow emulation (lb/emu).

- the C unit tests (cmocka, `meson test -C lb/build`): emulation semantics through
  BPF_PROG_TEST_RUN on the generated datapath, and the C backends parser against the vectors;
- end to end on the namespace testbed through `xenobench lb start|stats|stop --lb xenoflow`:
  sources with known classes reach each backend in the exact expected share, with the rewritten
  MACs (frame bytes compared between the client's and the backend's tcpdump captures), XenoFlow's
  counters equal the backends' UDP counters, SIGINT leaves no XDP program attached;
- the deploy sequence for the thesis testbed (config/fips.yaml): the dry run prints the OVS rule,
  the build and the start command with the thesis's interfaces; a recording node double (no DPU
  here) checks the order of what start() runs.
"""

import json
import os
import subprocess
import statistics
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from scapy.utils import rdpcap

from xenobench.nodes import SshNode
from xenobench import REPO_ROOT
from xenobench.errors import BackendsError, NodeError
from xenobench.lb import get_lb
from xenobench.lb.xenoflow import BINARY, parse_lines

from .conftest import needs_root, start_sshd, send_udp

BUILD = REPO_ROOT / "lb" / "build"
CASES = yaml.safe_load((REPO_ROOT / "tests" / "vectors" / "backends" / "cases.yaml").read_text())
built = pytest.mark.skipif(not BINARY.exists(), reason="lb not built (make -C lb)")
LB_IN, LB_OUT = "02:00:00:00:05:00", "02:00:00:00:05:01"
VIP = "198.18.0.100"


# --- C unit tests ------------------------------------------------------------------------------------
@needs_root
@built
def test_meson_unit_tests_pass():
    p = subprocess.run(["meson", "test", "-C", str(BUILD), "--print-errorlogs", "--no-rebuild"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Ok:                 5" in p.stdout and "Skipped:            0" in p.stdout, p.stdout
    log = (BUILD / "meson-logs" / "testlog.txt").read_text()
    # test_emu 21, test_xenoflow_setup 9, test_backends 6, test_argp 2, test_hash 5
    assert ("[  PASSED  ] 21 test(s)." in log and "[  PASSED  ] 9 test(s)." in log
            and "[  PASSED  ] 6 test(s)." in log and "[  PASSED  ] 2 test(s)." in log
            and "[  PASSED  ] 5 test(s)." in log), log[-3000:]


# --- backends file: a bad one starts nothing (C and Python verdicts on every vector: tests/test_backends.py)
BAD = [(c["id"], c["ext"], c["text"], c["expect"]) for c in CASES["bad"]
       if c["id"] in ("bad-mac", "no-backends", "too-many-backends", "unknown-backend-key", "duplicate-backend-key")]


@needs_root
@built
@pytest.mark.parametrize("cid,ext,text,expect", BAD, ids=[b[0] for b in BAD])
def test_bad_backends_file_attaches_nothing(testbed, tmp_path, cid, ext, text, expect):
    f = tmp_path / f"bad.{ext}"
    f.write_text(text)
    lb = get_lb("xenoflow", testbed)
    with pytest.raises(BackendsError) as e:
        lb.start(f)
    assert str(e.value) == f"Failed to load backends {f}: {expect}"
    assert not lb.running()
    # the binary itself, started in the LB namespace past the harness's check: exit 2, the same
    # verdict in its own words (lb/tests/test_backends.c tests those)
    node = testbed.node("fips5")
    r = node.run([str(BINARY), "-a", "p0", "-a", "p1", "--", "-b", str(f), "-s", LB_OUT], check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"Failed to load backends {f}: " in (r.stdout + r.stderr)
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None


@needs_root
@built
def test_bad_arguments_and_unknown_interface_exit_cleanly(testbed):
    node = testbed.node("fips5")
    b = str(REPO_ROOT / "config" / "backends.json")
    r = node.run([str(BINARY), "-a", "p0", "-a", "p1", "--", "-b", b, "-s", "02:zz:00:00:05:01"], check=False)
    assert r.returncode == 1 and "Failed to parse --src-mac: '02:zz:00:00:05:01' is not a MAC address" in r.stdout + r.stderr
    r = node.run([str(BINARY), "-a", "p0", "-a", "nosuch9", "--", "-b", b, "-s", LB_OUT], check=False)
    assert r.returncode == 3 and "Failed to init EAL: interface nosuch9" in r.stdout + r.stderr
    # integer flags keep their full width: each of these once ran truncated (1 queue; -1 "negative")
    for flag, value in (("-q", "4294967297"), ("-i", "99999999999"), ("-i", "4294967295")):
        r = node.run([str(BINARY), "-a", "p0", "-a", "p1", "--", "-b", b, "-s", LB_OUT, flag, value], check=False)
        assert r.returncode == 1, r.stdout + r.stderr
        assert (f"Failed to parse arguments: {flag}: {value} is out of range (an int: -2147483648..2147483647)"
                in r.stdout + r.stderr), r.stdout + r.stderr
    # the port model: switch is refused before any port is touched, an unknown one named
    for model, why in (("switch", "'switch' (DOCA Flow switch mode on a doca_dev, as the authors' later code) is "
                                  "not implemented in XenoFlow yet; use vnf-hairpin"),
                       ("vnf", "'vnf' is not one of vnf-hairpin, switch")):
        r = node.run([str(BINARY), "-a", "p0", "-a", "p1", "--", "-b", b, "-s", LB_OUT, "-m", model], check=False)
        assert r.returncode == 1 and f"Failed to parse --port-model: {why}" in r.stdout + r.stderr, r.stdout + r.stderr
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None


# --- end to end on the namespace testbed ------------------------------------------------------------
def udp_in(node) -> int:
    lines = [ln.split() for ln in node.run(["cat", "/proc/net/snmp"]).stdout.splitlines() if ln.startswith("Udp:")]
    row = dict(zip(lines[0][1:], map(int, lines[1][1:])))
    return row["InDatagrams"] + row["NoPorts"]


def send(testbed, src: str, n: int, payload="x"):
    send_udp(testbed, "client", dst_mac=LB_IN, src_ip=src, dst_ip=VIP, port=53, payload=payload, count=n)


def capture(testbed, node: str, direction: str, n: int, path: Path) -> subprocess.Popen:
    p = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{testbed.cfg.prefix}{node}", "tcpdump", "-i", "eth0",
                          "-Q", direction, "-n", "-U", "-s", "0", "-c", str(n), "-w", str(path), "udp port 53"],
                         stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    assert "listening on" in line, line
    return p


@needs_root
@built
def test_live_split_rewritten_macs_counters_and_clean_sigint(testbed, tmp_path):
    lb = get_lb("xenoflow", testbed)
    b2, b3 = testbed.node("fips2"), testbed.node("fips3")
    res = lb.start()
    try:
        assert res["mode"] == "emulation" and res["slots"] == [0, 1]
        with pytest.raises(NodeError, match="already running"):
            lb.start()
        sent = {"198.18.0.16": 70, "198.18.0.17": 30, "198.18.0.18": 40}  # even → fips2, odd → fips3
        before = (udp_in(b2), udp_in(b3))
        cap_tx = capture(testbed, "fips1", "out", 140, tmp_path / "tx.pcap")
        cap_b3 = capture(testbed, "fips3", "in", 30, tmp_path / "b3.pcap")
        cap_b2 = capture(testbed, "fips2", "in", 110, tmp_path / "b2.pcap")
        for src, n in sent.items():
            send(testbed, src, n, payload=f"xenoflow-{src}")
        for p in (cap_tx, cap_b3, cap_b2):
            p.wait(timeout=10)
        time.sleep(0.2)
        after = (udp_in(b2), udp_in(b3))
        st = lb.stats()
        assert {b["name"]: b["packets"] for b in st["backends"]} == {"fips2": 110, "fips3": 30}
        assert (after[0] - before[0], after[1] - before[1]) == (110, 30)
        assert st["mode"] == "emulation" and st["classes"] == [110, 30]
        # frames are forwarded unchanged except for the two MACs: byte comparison of captures
        tx = {bytes(p)[26:30]: bytes(p) for p in rdpcap(str(tmp_path / "tx.pcap"))}
        for pcap, mac in (("b2.pcap", "02:00:00:00:02:00"), ("b3.pcap", "02:00:00:00:03:00")):
            frames = [bytes(p) for p in rdpcap(str(tmp_path / pcap))]
            for f in frames:
                want = bytes.fromhex(mac.replace(":", "")) + bytes.fromhex(LB_OUT.replace(":", "")) + tx[f[26:30]][12:]
                assert f == want, f"{pcap}: got {f.hex()} want {want.hex()}"
        size = {s: len(tx[bytes(map(int, s.split(".")))]) for s in sent}  # frame bytes without FCS
        assert {b["name"]: b["bytes"] for b in st["backends"]} == {
            "fips2": 70 * size["198.18.0.16"] + 40 * size["198.18.0.18"], "fips3": 30 * size["198.18.0.17"]}
        # traffic to a class's source from another subnet lands by the class bits alone
        send(testbed, "10.9.8.7", 5)
        assert {b["name"]: b["packets"] for b in lb.stats()["backends"]} == {"fips2": 110, "fips3": 35}
    finally:
        assert lb.stop() is True
    # SIGINT → XenoFlow tore its pipe and ports down itself (stop() raises if XDP was left)
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None
    events = [d.get("event") for d in parse_lines(testbed.node("fips5").read_text(res["log"]))]
    assert events[0] == "started" and events[-2:] == ["final", "stopped"]
    with pytest.raises(NodeError, match="not running"):
        lb.stats()


@needs_root
@built
def test_live_weighted_split_from_a_yaml_file_via_cli(testbed, tmp_path):
    from xenobench.cli import main as cli
    f = tmp_path / "w.yaml"
    f.write_text("class_bits: 2\nbackends:\n  - {name: fips2, mac_address: '02:00:00:00:02:00', weight: 3}\n"
                 "  - {name: fips3, mac_address: '02:00:00:00:03:00', weight: 1}\n")
    r = CliRunner()
    res = r.invoke(cli, ["lb", "start", "--lb", "xenoflow", "--backends", str(f)])
    assert res.exit_code == 0, res.output
    try:
        assert json.loads(res.output)["slots"] == [0, 0, 0, 1]
        for last in range(16, 24):  # classes 0,1,2,3,0,1,2,3 → 3:1
            send(testbed, f"198.18.0.{last}", 10)
        time.sleep(0.2)
        res = r.invoke(cli, ["lb", "stats", "--lb", "xenoflow", "--json"])
        st = json.loads(res.output)
        assert {b["name"]: b["packets"] for b in st["backends"]} == {"fips2": 60, "fips3": 20}
        assert set(st) >= {"backends", "miss", "non_ipv4", "malformed", "mode"} and st["mode"] == "emulation"
    finally:
        res = r.invoke(cli, ["lb", "stop", "--lb", "xenoflow"])
        assert res.output.strip() == "xenoflow: stopped"
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None


# --- the thesis testbed: deploy sequence ----------------------------------------------------------
def _fips_lb():
    from xenobench.config import load_config
    from xenobench.testbed import get_testbed
    return get_lb("xenoflow", get_testbed(load_config(REPO_ROOT / "config" / "fips.yaml")))


def test_doca_deploy_dry_run_for_fips_prints_ovs_build_and_start():
    from xenobench.cli import main as cli
    res = CliRunner().invoke(cli, ["--config", str(REPO_ROOT / "config" / "fips.yaml"), "lb", "start", "--lb",
                                   "xenoflow", "--dry-run"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    cmds = [ln for ln in lines if not ln.startswith("#")]
    assert lines[0] == "# xenoflow (doca) on fips5-dpu"
    assert "sudo -n /usr/bin/ovs-ofctl -O OpenFlow12 add-flow ovsbr2 ip,in_port=pf1hpf,actions=output:p1" in cmds  # the paper's
    build = [c.split("; ", 1)[1] for c in cmds if "meson setup" in c or "ninja -C" in c]  # after DOCA's PKG_CONFIG_PATH
    assert build == ["test -f xenobench-xenoflow/build/build.ninja || meson setup "
                     "xenobench-xenoflow/build xenobench-xenoflow/src/lb -Demulation=false'",
                     "ninja -C xenobench-xenoflow/build'"]
    start = cmds[-1]
    # through the root-owned helper, with the exact arguments the sudoers rule names
    assert start.startswith("sudo -n /usr/local/sbin/xenobench-xenoflow start -a 03:00.0,dv_flow_en=2 "
                            "-a 03:00.1,dv_flow_en=2 -- -b /home/ubuntu/xenobench-xenoflow/backends.json ")
    assert "-s c4:70:bd:a0:56:bd -i 1000 -q 4 -m vnf-hairpin" in start  # the thesis's source MAC: BF3 p1
    assert "echo 2048 | sudo -n /usr/bin/tee /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages" in cmds
    assert not any("sh -c" in c and "sudo" in c for c in cmds)  # no shell as root
    order = [next(i for i, c in enumerate(cmds) if key in c)
             for key in ("tar -xzf", "meson setup", "ninja -C", "ovs-ofctl", "nr_hugepages", "hugetlbfs",
                         "cmp -- xenobench-xenoflow/build/xenoflow", "xenobench-xenoflow start -a")]
    assert order == sorted(order)


class RecordingNodeDouble:
    """Test double for the DPU reached over SSH (there is no BlueField here): records every call;
    start() writes the line XenoFlow prints once its entries are processed."""

    def __init__(self, name):
        self.name, self.calls, self.log = name, [], ""
        self.work_dir = "/tmp/xenobench-xbt"

    # the Node interface's paths, as a remote node has them
    path = SshNode.path
    log_path = SshNode.log_path
    output_path = SshNode.output_path
    stage = SshNode.stage

    def run(self, argv, **kw):
        self.calls.append(("run", list(argv)))
        out = "/home/ubuntu\n" if argv == ["pwd"] else ""
        return type("R", (), {"ok": argv[0] != "mountpoint", "stdout": out, "returncode": 0})()

    def put(self, local, remote):
        self.calls.append(("put", Path(local).name, remote))

    def read_text(self, path):
        return self.log

    def running(self, tag):
        return False

    def start(self, tag, argv, log=None, env=None):
        self.calls.append(("start", list(argv)))
        self.log = '{"event": "started", "mode": "doca", "class_bits": 1, "slots": [0, 1]}\n'
        return type("H", (), {"pid": 4242, "log": log})()


def test_doca_deploy_sequence_on_recording_node_double(monkeypatch):
    lb = _fips_lb()
    dbl = RecordingNodeDouble("fips5-dpu")
    monkeypatch.setattr(type(lb), "node", property(lambda self: dbl))
    res = lb.start()
    assert res["mode"] == "doca" and res["node"] == "fips5-dpu"
    kinds = [(c[0], c[1][0] if c[0] in ("run", "start") else c[1]) for c in dbl.calls]
    # the login's home, copies, build-env check, meson, ninja, OVS check and rule, hugepages (the
    # count, then the mount where none is), the installed build compared, the start
    assert kinds == [("run", "pwd"), ("run", "mkdir"), ("put", "xenoflow-src.tar.gz"), ("run", "tar"),
                     ("put", "backends.fips.json"), ("run", "sh"), ("run", "sh"), ("run", "sh"), ("run", "sudo"),
                     ("run", "sudo"), ("run", "sudo"), ("run", "mountpoint"), ("run", "sudo"), ("run", "cmp"),
                     ("start", "sudo")]
    assert dbl.calls[8][1] == ["sudo", "-n", "/usr/bin/ovs-vsctl", "br-exists", "ovsbr2"]
    assert dbl.calls[9][1] == ["sudo", "-n", "/usr/bin/ovs-ofctl", "-O", "OpenFlow12", "add-flow", "ovsbr2",
                               "ip,in_port=pf1hpf,actions=output:p1"]
    assert dbl.calls[4][2] == "/home/ubuntu/xenobench-xenoflow/backends.json"
    assert dbl.calls[-1][1][2:8] == ["/usr/local/sbin/xenobench-xenoflow", "start", "-a", "03:00.0,dv_flow_en=2",
                                     "-a", "03:00.1,dv_flow_en=2"]
    # the tarball holds the sources, not a build directory
    import tarfile
    names = tarfile.open(lb._tarball()).getnames()
    assert "lb/src/main.c" in names and "lb/emu/bpf/emu.bpf.c" in names and not any("/build" in n for n in names)


@needs_root
@built
def test_emulation_over_ssh_transport_start_stats_stop(testbed, tmp_path):
    """The same start/stats/stop over the ssh transport (what the DPU deploy uses): a real sshd in
    the LB's namespace on its loopback, standing in for the DPU's out-of-band management port
    (XenoFlow load-balances every IPv4 frame entering port 0, so SSH cannot go through p0); the
    backends file is put on the node, SIGUSR1/SIGINT and the log travel over SSH."""
    import dataclasses
    import sys

    from xenobench.config import SshConfig
    from xenobench.nodes import SshNode
    from xenobench.testbed import get_testbed

    key, known, addr = start_sshd(testbed, "fips5", tmp_path, 2224, listen="127.0.0.1")
    try:
        sc = SshConfig(host=addr, port=2224, key=str(key), known_hosts=str(known),
                       netns=f"{testbed.cfg.prefix}fips5", python=sys.executable)
        nodes = dict(testbed.cfg.nodes)
        nodes["fips5"] = dataclasses.replace(nodes["fips5"], transport="ssh", ssh=sc)
        tb = get_testbed(dataclasses.replace(testbed.cfg, nodes=nodes))
        lb = get_lb("xenoflow", tb)
        assert isinstance(lb.node, SshNode)
        res = lb.start()
        try:
            assert res["mode"] == "emulation" and res["log"].startswith(lb.node.remote_dir)
            send(testbed, "198.18.0.17", 25)
            send(testbed, "198.18.0.20", 5)
            time.sleep(0.2)
            st = lb.stats()
            assert {b["name"]: b["packets"] for b in st["backends"]} == {"fips2": 5, "fips3": 25}
        finally:
            assert lb.stop() is True
            lb.node.close()
        assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None
    finally:
        testbed.node("fips5").stop("sshd-test")


def install_emulated_sdk(tmp_path, version: str) -> Path:
    """`meson install` of an emulation build: lb/emu installed the way the DOCA SDK is (library,
    headers, doca-flow/doca-common/doca-argp/libdpdk .pc files reporting `version`); its
    pkgconfig directory."""
    b, prefix = tmp_path / f"sdk-build-{version}", tmp_path / f"sdk-{version}"
    for argv in (["meson", "setup", str(b), str(REPO_ROOT / "lb"), "-Demulation=true", "-Dtests=false",
                  f"-Ddoca_version={version}", f"--prefix={prefix}", "--libdir=lib"],
                 ["ninja", "-C", str(b)], ["meson", "install", "-C", str(b)]):
        p = subprocess.run(argv, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
    return prefix / "lib" / "pkgconfig"


def test_doca_build_refuses_an_unsupported_doca_version_by_name(tmp_path):
    """DOCA 3.0 removed doca_flow_shared_resource_cfg.domain: against a 3.0 SDK XenoFlow's build
    stops at configure time naming the version found and the supported range, instead of a
    compile error (the emulated SDK installed with -Ddoca_version=3.0.0058)."""
    pc = install_emulated_sdk(tmp_path, "3.0.0058")
    p = subprocess.run(["pkg-config", "--modversion", "--variable=emulation", "doca-flow"],
                       env={**os.environ, "PKG_CONFIG_PATH": str(pc)}, capture_output=True, text=True)
    assert p.stdout.split() == ["3.0.0058", "lb/emu"], p.stdout + p.stderr
    p = subprocess.run(["meson", "setup", str(tmp_path / "b"), str(REPO_ROOT / "lb"), "-Demulation=false"],
                       env={**os.environ, "PKG_CONFIG_PATH": str(pc)}, capture_output=True, text=True)
    assert p.returncode == 1
    assert ("Failed to configure xenoflow: DOCA 3.0.0058 (pkg-config doca-flow, found through PKG_CONFIG_PATH) "
            "is not supported: XenoFlow is written against the DOCA 2.9 API and builds with DOCA >=2.9.0 <3.0.0 "
            "(lb/doca_versions.txt)") in p.stdout + p.stderr, p.stdout + p.stderr


@needs_root
@built
def test_doca_build_branch_against_the_installed_emulated_sdk_compiles_and_runs(testbed, tmp_path):
    """The DOCA branch of lb/meson.build (-Demulation=false: pkg-config doca-flow, doca-common,
    doca-argp, libdpdk) built against lb/emu installed as the SDK is (`meson install`; there is
    no DOCA SDK here). The same sources configure (the version check passes 2.9.0072), compile
    and run, reporting mode "doca" (the build branch)."""
    pc = install_emulated_sdk(tmp_path, "2.9.0072")
    env = {**os.environ, "PKG_CONFIG_PATH": str(pc)}
    b = tmp_path / "build"
    p = subprocess.run(["meson", "setup", str(b), str(REPO_ROOT / "lb"), "-Demulation=false"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Run-time dependency doca-flow found: YES 2.9.0072" in p.stdout
    assert "DOCA 2.9.0072 (doca-flow): supported (>=2.9.0 <3.0.0)" in p.stdout
    p = subprocess.run(["ninja", "-C", str(b)], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    node = testbed.node("fips5")
    h = node.start("xenoflow-sdk-double", [str(b / "xenoflow"), "-a", "p0", "-a", "p1", "--", "-b",
                                           str(REPO_ROOT / "config" / "backends.json"), "-s", LB_OUT, "-i", "0",
                                           "-m", "vnf-hairpin"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(d.get("event") == "started" for d in parse_lines(node.read_log(h))):
            time.sleep(0.05)
        started = [d for d in parse_lines(node.read_log(h)) if d.get("event") == "started"]
        assert started and started[0]["mode"] == "doca", node.read_log(h)
    finally:
        node._signal(h, __import__("signal").SIGINT)
        deadline = time.monotonic() + 5
        while node.running("xenoflow-sdk-double") and time.monotonic() < deadline:
            time.sleep(0.05)
        node.stop("xenoflow-sdk-double")
    assert [d.get("event") for d in parse_lines(node.read_log(h))][-1] == "stopped"
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None


@needs_root
@built
def test_periodic_stats_lines_and_pps(testbed):
    """Stats lines every interval (100 ms here); pps is the packet delta over the time between
    lines, so pps × Δt over the lines adds up to the packets counted."""
    node = testbed.node("fips5")
    h = node.start("xenoflow-interval", [str(BINARY), "-a", "p0", "-a", "p1", "--", "-b",
                                         str(REPO_ROOT / "config" / "backends.json"), "-s", LB_OUT, "-i", "100"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not parse_lines(node.read_log(h)):
            time.sleep(0.05)
        time.sleep(0.25)
        send(testbed, "198.18.0.17", 200)
        time.sleep(0.6)
    finally:
        node._signal(h, __import__("signal").SIGINT)
        deadline = time.monotonic() + 5
        while node.running("xenoflow-interval") and time.monotonic() < deadline:
            time.sleep(0.05)
        node.stop("xenoflow-interval")
    lines = [d for d in parse_lines(node.read_log(h)) if d.get("event") in ("stats", "final")]
    assert len(lines) >= 8, lines
    gaps = [b["time"] - a["time"] for a, b in zip(lines, lines[1:-1])]
    # the loop keeps a fixed schedule (a late line is followed by an early one), so the median gap is
    # the interval asked for, whatever one line's scheduling delay on a loaded machine
    assert 0.09 < statistics.median(gaps) < 0.11, gaps
    assert lines[-1]["backends"][1]["packets"] == 200 and lines[-1]["backends"][0]["packets"] == 0
    total = lines[0]["backends"][1]["packets"] + sum(
        b["backends"][1]["pps"] * (b["time"] - a["time"]) for a, b in zip(lines, lines[1:]))
    assert abs(total - 200) < 10, total
    assert [d["seq"] for d in lines] == list(range(1, len(lines) + 1))


@needs_root
@built
def test_sigkill_leaves_no_xdp_and_an_occupied_port_is_refused(testbed):
    """The emulation attaches through a BPF link, so even a killed XenoFlow leaves nothing on p0;
    and with another XDP program on p0 (the eBPF baseline) XenoFlow refuses to start (the root cause first in the error) and
    leaves that program in place."""
    lb = get_lb("xenoflow", testbed)
    lb.start()
    h = testbed.node("fips5").handle("lb-xenoflow")
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is not None
    testbed.node("fips5")._signal(h, __import__("signal").SIGKILL)
    deadline = time.monotonic() + 5
    while lb.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not lb.running()
    assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] is None
    assert lb.stop() is False  # nothing was running any more, nothing was left
    eb = get_lb("ebpf", testbed)
    eb.start()
    try:
        prog = testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"]
        with pytest.raises(NodeError, match=r"Failed to start xenoflow on fips5: .*Failed to attach XDP to p0: "
                                            r"Device or resource busy \(an XDP program is already attached\)"):
            lb.start()
        assert not lb.running()
        assert testbed.status()["nodes"]["fips5"]["interfaces"]["p0"]["xdp"] == prog
    finally:
        eb.stop()
