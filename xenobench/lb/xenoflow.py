"""XenoFlow (lb/) as a LoadBalancer: the emulated build on the namespace testbed, the DOCA build
on the BlueField's ARM side on the thesis testbed.

mode "emulation" (config `xenoflow.mode`, default on netns testbeds): lb/build/xenoflow (built by
`make -C lb`, DOCA Flow emulated on XDP) runs in the LB node's namespace with its ports bound to
the node's ingress/egress interfaces (EAL `-a p0 -a p1`).

mode "doca" (thesis testbed): on the node with role `dpu` (else `lb`), over SSH, in this order
and each command logged: copy lb/ there, build it with meson against the DOCA SDK, apply the
Open vSwitch rule(s) from the config (DESIGN §2: without them traffic goes through the ARM
cores), reserve hugepages, start XenoFlow with the configured EAL device arguments.

XenoFlow prints JSON lines (lb/src/main.c): "started", a "stats" line every interval and on
SIGUSR1, "final" and "stopped" after a clean teardown on SIGINT/SIGTERM. stats() sends SIGUSR1
and reads the fresh line from the process log, so it works the same on both transports and in
both modes (DOCA's hardware counters can only be read by the process that owns the ports).
"""

from __future__ import annotations

import json
import shlex
import signal
import tarfile
import time
from pathlib import Path

from .. import REPO_ROOT
from ..backends import load_backends
from ..errors import ConfigError, NodeError
from .base import LoadBalancer

TAG = "lb-xenoflow"
LB_DIR = REPO_ROOT / "lb"
BINARY = LB_DIR / "build" / "xenoflow"
DEFAULTS = {"stats_interval_s": 1.0, "queues": 4, "xdp_mode": "native",
            "remote_src": "/tmp/xenobench-xenoflow/src", "build_dir": "/tmp/xenobench-xenoflow/build",
            "ovs_rules": [], "hugepages": None, "sudo": False, "device_args": None}
# what DOCA Flow cannot report about frames (the eBPF baseline's stats keys; None here)
UNOBSERVABLE = ("non_ipv4", "non_service", "malformed", "tx_error")


def parse_lines(text: str) -> list[dict]:
    """XenoFlow's JSON lines in a log (DOCA log lines and anything else are skipped), from the
    last "started" event on (the log is appended to by every run)."""
    out: list[dict] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("event") == "started":
                out = []
            out.append(d)
    return out


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


def stats_from_line(d: dict) -> dict:
    """A XenoFlow stats line → the LoadBalancer stats shape (as the eBPF baseline's)."""
    out = {"backends": [{k: b[k] for k in ("name", "mac", "packets", "bytes", "pps")} for b in d["backends"]],
           "miss": d.get("miss"), **{k: None for k in UNOBSERVABLE}, "mode": d["mode"],
           "classes": d.get("classes", []), "seq": d.get("seq"), "time": d.get("time")}
    return out


