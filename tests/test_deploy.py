"""`xenobench deploy` against a real OpenSSH server in the dns_backend's namespace (the harness
connects from the client's namespace): the artefact arrives, the agents run from it and find
their BPF objects inside it, a second deploy copies nothing, the readiness table names what is
missing with its fix, purge removes it."""

import dataclasses
import os
import ipaddress

import pytest

from xenobench import deploy as dp
from xenobench.config import Interface, SshConfig
from xenobench.nodes import SshNode
from xenobench.nodes.base import CommandResult, sudo_refused

from .conftest import needs_root, start_sshd

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
            if argv[0] != "sudo":  # the read-only checks that need no root: DOCA absent here
                return CommandResult(argv, 1, "", "not found", self.name)
            assert argv[:2] == ["sudo", "-n"], argv  # never a prompt
            return CommandResult(argv, 1, "", SUDO_N, self.name)

    lb = XenoFlowLB(tb)
    with pytest.raises(NodeError) as e:
        lb.apply_ovs(Dpu())
    msg = str(e.value)
    assert msg.startswith("Failed to apply the OVS rule on fips5-dpu: sudo asks ubuntu for a password")
    assert "ubuntu ALL=(root) NOPASSWD: /usr/bin/ovs-vsctl, /usr/bin/ovs-ofctl" in msg
    assert "/etc/sudoers.d/xenobench" in msg and "Open vSwitch running" not in msg
    rows = dp._check_dpu(cfg, type("N", (Dpu,), {"ncfg": cfg.nodes["fips5-dpu"]})())
    ovs = [r for r in rows if r.check.startswith("OVS bridge")][0]
    assert (ovs.ready, ovs.detail) == (False, "sudo asks for a password")
    assert "/etc/sudoers.d/xenobench" in ovs.fix and "NOPASSWD" in ovs.fix
