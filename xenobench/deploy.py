"""`xenobench deploy`: ship to each node of an SSH testbed what its role needs, from the
controller (lab hosts are often offline: nothing is installed from the internet on the nodes),
and check what the operator must provide.

What is shipped, per node, as ONE artefact: the node-side agents (xenobench/agents, which import
only xenobench.errors and xenobench.backends of the harness: tests/test_layout.py) and the BPF
objects built for the node's role, in the repository's layout, so that the agents' REPO_ROOT
(the parent of the package) is the artefact's directory and finds the objects there. It is a
gzip'd tarball whose name is the SHA-256 of its files (paths and contents), unpacked on the node
under Node.deploy_dir/<hash>, `current` linking to it; a node that already holds <hash>
gets nothing copied. The DPU gets XenoFlow's source (XenoFlowLB.ship_source), content-addressed
the same way, and builds it as the login (XenoFlowLB.build); what runs as root there is only what
the operator installs root-owned (xenobench.dpu: the build, the start/signal helper, the rule with
exact arguments), which the checks name. Namespace nodes share this machine's tree: nothing to ship.

The checks (check_node) read, never change: one Row per (node, check), ready or missing, and the
command that fixes a missing one."""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from dataclasses import dataclass

from . import REPO_ROOT, dpu
from .shipping import AGENT_MODULES, ROLE_OBJECTS, artefact_files, build_artefact, deployed_mismatch  # noqa: F401
from .errors import NodeError, XenobenchError
from .experiments import left_out
from .lb.inhardware import parse_hw_offload
from .lb.xenoflow import IMPLEMENTED_PORT_MODELS, XenoFlowLB
from .agents.bpf import BPF_FS_MAGIC, BPFFS_FIX
from .nodes import Node
from .nodes.base import sudo_argv, sudo_refused
from .testbed.base import uses_lb
from .testbed.bpffs import BPFFS

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
    #: ready, but with a risk the operator should know of (printed CHECK; deploy goes on); `fix`
    #: then says how to check it
    caution: bool = False


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


#: what a host's non-root login runs as root (the agents' bpftool, stopping what runs as root)
HOST_SUDO_COMMANDS = [["/usr/sbin/bpftool"], ["/usr/bin/kill"]]


def dpu_sudo_commands(cfg, node: Node | None = None, home: str | None = None) -> list[list[str]]:
    """Every command the DPU's login runs as root, exactly (xenobench.dpu.root_commands): the rule
    deploy prints. `home`: the login's working directory (absolute; asked of `node` if not given)."""
    return dpu.root_commands(cfg, home or node.run(["pwd"]).stdout.strip())


def sudo_rule_fix(cfg, node: Node) -> str:
    """The fix of a missing or incomplete sudo rule on `node`: the root-owned programs to install
    (the DPU), then the rule, every value quoted for the shell."""
    user = node.ssh.user
    if node.ncfg.role != "dpu":
        return dpu.sudoers_fix(user, HOST_SUDO_COMMANDS)
    home = node.run(["pwd"]).stdout.strip()
    return " && ".join([*dpu.install_commands(cfg, home), dpu.sudoers_fix(user, dpu_sudo_commands(cfg, home=home))])


def check_node(cfg, node: Node) -> list[Row]:
    """Every check of one node; a failure part-way (the connection lost, a command timing out) is a
    row of its own, so that the other nodes are checked and the whole table printed."""
    try:
        return _check_node(cfg, node)
    except XenobenchError as e:
        return [Row(node.name, node.ncfg.role, "checks", False, str(e), "run `xenobench deploy --check-only` again")]


