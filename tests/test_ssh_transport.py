"""The ssh transport end to end against a real OpenSSH server in the dns_backend's namespace.
The harness connects from inside the client namespace (ssh.netns), so no route or link is added
to the root namespace."""

import dataclasses
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from xenobench.errors import NodeError
from xenobench.nodes import SshNode, _starttime
from xenobench.config import SshConfig

from .conftest import NO_SFTP_PORT, needs_root, start_sshd

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
        # a large output comes back whole (the reader must wait for EOF, not for the exit status:
        # test_output_after_the_exit_status_is_read_to_eof)
        big = ["python3", "-c", "import sys; sys.stdout.write('x' * 4000000); sys.stderr.write('e' * 70000)"]
        for _ in range(3):
            r = n.run(big)
            assert (len(r.stdout), len(r.stderr)) == (4000000, 70000)
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
        # a relative path (xenoflow.remote_src's default) means the login's home to SFTP and to a
        # command alike: what put() wrote there, cat finds by the same name
        rel = f"xenobench-test-{os.getpid()}/sub/copy.txt"
        src.write_text("relative to home\n")
        try:
            n.put(src, rel)
            assert n.run(["cat", rel]).stdout == "relative to home\n"
            home = n.run(["sh", "-c", 'printf %s "$HOME"']).stdout
            assert Path(home, rel).read_text() == "relative to home\n"  # the same host's file system
        finally:
            n.run(["rm", "-rf", "--", rel.split("/")[0]])
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


