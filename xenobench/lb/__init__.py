"""Load balancers under test, driven alike by experiments and by `xenobench lb ...`.

This module is the one list of LB kinds: the config schema's LB enums (xenobench.config), the
CLI's choices, the figures' labels (xenobench.plots), the build (bpf_dir) and the benchmarks all read
`LBS`. It holds what config and analysis need to know of a kind without loading its driver (label,
how it splits, where its data plane is built); what running it needs is its driver's
(`make(testbed) -> LoadBalancer`, xenobench.lb.base).

`LBS` is made of three parts, in this order, and no name is given twice:
1. the built-in kinds (`BUILTIN`: this repository's drivers, xenobench.lb.<module>);
2. the kinds installed Python packages register under the entry-point group `xenobench.lbs`
   (`ENTRY_POINT_GROUP`): the entry point's name is the kind's name, its object an `LBKind` whose
   `module` is the package's driver module (imported only when the kind is driven, by get_lb);
3. the kinds a loaded config declares in its `lbs:` section (`declare`): an XDP program and the
   agent module that fills its maps, driven by xenobench.lb.xdp's DeclaredXdpLB.
A name given by two of them (a package reusing a built-in's name, two packages, a package and a
config) is refused naming both, when the list is first read. The declared kinds are the last loaded
config's; get_lb declares again those of the config of the testbed it is given.

Adding a load balancer: docs/extending.md.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata

from ..errors import ConfigError

#: the pseudo-kind of the RTT experiments: the client sends straight to the DNS backend
NONE = "none"
#: the entry-point group an out-of-tree package registers its LB kinds under (pyproject.toml:
#: [project.entry-points."xenobench.lbs"] mylb = "mypackage:KIND")
ENTRY_POINT_GROUP = "xenobench.lbs"


@dataclass(frozen=True)
class LBKind:
    name: str
    label: str            # how figures and reports name it
    #: its driver module, whose make(testbed) returns the driver: a built-in's as
    #: xenobench.lb.<module> ("ebpf"), an out-of-tree one's as its full dotted path ("mylb.driver")
    module: str
    reference: bool = False  # a reference line (the testbed's limit), not a load balancer under test
    #: how it picks a backend, in words: "class" (the source address's class in the backends file's
    #: slot table, so a profile's split is exact) or any other rule ("flow hash": Katran's ring; "hash of
    #: source and port"; ...), whose split is measured, never read off a split's caption. Which backend a
    #: given flow reaches is its driver's answer (xenobench.lb.base.LoadBalancer.backend_of)
    split_by: str = "class"
    #: it sends what it forwards back out of its ingress port (XDP_TX: Katran), not out of an egress port
    out_of_ingress: bool = False
    #: the top-level folder whose Makefile builds its data plane (scripts/build.sh builds every such
    #: folder; an SSH LB node gets its BPF objects from <bpf_dir>/build); None: built elsewhere
    #: (Katran: from a Katran checkout, xenobench.katran; an out-of-tree LB: by its own package)
    bpf_dir: str | None = None
    #: the BPF objects its agent loads on the LB node (globs under the repository: what `deploy`
    #: ships to an SSH LB node); () for a data plane built on the node (XenoFlow) or elsewhere
    bpf_objects: tuple[str, ...] = ()
    #: where the kind comes from: "built-in", "entry point <name> of <distribution>", "config <file>"
    origin: str = "built-in"
    #: a config-declared kind only (origin "config ..."): its `lbs.<name>` entry with the schema's
    #: defaults (agent, bpf_object, egress, ...), what xenobench.lb.xdp.DeclaredXdpLB runs
    declared: tuple[tuple[str, object], ...] = ()


BUILTIN: tuple[LBKind, ...] = (
    LBKind("xenoflow", "XenoFlow", "xenoflow", bpf_dir="lb"),
    LBKind("xenoflow-hash", "XenoFlow (hash)", "xenoflow_hash", split_by="hash of source address and port",
           bpf_dir="lb"),
    LBKind("ebpf", "eBPF/XDP LB", "ebpf", bpf_dir="ebpf_baseline", bpf_objects=("ebpf_baseline/build/lb.bpf.o",)),
    LBKind("katran", "Katran", "katran", split_by="flow hash", out_of_ingress=True),
    LBKind("wire", "wire (no-op, the reference)", "wire", reference=True, bpf_dir="switch",
           bpf_objects=("switch/build/wire.bpf.o",)),
)
#: labels of the kinds that are not measured here but appear in published numbers or as RTT paths
OTHER_LABELS = {NONE: "no LB", "kakao-loopback": "Kakao loopback",
                "kakao-255": "Kakao 255 backends"}
RESERVED = (NONE, *OTHER_LABELS)  # names no registered kind may take

_DESCRIPTOR_FIELDS = ("label", "module", "reference", "split_by", "out_of_ingress")


def _entry_point_origin(ep) -> str:
    dist = getattr(ep, "dist", None)
    return f"entry point {ep.name} = {ep.value} of {dist.name if dist else 'an unnamed distribution'}"


def _path_key() -> tuple:
    """What the installed distributions depend on: sys.path and each of its folders' mtime (an
    install or uninstall adds or removes a folder's .dist-info)."""
    out = []
    for p in sys.path:
        try:
            out.append((p, os.stat(p or ".").st_mtime_ns))
        except OSError:
            out.append((p, None))
    return tuple(out)