def _check_node(cfg, node: Node) -> list[Row]:
    role = node.ncfg.role
    rows: list[Row] = []

    def row(check, ok, detail, fix=""):
        rows.append(Row(node.name, role, check, bool(ok), detail, "" if ok else fix))

    try:
        node.run(["true"], timeout=30)
    except NodeError as e:
        row("login", False, str(e), login_fix(cfg, node, str(e)))
        return rows
    row("login", True, f"{getattr(getattr(node, 'ssh', None), 'user', 'root')}@{node.name}")
    py = node.python_argv("x")[0]  # the node's interpreter (ssh.python over SSH)
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
    if "bpftool" in ROLE_TOOLS.get(role, ()):  # its agents pin programs and maps under /sys/fs/bpf
        rows.append(bpffs_row(node.name, role, node.run(["stat", "-f", "-c", "%t %T", str(BPFFS)], check=False)))
    if _sudo_needed(node):
        rows += _check_sudo(cfg, node)
    r = node.run(["ip", "-j", "addr", "show"], check=False)
    links = {link["ifname"]: link for link in json.loads(r.stdout or "[]")} if r.ok else {}
    for i in node.ncfg.interfaces:
        link = links.get(i.name)
        row(f"interface {i.name}", link is not None, "present" if link else "missing",
            f"rename or configure it, or fix nodes.{node.name}.interfaces in {cfg.path}")
        if link is not None and i.ip:
            addrs = {f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])}
            row(f"address {i.ip}", str(i.ip) in addrs, ", ".join(sorted(addrs)) or "none",
                f"ip addr add {i.ip} dev {shlex.quote(i.name)}")
    if role == "loadgen":
        rows += _check_trex(cfg, node)
    if role == "dpu":
        rows += _check_dpu(cfg, node)
    return rows


def bpffs_row(node_name: str, role: str, r) -> Row:
    """Whether /sys/fs/bpf is a BPF file system, from `stat -f -c '%t %T' /sys/fs/bpf` on the node
    (an unmounted one is a sysfs directory where no pin can be made)."""
    magic, _, name = r.stdout.strip().partition(" ") if r.ok else ("", "", "")
    try:
        ok = int(magic, 16) == BPF_FS_MAGIC
    except ValueError:
        ok = False
    detail = (f"{name} (0x{magic})" if magic else (r.stderr.strip() or "unreadable")) + ("" if ok else ", not bpf")
    return Row(node_name, role, f"bpffs {BPFFS}", ok, "bpf_fs" if ok else detail, "" if ok else BPFFS_FIX)


def _check_sudo(cfg, node: Node) -> list[Row]:
    """Whether the login may run each command of the printed rule, exactly, as root without a
    password: the policy's listing (`sudo -n -l`, running nothing) read by dpu.nopasswd_commands.
    A rule installed for another config (queues, MAC, home changed) lacks the new command: MISSING
    with the fix, where asking sudo per command would say yes through a password entry."""
    role = node.ncfg.role
    cmds = dpu_sudo_commands(cfg, node) if role == "dpu" else HOST_SUDO_COMMANDS
    r = node.run(sudo_argv(["-l"]), check=False)
    allowed = dpu.nopasswd_commands(r.stdout) if r.ok else set()
    why = ("not in a NOPASSWD entry of `sudo -n -l`" if r.ok else
           (r.stderr.strip().splitlines() or ["sudo -n -l failed"])[-1])
    refused = [a for a in cmds if "ALL" not in allowed and dpu.sudoers_command(a) not in allowed]
    ok = not refused
    detail = (f"all {len(cmds)} commands of the rule allowed" if ok else
              f"{len(refused)} of {len(cmds)} not allowed ({why}), first `{shlex.join(refused[0])}`")
    rows = [Row(node.name, role, "sudo -n (the rule)", ok, detail, "" if ok else sudo_rule_fix(cfg, node))]
    if role == "dpu" and (cfg.section("xenoflow") or {}).get("mode") == "doca":
        rows += _check_root_owned(cfg, node)
    return rows


