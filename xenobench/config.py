"""Load and check a testbed configuration (config/local.yaml, config/fips.yaml, ...).

Two passes: JSON Schema (config/schema/*.schema.yaml) for shape and types, then the semantic
checks a schema cannot express (MAC syntax, roles, duplicates). Every error names the file, the
key path and the offending value:

    Failed to load config config/x.yaml: nodes.fips2.interfaces[0].mac: '02:zz:00:00:00:01' is not a MAC address
"""

from __future__ import annotations

import copy
import difflib
import functools
import ipaddress
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from . import REPO_ROOT
from .agents.net import normalize_mac
from .dns import KINDS as DNS_SERVERS
from .errors import ConfigError
from .lb import NONE, declare as declare_lbs, kinds as lb_kinds

DEFAULT_CONFIG = REPO_ROOT / "config" / "local.yaml"
SCHEMA_DIR = REPO_ROOT / "config" / "schema"

MAX_CONFIG_BYTES = 1 << 20  # a testbed config is a few kB; /dev/zero or a log file must not fill memory
MAX_DEPTH = 32              # nesting of mappings and lists (ours go 5 deep)
MAX_VALUES = 100_000        # mappings, lists and scalars together: a YAML alias bomb expands past it
DNS_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")  # RFC 1035 letter-digit-hyphen, plus '_'

ROLES = ("client", "dns_backend", "backend", "loadgen", "lb", "dpu")
REQUIRED_ROLES = ("client", "dns_backend", "loadgen", "lb")
SINGLE_ROLES = ("client", "dns_backend", "loadgen", "lb", "dpu")
BACKEND_ROLES = ("dns_backend", "backend")

@dataclass(frozen=True)
class Interface:
    name: str
    mac: str | None
    ip: ipaddress.IPv4Interface | None
    extra_ips: tuple[ipaddress.IPv4Interface, ...] = ()
    lb_port: str | None = None
    pci: str | None = None

    @property
    def addr(self) -> str | None:
        """The interface's address without prefix length."""
        return str(self.ip.ip) if self.ip else None


@dataclass(frozen=True)
class SshConfig:
    host: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    known_hosts: str | None = None
    accept_unknown_host_keys: bool = False
    connect_timeout: float = 10.0
    netns: str | None = None
    python: str = "python3"
    workdir: str | None = None


@dataclass(frozen=True)
class NodeConfig:
    name: str
    role: str
    transport: str
    interfaces: tuple[Interface, ...]
    ssh: SshConfig | None = None
    pci: str | None = None

    def iface(self, name: str | None = None) -> Interface:
        """The named interface, or the node's first one."""
        if name is None:
            return self.interfaces[0]
        for i in self.interfaces:
            if i.name == name:
                return i
        raise ConfigError(f"Failed to find interface {name!r} on node {self.name}: "
                          f"it has {', '.join(i.name for i in self.interfaces)}")

    def lb_port(self, which: str) -> Interface | None:
        """The lb node's 'ingress' or 'egress' interface (None if not configured)."""
        for i in self.interfaces:
            if i.lb_port == which:
                return i
        return None


@dataclass(frozen=True)
class ServiceConfig:
    vip: str
    port: int
    zone: str
    backends: Path | None
    lb_mac: str | None


