"""`xenobench deploy` against a real OpenSSH server in the dns_backend's namespace (the harness
connects from the client's namespace): the artefact arrives, the agents run from it and find
their BPF objects inside it, a second deploy copies nothing, the readiness table names what is
missing with its fix, purge removes it."""

import dataclasses
import itertools
import os
import ipaddress

import pytest
import yaml

from xenobench import deploy as dp
from xenobench.config import Interface, SshConfig
from xenobench.nodes import SshNode
from xenobench.nodes.base import CommandResult, sudo_refused

from .conftest import NO_SFTP_PORT, needs_root, start_sshd

PORT = 2231
ssh_needed = pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="needs openssh-server")


@pytest.fixture(scope="module")
def sshd(testbed, tmp_path_factory):
    d = tmp_path_factory.mktemp("sshd")
    server = testbed.cfg.role("dns_backend")
    start_sshd(testbed, server.name, d, PORT)
    yield d, server
    testbed.node(server.name).stop("sshd-test")


def ssh_node(testbed, d, server, workdir, role="lb", **over):
    sc = SshConfig(host=server.iface().addr, port=PORT, user="root", key=str(d / "client_key"),
                   known_hosts=str(d / "known_hosts"), netns=f"{testbed.cfg.prefix}fips1",
                   connect_timeout=5, workdir=str(workdir))
    return SshNode(testbed.cfg, dataclasses.replace(server, role=role, transport="ssh", ssh=sc, **over))


@needs_root
@ssh_needed
def test_deploy_ships_once_agents_run_from_the_artefact_and_find_their_objects(testbed, sshd, tmp_path):
    d, server = sshd
    work = tmp_path / "node-home"
    work.mkdir()
    n = ssh_node(testbed, d, server, work)
    puts = []
    real_put = n.put
    n.put = lambda local, remote: (puts.append(remote), real_put(local, remote))[1]
    try:
        first = dp.deploy_node(testbed.cfg, n)
        assert first["copied"] is True and len(puts) == 1
        art = work / SshNode.deploy_dir / first["hash"]
        assert (art / "ebpf_baseline/build/lb.bpf.o").read_bytes() == \
            (dp.REPO_ROOT / "ebpf_baseline/build/lb.bpf.o").read_bytes()
        assert sorted(p.name for p in (art / "xenobench").iterdir() if p.is_file()) == \
            ["__init__.py", "backends.py", "errors.py"]  # nothing else of the harness
        again = dp.deploy_node(testbed.cfg, n)
        assert again == {"node": n.name, "hash": first["hash"], "copied": False}
        assert len(puts) == 1  # the second deploy copied nothing
        # the agents run from the artefact (not from this checkout), and REPO_ROOT is the artefact
        r = n.run(["python3", "-c", "import xenobench, xenobench.agents.ebpf_lb as m; "
                   "print(xenobench.__file__); print(m.OBJ, m.OBJ.exists())"], env=n.python_env())
        file_, obj = r.stdout.splitlines()
        cur = work / SshNode.deploy_dir / "current"
        assert cur.resolve() == art
        assert file_ == str(cur / "xenobench/__init__.py")
        assert obj == f"{art / 'ebpf_baseline/build/lb.bpf.o'} True"  # REPO_ROOT resolves the link
        assert "usage:" in n.run(n.python_argv("xenobench.agents.ebpf_lb", "--help")).stdout
        assert n.remove_deployed() is True
        assert not (work / SshNode.deploy_dir).exists()
    finally:
        n.close()