def _check_root_owned(cfg, node: Node) -> list[Row]:
    """The rule's programs must be root's and writable by root only (with their directories), and
    the installed XenoFlow must be the build the login made: otherwise the login could change
    what runs as root."""
    progs = sorted({a[0] for a in dpu_sudo_commands(cfg, node)})
    script = ('for p in "$@"; do for f in "$p" "${p%/*}"; do if [ ! -e "$f" ]; then echo "$f missing"; else '
              'm=$(stat -Lc "%u %a" -- "$f"); u=${m% *}; a=${m#* }; '
              'if [ "$u" != 0 ] || [ $(( 0$a & 022 )) != 0 ]; then echo "$f uid $u mode $a"; fi; fi; done; done')
    r = node.run(["sh", "-c", script, "sh", *progs], check=False)
    bad = [ln for ln in r.stdout.splitlines() if ln.strip()]
    home = node.run(["pwd"]).stdout.strip()
    out = [Row(node.name, "dpu", "root-owned programs of the rule", not bad,
               "; ".join(bad) if bad else f"{len(progs)} programs, root's, writable by root only",
               "" if not bad else " && ".join(dpu.install_commands(cfg, home)))]
    build = dpu.on_node(home, cfg.section("xenoflow").get("build_dir") or "xenobench-xenoflow/build") + "/xenoflow"
    c = node.run(["cmp", "--", build, dpu.BINARY], check=False)
    no_build = f"{build}: No such file" in c.stderr
    if c.ok:
        detail = f"{dpu.BINARY} is the build {build}"
    elif no_build:
        detail = f"nothing built at {build}"
    elif f"{dpu.BINARY}: No such file" in c.stderr:
        detail = f"{dpu.BINARY} is not installed (the login built {build})"
    else:
        detail = f"{dpu.BINARY} is not this build ({build})" if c.returncode == 1 else c.stderr.strip()
    fix = "" if c.ok else (("`xenobench deploy` (it builds XenoFlow as the login), then: " if no_build else "")
                           + dpu.install_commands(cfg, home)[0])
    out.append(Row(node.name, "dpu", "XenoFlow installed", c.ok, detail, fix))
    return out


def login_fix(cfg, node: Node, error: str) -> str:
    """What to do about a login that failed, by what failed."""
    ssh = getattr(node, "ssh", None)
    if ssh is None:
        return f"check the node's namespace (`xenobench testbed up --config {cfg.path}`)"
    if "Failed to use ssh.workdir" in error:
        return f"nodes.{node.name}.ssh.workdir in {cfg.path}: a directory only {ssh.user} can write (see the detail)"
    if "the host key changed" in error:
        host = ssh.host if ssh.port == 22 else f"[{ssh.host}]:{ssh.port}"
        path = ssh.known_hosts or "~/.ssh/known_hosts"
        return (f"after comparing the offered fingerprint with {node.name}'s console: ssh-keygen -R "
                f"{shlex.quote(host)} -f {shlex.quote(path)} && ssh-keyscan -p {ssh.port} {shlex.quote(ssh.host)} "
                f">> {shlex.quote(path)}")
    if "not in" in error and "known_hosts" in error or "accept_unknown_host_keys" in error:
        return (f"add the host's key to {ssh.known_hosts or '~/.ssh/known_hosts'} after comparing its fingerprint "
                f"with the node's console")
    if "did not answer" in error or "refused" in error.lower() or "timed out" in error or "No route" in error:
        return (f"start or unblock sshd on {node.name} ({ssh.host} port {ssh.port}): `systemctl status ssh` on its "
                f"console; check nodes.{node.name}.ssh.host/port in {cfg.path}")
    if "Authentication failed" in error or "authentication" in error.lower():
        return (f"install the controller's key ({ssh.key or 'the agent’s keys'}) in ~{ssh.user}/.ssh/authorized_keys "
                f"on {node.name}")
    return ("install the controller's key in the login's ~/.ssh/authorized_keys and the host key in "
            "ssh.known_hosts")


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
                       f"cd {shlex.quote(path) if path else '<trex>'} && sudo ./dpdk_setup_ports.py -i  "
                       "(writes /etc/trex_cfg.yaml)"))
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


# --- the DPU preflight ----------------------------------------------------------------------
#: where a BlueField image keeps the DOCA version when pkg-config cannot say: the DOCA samples'
#: meson.build read it (NVIDIA-DOCA/doca-samples applications/VERSION, "2.9.0072" for 2.9; the
#: authors' later gespel/XenoFlow meson.build reads /opt/mellanox/doca/applications/VERSION)
DOCA_VERSION_FILE = "/opt/mellanox/doca/applications/VERSION"
#: the DOCA versions XenoFlow builds with: one meson version constraint per line (lb/meson.build
#: checks the same file)
DOCA_VERSIONS_FILE = REPO_ROOT / "lb" / "doca_versions.txt"

