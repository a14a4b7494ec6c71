"""The `ssh` transport: a node reached over SSH (paramiko)."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shlex
import signal as signals
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import Config, NodeConfig
from ..errors import NodeError
from .base import CommandResult, Node, ProcessHandle, Session, _stat_starttime, sudo_argv
from .known_hosts import KnownHosts, host_key_policy
from .netns import socket_in_netns

logger = logging.getLogger(__name__)

#: a line of a Python traceback as paramiko's transport thread logs it, one record per line
#: (Transport.run: `_log(ERROR, util.tb_strings())` after its one-line "Exception (client): ...")
_TRACEBACK_LINE = re.compile(r"^(\s|$)|^Traceback \(most recent call last\):|^During handling of the above"
                             r"|^The above exception|^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)(:|$)")


class OneLinePerFailure(logging.Filter):
    """Keeps paramiko's transport log to one line per failure: its "Exception (client): ...",
    "Socket exception: ..." lines pass, the traceback it logs after them, line by line, does not."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR or not _TRACEBACK_LINE.search(record.getMessage())


def quiet_paramiko() -> None:
    """Install OneLinePerFailure on paramiko's transport logger (once)."""
    log = logging.getLogger("paramiko.transport")
    if not any(isinstance(f, OneLinePerFailure) for f in log.filters):
        log.addFilter(OneLinePerFailure())


@dataclass
class ConnectionLoss:
    """One drop of a node's SSH connection: when it was found (monotonic and wall clock), why, and
    when the connection was made again (monotonic; None: not yet)."""
    at: float
    wall: float
    why: str
    reconnected: float | None = None


