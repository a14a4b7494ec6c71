"""XenoFlow (lb/) as a LoadBalancer: the emulated build on the namespace testbed, the DOCA build
on the BlueField's ARM side on the thesis testbed.

mode "emulation" (config `xenoflow.mode`, default on netns testbeds): lb/build/xenoflow (built by
`make -C lb`, DOCA Flow emulated on XDP) runs in the LB node's namespace with its ports bound to
the node's ingress/egress interfaces (EAL `-a p0 -a p1`).

mode "doca" (thesis testbed): on the node with role `dpu` (else `lb`), over SSH, in this order
and each command logged: copy lb/ there; check the build environment (the pkg-config modules
lb/meson.build asks for, with DOCA's and its DPDK's pkg-config directories put on
PKG_CONFIG_PATH explicitly, since a non-interactive SSH session does not read the profile that
sets them; install what apt can if xenoflow.build_env.install, else fail naming what is missing);
build it with meson against the DOCA SDK; check the OVS bridge exists and add the flow rule(s)
(without them traffic goes through the ARM cores; thesis §6.1, paper §4.2); reserve hugepages;
start XenoFlow with the configured EAL device arguments. With xenoflow.sudo (a login that is not
root) every step as root is one of the exact commands of xenobench.dpu's rule: XenoFlow runs as
the root-owned install of this build, through the root-owned helper that records its pid and
alone signals it; a start that fails, `lb stop` and `testbed down --purge` remove the OVS rules.

Every trial of XenoFlow in DOCA mode proves that it ran in the BlueField's hardware (in_hardware,
xenobench.lb.inhardware: the Arm cores' load, the frames p0's kernel stack got, OVS's hw-offload).

Kind "xenoflow-hash" (XenoFlowHashLB, made by xenobench.lb.xenoflow_hash) is the same binary in
hash mode (-H: lb/src/hash.h): a DOCA_FLOW_PIPE_HASH pipe over the client's source address and port,
one entry per slot of the backends file; everything else (deploy, stats, the update path) is this
driver's. Which backend a flow reaches (backend_of) is the emulated hash pipe's index (hash_index:
CRC-32 of the flow's tag, lb/emu/bpf/emu_hash.h); on a BlueField the tag's layout is the
hardware's, so the DOCA build cannot say (no_route).

XenoFlow prints JSON lines (lb/src/main.c): "started", a "stats" line every interval and on
SIGUSR1, "final" and "stopped" after a clean teardown on SIGINT/SIGTERM. stats() sends SIGUSR1
and reads the fresh line from the process log, so it works the same on both transports and in
both modes (DOCA's hardware counters can only be read by the process that owns the ports).
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import signal
import tarfile
import time
import zlib
from pathlib import Path

from .. import REPO_ROOT, dpu
from ..backends import load_backends, write_canonical
from ..errors import ConfigError, NodeError
from ..nodes.base import sudo_argv, sudo_refused
from ..shipping import remove_xenoflow_rules
from ..progcost import pinned_prog_id, xdp_prog_id
from .base import Flow, LoadBalancer, json_lines
from .inhardware import HardwareProof

TAG = "lb-xenoflow"
LB_DIR = REPO_ROOT / "lb"
BINARY = LB_DIR / "build" / "xenoflow"
# tools the DPU build runs besides the pkg-config modules from lb/meson.build
BUILD_TOOLS = ("cc", "meson", "ninja", "pkg-config")
# xenoflow.port_model values lb/src/main.c implements (-m); "switch" is refused there too
IMPLEMENTED_PORT_MODELS = ("vnf-hairpin",)
# what DOCA Flow cannot report about frames (the eBPF baseline's stats keys; None here)
UNOBSERVABLE = ("non_ipv4", "non_service", "malformed", "tx_error")


def unavailable(cfg) -> str | None:
    """Why XenoFlow cannot run on this config's testbed (xenobench.lb.unavailable), None when it can:
    the DOCA build (xenoflow.mode doca) runs on a BlueField's Arm cores, the node with role dpu; the
    emulation runs on the LB node."""
    if cfg.section("xenoflow")["mode"] != "doca" or cfg.nodes_with_role("dpu"):
        return None
    return (f"xenoflow.mode is doca (XenoFlow runs on a BlueField DPU's Arm cores) and {cfg.path} has no node with "
            "role dpu (fix: add the DPU's Arm side as a node with role: dpu and its ports p0/p1 as lb_port "
            "ingress/egress, or set xenoflow.mode: emulation to run the emulated build on the LB node)")


def parse_lines(text: str) -> list[dict]:
    """XenoFlow's JSON lines in a log, from the last "started" event on (lb.base.json_lines)."""
    return json_lines(text)


