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

    def stop(self, tag: str, timeout: float = 5.0) -> bool:
        """SIGTERM the tagged process group, SIGKILL after timeout. False if it was not running."""
        h = self.handle(tag)
        if h is None:
            return False
        was_alive = self._alive(h)
        if was_alive:
            self._signal(h, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self._alive(h) and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._alive(h):
                logger.warning("%s: %s did not stop on SIGTERM within %.1fs, killing", self.name, tag, timeout)
                self._signal(h, signal.SIGKILL)
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

    def signal(self, h: ProcessHandle, sig: int, *, sudo: bool = False) -> None:
        """Signal a background process group; `sudo`: through sudo (it runs as root, we do not)."""
        self._signal(h, sig)

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
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
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


class SshNode(Node):
    """A node reached over SSH (paramiko). Host keys are checked against known_hosts; an unknown
    key is refused unless the config sets accept_unknown_host_keys: true."""

    REMOTE_STATE = "/tmp/xenobench"

    def __init__(self, cfg: Config, ncfg: NodeConfig):
        super().__init__(cfg, ncfg)
        if ncfg.ssh is None:
            raise NodeError(f"Failed to set up node {self.name}: no ssh section in {cfg.path}")
        self.ssh = ncfg.ssh
        self._client = None
        self.remote_dir = f"{self.REMOTE_STATE}-{cfg.prefix.rstrip('-')}"

    @property
    def client(self):
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _connect(self):
        import paramiko

        s = self.ssh
        c = paramiko.SSHClient()
        known = os.path.expanduser(s.known_hosts or "~/.ssh/known_hosts")
        if os.path.exists(known):
            c.load_host_keys(known)
        if s.accept_unknown_host_keys:
            c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        else:
            c.set_missing_host_key_policy(paramiko.RejectPolicy())
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
            msg = str(e)
            if "not found in known_hosts" in msg:
                msg = (f"host key of {s.host} is not in {known}; add it (ssh-keyscan) or set "
                       f"nodes.{self.name}.ssh.accept_unknown_host_keys: true")
            raise NodeError(f"Failed to connect to node {self.name} ({where}): {msg}") from None
        except OSError as e:
            if sock:
                sock.close()
            raise NodeError(f"Failed to connect to node {self.name} ({where}): {e.strerror or e}") from None
        if s.accept_unknown_host_keys:
            try:
                os.makedirs(os.path.dirname(known), exist_ok=True)
                c.save_host_keys(known)
            except OSError:
                logger.warning("could not save host key of %s to %s", s.host, known)
        return c

    def python_argv(self, module, *args):
        return [self.ssh.python, "-m", module, *map(str, args)]

    def _command(self, argv: list[str], env: dict[str, str] | None) -> str:
        cmd = shlex.join(argv)
        if env:
            cmd = shlex.join(["env", *(f"{k}={v}" for k, v in env.items())]) + " " + cmd
        if self.ssh.workdir:
            cmd = f"cd {shlex.quote(self.ssh.workdir)} && {cmd}"
        return cmd

    def run(self, argv, *, timeout=60, check=True, input=None, env=None, own_sysfs=False):
        argv = list(map(str, argv))
        cmd = self._command(argv, env)
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
                if chan.recv_ready():
                    out += chan.recv(65536)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                elif chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                elif time.monotonic() > deadline:
                    chan.close()
                    raise NodeError(f"Failed to run `{shlex.join(argv)}` on {self.name}: "
                                    f"timed out after {timeout:g} s")
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
        # setsid: the process leads its own group, so stop() can signal the whole group;
        # >>: logs are appended, as on netns nodes
        script = (f"mkdir -p {shlex.quote(os.path.dirname(log_path))} && "
                  f"{{ setsid {self._command(argv, env)} >> {shlex.quote(log_path)} 2>&1 < /dev/null & }} "
                  f"&& echo $!")
        r = self.run(["sh", "-c", script])
        pid = int(r.stdout.strip().splitlines()[-1])
        st = self.run(["cat", f"/proc/{pid}/stat"], check=False).stdout
        ticks = int(st.rsplit(")", 1)[1].split()[19]) if ")" in st else None
        return ProcessHandle(self.name, "", pid, argv, log_path, starttime_ticks=ticks)

    @property
    def work_dir(self):
        return self.remote_dir

    def output_path(self, local, name):
        return self.path(name)

    def stage(self, local, name, *, copy=True):
        remote = self.path(name)
        if copy:
            self.put(local, remote)
        return remote

    def signal(self, h, sig, *, sudo=False):
        if sudo:
            self.run(["sudo", "kill", f"-{int(sig)}", "--", f"-{h.pid}"], check=False)
        else:
            self._signal(h, sig)

    def _alive(self, h):
        st = self.run(["cat", f"/proc/{h.pid}/stat"], check=False).stdout
        if ")" not in st:
            return False
        fields = st.rsplit(")", 1)[1].split()
        if h.starttime_ticks is not None and int(fields[19]) != h.starttime_ticks:
            return False
        return fields[0] != "Z"

    def _signal(self, h, sig):
        self.run(["kill", f"-{int(sig)}", "--", f"-{h.pid}"], check=False)

    def put(self, local, remote):
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