#: eSwitch mode each port model works with, and why (the reason a mismatch is reported with)
PORT_MODEL_ESWITCH = {
    "vnf-hairpin": ("legacy", "hairpin is not supported with the PF in switchdev mode (DPDK 22.11 "
                              "doc/guides/nics/mlx5.rst, Limitations: \"Hairpin in switchdev SR-IOV mode is not "
                              "supported till now\")"),
    "switch": ("switchdev", "DOCA Flow switch mode works on the eSwitch's representors, which exist only in "
                            "switchdev mode (DOCA 2.9 \"DOCA Switching\")"),
}


def parse_eswitch_mode(text: str) -> str | None:
    """The mode of `devlink dev eswitch show pci/...`: "pci/0000:03:00.0: mode switchdev inline-mode
    none encap-mode basic" → "switchdev" (the format of the kernel's devlink-eswitch-attr.rst)."""
    m = re.search(r"(?:^|\s)mode\s+(\S+)", text)
    return m.group(1) if m else None


def _vtuple(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in re.findall(r"[0-9]+|[A-Za-z]+", v))


def version_ok(version: str, constraint: str) -> bool:
    """A meson-style constraint (">=2.9.0", "<3.0.0", "==2.9.0072") against a version; numeric
    components compare as numbers (2.9.0072 is 2.9.72), as meson's version_compare does."""
    m = re.fullmatch(r"\s*(>=|<=|==|!=|>|<)?\s*(\S+)\s*", constraint)
    if not m:
        raise ValueError(f"bad version constraint {constraint!r}")
    op, want = m.group(1) or "==", _vtuple(m.group(2))
    have = _vtuple(version)
    width = max(len(have), len(want))
    have, want = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
    return {">=": have >= want, "<=": have <= want, "==": have == want, "!=": have != want,
            ">": have > want, "<": have < want}[op]


def doca_supported() -> list[str]:
    return [ln.strip() for ln in DOCA_VERSIONS_FILE.read_text().splitlines() if ln.strip()]


def doca_row(node_name: str, modversion: str | None, emulation: str | None, version_file: str | None,
             pcp: str) -> Row:
    """The DOCA row from what the DPU answered: `pkg-config --modversion doca-flow` (None: no
    doca-flow module), its `emulation` variable (lb/emu installed as the SDK), the version file."""
    supported = doca_supported()
    rng = " ".join(supported)
    if modversion is None:
        seen = f"; {DOCA_VERSION_FILE} says {version_file}" if version_file else ""
        return Row(node_name, "dpu", "DOCA (doca-flow)", False, f"pkg-config finds no doca-flow{seen}",
                   f"install the DOCA SDK {rng} (the BFB's doca-sdk-flow), or put its pkgconfig directory in "
                   f"xenoflow.build_env.pkg_config_path (now {pcp or 'empty'})")
    what = f"{modversion} (pkg-config doca-flow{', the emulation ' + emulation if emulation else ''})"
    if all(version_ok(modversion, c) for c in supported):
        return Row(node_name, "dpu", "DOCA (doca-flow)", True, f"{what}: supported ({rng})")
    return Row(node_name, "dpu", "DOCA (doca-flow)", False, f"{what}: not supported (XenoFlow builds with {rng})",
               f"install DOCA {rng} (the DOCA 2.9 BFB; 3.0 removed doca_flow_shared_resource_cfg.domain), or "
               f"put its pkgconfig directory first in xenoflow.build_env.pkg_config_path")


