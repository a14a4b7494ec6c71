"""`xenobench deploy`: ship to each node of an SSH testbed what its role needs, from the
controller (lab hosts are often offline: nothing is installed from the internet on the nodes),
and check what the operator must provide. DESIGN.md §4.7.

What is shipped, per node, as ONE artefact: the node-side agents (xenobench/agents, which import
only xenobench.errors and xenobench.backends of the harness: tests/test_layout.py) and the BPF
objects built for the node's role, in the repository's layout, so that the agents' REPO_ROOT
(the parent of the package) is the artefact's directory and finds the objects there. It is a
gzip'd tarball whose name is the SHA-256 of its files (paths and contents), unpacked on the node
under Node.deploy_dir/<hash>, `current` linking to it; a node that already holds <hash>
gets nothing copied. The DPU gets XenoFlow's source (XenoFlowLB.ship_source), content-addressed
the same way. Namespace nodes share this machine's tree: nothing to ship.

The checks (check_node) read, never change: one Row per (node, check), ready or missing, and the
command that fixes a missing one."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

from . import REPO_ROOT
from .errors import NodeError
from .nodes import Node
from .nodes.base import sudo_argv, sudo_refused, sudoers_fix

#: the harness modules the agents import (tests/test_layout.py: agents import no other harness code)
AGENT_MODULES = ("xenobench/__init__.py", "xenobench/errors.py", "xenobench/backends.py", "xenobench/agents")

#: BPF objects each role's agents load (globs under REPO_ROOT; scripts/build.sh builds them)
ROLE_OBJECTS: dict[str, tuple[str, ...]] = {
    "lb": ("ebpf_baseline/build/*.bpf.o",),
    "dns_backend": ("dns_server/build/*.bpf.o",),
}

#: tools each role's steps run (agents: bpftool; counters: ethtool; RTT captures: tcpdump)
ROLE_TOOLS: dict[str, tuple[str, ...]] = {
    "client": ("tcpdump", "ethtool"),
    "dns_backend": ("bpftool", "ethtool", "tcpdump"),
    "backend": ("bpftool", "ethtool"),
    "lb": ("bpftool", "ethtool"),
    "loadgen": ("ethtool",),
    "dpu": ("ovs-vsctl", "ovs-ofctl", "pkg-config", "meson", "ninja"),
}

#: Python modules the agents of each role import beyond the standard library
ROLE_PY_MODULES: dict[str, tuple[str, ...]] = {
    "client": ("numpy", "dns", "scapy"),
    "dns_backend": ("dns", "yaml", "scapy"),
    "backend": ("scapy",),
    "lb": ("yaml",),
}
APT_OF_MODULE = {"numpy": "python3-numpy", "dns": "python3-dnspython", "yaml": "python3-yaml",
                 "scapy": "python3-scapy"}

MIN_PYTHON = (3, 10)


@dataclass
class Row:
    node: str
    role: str
    check: str
    ready: bool
    detail: str
    fix: str = ""


# --- the artefact ---------------------------------------------------------------------------
def artefact_files(role: str) -> list[str]:
    """Paths (relative to REPO_ROOT) of what a node with this role gets, sorted."""
    out: set[str] = set()
    for m in AGENT_MODULES:
        p = REPO_ROOT / m
        out |= {str(f.relative_to(REPO_ROOT)) for f in p.rglob("*.py")} if p.is_dir() else {m}
    for pattern in ROLE_OBJECTS.get(role, ()):
        found = sorted(REPO_ROOT.glob(pattern))
        if not found:
            raise NodeError(f"Failed to build the deploy artefact for role {role}: no {pattern} under "
                            f"{REPO_ROOT} (run `scripts/build.sh`)")
        out |= {str(f.relative_to(REPO_ROOT)) for f in found}
    return sorted(out)


def content_hash(root: Path, files: list[str]) -> str:
    """SHA-256 over each file's path and contents: the artefact's name."""
    h = hashlib.sha256()
    for f in files:
        data = (root / f).read_bytes()
        h.update(f"{f}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def build_artefact(role: str, out_dir: Path) -> tuple[str, Path]:
    """(hash, path of <hash>.tar.gz) for a role; byte-identical for identical content."""
    files = artefact_files(role)
    digest = content_hash(REPO_ROOT, files)
    out = out_dir / f"{digest}.tar.gz"
    if not out.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tf:
            for f in files:
                data = (REPO_ROOT / f).read_bytes()
                ti = tarfile.TarInfo(f)
                ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
                tf.addfile(ti, io.BytesIO(data))
        tmp = out.with_suffix(".part")
        tmp.write_bytes(buf.getvalue())
        tmp.replace(out)
    return digest, out


def deploy_node(cfg, node: Node) -> dict:
    """Ship the role's artefact to an SSH node (content-addressed: nothing is copied when the
    node holds it already) and link `current` to it. {"node", "hash", "copied"}."""
    role = node.ncfg.role
    if node.deploy_dir is None:
        return {"node": node.name, "hash": None, "copied": False, "note": "shares this machine's tree"}
    digest, tarball = build_artefact(role, cfg.state_dir / "deploy")
    # absolute: commands run in ssh.workdir (or the home), SFTP resolves against the home
    base = f"{node.run(['pwd']).stdout.strip()}/{node.deploy_dir}"
    d = f"{base}/{digest}"
    have = node.run(["test", "-f", f"{d}/.complete"], check=False).ok
    if not have:
        node.put(tarball, f"{base}/{digest}.tar.gz")
        script = ('set -e; rm -rf -- "$2.tmp"; mkdir -p "$2.tmp"; tar -xzf "$2.tar.gz" -C "$2.tmp"; '
                  'touch "$2.tmp/.complete"; rm -rf -- "$2"; mv "$2.tmp" "$2"; rm -f "$2.tar.gz"')
        node.run(["sh", "-c", script, "sh", base, d])
    node.run(["ln", "-sfn", digest, f"{base}/current"])
    return {"node": node.name, "hash": digest, "copied": not have}


# --- the checks -----------------------------------------------------------------------------
def _sudo_needed(node: Node) -> bool:
    ssh = getattr(node, "ssh", None)
    return ssh is not None and ssh.user != "root"


def dpu_sudo_commands(cfg) -> list[str]:
    """What the DPU's login must run as root (XenoFlowLB's sudo steps): the sudoers rule's list."""
    sec = cfg.section("xenoflow")
    build = sec.get("build_dir", "xenobench-xenoflow/build")
    return ["/usr/bin/ovs-vsctl", "/usr/bin/ovs-ofctl", "/usr/bin/kill", "/bin/sh", "/usr/bin/mount",
            f"/home/*/{build}/xenoflow"]


