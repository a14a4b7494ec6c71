"""The backends file shared by XenoFlow and the eBPF baseline, and the class → backend slot table.

Format (the thesis's backends.json, extended; YAML with the same keys is accepted too):

    {"class_bits": 1,                       # optional: k, the table has 2^k classes (slots)
     "backends": [{"name": "fips2", "mac_address": "02:00:00:00:02:00", "weight": 1}, ...]}

Classification: class = ntohl(ipv4.saddr) & (2^k - 1). The slot table is the sequence
"backend i repeated weight_i times", in file order, repeated until 2^k slots are filled; so
unweighted backends get class i mod n (the thesis: entry i matches src_ip & mask == i), and
weights 3:1 with k = 2 give [b0, b0, b0, b1]. The sum of weights must divide 2^k so every split
is exact. Default k: the smallest k with sum(weights) dividing 2^k (and 2^k >= sum).

The C implementations (lb/ and ebpf_baseline/) must print the same messages for the same bad
files; tests/vectors/backends/ holds the cases both are tested against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from .config import normalize_mac
from .errors import BackendsError

MAX_CLASS_BITS = 8  # at most 256 classes; the XDP slot map and the DOCA pipe are sized for this
TOP_KEYS = {"backends", "class_bits"}
BACKEND_KEYS = {"name", "mac_address", "weight"}


@dataclass(frozen=True)
class Backend:
    name: str
    mac: str  # lower-case colon form
    weight: int = 1


@dataclass(frozen=True)
class BackendSet:
    backends: tuple[Backend, ...]
    class_bits: int
    slots: tuple[int, ...]  # slot (class) → index into backends
    source: str = ""

    @property
    def mask(self) -> int:
        return (1 << self.class_bits) - 1

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
        return [c for c, s in enumerate(self.slots) if s == idx[0]]

    def index(self, name: str) -> int:
        for i, b in enumerate(self.backends):
            if b.name == name:
                return i
        raise BackendsError(f"Failed to find backend {name!r} in {self.source}")


def parse_backends(doc, source: str = "<backends>") -> BackendSet:
    """Validate a decoded backends document and build the slot table."""
    def fail(key: str, msg: str):
        raise BackendsError(f"Failed to load backends {source}: {key}: {msg}")

    if not isinstance(doc, dict):
        fail("(top level)", "expected an object with a 'backends' list")
    for k in doc:
        if k not in TOP_KEYS:
            fail(str(k), f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")
    lst = doc.get("backends")
    if lst is None:
        fail("backends", "missing")
    if not isinstance(lst, list):
        fail("backends", "expected a list")
    if not lst:
        fail("backends", "no backends given")
    backends: list[Backend] = []
    names: dict[str, int] = {}
    macs: dict[str, int] = {}
    for i, b in enumerate(lst):
        key = f"backends[{i}]"
        if not isinstance(b, dict):
            fail(key, "expected an object with name and mac_address")
        for k in b:
            if k not in BACKEND_KEYS:
                fail(f"{key}.{k}", f"unknown key (known: {', '.join(sorted(BACKEND_KEYS))})")
        name = b.get("name")
        if not isinstance(name, str) or not name:
            fail(f"{key}.name", "missing or not a non-empty string")
        if "mac_address" not in b:
            fail(f"{key}.mac_address", "missing")
        mac_raw = b["mac_address"]
        try:
            mac = normalize_mac(mac_raw)
        except ValueError:
            fail(f"{key}.mac_address", f"{mac_raw!r} is not a MAC address")
        weight = b.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
            fail(f"{key}.weight", f"{weight!r} is not a positive integer")
        if name in names:
            fail(f"{key}.name", f"duplicate name {name!r} (also backends[{names[name]}])")
        if mac in macs:
            fail(f"{key}.mac_address", f"duplicate MAC {mac} (also backends[{macs[mac]}])")
        names[name] = i
        macs[mac] = i
        backends.append(Backend(name, mac, weight))

    total = sum(b.weight for b in backends)
    if "class_bits" in doc:
        k = doc["class_bits"]
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_CLASS_BITS:
            fail("class_bits", f"{k!r} is not an integer in 0..{MAX_CLASS_BITS}")
        if total > (1 << k):
            fail("backends", f"{len(backends)} backends with total weight {total} do not fit "
                             f"in {1 << k} slots (class_bits {k})")
    else:
        k = 0
        while (1 << k) < total or (1 << k) % total:
            k += 1
            if k > MAX_CLASS_BITS:
                fail("backends", f"total weight {total} divides no table of up to "
                                 f"{1 << MAX_CLASS_BITS} slots; give weights summing to a power of two")
    if (1 << k) % total:
        fail("backends", f"total weight {total} does not divide {1 << k} slots (class_bits {k}); "
                         "splits would not be exact")
    seq = [i for i, b in enumerate(backends) for _ in range(b.weight)]
    slots = tuple(seq[s % total] for s in range(1 << k))
    return BackendSet(tuple(backends), k, slots, source)


def load_backends(path) -> BackendSet:
    """Read a backends file (JSON, or YAML for .yaml/.yml) and validate it."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise BackendsError(f"Failed to load backends {path}: {e.strerror}") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            doc = yaml.safe_load(text)
        else:
            doc = json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise BackendsError(f"Failed to load backends {path}: (top level): not valid "
                            f"{'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}: {e}") from None
    return parse_backends(doc, str(path))