def eswitch_row(node_name: str, ifname: str, pci: str, mode: str | None, error: str, port_model: str,
                fix: str | None = None) -> Row:
    """One PF's eSwitch mode and whether xenoflow.port_model works with it; `fix`: what to do when
    the read itself was refused (sudo's rule), instead of checking the address."""
    check = f"eSwitch mode {ifname} ({pci})"
    if mode is None:
        return Row(node_name, "dpu", check, False, error or "unknown",
                   fix or f"sudo devlink dev eswitch show {shlex.quote('pci/' + pci)}  (iproute2's devlink; check the PCI address in "
                          f"nodes.<dpu>.interfaces[].pci)")
    want, why = PORT_MODEL_ESWITCH[port_model]
    if mode == want:
        return Row(node_name, "dpu", check, True, f"{mode} (xenoflow.port_model {port_model}: compatible)")
    if port_model == "vnf-hairpin" and mode == "switchdev":
        # a risk, not a refusal: the thesis's published numbers were measured with vnf-hairpin on a
        # BlueField-3 in DPU mode (its OVS rule on pf1hpf needs the representors of switchdev), so
        # the real stack ran it there whatever the mlx5 guide's limitation says
        return Row(node_name, "dpu", check, True,
                   f"{mode} (xenoflow.port_model {port_model}: {why}; the thesis's numbers were measured this way)",
                   "after `xenobench lb start --lb xenoflow`, check that frames cross: `xenobench lb stats --lb "
                   "xenoflow` counts per class after traffic (xenoflow.port_model: switch, the model for switchdev "
                   "PFs, is not implemented in lb/src yet; DPU mode keeps the Arm PFs in switchdev, \"must not be "
                   "changed\", DOCA Switching)", caution=True)
    fix = ("devlink dev eswitch set pci/{pci} mode legacy  (a NIC-mode BlueField; in DPU mode keep switchdev and "
           "use the other port model)" if want == "legacy" else f"devlink dev eswitch set pci/{pci} mode switchdev")
    return Row(node_name, "dpu", check, False, f"{mode} (xenoflow.port_model {port_model}: {why})",
               fix.format(pci=pci))


def parse_link_states(ip_json: str) -> dict[str, str]:
    """`ip -j link show` → {ifname: operstate} ("UP", "DOWN", "UNKNOWN", ...)."""
    try:
        return {ln["ifname"]: ln.get("operstate", "UNKNOWN") for ln in json.loads(ip_json or "[]")}
    except (ValueError, KeyError, TypeError):
        return {}


def link_row(node_name: str, ifname: str, states: dict[str, str]) -> Row:
    st = states.get(ifname)
    ok = st == "UP"
    return Row(node_name, "dpu", f"link {ifname}", ok, f"operstate {st}" if st else "missing",
               "" if ok else f"ip link set {shlex.quote(ifname)} up; check the cable and the switch port "
                             f"(`ethtool {shlex.quote(ifname)}`: Link detected)")


def hugepages_row(node_name: str, hp: dict | None, nr: int | None, free: int | None) -> Row:
    """Hugepages of the configured size (xenoflow.hugepages; 2048 kB when not configured): the
    kernel's count and free pages (sysfs). With xenoflow.hugepages the start step reserves them."""
    size = int((hp or {}).get("size_kb", 2048))
    check = f"hugepages {size} kB"
    if nr is None:
        return Row(node_name, "dpu", check, False, f"no /sys/kernel/mm/hugepages/hugepages-{size}kB",
                   "use a page size the kernel offers (xenoflow.hugepages.size_kb: 2048 or 1048576)")
    have = f"{nr} reserved, {free} free"
    if hp:
        need = int(hp["count"])
        return Row(node_name, "dpu", check, True,
                   f"{have}; the start step reserves {need} (xenoflow.hugepages.count)")
    return Row(node_name, "dpu", check, nr > 0, f"{have}; xenoflow.hugepages is null (nothing reserved at start)",
               "" if nr > 0 else f"set xenoflow.hugepages (count, size_kb) in the config, or "
                                 f"echo 2048 | sudo tee /sys/kernel/mm/hugepages/hugepages-{size}kB/nr_hugepages")


