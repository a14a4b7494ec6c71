"""The DPU deploy of XenoFlow on the thesis testbed (config/fips.yaml) before the build: the build
environment check (tools and the pkg-config modules lb/meson.build asks for, with DOCA's
pkg-config directories on PKG_CONFIG_PATH explicitly: a non-interactive SSH session does not read
the profile that sets them), apt install only when configured, a clear failure otherwise; and the
OVS step in the deploy order. There is no BlueField here: a recording node double scripted with
what the DPU would answer. The OVS step against a real Open vSwitch: tests/test_ovs.py.
"""

import shlex

import pytest
from click.testing import CliRunner

from xenobench import REPO_ROOT
from xenobench.cli import main as cli
from xenobench.config import load_config
from xenobench.errors import NodeError
from xenobench.lb import get_lb
from xenobench.lb.xenoflow import build_modules
from xenobench.testbed import get_testbed

from .test_xenoflow import RecordingNodeDouble

FIPS = REPO_ROOT / "config" / "fips.yaml"
DOCA_PC = ("export PKG_CONFIG_PATH=/opt/mellanox/doca/lib/aarch64-linux-gnu/pkgconfig:"
           "/opt/mellanox/dpdk/lib/aarch64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}; ")


class ScriptedDpuDouble(RecordingNodeDouble):
    """Recording node double of the DPU whose build-environment check answers from a script
    (one stdout per check, in order), as the check command prints on a real DPU."""

    def __init__(self, name, check_answers=(), bridges=("ovsbr1", "ovsbr2")):
        super().__init__(name)
        self.answers, self.bridges = list(check_answers), list(bridges)

    def run(self, argv, **kw):
        self.calls.append(("run", list(argv)))
        text = " ".join(argv)
        out, rc = "", 0
        if "pkg-config --exists" in text:
            out = self.answers.pop(0) if self.answers else ""
        elif "br-exists" in text:
            rc = 0 if argv[-1] in self.bridges else 2
        elif "list-br" in text:
            out = "\n".join(self.bridges) + "\n"
        return type("R", (), {"ok": rc == 0, "stdout": out, "stderr": "", "returncode": rc})()


def _lb(monkeypatch, dbl, **sec):
    lb = get_lb("xenoflow", get_testbed(load_config(FIPS)))
    lb.sec.update(sec)
    monkeypatch.setattr(type(lb), "node", property(lambda self: dbl))
    return lb


def _runs(dbl):
    return [" ".join(c[1]) for c in dbl.calls if c[0] in ("run", "start")]


def test_build_modules_come_from_lb_meson_build():
    mods = build_modules()
    assert mods[:4] == ["doca-flow", "doca-common", "doca-argp", "libdpdk"]
    text = (REPO_ROOT / "lb" / "meson.build").read_text()
    assert all(f"dependency('{m}')" in text for m in mods)


def test_recording_double_build_env_checked_before_the_build_with_docas_pkg_config_path(monkeypatch):
    dbl = ScriptedDpuDouble("fips5-dpu")
    res = _lb(monkeypatch, dbl).start()
    runs = _runs(dbl)
    check = next(c for c in dbl.calls if c[0] == "run" and "pkg-config --exists" in " ".join(c[1]))[1]
    assert check[:2] == ["sh", "-c"] and check[2].startswith(DOCA_PC)
    assert f"for m in {' '.join(build_modules())}; do pkg-config --exists" in check[2]
    assert 'for t in cc meson ninja pkg-config; do command -v "$t"' in check[2]
    meson = next(c for c in runs if "meson setup" in c)
    ninja = next(c for c in runs if "ninja -C" in c)
    assert DOCA_PC in meson and DOCA_PC in ninja  # meson and its re-runs from ninja see DOCA's .pc files
    order = [next(i for i, c in enumerate(runs) if key in c) for key in
             ("tar -xzf", "pkg-config --exists", "meson setup", "ninja -C", "ovs-vsctl br-exists ovsbr2",
              "ovs-ofctl -O OpenFlow12 add-flow ovsbr2 ip,in_port=pf1hpf,actions=output:p1", "nr_hugepages",
              "xenobench-xenoflow start -a")]
    assert order == sorted(order), runs
    assert not any("apt-get" in c for c in runs) and res["mode"] == "doca"
    assert shlex.join(check) in res["commands"]


def test_recording_double_missing_docas_modules_fail_before_building(monkeypatch):
    dbl = ScriptedDpuDouble("fips5-dpu", ["module doca-flow\nmodule libdpdk\ntool ninja\n"])
    with pytest.raises(NodeError) as e:
        _lb(monkeypatch, dbl).start()
    assert str(e.value) == (
        "Failed to build xenoflow on fips5-dpu: missing pkg-config modules doca-flow, libdpdk "
        "(PKG_CONFIG_PATH=/opt/mellanox/doca/lib/aarch64-linux-gnu/pkgconfig:/opt/mellanox/dpdk/lib/aarch64-linux-gnu/"
        "pkgconfig:$PKG_CONFIG_PATH) and tools ninja; install apt packages ninja-build (or "
        f"xenoflow.build_env.install: true in {FIPS}); the DOCA SDK 2.9 for the modules without a package "
        "(doca-*, libdpdk: DOCA's DPDK), or their directory in xenoflow.build_env.pkg_config_path")
    runs = _runs(dbl)
    # nothing built and no rule added (a failed start only removes a rule a run may have left)
    assert not any("meson setup" in c or "add-flow" in c or "apt-get" in c for c in runs)
    assert not any(c[0] == "start" for c in dbl.calls)


