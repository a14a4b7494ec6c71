"""The DNS backends on the testbed's dns_backend node: the Python server (xenobench.agents.dns_server),
bind9 (named with a generated configuration, dns_server/*.tmpl) and the XDP responder
(dns_server/xdp_responder.bpf.c, controller xenobench.agents.dns_xdp). All answer on the service VIP
(on the backend's loopback: direct server return), over either transport.

    start_server(testbed, kind) -> dict   # what ran: server, node, pid, log, ...
    stop_server(testbed, kind) -> bool    # False if it was not running

Only one server runs at a time (python and bind9 would compete for vip:53, and the XDP responder
would answer in front of either), so start_server refuses while another one runs.
"""

from __future__ import annotations

import json
import string
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import REPO_ROOT
from ..agents.dns_xdp import OBJ as XDP_OBJ, PROG as XDP_PROG
from ..errors import ConfigError, NodeError
from ..progcost import remove_left_program

KINDS = ("python", "bind9", "xdp")
TAGS = {"python": "dns-python", "bind9": "dns-bind9", "xdp": "dns-xdp"}
READY = {"python": '"event": "listening"', "bind9": "running", "xdp": '"event": "started"'}
TEMPLATES = REPO_ROOT / "dns_server"
START_TIMEOUT_S = 15


@dataclass(frozen=True)
class DnsSettings:
    """The config's dns section with defaults filled in, names made absolute."""
    vip: str
    port: int
    zone: str                          # absolute, ends in '.'
    qname: str                         # absolute
    records: dict[str, list[str]]      # absolute name -> addresses
    ttl: int
    server: str
    bind9_binary: str
    bind9_threads: int
    xdp_mode: str
    xdp_generic: bool
    timeout_s: float
    tolerance_us: float
    hardware_timestamps: bool = False
    source_port: int = 10053           # the probes' first candidate source port (dns.prober.source_port)

    @property
    def answer(self) -> str:
        """The qname's (first) address: what a correct answer to the prober holds."""
        return self.records[self.qname][0]


def _absolute(name: str, zone: str) -> str:
    import dns.name
    z = dns.name.from_text(zone)
    n = z if name == "@" else dns.name.from_text(name, origin=z)
    return n.to_text()


def settings(cfg) -> DnsSettings:
    sec = cfg.section("dns")
    zone = cfg.service.zone if cfg.service.zone.endswith(".") else cfg.service.zone + "."
    records: dict[str, list[str]] = {}
    for name, addr in sec["records"].items():
        n = _absolute(name, zone)
        if not n.endswith(zone) and n != zone:
            raise ConfigError(f"Failed to load config {cfg.path}: dns.records.{name}: {n} is outside the "
                              f"zone {zone}")
        records.setdefault(n, []).append(addr)
    qname = _absolute(sec["qname"], zone)
    if qname not in records:
        raise ConfigError(f"Failed to load config {cfg.path}: dns.qname: {qname!r} has no record in dns.records "
                          f"(have {', '.join(records)})")
    # every default is applied from config/schema/dns.schema.yaml on load
    b, x, p = sec["bind9"], sec["xdp"], sec["prober"]
    return DnsSettings(cfg.service.vip, cfg.service.port, zone, qname, records, int(sec["ttl_s"]),
                       sec["server"], b["binary"], int(b["threads"]), x["mode"], bool(x["generic"]),
                       float(p["timeout_s"]), float(p["tolerance_us"]), bool(p["hardware_timestamps"]),
                       int(p["source_port"]))


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"Failed to select DNS server: unknown kind {kind!r} (known: {', '.join(KINDS)})")


def _node_dir(node, sub: str) -> str:
    return node.path("dns", sub)


def render_bind9(s: DnsSettings, directory: str) -> tuple[str, str]:
    """(named.conf, zone file) text from the templates in dns_server/."""
    conf = string.Template((TEMPLATES / "named.conf.tmpl").read_text()).substitute(
        dir=directory, port=s.port, vip=s.vip, zone=s.zone)
    rel = []
    for name, addrs in s.records.items():
        owner = "@" if name == s.zone else name[: -len(s.zone) - 1]
        rel += [f"{owner}\tIN\tA\t{a}" for a in addrs]
    if f"ns.{s.zone}" not in s.records:
        rel.append(f"ns\tIN\tA\t{s.vip}")
    zone = string.Template((TEMPLATES / "zone.db.tmpl").read_text()).substitute(
        zone=s.zone, ttl=s.ttl, records="\n".join(rel))
    return conf, zone


def _xdp_pindir(testbed) -> Path:
    return testbed.bpffs_dir / "dns-xdp"