class SshNode(Node):
    """A node reached over SSH (paramiko). Host keys are checked against known_hosts (class
    KnownHosts); an unknown key is refused unless the config sets accept_unknown_host_keys: true.

    The node's files (logs, staged inputs, outputs) live in a private directory, mode 0700, whose
    name has 64 random bits (chosen here, created with an exclusive `mkdir -m 700` on first use,
    as mktemp -d does): a predictable /tmp path lets another user of the host pre-create it or
    plant a symlink there. Its name is recorded in state_dir/remote/<node>.json, so a later
    invocation (stop, teardown after a crash) finds the processes' logs; stop_all() removes it.

    A connection that drops (the node's sshd killed or restarted, the node rebooted, the network)
    is made again by the next command: each loss is recorded in `losses` (when, why, and whether the
    connection could be made again), which a trial reads to judge what it measured over that
    connection (xenobench.actors.Watch.judge_connections). A command whose connection dropped while
    it ran is not run again (whether it ran is unknown): it fails, naming the loss. Processes started
    with start() run in their own session (setsid) and outlive the connection."""

    TMP = "/tmp"
    deploy_dir = "xenobench-deploy"
    """Where `xenobench deploy` unpacks the node-side artefact (xenobench.deploy), relative to
    the login's working directory (ssh.workdir, else the home): one directory per content hash,
    `current` the link to the deployed one. It outlives the private directory (stop_all): it is
    removed by `testbed down --purge` only."""

    def __init__(self, cfg: Config, ncfg: NodeConfig):
        super().__init__(cfg, ncfg)
        if ncfg.ssh is None:
            raise NodeError(f"Failed to set up node {self.name}: no ssh section in {cfg.path}")
        self.ssh = ncfg.ssh
        self._client = None
        self._dir_ready = False
        self.losses: list[ConnectionLoss] = []
        self._dir_record = cfg.state_dir / "remote" / f"{self.name}.json"
        self._home: str | None = None  # the login's working directory, absolute (pwd, once)
        self._no_sftp: str | None = None  # why the node's sshd refused SFTP (put/get go over exec then)
        self._workdir_ok = False

    @property
    def root(self) -> bool:
        return self.ssh.user == "root"

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
            # 0700 whoever made it first: a command that wrote under it with `mkdir -p` (umask
            # 022: 0755) before this ran is corrected here, and run() calls this first anyway
            script = ('if [ -e "$1" ] || [ -L "$1" ]; then [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ] || '
                      '{ echo "$1 exists and is not a directory of this user" >&2; exit 3; }; '
                      'chmod 700 "$1"; else mkdir -m 700 "$1"; fi')
            self._dir_ready = True
            try:
                self.run(["sh", "-c", script, "sh", d])
            except NodeError:
                self._dir_ready = False
                raise
        return d

    @property
    def client(self):
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _lost(self, why: str) -> ConnectionLoss:
        """Record that the connection dropped, close it; the next command connects again."""
        loss = ConnectionLoss(time.monotonic(), time.time(), why)
        self.losses.append(loss)
        logger.warning("%s: the SSH connection (%s@%s:%s) was lost: %s", self.name, self.ssh.user, self.ssh.host,
                       self.ssh.port, why)
        self.close()
        self._dir_ready = False  # the private directory may be gone with the node's /tmp (a reboot)
        return loss

    def _reconnect(self, loss: ConnectionLoss):
        """Connect again after `loss`; a node that does not answer fails this command (NodeError
        naming the loss), the next command tries again."""
        try:
            c = self.client
        except NodeError as e:
            raise NodeError(f"{e} (the connection was lost: {loss.why})") from None
        loss.reconnected = time.monotonic()
        logger.warning("%s: connected again", self.name)
        return c

    def _open_session(self):
        """A channel on a live connection: a connection found closed (or one that refuses a new
        channel: it died meanwhile) is recorded as lost and made again, once. Nothing has run on
        the node yet, so nothing runs twice."""
        c = self.client
        t = c.get_transport()
        if t is None or not t.is_active():
            c = self._reconnect(self._lost("the connection was closed"))
            t = c.get_transport()
        try:
            return t.open_session(timeout=self.ssh.connect_timeout)
        except NodeError:
            raise
        except Exception as e:  # paramiko's SSHException, EOFError, OSError
            if t.is_active():
                raise
            t = self._reconnect(self._lost(f"no new channel ({e or type(e).__name__})")).get_transport()
            return t.open_session(timeout=self.ssh.connect_timeout)

    def _connect(self):
        import paramiko

        # paramiko's transport thread logs a failed handshake as a traceback, line by line, on
        # "paramiko.transport": one line of it is kept; the NodeError below names the failure and node
        quiet_paramiko()

        s = self.ssh
        c = paramiko.SSHClient()
        known = KnownHosts(os.path.expanduser(s.known_hosts or "~/.ssh/known_hosts"))
        # not load_host_keys(): with it, paramiko rewrites the whole file on every new key
        for host, keys in known.keys.items():
            for ktype, key in keys.items():
                c.get_host_keys().add(host, ktype, key)
        c.set_missing_host_key_policy(host_key_policy(known, self.name, s.accept_unknown_host_keys))
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
        except paramiko.BadHostKeyException as e:
            if sock:
                sock.close()
            host = s.host if s.port == 22 else f"[{s.host}]:{s.port}"
            raise NodeError(f"Failed to connect to node {self.name} ({where}): "
                            f"{known.changed_key(host, e.key, e.expected_key)}") from None
        except paramiko.SSHException as e:
            if sock:
                sock.close()
            why = str(e)
            if why in ("No existing session", "Error reading SSH protocol banner") or "banner" in why:
                # the transport ended before authentication: nothing answered as an sshd
                why = (f"its sshd did not answer (no SSH banner within {s.connect_timeout:g} s: "
                       f"paramiko: {e})")
            raise NodeError(f"Failed to connect to node {self.name} ({where}): {why}") from None
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

    def home(self) -> str:
        """The login's working directory (ssh.workdir, else its home), absolute; asked once."""
        if self._home is None:
            self._home = self.run(["pwd"]).stdout.strip()
        return self._home

    def deployed_path(self) -> str:
        """The deployed artefact (`current`), as an absolute path."""
        return f"{self.home()}/{self.deploy_dir}/current"

    def python_env(self) -> dict[str, str]:
        """The environment that makes the deployed agents importable by a plain interpreter: the
        artefact, by its absolute path, on PYTHONPATH. python_argv does not use it: its
        interpreter is isolated and is given the path itself."""
        return {"PYTHONPATH": self.deployed_path()}

    #: the isolated interpreter's start: sys.argv[1] is the artefact's absolute path, put first on
    #: sys.path; sys.argv[2] the module, run as __main__ with the rest as its arguments
    BOOT = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); m = sys.argv[2]; sys.argv = [m] + sys.argv[3:]; "
            "runpy.run_module(m, run_name='__main__', alter_sys=True)")

    def python_argv(self, module, *args):
        """An isolated interpreter (`-I`: no current directory, no PYTHON* variables, no user
        site on sys.path, so a module planted in the working directory or the home never runs)
        given the deployed artefact by its absolute path; before a deploy the path does not exist
        and a xenobench installed on the node is imported instead."""
        return [self.ssh.python, "-I", "-c", self.BOOT, self.deployed_path(), module, *map(str, args)]

    def remove_deployed(self) -> bool:
        """Remove what `xenobench deploy` placed (DEPLOY_DIR); False if there was nothing."""
        r = self.run(["sh", "-c", '[ -d "$1" ] && rm -rf -- "$1"', "sh", self.deploy_dir], check=False)
        return r.ok

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

    #: prints the mode of a directory another user could write into (group or world writable)
    WORKDIR_CHECK = ('[ -d "$1" ] || { echo "missing"; exit 0; }; '
                     'find "$1" -maxdepth 0 -perm /022 -printf "mode %m\n"')

    def _check_workdir(self) -> None:
        """Refuse an ssh.workdir that another user can write into: commands run there, and a file
        planted there (a Python module, a program by a relative name) would run as the login."""
        if self._workdir_ok or not self.ssh.workdir:
            return
        self._workdir_ok = True
        try:
            out = self.run(["sh", "-c", self.WORKDIR_CHECK, "sh", self.ssh.workdir], _checked=True).stdout.strip()
        except NodeError:
            self._workdir_ok = False
            raise
        if out == "missing":
            self._workdir_ok = False
            raise NodeError(f"Failed to use ssh.workdir {self.ssh.workdir!r} on node {self.name}: no such directory "
                            f"(create it, mode 0700, or fix nodes.{self.name}.ssh.workdir in {self.cfg.path})")
        if out:
            self._workdir_ok = False
            shared = out.startswith("mode 1")  # sticky: a shared directory such as /tmp, keep it so
            fix = ("" if shared else f"`chmod go-w {shlex.quote(self.ssh.workdir)}` on {self.name}, or ")
            raise NodeError(f"Failed to use ssh.workdir {self.ssh.workdir!r} on node {self.name}: it is group- or "
                            f"world-writable ({out}), so another user could plant a module or program that would run "
                            f"as {self.ssh.user}; {fix}set nodes.{self.name}.ssh.workdir in {self.cfg.path} to a "
                            f"directory only the login can write (or remove it: the login's home)")

    def _mentions_work_dir(self, argv: list[str]) -> bool:
        """Whether a command names a path under the private directory (which must then exist, 0700)."""
        if not self._dir_record.exists():
            return False
        d = self.remote_dir + "/"
        return any(d in a for a in argv)

    def run(self, argv, *, timeout=60, check=True, input=None, env=None, own_sysfs=False, _checked=False):
        argv = list(map(str, argv))
        if not _checked:
            self._check_workdir()
            if not self._dir_ready and self._mentions_work_dir(argv):
                self._ensure_dir()
        try:
            rc, out, err = self._exec(argv, timeout=timeout, input=input, env=env)
        except _ExecFailed as e:
            raise NodeError(f"Failed to run `{shlex.join(argv)}` on {self.name}: {e}") from None
        r = CommandResult(argv, rc, out.decode(errors="replace"), err.decode(errors="replace"), self.name)
        return r.check() if check else r

    def _exec(self, argv, *, timeout, input=None, env=None, sink=None) -> tuple[int, bytes, bytes]:
        """Run argv over one exec channel: (exit status, stdout, stderr). `input`: bytes, text or
        a binary file object, streamed to its stdin (then EOF). `sink`: called with each piece of
        stdout instead of collecting it (stdout is then b""), and `timeout` is then the longest
        wait for more, not for the whole command. A command that cannot be run to its end (a
        timeout, a lost connection, a refused channel) is _ExecFailed, why; a connection that
        cannot be made is the NodeError that says so; an exception of `sink` is _SinkFailed."""
        try:
            chan = self._open_session()
            chan.settimeout(timeout)
            chan.exec_command(self._cd() + self._command(argv, env))
            if hasattr(input, "read"):
                while chunk := input.read(1 << 16):
                    chan.sendall(chunk)
            elif input is not None:
                chan.sendall(input.encode() if isinstance(input, str) else input)
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            deadline = time.monotonic() + timeout
            while True:
                if time.monotonic() > deadline:
                    chan.close()
                    raise _ExecFailed(f"timed out after {timeout:g} s")
                if chan.recv_ready():
                    data = chan.recv(65536)
                    if sink is None:
                        out += data
                    else:
                        try:
                            sink(data)
                        except Exception as e:
                            chan.close()
                            raise _SinkFailed(e) from None
                        deadline = time.monotonic() + timeout
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                # Done at the channel's EOF, not at the exit status: sshd sends the status when the
                # process exits, which can be before the last of its output (a 200 kB `bpftool map
                # dump` came back cut at 96 kB). EOF follows all data, so once it is seen, what is
                # not buffered yet never comes: check it first, the buffers after.
                elif (chan.eof_received and chan.exit_status_ready()
                      and not chan.recv_ready() and not chan.recv_stderr_ready()):
                    break
                # closed without EOF: the connection died under the command (paramiko closes every
                # channel of a dead transport, without EOF or exit status)
                elif chan.closed and not chan.recv_ready() and not chan.recv_stderr_ready():
                    raise EOFError("the channel was closed before the command's end")
                else:
                    time.sleep(0.002)
            rc = chan.recv_exit_status()
            chan.close()
        except (NodeError, _ExecFailed, _SinkFailed):
            raise
        except Exception as e:  # paramiko raises a zoo of types; report them uniformly
            t = self._client.get_transport() if self._client is not None else None
            if t is not None and not t.is_active():  # the connection dropped while the command ran
                self._lost(f"while `{shlex.join(argv)}` ran ({e or type(e).__name__})")
                raise _ExecFailed("the SSH connection was lost while it ran (whether it ran is unknown)") from None
            raise _ExecFailed(str(e)) from None
        return rc, bytes(out), bytes(err)

    def session(self, argv):
        argv = list(map(str, argv))
        try:
            self._check_workdir()
            chan = self._open_session()
            chan.exec_command(self._cd() + self._command(argv, None))
        except NodeError:
            raise
        except Exception as e:  # paramiko's SSHException, EOFError, OSError
            raise NodeError(f"Failed to start `{shlex.join(argv)}` on {self.name}: {e or type(e).__name__}") from None
        return ChannelSession(self.name, argv, chan)

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
        """`sudo`: the process runs as root. One started through sudo as `PROGRAM start ...` (a
        root-owned helper, xenobench.dpu) is signalled through `sudo -n PROGRAM signal NAME`, which
        signals only the pid the helper recorded, `sudo` or not (so that stop() and a teardown's
        stop_all() reach it too); any other through `sudo -n kill`."""
        helper = h.argv[:2] == ["sudo", "-n"] and len(h.argv) > 3 and h.argv[3] == "start"
        if not sudo and not helper:  # started through the helper it runs as root: only the helper may signal it
            return super().signal(h, sig)
        if not self._same_process(h) and not self.orphans(h):
            logger.warning("%s: not signalling %s: pid %d is no longer the process started as %s",
                           self.name, h.tag, h.pid, shlex.join(h.argv))
            return False
        if helper:
            self.run(sudo_argv([h.argv[2], "signal", signals.Signals(sig).name[3:]]), check=False)
        else:
            self.run(sudo_argv(["kill", f"-{int(sig)}", "--", f"-{h.pid}"]), check=False)
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
            self.run(["sh", "-c", '[ ! -d "$1" ] || [ -L "$1" ] || [ ! -O "$1" ] || rm -rf -- "$1"', "sh", d],
                     _checked=True)
            rec.unlink(missing_ok=True)
            self._dir_ready = False

    def _signal(self, h, sig):
        self.run(["kill", f"-{int(sig)}", "--", f"-{h.pid}"], check=False)

    #: the mode put() gives a file it writes (either way: SFTP or PUT_SCRIPT)
    PUT_MODE = 0o644

    #: put() without SFTP: $1 the destination's directory (created as SFTP's put creates it), $2 the
    #: destination, $3 its mode (octal), $4 its size in bytes; the bytes on stdin. Written to a
    #: temporary file beside it (mktemp: a new name, 0600), checked whole (a connection lost
    #: mid-copy ends stdin early: a short file is never renamed into place), given its mode and
    #: renamed over the destination; any failure removes the temporary file, reads the rest of
    #: stdin (so that the sender sees the reason, not a closed channel) and exits 1.
    PUT_SCRIPT = (
        'fail() { [ -z "$tmp" ] || rm -f -- "$tmp"; cat > /dev/null; exit 1; }; tmp=; '
        'trap \'[ -z "$tmp" ] || rm -f -- "$tmp"; exit 1\' HUP INT TERM PIPE; '
        'mkdir -p -- "$1" || fail; umask 077; tmp=$(mktemp "$2.XXXXXXXXXX") || fail; '
        'cat > "$tmp" || fail; n=$(wc -c < "$tmp") || fail; '
        '[ "$n" -eq "$4" ] || { echo "received $n of $4 bytes" >&2; fail; }; '
        'chmod -- "$3" "$tmp" && mv -fT -- "$tmp" "$2" || fail')

    def _sftp(self):
        """An SFTP client, or None when the node's sshd refuses the subsystem (a hardened sshd
        without `Subsystem sftp`): the reason is kept in _no_sftp and SFTP is not asked again."""
        if self._no_sftp is not None:
            return None
        c = self.client  # a connection that cannot be made fails here, as itself
        try:
            return c.open_sftp()
        except Exception as e:  # paramiko's SSHException("Channel closed."), EOFError
            why = f"paramiko: {e or type(e).__name__}"
            t = c.get_transport()
            if t is not None and t.is_active():  # a live connection that refused the subsystem
                self._no_sftp = why
                logger.info("%s: no SFTP (%s): files go over exec channels (`cat`)", self.name, why)
            return None  # a dead one: the exec channel connects again, SFTP is asked next time

    def _no_sftp_why(self) -> str:
        return self._no_sftp or "SFTP failed"

    @staticmethod
    def _stderr_line(err: bytes) -> str:
        """A command's stderr as one line."""
        return "; ".join(ln.strip() for ln in err.decode(errors="replace").splitlines() if ln.strip())

    def put(self, local, remote, *, mode: int = PUT_MODE):
        """Copy a local file to `remote` (its directory created), mode `mode`: over SFTP, or, when
        the node's sshd has no SFTP, through PUT_SCRIPT on an exec channel (written beside it and
        renamed: `remote` is the old file or the whole new one)."""
        if remote.startswith(self.work_dir + "/"):
            self._ensure_dir()
        sftp = self._sftp()
        if sftp is None:
            return self._put_exec(local, remote, mode)
        try:
            try:
                self.run(["mkdir", "-p", os.path.dirname(remote) or "."])
                sftp.put(str(local), remote)
                sftp.chmod(remote, mode)
            finally:
                sftp.close()
        except NodeError:
            raise
        except Exception as e:  # the server's refusal (OSError), paramiko's SSHException, EOFError
            raise NodeError(f"Failed to put {local} to {self.name}:{remote}: {e or type(e).__name__}") from None

    def _put_exec(self, local, remote, mode):
        self._check_workdir()  # the script runs there, as run()'s commands do
        dest = remote if not remote.startswith("-") else f"./{remote}"
        argv = ["sh", "-c", self.PUT_SCRIPT, "sh", os.path.dirname(dest) or ".", dest, format(mode, "o")]
        try:
            f = open(local, "rb")
        except OSError as e:
            raise NodeError(f"Failed to put {local} to {self.name}:{remote}: {e.strerror or e}") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            try:
                # at least 1 MB/s for a large file, over the 60 s of a command
                rc, _, err = self._exec([*argv, str(size)], timeout=60 + size / 1e6, input=f)
                why = None if rc == 0 else (self._stderr_line(err) or f"exit status {rc}")
            except _ExecFailed as e:
                why = str(e)
        if why is not None:
            raise NodeError(f"Failed to put {local} to {self.name}:{remote}: the node's sshd has no `Subsystem sftp` "
                            f"({self._no_sftp_why()}) and writing the file over an exec channel (`cat` to a temporary "
                            f"file, then `mv`) failed: {why}; add `Subsystem sftp internal-sftp` to the node's "
                            f"sshd_config (and reload sshd), or fix what the copy reported ({self.ssh.user} must be "
                            f"able to create {os.path.dirname(dest) or '.'} and write {size} bytes there)")

    def get(self, remote, local):
        """Copy `remote` to a local file: over SFTP, or, when the node's sshd has no SFTP, as `cat`'s
        output on an exec channel. Written beside `local` and renamed (a full disk, a failure
        half-way leaves `local` as it was and no temporary file)."""
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.{os.getpid()}.tmp")
        try:
            try:
                sftp = self._sftp()
                if sftp is None:
                    self._get_exec(remote, tmp)
                else:
                    try:
                        sftp.get(remote, str(tmp))
                    finally:
                        sftp.close()
                tmp.replace(local)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except NodeError:
            raise
        except _SinkFailed as e:  # writing the local file (over exec)
            raise NodeError(f"Failed to get {self.name}:{remote}: writing {local} failed: "
                            f"{getattr(e.error, 'strerror', None) or e.error}") from None
        except Exception as e:  # the server's refusal or the local file (OSError), paramiko's SSHException
            raise NodeError(f"Failed to get {self.name}:{remote}: {e or type(e).__name__}") from None

    def _get_exec(self, remote, tmp: Path):
        self._check_workdir()
        with open(tmp, "wb") as f:
            try:
                rc, _, err = self._exec(["cat", "--", remote], timeout=60, sink=f.write)
                why = None if rc == 0 else (self._stderr_line(err) or f"exit status {rc}")
            except _ExecFailed as e:
                why = str(e)
        if why is not None:
            raise NodeError(f"Failed to get {self.name}:{remote}: the node's sshd has no `Subsystem sftp` "
                            f"({self._no_sftp_why()}) and reading the file over an exec channel (`cat`) failed: "
                            f"{why}; add `Subsystem sftp internal-sftp` to the node's sshd_config (and reload "
                            f"sshd), or fix what the read reported ({self.ssh.user} must be able to read {remote})")

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None


