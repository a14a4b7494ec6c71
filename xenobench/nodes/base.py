"""What every node offers, whatever its transport: run a command, start/stop a background process,
put/get files. Commands are argv lists, never shell strings. Background processes are recorded on
disk (state_dir/processes/<node>.<tag>.json) so a later invocation, or teardown after a crash, can
stop them; a record carries the process's start time, so a reused pid is never signalled."""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Config, NodeConfig
from ..errors import NodeError

logger = logging.getLogger(__name__)


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


# What sudo prints when it may not run a command without a password (sudo's plugins/sudoers:
# "a password is required" for `sudo -n`, "a terminal is required to read the password" without
# -n over an exec channel, which has no terminal).
SUDO_REFUSALS = ("a password is required", "a terminal is required")


def sudo_argv(argv: list[str]) -> list[str]:
    """argv through sudo, never prompting (-n, sudo(8)): over SSH there is no terminal to ask on,
    so a missing rule fails at once with a message sudo_refused() recognises."""
    return ["sudo", "-n", *argv]


def sudo_refused(r: "CommandResult") -> bool:
    """Whether a command run through sudo failed because sudo wants a password."""
    return r.returncode != 0 and any(m in (r.stderr + r.stdout) for m in SUDO_REFUSALS)


class Node(ABC):
    """A testbed node. Subclasses implement the transport."""

    def __init__(self, cfg: Config, ncfg: NodeConfig):
        self.cfg = cfg
        self.ncfg = ncfg
        self.name = ncfg.name
        self.proc_dir = cfg.state_dir / "processes"
        self.log_dir = cfg.state_dir / "logs"

    @property
    def present(self) -> bool:
        """Whether the node is there to run commands on (a namespace: it exists; a host: assumed,
        a command that cannot reach it says why)."""
        return True

    @property
    def root(self) -> bool:
        """Whether commands here run as root (a namespace or this machine: the harness's own
        user, root; an SSH node: its login)."""
        return True

    # --- commands -------------------------------------------------------------------------
    @abstractmethod
    def run(self, argv: list[str], *, timeout: float = 60, check: bool = True,
            input: str | bytes | None = None, env: dict[str, str] | None = None,
            own_sysfs: bool = False) -> CommandResult:
        """Run argv to completion. own_sysfs (netns only): run it through `ip netns exec` so that
        /sys shows the namespace's devices (this hides /sys/fs/bpf)."""

    deploy_dir: str | None = None
    """Where `xenobench deploy` unpacks the node-side artefact on the node (xenobench.deploy);
    None: the node shares this machine's tree, nothing is shipped to it."""

    def python_env(self) -> dict[str, str]:
        """Environment a python_argv command needs to import the deployed agents ({} here)."""
        return {}

    def remove_deployed(self) -> bool:
        """Remove what `xenobench deploy` placed on the node; False if there was nothing."""
        return False

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
        if was_alive or self.orphans(h):
            self.signal(h, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while (self._alive(h) or self.orphans(h)) and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._alive(h) or self.orphans(h):
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
        Only while the pid is still the process we started, or its group outlived it (orphans): a record outlives its process (a crash,
        a reboot), and the kernel reuses pids, so the start time recorded at spawn must still match
        (/proc/<pid>/stat field 22). False, and nothing signalled, when it does not."""
        if not self._same_process(h) and not self.orphans(h):
            logger.warning("%s: not signalling %s: pid %d is no longer the process started as %s",
                           self.name, h.tag, h.pid, shlex.join(h.argv))
            return False
        self._signal(h, sig)
        return True

    def orphans(self, h: ProcessHandle) -> bool:
        """Whether h's process is gone but members of its process group live on (sudo killed, the
        program it ran still running). They are h's: the kernel gives no new process a pid that a
        live group still has as its id, and h's pid has no process (a reused pid would have one)."""
        if h.starttime_ticks is None or self._starttime(h.pid) is not None:
            return False
        return self.run(["pgrep", "-g", str(h.pid)], check=False).ok

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

    @abstractmethod
    def session(self, argv: list[str]) -> Session:
        """Start argv (a program of the Session protocol, e.g. python_argv of
        xenobench.agents.readfile) with pipes to its stdin and stdout, for requests."""

    # --- files ------------------------------------------------------------------------------
    @abstractmethod
    def put(self, local: str | os.PathLike, remote: str) -> None: ...

    @abstractmethod
    def get(self, remote: str, local: str | os.PathLike) -> None: ...

    def read_text(self, remote: str) -> str:
        return self.run(["cat", remote], check=False).stdout

    def close(self) -> None:
        pass


class Session(ABC):
    """A program kept running on a node and spoken to over its stdin and stdout (Node.session):
    one request line in, one framed reply out (a line with the reply's length in bytes, then the
    bytes; a line `E <reason>` for a refusal), so that a read costs a round trip, not a process
    start (xenobench.agents.readfile, xenobench.sampler). Closing its stdin ends it; so does the
    harness's exit or a lost SSH connection. Requests from several threads take turns (a sampler's
    thread and the procedure reading the same counters)."""

    def __init__(self, node: str, argv: list[str]):
        self.node, self.argv = node, argv
        self._buf = bytearray()
        self.closed = False
        self._lock = threading.Lock()

    @abstractmethod
    def _send(self, data: bytes) -> None: ...

    @abstractmethod
    def _recv(self, timeout: float) -> bytes:
        """Some bytes of stdout, b"" at its end; NodeError when none came within timeout."""

    @abstractmethod
    def _close(self) -> None: ...

    def _stderr(self) -> str:
        """What it wrote to stderr, once it has ended ("" where that is not kept)."""
        return ""

    def _fail(self, why: str) -> NodeError:
        self.close()
        return NodeError(f"Failed to read from `{shlex.join(self.argv)}` on {self.node}: {why}")

    def _fill(self, n: int | None, deadline: float) -> None:
        """Until the buffer holds a line (n None) or n bytes."""
        while (b"\n" not in self._buf) if n is None else (len(self._buf) < n):
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail("no reply within the timeout")
            b = self._recv(left)
            if not b:
                err = self._stderr().strip()
                raise self._fail("it ended (its stdout closed)" + (f": {err[-500:]}" if err else ""))
            self._buf += b

    def request(self, line: str, timeout: float = 10.0) -> bytes:
        with self._lock:
            return self._request(line, timeout)

    def _request(self, line: str, timeout: float) -> bytes:
        if self.closed:
            raise NodeError(f"Failed to read from `{shlex.join(self.argv)}` on {self.node}: the session is closed")
        deadline = time.monotonic() + timeout
        try:
            self._send(line.encode() + b"\n")
        except OSError as e:
            raise self._fail(f"it is gone ({e.strerror or e})") from None
        self._fill(None, deadline)
        head, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        if head.startswith(b"E "):
            raise NodeError(f"Failed to read on {self.node}: {head[2:].decode(errors='replace')}")
        try:
            n = int(head)
        except ValueError:
            raise self._fail(f"not a reply: {head[:80]!r}") from None
        self._fill(n, deadline)
        data, self._buf = bytes(self._buf[:n]), self._buf[n:]
        return data

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


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