def test_recording_double_install_configured_apt_installs_then_rechecks(monkeypatch):
    dbl = ScriptedDpuDouble("fips5-dpu", ["tool meson\ntool ninja\n", ""])
    res = _lb(monkeypatch, dbl, sudo=True, build_env={**load_config(FIPS).section("xenoflow")["build_env"],
                                                      "install": True}).start()
    runs = _runs(dbl)
    apt = "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends meson ninja-build"
    assert apt in runs and apt in res["commands"]
    checks = [i for i, c in enumerate(runs) if "pkg-config --exists" in c]
    assert len(checks) == 2 and checks[0] < runs.index(apt) < checks[1] < next(
        i for i, c in enumerate(runs) if "meson setup" in c)


def test_recording_double_install_configured_still_fails_without_the_doca_sdk(monkeypatch):
    dbl = ScriptedDpuDouble("fips5-dpu", ["tool ninja\nmodule doca-flow\n", "module doca-flow\n"])
    with pytest.raises(NodeError, match=r"^Failed to build xenoflow on fips5-dpu: missing pkg-config modules "
                                        r"doca-flow \(PKG_CONFIG_PATH=.*; install the DOCA SDK 2.9"):
        _lb(monkeypatch, dbl, build_env={**load_config(FIPS).section("xenoflow")["build_env"], "install": True}).start()
    assert sum("apt-get install" in c for c in _runs(dbl)) == 1 and not any("meson setup" in c for c in _runs(dbl))


def test_recording_double_missing_ovs_bridge_stops_the_deploy_before_start(monkeypatch):
    dbl = ScriptedDpuDouble("fips5-dpu", bridges=("br-int",))
    with pytest.raises(NodeError) as e:
        _lb(monkeypatch, dbl).start()
    assert str(e.value) == (f"Failed to apply the OVS rule on fips5-dpu: bridge 'ovsbr2' (xenoflow.ovs.bridge in "
                            f"{FIPS}) does not exist; bridges: br-int; fix: set xenoflow.ovs.bridge in {FIPS} to the "
                            "bridge that holds the flows' ports (pf1hpf on no bridge; p1 on no bridge; bridges: "
                            "br-int), or add them to one (ovs-vsctl add-port BRIDGE PORT)")
    assert not any("add-flow" in c or "nr_hugepages" in c for c in _runs(dbl))
    assert not any(c[0] == "start" for c in dbl.calls)


def test_lb_start_dry_run_on_fips_shows_the_build_env_check_and_the_ovs_step():
    res = CliRunner().invoke(cli, ["--config", str(FIPS), "lb", "start", "--lb", "xenoflow", "--dry-run"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    check = next(i for i, ln in enumerate(lines) if "pkg-config --exists" in ln)
    assert lines[check].startswith("sh -c 'export PKG_CONFIG_PATH=/opt/mellanox/doca/lib/aarch64-linux-gnu/pkgconfig:")
    assert lines[check + 1] == ("# anything missing fails the deploy, naming it (xenoflow.build_env.install: false; "
                                "apt could install cc, meson, ninja, pkg-config)")
    assert "meson setup" in lines[check + 2]
    ovs = lines.index("sudo -n /usr/bin/ovs-vsctl br-exists ovsbr2")
    assert lines[ovs + 1] == "# bridge missing: fail naming the bridges of `ovs-vsctl list-br`"
    assert lines[ovs + 2] == ("sudo -n /usr/bin/ovs-ofctl -O OpenFlow12 add-flow ovsbr2 "
                              "ip,in_port=pf1hpf,actions=output:p1")
    assert ovs > check


def test_recording_double_switch_port_model_is_refused_before_anything_runs_on_the_dpu(monkeypatch):
    """xenoflow.port_model switch (the authors' later model) is not implemented in lb/src: start()
    says so before copying, building or touching OVS; vnf-hairpin reaches XenoFlow as -m."""
    from xenobench.errors import ConfigError
    dbl = ScriptedDpuDouble("fips5-dpu")
    with pytest.raises(ConfigError) as e:
        _lb(monkeypatch, dbl, port_model="switch").start()
    assert str(e.value) == (f"Failed to start xenoflow: xenoflow.port_model 'switch' in {FIPS} is not implemented "
                            f"in lb/src yet (DOCA Flow switch mode on a doca_dev, as the authors' later code); "
                            f"use vnf-hairpin")
    assert dbl.calls == []
    start = [c for c in _lb(monkeypatch, dbl).start(dry_run=True)["commands"] if "xenobench-xenoflow start -a" in c][0]
    assert shlex.split(start.split("   #")[0])[-2:] == ["-m", "vnf-hairpin"]