@dataclass
class Config:
    path: Path
    raw: dict[str, Any]
    name: str
    testbed_kind: str  # testbed.kind: what `testbed up`/`down` build (xenobench.testbed.KINDS)
    transport: str     # testbed.transport: the nodes' default transport (xenobench.nodes.TRANSPORTS)
    prefix: str
    state_dir: Path
    service: ServiceConfig
    nodes: dict[str, NodeConfig] = field(default_factory=dict)

    def nodes_with_role(self, role: str) -> list[NodeConfig]:
        return [n for n in self.nodes.values() if n.role == role]

    def role(self, role: str) -> NodeConfig:
        """The one node with this role (client, dns_backend, loadgen, lb, dpu)."""
        found = self.nodes_with_role(role)
        if not found:
            raise ConfigError(f"Failed to find a node with role {role!r} in {self.path}")
        return found[0]

    @property
    def builds_on_this_machine(self) -> bool:
        """Whether bringing the testbed up changes this machine (namespaces, a node reached by
        netns), which only root may; one whose nodes are all reached over SSH does not."""
        return self.testbed_kind == "namespaces" or any(n.transport == "netns" for n in self.nodes.values())

    def backend_nodes(self) -> list[NodeConfig]:
        """dns_backend first, then the other backends, in file order."""
        return self.nodes_with_role("dns_backend") + self.nodes_with_role("backend")

    def section(self, name: str) -> dict[str, Any]:
        """A subsystem's raw section (lb, traffic, dns, rtt, experiments, ...), {} if absent."""
        return self.raw.get(name) or {}

    @property
    def lb_mac(self) -> str:
        """Destination MAC for traffic to the VIP."""
        if self.service.lb_mac:
            return self.service.lb_mac
        lb = self.role("lb")
        ing = lb.lb_port("ingress") or lb.iface()
        assert ing.mac
        return ing.mac

    def resolve(self, p: str | os.PathLike) -> Path:
        """Relative paths in a config are relative to the repository root."""
        p = Path(p)
        return p if p.is_absolute() else REPO_ROOT / p


def read_capped(path: Path, limit: int = MAX_CONFIG_BYTES) -> str:
    """A small text file as str: OSError for I/O, ValueError (with the reason) when it is larger
    than `limit` bytes or not UTF-8. The size is bounded before reading, so a device or a huge file
    costs at most `limit` bytes of memory."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes (is it a configuration file?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start}") from None


def _load_yaml(path: Path, what: str = "config") -> Any:
    """Read and parse a YAML file with every failure as a ConfigError naming the file."""
    try:
        text = read_capped(path)
    except OSError as e:
        raise ConfigError(f"Failed to load {what} {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"Failed to load {what} {path}: {e}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"Failed to load {what} {path}: not valid YAML: {e}") from None
    except RecursionError:
        raise ConfigError(f"Failed to load {what} {path}: nested more than {MAX_DEPTH} levels deep") from None


def check_values(doc: Any, path: Path) -> None:
    """What JSON Schema does not check, over the whole document before it: nesting depth, the
    number of values (alias bombs), keys that are not strings, and NaN/inf (YAML's .nan/.inf are
    floats that `type: number` accepts but that no rate, duration or timeout can be)."""
    stack, seen = [(doc, [])], 0
    while stack:
        v, keys = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(f"Failed to load config {path}: more than {MAX_VALUES} values "
                              "(YAML aliases expanding?)")
        if len(keys) > MAX_DEPTH:
            raise ConfigError(f"Failed to load config {path}: {_key_path(keys[:MAX_DEPTH])}: nested more "
                              f"than {MAX_DEPTH} levels deep")
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"Failed to load config {path}: {_key_path(keys)}: {v!r} is not a finite number")
        if isinstance(v, dict):
            for k, sub in v.items():
                if not isinstance(k, str):
                    raise ConfigError(f"Failed to load config {path}: {_key_path(keys)}: key {k!r} is not "
                                      "a string (quote it)")
                stack.append((sub, [*keys, k]))
        elif isinstance(v, list):
            stack.extend((sub, [*keys, i]) for i, sub in enumerate(v))


def _key_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _enums() -> dict[str, list[str]]:
    """Lists a schema names by `x-enum` instead of repeating them: each has one owner in code."""
    kinds = list(lb_kinds())  # the built-in kinds, the installed packages' and the loaded config's `lbs:`
    return {"lb_kinds": kinds, "lb_kinds_or_none": [NONE, *kinds], "dns_servers": list(DNS_SERVERS)}


def _fill_enums(node: Any, enums: dict[str, list[str]]) -> None:
    if isinstance(node, dict):
        if "x-enum" in node:
            node["enum"] = enums[node.pop("x-enum")]
        for v in node.values():
            _fill_enums(v, enums)
    elif isinstance(node, list):
        for v in node:
            _fill_enums(v, enums)


def _load_schemas() -> dict[str, dict]:
    schemas = {}
    enums = _enums()
    for f in sorted(SCHEMA_DIR.glob("*.schema.yaml")):
        sch = copy.deepcopy(_schema(f, f.stat().st_mtime_ns))
        _fill_enums(sch, enums)
        schemas[f.name.removesuffix(".schema.yaml")] = sch
    return schemas


@functools.lru_cache(maxsize=64)
def _schema(f: Path, mtime_ns: int) -> dict:
    # parsed once per file version, by libyaml where PyYAML has it (its pure-Python parser took
    # ~0.2 s of every command's start for these files; the result is the same)
    return yaml.load(f.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _is_integer(checker, instance) -> bool:
    # JSON Schema counts 53.0 as an integer (draft 2020-12, §6.1.1 of the validation spec); a port
    # or a count written 53.0 is a typo that would reach a command line as "53.0", so only ints are
    return isinstance(instance, int) and not isinstance(instance, bool)


def _one_of_keys(validator, keys, instance, schema):
    """x-one-of-keys: [a, b, ...]: exactly one of these keys is given, null counting as not given
    (how a config that `extends` another takes back a key the other gives); JSON Schema's oneOf
    would answer with the whole section and no key's name."""
    if not validator.is_type(instance, "object"):
        return
    given = [k for k in keys if instance.get(k) is not None]
    if len(given) > 1:
        yield jsonschema.ValidationError(f"{' and '.join(given)} given at once: give one of {', '.join(keys)}")
    elif not given:
        yield jsonschema.ValidationError(f"none of {', '.join(keys)} given: give one of them")


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"x-one-of-keys": _one_of_keys},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


