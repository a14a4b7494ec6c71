"""The backends file shared by XenoFlow and the eBPF baseline, and the class → backend slot table.

Format (the thesis's backends.json, §6.1.3, extended; YAML with the same keys is accepted too):

    {"class_bits": 1,                       # optional: k, the table has 2^k classes (slots)
     "backends": [{"name": "fips2", "mac_address": "02:00:00:00:02:00", "weight": 1}, ...]}

What a weight means belongs to the LB kind that reads the file (a WeightRule):

- CLASSES (XenoFlow, the eBPF baseline and every LB that splits by source-address class): class =
  ntohl(ipv4.saddr) & (2^k - 1). The slot table is the sequence "backend i repeated weight_i
  times", in file order, repeated until 2^k slots are filled; so unweighted backends get class
  i mod n (the thesis: entry i matches src_ip & mask == i), and weights 3:1 with k = 2 give
  [b0, b0, b0, b1]. The sum of weights must divide 2^k so every split is exact; a weight is at
  most 256. Default k: the smallest k with sum(weights) dividing 2^k (and 2^k >= sum).
- RING (Katran): any positive weight up to 2^32 - 1 (a real's weight is a uint32_t in Katran's
  katran/lib/CHHelpers.h struct Endpoint and KatranLbStructs.h struct NewReal); Katran turns them
  into its Maglev ring of 65537 slots (xenobench.agents.maglev). The slot table is still built
  when the weights allow one (so one file serves every LB of a comparison), else class_bits is
  None and there are no slots.

The harness validates a JSON or YAML file here and hands XenoFlow and the eBPF controller
canonical_json() of it. XenoFlow (lb/src/backends.c) reads JSON only: that canonical form, or a
hand-written file, with the same verdicts as this module and messages of its own. Reading here
refuses, before the schema:
files over MAX_BYTES, bytes that are not UTF-8, nesting deeper than MAX_DEPTH, duplicate keys,
trailing data, NaN/Infinity and numbers outside int64/double, text with U+0000 or an unpaired
surrogate, and (YAML) aliases and merge keys. tests/vectors/backends/ holds the cases both
readers are tested against (messages: this module's); tests/test_property_backends.py compares
their verdicts on generated files.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import BackendsError

MAX_CLASS_BITS = 8  # at most 256 classes; the XDP slot map and the DOCA pipe are sized for this
MAX_SLOTS = 1 << MAX_CLASS_BITS
# Resource limits (MAX_BYTES equals XF_BACKENDS_MAX_BYTES in lb/src/backends.h): 256 backends take
# ~20 KiB and nest 3 levels, so these only stop hostile files before they cost memory or stack.
MAX_BYTES = 1 << 20
MAX_DEPTH = 32  # '[' and '{' (YAML: collections) open at once
SHOW_MAX = 80  # characters of a value shown in a message
NUMBER_MAX = 40  # characters of an out-of-range number shown
TOP_KEYS = {"backends", "class_bits"}
BACKEND_KEYS = {"name", "mac_address", "weight"}
_MAC = re.compile(r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNSAFE = re.compile("[\x00\ud800-\udfff]")  # what a C string (and UTF-8) cannot carry


@dataclass(frozen=True)
class WeightRule:
    """How an LB kind reads the backends' weights (module docstring)."""
    name: str
    lbs: str              # who follows it, as messages name them
    max_weight: int
    classes: bool         # the class → backend slot table is required


CLASSES = WeightRule("classes", "XenoFlow and the eBPF baseline", MAX_SLOTS, True)
RING = WeightRule("ring", "Katran", (1 << 32) - 1, False)
SHOW_WEIGHTS = 8  # backends a weight message lists by name before "..."


@dataclass(frozen=True)
class Backend:
    name: str
    mac: str  # lower-case colon form
    weight: int = 1