class _Kinds(Mapping):
    """LBS: name -> LBKind over the three parts (module docstring). Entry points are found again
    when sys.path or one of its folders changes (_path_key); an entry point's object is loaded the
    first time its kind is read."""

    def __init__(self):
        self._builtin = {k.name: k for k in BUILTIN}
        self._declared: dict[str, LBKind] = {}
        self._eps: dict[str, object] = {}
        self._loaded: dict[str, LBKind] = {}
        self._scanned: tuple | None = None

    # -- entry points ------------------------------------------------------------------------
    def _scan(self) -> None:
        key = _path_key()
        if key == self._scanned:
            return
        found: dict[str, object] = {}
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in found and found[ep.name].value != ep.value:
                raise ConfigError(f"Failed to register load balancer {ep.name!r}: two installed packages name it "
                                  f"({_entry_point_origin(found[ep.name])}; {_entry_point_origin(ep)}): "
                                  "uninstall one of them")
            found.setdefault(ep.name, ep)
        for name, ep in found.items():
            if name in self._builtin or name in RESERVED:
                raise ConfigError(f"Failed to register load balancer {name!r} from {_entry_point_origin(ep)}: "
                                  f"{name!r} is a built-in kind's name; rename the entry point")
        self._eps = dict(sorted(found.items()))
        self._loaded = {n: k for n, k in self._loaded.items() if n in self._eps}
        self._scanned = key
        for name, k in self._declared.items():
            if name in self._eps:
                raise ConfigError(f"Failed to declare load balancer {name!r} ({k.origin}): an installed package "
                                  f"registers it ({_entry_point_origin(self._eps[name])}); rename lbs.{name}")

    def _load(self, name: str) -> LBKind:
        if name in self._loaded:
            return self._loaded[name]
        ep = self._eps[name]
        where = f"Failed to load load balancer {name!r} ({_entry_point_origin(ep)})"
        try:
            obj = ep.load()
        except Exception as e:  # a broken plugin is named, never a traceback
            raise ConfigError(f"{where}: {type(e).__name__}: {e}") from None
        missing = [f for f in ("label", "module") if not isinstance(getattr(obj, f, None), str)]
        if missing:
            raise ConfigError(f"{where}: its object {obj!r} has no {' or '.join(missing)} (give an "
                              "xenobench.lb.LBKind)")
        if getattr(obj, "name", name) != name:
            raise ConfigError(f"{where}: its LBKind is named {obj.name!r}, the entry point {name!r}: "
                              "give both the same name")
        fields = {f: getattr(obj, f) for f in _DESCRIPTOR_FIELDS if hasattr(obj, f)}
        k = LBKind(name=name, bpf_dir=None, origin=_entry_point_origin(ep), **fields)
        if "." not in k.module:
            raise ConfigError(f"{where}: module {k.module!r} is not a full dotted module path (as "
                              "'mypackage.driver'): only the built-in kinds name a module of xenobench.lb")
        self._loaded[name] = k
        return k

    # -- the mapping -------------------------------------------------------------------------
    def names(self) -> tuple[str, ...]:
        self._scan()
        return (*self._builtin, *self._eps, *self._declared)

    def __getitem__(self, name: str) -> LBKind:
        if name in self._builtin:
            return self._builtin[name]
        self._scan()
        if name in self._eps:
            return self._load(name)
        return self._declared[name]

    def __iter__(self):
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name) -> bool:
        return name in self._builtin or name in self.names()

    # -- config-declared kinds ---------------------------------------------------------------
    def declare(self, section: dict, source: str) -> None:
        """The kinds of a config's `lbs:` section (validated, with its schema's defaults); they
        replace what a config loaded before declared (one config at a time: the last loaded)."""
        self._scan()
        new = {}
        for name, e in (section or {}).items():
            if name in self._builtin or name in RESERVED:
                raise ConfigError(f"Failed to load config {source}: lbs.{name}: {name!r} is a built-in kind's "
                                  "name; give your LB another name")
            if name in self._eps:
                raise ConfigError(f"Failed to load config {source}: lbs.{name}: an installed package registers "
                                  f"{name!r} ({_entry_point_origin(self._eps[name])}); give your LB another name")
            new[name] = LBKind(name=name, label=e.get("label") or name, module="xdp",
                               reference=bool(e.get("reference")), split_by=e.get("split_by", "class"),
                               out_of_ingress=not e.get("egress", True), origin=f"config {source}",
                               declared=tuple(sorted(e.items())))
        self._declared = new