def validate_section(raw: dict, section: str, schema: dict, path: Path) -> None:
    """Validate raw[section] (or the whole document for 'main') against a JSON schema."""
    doc = raw if section == "main" else raw.get(section)
    if doc is None:
        return
    validator = _Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(doc), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        e = errors[0]
        parts = list(e.absolute_path) if section == "main" else [section, *e.absolute_path]
        unknown = _unknown_keys(e)
        if unknown:  # a misspelled key: named with its path, and the nearest known one
            known = sorted(e.schema.get("properties") or {})
            near = difflib.get_close_matches(unknown[0], known, n=1)
            raise ConfigError(f"Failed to load config {path}: {_key_path([*parts, unknown[0]])}: unknown key "
                              f"(known here: {', '.join(known)})" + (f"; did you mean {near[0]!r}?" if near else ""))
        raise ConfigError(f"Failed to load config {path}: {_key_path(parts)}: {e.message}")


def _unknown_keys(e: jsonschema.ValidationError) -> list[str]:
    """The keys an `additionalProperties: false` error refuses (those neither in `properties` nor
    matching a `patternProperties` pattern), in the file's order; [] for any other error."""
    if e.validator != "additionalProperties" or e.validator_value is not False or not isinstance(e.instance, dict):
        return []
    props, patterns = e.schema.get("properties") or {}, e.schema.get("patternProperties") or {}
    return [k for k in e.instance if k not in props and not any(re.search(p, k) for p in patterns)]


def _resolve_ref(schema: dict, root: dict) -> dict:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    node = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    # keywords beside the $ref (a `default`, a `description`) apply too (draft 2020-12, §8.2.3.1)
    siblings = {k: v for k, v in schema.items() if k != "$ref"}
    return {**node, **siblings} if siblings else node