@dataclass(frozen=True)
class BackendSet:
    backends: tuple[Backend, ...]
    class_bits: int | None  # None: the weights make no class table (read by RING only)
    slots: tuple[int, ...]  # slot (class) → index into backends; () without a class table
    source: str = ""
    #: why there is no class table (RING read a file CLASSES refuses), else ""
    no_classes: str = ""

    def _classes(self) -> int:
        if self.class_bits is None:
            raise BackendsError(f"Failed to split {self.source} by class: {self.no_classes}")
        return self.class_bits

    @property
    def mask(self) -> int:
        return (1 << self._classes()) - 1

    def backend_for_class(self, cls: int) -> Backend:
        return self.backends[self.slots[cls & self.mask]]

    def backend_for_source(self, saddr: str) -> Backend:
        import ipaddress
        return self.backend_for_class(int(ipaddress.IPv4Address(saddr)))

    def classes_of(self, name: str) -> list[int]:
        """Every class served by the named backend."""
        idx = [i for i, b in enumerate(self.backends) if b.name == name]
        if not idx:
            raise BackendsError(f"Failed to find backend {name!r} in {self.source}: "
                                f"have {', '.join(b.name for b in self.backends)}")
        self._classes()
        return [c for c, s in enumerate(self.slots) if s == idx[0]]

    def index(self, name: str) -> int:
        for i, b in enumerate(self.backends):
            if b.name == name:
                return i
        raise BackendsError(f"Failed to find backend {name!r} in {self.source}")


class _Refused(Exception):
    """A reason the file is refused before the schema; reported at "(top level)"."""


class _Obj(list):
    """A JSON object as its (key, value) pairs in file order, duplicates kept until _check_tree."""


def show(v) -> str:
    """A value as messages show it: ascii(), cut to SHOW_MAX characters."""
    s = ascii(v)
    return s if len(s) <= SHOW_MAX else s[:SHOW_MAX - 3] + "..."


def _component(k, top: bool) -> str:
    """A key as a path component: `.name` for plain keys, `['odd key']` for any other."""
    if isinstance(k, str) and _PLAIN_KEY.fullmatch(k):
        return k if top else f".{k}"
    return f"[{show(k)}]"


def _nesting(text: str) -> int:
    """Most '[' and '{' open at once outside strings (stops counting past MAX_DEPTH)."""
    depth = top = 0
    in_str = esc = False
    for c in text:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
            if depth > top:
                top = depth
                if top > MAX_DEPTH:
                    break
        elif c in "]}" and depth:
            depth -= 1
    return top


def _number(text: str, conv):
    v = conv(text) if conv is float or len(text.lstrip("-")) <= 19 else None
    if v is None or (conv is float and not math.isfinite(v)) or (conv is int and not -2**63 <= v < 2**63):
        shown = text if len(text) <= NUMBER_MAX else text[:NUMBER_MAX - 3] + "..."
        raise _Refused(f"number {shown} is out of range")
    return v


def _constant(name: str):
    raise _Refused(f"not valid JSON: {name} is not a JSON number")


def _read_json(text: str):
    if _nesting(text) > MAX_DEPTH:
        raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, object_pairs_hook=_Obj, parse_constant=_constant,
                          parse_int=lambda t: _number(t, int), parse_float=lambda t: _number(t, float))
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":
            raise _Refused(f"not valid JSON: trailing data at line {e.lineno} column {e.colno}") from None
        raise _Refused(f"not valid JSON: {e}") from None


def _mark(m) -> str:
    return f"line {m.line + 1} column {m.column + 1}"


class _YamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader without what lets one file mean two things or cost unbounded memory:
    aliases (a 438-byte file of nested aliases expands to gigabytes), merge keys, duplicate keys
    (PyYAML would keep the last), nesting deeper than MAX_DEPTH."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            ev = self.peek_event()
            raise _Refused(f"YAML alias *{ev.anchor} at {_mark(ev.start_mark)}: aliases are not accepted")
        nested = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        self._depth += nested
        if self._depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= nested

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise _Refused(f"YAML merge key << at {_mark(key_node.start_mark)}: not accepted")
        mapping = super().construct_mapping(node, deep=deep)
        if len(mapping) != len(node.value):  # some key came twice
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise _Refused(f"duplicate key {show(key)} at {_mark(key_node.start_mark)}")
                seen.add(key)
        return mapping


