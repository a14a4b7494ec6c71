"""Any TRex STL profile runs as TRex runs it.

The user's tunables (`-t key=value`, or TRex's own argv form `-t '--size 64 --fast'`) reach every
profile as `--key` as given (TRex: parsing_opts.convert_old_tunables_to_new_tunables); the
testbed's tunables (vip, dport, dst_mac, ...) reach only a profile that declares them in a
module-level TESTBED_TUNABLES (ours, trex_profiles/); profiles are loaded by the client's own
loader (STLProfile.load), `trex_stl_lib.api` resolved; a profile the loader refuses gets the
loader's reason and the profile's name, never a traceback.

Fixture table: profile file (tests/fixtures/traffic/stl/, or a broken one written here) → `xenobench
traffic compile` on the namespace testbed's config (config/local.yaml, whose tunables main passed
to every profile) → the frames, or the exact message.
"""

import json
import os

import pytest
from click.testing import CliRunner
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from xenobench import REPO_ROOT
from xenobench.cli import main as cli
from xenobench.traffic.profiles import declared_tunables, read_pcap

from .profile_loads import preload
from .test_trex_stock import TREX
from .trex_server_double import TrexServerDouble

STL = REPO_ROOT / "tests" / "fixtures" / "traffic" / "stl"
FIPS = REPO_ROOT / "config" / "fips.yaml"
LB_MAC = "02:00:00:00:05:00"     # config/local.yaml: the LB's ingress port (the testbed's dst_mac)

# broken profiles, written into tmp_path (a syntax error cannot sit in the repo's linted tree)
BROKEN = {
    "syntax_bad.py": "def register(:\n    pass\n",
    "no_register.py": "x = 1\n",
    "raises.py": "class P:\n    def get_streams(self, tunables, **kwargs):\n        raise ValueError('no streams for you')\n"
                 "\n\ndef register():\n    return P()\n",
    "no_kwargs.py": "class P:\n    def get_streams(self):\n        return []\n\n\ndef register():\n    return P()\n",
    "module_argparse.py": "import argparse\nargparse.ArgumentParser().parse_args(['--x'])\n",
    "bad_decl.py": "TESTBED_TUNABLES = tuple('ab')\n",
    "my.profile.py": "def register():\n    pass\n",
}


def frame(size=64, ip_id=7, dport=12, src="16.0.0.1", dst_mac="00:00:00:00:00:01"):
    """What user_argparse.py sends (its docstring), checked field by field."""
    return {"len": size, "id": ip_id, "dport": dport, "src": src, "dst": dst_mac}


def fields(f: bytes) -> dict:
    e = Ether(f)
    return {"len": len(f), "id": e[IP].id, "dport": e[UDP].dport, "src": e[IP].src, "dst": e.dst}


# (id, profile, -t items, expected frames of one cycle | the message the command ends with)
CASES = [
    ("user-defaults", "user_argparse.py", [], [frame()]),
    ("user-key-value", "user_argparse.py", ["size=128", "pg_id=9", "count=3"],
     [frame(128, 9, src=f"16.0.0.{i}") for i in (1, 2, 3)]),
    ("user-trex-argv-form", "user_argparse.py", ["--size 100 --fast", "--pg_id=3"], [frame(100, 3, dport=4789)]),
    # the user's tunables reach every profile, verbatim, as in TRex: the profile's argparse answers
    ("user-unknown-tunable", "user_argparse.py", ["vip=1.2.3.4"],
     "with tunables --vip 1.2.3.4: unrecognized arguments: --vip 1.2.3.4"),
    ("user-key-spelling-kept", "user_argparse.py", ["pg-id=3"],
     "with tunables --pg-id 3: unrecognized arguments: --pg-id 3"),
    ("declares-one-testbed-tunable", "declares_dst_mac.py", [], [frame(60, 1, dst_mac=LB_MAC)]),
    ("declares-user-wins", "declares_dst_mac.py", ["dst-mac=02:00:00:00:00:99"],
     [frame(60, 1, dst_mac="02:00:00:00:00:99")]),
    ("syntax-error", "syntax_bad.py", [], "with tunables (none): SyntaxError: invalid syntax (syntax_bad.py, line 1)"),
    ("no-register", "no_register.py", [],
     "with tunables (none): AttributeError: module 'no_register' has no attribute 'register'"),
    ("raises", "raises.py", [], "with tunables (none): ValueError: no streams for you (raises.py line 3, in get_streams)"),
    ("get-streams-signature", "no_kwargs.py", [],
     "with tunables (none): TypeError: P.get_streams() got an unexpected keyword argument 'direction'"),
    ("argparse-at-import", "module_argparse.py", [], "with tunables (none): unrecognized arguments: --x"),
    ("two-dots-in-name", "my.profile.py", [], "with tunables (none): unknown profile file type: 'None'"),
    ("bad-declaration", "bad_decl.py", [],
     'bad_decl.py: TESTBED_TUNABLES (line 1) must be a literal tuple of tunable names, like ("vip", "dport")'),
]


@pytest.fixture(scope="module", autouse=True)
def profiles_loaded(local_cfg):
    """The profiles this module compiles without a refusal, loaded in one TRex loader process
    (tests/profile_loads.py); the refusals go through load_streams' own child process each."""
    from xenobench.cli.traffic_cmd import parse_tunables
    preload([*[(STL / p, parse_tunables(t), local_cfg) for _, p, t, want in CASES
               if isinstance(want, list) and p not in BROKEN],
             *[(TREX / "stl" / name, {}, local_cfg) for name in (STOCK if TREX is not None else ())],
             (STL / "user_argparse.py", {"size": "100", "fast": True}, None),   # the dry run of `traffic run`
             *[(name, {k: v for k, v in OURS_GIVEN.items() if k in declared_tunables(name)}, None)
               for name in ("udp_payload", "background_split")]])


