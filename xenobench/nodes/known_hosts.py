"""Host keys for the `ssh` transport: known_hosts read as OpenSSH reads it, and the policy for a key
that is not in it."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import shlex

from ..errors import NodeError

logger = logging.getLogger(__name__)


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
        self.entries: list[tuple[int, object]] = []      # (line, paramiko HostKeyEntry) of the usable lines
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
            self.entries.append((n, entry))
            for host in entry.hostnames:
                self.keys.add(host, entry.key.get_name(), entry.key)

    def lines_of(self, hostname: str, key_type: str | None = None) -> list[int]:
        """The lines that hold a key for `hostname` (as known_hosts names it: `[host]:port` off
        port 22), hashed lines included; of one key type if given."""
        import paramiko
        out = []
        for n, e in self.entries:
            for h in e.hostnames:
                hit = (paramiko.HostKeys.hash_host(hostname, h) == h) if h.startswith("|1|") else h == hostname
                if hit and (key_type is None or e.key.get_name() == key_type):
                    out.append(n)
                    break
        return out

    def changed_key(self, hostname: str, got, expected) -> str:
        """What to tell the operator when the host offers another key than known_hosts holds: both
        fingerprints as OpenSSH prints them, the line(s) to edit, and the command that removes them."""
        lines = self.lines_of(hostname, expected.get_name()) or self.lines_of(hostname)
        where = f"line {', '.join(map(str, lines))} of {self.path}" if lines else self.path
        kind = "ecdsa" if got.get_name().startswith("ecdsa") else got.get_name().split("-")[-1]
        return (f"the host key changed: {hostname} offers {got.get_name()} {fingerprint(got)}, {where} holds "
                f"{expected.get_name()} {fingerprint(expected)}; if the node was reinstalled, its console shows the "
                f"new one (`ssh-keygen -lf /etc/ssh/ssh_host_{kind}_key.pub`): then edit that line (`ssh-keygen -R "
                f"{shlex.quote(hostname)} -f {shlex.quote(self.path)}` removes it); else another host answers there")

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


def fingerprint(key) -> str:
    """A key's fingerprint as OpenSSH shows it (ssh-keygen -l): SHA256 of the key blob, base64
    without padding."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


def host_key_policy(known: KnownHosts, node: str, accept_unknown: bool):
    """paramiko's policy for a key not in known_hosts: refuse revoked keys always; accept and
    append only with accept_unknown (nodes.<node>.ssh.accept_unknown_host_keys); otherwise refuse
    naming the file and the fix."""
    import paramiko

    class Policy(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client, hostname, key):
            n = known.is_revoked(key)
            if n is not None:
                raise paramiko.SSHException(f"host key of {hostname} ({key.get_name()}) is marked @revoked in "
                                            f"{known.path} line {n}")
            if accept_unknown:
                known.append(hostname, key)
                logger.warning("%s: accepted the unknown host key of %s (%s %s), appended to %s", node,
                               hostname, key.get_name(), fingerprint(key), known.path)
                return
            ca = (f"; lines {', '.join(str(n) for n, _ in known.authorities)} are @cert-authority keys, which "
                  "paramiko cannot check (host certificates, paramiko issue #771): list the host's own key"
                  if known.authorities else "")
            raise paramiko.SSHException(f"host key of {hostname} ({key.get_name()} {fingerprint(key)}) is not in "
                                        f"{known.path}; compare the fingerprint with the node's console "
                                        f"(`ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub`) and add it (ssh-keyscan), or "
                                        f"set nodes.{node}.ssh.accept_unknown_host_keys: true{ca}")

    return Policy()