def _check_dpu(cfg, node: Node) -> list[Row]:
    """DOCA's version (supported?), each PF's eSwitch mode (does xenoflow.port_model work with
    it?), the PFs' link state, hugepages, OVS's bridges. Read-only."""
    sec = cfg.section("xenoflow")
    model = sec.get("port_model", "vnf-hairpin")
    pcp = ":".join((sec.get("build_env") or {}).get("pkg_config_path") or [])
    out = []
    pc = ["env", f"PKG_CONFIG_PATH={pcp}", "pkg-config"]
    r = node.run([*pc, "--modversion", "doca-flow"], check=False)
    modversion = r.stdout.strip() if r.ok and r.stdout.strip() else None
    emulation = None
    if modversion:
        e = node.run([*pc, "--variable=emulation", "doca-flow"], check=False)
        emulation = e.stdout.strip() if e.ok else None
    v = node.run(["cat", DOCA_VERSION_FILE], check=False)
    out.append(doca_row(node.name, modversion, emulation or None,
                        v.stdout.strip() if v.ok and v.stdout.strip() else None, pcp))
    out.append(Row(node.name, "dpu", "xenoflow.port_model", model in IMPLEMENTED_PORT_MODELS, model,
                   "" if model in IMPLEMENTED_PORT_MODELS else
                   f"{model} is not implemented in lb/src yet; xenoflow.port_model: vnf-hairpin in {cfg.path}"))
    lk = node.run(["ip", "-j", "link", "show"], check=False)
    states = parse_link_states(lk.stdout) if lk.ok else {}
    for i in node.ncfg.interfaces:
        if i.pci:
            # devlink's eswitch-get is for CAP_NET_ADMIN only: through the rule's exact command
            argv = dpu.devlink_eswitch(i.pci)
            r = node.run(sudo_argv(argv) if _sudo_needed(node) else argv, check=False)
            mode = parse_eswitch_mode(r.stdout) if r.ok else None
            err = r.stderr.strip()
            fix = (sudo_rule_fix(cfg, node) if sudo_refused(r) else
                   f"run it as root (the rule `xenobench deploy` prints allows `{shlex.join(argv)}`)"
                   if "not permitted" in err else None)
            out.append(eswitch_row(node.name, i.name, dpu.pci_address(i.pci), mode, err, model, fix))
        if i.lb_port:
            out.append(link_row(node.name, i.name, states))
    hp = sec.get("hugepages")
    d = f"/sys/kernel/mm/hugepages/hugepages-{int((hp or {}).get('size_kb', 2048))}kB"
    r = node.run(["cat", f"{d}/nr_hugepages", f"{d}/free_hugepages"], check=False)
    nums = r.stdout.split() if r.ok else []
    nr, free = (int(nums[0]), int(nums[1])) if len(nums) == 2 and all(x.isdigit() for x in nums) else (None, None)
    out.append(hugepages_row(node.name, hp, nr, free))
    ovs = sec.get("ovs")
    if ovs:
        argv = dpu.ovs_commands(cfg)["check"][0]
        r = node.run(sudo_argv(argv) if _sudo_needed(node) else argv, check=False)
        have = r.stdout.split()
        if sudo_refused(r):
            detail, fix = "sudo asks for a password", sudo_rule_fix(cfg, node)
        else:
            detail = f"bridges: {', '.join(have) or 'none'}" if r.ok else (r.stderr.strip() or "ovs-vsctl failed")
            fix = "systemctl start openvswitch-switch (is Open vSwitch running?)"
            if r.ok and ovs["bridge"] not in have:
                held = dpu.port_bridges(cfg, lambda a: node.run(sudo_argv(a) if _sudo_needed(node) else a, check=False))
                fix = dpu.bridge_fix(cfg, have, held)
        ok = r.ok and ovs["bridge"] in have
        out.append(Row(node.name, "dpu", f"OVS bridge {ovs['bridge']}", ok, detail, "" if ok else fix))
        argv = dpu.ovs_hw_offload_get()
        r = node.run(sudo_argv(argv) if _sudo_needed(node) else argv, check=False)
        out.append(hw_offload_row(node.name, r, sudo_rule_fix(cfg, node) if sudo_refused(r) else None))
        reads = [node.run(sudo_argv(a) if _sudo_needed(node) else a, check=False) for a in dpu.ovs_flavour_gets()]
        out.append(ovs_flavour_row(node.name, *reads,
                                   refused_fix=sudo_rule_fix(cfg, node) if any(map(sudo_refused, reads)) else None))
    return out