def check_node(cfg, node: Node) -> list[Row]:
    role = node.ncfg.role
    rows: list[Row] = []

    def row(check, ok, detail, fix=""):
        rows.append(Row(node.name, role, check, bool(ok), detail, "" if ok else fix))

    try:
        node.run(["true"], timeout=30)
    except NodeError as e:
        row("login", False, str(e), "install the controller's key in the login's ~/.ssh/authorized_keys "
                                    "and the host key in ssh.known_hosts")
        return rows
    row("login", True, f"{getattr(getattr(node, 'ssh', None), 'user', 'root')}@{node.name}")
    py = node.python_argv("x")[-3]  # the node's interpreter (ssh.python over SSH)
    r = node.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=False)
    ver = tuple(int(x) for x in r.stdout.split(".")) if r.ok else None
    row("python >= 3.10", ver is not None and ver >= MIN_PYTHON, r.stdout.strip() or r.stderr.strip() or "missing",
        "apt-get install python3 (>= 3.10), or set ssh.python to one")
    mods = ROLE_PY_MODULES.get(role, ())
    if mods and ver:
        r = node.run([py, "-c", "import importlib.util as u, sys; "
                      "print(' '.join(m for m in sys.argv[1:] if u.find_spec(m) is None))", *mods], check=False)
        missing = r.stdout.split() if r.ok else list(mods)
        row("python modules", not missing, "missing " + " ".join(missing) if missing else " ".join(mods),
            "apt-get install " + " ".join(APT_OF_MODULE[m] for m in missing))
    r = node.run(["uname", "-r"], check=False)
    row("kernel", r.ok, r.stdout.strip())
    for tool in ROLE_TOOLS.get(role, ()):
        r = node.run(["sh", "-c", 'PATH="$PATH:/usr/sbin:/sbin" command -v "$1"', "sh", tool], check=False)
        row(tool, r.ok, r.stdout.strip() or "not found", f"apt-get install {APT_OF_TOOL.get(tool, tool)}")
    if _sudo_needed(node):
        cmds = dpu_sudo_commands(cfg) if role == "dpu" else ["/usr/sbin/bpftool", "/usr/bin/kill"]
        # a command the printed rule allows (kill -0: signal nothing): `sudo -n true` still asked for
        # the password once that rule was installed, since the rule does not name true
        r = node.run(sudo_argv(["kill", "-0", "1"]), check=False)
        row("sudo -n", r.ok, "ok" if r.ok else (r.stderr.strip().splitlines() or ["refused"])[-1],
            sudoers_fix(node.ssh.user, cmds))
    r = node.run(["ip", "-j", "addr", "show"], check=False)
    links = {link["ifname"]: link for link in json.loads(r.stdout or "[]")} if r.ok else {}
    for i in node.ncfg.interfaces:
        link = links.get(i.name)
        row(f"interface {i.name}", link is not None, "present" if link else "missing",
            f"rename or configure it, or fix nodes.{node.name}.interfaces in {cfg.path}")
        if link is not None and i.ip:
            addrs = {f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])}
            row(f"address {i.ip}", str(i.ip) in addrs, ", ".join(sorted(addrs)) or "none",
                f"ip addr add {i.ip} dev {i.name}")
    if role == "loadgen":
        rows += _check_trex(cfg, node)
    if role == "dpu":
        rows += _check_dpu(cfg, node)
    return rows


