"""The deploy's Open vSwitch step against a real Open vSwitch (Debian's openvswitch-switch): an
ovsdb-server and an ovs-vswitchd in userspace (datapath_type=netdev, no kernel module), with a
private run directory and database, in a namespace of the test prefix that holds a stock
BlueField's ports (p0, p1, pf0hpf, pf1hpf as veths) and bridges (ovsbr1: p0, pf0hpf; ovsbr2: p1,
pf1hpf). The step runs through a NetnsNode exactly as start() runs it on the DPU over SSH: the rule
lands in the flow table (`ovs-ofctl dump-flows`), a missing bridge fails naming the bridges there
are. The daemons and the namespace are gone afterwards.
"""

import dataclasses
import shutil
import subprocess
import time

import pytest

from xenobench import REPO_ROOT
from xenobench.config import load_config
from xenobench.errors import NodeError
from xenobench.lb import get_lb
from xenobench.nodes import NetnsNode
from xenobench.testbed import get_testbed

from .conftest import needs_root

FIPS = REPO_ROOT / "config" / "fips.yaml"
PORTS = {"ovsbr1": ["p0", "pf0hpf"], "ovsbr2": ["p1", "pf1hpf"]}
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
have_ovs = pytest.mark.skipif(not (shutil.which("ovs-vswitchd") and shutil.which("ovsdb-server")),
                              reason="Open vSwitch not installed (scripts/install-deps.sh installs openvswitch-switch)")