def _check_tree(v, path: str, fail) -> None:
    """Children first (the order in which json closes objects):
    text a C string cannot carry, then duplicate keys."""
    here = path or "(top level)"
    if isinstance(v, str) and _UNSAFE.search(v):
        fail(here, "text holds U+0000 or an unpaired surrogate")
    if isinstance(v, (_Obj, dict)):
        pairs = v if isinstance(v, _Obj) else list(v.items())
        for k, item in pairs:
            if isinstance(k, str) and _UNSAFE.search(k):
                fail(here, f"key {show(k)} holds U+0000 or an unpaired surrogate")
            _check_tree(item, path + _component(k, not path), fail)
        seen = set()
        for k, _ in pairs:
            if k in seen:
                fail(here, f"duplicate key {show(k)}")
            seen.add(k)
    elif isinstance(v, list):
        for i, item in enumerate(v):
            _check_tree(item, f"{path}[{i}]", fail)


def _plain(v):
    if isinstance(v, _Obj):
        return {k: _plain(x) for k, x in v}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _suggest(backends: list[Backend], total: int) -> list[int]:
    """Weights summing to `total` in the proportions of the given ones, each at least 1 (largest
    remainder)."""
    have = sum(b.weight for b in backends)
    exact = [b.weight * total / have for b in backends]
    out = [max(1, int(x)) for x in exact]
    order = sorted(range(len(out)), key=lambda i: out[i] - exact[i])  # furthest below first
    i = 0
    while sum(out) < total:
        out[order[i % len(out)]] += 1
        i += 1
    for j in sorted(range(len(out)), key=lambda i: exact[i] - out[i]):  # furthest above first
        while sum(out) > total and out[j] > 1:
            out[j] -= 1
    return out


def _weights(backends: list[Backend], weights=None) -> str:
    """`a 1, b 1, c 1` (the first SHOW_WEIGHTS backends, then how many more)."""
    ws = [b.weight for b in backends] if weights is None else weights
    shown = [f"{show(b.name) if not _PLAIN_KEY.fullmatch(b.name) else b.name} {w}"
             for b, w in zip(backends[:SHOW_WEIGHTS], ws)]
    more = len(backends) - SHOW_WEIGHTS
    return ", ".join(shown) + (f", ... ({more} more)" if more > 0 else "")


def _class_table(backends: list[Backend], k_given: int | None, rule: WeightRule) -> tuple[int, str]:
    """(k, "") for the class table of these weights, or (-1, why not: the fix included)."""
    total, n = sum(b.weight for b in backends), len(backends)
    other = "; or run Katran, which takes any positive weights" if rule.classes else ""
    if k_given is not None:
        if (1 << k_given) % total == 0:
            return k_given, ""
        if n <= (1 << k_given):
            target, k_fix = 1 << k_given, None
        else:
            k_fix = (n - 1).bit_length()
            target = 1 << k_fix
        fix = (f"raise class_bits to {k_fix} and " if k_fix is not None else "") + \
              f"give weights summing to {target} (e.g. {_weights(backends, _suggest(backends, target))})"
        how = (f"do not fit in {1 << k_given} slots (the classes of class_bits {k_given})" if total > (1 << k_given)
               else f"do not divide the {1 << k_given} classes of class_bits {k_given}")
        return -1, (f"weights {_weights(backends)} sum to {total} and {how}: {CLASSES.lbs} give each backend "
                    "weight/total of the "
                    f"2^class_bits source-address classes, so the split would not be exact; {fix}{other}")
    for k in range(MAX_CLASS_BITS + 1):
        if (1 << k) % total == 0:
            return k, ""
    target = min(MAX_SLOTS, 1 << (total - 1).bit_length())
    return -1, (f"weights {_weights(backends)} sum to {total}, not a power of two up to {MAX_SLOTS}: "
                f"{CLASSES.lbs} give each backend weight/total of 2^k source-address classes (k at most "
                f"{MAX_CLASS_BITS}), so the split would not be exact; give weights summing to {target} "
                f"(e.g. {_weights(backends, _suggest(backends, target))}){other}")