def apply_defaults(doc, schema: dict, root: dict | None = None) -> None:
    """Fill in every `default` the schema declares, in place: the one place a config default is
    written is its schema. A missing mapping is created when its schema has defaults inside and
    no required keys (a section with required keys is a choice the user makes, e.g. an
    experiment's size, never made for them)."""
    root = root or schema
    schema = _resolve_ref(schema, root)
    if isinstance(doc, dict):
        for key, sub in (schema.get("properties") or {}).items():
            sub = _resolve_ref(sub, root)
            if key not in doc:
                if "default" in sub:
                    doc[key] = copy.deepcopy(sub["default"])
                elif sub.get("type") == "object" and not sub.get("required") and _has_defaults(sub, root):
                    doc[key] = {}
            if key in doc:
                apply_defaults(doc[key], sub, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, value in doc.items():
                if key not in (schema.get("properties") or {}):
                    apply_defaults(value, extra, root)
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for item in doc:
            apply_defaults(item, schema["items"], root)


def _has_defaults(schema: dict, root: dict) -> bool:
    props = _resolve_ref(schema, root).get("properties") or {}
    return any("default" in _resolve_ref(s, root) or _has_defaults(s, root) for s in props.values())


def _deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _resolve_extends(raw: dict, path: Path, seen: tuple = ()) -> dict:
    """`extends: other.yaml` (relative to this file): this file's keys are merged over the other's,
    mappings key by key, everything else replaced. Used by config/ci.yaml (the CI-sized study)."""
    base_name = raw.pop("extends", None)
    if base_name is None:
        return raw
    seen = (*seen, path.resolve())
    if not isinstance(base_name, str):
        raise ConfigError(f"Failed to load config {path}: extends: {base_name!r} is not a file name")
    base_path = (path.parent / base_name).resolve()
    if base_path in seen:
        raise ConfigError(f"Failed to load config {path}: extends: {base_name!r} forms a cycle")
    if not base_path.exists():
        raise ConfigError(f"Failed to load config {path}: extends: {base_name!r}: No such file or directory")
    base = _load_yaml(base_path)
    if not isinstance(base, dict):
        raise ConfigError(f"Failed to load config {base_path}: (top level): expected a mapping")
    return _deep_merge(_resolve_extends(base, base_path, seen), raw)


def load_config(path: str | os.PathLike | None = None) -> Config:
    """Read, validate and return a configuration. Default: $XENOBENCH_CONFIG or config/local.yaml."""
    path = Path(path or os.environ.get("XENOBENCH_CONFIG") or DEFAULT_CONFIG)
    raw = _load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"Failed to load config {path}: (top level): expected a mapping, got {type(raw).__name__}")
    check_values(raw, path)
    raw = _resolve_extends(raw, path)
    check_values(raw, path)
    _declare_lbs(raw, path)  # before the schemas: the experiments' LB lists take the declared kinds
    schemas = _load_schemas()
    main = schemas.pop("main")
    _check_sections(raw, [*main.get("properties", {}), *schemas], path)
    validate_section(raw, "main", main, path)
    apply_defaults(raw, main)
    for section, schema in schemas.items():
        validate_section(raw, section, schema, path)
        if section in raw or _has_defaults(schema, schema):
            raw.setdefault(section, {})
            apply_defaults(raw[section], schema)
    return _build(raw, path)


def _declare_lbs(raw: dict, path: Path) -> None:
    """The config's own LB kinds (`lbs:`, config/schema/lbs.schema.yaml), validated and registered
    in xenobench.lb.LBS in place of those of the config loaded before (a config without the section
    declares none)."""
    if raw.get("lbs") is not None:
        schema = copy.deepcopy(_schema(SCHEMA_DIR / "lbs.schema.yaml", (SCHEMA_DIR / "lbs.schema.yaml").stat().st_mtime_ns))
        validate_section(raw, "lbs", schema, path)
        apply_defaults(raw["lbs"], schema)
    declare_lbs(raw.get("lbs") or {}, str(path))


