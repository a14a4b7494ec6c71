"""The ssh transport end to end against a real OpenSSH server in the dns_backend's namespace.
The harness connects from inside the client namespace (ssh.netns), so no route or link is added
to the root namespace."""

import dataclasses
import json
import shutil
import subprocess
import time

import pytest

from xenobench.errors import NodeError
from xenobench.nodes import SshNode
from xenobench.config import SshConfig

from .conftest import needs_root, start_sshd

pytestmark = [needs_root, pytest.mark.skipif(shutil.which("sshd") is None and not
                                             __import__("os").path.exists("/usr/sbin/sshd"),
                                             reason="needs openssh-server")]

PORT = 2222


@pytest.fixture(scope="module")
def sshd(testbed, tmp_path_factory):
    d = tmp_path_factory.mktemp("sshd")
    server = testbed.cfg.role("dns_backend")
    start_sshd(testbed, server.name, d, PORT)
    yield d, server
    testbed.node(server.name).stop("sshd-test")


def ssh_node(testbed, d, server, **over):
    sc = SshConfig(host=server.iface().addr, port=PORT, user="root", key=str(d / "client_key"),
                   known_hosts=str(d / "known_hosts"), netns=f"{testbed.cfg.prefix}fips1",
                   connect_timeout=5, **over)
    ncfg = dataclasses.replace(server, transport="ssh", ssh=sc)
    return SshNode(testbed.cfg, ncfg)


def test_ssh_run_background_and_files(testbed, sshd, tmp_path):
    d, server = sshd
    n = ssh_node(testbed, d, server)
    try:
        # the command runs on the server node: it sees the server's address
        assert server.iface().addr in n.run(["ip", "-o", "addr", "show", "dev", "eth0"]).stdout
        tricky = ["a b", "it's", 'say "hi"', "x;rm -rf /nonexistent", "$(id)", "*"]
        r = n.run(["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *tricky])
        assert json.loads(r.stdout) == tricky
        assert n.run(["sh", "-c", "echo err >&2; exit 7"], check=False).returncode == 7
        with pytest.raises(NodeError, match=r"exit status 7: err"):
            n.run(["sh", "-c", "echo err >&2; exit 7"])
        assert n.run(["cat"], input="via stdin").stdout == "via stdin"
        with pytest.raises(NodeError, match="timed out after 0.5 s"):
            n.run(["sleep", "5"], timeout=0.5)
        h = n.start("remote-sleep", ["sleep", "120"])
        assert n.running("remote-sleep")
        ns_pids = subprocess.run(["ip", "netns", "pids", f"{testbed.cfg.prefix}{server.name}"],
                                 capture_output=True, text=True).stdout.split()
        assert str(h.pid) in ns_pids
        assert n.stop("remote-sleep") is True
        time.sleep(0.1)
        assert not n.running("remote-sleep")
        src = tmp_path / "up.bin"
        src.write_bytes(bytes(range(256)) * 40)
        n.put(src, str(tmp_path / "remote" / "copy.bin"))
        n.get(str(tmp_path / "remote" / "copy.bin"), tmp_path / "back.bin")
        assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    finally:
        n.close()


def test_unknown_host_key_is_refused_unless_allowed(testbed, sshd, tmp_path):
    d, server = sshd
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    n = ssh_node(testbed, d, server)
    n.ssh = dataclasses.replace(n.ssh, known_hosts=str(empty))
    with pytest.raises(NodeError, match=r"host key of .* is not in .*known_hosts.*accept_unknown_host_keys"):
        n.run(["true"])
    n.ssh = dataclasses.replace(n.ssh, accept_unknown_host_keys=True)
    try:
        assert n.run(["echo", "ok"]).stdout.strip() == "ok"
    finally:
        n.close()
    assert server.iface().addr in empty.read_text()  # remembered after the explicit opt-in


def test_wrong_key_and_closed_port_fail_clearly(testbed, sshd, tmp_path):
    d, server = sshd
    n = ssh_node(testbed, d, server, )
    n.ssh = dataclasses.replace(n.ssh, port=2223)
    with pytest.raises(NodeError, match=r"Failed to connect to node fips2 \(root@198.18.0.2:2223\)"):
        n.run(["true"])