@needs_root
@ssh_needed
def test_deploy_table_names_each_missing_thing_with_its_fix(testbed, sshd, tmp_path):
    d, server = sshd
    ok_if = server.iface()
    bad = Interface(name="enp24s0f0np0", mac=ok_if.mac, ip=ipaddress.IPv4Interface("10.3.10.42/24"))
    n = ssh_node(testbed, d, server, tmp_path, role="dns_backend", interfaces=(ok_if, bad))
    try:
        rows = {r.check: r for r in dp.check_node(testbed.cfg, n)}
    finally:
        n.close()
    assert rows["login"].ready and rows["python >= 3.10"].ready and rows["bpftool"].ready
    assert rows[f"interface {ok_if.name}"].ready and rows[f"address {ok_if.ip}"].ready
    miss = rows["interface enp24s0f0np0"]
    assert (miss.ready, miss.detail) == (False, "missing")
    assert "nodes.fips2.interfaces" in miss.fix
    lines = dp.table(list(rows.values())).splitlines()
    assert lines[0].split() == ["node", "role", "check", "status", "detail", "fix"]
    assert [ln.split()[:5] for ln in lines if "enp24s0f0np0" in ln] == \
        [["fips2", "dns_backend", "interface", "enp24s0f0np0", "MISSING"]]


@needs_root
@ssh_needed
def test_deploy_without_sftp_ships_over_exec_and_prints_the_table_with_a_failed_shipment_as_a_row(
        testbed, sshd_without_sftp, tmp_path):
    """`xenobench deploy` against an sshd without SFTP: the artefact goes over an exec channel; a
    node whose shipment fails both ways (a file where its deploy directory goes) is a row of the
    table, one line naming the node, the file and the fix, and the other node is shipped."""
    from types import SimpleNamespace

    from click.testing import CliRunner

    from xenobench.cli.deploy_cmd import deploy_cmd

    d, server = sshd_without_sftp
    homes = {"fips2": tmp_path / "ok", "no-room": tmp_path / "no-room"}
    nodes = []
    for name, home in homes.items():
        home.mkdir()
        n = ssh_node(testbed, d, server, home, name=name)
        n.ssh = dataclasses.replace(n.ssh, port=NO_SFTP_PORT)
        nodes.append(n)
    (homes["no-room"] / SshNode.deploy_dir).write_text("")
    tb = SimpleNamespace(cfg=testbed.cfg, nodes=lambda: nodes, check_ipip=lambda: [])
    obj = SimpleNamespace(config=testbed.cfg, testbed=lambda root: tb)
    try:
        res = CliRunner().invoke(deploy_cmd, [], obj=obj)
    finally:
        for n in nodes:
            n.close()
    assert isinstance(res.exception, SystemExit) and res.exit_code == 1, res.output  # something is MISSING
    assert "Traceback" not in res.output
    digest, tarball = dp.build_artefact("lb", testbed.cfg.state_dir / "deploy")
    art = homes["fips2"] / SshNode.deploy_dir / digest
    assert (art / ".complete").exists() and (homes["fips2"] / SshNode.deploy_dir / "current").resolve() == art
    lines = res.output.splitlines()
    assert lines[0] == f"fips2: agents {digest}: copied"
    assert lines[1].split() == ["node", "role", "check", "status", "detail", "fix"]
    at = [i for i, ln in enumerate(lines) if ln.split()[:3] == ["no-room", "lb", "shipment"]]
    assert len(at) == 1 and lines[at[0]].split()[3] == "MISSING"
    wrapped = [lines[at[0]].split(None, 4)[4].rsplit(None, 1)[0]]  # the detail's first line, less the [n]
    wrapped += [ln.strip() for ln in itertools.takewhile(lambda ln: ln.startswith(" "), lines[at[0] + 1:])]
    dest = f"{homes['no-room'] / SshNode.deploy_dir}/{digest}.tar.gz"
    assert " ".join(wrapped).startswith(
        f"Failed to put {tarball} to no-room:{dest}: the node's sshd has no `Subsystem sftp` (paramiko: Channel "
        "closed.) and writing the file over an exec channel (`cat` to a temporary file, then `mv`) failed: mkdir: "
        f"cannot create directory '{homes['no-room'] / SshNode.deploy_dir}': File exists; add `Subsystem sftp "
        "internal-sftp` to the node's sshd_config"), wrapped
    assert "[1] add `Subsystem sftp internal-sftp` to the node's sshd_config and reload sshd, or fix what the copy " \
        "reported (the detail)" in lines
    assert sorted(p.name for p in homes["no-room"].iterdir()) == [SshNode.deploy_dir]  # nothing left beside it