def section_with_defaults(section: str, doc: dict, where: str = "(built in code)") -> dict:
    """One section given as a mapping (a test's or a tool's, not read from a file): validated
    against its schema like a loaded config's, and returned with the schema's defaults filled in."""
    schema = _load_schemas()[section]
    raw = {section: copy.deepcopy(doc)}
    validate_section(raw, section, schema, Path(where))
    apply_defaults(raw[section], schema)
    return raw[section]


def _check_sections(raw: dict, known: list[str], path: Path) -> None:
    """A misspelled section would otherwise be ignored and its defaults used: refuse it."""
    for key in raw:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigError(f"Failed to load config {path}: {key}: unknown section "
                              f"(known: {', '.join(known)}){hint}")


def check_dns_name(name: str, keys: list, path: Path, relative_ok: bool = False) -> None:
    """A zone or owner name bind9, dnspython and the XDP responder all accept: labels of
    letters, digits, '-' and '_' (RFC 1035 §2.3.1, '_' as in service labels), 1-63 bytes each,
    at most 255 in wire form (§3.1)."""
    bare = name[:-1] if name.endswith(".") else name
    labels = bare.split(".") if bare else []
    wire = sum(len(x) + 1 for x in labels) + 1
    if (name == "@" and relative_ok) or (name == "." and not relative_ok):
        return
    if not labels or not all(DNS_LABEL.match(x) for x in labels) or wire > 255:
        raise ConfigError(f"Failed to load config {path}: {_key_path(keys)}: {name!r} is not a DNS name "
                          "(labels of letters, digits, '-' and '_', 1-63 characters each, 255 in all)")