def parse_backends(doc, source: str = "<backends>", rule: WeightRule = CLASSES) -> BackendSet:
    """Validate a decoded backends document and build the slot table; the weights are read by
    `rule`, the LB kind's (module docstring)."""
    def fail(key: str, msg: str):
        raise BackendsError(f"Failed to load backends {source}: {key}: {msg}")

    _check_tree(doc, "", fail)
    doc = _plain(doc)
    if not isinstance(doc, dict):
        fail("(top level)", "expected an object with a 'backends' list")
    for k in doc:
        if k not in TOP_KEYS:
            fail(_component(k, True), f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")
    lst = doc.get("backends")
    if lst is None:
        fail("backends", "missing")
    if not isinstance(lst, list):
        fail("backends", "expected a list")
    if not lst:
        fail("backends", "no backends given")
    if len(lst) > MAX_SLOTS:
        fail("backends", f"{len(lst)} backends do not fit in {MAX_SLOTS} slots")
    backends: list[Backend] = []
    names: dict[str, int] = {}
    macs: dict[str, int] = {}
    for i, b in enumerate(lst):
        key = f"backends[{i}]"
        if not isinstance(b, dict):
            fail(key, "expected an object with name and mac_address")
        for k in b:
            if k not in BACKEND_KEYS:
                fail(key + _component(k, False), f"unknown key (known: {', '.join(sorted(BACKEND_KEYS))})")
        name = b.get("name")
        if not isinstance(name, str) or not name:
            fail(f"{key}.name", "missing or not a non-empty string")
        if "mac_address" not in b:
            fail(f"{key}.mac_address", "missing")
        mac_raw = b["mac_address"]
        if not isinstance(mac_raw, str) or not _MAC.fullmatch(mac_raw):
            fail(f"{key}.mac_address", f"{show(mac_raw)} is not a MAC address")
        mac = mac_raw.lower()
        weight = b.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= rule.max_weight:
            fail(f"{key}.weight", f"{show(weight)} is not an integer in 1..{rule.max_weight}")
        if name in names:
            fail(f"{key}.name", f"duplicate name {show(name)} (also backends[{names[name]}])")
        if mac in macs:
            fail(f"{key}.mac_address", f"duplicate MAC {mac} (also backends[{macs[mac]}])")
        names[name] = i
        macs[mac] = i
        backends.append(Backend(name, mac, weight))

    k_given = None
    if "class_bits" in doc:
        k_given = doc["class_bits"]
        if isinstance(k_given, bool) or not isinstance(k_given, int) or not 0 <= k_given <= MAX_CLASS_BITS:
            fail("class_bits", f"{show(k_given)} is not an integer in 0..{MAX_CLASS_BITS}")
    k, why = _class_table(backends, k_given, rule)
    if why:
        if rule.classes:
            fail("backends", why)
        return BackendSet(tuple(backends), None, (), source, why)
    total = sum(b.weight for b in backends)
    seq = [i for i, b in enumerate(backends) for _ in range(b.weight)]
    slots = tuple(seq[s % total] for s in range(1 << k))
    return BackendSet(tuple(backends), k, slots, source)


def is_yaml(path) -> bool:
    return Path(path).suffix in (".yaml", ".yml")


def _file_kind(mode: int) -> str | None:
    """What a path that is neither a regular file nor a directory is, in XenoFlow's words
    (lb/src/backends.c file_kind); None for a regular file or a directory (open says "Is a directory")."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "of an unknown type")


def read_document(path):
    """The decoded document of a backends file, read with every limit above; BackendsError
    "Failed to load backends <path>: ..." otherwise."""
    path = Path(path)

    def refuse(msg: str):
        raise BackendsError(f"Failed to load backends {path}: (top level): {msg}")

    try:
        kind = _file_kind(os.stat(path).st_mode)
        if kind:  # a FIFO would block the reader, a device may act when opened (XenoFlow refuses them alike)
            raise BackendsError(f"Failed to load backends {path}: is not a regular file ({kind})")
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_size > MAX_BYTES:
                refuse(f"larger than {MAX_BYTES} bytes")
            # one byte more than the limit tells a growing file or a device like /dev/zero
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise BackendsError(f"Failed to load backends {path}: {e.strerror}") from None
    if len(data) > MAX_BYTES:
        refuse(f"larger than {MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        refuse(f"not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start}")
    try:
        if is_yaml(path):
            try:
                return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 (a SafeLoader subclass)
            except yaml.YAMLError as e:
                refuse(f"not valid YAML: {e}")
            except (ValueError, IndexError, KeyError, AttributeError, TypeError) as e:
                # a tagged scalar PyYAML's constructors cannot read, e.g. !!int '' (IndexError),
                # !!bool 'x' (KeyError), !!timestamp 'x' (AttributeError)
                refuse(f"not valid YAML: a tagged value PyYAML cannot read ({type(e).__name__}: {e})")
        return _read_json(text)
    except _Refused as e:
        refuse(str(e))


def load_backends(path, rule: WeightRule = CLASSES) -> BackendSet:
    """Read a backends file (JSON, or YAML for .yaml/.yml) and validate it, its weights by the
    reading LB kind's rule."""
    return parse_backends(read_document(path), str(Path(path)), rule)


def canonical_json(bs: BackendSet) -> str:
    """The one form handed to XenoFlow and the eBPF controller: JSON, every key explicit
    (class_bits, weight), keys in a fixed order; lb/src/backends.c reads it back to the same set.
    A set without a class table (RING) has no class_bits."""
    doc = {**({"class_bits": bs.class_bits} if bs.class_bits is not None else {}),
           "backends": [{"name": b.name, "mac_address": b.mac, "weight": b.weight} for b in bs.backends]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_canonical(src, dest_dir, rule: WeightRule = CLASSES) -> Path:
    """Validate `src` (JSON or YAML; weights by `rule`) and write canonical_json() of it to
    dest_dir/<stem>.json; the path written. Rewritten in place on every call, so nothing
    accumulates."""
    bs = load_backends(src, rule)
    text = canonical_json(bs).encode("utf-8")
    if len(text) > MAX_BYTES:  # long names with many escapes; XenoFlow would refuse the result
        raise BackendsError(f"Failed to write backends {src} as JSON: {len(text)} bytes, more than "
                            f"the {MAX_BYTES} XenoFlow reads")
    dest = Path(dest_dir) / f"{Path(src).stem}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    try:
        tmp.write_bytes(text)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


# --- a backends file against a testbed ------------------------------------------------------------
BACKEND_NODE_ROLES = ("dns_backend", "backend")  # xenobench.config.BACKEND_ROLES


def check_testbed(bs: BackendSet, cfg) -> BackendSet:
    """Refuse a backends file that names anything but the testbed's backend nodes (role backend or
    dns_backend in cfg's nodes), or gives a backend a MAC that is none of its node's interfaces'.
    An LB sends a named backend's share to that node's address (Katran: to any node with an
    address), so a loadgen or client named here receives real traffic and the trial measures the
    wrong thing. Returns `bs`."""
    nodes = cfg.nodes
    backend_nodes = [n.name for n in nodes.values() if n.role in BACKEND_NODE_ROLES]
    where = f"{bs.source} (testbed {cfg.path})"
    for i, b in enumerate(bs.backends):
        node = nodes.get(b.name)
        if node is None or node.role not in BACKEND_NODE_ROLES:
            what = (f"node {b.name} has role {node.role}" if node is not None
                    else f"{cfg.path} has no node {show(b.name)}")
            raise BackendsError(
                f"Failed to load backends {where}: backends[{i}].name: {show(b.name)} is not a backend node "
                f"({what}; the load balancer would send it real traffic); name only backend nodes "
                f"({', '.join(backend_nodes) or 'none'}: role backend or dns_backend in {cfg.path}) or remove the entry")
        macs = [x.mac for x in node.interfaces if x.mac]
        if macs and b.mac not in macs:
            have = ", ".join(f"{x.mac} on {x.name}" for x in node.interfaces if x.mac)
            raise BackendsError(
                f"Failed to load backends {where}: backends[{i}].mac_address: {b.mac} is not a MAC of node "
                f"{b.name} ({have} in {cfg.path}); put in {macs[0]}")
    return bs


def load_for_testbed(path, cfg, rule: WeightRule = CLASSES) -> BackendSet:
    """load_backends, then check_testbed against the testbed config `cfg`."""
    return check_testbed(load_backends(path, rule), cfg)