def failure_reason(log: str) -> str:
    """The "Failed to ..." messages of a failed start, root cause first, without the DOCA log
    prefixes ("[12:00:00:000][ERR][SOURCE] "); the last line if there is none."""
    msgs: list[str] = []
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        i = ln.find("Failed to")
        if i >= 0 and ln[i:] not in msgs:
            msgs.append(ln[i:])
    return "; ".join(msgs) if msgs else (lines[-1] if lines else "exited")


def build_errors(output: str, limit: int = 5) -> str:
    """The lines of a failed meson/ninja/cc run that say what failed (FAILED:, error:, ERROR:,
    undefined reference), at most `limit`; the last line if there are none."""
    keys = ("FAILED:", "error:", "ERROR:", "undefined reference", "Dependency")
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    hits = [ln for ln in lines if any(k in ln for k in keys) and not ln.startswith("cc ")]
    return "; ".join(hits[:limit]) if hits else (lines[-1] if lines else "no output")


def build_modules() -> list[str]:
    """The pkg-config modules of XenoFlow's DOCA build: every dependency('name') in lb/meson.build,
    in order (the file is the one owner of that list)."""
    out: list[str] = []
    for m in re.findall(r"dependency\(\s*'([^']+)'", (LB_DIR / "meson.build").read_text()):
        if m not in out:
            out.append(m)
    return out


def stats_from_line(d: dict) -> dict:
    """A XenoFlow stats line → the LoadBalancer stats shape (as the eBPF baseline's)."""
    out = {"backends": [{k: b[k] for k in ("name", "mac", "packets", "bytes", "pps")} for b in d["backends"]],
           "miss": d.get("miss"), **{k: None for k in UNOBSERVABLE}, "mode": d["mode"],
           "classes": d.get("classes", []), "seq": d.get("seq"), "time": d.get("time")}
    return out