def test_artefact_is_content_addressed_and_byte_identical(tmp_path):
    if not (dp.REPO_ROOT / "ebpf_baseline/build/lb.bpf.o").exists():
        pytest.fail("ebpf_baseline/build/lb.bpf.o not built: run scripts/build.sh")
    h1, p1 = dp.build_artefact("lb", tmp_path / "a")
    h2, p2 = dp.build_artefact("lb", tmp_path / "b")
    assert (h1, p1.read_bytes()) == (h2, p2.read_bytes())
    h3, _ = dp.build_artefact("client", tmp_path / "a")
    assert h3 != h1  # the client's artefact holds no BPF object
    files = dp.artefact_files("lb")
    assert "ebpf_baseline/build/lb.bpf.o" in files and "xenobench/agents/udpcheck.py" in files
    assert not [f for f in files if f.startswith("xenobench/") and not f.startswith("xenobench/agents/")
                and f not in ("xenobench/__init__.py", "xenobench/errors.py", "xenobench/backends.py")]


# sudo's own refusals (sudo 1.9 plugins/sudoers): with -n, and without -n over an exec channel
SUDO_N = "sudo: a password is required\n"
SUDO_TTY = "sudo: a terminal is required to read the password; either use the -S option to read from standard input or configure an askpass helper\n"


@pytest.mark.parametrize("stderr,refused", [(SUDO_N, True), (SUDO_TTY, True),
                                            ("ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed\n", False)])
def test_sudo_refusal_is_told_apart_from_other_failures(stderr, refused):
    assert sudo_refused(CommandResult(["sudo", "-n", "ovs-vsctl", "list-br"], 1, "", stderr)) is refused


def test_recording_double_dpu_sudo_asking_for_a_password_names_the_sudoers_rule(monkeypatch):
    """The DPU (hardware boundary) as a double whose sudo answers as a stock BFB's ubuntu login."""
    from xenobench.config import load_config
    from xenobench.errors import NodeError
    from xenobench.lb.xenoflow import XenoFlowLB
    from xenobench.testbed import get_testbed

    cfg = load_config("config/fips.yaml")
    tb = get_testbed(cfg)

    class Dpu:
        name = "fips5-dpu"
        ssh = cfg.nodes["fips5-dpu"].ssh

        def run(self, argv, check=True, **kw):
            if argv == ["pwd"]:
                return CommandResult(argv, 0, "/home/ubuntu\n", "", self.name)
            if argv[0] != "sudo":  # the read-only checks that need no root: DOCA absent here
                return CommandResult(argv, 1, "", "not found", self.name)
            assert argv[:2] == ["sudo", "-n"], argv  # never a prompt
            return CommandResult(argv, 1, "", SUDO_N, self.name)

    lb = XenoFlowLB(tb)
    with pytest.raises(NodeError) as e:
        lb.apply_ovs(Dpu())
    msg = str(e.value)
    assert msg.startswith("Failed to apply the OVS rule on fips5-dpu: sudo asks ubuntu for a password")
    # exact commands with exact arguments (sudoers' specials escaped), never a bare program
    assert ("ubuntu ALL=(root) NOPASSWD: /usr/bin/ovs-vsctl list-br, /usr/bin/ovs-vsctl br-exists ovsbr2, "
            "/usr/bin/ovs-ofctl -O OpenFlow12 add-flow ovsbr2 ip\\,in_port\\=pf1hpf\\,actions\\=output\\:p1, ") in msg
    assert "/etc/sudoers.d/xenobench" in msg and "Open vSwitch running" not in msg
    rows = dp._check_dpu(cfg, type("N", (Dpu,), {"ncfg": cfg.nodes["fips5-dpu"]})())
    ovs = [r for r in rows if r.check.startswith("OVS bridge")][0]
    assert (ovs.ready, ovs.detail) == (False, "sudo asks for a password")
    assert "/etc/sudoers.d/xenobench" in ovs.fix and "NOPASSWD" in ovs.fix
    # the eSwitch mode is read through the rule (devlink's eswitch-get is admin-only): its fix is the rule
    esw = [r for r in rows if r.check.startswith("eSwitch mode")]
    assert len(esw) == 2 and all(not r.ready and "NOPASSWD" in r.fix and "check the PCI address" not in r.fix
                                 for r in esw)


