"""Config validation: each malformed case gives its own error naming file, key path and value."""

import copy
import re
import subprocess
import sys

import pytest
import yaml

from xenobench.config import DEFAULT_CONFIG, load_config
from xenobench.errors import ConfigError

BASE = yaml.safe_load(DEFAULT_CONFIG.read_text())


def _write(tmp_path, doc):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def _mutated(fn):
    doc = copy.deepcopy(BASE)
    fn(doc)
    return doc


def _set(path, value):
    def fn(doc):
        d = doc
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return fn


CASES = [
    ("malformed-mac", _set(["nodes", "fips2", "interfaces", 0, "mac"], "02:zz:00:00:02:00"),
     "nodes.fips2.interfaces[0].mac: '02:zz:00:00:02:00' is not a MAC address "
     "(expected six hex octets like 02:00:00:00:01:00)"),
    ("unknown-role", _set(["nodes", "fips3", "role"], "router"),
     "nodes.fips3.role: unknown role 'router' (known: client, dns_backend, backend, loadgen, lb, dpu)"),
    ("role-missing", lambda d: d["nodes"].pop("fips4"),
     "nodes: no node has role 'loadgen' (needed: client, dns_backend, loadgen, lb)"),
    ("duplicate-mac", _set(["nodes", "fips3", "interfaces", 0, "mac"], "02:00:00:00:02:00"),
     "nodes.fips3.interfaces[0].mac: duplicate MAC 02:00:00:00:02:00 (also at nodes.fips2.interfaces[0].mac)"),
    ("duplicate-ip", _set(["nodes", "fips3", "interfaces", 0, "ip"], "198.18.0.2/24"),
     "nodes.fips3.interfaces[0].ip: duplicate IP 198.18.0.2 (also at nodes.fips2.interfaces[0].ip)"),
    ("vip-is-node-ip", _set(["service", "vip"], "198.18.0.3"),
     "nodes.fips3.interfaces[0].ip: duplicate IP 198.18.0.3 (also at service.vip)"),
    ("interface-twice", lambda d: d["nodes"]["fips5"]["interfaces"][1].update(name="p0"),
     "nodes.fips5.interfaces[1].name: interface 'p0' is used twice on node fips5 (also interfaces[0])"),
    ("backend-without-mac", lambda d: d["nodes"]["fips3"]["interfaces"][0].pop("mac"),
     "nodes.fips3.interfaces[0].mac: backend node fips3 has no MAC on interface 'eth0'; "
     "the load balancer needs it to rewrite frames"),
    ("bad-ip", _set(["nodes", "fips1", "interfaces", 0, "ip"], "198.18.0.300/24"),
     "nodes.fips1.interfaces[0].ip: '198.18.0.300/24' is not an IPv4 address with prefix length (like 198.18.0.1/24)"),
    ("schema-type", _set(["service", "port"], "fifty-three"),
     "service.port: 'fifty-three' is not of type 'integer'"),
    ("two-clients", _set(["nodes", "fips3", "role"], "client"),
     "nodes: role 'client' is given to more than one node: fips1, fips3"),
    ("fractional-rate", _set(["experiments", "loss", "rates_pps"], [250000, 1500.5]),
     "experiments.loss.rates_pps[1]: 1500.5 is not of type 'integer'"),
    ("ssh-without-section", _set(["nodes", "fips1", "transport"], "ssh"),
     "nodes.fips1: transport is 'ssh' but the node has no 'ssh' section (host, user, key, known_hosts)"),
    # the testbed's kind (what up/down build) is its own key, apart from the nodes' transport
    ("kind-missing", lambda d: d["testbed"].pop("kind"), "testbed: 'kind' is a required property"),
    ("kind-is-a-transport", _set(["testbed", "kind"], "netns"),
     "testbed.kind: 'netns' is not one of ['namespaces', 'hosts']"),
]


@pytest.mark.parametrize("name,mutate,expect", CASES, ids=[c[0] for c in CASES])
def test_malformed_config_names_file_path_and_value(tmp_path, name, mutate, expect):
    f = _write(tmp_path, _mutated(mutate))
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert str(e.value) == f"Failed to load config {f}: {expect}"


# a key no schema knows, below a section: (key path, the nearest known key or None)
UNKNOWN_KEYS = [
    (["nodes", "fips1", "colour"], None),
    (["nodes", "fips1", "rol"], "role"),
    (["nodes", "fips1", "interfaces", 0, "mak"], "mac"),
    (["testbed", "nmae"], "name"),
    (["experiments", "pps", "rate_ppz"], "rate_pps"),
    (["dns", "prober", "timeout"], "timeout_s"),
]


