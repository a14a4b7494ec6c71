"""The rehearsal lab: the thesis testbed's shape (config/fips.yaml) built on this machine, as an
operator would find it before `xenobench deploy`. README.md beside this file says what it models
and what it cannot.

Per node of the config (nodes.<name>): a network namespace <prefix><name> holding the node's data
interfaces and a management link (`mgmt0`, a /30 whose node end is nodes.<name>.ssh.host); inside
it, a private mount and UTS namespace (`unshare -m -u`) in which /etc is an overlay (the node's
own host key, sshd_config, passwd/shadow/group, sudoers.d, /etc/trex_cfg.yaml), /root, /home,
/opt, /tmp, /var/log and /run are the node's own directories, /sys/fs/bpf is a bpffs of its own,
and /work (the repository) and the lab's directory are covered by an empty tmpfs: nothing of
xenobench is on a node until `xenobench deploy` ships it. The node's only door is the OpenSSH
sshd started there (port 22 on mgmt0); the lab writes the controller's key and strict
known_hosts (the paths nodes.<name>.ssh.key / .known_hosts name), as an operator's ~/.ssh.

Cabling (the MSN2100 and the BlueField-3): a switch namespace <prefix>sw with a bridge and static
FDB and the switch fast path (xenobench.testbed.switch) on every port, as the namespace testbed;
the data interfaces of the client, the backends, the loadgen and the DPU's p0/p1 are its ports.
The lb host's port (fips5's) is cabled to the DPU's host representor pf0hpf (a second host port to
pf1hpf), and its MAC is bound to p0's switch port: frames for the host reach the BlueField first,
as on the thesis testbed where the host port is behind the BlueField's eSwitch.

The DPU node: the login of nodes.<dpu>.ssh.user exists only in that node's /etc (uid LAB_UID), in
group sudo, with a password: sudo asks for it until the rule `xenobench deploy` prints is installed
(`--sudo-rule`); the DOCA Flow emulation (lb/emu) installed as the SDK is (headers, library, .pc
files in the directories xenoflow.build_env.pkg_config_path names); a userspace Open vSwitch
(ovsdb-server + ovs-vswitchd, netdev datapath, its run directory in the node's /run) with a stock
BlueField's bridges ovsbr1 (p0, pf0hpf) and ovsbr2 (p1, pf1hpf) and other_config:hw-offload true,
with the eSwitch stand-in that then forwards the bridges' port pairs below the node's stack
(set_hw_offload; off: OVS's userspace path, the thesis's first state); an ethtool stand-in adding
the mlx5 uplink counters to `ethtool -S p0|p1` (_ethtool_standin); /sys/kernel/mm/hugepages a
directory of plain files and /dev an overlay holding /dev/hugepages, so the hugepages step writes
and mounts inside the node only. The loadgen node: the TRex stand-in (standins/trex) as
<traffic.trex.daemon.path>/t-rex-64, with xdpgen beside it, and /etc/trex_cfg.yaml naming the
node's interface and the cores of the daemon's `-c`.

Everything made is recorded (RECORD) before it is made; `down` removes it all from that record
and from the names the config implies, after a half-failed `up` too, and is idempotent.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import yaml

from xenobench import REPO_ROOT
from xenobench.config import Config, load_config
from xenobench import dpu
from xenobench.deploy import dpu_sudo_commands
from xenobench.errors import XenobenchError
from xenobench.testbed.bpffs import BPF_PRELOAD, ensure_bpffs, unmount_bpffs_if_unused
from xenobench.fabric import NamespaceFabric
from xenobench.testbed.switch import FASTPATH_PROG, SwitchFastpath, _bpftool_batch, _hex
from xenobench.testbed.topology import NamespaceTopology, existing_namespaces, ip, kill_ns_processes

LAB_UID = 2342  # the DPU login's uid: only in that node's /etc/passwd
DPU_PASSWORD = "ubuntu"  # the stock BFB's initial password (NVIDIA BlueField BSP docs: ubuntu/ubuntu)
OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
#: a stock BlueField-3's OVS bridges in DPU mode (NVIDIA DOCA docs, "Virtual Switch on DPU":
#: ovsbr1 holds p0 and pf0hpf, ovsbr2 holds p1 and pf1hpf)
STOCK_BRIDGES = {"ovsbr1": ("p0", "pf0hpf"), "ovsbr2": ("p1", "pf1hpf")}
#: host side of the DPU's host representors (the lb node's ports); pf1 is not in the config
HOST_PF = {"pf0hpf": None, "pf1hpf": "enp13s0f1np1"}
#: the DOCA SDK's pkg-config modules XenoFlow's meson.build asks for, all served by the emulation
DOCA_PC = ("doca-flow", "doca-common", "doca-argp")
DOCA_VERSION = "2.9.0072"  # as lb/meson_options.txt doca_version (the 2.9 LTS SDK)
EMU_LIB = REPO_ROOT / "lb" / "build" / "emu" / "libdoca_emu.a"
EMU_INCLUDE = REPO_ROOT / "lb" / "emu" / "include"
TREX_STANDIN = REPO_ROOT / "standins" / "trex"
XDPGEN = REPO_ROOT / "loadgen" / "build" / "xdpgen"
#: Ubuntu's /etc/environment PATH, which pam_env gives every login of a stock BFB; the lab's sshds
#: run without PAM (nothing of the host's PAM stack in a namespace), so sshd's SetEnv gives it
UBUNTU_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games:/snap/bin"
#: what a DPU-mode BlueField's PFs report (NVIDIA BlueField docs, "Modes of Operation": in DPU mode
#: the Arm side owns the eSwitch, whose PFs are in switchdev mode); devlink-dev(8)'s output format
ESWITCH_MODE = "switchdev"
MGMT_NET = ipaddress.ip_network("203.0.113.0/24")  # TEST-NET-3 (RFC 5737): the lab's management LAN
#: the eSwitch stand-in for OVS's offloaded datapath (eswitch.bpf.c; Lab.set_hw_offload)
ESWITCH_SRC = Path(__file__).with_name("eswitch.bpf.c")
ESWITCH_PROG = "eswitch"
ESWITCH_TC_PREF = "7"  # the tc filter's priority on XenoFlow's port (under OVS's ingress qdisc)
#: ethtool on a BlueField's Ubuntu; the lab binds its counters stand-in over it in the DPU node
ETHTOOL = "/usr/sbin/ethtool"


class LabError(XenobenchError):
    pass


def sh(*argv: str, check: bool = True, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    p = subprocess.run(list(argv), capture_output=True, text=True, input=input, timeout=timeout)
    if check and p.returncode != 0:
        raise LabError(f"Failed to run `{shlex.join(argv)}`: {(p.stderr or p.stdout).strip() or p.returncode}")
    return p


class LabTopology(NamespaceTopology):
    """The switch's ports: every node interface except the lb host's, whose MAC the switch binds to
    the DPU's p0 port (lab.up adds that binding to the bridge and the fast path)."""

    def __init__(self, cfg: Config, pin_dir: Path, host_ifaces: set[tuple[str, str]]):
        super().__init__(cfg, pin_dir)
        self.host_ifaces = host_ifaces

    def ports(self):
        return [p for p in super().ports() if (p[0].name, p[1].name) not in self.host_ifaces]


