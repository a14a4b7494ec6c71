"""The harness face of every load balancer that is an XDP program run by a controller agent
(xenobench.agents.xdp_lb): the eBPF baseline, the wire reference, and any XDP LB added the same way.

A driver subclass names its kind and agent module and adds the agent options only it has
(`extra_args`); this class stages the backends file the harness validated (its canonical JSON, as
XenoFlow gets it) on the LB node, starts the agent there and waits for its "started" line, stops it,
and reads its counters on the node through the agent's own `read_stats` (bpftool there), so it works
over either transport.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path

from ..agents.bpf import percpu_sum
from ..backends import write_canonical
from ..errors import ConfigError, NodeError, ProgramRejected
from ..progcost import remove_left_program
from .base import CONTROLLER_START_S, UPDATE_TIMEOUT_S, LoadBalancer


#: what an agent's failed start says when the kernel (the verifier, the loader) or the build refused its
#: program (xenobench.agents.bpf.load_pinned): no attempt changes it
PROGRAM_REFUSED = ("`bpftool prog loadall ", ": not built (run `")


class XdpControllerLB(LoadBalancer):
    #: the agent module (an XdpLbAgent's `python -m` entry point), e.g. "xenobench.agents.ebpf_lb"
    agent: str = ""
    #: whether the LB forwards out of a second port (p0 -> p1); False: XDP_TX out of its ingress
    needs_egress: bool = False
    #: the agents' update reports count their map writes (XdpLbAgent.update)
    update_entries_key = "entries_written"
    update_entry_unit = "one BPF map element written in place (a class's slot, a backend's entry)"
    no_pin = None  # an XDP program: loaded, not attached on request (the agent's --no-attach)

    @property
    def tag(self) -> str:
        return f"lb-{self.kind}"

    @property
    def pindir(self) -> Path:
        return self.testbed.bpffs_dir / self.kind

    @property
    def statedir(self) -> Path:
        """Where the agent keeps its mode and backends copy, on the LB node."""
        return Path(self.node.path(self.kind))

    def ports(self):
        """(LB node config, ingress, egress or None)."""
        lb = self.cfg.role("lb")
        ing, eg = lb.lb_port("ingress") or lb.iface(), lb.lb_port("egress")
        if eg is None and self.needs_egress:
            raise ConfigError(f"Failed to start {self.kind} on {lb.name}: it needs an egress port "
                              f"(nodes.{lb.name}.interfaces[].lb_port: egress in {self.cfg.path})")
        return lb, ing, eg

    def extra_args(self, ingress, egress) -> list[str]:
        """The agent options only this LB has."""
        return []

    def interval_s(self) -> float:
        return float(self.cfg.section("ebpf")["stats_interval_s"])

    @property
    def prog_pin(self) -> str:
        """Where the agent pins its XDP program on the LB node (what a switcher attaches when the LB
        was started with attach=False)."""
        return str(self.pindir / "progs" / importlib.import_module(self.agent).AGENT.prog)

    def argv(self, staged: str, generic: bool = False, attach: bool = True) -> list[str]:
        _, ing, eg = self.ports()
        return self.node.python_argv(
            self.agent, "run", "--backends", staged, "--ingress", ing.name,
            *(["--egress", eg.name] if eg else []), "--src-mac", (eg or ing).mac,
            "--pin-dir", str(self.pindir), "--state-dir", str(self.statedir),
            "--interval", str(self.interval_s()), *(["--generic"] if generic else []),
            *([] if attach else ["--no-attach"]), *self.extra_args(ing, eg))

    def start(self, backends=None, *, dry_run=False, generic=False, attach=True, **opts) -> dict:
        """attach=False: loaded, not attached (the agent's --no-attach): its program is pinned at
        `prog_pin` (returned) and its maps filled, for a switcher to attach (xenobench.xdpswitch)."""
        # the agent gets the canonical JSON of the file (validated here; JSON or YAML), as XenoFlow does
        # (a bad file fails here, before anything runs on the node)
        bfile = write_canonical(self.backends_file(backends), self.cfg.state_dir / "canonical-backends" / self.kind,
                                self.weights)
        node = self.node
        name = f"{self.kind}-backends{Path(bfile).suffix}"
        argv = self.argv(node.stage(bfile, name, copy=False), generic, attach)
        if dry_run:
            return {"commands": [" ".join(argv)]}
        if node.running(self.tag):
            raise NodeError(f"Failed to start {self.kind} on {node.name}: already running; "
                            f"`xenobench lb stop --lb {self.kind}` first")
        node.stage(bfile, name)
        self.provide_needs()
        try:
            h = node.start_until(self.tag, argv, '"event": "started"', what=self.kind, timeout=CONTROLLER_START_S)
        except BaseException as e:
            # an agent that raised, exited or never answered while it set up may have pinned its maps
            # and program (and attached it): nothing of it stays on the node
            try:
                remove_left_program(node, self.ports()[1].name, self.pindir,
                                    importlib.import_module(self.agent).AGENT.prog)
            finally:
                self.withdraw_needs()
            if isinstance(e, NodeError) and any(m in str(e) for m in PROGRAM_REFUSED):
                raise ProgramRejected(str(e)) from None
            raise
        return {"lb": self.kind, "node": node.name, "pid": h.pid,
                "mode": "generic" if generic else "native", "log": h.log, "attached": attach,
                "prog_pin": self.prog_pin}

    def stop(self) -> bool:
        try:
            was = self.node.stop(self.tag, timeout=5)
            if not was:  # an agent that died (kill -9) left its program attached and its maps pinned
                remove_left_program(self.node, self.ports()[1].name, self.pindir,
                                    importlib.import_module(self.agent).AGENT.prog)
            return was
        finally:
            self.withdraw_needs()

    @property
    def can_update(self) -> bool:
        return importlib.import_module(self.agent).AGENT.update is not None

    def update(self, backends, *, timeout: float = UPDATE_TIMEOUT_S) -> dict:
        """The agent's runtime change (XdpLbAgent.update, SIGHUP), if it has one."""
        if importlib.import_module(self.agent).AGENT.update is None:
            return super().update(backends, timeout=timeout)
        node = self.node
        h = node.handle(self.tag)
        if h is None or not node.running(self.tag):
            raise NodeError(f"Failed to update {self.kind} on {node.name}: not running "
                            f"(`xenobench lb start --lb {self.kind}` first)")
        path = h.argv[h.argv.index("--backends") + 1]
        return self.signal_update(node, h, path, backends, timeout=timeout)

    def backend_of(self, flow, backends) -> str | None:
        """Its agent's answer (XdpLbAgent.route: the rule its program follows), else the class rule
        for a kind that splits by class (LoadBalancer.backend_of)."""
        route = importlib.import_module(self.agent).AGENT.route
        if route is not None:
            return route(backends, flow)
        return super().backend_of(flow, backends)

    def _answers_routes(self) -> bool:
        return (type(self).backend_of is not XdpControllerLB.backend_of
                or importlib.import_module(self.agent).AGENT.route is not None)

    def forwarded(self) -> int:
        """One dump of the agent's per-backend map where it names one (XdpLbAgent.forwarded_map): the
        same sum stats() gives, without reading the agent's other maps and files."""
        spec = importlib.import_module(self.agent).AGENT
        if spec.forwarded_map is None:
            return super().forwarded()
        node, pin = self.node, self.pindir / "maps" / spec.forwarded_map
        r = node.run(["bpftool", "map", "dump", "pinned", str(pin), "-j"], check=False)
        if not r.ok:
            raise NodeError(f"Failed to read {self.kind} counters on {node.name}: not running (no pinned map "
                            f"{pin}: {r.stderr.strip()[:200]})")
        st = percpu_sum(pin, "<QQ", run=lambda *a: r.stdout)
        return int(sum(v[0] for k, v in st.items() if spec.forwarded_keys is None or k < spec.forwarded_keys))

    def stats(self) -> dict:
        node = self.node
        if not node.run(["test", "-d", str(self.pindir / "maps")], check=False).ok:
            raise NodeError(f"Failed to read {self.kind} stats on {node.name}: not running (no pinned maps "
                            f"under {self.pindir})")
        mode = node.read_text(str(self.statedir / "mode")).strip() or "native"
        # the backends file the running agent loaded (it keeps a copy in its state dir)
        names = node.run(["ls", str(self.statedir)], check=False).stdout.split()
        copy = next((n for n in names if n.startswith("backends.")), None)
        local = Path(tempfile.mkdtemp()) / (copy or "backends.json")
        try:
            if copy:
                local.write_text(node.read_text(str(self.statedir / copy)))
            else:
                shutil.copyfile(self.backends_file(None), local)
            spec = importlib.import_module(self.agent).AGENT
            return spec.read_stats(self.pindir, local, mode, run=lambda *a: node.run(["bpftool", *a]).stdout)
        finally:
            shutil.rmtree(local.parent, ignore_errors=True)


class DeclaredXdpLB(XdpControllerLB):
    """An LB a config declares (`lbs.<name>`, config/schema/lbs.schema.yaml; xenobench.lb.LBS):
    its agent module (an XdpLbAgent named AGENT: how its maps are filled and read) and, for an
    agent built without an object of its own, the BPF object passed to it as --obj."""

    def __init__(self, testbed, kind):
        super().__init__(testbed)
        self.kind = kind.name
        self.entry = dict(kind.declared)
        self.agent = self.entry["agent"]
        self.needs_egress = bool(self.entry.get("egress", True))
        self.no_update = (f"its agent {self.agent} has no update path (XdpLbAgent.update is None)")

    def _spec(self):
        where = f"Failed to load load balancer {self.kind!r} (lbs.{self.kind}.agent in {self.cfg.path})"
        try:
            spec = getattr(importlib.import_module(self.agent), "AGENT", None)
        except ImportError as e:
            raise ConfigError(f"{where}: {e} (install the package that has it, or fix the module name)") from None
        if spec is None:
            raise ConfigError(f"{where}: module {self.agent} defines no AGENT (an "
                              "xenobench.agents.xdp_lb.XdpLbAgent)")
        return spec

    def extra_args(self, ingress, egress) -> list[str]:
        obj = self.entry.get("bpf_object")
        if self._spec().obj is not None:
            return []
        if not obj:
            raise ConfigError(f"Failed to start {self.kind}: its agent {self.agent} loads no object of its own; "
                              f"give lbs.{self.kind}.bpf_object in {self.cfg.path}")
        path = self.cfg.resolve(obj)
        if not path.is_file():
            raise ConfigError(f"Failed to start {self.kind}: lbs.{self.kind}.bpf_object {obj!r} in {self.cfg.path}: "
                              f"no such file {path} (build it first)")
        return ["--obj", self.node.stage(path, f"{self.kind}.bpf.o", copy=False)]

    def start(self, backends=None, *, dry_run=False, **opts) -> dict:
        self._spec()
        obj = self.entry.get("bpf_object")
        if obj and not dry_run:
            self.node.stage(self.cfg.resolve(obj), f"{self.kind}.bpf.o")
        return super().start(backends, dry_run=dry_run, **opts)