class XenoFlowLB(LoadBalancer):
    kind = "xenoflow"

    def __init__(self, testbed):
        super().__init__(testbed)
        sec = self.cfg.section("xenoflow") or {}
        self.sec = {**DEFAULTS, **sec}
        self.mode = self.sec["mode"]  # default (emulation) from config/schema/xenoflow.schema.yaml
        # DOCA: the BlueField's ARM side (role dpu); the emulation (or a testbed without a dpu
        # node): the LB node
        self.ncfg = (self.cfg.nodes_with_role("dpu") or [None])[0] if self.mode == "doca" else None
        self.ncfg = self.ncfg or self.cfg.role("lb")
        self.ing = self.ncfg.lb_port("ingress")
        self.eg = self.ncfg.lb_port("egress")
        if self.ing is None or self.eg is None:
            raise ConfigError(f"Failed to set up xenoflow on {self.ncfg.name}: it needs two interfaces with "
                              f"lb_port ingress and egress in {self.cfg.path}")

    @property
    def node(self):
        return self.testbed.node(self.ncfg.name)

    # --- command construction --------------------------------------------------------------
    def _sudo(self, argv: list[str]) -> list[str]:
        return ["sudo", *argv] if self.sec["sudo"] else argv

    def _device_args(self) -> list[str]:
        if self.sec["device_args"]:
            return [str(a) for a in self.sec["device_args"]]
        return ["-a", self.ing.name, "-a", self.eg.name]

    def _app_args(self, backends: str) -> list[str]:
        return ["--", "-b", backends, "-s", self.eg.mac,
                "-i", str(int(float(self.sec["stats_interval_s"]) * 1000)), "-q", str(self.sec["queues"])]

    def _remote_backends(self, bfile: Path) -> str:
        return self.node.stage(bfile, f"xenoflow-backends{bfile.suffix}", copy=False)

    def _log_path(self) -> str:
        return self.node.log_path(TAG)

    def deploy_steps(self, bfile: Path) -> list[tuple[str, list[str] | None]]:
        """(description, argv) in order; argv None for steps done by the harness itself (copies)."""
        remote_b = self._remote_backends(bfile)
        if self.mode == "emulation":
            return [("start", [str(BINARY), *self._device_args(), *self._app_args(remote_b)])]
        src, build = self.sec["remote_src"], self.sec["build_dir"]
        steps: list[tuple[str, list[str] | None]] = [
            ("copy", ["mkdir", "-p", src]),
            ("copy", None),  # lb/ as a tarball → src (node.put), then unpacked:
            ("copy", ["tar", "-xzf", f"{src}.tar.gz", "-C", src]),
            ("copy", None),  # the backends file → remote_b
            ("build", ["sh", "-c", f"test -f {shlex.quote(build)}/build.ninja || "
                                   f"meson setup {shlex.quote(build)} {shlex.quote(src)}/lb -Demulation=false"]),
            ("build", ["ninja", "-C", build]),
        ]
        for rule in self.sec["ovs_rules"]:
            steps.append(("ovs", self._sudo(shlex.split(rule) if isinstance(rule, str) else list(rule))))
        hp = self.sec["hugepages"]
        if hp:
            size = int(hp.get("size_kb", 2048))
            steps.append(("hugepages", self._sudo(["sh", "-c", f"echo {int(hp['count'])} > "
                                                   f"/sys/kernel/mm/hugepages/hugepages-{size}kB/nr_hugepages"])))
            mnt = hp.get("mount", "/dev/hugepages")
            steps.append(("hugepages", self._sudo(["sh", "-c", f"mountpoint -q {mnt} || "
                                                   f"mount -t hugetlbfs -o pagesize={size}K nodev {mnt}"])))
        steps.append(("start", self._sudo([f"{build}/xenoflow", *self._device_args(), *self._app_args(remote_b)])))
        return steps

    # --- the LoadBalancer contract ---------------------------------------------------------
    def start(self, backends=None, *, dry_run=False, **opts) -> dict:
        bfile = Path(self.backends_file(backends))
        steps = self.deploy_steps(bfile)
        if dry_run:
            cmds = []
            for what, argv in steps:
                if argv is None:
                    continue
                cmds.append(shlex.join(argv) if what != "start" else f"{shlex.join(argv)}   # background, log {self._log_path()}")
            if self.mode == "doca":
                cmds.insert(1, f"# put {LB_DIR} (sources) → {self.ncfg.name}:{self.sec['remote_src']}.tar.gz")
                cmds.insert(3, f"# put {bfile} → {self.ncfg.name}:{self._remote_backends(bfile)}")
            return {"commands": [f"# xenoflow ({self.mode}) on {self.ncfg.name}", *cmds]}
        load_backends(bfile)  # a bad file fails here with the parser's message, nothing runs
        node = self.node
        if node.running(TAG):
            raise NodeError(f"Failed to start xenoflow on {node.name}: already running; "
                            "`xenobench lb stop --lb xenoflow` first")
        if self.mode == "emulation" and not BINARY.exists():
            raise NodeError(f"Failed to start xenoflow: {BINARY} not built (run `make -C lb`)")
        ran = []
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
                node.stage(bfile, f"xenoflow-backends{bfile.suffix}")
                continue
            node.run(argv, timeout=600)
        argv = steps[-1][1]
        if self.mode == "emulation":
            node.stage(bfile, f"xenoflow-backends{bfile.suffix}")  # a remote LB node reads a copy
        ran.append(shlex.join(argv))
        log_path = self._log_path()
        offset = len(node.read_text(log_path))
        env = {"DOCA_FLOW_EMU_XDP_MODE": self.sec["xdp_mode"]} if self.mode == "emulation" else None
        h = node.start(TAG, argv, log=log_path, env=env)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            text = node.read_text(h.log)[offset:]
            started = [d for d in parse_lines(text) if d.get("event") == "started"]
            if started:
                return {"lb": "xenoflow", "node": node.name, "pid": h.pid, "mode": self.mode,
                        "class_bits": started[0]["class_bits"], "slots": started[0]["slots"],
                        "log": h.log, "commands": ran}
            if not node.running(TAG):
                node.stop(TAG)
                why = failure_reason(text)
                raise NodeError(f"Failed to start xenoflow on {node.name}: {why} (log {h.log})")
            time.sleep(0.05)
        node.stop(TAG)
        raise NodeError(f"Failed to start xenoflow on {node.name}: no start within 15 s; log {h.log}")

    def _tarball(self) -> Path:
        """lb/ (sources only, no build dirs) plus the shared backends vectors, as a .tar.gz."""
        import tempfile
        out = Path(tempfile.mkdtemp()) / "xenoflow-src.tar.gz"
        with tarfile.open(out, "w:gz") as tf:
            tf.add(LB_DIR, arcname="lb", filter=lambda ti: None if "/build" in ti.name else ti)
        return out

    def _kill(self, h, sig: int) -> None:
        """Signal XenoFlow's process group; with `sudo` (DPU as a non-root user) through sudo,
        since the process runs as root."""
        node = self.node
        node.signal(h, sig, sudo=self.sec["sudo"])

    def stop(self) -> bool:
        node = self.node
        h = node.handle(TAG)
        if h is None:
            return False
        was = node.running(TAG)
        # SIGINT first, like Ctrl-C: XenoFlow destroys its pipe and ports (the emulation detaches XDP)
        self._kill(h, signal.SIGINT)
        deadline = time.monotonic() + 5
        while node.running(TAG) and time.monotonic() < deadline:
            time.sleep(0.05)
        node.stop(TAG)  # SIGTERM/SIGKILL only if still alive; forgets the handle
        if self.mode == "emulation":
            left = self._xdp_attached()
            if left:
                node.run(["ip", "link", "set", "dev", self.ing.name, "xdp", "off"], check=False)
                raise NodeError(f"Failed to stop xenoflow cleanly on {node.name}: XDP program {left} was left "
                                f"attached to {self.ing.name} (detached it now)")
        return was

    def _xdp_attached(self) -> int | None:
        r = self.node.run(["ip", "-j", "link", "show", "dev", self.ing.name], check=False)
        try:
            links = json.loads(r.stdout or "[]")
        except ValueError:
            return None
        xdp = links[0].get("xdp") if links else None
        return xdp.get("prog", {}).get("id") if xdp else None

    def running(self) -> bool:
        return self.node.running(TAG)

    def stats(self, timeout: float = 5.0) -> dict:
        """Ask the running XenoFlow for a fresh stats line (SIGUSR1) and return it."""
        node = self.node
        h = node.handle(TAG)
        if h is None or not node.running(TAG):
            raise NodeError(f"Failed to read xenoflow stats on {node.name}: not running")
        before = [d for d in parse_lines(node.read_text(h.log)) if "seq" in d]
        last = before[-1]["seq"] if before else 0
        self._kill(h, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fresh = [d for d in parse_lines(node.read_text(h.log)) if d.get("seq", 0) > last]
            if fresh:
                return stats_from_line(fresh[-1])
            time.sleep(0.03)
        raise NodeError(f"Failed to read xenoflow stats on {node.name}: no stats line within {timeout} s "
                        f"(log {h.log})")


def make(testbed) -> XenoFlowLB:
    return XenoFlowLB(testbed)