@pytest.mark.parametrize("profile,tunables,want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_traffic_compile_runs_any_stl_profile_as_trex(tmp_path, profile, tunables, want):
    path = STL / profile
    if profile in BROKEN:
        path = tmp_path / profile
        path.write_text(BROKEN[profile])
    out = tmp_path / "out.pcap"
    args = ["traffic", "compile", str(path), "--out", str(out)]
    for t in tunables:
        args += ["-t", t]
    res = CliRunner().invoke(cli, args)
    if isinstance(want, list):
        assert res.exit_code == 0, res.output
        assert [fields(f) for f in read_pcap(out)] == want
        return
    assert res.exit_code == 1, res.output
    msg = res.output.strip()
    assert "Traceback" not in msg and len(msg.splitlines()) == 1, msg
    verb = "read" if profile == "bad_decl.py" else "load"
    assert msg.startswith(f"xenobench: Failed to {verb} profile {path}"), msg
    assert msg.endswith(want), msg


# every testbed tunable, as the harness fills them for config/local.yaml (cores: the thesis testbed's)
OURS_GIVEN = {"vip": "198.18.0.100", "dport": 53, "dst_mac": LB_MAC, "src_mac": "02:00:00:00:04:00",
              "src_ip_base": "198.19.0.0", "cores": 14, "class_bits": 2, "dns_classes": "0,2"}


def test_our_profiles_accept_every_testbed_tunable_they_declare():
    """TESTBED_TUNABLES names only options the profile's parser takes (a drifted declaration would
    make the harness pass an option the profile refuses)."""
    from xenobench.traffic.profiles import compile_frames
    given = OURS_GIVEN
    for name in ("udp_payload", "background_split"):
        declared = declared_tunables(name)
        assert {"vip", "dport", "dst_mac", "src_mac", "src_ip_base", "cores"} <= declared
        c = compile_frames(name, {k: v for k, v in given.items() if k in declared})
        assert Ether(c.frames[0]).dst == LB_MAC and c.streams[0]["vm"]["cache"] % 14 == 0
    assert declared_tunables("background_split") - declared_tunables("udp_payload") == {"class_bits", "dns_classes"}
    assert declared_tunables(STL / "user_argparse.py") == frozenset()


def test_traffic_run_on_a_users_profile_with_trex(tmp_path):
    """`traffic run` of a user's profile on the thesis config, against the TRex server double (the
    real STLClient): the profile gets the user's tunables only, one load per port as TRex's console
    does (direction port % 2), and the trial's record says so. The dry run lists the same."""
    with TrexServerDouble(ports=2, cores=14) as srv:
        conf = tmp_path / "fips-double.yaml"
        trex = {"server": "127.0.0.1", "sync_port": srv.sync_port, "async_port": srv.async_port, "ports": [0, 1],
                "version": "v3.04"}
        conf.write_text(f"extends: {FIPS}\ntraffic:\n  trex: {json.dumps(trex)}\n")
        args = ["--config", str(conf), "traffic", "run", str(STL / "user_argparse.py"), "-t", "size=100", "-t",
                "--fast", "--rate", "2000", "--duration", "0.5", "--json"]
        res = CliRunner().invoke(cli, args, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        assert res.exit_code == 0, res.output
        d = json.loads(res.output.strip().splitlines()[-1])
        adds = srv.call("add_stream")
    assert d["valid"] and d["tx_packets"] == 1000 and d["generator"] == "trex", d
    assert d["tunables"] == {"size": "100", "fast": True} and d["server_cores"] == 14
    assert sorted(a["port_id"] for a in adds) == [0, 1]
    for a in adds:
        pkt = Ether(__import__("base64").b64decode(a["stream"]["packet"]["binary"]))
        assert len(pkt) == 100 and pkt[UDP].dport == 4789 and pkt.dst == "00:00:00:00:00:01"
    dry = CliRunner().invoke(cli, args[:-1] + ["--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.output)
    assert plan["tunables"] == ["--size", "100", "--fast"]
    assert [c for c in plan["calls"] if c.startswith("add_streams")] == [
        f"add_streams(STLProfile.load({str(STL / 'user_argparse.py')!r}, direction={p}, port_id={p}, "
        f"tunables=['--size', '100', '--fast']).get_streams(), ports=[{p}])" for p in (0, 1)]


# TRex's own stock profiles (trex-core scripts/stl, located as test_trex_stock.py locates them):
# each compiles on the namespace testbed's config exactly as it compiles with no tunables (the
# testbed's tunables do not reach them), one cycle in TRex's send order (imix: 3 streams at
# 28:16:4 pps over 254 periods of its field engine; range_clients: 30000 flows).
STOCK = {"udp_1pkt_simple.py": 1, "bench.py": 1, "imix.py": 3048, "udp_1pkt_src_ip_split.py": 255,
         "simple_3st.py": 6, "udp_1pkt_range_clients.py": 30000}


@pytest.mark.skipif(TREX is None, reason="trex-core's scripts/stl not found (set XENOBENCH_TREX_CORE)")
@pytest.mark.parametrize("name", list(STOCK))
def test_trex_stock_profiles_compile_on_the_testbed_config(tmp_path, name):
    path = TREX / "stl" / name
    out = tmp_path / "out.pcap"
    res = CliRunner().invoke(cli, ["traffic", "compile", str(path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(read_pcap(out)) == STOCK[name]