# --- the DPU preflight: parsing and messages, on captured outputs -------------------------------
# devlink: the format of the kernel's Documentation/networking/devlink/devlink-eswitch-attr.rst
# ("$ devlink dev eswitch show pci/0000:08:00.0" → "pci/0000:08:00.0: mode switchdev inline-mode none
# encap-mode basic"), with the BF3's PCI address; the legacy line is the same format.
DEVLINK_SWITCHDEV = "pci/0000:03:00.0: mode switchdev inline-mode none encap-mode basic\n"
DEVLINK_LEGACY = "pci/0000:03:00.0: mode legacy inline-mode none encap-mode basic\n"
# `ip -j link show` (iproute2 6.1.0 on this machine: a veth p0 down, then up)
IP_LINK = ('[{"ifindex":3,"link":"p0peer","ifname":"p0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],'
           '"mtu":1500,"qdisc":"noqueue","operstate":"UP","linkmode":"DEFAULT","group":"default","txqlen":1000,'
           '"link_type":"ether","address":"ea:a3:c8:b2:7a:ca","broadcast":"ff:ff:ff:ff:ff:ff"},'
           '{"ifindex":4,"link":"p1peer","ifname":"p1","flags":["BROADCAST","MULTICAST","M-DOWN"],"mtu":1500,'
           '"qdisc":"noop","operstate":"DOWN","linkmode":"DEFAULT","group":"default","txqlen":1000,'
           '"link_type":"ether","address":"ea:a3:c8:b2:7a:cb","broadcast":"ff:ff:ff:ff:ff:ff"}]\n')


@pytest.mark.parametrize("text,mode", [(DEVLINK_SWITCHDEV, "switchdev"), (DEVLINK_LEGACY, "legacy"),
                                       ("pci/0000:03:00.0: inline-mode none encap-mode basic\n", None),
                                       ("", None)])
def test_eswitch_mode_parsed_from_devlink(text, mode):
    assert dp.parse_eswitch_mode(text) == mode


@pytest.mark.parametrize("version,constraint,ok", [
    ("2.9.0072", ">=2.9.0", True), ("2.9.0072", "<3.0.0", True), ("2.10.0087", "<3.0.0", True),
    ("3.0.0058", "<3.0.0", False), ("2.8.0005", ">=2.9.0", False), ("2.9.0072", "==2.9.72", True)])
def test_version_constraints_compare_numerically(version, constraint, ok):
    assert dp.version_ok(version, constraint) is ok


def test_supported_doca_versions_are_the_ones_lb_meson_checks():
    assert dp.doca_supported() == [">=2.9.0", "<3.0.0"]
    assert "fs.read('doca_versions.txt')" in (dp.REPO_ROOT / "lb" / "meson.build").read_text()


@pytest.mark.parametrize("modversion,emulation,vfile,ready,detail,fix", [
    ("2.9.0072", None, "2.9.0072", True, "2.9.0072 (pkg-config doca-flow): supported (>=2.9.0 <3.0.0)", ""),
    ("2.9.0072", "lb/emu", None, True,
     "2.9.0072 (pkg-config doca-flow, the emulation lb/emu): supported (>=2.9.0 <3.0.0)", ""),
    ("3.0.0058", None, "3.0.0058", False,
     "3.0.0058 (pkg-config doca-flow): not supported (XenoFlow builds with >=2.9.0 <3.0.0)",
     "install DOCA >=2.9.0 <3.0.0 (the DOCA 2.9 BFB; 3.0 removed doca_flow_shared_resource_cfg.domain)"),
    (None, None, "2.9.0072", False,
     "pkg-config finds no doca-flow; /opt/mellanox/doca/applications/VERSION says 2.9.0072",
     "or put its pkgconfig directory in xenoflow.build_env.pkg_config_path (now /opt/x/pkgconfig)"),
])
def test_doca_row_names_the_version_found_and_whether_it_is_supported(modversion, emulation, vfile, ready,
                                                                      detail, fix):
    r = dp.doca_row("fips5-dpu", modversion, emulation, vfile, "/opt/x/pkgconfig")
    assert (r.check, r.ready, r.detail) == ("DOCA (doca-flow)", ready, detail)
    assert fix in r.fix and (r.fix == "") is ready