@pytest.fixture(scope="module")
def ovs_dpu(tmp_path_factory):
    """(node, run): a NetnsNode `<prefix>ovsdpu` with a userspace OVS; run(argv) runs an OVS
    command there against this OVS."""
    cfg = load_config()
    node = NetnsNode(cfg, dataclasses.replace(cfg.nodes["fips5"], name="ovsdpu"))
    rundir = tmp_path_factory.mktemp("ovs")
    env = {"OVS_RUNDIR": str(rundir), "OVS_LOGDIR": str(rundir), "OVS_DBDIR": str(rundir)}
    mp = pytest.MonkeyPatch()
    for k, v in env.items():  # the deploy's own node.run calls find this OVS through them
        mp.setenv(k, v)
    subprocess.run(["ip", "netns", "add", node.netns], check=True)
    try:
        for br, ports in PORTS.items():
            for p in ports:
                node.run(["ip", "link", "add", p, "type", "veth", "peer", "name", f"x{p}"])
                node.run(["ip", "link", "set", p, "up"])
                node.run(["ip", "link", "set", f"x{p}", "up"])
        subprocess.run(["ovsdb-tool", "create", str(rundir / "conf.db"), SCHEMA], check=True)
        node.start("ovsdb-server", ["ovsdb-server", str(rundir / "conf.db"), f"--remote=punix:{rundir}/db.sock",
                                    f"--unixctl={rundir}/ovsdb-server.ctl", f"--log-file={rundir}/ovsdb-server.log"],
                   env=env)
        deadline = time.monotonic() + 10
        while not (rundir / "db.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        node.run(["ovs-vsctl", "--timeout=10", "--no-wait", "init"])
        # --disable-system: no kernel datapath here, only the userspace (netdev) one
        node.start("ovs-vswitchd", ["ovs-vswitchd", f"unix:{rundir}/db.sock", "--disable-system",
                                    f"--unixctl={rundir}/ovs-vswitchd.ctl", f"--log-file={rundir}/ovs-vswitchd.log"],
                   env=env)
        add = ["ovs-vsctl", "--timeout=20"]
        for br, ports in PORTS.items():
            add += ["--", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev"]
            for p in ports:
                add += ["--", "add-port", br, p]
        node.run(add, timeout=30)
        yield node, lambda argv, **kw: node.run(argv, **kw)
    finally:
        node.stop("ovs-vswitchd", timeout=10)
        node.stop("ovsdb-server", timeout=10)
        left = node.pids()
        subprocess.run(["ip", "netns", "del", node.netns], check=False)
        mp.undo()
        assert not left, f"processes left in {node.netns}: {left}"


def _fips_lb(ovs=None):
    lb = get_lb("xenoflow", get_testbed(load_config(FIPS)))
    lb.sec["sudo"] = False  # as root here; sudo would also drop OVS_RUNDIR
    if ovs is not None:
        lb.sec["ovs"] = ovs
    return lb


@needs_root
@have_ovs
def test_real_ovs_takes_the_papers_rule_through_the_deploy_step(ovs_dpu):
    node, run = ovs_dpu
    lb = _fips_lb()
    ran = lb.apply_ovs(node)
    # the programs by the absolute paths the DPU's sudo rule names (xenobench.dpu)
    assert ran == ["/usr/bin/ovs-vsctl br-exists ovsbr2",
                   "/usr/bin/ovs-ofctl -O OpenFlow12 add-flow ovsbr2 ip,in_port=pf1hpf,actions=output:p1"]
    dump = run(["ovs-ofctl", "-O", "OpenFlow12", "--names", "dump-flows", "ovsbr2"]).stdout
    assert "ip,in_port=pf1hpf actions=output:p1" in dump, dump
    assert "in_port=pf1hpf" not in run(["ovs-ofctl", "--names", "dump-flows", "ovsbr1"]).stdout


@needs_root
@have_ovs
def test_real_ovs_missing_bridge_fails_naming_the_bridges_there_are(ovs_dpu):
    node, run = ovs_dpu
    before = {br: run(["ovs-ofctl", "dump-flows", "--no-stats", br]).stdout for br in PORTS}
    lb = _fips_lb({"bridge": "br0", "openflow": None, "flows": [{"match": "in_port=1", "actions": "output:2"}]})
    with pytest.raises(NodeError) as e:
        lb.apply_ovs(node)
    assert str(e.value) == (f"Failed to apply the OVS rule on ovsdpu: bridge 'br0' (xenoflow.ovs.bridge in {FIPS}) "
                            f"does not exist; bridges: ovsbr1, ovsbr2; fix: set xenoflow.ovs.bridge in {FIPS} to one "
                            "of the bridges there are (ovsbr1, ovsbr2)")
    # the paper's rule by port name: the bridge that holds both ports, asked of OVS (port-to-br)
    lb = _fips_lb({"bridge": "br0", "openflow": None, "flows": [{"match": "ip,in_port=pf1hpf", "actions": "output:p1"}]})
    with pytest.raises(NodeError) as e:
        lb.apply_ovs(node)
    assert str(e.value).endswith(f"fix: set xenoflow.ovs.bridge in {FIPS} to ovsbr2 (it holds pf1hpf, p1)")
    assert {br: run(["ovs-ofctl", "dump-flows", "--no-stats", br]).stdout for br in PORTS} == before


@needs_root
@have_ovs
def test_real_ovs_takes_the_thesis_rule_on_a_br0_by_port_number(ovs_dpu):
    """The thesis's variant (§6.1) where its image had a br0: OpenFlow ports 1 → 2, no -O."""
    node, run = ovs_dpu
    for p in ("t1", "t2"):
        node.run(["ip", "link", "add", p, "type", "veth", "peer", "name", f"x{p}"])
        node.run(["ip", "link", "set", p, "up"])
    run(["ovs-vsctl", "--timeout=20", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev",
         "--", "add-port", "br0", "t1", "--", "set", "interface", "t1", "ofport_request=1",
         "--", "add-port", "br0", "t2", "--", "set", "interface", "t2", "ofport_request=2"], timeout=30)
    try:
        lb = _fips_lb({"bridge": "br0", "openflow": None, "flows": [{"match": "in_port=1", "actions": "output:2"}]})
        assert lb.apply_ovs(node)[-1] == "/usr/bin/ovs-ofctl add-flow br0 in_port=1,actions=output:2"
        dump = run(["ovs-ofctl", "dump-flows", "br0"]).stdout
        assert "in_port=1 actions=output:2" in dump, dump
    finally:
        run(["ovs-vsctl", "--timeout=20", "del-br", "br0"], check=False)