class XenoFlowLB(LoadBalancer):
    kind = "xenoflow"
    tag = TAG
    _dry = False  # a dry run: paths on the DPU without asking it (home(connect=False))

    def __init__(self, testbed):
        super().__init__(testbed)
        self.sec = self.cfg.section("xenoflow")  # every default from config/schema/xenoflow.schema.yaml
        self.mode = self.sec["mode"]
        # DOCA: the BlueField's ARM side (role dpu); the emulation (or a testbed without a dpu
        # node): the LB node
        self.ncfg = (self.cfg.nodes_with_role("dpu") or [None])[0] if self.mode == "doca" else None
        self.ncfg = self.ncfg or self.cfg.role("lb")
        self.no_pin = (None if self.mode == "emulation" else
                       f"xenoflow.mode {self.mode!r} runs it in the DPU's eSwitch, not as an XDP program on a host "
                       "port (only the emulation pins its datapath: DOCA_FLOW_EMU_ATTACH)")
        self.ing = self.ncfg.lb_port("ingress")
        self.eg = self.ncfg.lb_port("egress")
        if self.ing is None or self.eg is None:
            raise ConfigError(f"Failed to set up {self.kind} on {self.ncfg.name}: it needs two interfaces with "
                              f"lb_port ingress and egress in {self.cfg.path}")

    @property
    def node(self):
        return self.testbed.node(self.ncfg.name)

    @property
    def in_hardware(self) -> HardwareProof:
        """The per-trial proof that XenoFlow ran in the BlueField's hardware (xenobench.lb.inhardware),
        read and judged by xenobench.measure.common.lb_stats/lb_checks: on the DPU node's ingress port
        in DOCA mode; not applicable to the emulation, which is an XDP program on the LB node."""
        if self.mode != "doca" or self.ncfg.role != "dpu":
            why = (f"xenoflow.mode {self.mode!r}: the emulated datapath is an XDP program on {self.ncfg.name}'s "
                   "port, with no BlueField whose Arm cores or eSwitch could be checked" if self.mode != "doca" else
                   f"{self.cfg.path} has no node with role dpu: XenoFlow runs on {self.ncfg.name}")
            return HardwareProof(self.cfg, why_not=why)
        return HardwareProof(self.cfg, lambda: self.node, self.ing.name)

    # --- command construction --------------------------------------------------------------
    def _sudo(self, argv: list[str]) -> list[str]:
        return sudo_argv(argv) if self.sec["sudo"] else argv

    def _remote_backends(self, bfile: Path) -> str:
        if self.mode == "doca":  # a fixed path: the sudoers rule names XenoFlow's exact arguments
            return dpu.backends_path(self.cfg, self.home(connect=not self._dry))
        return self.node.stage(bfile, f"{self.kind}-backends{bfile.suffix}", copy=False)

    def home(self, *, connect: bool = True, node=None) -> str:
        """The DPU login's working directory (ssh.workdir, else its home), absolute: where the
        relative xenoflow paths are. connect=False (a dry run): an absolute ssh.workdir, else the
        home Ubuntu gives the login (/home/USER), without asking the node."""
        if getattr(self, "_home", None):
            return self._home
        ssh = self.ncfg.ssh
        if ssh is not None and ssh.workdir and ssh.workdir.startswith("/"):
            self._home = ssh.workdir
        elif not connect:
            return "/root" if ssh is None or ssh.user == "root" else f"/home/{ssh.user}"
        else:
            self._home = (node or self.node).run(["pwd"]).stdout.strip()
        return self._home

    def app_argv(self, backends: str) -> list[str]:
        """XenoFlow's arguments with the backends file at `backends` (dpu.xenoflow_argv)."""
        return dpu.xenoflow_argv(self.cfg, backends)

    def sudo_commands(self) -> list[list[str]]:
        """Every command this XenoFlow runs as root on the DPU, exactly (the rule deploy prints)."""
        return dpu.root_commands(self.cfg, self.home(connect=not self._dry))

    def _log_path(self) -> str:
        return self.node.log_path(self.tag)

    def _build_env(self) -> dict:
        return self.sec.get("build_env") or {}

    def _with_pkg_config(self, script: str) -> list[str]:
        """sh -c script with DOCA's pkg-config directories in front of PKG_CONFIG_PATH."""
        dirs = ":".join(self._build_env().get("pkg_config_path") or [])
        pre = f"export PKG_CONFIG_PATH={shlex.quote(dirs)}${{PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}}; " if dirs else ""
        return ["sh", "-c", pre + script]

    def _build_env_check(self) -> list[str]:
        """Prints one line per missing tool ("tool NAME") or pkg-config module ("module NAME")."""
        tools = " ".join(BUILD_TOOLS)
        mods = " ".join(shlex.quote(m) for m in build_modules())
        return self._with_pkg_config(
            f'for t in {tools}; do command -v "$t" >/dev/null 2>&1 || echo "tool $t"; done; '
            f'for m in {mods}; do pkg-config --exists "$m" 2>/dev/null || echo "module $m"; done')

    def _apt_install(self, packages: list[str]) -> list[str]:
        return self._sudo(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
                           "--no-install-recommends", *packages])

    def _ovs(self) -> dict | None:
        return self.sec.get("ovs")

    def ovs_steps(self) -> list[tuple[str, list[str]]]:
        """The OVS step: the bridge must exist (ovs-vsctl br-exists), then one add-flow per rule."""
        cmds = dpu.ovs_commands(self.cfg)
        if not cmds:
            return []
        return [("ovs-check", self._sudo(cmds["check"][1])), *(("ovs", self._sudo(a)) for a in cmds["add"])]

    def deploy_steps(self, bfile: Path) -> list[tuple[str, list[str] | None]]:
        """(description, argv) in order; argv None for steps done by the harness itself (copies)."""
        remote_b = self._remote_backends(bfile)
        if self.mode == "emulation":
            return [("start", [str(BINARY), *self.app_argv(remote_b)])]
        src, build = self.sec["remote_src"], self.sec["build_dir"]
        steps: list[tuple[str, list[str] | None]] = [
            ("copy", ["mkdir", "-p", src]),
            ("copy", None),  # lb/ as a tarball → src (node.put), then unpacked:
            ("copy", ["tar", "-xzf", f"{src}.tar.gz", "-C", src]),
            ("copy", None),  # the backends file → remote_b
            ("build-env", self._build_env_check()),
            ("build", self._with_pkg_config(f"test -f {shlex.quote(build)}/build.ninja || "
                                            f"meson setup {shlex.quote(build)} {shlex.quote(src)}/lb -Demulation=false")),
            # ninja re-runs meson (and so pkg-config) when a meson.build changed
            ("build", self._with_pkg_config(f"ninja -C {shlex.quote(build)}")),
        ]
        steps += self.ovs_steps()
        hp = dpu.hugepages_commands(self.cfg)
        if hp:
            # the count on tee's stdin; the mount only where nothing is mounted yet (mountpoint -q)
            steps.append(("hugepages-count", self._sudo(hp[0])))
            steps.append(("hugepages-mount", self._sudo(hp[1])))
        if self.sec["sudo"]:  # the root-owned install of this build, through the root-owned helper
            steps.append(("installed", ["cmp", "--", f"{build}/xenoflow", dpu.BINARY]))
            steps.append(("start", sudo_argv(dpu.start_command(self.app_argv(remote_b)))))
        else:
            steps.append(("start", [f"{build}/xenoflow", *self.app_argv(remote_b)]))
        return steps

    @property
    def prog_pin(self) -> str:
        """Where the emulation pins its datapath when started with attach=False
        (DOCA_FLOW_EMU_ATTACH=pin:<path>, lb/README.md)."""
        return str(self.testbed.bpffs_dir / self.kind / "xb_emu")

    # --- the LoadBalancer contract ---------------------------------------------------------
    def start(self, backends=None, *, dry_run=False, attach=True, **opts) -> dict:
        """attach=False (emulation only): loaded, not attached; the datapath program is pinned at
        `prog_pin` (returned) for a switcher to attach (xenobench.xdpswitch). On DOCA XenoFlow runs
        in the BlueField's eSwitch, not as an XDP program on a host port: refused."""
        if not attach and self.no_pin:
            raise ConfigError(f"Failed to start {self.kind} loaded, not attached ({self.cfg.path}): {self.no_pin}")
        if self.sec["port_model"] not in IMPLEMENTED_PORT_MODELS:
            raise ConfigError(f"Failed to start {self.kind}: xenoflow.port_model {self.sec['port_model']!r} in "
                              f"{self.cfg.path} is not implemented in lb/src yet (DOCA Flow switch mode on a "
                              f"doca_dev, as the authors' later code); use "
                              f"{', '.join(IMPLEMENTED_PORT_MODELS)}")
        # XenoFlow reads JSON only: it gets the canonical form of the file (validated here; JSON or YAML)
        bfile = write_canonical(self.backends_file(backends), self.cfg.state_dir / "canonical-backends" / self.kind)
        if dry_run:
            self._dry = True
            try:
                return self._dry_run(bfile)
            finally:
                self._dry = False
        return self._start(bfile, attach)

    def _dry_run(self, bfile: Path) -> dict:
        """The commands start() would run, in order, without asking the node."""
        steps = self.deploy_steps(bfile)
        cmds = []
        count = int((self.sec["hugepages"] or {}).get("count", 0))
        for what, argv in steps:
            if argv is None:
                continue
            line = shlex.join(argv)
            cmds.append(f"{line}   # background, log {self._log_path()}" if what == "start" else
                        f"echo {count} | {line}" if what == "hugepages-count" else
                        f"mountpoint -q {shlex.quote(argv[-1])} || {line}" if what == "hugepages-mount" else
                        f"{line}   # else: the operator installs this build (xenobench deploy prints how)"
                        if what == "installed" else line)
        if self.mode == "doca":
            cmds.insert(1, f"# put {LB_DIR} (sources) → {self.ncfg.name}:{self.sec['remote_src']}.tar.gz")
            cmds.insert(3, f"# put {bfile} → {self.ncfg.name}:{self._remote_backends(bfile)}")
            i = next(i for i, (w, _) in enumerate(steps) if w == "build-env")
            at = cmds.index(shlex.join(steps[i][1])) + 1
            apt = self._build_env().get("apt_packages") or {}
            if self._build_env().get("install"):
                cmds.insert(at, f"# missing ones with an apt package (xenoflow.build_env.apt_packages): "
                                f"{shlex.join(self._apt_install(['<packages>']))}; anything else fails the deploy")
            else:
                can = [x for x in (*BUILD_TOOLS, *build_modules()) if x in apt]
                cmds.insert(at, "# anything missing fails the deploy, naming it (xenoflow.build_env.install: "
                                f"false; apt could install {', '.join(can) or 'none of them'})")
            if self._ovs():
                at = next(i for i, c in enumerate(cmds) if "ovs-vsctl br-exists" in c) + 1
                cmds.insert(at, "# bridge missing: fail naming the bridges of `ovs-vsctl list-br`")
        return {"commands": [f"# {self.kind} ({self.mode}) on {self.ncfg.name}", *cmds]}

    def _start(self, bfile: Path, attach: bool) -> dict:
        load_backends(bfile)  # a bad file fails here with the parser's message, nothing runs
        node = self.node
        if node.running(self.tag):
            raise NodeError(f"Failed to start {self.kind} on {node.name}: already running; "
                            f"`xenobench lb stop --lb {self.kind}` first")
        if self.mode == "emulation" and not BINARY.exists():
            raise NodeError(f"Failed to start {self.kind}: {BINARY} not built (run `make -C lb`)")
        steps = self.deploy_steps(bfile)
        ran: list[str] = []
        try:
            return self._run_steps(node, steps, bfile, ran, attach)
        except BaseException:
            # a failed start leaves no OVS rule behind (it would steer the host port past the LB)
            if self.mode == "doca" and any(w == "ovs" for w, _ in steps):
                remove_xenoflow_rules(self.cfg, node)
            raise

    def _run_steps(self, node, steps, bfile: Path, ran: list[str], attach: bool) -> dict:
        for what, argv in steps[:-1]:
            if argv is None:
                continue
            ran.append(shlex.join(argv))
            if what == "copy" and argv[0] == "mkdir":
                node.run(argv)
                node.put(self._tarball(), f"{self.sec['remote_src']}.tar.gz")
                continue
            if what == "copy" and argv[0] == "tar":
                node.run(argv)
                node.put(bfile, self._remote_backends(bfile))
                continue
            if what == "build-env":
                ran += self.check_build_env(node)
                continue
            if what == "ovs-check":
                self._check_bridge(node, argv)
                continue
            if what == "build":
                r = node.run(argv, timeout=600, check=False)
                if not r.ok:  # the compiler's and ninja's own lines, not ninja's last "build stopped"
                    raise NodeError(f"Failed to build xenoflow on {node.name}: `{shlex.join(argv)}` exited with "
                                    f"status {r.returncode}: {build_errors(r.stdout + r.stderr)}")
                continue
            if what == "hugepages-count":
                node.run(argv, input=f"{int(self.sec['hugepages']['count'])}\n")
                continue
            if what == "hugepages-mount":
                if not node.run(["mountpoint", "-q", argv[-1]], check=False).ok:
                    node.run(argv)
                continue
            if what == "installed":
                self._check_installed(node, argv)
                continue
            node.run(argv, timeout=600)
        argv = steps[-1][1]
        if self.mode == "emulation":
            node.stage(bfile, f"{self.kind}-backends{bfile.suffix}")  # a remote LB node reads a copy
        ran.append(shlex.join(argv))
        log_path = self._log_path()
        offset = len(node.read_text(log_path))
        env = {"DOCA_FLOW_EMU_XDP_MODE": self.sec["xdp_mode"]} if self.mode == "emulation" else None
        if not attach:  # the emulation's knob (lb/README.md): pinned, not attached
            node.run(["rm", "-rf", str(Path(self.prog_pin).parent)])
            node.run(["mkdir", "-p", str(Path(self.prog_pin).parent)])
            env["DOCA_FLOW_EMU_ATTACH"] = f"pin:{self.prog_pin}"
        h = node.start(self.tag, argv, log=log_path, env=env)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            text = node.read_text(h.log)[offset:]
            started = [d for d in parse_lines(text) if d.get("event") == "started"]
            if started:
                if not attach and pinned_prog_id(node, self.prog_pin) is None:
                    self.stop()
                    raise NodeError(f"Failed to start {self.kind} loaded, not attached on {node.name}: no program "
                                    f"pinned at {self.prog_pin} after its start (log {h.log})")
                return {"lb": self.kind, "node": node.name, "pid": h.pid, "mode": self.mode,
                        "split": started[0].get("split", "class"), "hash_fields": started[0].get("hash_fields", []),
                        "class_bits": started[0]["class_bits"], "slots": started[0]["slots"],
                        "log": h.log, "commands": ran, "attached": attach,
                        **({} if attach else {"prog_pin": self.prog_pin})}
            if not node.running(self.tag):
                self._end(node, node.handle(self.tag))
                why = failure_reason(text)
                raise NodeError(f"Failed to start {self.kind} on {node.name}: {why} (log {h.log})")
            time.sleep(0.05)
        self._end(node, node.handle(self.tag))
        raise NodeError(f"Failed to start {self.kind} on {node.name}: no start within 15 s; log {h.log}")

    def _check_installed(self, node, argv: list[str]) -> None:
        """The root-owned XenoFlow (dpu.BINARY) must be this build: the login may not run as root
        what it built itself (the sudoers rule names the installed program only)."""
        r = node.run(argv, check=False)
        if r.ok:
            return
        why = ("is not installed" if "No such file" in r.stderr and dpu.BINARY in r.stderr else
               "differs from this build" if r.returncode == 1 else (r.stderr.strip() or "cannot be compared"))
        raise NodeError(f"Failed to start {self.kind} on {node.name}: {dpu.BINARY} {why} ({argv[2]}); install it as "
                        f"root: {dpu.install_commands(self.cfg, self.home())[0]}")

    # --- the DPU's build environment and OVS -----------------------------------------------
    def _missing_build_deps(self, node) -> tuple[list[str], list[str]]:
        r = node.run(self._build_env_check(), timeout=120)
        tools = [ln.split(None, 1)[1] for ln in r.stdout.splitlines() if ln.startswith("tool ")]
        mods = [ln.split(None, 1)[1] for ln in r.stdout.splitlines() if ln.startswith("module ")]
        return tools, mods

    def check_build_env(self, node=None) -> list[str]:
        """Check (and with build_env.install, apt-install) what the DOCA build needs; raise
        NodeError naming what is missing. Returns the commands run besides the check."""
        node = node or self.node
        env = self._build_env()
        tools, mods = self._missing_build_deps(node)
        ran: list[str] = []
        if (tools or mods) and env.get("install"):
            apt = env.get("apt_packages") or {}
            pkgs = sorted({apt[x] for x in tools + mods if x in apt})
            if pkgs:
                argv = self._apt_install(pkgs)
                ran.append(shlex.join(argv))
                node.run(argv, timeout=900)
                tools, mods = self._missing_build_deps(node)
        if tools or mods:
            where = f"PKG_CONFIG_PATH={':'.join(env.get('pkg_config_path') or [])}:$PKG_CONFIG_PATH"
            what = []
            if mods:
                what.append(f"pkg-config modules {', '.join(mods)} ({where})")
            if tools:
                what.append(f"tools {', '.join(tools)}")
            apt = env.get("apt_packages") or {}
            fixable = sorted({apt[x] for x in tools + mods if x in apt})
            hint = []
            if fixable and not env.get("install"):
                hint.append(f"apt packages {' '.join(fixable)} (or xenoflow.build_env.install: true in {self.cfg.path})")
            if any(x not in apt for x in tools + mods):
                hint.append("the DOCA SDK 2.9 for the modules without a package (doca-*, libdpdk: DOCA's "
                            "DPDK), or their directory in xenoflow.build_env.pkg_config_path")
            raise NodeError(f"Failed to build xenoflow on {node.name}: missing {' and '.join(what)}; "
                            f"install {'; '.join(hint)}")
        return ran

    def _check_bridge(self, node, argv: list[str]) -> None:
        br = self._ovs()["bridge"]
        r = node.run(argv, check=False)
        if r.returncode == 0:
            return
        if r.returncode == 2:  # ovs-vsctl br-exists: 2 = no such bridge
            cmds = dpu.ovs_commands(self.cfg)
            have = node.run(self._sudo(cmds["check"][0]), check=False).stdout.split()
            held = dpu.port_bridges(self.cfg, lambda a: node.run(self._sudo(a), check=False))
            raise NodeError(f"Failed to apply the OVS rule on {node.name}: bridge {br!r} (xenoflow.ovs.bridge in "
                            f"{self.cfg.path}) does not exist; bridges: {', '.join(have) or 'none'}; fix: "
                            f"{dpu.bridge_fix(self.cfg, have, held)}")
        if sudo_refused(r):
            user = getattr(getattr(node, "ssh", None), "user", "the login")
            self.home(node=node)
            raise NodeError(f"Failed to apply the OVS rule on {node.name}: sudo asks {user} for a password "
                            f"(xenoflow.sudo: true runs `sudo -n`); install the rule "
                            f"`{dpu.sudoers_rule(user, self.sudo_commands())}` in {dpu.SUDOERS_FILE} "
                            f"(`xenobench deploy` prints the command)")
        err = (r.stderr or r.stdout).strip().splitlines()
        raise NodeError(f"Failed to apply the OVS rule on {node.name}: `{shlex.join(argv)}` exited with status "
                        f"{r.returncode}: {err[-1] if err else 'no output'} (is Open vSwitch running there?)")

    def apply_ovs(self, node=None) -> list[str]:
        """The deploy's OVS step on its own: bridge check, then the flow rules; the commands run."""
        node = node or self.node
        ran = []
        for what, argv in self.ovs_steps():
            ran.append(shlex.join(argv))
            if what == "ovs-check":
                self._check_bridge(node, argv)
            else:
                node.run(argv)
        return ran

    def ship_source(self, node=None) -> bool:
        """Copy lb/ to the DPU (xenoflow.remote_src) unless the same sources are there already
        (dpu.content_hash, kept in remote_src/.xenobench-hash); True if copied."""
        node = node or self.node
        src = self.sec["remote_src"]
        files = sorted(str(f.relative_to(LB_DIR.parent)) for f in LB_DIR.rglob("*")
                       if f.is_file() and "/build" not in str(f.relative_to(LB_DIR.parent)))
        digest = dpu.content_hash(LB_DIR.parent, files)
        if node.run(["cat", f"{src}/.xenobench-hash"], check=False).stdout.strip() == digest:
            return False
        node.run(["mkdir", "-p", src])
        node.put(self._tarball(), f"{src}.tar.gz")
        node.run(["sh", "-c", 'tar -xzf "$1.tar.gz" -C "$1" && echo "$2" > "$1/.xenobench-hash" && rm -f "$1.tar.gz"',
                  "sh", src, digest])
        return True

    def build(self, node=None) -> bool:
        """Build XenoFlow on the DPU from the shipped source (ship_source), as the login: the
        build-env check and meson/ninja of start(), nothing as root. False when ninja had nothing
        to do (the build was up to date)."""
        node = node or self.node
        ran: list[str] = []
        built = True
        for what, argv in self.deploy_steps(Path("backends.json")):
            if what == "build-env":
                ran += [shlex.join(argv), *self.check_build_env(node)]
            elif what == "build":
                ran.append(shlex.join(argv))
                r = node.run(argv, timeout=600, check=False)
                if not r.ok:
                    raise NodeError(f"Failed to build xenoflow on {node.name}: `{shlex.join(argv)}` exited with "
                                    f"status {r.returncode}: {build_errors(r.stdout + r.stderr)}")
                built = built and "ninja: no work to do" not in r.stdout
        return built

    def _tarball(self) -> Path:
        """lb/ (sources only, no build dirs) and bpf/ (the BPF build flags and stats header that
        lb/emu's datapath includes), as a .tar.gz."""
        import tempfile
        out = Path(tempfile.mkdtemp()) / "xenoflow-src.tar.gz"
        with tarfile.open(out, "w:gz") as tf:
            tf.add(LB_DIR, arcname="lb", filter=lambda ti: None if "/build" in ti.name else ti)
            tf.add(REPO_ROOT / "bpf", arcname="bpf")
        return out

    def _kill(self, h, sig: int) -> None:
        """Signal XenoFlow's process group; with `sudo` (DPU as a non-root user) through sudo,
        since the process runs as root."""
        node = self.node
        node.signal(h, sig, sudo=self.sec["sudo"])

    def _end(self, node, h) -> None:
        """End XenoFlow's process: SIGINT first, like Ctrl-C (XenoFlow destroys its pipe and ports;
        the emulation detaches XDP), then SIGTERM, then SIGKILL, each through sudo's helper where
        XenoFlow runs as root; then forget its record."""
        if h is None:
            return
        for sig, wait in ((signal.SIGINT, 5.0), (signal.SIGTERM, 2.0), (signal.SIGKILL, 1.0)):
            if not (node.running(self.tag) or node.orphans(h)):  # orphans: sudo died, XenoFlow lives on
                break
            self._kill(h, sig)
            deadline = time.monotonic() + wait
            while (node.running(self.tag) or node.orphans(h)) and time.monotonic() < deadline:
                time.sleep(0.05)
        node.stop(self.tag)  # forgets the handle (signals only what is still alive)

    def stop(self) -> bool:
        """Stop XenoFlow and remove what its start set up: the OVS rules whatever happened before
        (a start that failed after adding them left no process record), the emulation's XDP."""
        node = self.node
        h = node.handle(self.tag)
        was = h is not None and node.running(self.tag)
        # started with attach=False: its pinned datapath's id (the switcher may have left it attached)
        pinned = pinned_prog_id(node, self.prog_pin) if h is not None and self.mode == "emulation" else None
        self._end(node, h)
        if self.mode == "doca" and self._ovs():
            failed = remove_xenoflow_rules(self.cfg, node)
            if failed:
                raise NodeError("; ".join(failed))
        if h is None:
            return False
        if self.mode == "emulation" and pinned is not None:
            # pinned, not attached: the emulation unpinned it at its teardown (a crash leaves the pin);
            # a program on the port is detached only if it is this one
            if xdp_prog_id(self.node, self.ing.name) == pinned:
                node.run(["ip", "link", "set", "dev", self.ing.name, "xdp", "off"], check=False)
            node.run(["rm", "-rf", str(Path(self.prog_pin).parent)], check=False)
        elif self.mode == "emulation":
            left = xdp_prog_id(self.node, self.ing.name)
            if left:
                node.run(["ip", "link", "set", "dev", self.ing.name, "xdp", "off"], check=False)
            if left and was:  # a XenoFlow that died (kill -9) could not detach: no fault of its teardown
                raise NodeError(f"Failed to stop {self.kind} cleanly on {node.name}: XDP program {left} was left "
                                f"attached to {self.ing.name} (detached it now)")
        return was

    no_update = None
    #: classes whose entry was updated in place (one doca_flow_pipe_update_entry each: lb/src/update.c)
    update_entries_key = "changed"
    #: lb/src/update.h XF_ENTRY_UNIT, which its "updated" line carries as "entry_unit"
    update_entry_unit = "one doca_flow_pipe_update_entry per class whose backend changed, in place"

    def update(self, backends, *, timeout: float = 10.0) -> dict:
        """A runtime change (lb/src/update.c): SIGHUP makes XenoFlow read its -b file again and
        update in place the entry of each class whose backend changes, one operation per class
        (LoadBalancer.signal_update)."""
        node = self.node
        h = node.handle(self.tag)
        if h is None or not node.running(self.tag):
            raise NodeError(f"Failed to update {self.kind} on {node.name}: not running "
                            f"(`xenobench lb start --lb {self.kind}` first)")
        path = h.argv[h.argv.index("-b") + 1]
        return self.signal_update(node, h, path, backends, sudo=self.sec["sudo"], timeout=timeout)

    def stats(self, timeout: float = 5.0) -> dict:
        """Ask the running XenoFlow for a fresh stats line (SIGUSR1) and return it."""
        node = self.node
        h = node.handle(self.tag)
        if h is None or not node.running(self.tag):
            raise NodeError(f"Failed to read {self.kind} stats on {node.name}: not running")
        before = [d for d in parse_lines(node.read_text(h.log)) if "seq" in d]
        last = before[-1]["seq"] if before else 0
        self._kill(h, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fresh = [d for d in parse_lines(node.read_text(h.log)) if d.get("seq", 0) > last]
            if fresh:
                return stats_from_line(fresh[-1])
            time.sleep(0.03)
        raise NodeError(f"Failed to read {self.kind} stats on {node.name}: no stats line within {timeout} s "
                        f"(log {h.log})")


def make(testbed) -> XenoFlowLB:
    return XenoFlowLB(testbed)


# --- hash mode (lb/src/hash.h: xenoflow -H FIELDS) ---------------------------------------------------
#: what kind xenoflow-hash hashes (lb/src/hash.h XF_HASH_DEFAULT): the client socket's address and port
HASH_FIELDS = dpu.HASH_FIELDS
UDP = 17


def hash_tag(flow: Flow, fields=HASH_FIELDS) -> bytes | None:
    """The 32 bytes the emulated hash pipe hashes for `flow` (lb/emu/bpf/emu_hash.h): struct emu_key
    (lb/emu/bpf/emu_common.h: dst_mac, src_mac, eth_type, l3_type, l4_type, src_ip, dst_ip,
    next_proto, pad, src_port, dst_port, port; network byte order) with only the hashed fields and
    the selectors set: IPv4 (1), and UDP (2) when a port is hashed (lb/src/hash.c's match_mask).
    None when the pipe selects UDP and the flow is not: its frames miss."""
    f = set(fields)
    t = bytearray(32)
    t[14] = 1
    if f & {"src_port", "dst_port"}:
        if flow.proto != UDP:
            return None
        t[15] = 2
    if "src_ip" in f:
        t[16:20] = ipaddress.IPv4Address(flow.src).packed
    if "dst_ip" in f:
        t[20:24] = ipaddress.IPv4Address(flow.dst).packed
    if "proto" in f:
        t[24] = flow.proto
    if "src_port" in f:
        t[26:28] = flow.sport.to_bytes(2, "big")
    if "dst_port" in f:
        t[28:30] = flow.dport.to_bytes(2, "big")
    return bytes(t)


def hash_index(flow: Flow, fields=HASH_FIELDS, nr_entries: int = 2) -> int | None:
    """The index of the hash pipe's entry `flow` takes (doca_flow_pipe_calc_hash in the emulation):
    CRC-32 of hash_tag (reflected IEEE polynomial, initial value 0, no final XOR: zlib's CRC from
    ~0xffffffff, inverted back), read big-endian, masked to nr_entries rounded up to a power of 2
    (lb/README.md, "Hash pipes"). An index at or above nr_entries has no entry; None also when the
    flow misses the pipe's selectors (hash_tag)."""
    tag = hash_tag(flow, fields)
    if tag is None:
        return None
    crc = zlib.crc32(tag, 0xFFFFFFFF) ^ 0xFFFFFFFF
    return int.from_bytes(crc.to_bytes(4, "little"), "big") & ((1 << (nr_entries - 1).bit_length()) - 1)


class XenoFlowHashLB(XenoFlowLB):
    """XenoFlow in hash mode: the same binary, deploy, stats and update path with -H (lb/src/hash.h);
    the backends file's slots are the hash pipe's entries, so a weight is a number of entries."""
    kind = "xenoflow-hash"
    tag = "lb-xenoflow-hash"
    hash_fields = HASH_FIELDS
    #: lb/src/update.h XF_HASH_ENTRY_UNIT, which its "updated" line carries in hash mode
    update_entry_unit = "one doca_flow_pipe_update_entry per hash entry whose backend changed, in place"

    def app_argv(self, backends: str) -> list[str]:
        return dpu.hash_argv(super().app_argv(backends), self.hash_fields)

    def backend_of(self, flow: Flow, backends) -> str | None:
        """The backend of the emulated hash pipe's entry for `flow` (hash_index over the slot table);
        None on a BlueField (no_route) or when the flow misses the pipe."""
        if self.no_route:
            return None
        i = hash_index(flow, self.hash_fields, len(backends.slots))
        return backends.backends[backends.slots[i]].name if i is not None and i < len(backends.slots) else None

    @property
    def no_route(self) -> str | None:
        if self.mode == "emulation":
            return None
        return (f"xenoflow.mode {self.mode!r}: the BlueField hashes its own layout of the fields (the definer's, "
                "not documented; lb/README.md, \"Hash pipes\"), which only doca_flow_pipe_calc_hash on the DPU "
                "could say; the emulation's hash is not the hardware's")