@pytest.mark.parametrize("model,mode,ready,caution,detail_has,fix_has", [
    ("vnf-hairpin", "legacy", True, False, "legacy (xenoflow.port_model vnf-hairpin: compatible)", ""),
    # a stock BF3 in DPU mode: the thesis's own setup, so a risk to check, not a refusal
    ("vnf-hairpin", "switchdev", True, True, "switchdev (xenoflow.port_model vnf-hairpin: hairpin is not supported "
     "with the PF in switchdev mode (DPDK 22.11 doc/guides/nics/mlx5.rst", "check that frames cross"),
    ("switch", "switchdev", True, False, "switchdev (xenoflow.port_model switch: compatible)", ""),
    ("switch", "legacy", False, False, "representors, which exist only in switchdev mode",
     "devlink dev eswitch set pci/0000:03:00.0 mode switchdev"),
    ("vnf-hairpin", None, False, False, "devlink answered nothing", "devlink dev eswitch show pci/0000:03:00.0"),
])
def test_eswitch_row_says_whether_the_port_model_works_with_the_mode(model, mode, ready, caution, detail_has,
                                                                      fix_has):
    r = dp.eswitch_row("fips5-dpu", "p0", "0000:03:00.0", mode, "devlink answered nothing", model)
    assert (r.check, r.ready, r.caution) == ("eSwitch mode p0 (0000:03:00.0)", ready, caution)
    assert detail_has in r.detail and fix_has in r.fix and (r.fix == "") is (ready and not caution)


def test_link_and_hugepages_rows_from_captured_outputs():
    states = dp.parse_link_states(IP_LINK)
    assert states == {"p0": "UP", "p1": "DOWN"}
    up, down, gone = (dp.link_row("d", n, states) for n in ("p0", "p1", "p9"))
    assert (up.ready, up.detail, up.fix) == (True, "operstate UP", "")
    assert (down.ready, down.detail) == (False, "operstate DOWN") and down.fix.startswith("ip link set p1 up")
    assert (gone.ready, gone.detail) == (False, "missing")
    assert dp.parse_link_states("") == {} and dp.parse_link_states("not json") == {}
    hp = {"count": 2048, "size_kb": 2048, "mount": "/dev/hugepages"}
    r = dp.hugepages_row("d", hp, 0, 0)
    assert (r.check, r.ready, r.detail) == ("hugepages 2048 kB", True,
                                            "0 reserved, 0 free; the start step reserves 2048 (xenoflow.hugepages.count)")
    r = dp.hugepages_row("d", None, 0, 0)
    assert not r.ready and "xenoflow.hugepages is null" in r.detail and "hugepages-2048kB/nr_hugepages" in r.fix
    r = dp.hugepages_row("d", {"count": 4, "size_kb": 1048576}, None, None)
    assert (r.check, r.ready, r.detail) == ("hugepages 1048576 kB", False, "no /sys/kernel/mm/hugepages/hugepages-1048576kB")


class RecordingDpu:
    """A BlueField's Arm side (hardware boundary) as a recording double answering each read-only
    check with the outputs above: DOCA 2.9.0072, the PFs in switchdev (DPU mode), p1 down."""
    name = "fips5-dpu"

    def __init__(self, cfg, answers):
        self.ncfg, self.ssh, self.answers, self.ran = cfg.nodes["fips5-dpu"], cfg.nodes["fips5-dpu"].ssh, answers, []

    def run(self, argv, check=True, **kw):
        self.ran.append(argv)
        for key, out in self.answers.items():
            if key in " ".join(argv):
                return CommandResult(argv, 0, out, "", self.name)
        return CommandResult(argv, 1, "", f"{argv[0]}: not found", self.name)