def ovs_flavour_row(node_name: str, doca_init, pmd_mask, refused_fix: str | None = None) -> Row:
    """Which OVS forwards on the DPU, from `ovs-vsctl get` of other_config:doca-init and
    pmd-cpu-mask (run through the rule): OVS-DOCA's PMD threads keep their cores busy in every trial,
    so the in-hardware check leaves those cores out (xenobench.lb.inhardware.ovs_flavour). Ready
    either way; OVS-DOCA without a mask is named, since its PMD cores are then not known and no
    core's load is judged."""
    check = "OVS flavour"
    if refused_fix is not None:
        return Row(node_name, "dpu", check, False, "sudo asks for a password", refused_fix)
    doca, err = parse_hw_offload(doca_init.returncode, doca_init.stdout, doca_init.stderr)
    if doca is None:
        return Row(node_name, "dpu", check, False, f"unreadable: {err}", "systemctl start openvswitch-switch")
    if doca != "true":
        return Row(node_name, "dpu", check, True, f"kernel datapath ({dpu.OVS_DOCA_INIT_KEY}={doca})")
    mask = pmd_mask.stdout.strip().strip('"') if pmd_mask.returncode == 0 else ""
    if mask:
        return Row(node_name, "dpu", check, True, f"OVS-DOCA, PMD cores {mask} ({dpu.OVS_PMD_MASK_KEY}): left "
                   "out of the in-hardware check's core load")
    return Row(node_name, "dpu", check, True, f"OVS-DOCA, {dpu.OVS_PMD_MASK_KEY} unset: the in-hardware check "
               "judges the frames that reach the Arm's kernel, not the cores' load (set the mask to judge both)")


def hw_offload_row(node_name: str, r, refused_fix: str | None = None) -> Row:
    """OVS's hardware offload from `ovs-vsctl get Open_vSwitch . other_config:hw-offload` (`r`, run
    through the rule): "true", or the traffic OVS forwards passes through the Arm cores (thesis §6.1;
    NVIDIA DOCA 2.9 "Virtual Switch on BlueField", Enabling OVS HW Offloading); every XenoFlow
    trial reads it again (xenobench.lb.inhardware). `refused_fix`: sudo asked for a password."""
    check = "OVS hw-offload"
    if refused_fix is not None:
        return Row(node_name, "dpu", check, False, "sudo asks for a password", refused_fix)
    value, err = parse_hw_offload(r.returncode, r.stdout, r.stderr)
    if value == "true":
        return Row(node_name, "dpu", check, True, f"{dpu.OVS_HW_OFFLOAD_KEY}=true")
    detail = (f"{dpu.OVS_HW_OFFLOAD_KEY}={value}: OVS forwards in software on the Arm cores (thesis §6.1)"
              if value is not None else f"unreadable: {err}")
    return Row(node_name, "dpu", check, False, detail,
               dpu.ovs_hw_offload_fix() if value is not None else "systemctl start openvswitch-switch")