@pytest.mark.parametrize("keys,near", UNKNOWN_KEYS, ids=[".".join(map(str, k)) for k, _ in UNKNOWN_KEYS])
def test_unknown_key_names_its_path_and_the_nearest(tmp_path, keys, near):
    f = _write(tmp_path, _mutated(_set(keys, 1)))
    with pytest.raises(ConfigError) as e:
        load_config(f)
    where = ".".join(str(k) for k in keys).replace(".0.", "[0].")
    msg = str(e.value)
    assert msg.startswith(f"Failed to load config {f}: {where}: unknown key (known here: "), msg
    assert msg.endswith(f"; did you mean {near!r}?" if near else ")"), msg
    if near:  # the suggestion is among the keys listed
        assert re.search(rf"\(known here: [^)]*\b{near}\b", msg), msg


def test_not_yaml_and_missing_file(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("nodes: [unclosed\n")
    with pytest.raises(ConfigError, match=rf"Failed to load config {f}: not valid YAML"):
        load_config(f)
    with pytest.raises(ConfigError, match=r"Failed to load config .*missing.yaml: No such file or directory"):
        load_config(tmp_path / "missing.yaml")


def test_shipped_configs_load():
    local = load_config()
    assert local.role("lb").lb_port("ingress").name == "p0"
    assert local.lb_mac == "02:00:00:00:05:00"
    fips = load_config(DEFAULT_CONFIG.parent / "fips.yaml")
    assert [(c.testbed_kind, c.transport) for c in (local, fips)] == [("namespaces", "netns"), ("hosts", "ssh")]
    assert fips.role("client").iface().mac == "a0:88:c2:b6:14:1a"
    assert fips.role("dpu").lb_port("egress").mac == "c4:70:bd:a0:56:bd"
    assert fips.nodes["fips2"].ssh.accept_unknown_host_keys is False


def test_cli_config_check_exit_codes(tmp_path):
    f = _write(tmp_path, _mutated(_set(["nodes", "fips2", "interfaces", 0, "mac"], "nope")))
    p = subprocess.run([sys.executable, "-m", "xenobench.cli", "--config", str(f), "config", "check"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert f"Failed to load config {f}: nodes.fips2.interfaces[0].mac: 'nope' is not a MAC address" in p.stderr
    p = subprocess.run([sys.executable, "-m", "xenobench.cli", "config", "check"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "ok (testbed local" in p.stdout


def test_extends_merges_mappings_and_replaces_the_rest(tmp_path):
    (tmp_path / "small.yaml").write_text(
        f"extends: {DEFAULT_CONFIG}\ntestbed: {{name: small}}\nexperiments: {{repetitions: 1, pps: {{lbs: [ebpf]}}}}\n")
    cfg = load_config(tmp_path / "small.yaml")
    assert cfg.name == "small" and cfg.transport == "netns"            # testbed merged key by key
    assert cfg.nodes["fips2"].iface().mac == "02:00:00:00:02:00"       # nodes from the base
    ex = cfg.section("experiments")
    assert ex["repetitions"] == 1 and ex["pps"]["lbs"] == ["ebpf"]     # lists replaced
    assert ex["pps"]["payloads"] == BASE["experiments"]["pps"]["payloads"]


def test_extends_errors_name_the_file(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: missing.yaml\n")
    with pytest.raises(ConfigError, match=r"a\.yaml: extends: 'missing\.yaml': No such file or directory"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text("extends: c.yaml\n")
    (tmp_path / "c.yaml").write_text("extends: b.yaml\n")
    with pytest.raises(ConfigError, match=r"extends: 'b\.yaml' forms a cycle"):
        load_config(tmp_path / "b.yaml")
    (tmp_path / "d.yaml").write_text(f"extends: {DEFAULT_CONFIG}\nnodes: {{fips3: {{interfaces: [{{name: eth0, mac: 'zz'}}]}}}}\n")
    with pytest.raises(ConfigError, match=r"d\.yaml: nodes\.fips3\.interfaces\[0\]\.mac: 'zz' is not a MAC address"):
        load_config(tmp_path / "d.yaml")


@pytest.mark.parametrize("env, yaml_prefix, expect", [
    ("xbA-", "xb-", "the environment's XENOBENCH_NS_PREFIX 'xbA-' (it overrides testbed.prefix)"),
    (None, "9xb-", "testbed.prefix: '9xb-' does not match"),
])
def test_bad_prefix_names_where_it_came_from(tmp_path, monkeypatch, env, yaml_prefix, expect):
    """A prefix from the environment is blamed on the environment, not on the file's key."""
    if env is None:
        monkeypatch.delenv("XENOBENCH_NS_PREFIX", raising=False)
    else:
        monkeypatch.setenv("XENOBENCH_NS_PREFIX", env)
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["testbed"]["prefix"] = yaml_prefix
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert expect in str(e.value)