APT_OF_TOOL = {"bpftool": "bpftool (or linux-tools-$(uname -r))", "ovs-vsctl": "openvswitch-switch",
               "ovs-ofctl": "openvswitch-switch", "pkg-config": "pkg-config", "meson": "meson",
               "ninja": "ninja-build"}


def _check_trex(cfg, node: Node) -> list[Row]:
    """TRex's install (traffic.trex.daemon.path) and /etc/trex_cfg.yaml's ports."""
    import yaml
    t = (cfg.section("traffic").get("trex") or {})
    d = t.get("daemon") or {}
    out = []
    path = d.get("path")
    if path:
        r = node.run(["test", "-x", f"{path}/t-rex-64"], check=False)
        out.append(Row(node.name, "loadgen", "trex install", r.ok, f"{path}/t-rex-64",
                       "" if r.ok else f"unpack trex {t.get('version', '')} into {path} (traffic.trex.daemon.path)"))
    r = node.run(["cat", "/etc/trex_cfg.yaml"], check=False)
    ports = list(t.get("ports") or [0])
    if not r.ok:
        out.append(Row(node.name, "loadgen", "/etc/trex_cfg.yaml", False, "missing",
                       f"cd {path or '<trex>'} && sudo ./dpdk_setup_ports.py -i  (writes /etc/trex_cfg.yaml)"))
        return out
    try:
        doc = yaml.safe_load(r.stdout)
        ifs = (doc[0] if isinstance(doc, list) else doc).get("interfaces") or []
    except (yaml.YAMLError, AttributeError, KeyError, IndexError, TypeError) as e:
        out.append(Row(node.name, "loadgen", "/etc/trex_cfg.yaml", False, f"unreadable: {e}",
                       "rewrite it: ./dpdk_setup_ports.py -i"))
        return out
    ok = len(ifs) > max(ports)
    out.append(Row(node.name, "loadgen", "/etc/trex_cfg.yaml ports", ok,
                   f"{len(ifs)} interfaces ({', '.join(map(str, ifs))}); traffic.trex.ports {ports}",
                   "" if ok else f"list at least {max(ports) + 1} interfaces in /etc/trex_cfg.yaml"))
    return out


