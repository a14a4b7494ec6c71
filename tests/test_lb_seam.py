"""The load-balancer seam (xenobench.lb, xenobench.lb.xdp, xenobench.agents.xdp_lb): the LB kinds
are listed once and every consumer reads that list; XDP-controller LBs share one agent command line;
a testbed refuses by name an LB that needs something it cannot provide."""

import subprocess
import sys

import pytest
import yaml

from xenobench.agents import ebpf_lb, katran_lb, wire_lb
from xenobench.config import load_config
from xenobench.errors import ConfigError, TestbedError
from xenobench import REPO_ROOT
from xenobench.lb import LBS, get_lb, kinds, label
from xenobench.lb.base import LoadBalancer
from xenobench.testbed import Testbed


def _cfg_with(tmp_path, **experiments):
    raw = yaml.safe_load(open("config/local.yaml"))
    raw["experiments"].update(experiments)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


@pytest.mark.parametrize("section,key", [("pps", "lbs"), ("compare", "lbs"), ("ndr_pdr", "lbs")])
def test_schema_lb_lists_are_the_registry(tmp_path, section, key):
    raw = yaml.safe_load(open("config/local.yaml"))
    sec = dict(raw["experiments"][section], **{key: ["wire", "katrn"]})  # a paired list holds two or more
    with pytest.raises(ConfigError) as e:
        load_config(_cfg_with(tmp_path, **{section: sec}))
    assert f"experiments.{section}.{key}[1]: 'katrn' is not one of {list(kinds())}" in str(e.value)


def test_rtt_lists_accept_none_and_every_kind(tmp_path):
    raw = yaml.safe_load(open("config/local.yaml"))
    load_config(_cfg_with(tmp_path))  # the kinds the config declares (lbs:) join the list
    cfg = load_config(_cfg_with(tmp_path, rtt=dict(raw["experiments"]["rtt"], lbs=["none", *kinds()])))
    assert cfg.section("experiments")["rtt"]["lbs"] == ["none", *kinds()]


def test_labels_come_from_the_registry():
    assert label("xenoflow") == LBS["xenoflow"].label == "XenoFlow"
    assert label("none") == "no LB"
    assert label("somebody-elses") == "somebody-elses"
    assert [k for k, v in LBS.items() if v.reference] == ["wire"]


def test_unknown_kind_is_refused_with_the_list(local_cfg):
    with pytest.raises(ConfigError) as e:
        get_lb("katrn", Testbed(local_cfg))
    assert f"unknown kind 'katrn' (known: {', '.join(kinds())})" in str(e.value)


def test_every_kind_with_a_data_plane_folder_is_built():
    """scripts/build.sh builds every top-level folder with a Makefile: a kind's bpf_dir must be one,
    or its objects are never built and its tests skip."""
    for k in LBS.values():
        if k.bpf_dir is not None:
            assert (REPO_ROOT / k.bpf_dir / "Makefile").is_file(), k


class _NeedsFabric(LoadBalancer):
    kind = "encap"
    needs = ("l3_gateway", "ipip_decap")

    def start(self, backends=None, *, dry_run=False, **opts):
        self.provide_needs()
        return {}

    def stop(self):
        return False

    def stats(self):
        return {}


def test_testbed_refuses_what_it_cannot_provide_by_name(local_cfg):
    with pytest.raises(TestbedError) as e:
        _NeedsFabric(Testbed(local_cfg)).start()
    assert ("Failed to start encap on testbed local: it needs l3_gateway, ipip_decap, which this testbed "
            "does not provide (provides: nothing)") in str(e.value)


@pytest.mark.parametrize("agent", [ebpf_lb.AGENT, wire_lb.AGENT, katran_lb.AGENT])
def test_every_xdp_agent_has_the_same_command_line(agent):
    p = subprocess.run([sys.executable, "-m", agent.prog_name, "run", "--help"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for opt in ("--backends", "--ingress", "--egress", "--src-mac", "--state-dir", "--pin-dir", "--interval",
                "--generic"):
        assert opt in p.stdout, (agent.prog_name, opt)


def test_wire_agent_requires_egress_ebpf_agent_does_not():
    p = subprocess.run([sys.executable, "-m", "xenobench.agents.wire_lb", "run", "--backends", "b.json",
                        "--ingress", "p0", "--src-mac", "02:00:00:00:00:01", "--state-dir", "/tmp/x",
                        "--pin-dir", "/sys/fs/bpf/none"], capture_output=True, text=True)
    assert p.returncode == 2 and "the following arguments are required: --egress" in p.stderr
    a = ebpf_lb.AGENT.parser().parse_args(["run", "--backends", "b.json", "--ingress", "eth0", "--src-mac",
                                           "02:00:00:00:00:01", "--state-dir", "/tmp/x", "--pin-dir", "/p",
                                           "--vip", "198.18.0.100"])
    assert a.egress is None  # XDP_TX out of the ingress port (a one-port host like fips5)