def test_recording_double_dpu_preflight_rows_on_a_stock_bf3():
    from xenobench import dpu as dpu_mod
    from xenobench.config import load_config
    cfg = load_config("config/fips.yaml")
    dpu = RecordingDpu(cfg, {"--modversion doca-flow": "2.9.0072\n", "applications/VERSION": "2.9.0072\n",
                             "ip -j link show": IP_LINK, "pci/0000:03:00.0": DEVLINK_SWITCHDEV,
                             "pci/0000:03:00.1": DEVLINK_SWITCHDEV.replace("03:00.0", "03:00.1"),
                             "nr_hugepages": "0\n0\n", "list-br": "ovsbr1\novsbr2\n",
                             # OVS set up to offload (DOCA "Virtual Switch on BlueField"), as OVS-DOCA
                             # with its PMD threads on cpu0 ("OVS-DOCA Hardware Acceleration")
                             "other_config:hw-offload": '"true"\n', "other_config:doca-init": '"true"\n',
                             "other_config:pmd-cpu-mask": '"0x1"\n'})
    rows = {r.check: r for r in dp._check_dpu(cfg, dpu)}
    assert [(c, r.ready) for c, r in rows.items()] == [
        ("DOCA (doca-flow)", True), ("xenoflow.port_model", True),
        ("eSwitch mode p0 (0000:03:00.0)", True), ("link p0", True),
        ("eSwitch mode p1 (0000:03:00.1)", True), ("link p1", False),
        ("hugepages 2048 kB", True), ("OVS bridge ovsbr2", True), ("OVS hw-offload", True), ("OVS flavour", True)]
    assert rows["OVS flavour"].detail == ("OVS-DOCA, PMD cores 0x1 (other_config:pmd-cpu-mask): left out of the "
                                          "in-hardware check's core load")
    assert ["sudo", "-n", *dpu_mod.ovs_hw_offload_get()] in dpu.ran  # through the rule's exact command
    assert rows["eSwitch mode p1 (0000:03:00.1)"].detail.startswith(
        "switchdev (xenoflow.port_model vnf-hairpin: hairpin is not supported")
    # read-only: nothing but queries ran (no set, no echo into sysfs, no add-flow)
    assert not [a for a in dpu.ran if {"set", "tee", "add-flow", "add-br"} & set(a)]
    table = dp.table(list(rows.values()))
    assert "eSwitch mode p0 (0000:03:00.0)  CHECK" in table and "link p1                         MISSING" in table


class _Deployed:
    """A node (boundary double) whose `current` artefact link reads as given ("" = none)."""
    name, deploy_dir = "fips2", "xenobench-deploy"

    def __init__(self, cfg, have):
        self.ncfg, self.have = cfg.nodes["fips2"], have

    def run(self, argv, check=True, **kw):
        return CommandResult(argv, 0 if self.have else 1, f"{self.have}\n" if self.have else "", "", self.name)


def test_a_node_without_this_checkouts_artefact_is_named_before_any_agent_starts():
    """A purged or rebuilt node (the second rehearsal found it: a ModuleNotFoundError of the first
    agent) or one holding another checkout's agents is named with what it holds."""
    from xenobench.config import load_config
    cfg = load_config("config/fips.yaml")
    want, _ = dp.build_artefact("dns_backend", cfg.state_dir / "deploy")
    assert dp.deployed_mismatch(cfg, _Deployed(cfg, want)) is None
    assert dp.deployed_mismatch(cfg, _Deployed(cfg, "")) == "nothing of xenobench is deployed there"
    assert dp.deployed_mismatch(cfg, _Deployed(cfg, "0123456789abcdef")) == (
        f"it holds artefact 0123456789abcdef, this checkout's is {want}")


class _OvsDpu:
    """The DPU as a double that records commands; XenoFlow has no process record (its start failed)."""
    name = "fips5-dpu"

    def __init__(self):
        self.calls = []

    def run(self, argv, check=True, **kw):
        self.calls.append(list(argv))
        return CommandResult(list(argv), 0, "/home/ubuntu\n" if argv == ["pwd"] else "", "", self.name)

    def handle(self, tag):
        return None

    def running(self, tag):
        return False

    def remove_deployed(self):
        return True

    deploy_dir = "xenobench-deploy"


