"""The thesis topology in network namespaces on this machine, and the record of what it created.

One namespace per node (<prefix><node>) and a switch namespace (<prefix>sw) holding a Linux bridge
whose FDB binds every MAC statically to its port, like the MSN2100's MAC bindings. Every veth is
created directly inside the namespaces, so nothing appears in the root namespace; deleting the
namespaces removes every link and every unpinned XDP program.

Namespaces are named by the prefix alone, so one topology per prefix exists on a machine, whatever
config built it. Its record is therefore kept per prefix, on the host (/run/xenobench/<prefix>
topology.json: in /run it lives exactly as long as namespaces and pins, until a reboot), and is
written before anything is created: `down` with any config on the prefix, after a crashed or
killed harness too, finds the namespaces, pin directories, state directory and bpffs mount of the
testbed that was really built. How its nodes are reached is no business of this file: a testbed of
namespaces may reach them by `nsenter` (netns transport) or over an sshd inside each (ssh).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..config import Config, Interface, NodeConfig
from ..errors import TestbedError
from ..nodes import NETNS_RUN_DIR
from .bpffs import BPFFS, unmount_bpffs_if_unused

log = logging.getLogger(__name__)

RECORDS = Path("/run/xenobench")
STATE_MARK = ".namespace-testbed"   # in a state directory: made by this prefix's namespace testbed (its content: the prefix)


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise TestbedError(f"Failed to run `ip {' '.join(args)}`: {p.stderr.strip()}")
    return p


def existing_namespaces() -> set[str]:
    return {p.name for p in NETNS_RUN_DIR.iterdir()} if NETNS_RUN_DIR.is_dir() else set()


class NamespaceTopology:
    """Names, bring-up and removal of the namespaces, bridge and veths of one config, and the
    prefix's record (`record`, `write_record`) that the switch and the NAPI placement add to."""

    def __init__(self, cfg: Config, pin_dir: Path):
        self.cfg = cfg
        self.pin_dir = pin_dir  # where the testbed pins; recorded so any config's `down` removes it

    # --- names ---------------------------------------------------------------------------------
    @property
    def switch_ns(self) -> str:
        return f"{self.cfg.prefix}sw"

    def ns(self, node: str) -> str:
        """The namespace of a node."""
        return f"{self.cfg.prefix}{node}"

    def namespaces(self) -> list[str]:
        return [self.ns(n) for n in self.cfg.nodes] + [self.switch_ns]

    def switch_port(self, node: str, iface: str) -> str:
        """Name of the bridge port a node interface is plugged into (≤ 15 characters)."""
        name = f"{node}-{iface}"
        if len(name) > 15:
            idx = [f"{n}/{i.name}" for n, c in self.cfg.nodes.items() for i in c.interfaces]
            name = f"swp{idx.index(f'{node}/{iface}')}"
        return name

    def ports(self) -> list[tuple[NodeConfig, Interface, str]]:
        """(node, interface, switch port) of every node interface."""
        return [(n, i, self.switch_port(n.name, i.name)) for n in self.cfg.nodes.values() for i in n.interfaces]

    def run(self, ns: str, *argv: str) -> None:
        """argv in a namespace, through nsenter (`ip netns exec` would remount /sys, hiding the pins)."""
        p = subprocess.run(["nsenter", f"--net={NETNS_RUN_DIR / ns}", "--", *argv], capture_output=True, text=True)
        if p.returncode != 0:
            raise TestbedError(f"Failed to run `{' '.join(argv)}` in namespace {ns}: {p.stderr.strip()}")

    # --- the prefix's record -----------------------------------------------------------------------
    @property
    def record_file(self) -> Path:
        return RECORDS / f"{self.cfg.prefix}topology.json"

    def record(self) -> dict:
        """What the testbed of this prefix recorded (maybe under another config), {} if nothing."""
        try:
            rec = json.loads(self.record_file.read_text())
        except (OSError, ValueError):
            return {}
        return rec if isinstance(rec, dict) else {}

    def is_mine(self) -> bool:
        """Whether the prefix's record is this config's testbed: the same name and state directory
        (as when the record lived in that directory; the config file may be named relative or not)."""
        rec = self.record()
        return (rec.get("testbed"), rec.get("state_dir")) == (self.cfg.name, str(self.cfg.state_dir))

    def write_record(self, **kw) -> None:
        self.record_file.parent.mkdir(parents=True, exist_ok=True)
        rec = self.record()
        rec.update(kw)
        tmp = self.record_file.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(rec, indent=1))
            tmp.replace(self.record_file)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def start_record(self, **kw) -> None:
        """A new record, before anything is created; the state directory is marked as this
        prefix's namespace testbed's (STATE_MARK), so that a purge under another config of the
        prefix finds it after the record is gone."""
        self.record_file.unlink(missing_ok=True)
        self.cfg.state_dir.mkdir(parents=True, exist_ok=True)
        (self.cfg.state_dir / STATE_MARK).write_text(self.cfg.prefix + "\n")
        self.write_record(testbed=self.cfg.name, config=str(self.cfg.path), status="creating",
                          namespaces=self.namespaces(), pin_dirs=[str(self.pin_dir)],
                          state_dir=str(self.cfg.state_dir), created=time.time(), **kw)

    def is_up(self) -> bool:
        rec = self.record()
        return self.is_mine() and rec.get("status") == "up" and set(self.namespaces()) <= existing_namespaces()

    # --- bring-up ------------------------------------------------------------------------------------
    def build(self) -> None:
        """Namespaces, the bridge, a veth per node interface with its addresses."""
        cfg, sw = self.cfg, self.switch_ns
        for ns in self.namespaces():
            ip("netns", "add", ns)
            # no IPv6: router solicitations and DAD would add frames to every count and capture
            self.run(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
            ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0",
           "mcast_snooping", "0")
        # no multicast on any link: IGMP reports would add frames to counts and captures
        ip("-n", sw, "link", "set", "br0", "multicast", "off", "up")
        vip = cfg.service.vip
        for n in cfg.nodes.values():
            ns = self.ns(n.name)
            if n.role in ("dns_backend", "backend"):
                # the VIP lives on the backend's loopback (direct server return); never answer ARP for it
                self.run(ns, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2")
                ip("-n", ns, "addr", "add", f"{vip}/32", "dev", "lo")
            for i in n.interfaces:
                port = self.switch_port(n.name, i.name)
                ip("link", "add", i.name, "netns", ns, "address", i.mac, "type", "veth", "peer", "name", port,
                   "netns", sw)
                # checksums in software: frames on the wire (XDP, captures) carry full checksums
                for dev, where in ((i.name, ns), (port, sw)):
                    self.run(where, "ethtool", "-K", dev, "tx", "off")
                # GRO on the switch side gives the veth NAPI, without which XDP_TX/XDP_REDIRECT
                # into the node's interface would be dropped
                self.run(sw, "ethtool", "-K", port, "gro", "on")
                ip("-n", sw, "link", "set", port, "master", "br0")
                subprocess.run(["bridge", "-n", sw, "link", "set", "dev", port, "learning", "off"], check=True)
                subprocess.run(["bridge", "-n", sw, "fdb", "replace", i.mac, "dev", port, "master", "static"],
                               check=True)
                ip("-n", sw, "link", "set", port, "multicast", "off", "up")
                if i.ip:
                    ip("-n", ns, "addr", "add", str(i.ip), "dev", i.name)
                for extra in i.extra_ips:
                    ip("-n", ns, "addr", "add", str(extra), "dev", i.name)
                if n.role == "lb" and i.lb_port == "ingress":
                    ip("-n", ns, "addr", "add", f"{vip}/32", "dev", i.name)
                ip("-n", ns, "link", "set", i.name, "multicast", "off", "up")
            if n.role == "lb" and len(n.interfaces) > 1:
                # two ports in one subnet: answer ARP only on the port that owns the address
                self.run(ns, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2")

    # --- removal ---------------------------------------------------------------------------------------
    def remove(self, *, purge: bool = False) -> list[str]:
        """Remove what the prefix's testbed created, whichever config built it: processes in its
        namespaces, the namespaces, its pin directories, the bpffs mount it made (only that one),
        the record; with `purge` its state directory too. This config's own names are removed as
        well (a record lost with /run). Returns the namespaces removed."""
        rec = self.record()
        mine = set(self.namespaces()) | {n for n in rec.get("namespaces", []) if self._owned_ns(n)}
        present = sorted(mine & existing_namespaces())
        for ns in present:
            kill_ns_processes(ns)
        for ns in present:
            ip("netns", "del", ns, check=False)
        for d in {self.pin_dir, *map(Path, rec.get("pin_dirs", []))}:
            if self._owned_pin_dir(d) and d.exists():
                shutil.rmtree(d, ignore_errors=True)
        if rec.get("bpffs_mount") is not None:
            unmount_bpffs_if_unused(rec["bpffs_mount"])
        if purge:
            # this config's, the record's, and any other config's of the prefix whose record a plain
            # `down` already removed (marked by start_record; a hosts testbed's is never marked)
            marked = [m.parent for m in self.cfg.state_dir.parent.glob(f"*/{STATE_MARK}")
                      if m.read_text().strip() == self.cfg.prefix]
            for d in {self.cfg.state_dir, *map(Path, filter(None, [rec.get("state_dir")])), *marked}:
                if self._owned_state_dir(d):
                    shutil.rmtree(d, ignore_errors=True)
        self.record_file.unlink(missing_ok=True)
        left = sorted(mine & existing_namespaces())
        if left:
            raise TestbedError(f"Failed to remove namespaces {', '.join(left)}")
        return present

    # a record is data on disk: only names this prefix can have made are acted on
    def _owned_ns(self, name: str) -> bool:
        return isinstance(name, str) and name.startswith(self.cfg.prefix) and "/" not in name

    def _owned_pin_dir(self, d: Path) -> bool:
        return d.parent == BPFFS and d.name.startswith(self.cfg.prefix)

    def _owned_state_dir(self, d: Path) -> bool:
        """State directories are named <testbed>-<prefix> (xenobench.config)."""
        return d.is_absolute() and d.name.endswith(f"-{self.cfg.prefix.rstrip('-')}") and not d.is_symlink()


def kill_ns_processes(ns: str) -> None:
    """SIGTERM, then SIGKILL, every process in a namespace (`ip netns pids`)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        pids = [int(x) for x in p.stdout.split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            if not p.stdout.split():
                return
            time.sleep(0.05)
