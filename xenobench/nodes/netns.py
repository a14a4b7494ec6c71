"""The `netns` transport: a node in a local network namespace, and a socket opened from inside one
(what an SSH node behind a namespace connects through)."""

from __future__ import annotations

import ctypes
import os
import select
import shlex
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

from ..config import Config, NodeConfig
from ..errors import NodeError
from .base import CommandResult, Node, ProcessHandle, Session, _starttime

NETNS_RUN_DIR = Path("/var/run/netns")


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

    def session(self, argv):
        argv = list(map(str, argv))
        try:
            p = subprocess.Popen(self.wrap(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise NodeError(f"Failed to start `{shlex.join(argv)}` on {self.name}: {e}") from None
        return PipeSession(self.name, argv, p)

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

    @property
    def present(self) -> bool:
        return (NETNS_RUN_DIR / self.netns).exists()

    def pids(self) -> list[int]:
        """Every process whose network namespace is this node's (`ip netns pids`)."""
        p = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True)
        return [int(x) for x in p.stdout.split()] if p.returncode == 0 else []


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


class PipeSession(Session):
    """A Session with a local child process (its own session: no terminal's Ctrl-C reaches it
    before the harness has closed it)."""

    def __init__(self, node, argv, p: subprocess.Popen):
        super().__init__(node, argv)
        self.p = p

    def _send(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def _recv(self, timeout):
        fd = self.p.stdout.fileno()
        if not select.select([fd], [], [], timeout)[0]:
            raise self._fail("no reply within the timeout")
        return os.read(fd, 1 << 16)

    def _stderr(self):
        # only after stdout's end: the program is exiting; what it wrote within a second
        out, fd, deadline = b"", self.p.stderr.fileno(), time.monotonic() + 1
        try:
            while len(out) < 1 << 16 and select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                b = os.read(fd, 1 << 16)
                if not b:
                    break
                out += b
        except (OSError, ValueError):
            pass
        return out.decode(errors="replace")

    def _close(self):
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except OSError:  # its stdin's pipe broken: it has gone
                pass
        try:
            self.p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


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