def _build(raw: dict, path: Path) -> Config:
    def fail(keys, msg):
        raise ConfigError(f"Failed to load config {path}: {_key_path(keys)}: {msg}")

    tb = raw["testbed"]
    transport = tb["transport"]
    env_prefix = os.environ.get("XENOBENCH_NS_PREFIX")
    prefix = env_prefix or tb["prefix"]
    if not re.match(r"^[a-z][a-z0-9-]{0,5}$", prefix):
        rule = "must be 1-6 characters of a-z, 0-9, '-', starting with a letter"
        if env_prefix:
            raise ConfigError(f"Failed to load config {path}: the environment's XENOBENCH_NS_PREFIX "
                              f"{prefix!r} (it overrides testbed.prefix) {rule}")
        fail(["testbed", "prefix"], f"{prefix!r} {rule}")

    svc = raw["service"]
    try:
        vip = ipaddress.IPv4Address(svc["vip"])
    except ValueError:
        fail(["service", "vip"], f"{svc['vip']!r} is not an IPv4 address")
    check_dns_name(svc["zone"], ["service", "zone"], path)
    dns_sec = raw.get("dns") or {}
    if isinstance(dns_sec.get("qname"), str):
        check_dns_name(dns_sec["qname"], ["dns", "qname"], path, relative_ok=True)
    for rname in dns_sec.get("records") or {}:
        check_dns_name(rname, ["dns", "records", rname], path, relative_ok=True)
    lb_mac = None
    if svc.get("lb_mac") is not None:
        try:
            lb_mac = normalize_mac(svc["lb_mac"])
        except ValueError as e:
            fail(["service", "lb_mac"], str(e))

    macs: dict[str, list] = {}
    ips: dict[str, list] = {str(vip): ["service", "vip"]}
    nodes: dict[str, NodeConfig] = {}
    for nname, n in raw["nodes"].items():
        base = ["nodes", nname]
        role = n["role"]
        if role not in ROLES:
            fail(base + ["role"], f"unknown role {role!r} (known: {', '.join(ROLES)})")
        ntrans = n.get("transport", transport)
        ssh = None
        if ntrans == "ssh":
            if "ssh" not in n:
                fail(base, "transport is 'ssh' but the node has no 'ssh' section (host, user, key, known_hosts)")
            ssh = SshConfig(**n["ssh"])
        seen_if: dict[str, int] = {}
        ifaces = []
        for idx, i in enumerate(n["interfaces"]):
            ik = base + ["interfaces", idx]
            if i["name"] in seen_if:
                fail(ik + ["name"], f"interface {i['name']!r} is used twice on node {nname} "
                                    f"(also interfaces[{seen_if[i['name']]}])")
            seen_if[i["name"]] = idx
            mac = None
            if "mac" in i:
                try:
                    mac = normalize_mac(i["mac"])
                except ValueError as e:
                    fail(ik + ["mac"], str(e))
                if mac in macs:
                    fail(ik + ["mac"], f"duplicate MAC {mac} (also at {_key_path(macs[mac])})")
                macs[mac] = ik + ["mac"]
            elif role in BACKEND_ROLES:
                fail(ik + ["mac"], f"backend node {nname} has no MAC on interface {i['name']!r}; "
                                   "the load balancer needs it to rewrite frames")
            elif ntrans == "netns":
                fail(ik + ["mac"], f"interface {i['name']!r} of netns node {nname} needs a MAC")

            def parse_ip(value, keys):
                try:
                    addr = ipaddress.IPv4Interface(value)
                except ValueError:
                    fail(keys, f"{value!r} is not an IPv4 address with prefix length (like 198.18.0.1/24)")
                key = str(addr.ip)
                if key in ips:
                    fail(keys, f"duplicate IP {key} (also at {_key_path(ips[key])})")
                ips[key] = keys
                return addr

            ip = parse_ip(i["ip"], ik + ["ip"]) if "ip" in i else None
            extra = tuple(parse_ip(v, ik + ["extra_ips", j]) for j, v in enumerate(i.get("extra_ips", [])))
            if i.get("lb_port") and role not in ("lb", "dpu"):
                fail(ik + ["lb_port"], f"only lb and dpu nodes have lb ports, {nname} is {role!r}")
            ifaces.append(Interface(i["name"], mac, ip, extra, i.get("lb_port"), i.get("pci")))
        for which in ("ingress", "egress"):
            if sum(1 for i in ifaces if i.lb_port == which) > 1:
                fail(base + ["interfaces"], f"more than one {which} port on node {nname}")
        nodes[nname] = NodeConfig(nname, role, ntrans, tuple(ifaces), ssh, n.get("pci"))

    for role in REQUIRED_ROLES:
        if not any(n.role == role for n in nodes.values()):
            fail(["nodes"], f"no node has role {role!r} (needed: {', '.join(REQUIRED_ROLES)})")
    for role in SINGLE_ROLES:
        having = [n.name for n in nodes.values() if n.role == role]
        if len(having) > 1:
            fail(["nodes"], f"role {role!r} is given to more than one node: {', '.join(having)}")
    lbn = next(n for n in nodes.values() if n.role == "lb")
    if tb["kind"] == "namespaces" and lbn.lb_port("ingress") is None:
        fail(["nodes", lbn.name, "interfaces"], "the lb node needs an interface with lb_port: ingress")

    cfg = Config(
        path=path,
        raw=raw,
        name=tb["name"],
        testbed_kind=tb["kind"],
        transport=transport,
        prefix=prefix,
        state_dir=Path(tb["state_dir"]),
        service=ServiceConfig(str(vip), svc["port"], svc["zone"],
                              Path(svc["backends"]) if svc.get("backends") else None, lb_mac),
        nodes=nodes,
    )
    # one state directory per testbed and prefix, so parallel runs on one machine stay apart
    cfg.state_dir = cfg.resolve(cfg.state_dir) / f"{cfg.name}-{prefix.rstrip('-')}"
    if cfg.service.backends is not None:
        object.__setattr__(cfg.service, "backends", cfg.resolve(cfg.service.backends))
    return cfg