DEL_FLOW = ["sudo", "-n", "/usr/bin/ovs-ofctl", "-O", "OpenFlow12", "--strict", "del-flows", "ovsbr2", "ip,in_port=pf1hpf"]


def test_xenoflow_ovs_rule_removed_by_stop_and_purge_without_a_process_record(monkeypatch):
    """A start that failed after adding the OVS rule leaves no process record: `lb stop` and
    `testbed down --purge` remove the rule all the same (before: stop returned at the missing
    record, purge never touched OVS)."""
    from xenobench.config import load_config
    from xenobench.lb.xenoflow import XenoFlowLB
    from xenobench.shipping import purge
    from xenobench.testbed import get_testbed

    tb = get_testbed(load_config("config/fips.yaml"))
    dbl = _OvsDpu()
    dbl.ncfg = tb.cfg.nodes["fips5-dpu"]
    monkeypatch.setattr(XenoFlowLB, "node", property(lambda self: dbl))
    assert XenoFlowLB(tb).stop() is False
    assert dbl.calls == [DEL_FLOW]
    dbl.calls.clear()
    monkeypatch.setattr(type(tb), "nodes", lambda self: [dbl])
    assert purge(tb) == ["fips5-dpu"]
    assert DEL_FLOW in dbl.calls


def test_xenoflow_failed_start_removes_its_ovs_rule(monkeypatch):
    from xenobench.config import load_config
    from xenobench.errors import NodeError
    from xenobench.lb.xenoflow import XenoFlowLB
    from xenobench.testbed import get_testbed

    tb = get_testbed(load_config("config/fips.yaml"))
    dbl = _OvsDpu()
    dbl.put = lambda *a: None

    def run(argv, check=True, **kw):
        dbl.calls.append(list(argv))
        if argv[0] == "cmp":  # the installed XenoFlow is not this build: the start fails after the OVS step
            return CommandResult(list(argv), 1, "", "", dbl.name)
        return CommandResult(list(argv), 0, "/home/ubuntu\n" if argv == ["pwd"] else "", "", dbl.name)
    dbl.run = run
    monkeypatch.setattr(XenoFlowLB, "node", property(lambda self: dbl))
    monkeypatch.setattr(XenoFlowLB, "_tarball", lambda self: "src.tar.gz")
    with pytest.raises(NodeError, match="/usr/local/libexec/xenobench/xenoflow differs from this build"):
        XenoFlowLB(tb).start()
    adds = [i for i, c in enumerate(dbl.calls) if "add-flow" in c]
    assert adds and dbl.calls[-1] == DEL_FLOW


def test_table_wraps_details_and_lists_each_fix_once_below():
    """The table stays DETAIL_WIDTH wide in its detail column however long a detail is; a fix is
    referenced [n] and printed once, whole, below (a command copies in one piece)."""
    long = "word " * 40
    fix = "sudo install -D -o root -g root -m 0755 /home/ubuntu/x /usr/local/libexec/xenobench/xenoflow"
    rows = [dp.Row("fips1", "client", "login", True, "root@fips1"),
            dp.Row("fips5-dpu", "dpu", "eSwitch mode p0", False, long.strip(), fix),
            dp.Row("fips5-dpu", "dpu", "eSwitch mode p1", False, "short", fix),
            dp.Row("fips5-dpu", "dpu", "link p1", True, "operstate UP", "check it", caution=True)]
    lines = dp.table(rows).splitlines()
    assert lines[0].split() == ["node", "role", "check", "status", "detail", "fix"]
    body = lines[1:lines.index("")]
    assert max(len(ln) for ln in body) <= len("fips5-dpu  client  eSwitch mode p0  MISSING  ") + dp.DETAIL_WIDTH + 5
    assert [ln.split()[-1] for ln in body if ln.startswith("fips5-dpu")] == ["[1]", "[1]", "[2]"]
    assert sum(ln.startswith(" ") for ln in body) == 2  # the long detail goes on over two more lines
    col = lines[0].index("detail")
    assert " ".join(ln[col:].removesuffix("[1]").strip() for ln in body[1:4]) == long.strip()
    assert lines[lines.index("") + 1:] == ["fixes:", f"[1] {fix}", "[2] check it"]