class _ExecFailed(Exception):
    """A command SshNode._exec could not run to its end (not its exit status): why, one line."""


class _SinkFailed(Exception):
    """The `sink` of SshNode._exec raised `error` (the local side: a full disk)."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


class ChannelSession(Session):
    """A Session over one SSH channel: the program's stdin and stdout are the channel's; closing
    the channel's write side is its EOF, and sshd ends it with the connection."""

    def __init__(self, node, argv, chan):
        super().__init__(node, argv)
        self.chan = chan

    def _send(self, data):
        try:
            self.chan.sendall(data)
        except Exception as e:  # a closed channel: socket.error or paramiko's SSHException
            raise self._fail(f"the channel is gone ({e or type(e).__name__})") from None

    def _recv(self, timeout):
        self.chan.settimeout(timeout)
        try:
            return self.chan.recv(1 << 16)
        except TimeoutError:
            raise self._fail("no reply within the timeout") from None
        except Exception as e:
            raise self._fail(f"the channel is gone ({e or type(e).__name__})") from None

    def _stderr(self):
        try:
            return self.chan.recv_stderr(1 << 16).decode(errors="replace") if self.chan.recv_stderr_ready() else ""
        except Exception:
            return ""

    def _close(self):
        try:
            self.chan.shutdown_write()
            self.chan.close()
        except Exception:  # the connection already went: sshd ends the program with it
            pass
