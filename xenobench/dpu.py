"""What XenoFlow's login on the BlueField runs as root, and the sudoers rule that allows exactly
that: one owner for both, so the commands the harness runs and the rule `xenobench deploy`
prints cannot drift apart.

Least privilege (sudoers(5)): every entry is a root-owned program at an absolute path with its
exact arguments (no wildcard, no shell, nothing under a path the login can write):

- Open vSwitch: `ovs-vsctl list-br`, `ovs-vsctl br-exists BRIDGE`, per configured flow
  `ovs-ofctl [-O PROTO] add-flow BRIDGE MATCH,actions=ACTIONS` and
  `ovs-ofctl [-O PROTO] --strict del-flows BRIDGE MATCH`, and the read of OVS's hardware offload
  `ovs-vsctl get Open_vSwitch . other_config:hw-offload` (deploy's readiness row and every trial's
  xenoflow_in_hardware check: xenobench.lb.inhardware; OVS's database socket is root's);
- devlink's eSwitch read per PF (`devlink dev eswitch show pci/ADDR`): the kernel answers it to
  CAP_NET_ADMIN only (devlink's eswitch-get is an admin-perm operation, Documentation/netlink/
  specs/devlink.yaml);
- hugepages: `tee` of the one sysfs file of the configured size (the count comes on stdin) and
  `mount -t hugetlbfs -o pagesize=SIZEK nodev MOUNT` at the configured mount point;
- XenoFlow through HELPER, a root-owned script the operator installs from lb/dpu/: `HELPER start
  ARGS` writes its pid to PIDFILE (under /run, root's) and executes the root-owned XenoFlow
  binary at BINARY with ARGS, the exact arguments of the configuration; `HELPER signal NAME`
  signals only the pid in PIDFILE, and only while it is that binary.

XenoFlow is built by the login (meson and ninja need no privilege); the operator installs the
build as BINARY (install_commands), so nothing the login can change runs as root.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shlex
from pathlib import Path

#: the root-owned programs of the rule, at the paths a BlueField's Ubuntu has them (merged /usr)
OVS_VSCTL = "/usr/bin/ovs-vsctl"
OVS_OFCTL = "/usr/bin/ovs-ofctl"
DEVLINK = "/usr/sbin/devlink"
TEE = "/usr/bin/tee"
MOUNT = "/usr/bin/mount"
#: XenoFlow as the operator installs it (root-owned; install_commands)
BINARY = "/usr/local/libexec/xenobench/xenoflow"
#: the start/stop helper (lb/dpu/xenobench-xenoflow, installed root-owned)
HELPER = "/usr/local/sbin/xenobench-xenoflow"
HELPER_SOURCE = "lb/dpu/xenobench-xenoflow"  # in the repository and in xenoflow.remote_src
PIDFILE = "/run/xenobench-xenoflow.pid"
#: the signals the harness sends XenoFlow (stop: INT, TERM, KILL; stats: USR1; update: HUP)
SIGNALS = ("INT", "TERM", "KILL", "USR1", "HUP")
SUDOERS_FILE = "/etc/sudoers.d/xenobench"

# sudoers(5): in a command's arguments these characters are special and are escaped with a
# backslash; a wildcard character is escaped so that it matches only itself
_SUDOERS_SPECIAL = re.compile(r'([\\,:=!()#"*?\[\]])')


def content_hash(root: Path, files: list[str]) -> str:
    """SHA-256 over each file's path and contents: the name of an artefact shipped to a node."""
    h = hashlib.sha256()
    for f in files:
        data = (root / f).read_bytes()
        h.update(f"{f}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def _sec(cfg) -> dict:
    return cfg.section("xenoflow") or {}


def on_node(home: str, path: str) -> str:
    """A configured path (relative: under the login's working directory `home`) made absolute."""
    return posixpath.normpath(posixpath.join(home, path))


def backends_path(cfg, home: str) -> str:
    """Where XenoFlow's backends file lives on the DPU: a fixed path, so that the rule can name
    XenoFlow's exact arguments (the file is data XenoFlow parses, not a program)."""
    return on_node(home, posixpath.join(posixpath.dirname(_sec(cfg).get("remote_src") or "xenobench-xenoflow/src"),
                                        "backends.json"))


def ovs_ofctl(cfg, *args: str) -> list[str]:
    ovs = _sec(cfg).get("ovs") or {}
    proto = ["-O", ovs["openflow"]] if ovs.get("openflow") else []
    return [OVS_OFCTL, *proto, *args]


#: OVS's hardware offload switch (Open_vSwitch table, other_config:hw-offload; "true" makes OVS put
#: its datapath flows into the eSwitch: NVIDIA DOCA 2.9 "Virtual Switch on BlueField", Enabling OVS
#: HW Offloading); absent means OVS's default, false
OVS_HW_OFFLOAD_KEY = "other_config:hw-offload"


#: OVS-DOCA (other_config:doca-init=true, NVIDIA DOCA 2.9 "OVS-DOCA Hardware Acceleration"): OVS's
#: datapath on DOCA, whose PMD threads poll the cores of pmd-cpu-mask (a hexadecimal CPU mask) at
#: ~100 % in every trial, whether frames reach them or not
OVS_DOCA_INIT_KEY = "other_config:doca-init"
OVS_PMD_MASK_KEY = "other_config:pmd-cpu-mask"


def ovs_get(key: str) -> list[str]:
    """The read of one of OVS's other_config settings (exits 1 with "no key" when it was never set)."""
    return [OVS_VSCTL, "get", "Open_vSwitch", ".", key]


def ovs_hw_offload_get() -> list[str]:
    """The read of OVS's hw-offload setting (exits 1 with "no key" when it was never set)."""
    return ovs_get(OVS_HW_OFFLOAD_KEY)


def ovs_flavour_gets() -> list[list[str]]:
    """The reads that tell OVS-DOCA (doca-init, its PMD cores) from the kernel datapath's OVS."""
    return [ovs_get(OVS_DOCA_INIT_KEY), ovs_get(OVS_PMD_MASK_KEY)]


def ovs_hw_offload_fix() -> str:
    """The operator's fix of hw-offload off (as root, with the unit a BlueField's Ubuntu runs OVS
    in): OVS reads the setting at its start, hence the restart (NVIDIA DOCA 2.9 "Virtual Switch on
    BlueField", Enabling OVS HW Offloading)."""
    return (f"sudo {OVS_VSCTL} set Open_vSwitch . {OVS_HW_OFFLOAD_KEY}=true && "
            "sudo systemctl restart openvswitch-switch")


#: a port the flows name (not an OpenFlow number): in_port=NAME, output:NAME
_FLOW_PORT = re.compile(r"(?:in_port=|output:)([A-Za-z_][\w.-]*)")


def ovs_ports(cfg) -> list[str]:
    """The ports xenoflow.ovs.flows name, once each in order (OpenFlow numbers left out)."""
    flows = (_sec(cfg).get("ovs") or {}).get("flows") or ()
    return list(dict.fromkeys(p for f in flows for p in _FLOW_PORT.findall(f"{f['match']},{f['actions']}")))


def port_bridges(cfg, run) -> dict[str, str | None]:
    """The bridge each port of the flows is on (`ovs-vsctl port-to-br PORT` through `run`, argv ->
    its result: as root where the node needs it); None: on none."""
    out = {}
    for argv in ovs_commands(cfg)["ports"]:
        r = run(argv)
        out[argv[-1]] = (r.stdout.strip() or None) if r.ok else None
    return out


def bridge_fix(cfg, have: list[str], holders: dict[str, str | None]) -> str:
    """What to do when xenoflow.ovs.bridge does not exist, from the bridges there are and the bridge
    each port of the flows is on (`ovs-vsctl port-to-br`; None: on none)."""
    key = f"xenoflow.ovs.bridge in {cfg.path}"
    if not holders:  # the flows name ports by OpenFlow number only
        return f"set {key} to one of the bridges there are ({', '.join(have) or 'none'})"
    on = {b for b in holders.values() if b}
    if len(on) == 1 and all(holders.values()):
        return f"set {key} to {on.pop()} (it holds {', '.join(holders)})"
    where = "; ".join(f"{p} on {b or 'no bridge'}" for p, b in holders.items())
    return (f"set {key} to the bridge that holds the flows' ports ({where}; bridges: {', '.join(have) or 'none'}), "
            "or add them to one (ovs-vsctl add-port BRIDGE PORT)")


def ovs_commands(cfg) -> dict[str, list[list[str]]]:
    """{"check": [list-br, br-exists], "add": [...], "del": [...], "offload": [get doca-init, get
    pmd-cpu-mask, get hw-offload], "ports": [port-to-br per port the flows name]} for xenoflow.ovs
    ({} without)."""
    ovs = _sec(cfg).get("ovs")
    if not ovs:
        return {}
    br = ovs["bridge"]
    return {"check": [[OVS_VSCTL, "list-br"], [OVS_VSCTL, "br-exists", br]],
            "add": [ovs_ofctl(cfg, "add-flow", br, f"{f['match']},actions={f['actions']}") for f in ovs["flows"]],
            "del": [ovs_ofctl(cfg, "--strict", "del-flows", br, f["match"]) for f in ovs["flows"]],
            "offload": [*ovs_flavour_gets(), ovs_hw_offload_get()],
            "ports": [[OVS_VSCTL, "port-to-br", p] for p in ovs_ports(cfg)]}


def pci_address(pci: str) -> str:
    return pci if pci.count(":") == 2 else f"0000:{pci}"


def devlink_eswitch(pci: str) -> list[str]:
    return [DEVLINK, "dev", "eswitch", "show", f"pci/{pci_address(pci)}"]


def dpu_node(cfg):
    found = cfg.nodes_with_role("dpu")
    return found[0] if found else None


def hugepages_commands(cfg) -> list[list[str]]:
    """[tee nr_hugepages (the count on stdin), mount hugetlbfs] ([] without xenoflow.hugepages)."""
    hp = _sec(cfg).get("hugepages")
    if not hp:
        return []
    size = int(hp.get("size_kb", 2048))
    return [[TEE, f"/sys/kernel/mm/hugepages/hugepages-{size}kB/nr_hugepages"],
            [MOUNT, "-t", "hugetlbfs", "-o", f"pagesize={size}K", "nodev", hp.get("mount", "/dev/hugepages")]]


def xenoflow_node(cfg):
    """Where XenoFlow runs: the dpu node in DOCA mode (else, and without one, the lb node)."""
    return (dpu_node(cfg) if _sec(cfg).get("mode") == "doca" else None) or cfg.role("lb")


def xenoflow_argv(cfg, backends: str) -> list[str]:
    """XenoFlow's arguments (lb/src/main.c): the EAL's (xenoflow.device_args, default `-a` the
    ingress and egress ports), then `--` and the app's: the backends file, the egress MAC, the
    stats interval in ms, the queues, the port model."""
    sec = _sec(cfg)
    n = xenoflow_node(cfg)
    ing, eg = n.lb_port("ingress"), n.lb_port("egress")
    dev = [str(a) for a in sec.get("device_args") or []] or ["-a", ing.name, "-a", eg.name]
    return [*dev, "--", "-b", backends, "-s", eg.mac, "-i", str(int(float(sec["stats_interval_s"]) * 1000)),
            "-q", str(sec["queues"]), "-m", sec["port_model"]]


#: what XenoFlow's hash mode (kind xenoflow-hash) hashes: its -H (lb/src/hash.h XF_HASH_DEFAULT)
HASH_FIELDS = ("src_ip", "src_port")


def hash_argv(app_argv: list[str], fields=HASH_FIELDS) -> list[str]:
    """XenoFlow's arguments in hash mode: the class mode's and -H FIELDS."""
    return [*app_argv, "-H", ",".join(fields)]


def start_command(app_argv: list[str]) -> list[str]:
    """XenoFlow's start through the helper, with its exact arguments (EAL, then -- and the app's)."""
    return [HELPER, "start", *app_argv]


def signal_command(name: str) -> list[str]:
    if name not in SIGNALS:
        raise ValueError(f"signal {name!r} is not one the rule allows ({', '.join(SIGNALS)})")
    return [HELPER, "signal", name]


def root_commands(cfg, home: str) -> list[list[str]]:
    """Every command the DPU's login runs as root, exactly; `home`: the login's working directory
    (absolute), where XenoFlow's backends file is."""
    out: list[list[str]] = []
    ovs = ovs_commands(cfg)
    out += (ovs.get("check", []) + ovs.get("add", []) + ovs.get("del", []) + ovs.get("offload", [])
            + ovs.get("ports", []))
    n = dpu_node(cfg)
    for i in (n.interfaces if n is not None else []):
        if i.pci:
            out.append(devlink_eswitch(i.pci))
    out += hugepages_commands(cfg)
    argv = xenoflow_argv(cfg, backends_path(cfg, home))
    out += [start_command(argv), start_command(hash_argv(argv))]  # class mode, hash mode (xenoflow-hash)
    out += [signal_command(s) for s in SIGNALS]
    return out


def sudoers_command(argv: list[str]) -> str:
    """One command of a sudoers rule: the program and its exact arguments, sudoers' special
    characters escaped. An argument with white space cannot be matched exactly (sudo compares
    the arguments joined by spaces): refused (ValueError naming it)."""
    for a in argv:
        if not a or re.search(r"\s", a):
            raise ValueError(f"argument {a!r} of `{shlex.join(argv)}` is empty or holds white space, which a "
                             "sudoers rule cannot match exactly")
    return " ".join(_SUDOERS_SPECIAL.sub(r"\\\1", a) for a in argv)


def sudoers_rule(user: str, commands: list[list[str]]) -> str:
    """The sudoers line that lets `user` run exactly `commands` as root without a password, for a
    file in /etc/sudoers.d/ (sudoers(5): user host = (runas) NOPASSWD: command, ...)."""
    return f"{user} ALL=(root) NOPASSWD: " + ", ".join(sudoers_command(c) for c in commands)


_LISTED_ENTRY = re.compile(r"^\((?P<runas>[^)]*)\)\s*(?P<rest>.*)$")
_LISTED_TAG = re.compile(r"^(?:[A-Z_]+:\s*)+")
_UNESCAPED_COMMA = re.compile(r"(?<!\\),\s*")


def nopasswd_commands(listing: str) -> set[str]:
    """The commands a login may run as root without a password, from `sudo -n -l` (no command: the
    policy's listing), as sudoers writes them ("ALL" for any). `sudo -n -l COMMAND` cannot tell: with
    any NOPASSWD entry sudoers' listpw=any lets it say yes for every command a password-protected
    entry allows (a stock BFB's login is in group sudo: `(ALL : ALL) ALL`), so a stale rule would read
    as ready. sudo wraps long entries onto lines indented further: they are joined first."""
    entries: list[str] = []
    inside = False
    for line in listing.splitlines():
        if " may run the following commands" in line:
            inside = True
            continue
        if not inside or not line.strip():
            continue
        if line.startswith("    (") and not line.startswith("     "):
            entries.append(line.strip())
        elif line.startswith("        ") and entries:
            entries[-1] += " " + line.strip()
        elif not line.startswith(" "):
            inside = False  # another section (sudo -l prints one per matching host and user)
    out: set[str] = set()
    for e in entries:
        m = _LISTED_ENTRY.match(e)
        if not m or not any(r.strip() in ("root", "ALL") for r in m["runas"].replace(":", ",").split(",")):
            continue
        tags = _LISTED_TAG.match(m["rest"])
        tagged = tags.group(0) if tags else ""
        if "NOPASSWD:" not in tagged:
            continue
        out.update(c.strip() for c in _UNESCAPED_COMMA.split(m["rest"][len(tagged):]) if c.strip())
    return out


def sudoers_fix(user: str, commands: list[list[str]]) -> str:
    """The operator's shell command that installs sudoers_rule: written to a temporary file that
    visudo checks first, installed root-owned with mode 0440 only if it parses (a rule sudo cannot
    parse in /etc/sudoers.d breaks every sudo on the node, the recovery included); the temporary
    file removed either way. Every value is quoted for the shell (a user name or an argument from
    the config never runs as a command)."""
    return (f"t=$(mktemp) && printf '%s\\n' {shlex.quote(sudoers_rule(user, commands))} > \"$t\" && "
            f"sudo visudo -cf \"$t\" && sudo install -o root -g root -m 0440 \"$t\" {SUDOERS_FILE}; "
            f"r=$?; rm -f \"$t\"; [ $r -eq 0 ]")


def install_commands(cfg, home: str) -> list[str]:
    """The operator's commands (shell, values quoted) that install the root-owned programs of the
    rule from what the login built and shipped: the XenoFlow build as BINARY, the helper as
    HELPER."""
    sec = _sec(cfg)
    build = on_node(home, sec.get("build_dir") or "xenobench-xenoflow/build")
    src = on_node(home, sec.get("remote_src") or "xenobench-xenoflow/src")
    q = shlex.quote
    return [f"sudo install -D -o root -g root -m 0755 {q(build + '/xenoflow')} {BINARY}",
            f"sudo install -o root -g root -m 0755 {q(src + '/' + HELPER_SOURCE)} {HELPER}"]