class Lab:
    def __init__(self, config: str | os.PathLike, *, sudo_rule: bool = False, eswitch_mode: str = ESWITCH_MODE,
                 hw_offload: bool = True):
        self.cfg = load_config(config)
        self.hw_offload = hw_offload
        self.prefix = self.cfg.prefix
        self.root = Path(f"/var/lib/{self.prefix}rehearsal")
        self.record_file = Path("/run/xenobench") / f"{self.prefix}rehearsal.json"
        self.sudo_rule = sudo_rule
        self.eswitch_mode = eswitch_mode
        lb = self.cfg.role("lb")
        dpus = self.cfg.nodes_with_role("dpu")
        self.lb, self.dpu = lb, (dpus[0] if dpus else None)
        host_ifaces = {(lb.name, i.name) for i in lb.interfaces} if self.dpu else set()
        self.topo = LabTopology(self.cfg, Path("/sys/fs/bpf") / f"{self.prefix}rehearsal", host_ifaces)
        self.fastpath = SwitchFastpath(self.topo, self.topo.pin_dir / "switch")

    # --- names ---------------------------------------------------------------------------------
    def ns(self, node: str) -> str:
        return self.topo.ns(node)

    def node_dir(self, node: str) -> Path:
        return self.root / "nodes" / node

    def mgmt(self, node: str) -> tuple[str, str, str]:
        """(root-side link, root-side address/30, node address/30) of a node's management link."""
        host = ipaddress.ip_address(self.cfg.nodes[node].ssh.host)
        net = ipaddress.ip_network(f"{host}/30", strict=False)
        if host not in MGMT_NET or host != net.network_address + 2:
            raise LabError(f"Failed to plan the management link of {node}: nodes.{node}.ssh.host {host} in "
                           f"{self.cfg.path} must be the second address of a /30 in {MGMT_NET} (.2, .6, .10, ...)")
        idx = list(self.cfg.nodes).index(node)
        return f"{self.prefix}m{idx}", f"{net.network_address + 1}/30", f"{host}/30"

    # --- record --------------------------------------------------------------------------------
    def record(self) -> dict:
        try:
            return json.loads(self.record_file.read_text())
        except (OSError, ValueError):
            return {}

    def note(self, key: str, value) -> None:
        rec = self.record()
        items = rec.setdefault(key, [])
        if value not in items:
            items.append(value)
        self.record_file.parent.mkdir(parents=True, exist_ok=True)
        self.record_file.write_text(json.dumps(rec, indent=1))

    # --- up ------------------------------------------------------------------------------------
    def other_labs(self) -> list[Path]:
        """Records of labs of another prefix that are up (or crashed without `down`)."""
        return sorted(p for p in self.record_file.parent.glob("*rehearsal.json") if p != self.record_file)

    def up(self) -> dict:
        t0 = time.monotonic()
        # every lab has the management LAN of its config (the nodes' ssh hosts): two at once would
        # answer one address from two namespaces, and a node's host key would "change" mid-run
        for rec in self.other_labs():
            other = rec.name.removesuffix("rehearsal.json")
            raise LabError(f"Failed to build the rehearsal lab {self.prefix}: the lab {other} is up ({rec}) on the "
                           f"same management addresses; take it down first (XENOBENCH_NS_PREFIX={other} "
                           "python -m standins.rehearsal down)")
        self.down()
        self.note("config", str(self.cfg.path))
        try:
            self._check_built()
            # the switch's fast path pins on the host's bpffs: mounted here if the machine has none
            # (a fresh VM, or a testbed's down unmounted its own), unmounted by down only if ours
            mounted = ensure_bpffs()
            if mounted is not None:
                rec = self.record()
                rec["bpffs_mount"] = mounted
                self.record_file.write_text(json.dumps(rec, indent=1))
            self._namespaces()
            self._cabling()
            self.controller_files()
            for n in self.cfg.nodes:
                self._node_files(n)
                self._start_node(n)
            rec = self.record()
            rec["opt"] = [str(p) for p in sorted(self.root.glob("nodes/*/opt/**/*")) if p.is_file()]
            self.record_file.write_text(json.dumps(rec, indent=1))
            if self.dpu:
                self._start_ovs(self.dpu.name)
                self.set_hw_offload(self.hw_offload)
            self._wait_sshd()
        except BaseException:
            self.down()
            raise
        return {"nodes": {n: self.cfg.nodes[n].ssh.host for n in self.cfg.nodes},
                "seconds": round(time.monotonic() - t0, 1)}

    def _check_built(self) -> None:
        need = [EMU_LIB, XDPGEN, REPO_ROOT / "switch" / "build" / "fastpath.bpf.o"]
        missing = [str(p) for p in need if not p.exists()]
        if missing:
            raise LabError(f"Failed to build the rehearsal lab: {', '.join(missing)} not built (run `make build`)")
        if self.dpu and not OVS_SCHEMA.exists():
            raise LabError(f"Failed to build the rehearsal lab: {OVS_SCHEMA} missing (apt-get install openvswitch-switch)")

    def _namespaces(self) -> None:
        for ns in [*(self.ns(n) for n in self.cfg.nodes), self.topo.switch_ns]:
            self.note("namespaces", ns)
            ip("netns", "add", ns)
            self.topo.run(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                          "net.ipv6.conf.default.disable_ipv6=1")
            ip("-n", ns, "link", "set", "lo", "up")
        for n in self.cfg.nodes:
            self._mgmt_link(n)

    def _mgmt_link(self, n: str) -> None:
        link, root_addr, node_addr = self.mgmt(n)
        self.note("links", link)
        ip("link", "add", link, "type", "veth", "peer", "name", "mgmt0", "netns", self.ns(n))
        ip("addr", "add", root_addr, "dev", link)
        ip("link", "set", link, "up")
        ip("-n", self.ns(n), "addr", "add", node_addr, "dev", "mgmt0")
        ip("-n", self.ns(n), "link", "set", "mgmt0", "up")

    def _veth(self, a: str, ns_a: str, b: str, ns_b: str, mac_a: str | None = None,
              index_b: int | None = None) -> None:
        end_a = [a, "netns", ns_a, *(["address", mac_a] if mac_a else [])]
        if index_b:  # ip-link takes `index` for the link it adds, not for the veth's peer
            ip("link", "add", b, "netns", ns_b, "index", str(index_b), "type", "veth", "peer", "name", *end_a)
        else:
            ip("link", "add", *end_a, "type", "veth", "peer", "name", b, "netns", ns_b)
        for dev, ns in ((a, ns_a), (b, ns_b)):
            self.topo.run(ns, "ethtool", "-K", dev, "tx", "off")  # full checksums on the wire
            self.topo.run(ns, "ethtool", "-K", dev, "gro", "on")  # NAPI: XDP_TX/redirect into it works
            ip("-n", ns, "link", "set", dev, "multicast", "off", "up")

    def _cabling(self) -> None:
        sw = self.topo.switch_ns
        ip("-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0",
           "mcast_snooping", "0")
        ip("-n", sw, "link", "set", "br0", "multicast", "off", "up")
        for n, i, port in self.topo.ports():
            self._cable(n, i, port)
        if self.dpu:
            dpu, lb = self.dpu, self.lb
            p0 = next(i for i in dpu.interfaces if i.lb_port == "ingress")
            host = lb.lb_port("ingress") or lb.iface()
            self._veth(host.name, self.ns(lb.name), "pf0hpf", self.ns(dpu.name), host.mac)
            self._veth(HOST_PF["pf1hpf"], self.ns(lb.name), "pf1hpf", self.ns(dpu.name))
            sh("bridge", "-n", sw, "fdb", "replace", host.mac, "dev", self.topo.switch_port(dpu.name, p0.name),
               "master", "static")
            # the representors take what the host's port sends with XDP_TX (the eBPF LB) only
            # through native XDP: an XDP_PASS program on each (xdp_pass.bpf.c)
            obj = self.root / "xdp_pass.bpf.o"
            obj.parent.mkdir(parents=True, exist_ok=True)
            sh("clang", "-O2", "-target", "bpf", "-c", str(Path(__file__).with_name("xdp_pass.bpf.c")), "-o", str(obj))
            for rep in HOST_PF:
                ip("-n", self.ns(dpu.name), "link", "set", "dev", rep, "xdpdrv", "obj", str(obj), "sec", "xdp")
            sh("clang", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{os.uname().machine}-linux-gnu", "-c",
               str(ESWITCH_SRC), "-o", str(self.root / "eswitch.bpf.o"))
        if self.cfg.section("testbed").get("switch_fastpath", True):
            self.note("pin_dirs", str(self.topo.pin_dir))
            self.fastpath.attach()
            if self.dpu:
                links = {x["ifname"]: x["ifindex"]
                         for x in json.loads(ip("-n", sw, "-j", "link", "show").stdout)}
                port = self.topo.switch_port(dpu.name, p0.name)
                mac = _hex(bytes.fromhex(host.mac.replace(":", "")) + b"\0\0")
                _bpftool_batch(self.topo, "lab-fdb", [
                    f"map update pinned {self.fastpath.pindir / 'maps' / 'fdb'} key hex {mac} "
                    f"value hex {_hex(links[port].to_bytes(4, 'little'))}"])
            # the MSN2100 in L3 mode for an encapsulating LB (Katran): frames for katran.gateway_mac
            # routed by their outer destination to the real's port (xenobench.fabric's gateway on
            # the port where the LB host's frames enter the switch: the DPU's p0); without it they
            # are flooded and every backend receives each one
            NamespaceFabric(_LabSwitchView(self)).gateway_up()

    def _cable(self, n, i, port: str, index: int | None = None) -> None:
        """A node's interface to its switch port (`index`: the port's ifindex, kept over a reboot so
        the fast path's and the gateway's maps stay right), bound by static FDB, its addresses."""
        sw = self.topo.switch_ns
        self._veth(i.name, self.ns(n.name), port, sw, i.mac, index_b=index)
        ip("-n", sw, "link", "set", port, "master", "br0")
        sh("bridge", "-n", sw, "link", "set", "dev", port, "learning", "off")
        sh("bridge", "-n", sw, "fdb", "replace", i.mac, "dev", port, "master", "static")
        for a in ([str(i.ip)] if i.ip else []) + [str(x) for x in i.extra_ips]:
            ip("-n", self.ns(n.name), "addr", "add", a, "dev", i.name)

    def controller_files(self) -> None:
        """The controller's client key and known_hosts (as an operator's ~/.ssh); host keys are
        made per node in _node_files and added there."""
        keys = {os.path.expanduser(n.ssh.key) for n in self.cfg.nodes.values() if n.ssh and n.ssh.key}
        for k in keys:
            p = Path(k)
            p.parent.mkdir(parents=True, exist_ok=True)
            self.note("files", str(p))
            self.note("files", f"{p}.pub")
            if not p.exists():
                sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{self.prefix}rehearsal controller",
                   "-f", str(p))
        for n in self.cfg.nodes.values():
            kh = Path(os.path.expanduser(n.ssh.known_hosts or "~/.ssh/known_hosts"))
            self.note("files", str(kh))
            kh.parent.mkdir(parents=True, exist_ok=True)
            kh.write_text("")

    def _node_files(self, node: str) -> None:
        n = self.cfg.nodes[node]
        d = self.node_dir(node)
        self.note("dirs", str(self.root))
        for sub in ("etc.upper/ssh", "etc.upper/sudoers.d", "etc.work", "root/.ssh", "home", "opt", "tmp",
                    "log", "run"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(d / "tmp", 0o1777)
        os.chmod(d / "root", 0o700)
        up = d / "etc.upper"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{node}", "-f", str(up / "ssh" / "ssh_host_ed25519_key"))
        hostkey = (up / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()[:2]
        kh = Path(os.path.expanduser(n.ssh.known_hosts or "~/.ssh/known_hosts"))
        host = n.ssh.host if n.ssh.port == 22 else f"[{n.ssh.host}]:{n.ssh.port}"
        with kh.open("a") as f:
            f.write(f"{host} {' '.join(hostkey)}\n")
        (up / "ssh" / "sshd_config").write_text("\n".join([
            f"# {node} of the rehearsal lab (standins/rehearsal)",
            f"Port {n.ssh.port}", f"ListenAddress {n.ssh.host}",
            "HostKey /etc/ssh/ssh_host_ed25519_key",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "PidFile none",
            "Subsystem sftp internal-sftp",
            *([f"SetEnv PATH={UBUNTU_PATH}"] if n.ssh.user != "root" else []), ""]))
        (up / "hostname").write_text(f"{node}\n")
        (up / "hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {node}\n")
        pub = Path(os.path.expanduser(n.ssh.key) + ".pub").read_text()
        user = n.ssh.user
        if user == "root":
            (d / "root" / ".ssh" / "authorized_keys").write_text(pub)
        else:
            self._login(d, user, pub)
        if n.role == "loadgen":
            self._install_trex(d, n)
        if n.role == "dpu":
            self._install_doca(d)
            hp = d / "sys-hugepages" / "hugepages-2048kB"
            hp.mkdir(parents=True, exist_ok=True)
            for f in ("nr_hugepages", "free_hugepages"):
                (hp / f).write_text("0\n")
            (d / "dev.upper" / "hugepages").mkdir(parents=True, exist_ok=True)
            (d / "dev.work").mkdir(exist_ok=True)
            (up / "openvswitch").mkdir(exist_ok=True)
            (d / "varlib-ovs").mkdir(exist_ok=True)
            self._devlink_standin(d, n)
            self._ethtool_standin(d, n)
            if self.sudo_rule:
                self.install_sudo_rule(node)

    def _login(self, d: Path, user: str, pub: str) -> None:
        """A non-root login as the stock BFB's: in group sudo (Debian's /etc/sudoers: `%sudo ALL=(ALL:ALL)
        ALL`, so sudo asks for the password), with a password, in this node's /etc only."""
        up = d / "etc.upper"
        pw = sh("openssl", "passwd", "-6", DPU_PASSWORD).stdout.strip()
        passwd = Path("/etc/passwd").read_text() + f"{user}:x:{LAB_UID}:{LAB_UID}::/home/{user}:/bin/bash\n"
        shadow = Path("/etc/shadow").read_text() + f"{user}:{pw}:19000:0:99999:7:::\n"
        groups = []
        for line in Path("/etc/group").read_text().splitlines():
            f = line.split(":")
            if f[0] == "sudo":
                f[3] = ",".join([x for x in f[3].split(",") if x] + [user])
            groups.append(":".join(f))
        groups.append(f"{user}:x:{LAB_UID}:")
        (up / "passwd").write_text(passwd)
        (up / "shadow").write_text(shadow)
        os.chmod(up / "shadow", 0o640)
        (up / "group").write_text("\n".join(groups) + "\n")
        home = d / "home" / user
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        (home / ".ssh" / "authorized_keys").write_text(pub)
        for p in (home, home / ".ssh", home / ".ssh" / "authorized_keys"):
            os.chown(p, LAB_UID, LAB_UID)
        os.chmod(home, 0o750)
        os.chmod(home / ".ssh", 0o700)

    def _devlink_standin(self, d: Path, n) -> None:
        """devlink on the DPU node, bound over /usr/sbin/devlink there (the real one kept under
        /usr/local/libexec in the node's /usr/local overlay): a stand-in at the hardware boundary
        that answers `devlink dev eswitch show pci/ADDR` for the config's PCI addresses as a
        DPU-mode BlueField's PFs do (veths have no eSwitch), and, as the kernel does, only to root:
        devlink's eswitch-get is an admin-perm operation (Documentation/netlink/specs/devlink.yaml),
        refused with EPERM without CAP_NET_ADMIN. Every other command goes to the real devlink."""
        cases = []
        for i in n.interfaces:
            if i.pci:
                pci = i.pci if i.pci.count(":") == 2 else f"0000:{i.pci}"
                cases.append(f'    pci/{pci}) echo "pci/{pci}: mode {self.eswitch_mode} inline-mode none '
                             f'encap-mode basic"; exit 0;;')
        real = d / "usrlocal.upper" / "libexec" / "devlink.real"
        real.parent.mkdir(parents=True, exist_ok=True)
        (d / "usrlocal.work").mkdir(exist_ok=True)
        shutil.copy2(dpu.DEVLINK, real)
        f = d / "devlink-standin"
        f.write_text("#!/bin/sh\n# devlink stand-in of the rehearsal lab (standins/rehearsal/lab.py): the "
                     "BlueField's eSwitch\nif [ \"$1 $2 $3\" = \"dev eswitch show\" ]; then\n"
                     "  if [ \"$(id -u)\" != 0 ]; then echo \"kernel answers: Operation not permitted\" >&2; exit 1; fi\n"
                     "  case \"$4\" in\n" + "\n".join(cases) + "\n  esac\nfi\n"
                     "exec /usr/local/libexec/devlink.real \"$@\"\n")
        os.chmod(f, 0o755)

    def _ethtool_standin(self, d: Path, n) -> None:
        """ethtool on the DPU node, bound over /usr/sbin/ethtool there (the real one kept under
        /usr/local/libexec): a stand-in at the hardware boundary. `ethtool -S` of an uplink port
        (p0, p1: veths here) prints the veth's own counters and then, under a line naming the
        stand-in, the counters an mlx5 uplink representor has and the harness reads (the kernel's
        mlx5 counters.rst), derived from the veth's real ones: rx_packets_phy/tx_packets_phy and
        the bytes (every frame the link carried: /sys/class/net/<port>/statistics, which counts
        the frames XDP took too), and rx_packets, the frames the node's kernel stack got: those
        less the ones the eSwitch's stand-ins took before the stack (XDP drop, redirect, tx of
        the port's XDP program: XenoFlow's emulated pipe or eswitch.bpf.c; and the eSwitch
        stand-in's tc redirect on XenoFlow's port, `tc -s filter show dev <port> ingress`).
        rx_out_of_buffer is 0: a veth has no receive buffers to run out of. Every other command
        goes to the real ethtool."""
        ports = " ".join(i.name for i in n.interfaces if i.name not in HOST_PF)
        real = d / "usrlocal.upper" / "libexec" / "ethtool.real"
        real.parent.mkdir(parents=True, exist_ok=True)
        (d / "usrlocal.work").mkdir(exist_ok=True)
        shutil.copy2(ETHTOOL, real)
        f = d / "ethtool-standin"
        f.write_text(
            "#!/bin/sh\n# ethtool stand-in of the rehearsal lab (standins/rehearsal/lab.py): mlx5 counters of the "
            "uplink ports,\n# derived from the veths' own\nreal=/usr/local/libexec/ethtool.real\n"
            'if [ "$1" = -S ] && [ $# = 2 ]; then\n'
            f'  case " {ports} " in *" $2 "*)\n'
            '    out=$("$real" -S "$2") || exit $?\n'
            '    st=/sys/class/net/$2/statistics\n'
            '    rx=$(cat "$st/rx_packets"); tx=$(cat "$st/tx_packets")\n'
            '    rxb=$(cat "$st/rx_bytes"); txb=$(cat "$st/tx_bytes")\n'
            "    xdp=$(printf '%s\\n' \"$out\" | awk -F: '/rx_queue_[0-9]+_xdp_(drops|redirect|tx):/ "
            "{s += $2} END {print s + 0}')\n"
            "    tcr=$(/usr/sbin/tc -s filter show dev \"$2\" ingress 2>/dev/null | awk '/Sent [0-9]+ bytes "
            "[0-9]+ pkt/ {for (i = 2; i <= NF; i++) if ($i == \"pkt\") s += $(i - 1)} END {print s + 0}')\n"
            "    printf '%s\\n' \"$out\"\n"
            "    echo 'Rehearsal stand-in (standins/rehearsal): mlx5 uplink counters from this veth:'\n"
            '    echo "     rx_packets: $((rx - xdp - tcr))"\n'
            '    echo "     rx_out_of_buffer: 0"\n'
            '    echo "     rx_packets_phy: $rx"\n    echo "     tx_packets_phy: $tx"\n'
            '    echo "     rx_bytes_phy: $rxb"\n    echo "     tx_bytes_phy: $txb"\n'
            "    exit 0;;\n  esac\nfi\n"
            'exec "$real" "$@"\n')
        os.chmod(f, 0o755)

    # --- the eSwitch's offload of OVS's bridges (eswitch.bpf.c) ----------------------------------
    def set_hw_offload(self, on: bool) -> None:
        """OVS's other_config:hw-offload in the DPU node, and what a BlueField's OVS does with it
        after its restart, at once: true (the lab's default, a correctly configured BlueField) puts
        every stock bridge's port pair on the eSwitch stand-in, so frames between them pass neither
        the node's kernel stack nor OVS's userspace datapath; false leaves them to that datapath
        (netdev, through packet sockets: the Arm cores' path, slow)."""
        node = self.dpu.name
        self.in_node(node, "ovs-vsctl", "--timeout=30", "set", "Open_vSwitch", ".",
                     f"{dpu.OVS_HW_OFFLOAD_KEY}={'true' if on else 'false'}")
        self._eswitch(on)

    def _eswitch_paths(self) -> list[tuple[str, str, str]]:
        """(from, to, how) for every direction of every stock bridge: "xdp" (eswitch.bpf.c at the
        port's XDP hook), or "tc" on the port of XenoFlow's root pipe (lb_port ingress), whose XDP
        hook XenoFlow's emulated pipe takes: the tc hook comes after it, as DOCA Flow's pipes on
        p0 see a frame before OVS's offloaded rules."""
        root = self.dpu.lb_port("ingress").name
        return [(a, b, "tc" if a == root else "xdp") for x, y in STOCK_BRIDGES.values() for a, b in ((x, y), (y, x))]

    def _eswitch(self, on: bool) -> None:
        ns, node = self.ns(self.dpu.name), self.dpu.name
        pin = self.topo.pin_dir / "eswitch"
        paths = self._eswitch_paths()
        root = next(a for a, _, how in paths if how == "tc")
        if not on:
            for a, _, how in paths:
                if how == "tc":
                    sh("ip", "netns", "exec", ns, "tc", "filter", "del", "dev", a, "parent", "ffff:", "pref",
                       ESWITCH_TC_PREF, check=False)
                elif a in HOST_PF:  # back to the representors' XDP_PASS (their peers' XDP_TX frames)
                    ip("-force", "-n", ns, "link", "set", "dev", a, "xdpdrv", "obj", str(self.root / "xdp_pass.bpf.o"),
                       "sec", "xdp")
                else:
                    ip("-n", ns, "link", "set", "dev", a, "xdp", "off", check=False)
            self.in_node(node, "ovs-ofctl", "mod-port", "ovsbr1", root, "receive", check=False)
            return
        if not (pin / "progs" / ESWITCH_PROG).exists():
            self.note("pin_dirs", str(self.topo.pin_dir))
            (pin / "maps").mkdir(parents=True, exist_ok=True)
            self.topo.run(ns, "bpftool", "prog", "loadall", str(self.root / "eswitch.bpf.o"), str(pin / "progs"),
                          "type", "xdp", "pinmaps", str(pin / "maps"))
        links = {x["ifname"]: x["ifindex"] for x in json.loads(ip("-n", ns, "-j", "link", "show").stdout)}
        batch = [f"map update pinned {pin / 'maps' / 'pairs'} key hex {_hex(links[a].to_bytes(4, 'little'))} "
                 f"value hex {_hex(links[b].to_bytes(4, 'little'))}" for a, b, how in paths if how == "xdp"]
        f = self.cfg.state_dir / "lab-eswitch.bpftool"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("\n".join(batch) + "\n")
        self.topo.run(ns, "bpftool", "batch", "file", str(f))  # devmap ifindexes resolve in the DPU's namespace
        for a, b, how in paths:
            if how == "xdp":
                # through nsenter: `ip -n` remounts /sys, hiding the pins
                self.topo.run(ns, "ip", "-force", "link", "set", "dev", a, "xdpdrv", "pinned",
                              str(pin / "progs" / ESWITCH_PROG))
            else:
                # OVS's netdev ports hold an ingress qdisc of OVS's (its policing): the filter goes there
                sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", a, "ingress", check=False)
                sh("ip", "netns", "exec", ns, "tc", "filter", "del", "dev", a, "parent", "ffff:", "pref",
                   ESWITCH_TC_PREF, check=False)
                sh("ip", "netns", "exec", ns, "tc", "filter", "add", "dev", a, "parent", "ffff:", "pref",
                   ESWITCH_TC_PREF, "protocol", "all", "u32", "match", "u32", "0", "0", "action", "mirred", "egress",
                   "redirect", "dev", b)  # u32 matching every frame: kernels without cls_matchall have it
        # OVS's packet socket on the root port is a tap, served before the tc hook: OVS would forward
        # a second copy of each frame; OpenFlow's no-receive makes it drop its copy
        self.in_node(node, "ovs-ofctl", "mod-port", "ovsbr1", root, "no-receive")

    def install_sudo_rule(self, node: str | None = None) -> str:
        """Install the sudoers rule `xenobench deploy` prints for the DPU login (its fix column)
        and the root-owned helper it names (lb/dpu, into the node's /usr/local), as the operator
        does; checked by visudo. Returns the rule."""
        node = node or self.dpu.name
        user = self.cfg.nodes[node].ssh.user
        rule = dpu.sudoers_rule(user, dpu_sudo_commands(self.cfg, home=f"/home/{user}"))
        f = self.node_dir(node) / "etc.upper" / "sudoers.d" / "xenobench"
        f.write_text(rule + "\n")
        os.chmod(f, 0o440)
        sh("visudo", "-cf", str(f))
        d = self.node_dir(node)
        pid = d / "sshd.pid"
        if pid.exists() and Path(f"/proc/{pid.read_text().strip()}").exists():
            # the node runs: through its own /usr/local (an overlay's upper layer is not to be
            # written while it is mounted), from its /tmp (the lab's directory, bound there)
            staged = d / "tmp" / "xenobench-xenoflow.helper"
            shutil.copyfile(REPO_ROOT / dpu.HELPER_SOURCE, staged)
            try:
                self.in_node(node, "install", "-D", "-o", "root", "-g", "root", "-m", "0755",
                             f"/tmp/{staged.name}", dpu.HELPER)
            finally:
                staged.unlink(missing_ok=True)
        else:
            helper = d / "usrlocal.upper" / Path(dpu.HELPER).relative_to("/usr/local")
            helper.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO_ROOT / dpu.HELPER_SOURCE, helper)
            os.chown(helper, 0, 0)
            os.chmod(helper, 0o755)
        return rule

    def install_xenoflow(self, node: str | None = None) -> str:
        """Install the XenoFlow the DPU login built as the root-owned program the rule names (what
        `xenobench deploy` tells the operator to run with sudo), in the node. Returns the path."""
        node = node or self.dpu.name
        user = self.cfg.nodes[node].ssh.user
        build = dpu.on_node(f"/home/{user}", self.cfg.section("xenoflow").get("build_dir") or "xenobench-xenoflow/build")
        self.in_node(node, "install", "-D", "-o", "root", "-g", "root", "-m", "0755", f"{build}/xenoflow", dpu.BINARY)
        return dpu.BINARY

    def _install_trex(self, d: Path, n) -> None:
        t = self.cfg.section("traffic").get("trex") or {}
        dmn = t.get("daemon") or {}
        path = dmn.get("path")
        if not path:
            raise LabError(f"Failed to install the TRex stand-in on {n.name}: traffic.trex.daemon.path is not set "
                           f"in {self.cfg.path}")
        dest = d / "opt" / Path(path).relative_to("/opt")
        dest.mkdir(parents=True, exist_ok=True)
        for f in ("t-rex-64", "trex_standin.py", "README.md"):
            shutil.copy2(TREX_STANDIN / f, dest / f)
        shutil.copy2(XDPGEN, dest / "xdpgen")
        args = [str(a) for a in dmn.get("args") or []]
        cores = int(args[args.index("-c") + 1]) if "-c" in args else 1
        i = n.iface()
        cfg = [{"port_limit": 2, "version": 2, "interfaces": [i.name, "dummy"], "c": cores,
                "zmq_rpc_port": int(t.get("sync_port", 4501)), "zmq_pub_port": int(t.get("async_port", 4500)),
                "port_info": [{"src_mac": i.mac, "dest_mac": self.cfg.service.lb_mac or i.mac}, {}]}]
        (d / "etc.upper" / "trex_cfg.yaml").write_text(
            "# written by the rehearsal lab, as dpdk_setup_ports.py -i would\n" + yaml.safe_dump(cfg, sort_keys=False))

    def _install_doca(self, d: Path) -> None:
        """The emulation as the SDK installs itself: /opt/mellanox/doca/include, the library under
        lib/<arch>, a .pc per module in the first directory of xenoflow.build_env.pkg_config_path
        (libdpdk's in the second, as DOCA's DPDK has its own)."""
        dirs = (self.cfg.section("xenoflow").get("build_env") or {}).get("pkg_config_path") or []
        if not dirs:
            raise LabError(f"Failed to install the DOCA emulation: xenoflow.build_env.pkg_config_path is empty in "
                           f"{self.cfg.path}")
        opt = d / "opt"
        pcdir = Path(dirs[0])
        libdir = pcdir.parent
        prefix = Path("/opt/mellanox/doca")
        inc = opt / (prefix / "include").relative_to("/opt")
        shutil.copytree(EMU_INCLUDE, inc, dirs_exist_ok=True)
        (opt / libdir.relative_to("/opt")).mkdir(parents=True, exist_ok=True)
        # meson makes a static library that is not installed a thin archive (members by path into
        # lb/build), one that is installed (lb/emu/meson.build: install: true) a real one; the SDK
        # ships a real one, so a thin archive's members are copied into a new archive
        dest = opt / libdir.relative_to("/opt") / "libdoca_emu.a"
        with open(EMU_LIB, "rb") as f:
            thin = f.read(8) == b"!<thin>\n"
        if thin:
            members = sh("ar", "t", str(EMU_LIB)).stdout.split()
            sh("ar", "rcs", str(dest), *[str(EMU_LIB.parent / m) if not m.startswith("/") else m for m in members])
        else:
            shutil.copyfile(EMU_LIB, dest)
        (opt / pcdir.relative_to("/opt")).mkdir(parents=True, exist_ok=True)
        for m in DOCA_PC:
            libs = f"Libs: -L{libdir} -ldoca_emu\nRequires: libbpf\n" if m == "doca-flow" else "Requires: doca-flow\n"
            (opt / pcdir.relative_to("/opt") / f"{m}.pc").write_text(
                f"# the DOCA Flow emulation (xenobench lb/emu) installed as DOCA {DOCA_VERSION}'s {m}\n"
                f"prefix={prefix}\nincludedir=${{prefix}}/include\n\nName: {m}\n"
                f"Description: DOCA Flow emulation (xenobench lb/emu), API of DOCA {DOCA_VERSION}\n"
                f"Version: {DOCA_VERSION}\nCflags: -I${{includedir}}\n{libs}")
        dp = Path(dirs[1]) if len(dirs) > 1 else pcdir
        (opt / dp.relative_to("/opt")).mkdir(parents=True, exist_ok=True)
        (opt / dp.relative_to("/opt") / "libdpdk.pc").write_text(
            "# DPDK's surface as the DOCA Flow emulation provides it (xenobench lb/emu)\n"
            "Name: libdpdk\nDescription: DPDK surface of the DOCA Flow emulation\nVersion: 22.11.0\n"
            "Requires: doca-flow\n")

    def node_script(self, node: str) -> str:
        """What runs in the node's new mount/UTS namespace before it becomes its sshd."""
        n = self.cfg.nodes[node]
        d = self.node_dir(node)
        q = shlex.quote
        lines = [
            "set -e",
            f"hostname {q(node)}",
            f"mount -t overlay {self.prefix}etc -o lowerdir=/etc,upperdir={q(str(d / 'etc.upper'))},"
            f"workdir={q(str(d / 'etc.work'))} /etc",
        ]
        for src, dst in (("root", "/root"), ("home", "/home"), ("opt", "/opt"), ("tmp", "/tmp"),
                         ("log", "/var/log"), ("run", "/run")):
            lines.append(f"mount --bind {q(str(d / src))} {dst}")
        lines += ["mkdir -p /run/sshd /run/lock /run/openvswitch", "chmod 755 /run/sshd",
                  "mount -t bpf bpf /sys/fs/bpf"]
        if n.role == "dpu":
            lines += [f"mount --bind {q(str(d / 'sys-hugepages'))} /sys/kernel/mm/hugepages",
                      f"[ ! -d /var/lib/openvswitch ] || mount --bind {q(str(d / 'varlib-ovs'))} /var/lib/openvswitch",
                      f"mount -t overlay {self.prefix}usrlocal -o lowerdir=/usr/local,"
                      f"upperdir={q(str(d / 'usrlocal.upper'))},workdir={q(str(d / 'usrlocal.work'))} /usr/local",
                      f"mount --bind {q(str(d / 'devlink-standin'))} {dpu.DEVLINK}",
                      f"mount --bind {q(str(d / 'ethtool-standin'))} {ETHTOOL}",
                      f"mkdir -p {q(str(d / 'hostdev'))}", f"mount --rbind /dev {q(str(d / 'hostdev'))}",
                      f"mount -t overlay {self.prefix}dev -o lowerdir=/dev,upperdir={q(str(d / 'dev.upper'))},"
                      f"workdir={q(str(d / 'dev.work'))} /dev"]
            for sub in ("pts", "shm", "mqueue"):
                lines.append(f"[ ! -d {q(str(d / 'hostdev' / sub))} ] || mount --bind {q(str(d / 'hostdev' / sub))} /dev/{sub}")
        # the repository and the lab itself are not on the node
        for hide in {"/work", str(REPO_ROOT), str(self.root)}:
            lines.append(f"[ ! -d {q(hide)} ] || mount -t tmpfs -o mode=755,size=1m {self.prefix}hidden {q(hide)}")
        lines.append("exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config")
        return "\n".join(lines)

    def _start_node(self, node: str) -> None:
        d = self.node_dir(node)
        log = open(d / "sshd.log", "ab")
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(node), "unshare", "--mount", "--uts",
                              "--propagation", "private", "sh", "-c", self.node_script(node)],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        self.note("pids", p.pid)
        (d / "sshd.pid").write_text(str(p.pid))

    def sshd_pid(self, node: str) -> int:
        return int((self.node_dir(node) / "sshd.pid").read_text())

    def in_node(self, node: str, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """argv in a node's namespaces (its console, for the lab's own setup and checks)."""
        return sh("nsenter", "-t", str(self.sshd_pid(node)), "-m", "-u", "-n", "--", *argv, check=check,
                  timeout=timeout)

    def _wait_sshd(self, nodes: list[str] | None = None) -> None:
        deadline = time.monotonic() + 20
        pending = set(nodes or self.cfg.nodes)
        while pending and time.monotonic() < deadline:
            for n in sorted(pending):
                pid = self.sshd_pid(n)
                if not Path(f"/proc/{pid}").exists():
                    log = (self.node_dir(n) / "sshd.log").read_text(errors="replace").strip().splitlines()
                    raise LabError(f"Failed to start node {n}: its sshd exited: {log[-1] if log else 'no output'}")
                if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                    r = sh("ip", "netns", "exec", self.ns(n), "ss", "-Hltn", f"sport = :{self.cfg.nodes[n].ssh.port}",
                           check=False)
                    if r.stdout.strip():
                        pending.discard(n)
            time.sleep(0.1)
        if pending:
            raise LabError(f"Failed to start node(s) {', '.join(sorted(pending))}: no sshd listening within 20 s")

    def _start_ovs(self, node: str) -> None:
        """A userspace Open vSwitch in the DPU node with the stock bridges (netdev datapath)."""
        run = self.in_node
        # wait until the node's mounts are in place (its process has become sshd)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{self.sshd_pid(node)}/comm").read_text().strip() != "sshd":
            if time.monotonic() > deadline:
                raise LabError(f"Failed to start Open vSwitch on {node}: the node did not come up")
            time.sleep(0.05)
        # the node's own database: Debian's /etc/openvswitch/conf.db links into /var/lib/openvswitch,
        # which is the node's own directory (node_script)
        run(node, "ovsdb-tool", "create", "/etc/openvswitch/conf.db", str(OVS_SCHEMA))
        run(node, "ovsdb-server", "/etc/openvswitch/conf.db", "--remote=punix:/run/openvswitch/db.sock",
            "--pidfile", "--detach", "--log-file=/var/log/openvswitch-ovsdb-server.log")
        run(node, "ovs-vsctl", "--no-wait", "init")
        # --disable-system: no kernel datapath, only the userspace (netdev) one
        run(node, "ovs-vswitchd", "--disable-system", "--pidfile", "--detach",
            "--log-file=/var/log/openvswitch-vswitchd.log")
        add = ["ovs-vsctl", "--timeout=30"]
        for br, ports in STOCK_BRIDGES.items():
            add += ["--", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev"]
            for p in ports:
                add += ["--", "add-port", br, p]
        run(node, *add, timeout=60)

    # --- faults an operator meets (scripts/faults_rehearsal.py, tests/test_rehearsal.py) ----------
    def pids(self, node: str, needle: str) -> list[int]:
        """The node's processes (in its namespace) whose command line holds `needle`, but sudo's."""
        out = []
        for pid in sh("ip", "netns", "pids", self.ns(node), check=False).stdout.split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if needle in cmd and not cmd.startswith("sudo "):
                out.append(int(pid))
        return out

    def ssh_sessions(self, node: str) -> list[int]:
        """The node's SSH sessions: the processes its sshd forked per connection (`sshd: root@notty`,
        `sshd: ubuntu [priv]`), never its listener."""
        out = []
        for pid in sh("ip", "netns", "pids", self.ns(node), check=False).stdout.split():
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("sshd") and int(pid) != self.sshd_pid(node):
                out.append(int(pid))
        return out

    def drop_ssh(self, node: str) -> list[int]:
        """The controller's connections to a node drop: every session's sshd is killed (SIGKILL, as
        the OOM killer or a crash would), so the TCP connection is reset. Returns the pids killed."""
        pids = self.ssh_sessions(node)
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        return pids

    def restart_sshd(self, node: str, down_s: float = 1.0) -> int:
        """sshd restarts and takes its sessions along (a restart of the whole unit, an upgrade): the
        listener and every session are stopped, no sshd listens for `down_s`, then a new one does
        (in the node's namespaces: the shell that starts it holds them meanwhile). Returns its pid."""
        old = self.sshd_pid(node)
        d = self.node_dir(node)
        sessions = " ".join(map(str, self.ssh_sessions(node)))
        log = open(d / "sshd.log", "ab")
        p = subprocess.Popen(["nsenter", "-t", str(old), "-m", "-u", "-n", "--", "sh", "-c",
                              f"kill -TERM {old} {sessions}; sleep {down_s:g}; "
                              "exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        self.note("pids", p.pid)
        (d / "sshd.pid").write_text(str(p.pid))
        return p.pid

    def reboot(self, node: str, down_s: float = 1.0) -> None:
        """The node's host reboots: every process in it ends, its network namespace is deleted (its
        links with it), /tmp and /run are emptied, and after `down_s` it comes back as it boots: the
        namespace, the management link, its ports on the switch (same ifindex, so the switch's
        maps hold), its addresses, its sshd; /etc, /root, /home, /opt and /var/log are kept (the
        disk). Nodes cabled to others than the switch (the lb host, the DPU) are not modelled."""
        if self.dpu and node in (self.dpu.name, self.lb.name):
            raise LabError(f"Failed to reboot {node}: only nodes cabled to the switch alone are modelled "
                           "(the lb host and the DPU share links and OVS)")
        sw, ns = self.topo.switch_ns, self.ns(node)
        ports = [(nn, i, port) for nn, i, port in self.topo.ports() if nn.name == node]
        index = {x["ifname"]: x["ifindex"] for x in json.loads(ip("-n", sw, "-j", "link", "show").stdout)}
        kill_ns_processes(ns)
        ip("netns", "del", ns)
        deadline = time.monotonic() + 10
        while any(Path(f"/sys/class/net/{self.mgmt(node)[0]}").exists() or
                  sh("ip", "-n", sw, "link", "show", port, check=False).returncode == 0 for _, _, port in ports):
            if time.monotonic() > deadline:
                raise LabError(f"Failed to reboot {node}: its links were not removed within 10 s")
            time.sleep(0.05)
        d = self.node_dir(node)
        for sub in ("tmp", "run"):
            for p in (d / sub).iterdir():
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        time.sleep(down_s)
        ip("netns", "add", ns)
        self.topo.run(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        ip("-n", ns, "link", "set", "lo", "up")
        self._mgmt_link(node)
        # the switch's devmaps dropped the old ports when they went (the kernel's devmap notifier):
        # the new ones, at the same ifindex, are put back (the fast path's, the L3 gateway's)
        devmaps = [m for m in (self.fastpath.pindir / "maps" / "ports",
                               self.topo.pin_dir / "fabric" / "gateway" / "maps" / "gw_ports") if m.exists()]
        for nn, i, port in ports:
            self._cable(nn, i, port, index=index[port])
            if self.cfg.section("testbed").get("switch_fastpath", True):
                self.topo.run(ns, "ethtool", "-K", i.name, "gro", "on")
                self.topo.run(sw, "ip", "link", "set", "dev", port, "xdpdrv", "pinned",
                              str(self.fastpath.pindir / "progs" / FASTPATH_PROG))
            idx = _hex(index[port].to_bytes(4, "little"))
            _bpftool_batch(self.topo, "lab-reboot", [f"map update pinned {m} key hex {idx} value hex {idx}"
                                                     for m in devmaps])
        self._start_node(node)
        self._wait_sshd([node])

    def wait_sshd(self, node: str | None = None) -> None:
        """Until the node's (every node's) sshd listens again."""
        self._wait_sshd([node] if node else None)

    # --- what the harness left --------------------------------------------------------------
    def leftovers(self) -> list[str]:
        """What is on the nodes that the lab did not put there (after `testbed down --purge`
        nothing should be): processes, files in the homes, /tmp and /opt, pins in the node's
        bpffs, XDP programs on its interfaces, OVS flows beyond the bridges' NORMAL one."""
        out = []
        for node, n in self.cfg.nodes.items():
            d = self.node_dir(node)
            ns = self.ns(node)
            pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
            ours = {str(self.sshd_pid(node))}
            for pidfile in (d / "run" / "openvswitch").glob("*.pid"):
                ours.add(pidfile.read_text().strip())
            for pid in pids:
                try:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                    ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
                except OSError:
                    continue
                # the lab's sshd and OVS; an SSH session still closing (`sshd: user@notty`) is the
                # connection, not something it started
                if pid in ours or (comm.startswith("ovs") and ppid in ours) or comm.startswith("sshd"):
                    continue
                args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append(f"{node}: process {pid} ({args.strip()})")
            homes = [d / "root"] + [p for p in (d / "home").iterdir()]
            for h in homes:
                for p in sorted(h.iterdir()):
                    if p.name not in (".ssh", ".sudo_as_admin_successful", ".cache"):
                        out.append(f"{node}: file {'/root' if h.name == 'root' else '/home/' + h.name}/{p.name}")
            for p in sorted((d / "tmp").iterdir()):
                out.append(f"{node}: file /tmp/{p.name}")
            for p in sorted((d / "opt").rglob("*")):
                if p.is_file() and str(p) not in self.record().get("opt", []):
                    out.append(f"{node}: file /opt/{p.relative_to(d / 'opt')}")
            pins = self.in_node(node, "ls", "-A", "/sys/fs/bpf", check=False).stdout.split()
            out += [f"{node}: pin /sys/fs/bpf/{x}" for x in pins if x not in BPF_PRELOAD]
            for link in json.loads(ip("-n", ns, "-j", "link", "show").stdout or "[]"):
                lab_prog = (link.get("xdp") or {}).get("prog", {}).get("name") in (ESWITCH_PROG, "rep_pass")
                if link.get("xdp") and not (n.role == "dpu" and (link["ifname"] in HOST_PF or lab_prog)):
                    out.append(f"{node}: XDP program on {link['ifname']}")
            if n.role == "dpu":
                for br in STOCK_BRIDGES:
                    flows = self.in_node(node, "ovs-ofctl", "--names", "--no-stats", "dump-flows", br,
                                         check=False).stdout.splitlines()
                    out += [f"{node}: OVS flow on {br}: {f.strip()}" for f in flows
                            if f.strip() and f.strip() != "priority=0 actions=NORMAL"]
        return out

    # --- down ----------------------------------------------------------------------------------
    def down(self) -> dict:
        rec = self.record()
        names = set(rec.get("namespaces", [])) | {self.ns(n) for n in self.cfg.nodes} | {self.topo.switch_ns}
        names = {n for n in names if n.startswith(self.prefix)}
        present = sorted(names & existing_namespaces())
        for pid in rec.get("pids", []):
            try:
                os.killpg(int(pid), 15)
            except (ProcessLookupError, PermissionError):
                pass
        for ns in present:
            kill_ns_processes(ns)
        for ns in present:
            ip("netns", "del", ns, check=False)
        links = set(rec.get("links", [])) | {self.mgmt(n)[0] for n in self.cfg.nodes}
        for link in sorted(links):
            if link.startswith(self.prefix) and Path(f"/sys/class/net/{link}").exists():
                ip("link", "del", link, check=False)
        for d in set(rec.get("pin_dirs", [])) | {str(self.topo.pin_dir)}:
            if Path(d).parent == Path("/sys/fs/bpf") and Path(d).name.startswith(self.prefix):
                shutil.rmtree(d, ignore_errors=True)
        for f in rec.get("files", []):
            Path(f).unlink(missing_ok=True)
        unmount_bpffs_if_unused(rec.get("bpffs_mount"))  # only the mount up made, and only if empty
        if self.root.name.startswith(self.prefix) and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        self.record_file.unlink(missing_ok=True)
        left = sorted(names & existing_namespaces())
        if left or self.root.exists():
            raise LabError(f"Failed to remove the rehearsal lab: left {', '.join(left) or self.root}")
        return {"removed": present}

    def status(self) -> dict:
        out = {}
        have = existing_namespaces()
        for n, c in self.cfg.nodes.items():
            up = self.ns(n) in have
            try:
                alive = up and Path(f"/proc/{self.sshd_pid(n)}/comm").read_text().strip() == "sshd"
            except (OSError, ValueError):
                alive = False
            out[n] = {"namespace": self.ns(n), "exists": up, "sshd": alive,
                      "ssh": f"{c.ssh.user}@{c.ssh.host}:{c.ssh.port}"}
        return {"lab": str(self.root), "up": all(v["sshd"] for v in out.values()), "nodes": out}


class _LabSwitchView:
    """What xenobench.fabric's gateway reads of a testbed, for the lab's switch: its namespace, its
    ports (the LB host's port enters the switch at the DPU's p0), its pins and the fast path to chain."""

    def __init__(self, lab):
        self.cfg, self._lab = lab.cfg, lab
        self.switch_ns = lab.topo.switch_ns
        self.bpffs_dir = lab.topo.pin_dir
        self.fastpath_pindir = lab.fastpath.pindir

    def switch_port(self, node: str, iface: str) -> str:
        lab, lb = self._lab, self.cfg.role("lb")
        if lab.dpu and node == lb.name:
            p0 = next(i for i in lab.dpu.interfaces if i.lb_port == "ingress")
            return lab.topo.switch_port(lab.dpu.name, p0.name)
        return lab.topo.switch_port(node, iface)