# --- the command ----------------------------------------------------------------------------
def deploy(testbed) -> tuple[list[dict], list[Row]]:
    """Ship to every node, then check every node: a node that cannot be reached or fails its
    shipment is a row of the table, and the other nodes are shipped and checked all the same.
    (shipments, rows)."""
    cfg = testbed.cfg
    shipped, failed = [], []
    for n in testbed.nodes():
        if n.deploy_dir is None:
            continue
        try:
            shipped.append(deploy_node(cfg, n))
            if n.ncfg.role == "dpu" and cfg.section("xenoflow"):
                lb = XenoFlowLB(testbed)
                if lb.mode == "doca":
                    shipped.append({"node": n.name, "what": "xenoflow source", "copied": lb.ship_source(n)})
                    built = lb.build(n)  # as the login; the operator installs the result (the rule's program)
                    shipped.append({"node": n.name, "what": "xenoflow build", "copied": built,
                                    "note": "built as the login" if built else "up to date"})
        except XenobenchError as e:
            # a copy that failed without SFTP too (xenobench.nodes.ssh: SshNode.put) names its fix first
            fix = ("add `Subsystem sftp internal-sftp` to the node's sshd_config and reload sshd, or fix what the "
                   "copy reported (the detail)" if "has no `Subsystem sftp`" in str(e) else
                   "see the node's other rows (login, disk space under ssh.workdir)")
            failed.append(Row(n.name, n.ncfg.role, "shipment", False, str(e), fix))
    rows = failed + [r for n in testbed.nodes() for r in check_node(cfg, n)]
    left = left_out_rows(cfg)
    rows += left
    if (uses_lb(cfg, "katran") and not any(r.check == "katran" for r in left)
            and all(r.ready for r in rows if r.check == "login")):
        # Katran's path: the site's router (katran.gateway_mac) routes IPIP to each real, which
        # decapsulates it (Testbed.check_ipip; Katran's decap is put in front for the check)
        lb = cfg.role("lb").name
        rows += [Row(lb, "lb", "IPIP via the gateway (Katran)", ok, f"{desc}: {detail}",
                     f"route each real's address to its port at the MAC katran.gateway_mac of {cfg.path} "
                     "(the switch in L3 mode), and keep bpftool on the backends for Katran's decap")
                 for desc, ok, detail in testbed.check_ipip()]
    return shipped, rows


def left_out_rows(cfg) -> list[Row]:
    """One row per LB kind the config's experiments list that its testbed cannot run (its kind's
    xenobench.lb.unavailable): "left out: <why>", the experiments it is left out of and the fix. A
    CHECK, not a MISSING: the plan leaves its points out (xenobench.experiments.left_out) and the
    rest of the study runs."""
    by: dict[str, list] = {}
    for x in left_out(cfg):
        by.setdefault(x.lb, []).append(x)
    node = cfg.role("lb").name
    out = []
    for kind, xs in by.items():
        why, _, fix = xs[0].reason.partition(" (fix: ")
        out.append(Row(node, "lb", kind, True, f"left out: {why}; its points of {', '.join(x.experiment for x in xs)} "
                       "are not planned", fix.removesuffix(")") or "see docs/load-balancers.md", caution=True))
    return out


#: the detail column's width; a longer detail goes on over the next lines
DETAIL_WIDTH = 72


def table(rows: list[Row]) -> str:
    """One table of every node's checks: node, role, check, ready/CHECK/MISSING, detail (wrapped at
    DETAIL_WIDTH), and a reference [n] to the row's fix (how to check a CHECK one), the fixes
    listed once each below the table, whole, so that a command copies in one piece."""
    head = ("node", "role", "check", "status", "detail", "fix")
    fixes: list[str] = []
    body = []
    for r in rows:
        ref = ""
        if r.fix:
            if r.fix not in fixes:
                fixes.append(r.fix)
            ref = f"[{fixes.index(r.fix) + 1}]"
        detail = textwrap.wrap(r.detail, DETAIL_WIDTH, break_long_words=False, break_on_hyphens=False) or [""]
        body.append(((r.node, r.role, r.check, ("CHECK" if r.caution else "ready") if r.ready else "MISSING",
                      detail[0], ref), detail[1:]))
    w = [max(len(x[i]) for x in [head, *(b for b, _ in body)]) for i in range(5)]
    lines = ["  ".join(c.ljust(w[i]) if i < 5 else c for i, c in enumerate(head)).rstrip()]
    for cols, more in body:
        lines.append("  ".join(c.ljust(w[i]) if i < 5 else c for i, c in enumerate(cols)).rstrip())
        lines += [" " * (sum(w[:4]) + 8) + d for d in more]
    if fixes:
        lines += ["", "fixes:"] + [f"[{i}] {f}" for i, f in enumerate(fixes, 1)]
    return "\n".join(lines)


def describe(shipped: list[dict]) -> list[str]:
    """One line per shipment: what, where, copied or already there."""
    out = []
    for s in shipped:
        what = s.get("what") or f"agents {s.get('hash') or ''}".strip()
        state = s.get("note") or ("copied" if s["copied"] else "already there, nothing copied")
        out.append(f"{s['node']}: {what}: {state}")
    return out