def _check_dpu(cfg, node: Node) -> list[Row]:
    """DOCA's version, the PFs' eSwitch mode, OVS's bridges (read-only)."""
    sec = cfg.section("xenoflow")
    pcp = ":".join((sec.get("build_env") or {}).get("pkg_config_path") or [])
    out = []
    r = node.run(["env", f"PKG_CONFIG_PATH={pcp}", "pkg-config", "--modversion", "doca-flow"], check=False)
    out.append(Row(node.name, "dpu", "DOCA (doca-flow)", r.ok, r.stdout.strip() or "not found",
                   "" if r.ok else "install the DOCA SDK of the BFB (doca-sdk-flow), or fix "
                                   "xenoflow.build_env.pkg_config_path"))
    for i in node.ncfg.interfaces:
        if not i.pci:
            continue
        pci = i.pci if i.pci.count(":") == 2 else f"0000:{i.pci}"
        r = node.run(["devlink", "dev", "eswitch", "show", f"pci/{pci}"], check=False)
        mode = r.stdout.split("mode", 1)[1].split()[0] if r.ok and "mode" in r.stdout else ""
        out.append(Row(node.name, "dpu", f"eSwitch mode {i.name} ({pci})", bool(mode),
                       mode or (r.stderr.strip() or "unknown"),
                       "" if mode else f"mlxconfig -d {pci} q  (check INTERNAL_CPU_MODEL; devlink needs iproute2)"))
    ovs = sec.get("ovs")
    if ovs:
        argv = sudo_argv(["ovs-vsctl", "list-br"]) if _sudo_needed(node) else ["ovs-vsctl", "list-br"]
        r = node.run(argv, check=False)
        have = r.stdout.split()
        if sudo_refused(r):
            detail, fix = "sudo asks for a password", sudoers_fix(node.ssh.user, dpu_sudo_commands(cfg))
        else:
            detail = f"bridges: {', '.join(have) or 'none'}" if r.ok else (r.stderr.strip() or "ovs-vsctl failed")
            fix = (f"systemctl start openvswitch-switch; or set xenoflow.ovs.bridge to one of "
                   f"{', '.join(have) or 'the bridges'}")
        ok = r.ok and ovs["bridge"] in have
        out.append(Row(node.name, "dpu", f"OVS bridge {ovs['bridge']}", ok, detail, "" if ok else fix))
    return out


# --- the command ----------------------------------------------------------------------------
def deploy(testbed) -> tuple[list[dict], list[Row]]:
    """Ship to every node, then check every node. (shipments, rows)."""
    cfg = testbed.cfg
    shipped = []
    for n in testbed.nodes():
        if n.deploy_dir is not None:
            shipped.append(deploy_node(cfg, n))
            if n.ncfg.role == "dpu" and cfg.section("xenoflow"):
                from .lb.xenoflow import XenoFlowLB
                lb = XenoFlowLB(testbed)
                if lb.mode == "doca":
                    shipped.append({"node": n.name, "what": "xenoflow source", "copied": lb.ship_source(n)})
    rows = [r for n in testbed.nodes() for r in check_node(cfg, n)]
    return shipped, rows


def table(rows: list[Row]) -> str:
    """One table: node, role, check, ready/missing, detail, and the fix of a missing one."""
    head = ("node", "role", "check", "status", "detail", "fix")
    body = [(r.node, r.role, r.check, "ready" if r.ready else "MISSING", r.detail, r.fix) for r in rows]
    w = [max(len(x[i]) for x in [head, *body]) for i in range(5)]
    lines = ["  ".join(c.ljust(w[i]) if i < 5 else c for i, c in enumerate(x)).rstrip() for x in [head, *body]]
    return "\n".join(lines)


def purge(testbed) -> list[str]:
    """Remove what deploy placed on the SSH nodes (`testbed down --purge`); the nodes purged."""
    out = []
    for n in testbed.nodes():
        if n.deploy_dir is not None:
            try:
                if n.remove_deployed():
                    out.append(n.name)
                if getattr(getattr(n, "ssh", None), "user", None) == "root":
                    # the agents' pin directory (Testbed.bpffs_dir) outlives them on the node's bpffs
                    n.run(["rm", "-rf", "--", str(testbed.bpffs_dir)], check=False)
                if n.ncfg.role == "dpu" and cfg_has_xenoflow(testbed.cfg):
                    sec = testbed.cfg.section("xenoflow")
                    src, build = sec.get("remote_src"), sec.get("build_dir")
                    if src:
                        # the build directory too, and their parent once empty (xenobench-xenoflow/)
                        n.run(["sh", "-c", 'rm -rf -- "$1" "$1.tar.gz" ${2:+"$2"}; for d in "$1" $2; do '
                               'p=$(dirname -- "$d"); [ "$p" = . ] || rmdir -- "$p" 2>/dev/null; done; true',
                               "sh", src, build or ""], check=False)
            except NodeError:
                continue
    return out


def cfg_has_xenoflow(cfg) -> bool:
    return bool(cfg.section("xenoflow"))


def describe(shipped: list[dict]) -> list[str]:
    """One line per shipment: what, where, copied or already there."""
    out = []
    for s in shipped:
        what = s.get("what") or f"agents {s.get('hash') or ''}".strip()
        state = s.get("note") or ("copied" if s["copied"] else "already there, nothing copied")
        out.append(f"{s['node']}: {what}: {state}")
    return out