def test_readiness_table_says_which_lb_is_left_out_why_and_the_fix():
    """config/fips.yaml lists Katran in six experiments; its testbed has no L3 hop (the placeholder
    gateway MAC): one CHECK row (deploy goes on), "left out: <why>", the experiments whose Katran
    points are not planned, the fix below the table; no IPIP check for it."""
    from xenobench.config import DEFAULT_CONFIG, load_config
    from xenobench.experiments import left_out
    from xenobench.lb import unavailable

    cfg = load_config(DEFAULT_CONFIG.parent / "fips.yaml")
    rows = dp.left_out_rows(cfg)
    why, _, fix = unavailable("katran", cfg).partition(" (fix: ")
    exps = ", ".join(x.experiment for x in left_out(cfg))
    assert [(r.node, r.check, r.ready, r.caution, r.detail, r.fix) for r in rows] == [
        ("fips5", "katran", True, True, f"left out: {why}; its points of {exps} are not planned", fix[:-1])]
    text = dp.table(rows)
    assert "katran  CHECK   left out: the testbed has no L3 hop" in text
    assert text.endswith(f"[1] {fix[:-1]}")


#: (the bridge each port of the flows is on, the fix the missing-bridge row gives): the stock image
#: holds both of the paper's ports on ovsbr2; ports on two bridges or on none name where each is
BRIDGE_FIXES = [
    ({"pf1hpf": "ovsbr2", "p1": "ovsbr2"}, "set xenoflow.ovs.bridge in {cfg} to ovsbr2 (it holds pf1hpf, p1)"),
    ({"pf1hpf": "ovsbr1", "p1": "ovsbr2"},
     "set xenoflow.ovs.bridge in {cfg} to the bridge that holds the flows' ports (pf1hpf on ovsbr1; p1 on ovsbr2; "
     "bridges: ovsbr1, ovsbr2), or add them to one (ovs-vsctl add-port BRIDGE PORT)"),
    ({"pf1hpf": None, "p1": None},
     "set xenoflow.ovs.bridge in {cfg} to the bridge that holds the flows' ports (pf1hpf on no bridge; p1 on no "
     "bridge; bridges: ovsbr1, ovsbr2), or add them to one (ovs-vsctl add-port BRIDGE PORT)"),
]


@pytest.mark.parametrize("held,fix", BRIDGE_FIXES, ids=["one bridge", "two bridges", "no bridge"])
def test_a_missing_bridge_names_the_bridge_that_holds_the_flows_ports(tmp_path, held, fix):
    from xenobench import dpu as dpu_mod
    from xenobench.config import load_config
    p = tmp_path / "fips.yaml"
    p.write_text(yaml.safe_dump({"extends": str(dp.REPO_ROOT / "config" / "fips.yaml"),
                                 "xenoflow": {"ovs": {"bridge": "br0"}}}))
    cfg = load_config(p)
    assert dpu_mod.ovs_ports(cfg) == ["pf1hpf", "p1"]
    answers = {"list-br": "ovsbr1\novsbr2\n", **{f"port-to-br {k}": f"{v}\n" for k, v in held.items() if v}}
    dpu = RecordingDpu(cfg, answers)
    row = next(r for r in dp._check_dpu(cfg, dpu) if r.check == "OVS bridge br0")
    assert (row.ready, row.detail, row.fix) == (False, "bridges: ovsbr1, ovsbr2", fix.format(cfg=p))
    # the reads go through the rule's exact commands, which the rule holds
    rule = {tuple(a) for a in dpu_mod.root_commands(cfg, "/home/ubuntu")}
    asked = [tuple(a[a.index(dpu_mod.OVS_VSCTL):]) for a in dpu.ran if "port-to-br" in a]
    assert asked == [(dpu_mod.OVS_VSCTL, "port-to-br", "pf1hpf"), (dpu_mod.OVS_VSCTL, "port-to-br", "p1")]
    assert set(asked) <= rule