def server_argv(testbed, kind: str) -> list[str]:
    """The command that runs the server (or its controller) on the DNS backend node."""
    _check_kind(kind)
    cfg, s = testbed.cfg, settings(testbed.cfg)
    node = testbed.node_for_role("dns_backend")
    if kind == "python":
        recs = [f"{n}={a}" for n, addrs in s.records.items() for a in addrs]
        return node.python_argv("xenobench.agents.dns_server", "--bind", s.vip, "--port", str(s.port), "--zone", s.zone,
                                *sum((["--record", r] for r in recs), []), "--ttl", str(s.ttl))
    if kind == "bind9":
        d = _node_dir(node, "bind9")
        return [s.bind9_binary, "-g", "-c", f"{d}/named.conf", *(["-n", str(s.bind9_threads)] if s.bind9_threads else [])]
    ncfg = cfg.role("dns_backend")
    peers = []
    for n in cfg.nodes.values():
        if n.name == ncfg.name:
            continue
        for i in n.interfaces:
            if i.ip and i.mac:
                peers += [f"{a.ip}={i.mac}" for a in (i.ip, *i.extra_ips)]
    return node.python_argv(
        "xenobench.agents.dns_xdp", "run", "--iface", ncfg.iface().name, "--vip", s.vip, "--port", str(s.port),
        "--zone", s.zone, "--answer", s.answer, "--ttl", str(s.ttl), "--mode", s.xdp_mode,
        "--src-mac", ncfg.iface().mac, *sum((["--peer", p] for p in peers), []),
        "--pin-dir", str(_xdp_pindir(testbed)), *(["--generic"] if s.xdp_generic else []))


def start_server(testbed, kind: str) -> dict:
    """Start a DNS server on the dns_backend node and wait until it answers; returns what ran."""
    _check_kind(kind)
    s = settings(testbed.cfg)
    node = testbed.node_for_role("dns_backend")
    for other in KINDS:
        if node.running(TAGS[other]):
            raise NodeError(f"Failed to start DNS server {kind} on {node.name}: {other} is running; "
                            f"stop it first (`xenobench dns stop --server {other}`)")
    if kind == "xdp":
        if not XDP_OBJ.exists() and node.run(["test", "-f", str(XDP_OBJ)], check=False).returncode != 0:
            raise NodeError(f"Failed to start DNS server xdp on {node.name}: {XDP_OBJ} not built "
                            "(run `make -C dns_server`)")
    if kind == "bind9":
        d = _node_dir(node, "bind9")
        conf, zone = render_bind9(s, d)
        node.run(["mkdir", "-p", d])
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in (("named.conf", conf), ("zone.db", zone)):
                (Path(tmp) / name).write_text(text)
                node.put(Path(tmp) / name, f"{d}/{name}")
        chk = node.run(["named-checkconf", "-z", f"{d}/named.conf"], check=False)
        if not chk.ok:
            raise NodeError(f"Failed to start DNS server bind9 on {node.name}: named-checkconf {d}/named.conf: "
                            f"{(chk.stdout + chk.stderr).strip().splitlines()[-1:]}")
    argv = server_argv(testbed, kind)
    offset = len(node.read_text(node.log_path(TAGS[kind])))
    testbed.release_backend_sink(node.name)  # the server's interface is its own while it runs
    try:
        return _wait_ready(testbed, node, kind, s, argv, offset)
    except BaseException:
        stop_server(testbed, kind)  # one that never became ready leaves the interface as it found it
        raise


def _wait_ready(testbed, node, kind: str, s, argv: list[str], offset: int) -> dict:
    tag = TAGS[kind]
    h = node.start(tag, argv, log=node.log_path(tag))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = node.read_text(h.log)[offset:]
        if READY[kind] in text:
            # an LB's decap in front of the backend (Katran's, xenobench.fabric) stays in front of the
            # server's program: started before or after the LB, the server answers what it decapsulates
            chained = testbed.decap_in_front(node.name)
            return {"server": kind, "node": node.name, "pid": h.pid, "log": h.log, "argv": argv,
                    "listen": f"{s.vip}:{s.port}", "zone": s.zone, "behind_decap": chained}
        if not node.running(tag):
            node.stop(tag)
            last = text.strip().splitlines()[-1] if text.strip() else "exited without output"
            raise NodeError(f"Failed to start DNS server {kind} on {node.name}: {last} (log {h.log})")
        time.sleep(0.05)
    node.stop(tag)
    raise NodeError(f"Failed to start DNS server {kind} on {node.name}: not ready within {START_TIMEOUT_S} s "
                    f"(log {h.log})")


def server_process(testbed, kind: str):
    """The liveness method (xenobench.actors): the running server's ProcessHandle, None when it is
    not running."""
    _check_kind(kind)
    node = testbed.node_for_role("dns_backend")
    h = node.handle(TAGS[kind])
    return h if h is not None and node.running(TAGS[kind]) else None


def stop_server(testbed, kind: str) -> bool:
    """Stop the server (the XDP controller detaches and unpins on SIGTERM); False if not running
    (an XDP controller that died is cleaned up after: its program detached, its pins removed)."""
    _check_kind(kind)
    node = testbed.node_for_role("dns_backend")
    was = node.stop(TAGS[kind], timeout=10)
    if kind == "xdp" and not was:
        remove_left_program(node, testbed.cfg.role("dns_backend").iface().name, _xdp_pindir(testbed), XDP_PROG)
    if not any(node.running(TAGS[k]) for k in KINDS):
        # no server left on the interface: the sink back on it (taking off an LB's decap that a
        # server's start put in front, so that it goes back in front of the sink below)
        testbed.release_backend_sink(node.name)
        testbed.restore_backend_sink(node.name)
    testbed.decap_in_front(node.name)  # an LB's decap still up: back in front of what is left
    return was


def last_counts(testbed, kind: str) -> dict:
    """The counts the python server or the XDP controller printed last (the 'stopped' line after
    stop_server); {} for bind9 or when none was printed."""
    node = testbed.node_for_role("dns_backend")
    log = node.log_path(TAGS[kind])
    for line in reversed(node.read_text(log).splitlines()):
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("event") in ("stopped", None):
                return d
    return {}