LBS: _Kinds = _Kinds()


def kinds() -> tuple[str, ...]:
    """Every kind's name, in LBS's order (built-in, entry points, declared)."""
    return LBS.names()


def __getattr__(name: str):
    # KINDS reads the list as it is now (a config read since may have declared kinds)
    if name == "KINDS":
        return kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def declare(section: dict, source: str) -> None:
    """Register the LB kinds a config's `lbs:` section declares (xenobench.config.load_config),
    in place of those of the config loaded before."""
    LBS.declare(section, source)


def label(kind: str) -> str:
    """How a figure names an LB kind (an unknown one by its own name)."""
    k = LBS.get(kind)
    return k.label if k else OTHER_LABELS.get(kind, kind)


def split_measured(kind: str) -> bool:
    """Whether what each backend gets through the kind is measured rather than set by a profile's
    class split: it picks backends by another rule than the class (split_by: a hash, a ring, ...)."""
    k = LBS.get(kind)
    return bool(k and k.split_by != "class")


by_hash = split_measured  # the name the figures read (xenobench.plots)


def _driver_module(kind: str, cfg):
    """(LBKind, its driver module) of a kind, the config's declared kinds registered first."""
    if cfg is not None and cfg.raw.get("lbs"):  # the config's own kinds, whichever was loaded last
        LBS.declare(cfg.raw["lbs"], str(cfg.path))
    if kind not in LBS:
        raise ConfigError(f"Failed to select load balancer: unknown kind {kind!r} (known: {', '.join(kinds())})")
    k = LBS[kind]
    full = f"{__name__}.xdp" if k.declared else k.module if "." in k.module else f"{__name__}.{k.module}"
    try:
        return k, importlib.import_module(full)
    except ImportError as e:
        raise ConfigError(f"Failed to load load balancer {kind!r} ({k.origin}): its driver module {full}: {e}") from None


def unavailable(kind: str, cfg) -> str | None:
    """Why an LB kind cannot run on the config's testbed, "<why> (fix: <what to do>)", or None: the
    one place that decides whether the plan leaves the kind out (xenobench.experiments.left_out)
    and the readiness table says so (xenobench.deploy). Each kind declares its own prerequisites:
    its driver module's `unavailable(cfg) -> str | None` (a module without one: always available)."""
    if kind == NONE:
        return None
    _, mod = _driver_module(kind, cfg)
    check = getattr(mod, "unavailable", None)
    return check(cfg) if check else None


def get_lb(kind: str, testbed):
    """The driver of an LB kind on a testbed (a xenobench.lb.base.LoadBalancer)."""
    k, mod = _driver_module(kind, getattr(testbed, "cfg", None))
    if k.declared:
        return mod.DeclaredXdpLB(testbed, k)
    full = mod.__name__
    make = getattr(mod, "make", None)
    if make is None:
        raise ConfigError(f"Failed to load load balancer {kind!r} ({k.origin}): its driver module {full} has no "
                          "make(testbed)")
    lb = make(testbed)
    if lb.kind != kind:
        raise ConfigError(f"Failed to load load balancer {kind!r} ({k.origin}): {full}.make returns a driver of "
                          f"kind {lb.kind!r}; set its class's kind = {kind!r}")
    return lb


def stop_all(testbed, keep: str | None = None, progress=None) -> list[str]:
    """Stop every LB kind running on the LB node except `keep` (one LB at a time on the node);
    returns the kinds stopped."""
    stopped = []
    for kind in kinds():
        if kind == keep:
            continue
        lb = get_lb(kind, testbed)
        if lb.running():
            if progress:
                progress(f"stopping {kind} left running")
            lb.stop()
            stopped.append(kind)
    return stopped