# --- ssh.workdir and the private directory ----------------------------------------------------------
def test_background_start_with_workdir_runs_there_and_is_found_later(testbed, sshd, tmp_path):
    """`setsid cd DIR && ...` never started anything (setsid cannot run a shell builtin) though a
    pid was printed; the cd now comes first. A second node object (a later invocation) finds the
    process and its log through the recorded private directory; stop_all() removes it."""
    d, server = sshd
    wd = tmp_path / "work dir"  # a space: the cd is quoted
    wd.mkdir()
    n = ssh_node(testbed, d, server, workdir=str(wd))
    try:
        assert n.run(["pwd"]).stdout.strip() == str(wd)
        h = n.start("wd-proc", ["sh", "-c", "pwd; echo started; exec sleep 120"], ready=0.5)
        assert n.running("wd-proc")
        private = n.work_dir
        assert re.fullmatch(rf"/tmp/xenobench-{testbed.cfg.prefix.rstrip('-')}\.[0-9a-f]{{16}}", private)
        assert h.log == f"{private}/logs/{server.name}.wd-proc.log"
        st = os.stat(private)  # the file system is shared with the server's namespace
        assert (stat.S_IMODE(st.st_mode), st.st_uid, os.path.islink(private)) == (0o700, 0, False)
        assert n.read_log(h).splitlines() == [str(wd), "started"]
        assert _starttime(h.pid) == h.starttime_ticks
        later = ssh_node(testbed, d, server, workdir=str(wd))
        assert later.work_dir == private and later.running("wd-proc")
        assert later.stop("wd-proc") is True
        assert not os.path.exists(f"/proc/{h.pid}") or _starttime(h.pid) != h.starttime_ticks \
            or open(f"/proc/{h.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
        later.remove_work_dir()  # what stop_all() does after stopping the processes
        assert not os.path.exists(private)
        assert not (testbed.cfg.state_dir / "remote" / f"{server.name}.json").exists()
        later.close()
    finally:
        n.stop("wd-proc")
        n.remove_work_dir()
        n.close()


def test_private_directory_taken_over_by_someone_else_is_refused(testbed, sshd, tmp_path):
    """A recorded directory that became a symlink (or another user's) is not written into."""
    d, server = sshd
    n = ssh_node(testbed, d, server)
    try:
        private = n.work_dir
        os.symlink(tmp_path, private)
        with pytest.raises(NodeError, match=rf"{re.escape(private)} exists and is not a directory of this user"):
            n.start("x", ["true"])
        assert list(tmp_path.iterdir()) == []
    finally:
        os.unlink(private)
        (testbed.cfg.state_dir / "remote" / f"{server.name}.json").unlink(missing_ok=True)
        n.close()


# --- known_hosts as OpenSSH has it ---------------------------------------------------------------------
OTHER_KEYS = (
    "# a comment the file must keep\n"
    "other.example sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAIH1xA0Rm7qFw5b1YcSg"
    "Jm3bT8V1Rz6v0hQ3h0n0x8yVGAAAABHNzaDo= security-key\n"
    "|1|2fGZy0aZ2Zs1Qy3x1E3LrCzYx1c=|9hGm6aXz2oQmY7rQvX3mQ1nC0F4= ssh-ed25519 "
    "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
    "@cert-authority *.example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGm3dbJ2HnV5C3Z3rKzqAeb7bW3oQk0p0u1"
    "m5Hf3f3rK\n"
    "@revoked * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFk6Nd0r8lH6y1t7bW5Yk3C3q7n0HhXr2q8c1w0mE5sP")


def _host_line(d, server):
    return f"[{server.iface().addr}]:{PORT} " + " ".join((d / "host_key.pub").read_text().split()[:2])


def test_new_host_key_is_appended_as_one_line(testbed, sshd, tmp_path):
    """With accept_unknown_host_keys, one line is appended; comments, markers, hashed hosts and
    key types paramiko does not know stay as they were (paramiko's save rewrote the file from what
    it had parsed, and its loader failed on the markers)."""
    d, server = sshd
    kh = tmp_path / "known_hosts"
    kh.write_text(OTHER_KEYS)  # no final newline: the appended line must still start on its own
    for _ in range(2):  # the second connection finds the key: nothing more is written
        n = ssh_node(testbed, d, server, accept_unknown_host_keys=True)
        n.ssh = dataclasses.replace(n.ssh, known_hosts=str(kh))
        try:
            assert n.run(["echo", "ok"]).stdout == "ok\n"
        finally:
            n.close()
        assert kh.read_text() == OTHER_KEYS + "\n" + _host_line(d, server) + "\n"


def test_revoked_host_key_is_refused_even_when_listed_and_accepted(testbed, sshd, tmp_path):
    d, server = sshd
    key = " ".join((d / "host_key.pub").read_text().split()[:2])
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{_host_line(d, server)}\n@revoked * {key}\n")
    n = ssh_node(testbed, d, server, accept_unknown_host_keys=True)
    n.ssh = dataclasses.replace(n.ssh, known_hosts=str(kh))
    with pytest.raises(NodeError, match=rf"Failed to connect to node {server.name} \(.*\): host key of "
                                        rf"\[{re.escape(server.iface().addr)}\]:{PORT} \(ssh-ed25519\) is marked "
                                        rf"@revoked in {re.escape(str(kh))} line 2"):
        n.run(["true"])
    assert kh.read_text() == f"{_host_line(d, server)}\n@revoked * {key}\n"


def test_cert_authority_line_explains_the_refusal(testbed, sshd, tmp_path):
    d, server = sshd
    kh = tmp_path / "known_hosts"
    kh.write_text(OTHER_KEYS + "\n")
    n = ssh_node(testbed, d, server)
    n.ssh = dataclasses.replace(n.ssh, known_hosts=str(kh))
    with pytest.raises(NodeError, match=r"\(ssh-ed25519 SHA256:[A-Za-z0-9+/]{43}\) is not in .*known_hosts; compare the "
                                        r"fingerprint with the node's console \(`ssh-keygen -lf "
                                        r"/etc/ssh/ssh_host_\*_key.pub`\) and add it \(ssh-keyscan\), or set "
                                        rf"nodes\.{server.name}\.ssh\.accept_unknown_host_keys: true; lines 4 are "
                                        r"@cert-authority keys, which paramiko cannot check \(host certificates, "
                                        r"paramiko issue #771\)"):
        n.run(["true"])
    kh.write_text("@marker * ssh-ed25519 AAAA\n")
    with pytest.raises(NodeError, match=r"Failed to read known_hosts .*: line 1: unknown marker '@marker' "
                                        r"\(OpenSSH knows @cert-authority and @revoked\)"):
        n.run(["true"])


# --- pids are checked against their start time before a signal -------------------------------------
def _forge(node, tag):
    """The record of `tag` with another start time: what a record looks like once its process
    is gone and the kernel gave the pid to someone else."""
    f = node.proc_dir / f"{node.name}.{tag}.json"
    rec = json.loads(f.read_text())
    rec["starttime_ticks"] += 1
    f.write_text(json.dumps(rec))
    return node.handle(tag)


@pytest.mark.parametrize("transport", ["netns", "ssh"])
def test_a_reused_pid_is_never_signalled(testbed, sshd, transport):
    d, server = sshd
    n = testbed.node(server.name) if transport == "netns" else ssh_node(testbed, d, server)
    try:
        h = n.start("pid-reuse", ["sleep", "120"])
        forged = _forge(n, "pid-reuse")
        assert n.signal(forged, signal.SIGTERM) is False
        assert n.stop("pid-reuse") is False        # not ours: record dropped, process left alone
        time.sleep(0.2)
        assert _starttime(h.pid) == h.starttime_ticks  # still running
        assert n.signal(h, signal.SIGKILL) is True
        deadline = time.monotonic() + 5
        while _starttime(h.pid) == h.starttime_ticks and time.monotonic() < deadline:
            if open(f"/proc/{h.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.05)
        st = _starttime(h.pid)
        assert st != h.starttime_ticks or open(f"/proc/{h.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    finally:
        n.stop("pid-reuse")
        if transport == "ssh":
            n.remove_work_dir()
            n.close()


class ChannelDouble:
    """A test double of paramiko's Channel at the SSH boundary, replaying what a real sshd did in
    CI: the exit status arrives first, the rest of the output later, then EOF (sshd sends the status
    when the process exits, ahead of output still waiting for the window). A real sshd does this
    only under load, so the timing is forced here: events = (seconds after exec, kind, value)."""

    def __init__(self, events):
        self.events = sorted(events, key=lambda e: e[0])
        self.out, self.err = bytearray(), bytearray()
        self.status = None
        self.eof_received_ = False
        self.t0 = time.monotonic()

    def _arrive(self):  # what paramiko's transport thread would have buffered by now
        while self.events and time.monotonic() - self.t0 >= self.events[0][0]:
            _, kind, value = self.events.pop(0)
            if kind == "status":
                self.status = value
            elif kind == "out":
                self.out += value
            elif kind == "err":
                self.err += value
            else:
                self.eof_received_ = True

    @property
    def eof_received(self):
        self._arrive()
        return self.eof_received_

    def recv_ready(self):
        self._arrive()
        return bool(self.out)

    def recv_stderr_ready(self):
        self._arrive()
        return bool(self.err)

    def exit_status_ready(self):
        self._arrive()
        return self.status is not None

    def recv(self, n):
        data, self.out[:] = bytes(self.out[:n]), self.out[n:]
        return data

    def recv_stderr(self, n):
        data, self.err[:] = bytes(self.err[:n]), self.err[n:]
        return data

    def recv_exit_status(self):
        return self.status

    closed = False  # paramiko's Channel.closed: only a dead connection closes it before EOF

    def settimeout(self, t): pass
    def exec_command(self, cmd): pass
    def shutdown_write(self): pass
    def close(self): pass


def test_output_after_the_exit_status_is_read_to_eof(testbed, tmp_path):
    chan = ChannelDouble([(0, "out", b"a" * 32768), (0, "status", 0), (0.05, "out", b"b" * 32768),
                          (0.06, "err", b"warn"), (0.1, "out", b"c" * 32768), (0.1, "eof", None)])
    transport = type("T", (), {"open_session": lambda self, timeout=None: chan, "is_active": lambda self: True})()
    n = SshNode(testbed.cfg, dataclasses.replace(testbed.cfg.nodes["fips2"], transport="ssh",
                                                 ssh=SshConfig(host="192.0.2.1", key=str(tmp_path / "k"))))
    n._client = type("C", (), {"get_transport": lambda self: transport, "close": lambda self: None})()
    r = n.run(["bpftool", "map", "dump"])
    assert (r.stdout, r.stderr, r.returncode) == ("a" * 32768 + "b" * 32768 + "c" * 32768, "warn", 0)


# --- sessions: a program kept running for reads (xenobench.agents.readfile, xenobench.sampler) -------
REPO = Path(__file__).resolve().parents[1]


def _reader_argv(*paths):
    # the SSH server here is this machine: this interpreter with the checkout importable
    return ["env", f"PYTHONPATH={REPO}", os.sys.executable, "-m", "xenobench.agents.readfile", *map(str, paths)]


def _readers_in(testbed, server) -> list[str]:
    pids = subprocess.run(["ip", "netns", "pids", f"{testbed.cfg.prefix}{server.name}"],
                          capture_output=True, text=True).stdout.split()
    out = []
    for p in pids:
        try:
            if b"xenobench.agents.readfile" in Path(f"/proc/{p}/cmdline").read_bytes():
                out.append(p)
        except OSError:
            pass
    return out


@pytest.mark.parametrize("transport", ["netns", "ssh"])
def test_a_session_reads_afresh_refuses_by_name_and_leaves_nothing(testbed, sshd, transport, tmp_path):
    d, server = sshd
    n = testbed.node(server.name) if transport == "netns" else ssh_node(testbed, d, server)
    f = tmp_path / "value"
    f.write_text("one\n")
    try:
        s = n.session(_reader_argv(f, tmp_path / "missing", "/proc/net/dev"))
        assert s.request("0") == b"one\n"
        f.write_text("two, longer\n")  # the same open file, read again from its start
        assert s.request("0") == b"two, longer\n"
        # /proc/net/dev of the node's namespace: its eth0, not the harness's interfaces
        assert re.search(rb"^\s*eth0:", s.request("2"), re.M)
        with pytest.raises(NodeError, match=r"No such file or directory"):
            s.request("1")
        with pytest.raises(NodeError, match=r"no path with index '7' \(0\.\.2\)"):
            s.request("7")
        assert s.request("0") == b"two, longer\n"  # a refusal leaves the session usable
        # two threads on one session (a sampler's thread and its procedure): every reply whole
        import threading
        bad = []

        def hammer(i):
            for _ in range(100):
                r = s.request(str(i))
                if not (r == b"two, longer\n" if i == 0 else re.search(rb"^\s*eth0:", r, re.M)):
                    bad.append(r[:40])
        ts = [threading.Thread(target=hammer, args=(i,)) for i in (0, 2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert bad == []
        assert len(_readers_in(testbed, server)) == 1
        s.close()
        time.sleep(0.3)
        assert _readers_in(testbed, server) == []
        with pytest.raises(NodeError, match="the session is closed"):
            s.request("0")
        # the program killed under the harness: the next read names its end, nothing is left
        s = n.session(_reader_argv(f))
        assert s.request("0") == b"two, longer\n"
        for p in _readers_in(testbed, server):
            os.kill(int(p), signal.SIGKILL)
        with pytest.raises(NodeError, match=r"readfile .* on %s: (it ended|it is gone|the channel is gone)" % server.name):
            s.request("0", timeout=5)
        assert s.closed
        # a program that cannot start (no such module) ends at once: its stderr is named
        s = n.session(["env", f"PYTHONPATH={REPO}", os.sys.executable, "-m", "xenobench.agents.no_such_agent"])
        with pytest.raises(NodeError, match=r"it ended .*No module named xenobench.agents.no_such_agent"):
            s.request("0", timeout=5)
    finally:
        n.close()
    time.sleep(0.3)
    assert _readers_in(testbed, server) == []


# --- what runs on a node runs isolated from what others can write ------------------------------------
def test_isolated_interpreter_ignores_a_module_planted_in_the_workdir(testbed, sshd, tmp_path):
    """`python -m` puts the working directory first on sys.path: an argparse.py planted there ran
    (as the login) before the agent. python_argv's interpreter is isolated (-I) and is given the
    deployed artefact by its absolute path: the plant never runs."""
    import sys
    d, server = sshd
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o755)
    (wd / "argparse.py").write_text("print('PLANTED')\nraise SystemExit(9)\n")
    n = ssh_node(testbed, d, server, workdir=str(wd), python=sys.executable)
    try:
        argv = n.python_argv("xenobench.agents.udpcheck", "--help")
        assert argv[:3] == [sys.executable, "-I", "-c"] and argv[4] == f"{wd}/{SshNode.deploy_dir}/current"
        r = n.run(argv, check=False)
        assert (r.returncode, "PLANTED" in r.stdout, "usage:" in r.stdout) == (0, False, True), r.stdout + r.stderr
        plain = n.run([sys.executable, "-m", "xenobench.agents.udpcheck", "--help"], check=False)
        assert (plain.returncode, plain.stdout.strip()) == (9, "PLANTED")  # what -m did with it
    finally:
        n.close()


@pytest.mark.parametrize("mode, shown", [(0o777, "mode 777"), (0o775, "mode 775"), (0o1777, "mode 1777")])
def test_group_or_world_writable_workdir_is_refused(testbed, sshd, tmp_path, mode, shown):
    d, server = sshd
    wd = tmp_path / "shared"
    wd.mkdir()
    wd.chmod(mode)
    n = ssh_node(testbed, d, server, workdir=str(wd))
    try:
        with pytest.raises(NodeError) as e:
            n.run(["true"])
        assert str(e.value).startswith(f"Failed to use ssh.workdir '{wd}' on node fips2: it is group- or "
                                       f"world-writable ({shown}), so another user could plant a module or program "
                                       "that would run as root; ")
        assert ("chmod go-w" in str(e.value)) is (mode != 0o1777)  # never advised for a sticky shared directory
        wd.chmod(0o755)
        assert n.run(["echo", "ok"]).stdout.strip() == "ok"
    finally:
        n.close()


def test_private_directory_is_0700_whoever_names_it_first(testbed, sshd, tmp_path):
    """A first use by `mkdir -p <private>/dns/bind9` (bind9's set-up) made it 0755 (the umask);
    a command naming a path under it now creates it 0700 first."""
    d, server = sshd
    n = ssh_node(testbed, d, server)
    try:
        sub = n.path("dns", "bind9")
        n.run(["mkdir", "-p", sub])
        st = os.stat(n.work_dir)
        assert (stat.S_IMODE(st.st_mode), os.path.isdir(sub)) == (0o700, True)
    finally:
        n.remove_work_dir()
        n.close()


def test_changed_host_key_names_both_fingerprints_and_the_line(testbed, sshd, tmp_path):
    d, server = sshd
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = (tmp_path / "other.pub").read_text().split()[:2]
    real = (d / "known_hosts").read_text().splitlines()
    host = real[0].split()[0]
    kh = tmp_path / "known_hosts"
    kh.write_text("# a comment line\n" + f"{host} {' '.join(other)}\n")
    want = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "other.pub")], capture_output=True, text=True,
                          check=True).stdout.split()[1]  # the fingerprint as OpenSSH prints it
    n = ssh_node(testbed, d, server)
    n.ssh = dataclasses.replace(n.ssh, known_hosts=str(kh))
    with pytest.raises(NodeError) as e:
        n.run(["true"])
    msg = str(e.value)
    assert msg.startswith(f"Failed to connect to node fips2 (root@{server.iface().addr}:{PORT}): the host key "
                          f"changed: {host} offers ssh-ed25519 SHA256:")
    assert f"line 2 of {kh} holds ssh-ed25519 {want};" in msg and "AAAA" not in msg  # no raw base64
    assert f"ssh-keygen -R '{host}' -f {kh}" in msg


# --- a hardened sshd without `Subsystem sftp`: files go over exec channels ------------------------


def _no_sftp_node(testbed, d, server):
    n = ssh_node(testbed, d, server)
    n.ssh = dataclasses.replace(n.ssh, port=NO_SFTP_PORT)
    return n


def _one_line_error(e, verb_object: str, why: str):
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{verb_object}: the node's sshd has no `Subsystem sftp` (paramiko: Channel closed.) and ")
    assert f"failed: {why}; add `Subsystem sftp internal-sftp` to the node's sshd_config" in msg, msg


def test_without_sftp_put_and_get_go_over_exec_whole_with_their_mode(testbed, sshd_without_sftp, tmp_path):
    import paramiko

    d, server = sshd_without_sftp
    n = _no_sftp_node(testbed, d, server)
    try:
        with pytest.raises(paramiko.SSHException, match="Channel closed"):  # the server refuses SFTP itself
            n.client.open_sftp().close()
        src = tmp_path / "up.bin"
        data = bytes(range(256)) * 513 + b"\n\0 last"  # every byte value, more than a channel window
        src.write_bytes(data)
        dest = tmp_path / "remote" / "sub" / "copy.bin"  # its directory is made, as over SFTP
        n.put(src, str(dest), mode=0o640)
        assert (dest.read_bytes(), stat.S_IMODE(dest.stat().st_mode)) == (data, 0o640)
        src.write_bytes(b"second")
        n.put(src, str(dest))  # over the old file, with put()'s own mode
        assert (dest.read_bytes(), stat.S_IMODE(dest.stat().st_mode)) == (b"second", SshNode.PUT_MODE)
        n.put(src, n.path("staged.bin"))  # under the private directory: made 0700 first
        assert stat.S_IMODE(os.stat(n.work_dir).st_mode) == 0o700
        dest.write_bytes(data)
        n.get(str(dest), tmp_path / "back" / "copy.bin")
        assert (tmp_path / "back" / "copy.bin").read_bytes() == data
        assert n.read_text(str(dest)) == data.decode(errors="replace")

        # a destination whose directory cannot be made (a file stands where it should be)
        (tmp_path / "remote" / "notadir").write_text("")
        with pytest.raises(NodeError) as e:
            n.put(src, str(tmp_path / "remote" / "notadir" / "x.bin"))
        _one_line_error(e, f"Failed to put {src} to fips2:{tmp_path / 'remote' / 'notadir' / 'x.bin'}",
                        f"mkdir: cannot create directory '{tmp_path / 'remote' / 'notadir'}': File exists")
        # a destination that is a directory: the copy is written, the rename fails, the copy goes
        (tmp_path / "remote" / "adir" / "inside").mkdir(parents=True)
        with pytest.raises(NodeError) as e:
            n.put(src, str(tmp_path / "remote" / "adir"))
        _one_line_error(e, f"Failed to put {src} to fips2:{tmp_path / 'remote' / 'adir'}",
                        f"mv: cannot overwrite directory '{tmp_path / 'remote' / 'adir'}' with non-directory")
        assert sorted(p.name for p in (tmp_path / "remote").iterdir()) == ["adir", "notadir", "sub"]
        assert sorted(p.name for p in (tmp_path / "remote" / "sub").iterdir()) == ["copy.bin"]
        assert [p.name for p in (tmp_path / "remote" / "adir").iterdir()] == ["inside"]

        # a file that is not there: one line, and nothing left where the copy would have gone
        with pytest.raises(NodeError) as e:
            n.get(str(tmp_path / "remote" / "missing.bin"), tmp_path / "back" / "missing.bin")
        _one_line_error(e, f"Failed to get fips2:{tmp_path / 'remote' / 'missing.bin'}",
                        f"cat: {tmp_path / 'remote' / 'missing.bin'}: No such file or directory")
        assert sorted(p.name for p in (tmp_path / "back").iterdir()) == ["copy.bin"]
    finally:
        n.remove_work_dir()
        n.close()


def test_put_over_sftp_gives_the_same_mode(testbed, sshd, tmp_path):
    d, server = sshd
    n = ssh_node(testbed, d, server)
    src = tmp_path / "up.bin"
    src.write_bytes(b"over sftp")
    try:
        n.put(src, str(tmp_path / "a.bin"), mode=0o600)
        n.put(src, str(tmp_path / "b.bin"))
    finally:
        n.close()
    assert n._no_sftp is None
    assert [stat.S_IMODE((tmp_path / f).stat().st_mode) for f in ("a.bin", "b.bin")] == [0o600, SshNode.PUT_MODE]


@pytest.mark.parametrize("sent, size, ok", [(b"abc", 3, True), (b"abc", 10, False), (b"", 0, True)])
def test_put_script_renames_only_a_whole_copy(tmp_path, sent, size, ok):
    """The script put() runs without SFTP, here: a copy cut short (a connection lost mid-copy ends
    its stdin early) is never renamed into place, and its temporary file goes."""
    dest = tmp_path / "d" / "f.bin"
    p = subprocess.run(["sh", "-c", SshNode.PUT_SCRIPT, "sh", str(dest.parent), str(dest), "640", str(size)],
                       input=sent, capture_output=True)
    assert (p.returncode == 0) is ok, p.stderr
    if ok:
        assert (dest.read_bytes(), stat.S_IMODE(dest.stat().st_mode)) == (sent, 0o640)
    else:
        assert p.stderr.decode().strip() == f"received {len(sent)} of {size} bytes"
    assert [f.name for f in dest.parent.iterdir()] == (["f.bin"] if ok else [])
