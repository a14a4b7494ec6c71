"""Nodes and transports: one interface to run commands, background processes and file transfers
on a testbed node, implemented for local network namespaces (`netns`) and SSH (`ssh`, paramiko).

Commands are argv lists, never shell strings: over SSH they are joined with shlex.join, so an
argument with spaces, quotes or ';' arrives unchanged. Background processes are recorded on disk
(state_dir/processes/<node>.<tag>.json) so a later invocation, or teardown after a crash, can stop
them.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from .config import Config, NodeConfig
from .errors import NodeError

logger = logging.getLogger(__name__)

NETNS_RUN_DIR = Path("/var/run/netns")


@dataclass
class CommandResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    node: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def check(self) -> "CommandResult":
        if self.returncode != 0:
            err = (self.stderr or self.stdout).strip().splitlines()
            reason = err[-1] if err else "no output"
            raise NodeError(f"Failed to run `{shlex.join(self.argv)}` on {self.node}: "
                            f"exit status {self.returncode}: {reason}")
        return self


@dataclass
class ProcessHandle:
    """A background process started by a node; `pid` is also its process group id."""
    node: str
    tag: str
    pid: int
    argv: list[str]
    log: str
    started: float = field(default_factory=time.time)
    starttime_ticks: int | None = None  # /proc/<pid>/stat field 22, guards against pid reuse


class Node(ABC):
    """A testbed node. Subclasses implement the transport."""

    def __init__(self, cfg: Config, ncfg: NodeConfig):
        self.cfg = cfg
        self.ncfg = ncfg
        self.name = ncfg.name
        self.proc_dir = cfg.state_dir / "processes"
        self.log_dir = cfg.state_dir / "logs"

    # --- commands -------------------------------------------------------------------------
    @abstractmethod
    def run(self, argv: list[str], *, timeout: float = 60, check: bool = True,
            input: str | bytes | None = None, env: dict[str, str] | None = None,
            own_sysfs: bool = False) -> CommandResult:
        """Run argv to completion. own_sysfs (netns only): run it through `ip netns exec` so that
        /sys shows the namespace's devices (this hides /sys/fs/bpf)."""

    def python_argv(self, module: str, *args: str) -> list[str]:
        """argv that runs `python -m module args` with xenobench importable on this node."""
        return [sys.executable, "-m", module, *map(str, args)]

    # --- background processes -------------------------------------------------------------
    @abstractmethod
    def _spawn(self, argv: list[str], log_path: str, env: dict[str, str] | None) -> ProcessHandle: ...

    @abstractmethod
    def _alive(self, h: ProcessHandle) -> bool: ...

    @abstractmethod
    def _signal(self, h: ProcessHandle, sig: int) -> None: ...

    def start(self, tag: str, argv: list[str], *, log: str | None = None,
              env: dict[str, str] | None = None, ready: float = 0.0) -> ProcessHandle:
        """Start argv in the background under a tag unique on this node; refuse if one is running.
        `ready`: seconds to wait and then verify it is still alive (catches instant failures)."""
        old = self.handle(tag)
        if old is not None:
            if self._alive(old):
                raise NodeError(f"Failed to start {tag} on {self.name}: already running as pid {old.pid} "
                                f"(`{shlex.join(old.argv)}`); stop it first")
            self._forget(tag)
        log_path = log or self.log_path(tag)
        h = self._spawn(list(map(str, argv)), log_path, env)
        h.tag = tag
        self._record(h)
        logger.info("%s: started %s pid %d: %s", self.name, tag, h.pid, shlex.join(h.argv))
        if ready:
            time.sleep(ready)
            if not self._alive(h):
                self._forget(tag)
                tail = self.read_log(h, 2000).strip()
                raise NodeError(f"Failed to start {tag} on {self.name}: exited at once; log {log_path}: {tail}")
        return h

    def start_until(self, tag: str, argv: list[str], marker: str, *, what: str,
                    timeout: float = 10.0) -> ProcessHandle:
        """start() and wait until the process's log (from now on) contains `marker`; one that exits
        or stays silent is stopped and reported with its last log line (`what` names it)."""
        log_path = self.log_path(tag)
        offset = len(self.read_text(log_path))
        h = self.start(tag, argv, log=log_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.read_text(h.log)[offset:]
            if marker in text:
                return h
            if not self.running(tag):
                self.stop(tag)
                raise NodeError(f"Failed to start {what} on {self.name}: "
                                f"{text.strip().splitlines()[-1] if text.strip() else 'exited'}")
            time.sleep(0.05)
        self.stop(tag)
        raise NodeError(f"Failed to start {what} on {self.name}: not ready within {timeout:g} s; log {h.log}")

    def stop(self, tag: str, timeout: float = 5.0) -> bool:
        """SIGTERM the tagged process group, SIGKILL after timeout. False if it was not running."""
        h = self.handle(tag)
        if h is None:
            return False
        was_alive = self._alive(h)
        if was_alive:
            self.signal(h, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self._alive(h) and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._alive(h):
                logger.warning("%s: %s did not stop on SIGTERM within %.1fs, killing", self.name, tag, timeout)
                self.signal(h, signal.SIGKILL)
                time.sleep(0.1)
        self._forget(tag)
        return was_alive

    def running(self, tag: str) -> bool:
        h = self.handle(tag)
        return h is not None and self._alive(h)

    def handles(self) -> list[ProcessHandle]:
        out = []
        if self.proc_dir.is_dir():
            for f in sorted(self.proc_dir.glob(f"{self.name}.*.json")):
                try:
                    out.append(ProcessHandle(**json.loads(f.read_text())))
                except (ValueError, TypeError):
                    logger.warning("ignoring unreadable process record %s", f)
        return out

    def handle(self, tag: str) -> ProcessHandle | None:
        f = self.proc_dir / f"{self.name}.{tag}.json"
        if not f.exists():
            return None
        try:
            return ProcessHandle(**json.loads(f.read_text()))
        except (ValueError, TypeError):
            return None

    def stop_all(self) -> None:
        for h in self.handles():
            self.stop(h.tag)

    def read_log(self, h: ProcessHandle, limit: int = 100_000) -> str:
        return self.read_text(h.log)[-limit:]

    # --- where things live on the node ------------------------------------------------------
    is_local = False
    """True when the node's processes run on this host (their /proc entries are readable here)."""

    @property
    def work_dir(self) -> str:
        """The node's directory for xenobench's files (logs, copies of input files, agent state):
        the local state directory for a namespace node, a directory on the remote host otherwise."""
        return str(self.cfg.state_dir)

    def path(self, *parts: str) -> str:
        """A path under work_dir, as the node sees it."""
        return str(Path(self.work_dir, *parts))

    def log_path(self, tag: str) -> str:
        """Where start(tag) writes the process's output unless told otherwise."""
        return self.path("logs", f"{self.name}.{tag}.log")

    def stage(self, local: str | os.PathLike, name: str, *, copy: bool = True) -> str:
        """Make a local file readable on the node; return its path there. A namespace node shares
        the file system, so the file is read where it is; a remote node gets a copy under work_dir
        (copy=False: only the path, for a dry run)."""
        return str(Path(local).resolve())

    def output_path(self, local: str | os.PathLike, name: str) -> str:
        """Where the node should write a file that is to end up at `local` (collect() brings it)."""
        return str(local)

    def collect(self, remote: str, local: str | os.PathLike) -> None:
        """Bring a file the node wrote at output_path() to `local`."""
        if Path(remote).resolve() != Path(local).resolve():
            self.get(remote, local)

    def signal(self, h: ProcessHandle, sig: int, *, sudo: bool = False) -> bool:
        """Signal a background process group; `sudo`: through sudo (it runs as root, we do not).
        Only while the pid is still the process we started: a record outlives its process (a crash,
        a reboot), and the kernel reuses pids, so the start time recorded at spawn must still match
        (/proc/<pid>/stat field 22). False, and nothing signalled, when it does not."""
        if not self._same_process(h):
            logger.warning("%s: not signalling %s: pid %d is no longer the process started as %s",
                           self.name, h.tag, h.pid, shlex.join(h.argv))
            return False
        self._signal(h, sig)
        return True

    def _same_process(self, h: ProcessHandle) -> bool:
        """Whether pid h.pid is still the process h was recorded for (True if the record has no
        start time to compare: records of a node without /proc)."""
        return h.starttime_ticks is None or self._starttime(h.pid) == h.starttime_ticks

    def _starttime(self, pid: int) -> int | None:
        """Start time of a pid on the node in clock ticks since boot, None if there is no such pid."""
        return _starttime(pid)

    def _record(self, h: ProcessHandle) -> None:
        self.proc_dir.mkdir(parents=True, exist_ok=True)
        (self.proc_dir / f"{self.name}.{h.tag}.json").write_text(json.dumps(h.__dict__))

    def _forget(self, tag: str) -> None:
        (self.proc_dir / f"{self.name}.{tag}.json").unlink(missing_ok=True)

    # --- files ------------------------------------------------------------------------------
    @abstractmethod
    def put(self, local: str | os.PathLike, remote: str) -> None: ...

    @abstractmethod
    def get(self, remote: str, local: str | os.PathLike) -> None: ...

    def read_text(self, remote: str) -> str:
        return self.run(["cat", remote], check=False).stdout

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------
class NetnsNode(Node):
    """A node in a local network namespace named <prefix><node>. Commands run through
    `nsenter --net=` (which keeps /sys/fs/bpf visible; `ip netns exec` would remount /sys)."""

    is_local = True

    def __init__(self, cfg: Config, ncfg: NodeConfig):
        super().__init__(cfg, ncfg)
        self.netns = f"{cfg.prefix}{ncfg.name}"

    def wrap(self, argv: list[str], own_sysfs: bool = False) -> list[str]:
        if own_sysfs:
            return ["ip", "netns", "exec", self.netns, *argv]
        return ["nsenter", f"--net={NETNS_RUN_DIR / self.netns}", "--", *argv]

    def run(self, argv, *, timeout=60, check=True, input=None, env=None, own_sysfs=False):
        argv = list(map(str, argv))
        full_env = {**os.environ, **env} if env else None
        try:
            p = subprocess.run(self.wrap(argv, own_sysfs), capture_output=True, timeout=timeout,
                               input=input.encode() if isinstance(input, str) else input, env=full_env)
        except subprocess.TimeoutExpired:
            raise NodeError(f"Failed to run `{shlex.join(argv)}` on {self.name}: "
                            f"timed out after {timeout:g} s") from None
        except FileNotFoundError as e:
            raise NodeError(f"Failed to run `{shlex.join(argv)}` on {self.name}: {e}") from None
        r = CommandResult(argv, p.returncode, p.stdout.decode(errors="replace"),
                          p.stderr.decode(errors="replace"), self.name)
        if check:
            if p.returncode != 0 and "nsenter: cannot open" in r.stderr:
                raise NodeError(f"Failed to run `{shlex.join(argv)}` on {self.name}: namespace "
                                f"{self.netns} does not exist (is the testbed up? `xenobench testbed up`)")
            r.check()
        return r

    def _spawn(self, argv, log_path, env):
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as logf:
            p = subprocess.Popen(self.wrap(argv), stdout=logf, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 env={**os.environ, **env} if env else None)
        # reap it in the background so a process that exits while we still run is no zombie
        threading.Thread(target=p.wait, daemon=True).start()
        return ProcessHandle(self.name, "", p.pid, argv, log_path, starttime_ticks=_starttime(p.pid))

    def _alive(self, h):
        st = _starttime(h.pid)
        if st is None or (h.starttime_ticks is not None and st != h.starttime_ticks):
            return False
        try:
            with open(f"/proc/{h.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            return state != "Z"
        except OSError:
            return False

    def _signal(self, h, sig):
        try:
            os.killpg(h.pid, sig)
        except ProcessLookupError:
            pass

    def put(self, local, remote):
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, remote)

    def get(self, remote, local):
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(remote, local)

    def read_text(self, remote):
        try:
            return Path(remote).read_text(errors="replace")
        except OSError:
            return ""

    def pids(self) -> list[int]:
        """Every process whose network namespace is this node's (`ip netns pids`)."""
        p = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True)
        return [int(x) for x in p.stdout.split()] if p.returncode == 0 else []


def _starttime(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return _stat_starttime(f.read())
    except OSError:
        return None


def _stat_starttime(stat: str) -> int | None:
    """Field 22 (starttime) of a /proc/<pid>/stat line; the command name (field 2) may hold
    spaces and ')', so fields are counted after its last ')'."""
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def socket_in_netns(netns: str, host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection opened from inside a local network namespace: setns() in a short-lived
    thread (setns changes only the calling thread's namespace); the socket keeps the namespace."""
    result: dict = {}

    def worker():
        try:
            fd = os.open(NETNS_RUN_DIR / netns, os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            finally:
                os.close(fd)
            result["sock"] = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            result["err"] = e

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    if "err" in result:
        raise result["err"]
    return result["sock"]


class KnownHosts:
    """known_hosts as OpenSSH reads it (sshd(8), SSH_KNOWN_HOSTS FILE FORMAT), for paramiko:
    plain and hashed host lines become paramiko host keys; `@revoked` keys are refused even if
    listed plainly; `@cert-authority` lines are understood but cannot be used, because paramiko
    does not verify host certificates (paramiko issue #771), so they only explain a refusal; key
    types paramiko does not know (sk-ssh-ed25519@openssh.com, ...) are skipped. The file is never
    rewritten: a newly accepted key is appended as one line (paramiko's own save would rewrite it
    from what it parsed, dropping comments, markers and unknown key types; paramiko issue #680)."""

    def __init__(self, path: str):
        import paramiko
        self.path = path
        self.keys = paramiko.HostKeys()
        self.revoked: list[tuple[int, str, str]] = []   # (line, key type, base64)
        self.authorities: list[tuple[int, str]] = []    # (line, host patterns)
        try:
            with open(path, "rb") as f:
                data = f.read(16 << 20)
        except FileNotFoundError:
            return
        except OSError as e:
            raise NodeError(f"Failed to read known_hosts {path}: {e.strerror or e}") from None
        plain = []
        for n, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if line.startswith("@"):
                if fields[0] == "@revoked" and len(fields) >= 4:
                    self.revoked.append((n, fields[2], fields[3]))
                elif fields[0] == "@cert-authority" and len(fields) >= 4:
                    self.authorities.append((n, fields[1]))
                else:
                    raise NodeError(f"Failed to read known_hosts {path}: line {n}: unknown marker "
                                    f"{fields[0]!r} (OpenSSH knows @cert-authority and @revoked)")
                continue
            plain.append((n, fields))
        revoked = {(t, k) for _, t, k in self.revoked}
        for n, fields in plain:
            if len(fields) < 3:
                raise NodeError(f"Failed to read known_hosts {path}: line {n}: expected hosts, key type "
                                f"and key, got {' '.join(fields)[:80]!r}")
            if (fields[1], fields[2]) in revoked:
                continue  # @revoked wins over a plain line with the same key
            try:
                entry = paramiko.hostkeys.HostKeyEntry.from_line(" ".join(fields[:3]), n)
            except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey):
                raise NodeError(f"Failed to read known_hosts {path}: line {n}: key of type {fields[1]} "
                                "is not valid base64") from None
            if entry is None:
                continue  # a key type paramiko does not know: left for OpenSSH
            for host in entry.hostnames:
                self.keys.add(host, entry.key.get_name(), entry.key)

    def is_revoked(self, key) -> int | None:
        """The line that revokes this key, if any."""
        for n, t, k in self.revoked:
            if t == key.get_name() and k == key.get_base64():
                return n
        return None

    def append(self, host: str, key) -> None:
        """One line for a newly accepted key, after the file's last line."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell():
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write(f"{host} {key.get_name()} {key.get_base64()}\n".encode())
        self.keys.add(host, key.get_name(), key)


def _host_key_policy(node: "SshNode", known: KnownHosts):
    """paramiko's policy for a key not in known_hosts: refuse revoked keys always; accept and
    append only with accept_unknown_host_keys; otherwise refuse naming the file and the fix."""
    import paramiko

    class Policy(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client, hostname, key):
            n = known.is_revoked(key)
            if n is not None:
                raise paramiko.SSHException(f"host key of {hostname} ({key.get_name()}) is marked @revoked in "
                                            f"{known.path} line {n}")
            if node.ssh.accept_unknown_host_keys:
                known.append(hostname, key)
                logger.warning("%s: accepted the unknown host key of %s (%s %s), appended to %s", node.name,
                               hostname, key.get_name(), key.get_fingerprint().hex(), known.path)
                return
            ca = (f"; lines {', '.join(str(n) for n, _ in known.authorities)} are @cert-authority keys, which "
                  "paramiko cannot check (host certificates, paramiko issue #771): list the host's own key"
                  if known.authorities else "")
            raise paramiko.SSHException(f"host key of {hostname} is not in {known.path}; add it (ssh-keyscan) or "
                                        f"set nodes.{node.name}.ssh.accept_unknown_host_keys: true{ca}")

    return Policy()


class SshNode(Node):
    """A node reached over SSH (paramiko). Host keys are checked against known_hosts (class
    KnownHosts); an unknown key is refused unless the config sets accept_unknown_host_keys: true.

    The node's files (logs, staged inputs, outputs) live in a private directory, mode 0700, whose
    name has 64 random bits (chosen here, created with an exclusive `mkdir -m 700` on first use,
    as mktemp -d does): a predictable /tmp path lets another user of the host pre-create it or
    plant a symlink there. Its name is recorded in state_dir/remote/<node>.json, so a later
    invocation (stop, teardown after a crash) finds the processes' logs; stop_all() removes it."""

    TMP = "/tmp"

    def __init__(self, cfg: Config, ncfg: NodeConfig):
        super().__init__(cfg, ncfg)
        if ncfg.ssh is None:
            raise NodeError(f"Failed to set up node {self.name}: no ssh section in {cfg.path}")
        self.ssh = ncfg.ssh
        self._client = None
        self._dir_ready = False
        self._dir_record = cfg.state_dir / "remote" / f"{self.name}.json"

    @property
    def remote_dir(self) -> str:
        """The node's private directory (its name; created on first use by _ensure_dir)."""
        me = {"host": self.ssh.host, "port": self.ssh.port, "user": self.ssh.user}
        try:
            rec = json.loads(self._dir_record.read_text())
            if {k: rec.get(k) for k in me} == me and isinstance(rec.get("dir"), str):
                return rec["dir"]
        except (OSError, ValueError):
            pass
        d = f"{self.TMP}/xenobench-{self.cfg.prefix.rstrip('-')}.{secrets.token_hex(8)}"
        self._dir_record.parent.mkdir(parents=True, exist_ok=True)
        self._dir_record.write_text(json.dumps({**me, "dir": d}))
        return d

    def _ensure_dir(self) -> str:
        """Create the private directory, or check that the recorded one is still ours."""
        d = self.remote_dir
        if not self._dir_ready:
            script = ('if [ -e "$1" ] || [ -L "$1" ]; then [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ] || '
                      '{ echo "$1 exists and is not a directory of this user" >&2; exit 3; }; '
                      'else mkdir -m 700 "$1"; fi')
            self.run(["sh", "-c", script, "sh", d])
            self._dir_ready = True
        return d

    @property
    def client(self):
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _connect(self):
        import paramiko

        s = self.ssh
        c = paramiko.SSHClient()
        known = KnownHosts(os.path.expanduser(s.known_hosts or "~/.ssh/known_hosts"))
        # not load_host_keys(): with it, paramiko rewrites the whole file on every new key
        for host, keys in known.keys.items():
            for ktype, key in keys.items():
                c.get_host_keys().add(host, ktype, key)
        c.set_missing_host_key_policy(_host_key_policy(self, known))
        sock = None
        where = f"{s.user}@{s.host}:{s.port}"
        try:
            if s.netns:
                sock = socket_in_netns(s.netns, s.host, s.port, s.connect_timeout)
            c.connect(s.host, port=s.port, username=s.user,
                      key_filename=os.path.expanduser(s.key) if s.key else None,
                      timeout=s.connect_timeout, banner_timeout=s.connect_timeout,
                      auth_timeout=s.connect_timeout, sock=sock,
                      allow_agent=s.key is None, look_for_keys=s.key is None)
        except paramiko.SSHException as e:
            if sock:
                sock.close()
            raise NodeError(f"Failed to connect to node {self.name} ({where}): {e}") from None
        except OSError as e:
            if sock:
                sock.close()
            raise NodeError(f"Failed to connect to node {self.name} ({where}): {e.strerror or e}") from None
        # a known key that is also @revoked was never added above; this catches a revoked key
        # that paramiko matched through another line for the same host
        n = known.is_revoked(c.get_transport().get_remote_server_key())
        if n is not None:
            c.close()
            raise NodeError(f"Failed to connect to node {self.name} ({where}): host key is marked @revoked in "
                            f"{known.path} line {n}")
        return c

    def python_argv(self, module, *args):
        return [self.ssh.python, "-m", module, *map(str, args)]

    def _command(self, argv: list[str], env: dict[str, str] | None) -> str:
        """argv (and env) as one shell word list: something `setsid` or `exec` can run."""
        cmd = shlex.join(argv)
        if env:
            cmd = shlex.join(["env", *(f"{k}={v}" for k, v in env.items())]) + " " + cmd
        return cmd

    def _cd(self) -> str:
        """`cd WORKDIR && ` when the config sets ssh.workdir (a shell builtin: it goes before
        setsid, never after it)."""
        return f"cd {shlex.quote(self.ssh.workdir)} && " if self.ssh.workdir else ""

    def run(self, argv, *, timeout=60, check=True, input=None, env=None, own_sysfs=False):
        argv = list(map(str, argv))
        cmd = self._cd() + self._command(argv, env)
        try:
            chan = self.client.get_transport().open_session(timeout=self.ssh.connect_timeout)
            chan.settimeout(timeout)
            chan.exec_command(cmd)
            if input is not None:
                chan.sendall(input.encode() if isinstance(input, str) else input)
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            deadline = time.monotonic() + timeout
            while True:
                if time.monotonic() > deadline:
                    chan.close()
                    raise NodeError(f"Failed to run `{shlex.join(argv)}` on {self.name}: "
                                    f"timed out after {timeout:g} s")
                if chan.recv_ready():
                    out += chan.recv(65536)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                # Done at the channel's EOF, not at the exit status: sshd sends the status when the
                # process exits, which can be before the last of its output (a 200 kB `bpftool map
                # dump` came back cut at 96 kB). EOF follows all data, so once it is seen, what is
                # not buffered yet never comes: check it first, the buffers after.
                elif (chan.eof_received and chan.exit_status_ready()
                      and not chan.recv_ready() and not chan.recv_stderr_ready()):
                    break
                else:
                    time.sleep(0.002)
            rc = chan.recv_exit_status()
            chan.close()
        except NodeError:
            raise
        except Exception as e:  # paramiko raises a zoo of types; report them uniformly
            raise NodeError(f"Failed to run `{shlex.join(argv)}` on {self.name}: {e}") from None
        r = CommandResult(argv, rc, out.decode(errors="replace"), err.decode(errors="replace"), self.name)
        return r.check() if check else r

    def _spawn(self, argv, log_path, env):
        # cd first (a builtin), then setsid: the process leads its own group, so stop() can
        # signal the whole group; exec replaces the subshell, so $! is the program's pid and its
        # start time is read in the same round trip; >>: logs are appended, as on netns nodes
        if log_path.startswith(self.work_dir + "/"):
            self._ensure_dir()
        script = (f"mkdir -p {shlex.quote(os.path.dirname(log_path))} && {self._cd()}"
                  f"{{ setsid {self._command(argv, env)} >> {shlex.quote(log_path)} 2>&1 < /dev/null & }} "
                  f"&& echo $! && cat /proc/$!/stat")
        out = self.run(["sh", "-c", script]).stdout.splitlines()
        try:
            pid = int(out[0])
        except (IndexError, ValueError):
            raise NodeError(f"Failed to start `{shlex.join(argv)}` on {self.name}: no pid in {out[:2]!r}") from None
        ticks = _stat_starttime(out[1]) if len(out) > 1 else None
        return ProcessHandle(self.name, "", pid, argv, log_path, starttime_ticks=ticks)

    @property
    def work_dir(self):
        return self.remote_dir

    def output_path(self, local, name):
        self._ensure_dir()
        return self.path(name)

    def stage(self, local, name, *, copy=True):
        remote = self.path(name)
        if copy:
            self.put(local, remote)  # put() creates the private directory first
        return remote

    def signal(self, h, sig, *, sudo=False):
        if not sudo:
            return super().signal(h, sig)
        if not self._same_process(h):
            logger.warning("%s: not signalling %s: pid %d is no longer the process started as %s",
                           self.name, h.tag, h.pid, shlex.join(h.argv))
            return False
        self.run(["sudo", "kill", f"-{int(sig)}", "--", f"-{h.pid}"], check=False)
        return True

    def _starttime(self, pid):
        return _stat_starttime(self.run(["cat", f"/proc/{int(pid)}/stat"], check=False).stdout)

    def _alive(self, h):
        st = self.run(["cat", f"/proc/{h.pid}/stat"], check=False).stdout
        if ")" not in st:
            return False
        fields = st.rsplit(")", 1)[1].split()
        if h.starttime_ticks is not None and _stat_starttime(st) != h.starttime_ticks:
            return False
        return fields[0] != "Z"

    def stop_all(self):
        """Stop every recorded process, then remove the private directory (teardown)."""
        super().stop_all()
        self.remove_work_dir()

    def remove_work_dir(self) -> None:
        """Remove the private directory (if it is still ours) and forget it."""
        rec = self._dir_record
        if rec.exists():
            d = self.remote_dir
            self.run(["sh", "-c", '[ ! -d "$1" ] || [ -L "$1" ] || [ ! -O "$1" ] || rm -rf -- "$1"', "sh", d])
            rec.unlink(missing_ok=True)
            self._dir_ready = False

    def _signal(self, h, sig):
        self.run(["kill", f"-{int(sig)}", "--", f"-{h.pid}"], check=False)

    def put(self, local, remote):
        if remote.startswith(self.work_dir + "/"):
            self._ensure_dir()
        try:
            sftp = self.client.open_sftp()
            try:
                self.run(["mkdir", "-p", os.path.dirname(remote) or "."])
                sftp.put(str(local), remote)
            finally:
                sftp.close()
        except (OSError, IOError) as e:
            raise NodeError(f"Failed to put {local} to {self.name}:{remote}: {e}") from None

    def get(self, remote, local):
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        try:
            sftp = self.client.open_sftp()
            try:
                sftp.get(remote, str(local))
            finally:
                sftp.close()
        except (OSError, IOError) as e:
            raise NodeError(f"Failed to get {self.name}:{remote}: {e}") from None

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None


def make_node(cfg: Config, ncfg: NodeConfig) -> Node:
    if ncfg.transport == "netns":
        return NetnsNode(cfg, ncfg)
    return SshNode(cfg, ncfg)
