"""xenoflow_in_hardware (xenobench.lb.inhardware): the per-trial proof that XenoFlow ran in the
BlueField's eSwitch, judged from recorded /proc/stat and `ethtool -S` snapshots of the DPU.

The snapshots are written by hand in the formats of proc(5) (/proc/stat cpuN lines: user nice
system idle iowait irq softirq steal guest guest_nice, in jiffies) and of `ethtool -S` on an mlx5
uplink representor (names from the kernel's mlx5 counters.rst); the figures are chosen so that each
verdict's numbers can be checked by hand: 1000 jiffies pass per core between start and end.
"""

import pytest

from xenobench import dpu
from xenobench.config import load_config
from xenobench.deploy import hw_offload_row
from xenobench.lb.inhardware import CHECK, READING_KEY, SOFTWARE_RX_FLOOR, judge, parse_proc_stat, read
from xenobench.nodes.base import CommandResult
from xenobench.trials import Validity

STAT_START = """cpu  4000 0 2000 90000 100 0 0 0 0 0
cpu0 1000 0 500 22500 25 0 0 0 0 0
cpu1 1000 0 500 22500 25 0 0 0 0 0
cpu2 1000 0 500 22500 25 0 0 0 0 0
cpu3 1000 0 500 22500 25 0 0 0 0 0
intr 123456 0 0
ctxt 99999
"""


def _stat_end(busy: dict[int, int]) -> str:
    """STAT_START plus 1000 jiffies per core, `busy[n]` of them in softirq (a core receiving frames)."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    for n in range(4):
        b = busy.get(n, 20)
        lines.append(f"cpu{n} {1000 + b // 2} 0 500 {22500 + 1000 - b} 25 0 {b - b // 2} 0 0 0")
    return "\n".join(lines) + "\nintr 1 0\n"


def _ethtool(sw: int, phy: int, oob: int = 0, phy_key: bool = True) -> str:
    return ("NIC statistics:\n"
            f"     rx_packets: {sw}\n     rx_bytes: {sw * 64}\n     tx_packets: 0\n"
            f"     rx_out_of_buffer: {oob}\n"
            + (f"     rx_packets_phy: {phy}\n     rx_discards_phy: 0\n" if phy_key else "")
            + "     rx_vport_unicast_packets: 0\n")


class DpuDouble:
    """The DPU node answering the reading's commands from canned outputs (one per reading)."""
    name = "fips5-dpu"

    def __init__(self, stat: str, eth: str, offload: tuple[int, str, str] = (0, '"true"\n', ""),
                 doca_init: str | None = None, pmd_mask: str | None = None):
        self.stat, self.eth, self.offload = stat, eth, offload
        # other_config:doca-init and pmd-cpu-mask as `ovs-vsctl get` prints them (None: never set)
        self.other = {dpu.OVS_DOCA_INIT_KEY: doca_init, dpu.OVS_PMD_MASK_KEY: pmd_mask}
        self.calls = []

    def run(self, argv, check=True, **kw):
        self.calls.append(argv)
        if argv == ["cat", "/proc/stat"]:
            return CommandResult(argv, 0, self.stat, "", self.name)
        if argv[:2] == ["ethtool", "-S"]:
            return CommandResult(argv, 0 if self.eth is not None else 94, self.eth or "",
                                 "" if self.eth is not None else "Cannot get stats strings information: "
                                 "Operation not supported", self.name)
        if argv[-1] in self.other:
            v = self.other[argv[-1]]
            if v is None:
                key = argv[-1].split(":")[1]
                return CommandResult(argv, 1, "", f'ovs-vsctl: no key "{key}" in Open_vSwitch record "." column '
                                                  "other_config\n", self.name)
            return CommandResult(argv, 0, f'"{v}"\n', "", self.name)
        rc, out, err = self.offload
        return CommandResult(argv, rc, out, err, self.name)


def _reading(stat, eth, offload=(0, '"true"\n', ""), doca_init=None, pmd_mask=None):
    node = DpuDouble(stat, eth, offload, doca_init, pmd_mask)
    return read(node, "p0", ovs=True, sudo=True), node


LIMITS = {"max_core": 0.5, "max_sw_share": 0.01}

# (description, end /proc/stat, start ethtool, end ethtool, end hw-offload, limits, ok, reason)
CASES = [
    ("idle Arm cores, 3 M frames in hardware, 40 control frames in software",
     _stat_end({}), _ethtool(1000, 0), _ethtool(1040, 3_000_000), (0, '"true"\n', ""), LIMITS, True, ""),
    ("one Arm core busy 97 %: the thesis's failure (bound to a single ARM core)",
     _stat_end({2: 970}), _ethtool(1000, 0), _ethtool(1040, 3_000_000), (0, '"true"\n', ""), LIMITS, False,
     "fips5-dpu: Arm core cpu2 was busy 97% of the trial (limit 50%, xenoflow.max_arm_core_busy_share): the "
     "frames went through the Arm cores"),
    ("one busy core judged, not the average (97 % on one core of four is 26 % on average)",
     _stat_end({0: 970}), _ethtool(0, 0), _ethtool(0, 100), (0, '"true"\n', ""), {"max_core": 0.3,
                                                                                     "max_sw_share": 0.01},
     False, "fips5-dpu: Arm core cpu0 was busy 97% of the trial (limit 30%, xenoflow.max_arm_core_busy_share): "
            "the frames went through the Arm cores"),
    ("overload: one core takes 100 k frames, 2.9 M more find no buffer on the software rings",
     _stat_end({}), _ethtool(0, 0, 0), _ethtool(100_000, 3_000_000, 2_900_000), (0, '"true"\n', ""), LIMITS,
     False, "fips5-dpu: 3000000 of the 3000000 frames p0 received reached the Arm's kernel (100.0%; rx_packets + "
            "rx_out_of_buffer against rx_packets_phy; limit 1.0%, xenoflow.max_software_rx_share)"),
    ("a quiet trial: 60 control frames of 80 is under the floor",
     _stat_end({}), _ethtool(0, 0), _ethtool(60, 80), (0, '"true"\n', ""), LIMITS, True, ""),
    ("null limits: recorded, not judged",
     _stat_end({1: 990}), _ethtool(0, 0), _ethtool(3_000_000, 3_000_000), (0, '"true"\n', ""),
     {"max_core": None, "max_sw_share": None}, True, ""),
    ("no rx_packets_phy (not an mlx5 uplink representor): invalid, naming the counter",
     _stat_end({}), _ethtool(0, 0, phy_key=False), _ethtool(10, 0, phy_key=False), (0, '"true"\n', ""), LIMITS,
     False, "fips5-dpu: p0's counters could not be read (`ethtool -S p0`: no rx_packets_phy; an mlx5 uplink "
            "representor has both)"),
    ("ethtool -S refused at the end: invalid, naming the error",
     _stat_end({}), _ethtool(0, 0), None, (0, '"true"\n', ""), LIMITS, False,
     "fips5-dpu: p0's counters could not be read (`ethtool -S p0`: Cannot get stats strings information: "
     "Operation not supported)"),
    ("OVS hw-offload switched off during the trial",
     _stat_end({}), _ethtool(0, 0), _ethtool(0, 1000), (0, '"false"\n', ""), LIMITS, False,
     "fips5-dpu: OVS other_config:hw-offload is not true (false at the end; fix: sudo /usr/bin/ovs-vsctl set "
     "Open_vSwitch . other_config:hw-offload=true && sudo systemctl restart openvswitch-switch)"),
    ("OVS hw-offload never set (OVS's default: false)",
     _stat_end({}), _ethtool(0, 0), _ethtool(0, 1000),
     (1, "", "ovs-vsctl: no key \"hw-offload\" in Open_vSwitch record \".\" column other_config\n"), LIMITS, False,
     "fips5-dpu: OVS other_config:hw-offload is not true (false at the end; fix: sudo /usr/bin/ovs-vsctl set "
     "Open_vSwitch . other_config:hw-offload=true && sudo systemctl restart openvswitch-switch)"),
    ("OVS unreachable: invalid, naming why",
     _stat_end({}), _ethtool(0, 0), _ethtool(0, 1000),
     (1, "", "ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed (No such file or "
             "directory)\n"), LIMITS, False,
     "fips5-dpu: OVS other_config:hw-offload is not true (at the end: `/usr/bin/ovs-vsctl get Open_vSwitch . "
     "other_config:hw-offload`: ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed (No "
     "such file or directory); fix: sudo /usr/bin/ovs-vsctl set Open_vSwitch . other_config:hw-offload=true && "
     "sudo systemctl restart openvswitch-switch)"),
]


@pytest.mark.parametrize("desc,stat1,eth0,eth1,off1,limits,ok,reason", CASES, ids=[c[0] for c in CASES])
def test_verdict_from_recorded_snapshots(desc, stat1, eth0, eth1, off1, limits, ok, reason):
    before, _ = _reading(STAT_START, eth0)
    after, node = _reading(stat1, eth1, off1)
    assert node.calls[-1] == ["sudo", "-n", *dpu.ovs_hw_offload_get()]  # through the rule's exact command
    v = judge(before, after, ovs=True, node="fips5-dpu", **limits)
    assert (v["ok"], v["reason"]) == (ok, reason), desc
    assert v["applicable"] and v["check"] == CHECK


def test_values_recorded_when_valid():
    before, _ = _reading(STAT_START, _ethtool(1000, 0))
    after, _ = _reading(_stat_end({3: 120}), _ethtool(1040, 3_000_000))
    v = judge(before, after, ovs=True, node="fips5-dpu", **LIMITS)
    assert v["ok"] and v["values"]["busiest_core"] == "cpu3" and v["values"]["busiest_share"] == 0.12
    assert v["values"]["core_shares"] == {"cpu0": 0.02, "cpu1": 0.02, "cpu2": 0.02, "cpu3": 0.12}
    assert (v["values"]["software_rx"], v["values"]["phy_rx"]) == (40, 3_000_000)
    assert v["values"]["ovs_hw_offload"] == {"start": "true", "end": "true"}
    assert v["values"]["limits"]["software_rx_floor"] == SOFTWARE_RX_FLOOR


def test_a_reading_missing_at_one_end_is_invalid_by_name():
    after, _ = _reading(_stat_end({}), _ethtool(0, 0))
    v = judge(None, after, ovs=True, node="fips5-dpu", **LIMITS)
    assert (v["ok"], v["reason"]) == (False, "fips5-dpu: not read at the trial's start")
    v = judge({"error": "Failed to run `cat /proc/stat` on fips5-dpu: ssh: connection reset"}, after, ovs=True,
              node="fips5-dpu", **LIMITS)
    assert v["reason"] == ("fips5-dpu: not read at the trial's start: Failed to run `cat /proc/stat` on fips5-dpu: "
                           "ssh: connection reset")


def test_proc_stat_busy_and_total_jiffies():
    assert parse_proc_stat(STAT_START) == {f"cpu{n}": (1500, 24025) for n in range(4)}
    assert parse_proc_stat("cpu  1 2 3 4\ncpu12 5 0 5 90 0 0 0 0 7 0\n") == {"cpu12": (10, 100)}


# --- where the check hooks in: lb_stats and lb_checks (xenobench.measure.common) -------------------
class _LB:
    kind = "xenoflow"

    def __init__(self, proof):
        self.in_hardware = proof
        self.cfg = None

    def stats(self):
        return {"backends": [{"name": "fips2", "packets": 0}], "miss": 0}


def test_lb_checks_names_the_requirement_and_keeps_the_verdict_in_the_end_stats():
    from xenobench.measure.common import lb_checks, lb_stats

    class Proof:
        readings = iter([_reading(STAT_START, _ethtool(0, 0))[0], _reading(_stat_end({1: 1000}),
                                                                           _ethtool(0, 1000))[0]])

        def read(self):
            return next(self.readings)

        def judge(self, before, after):
            return judge(before, after, ovs=True, node="fips5-dpu", **LIMITS)

    lb = _LB(Proof())
    st0, st1 = lb_stats(lb), lb_stats(lb)
    assert READING_KEY in st0 and READING_KEY in st1
    v = Validity()
    lb_checks(v, lb, st0, st1)
    assert v.checks[CHECK] is False
    assert v.reasons == ["xenoflow_in_hardware: fips5-dpu: Arm core cpu1 was busy 100% of the trial (limit 50%, "
                         "xenoflow.max_arm_core_busy_share): the frames went through the Arm cores"]
    assert st1[CHECK]["values"]["busiest_core"] == "cpu1"


def test_paired_block_names_its_block_and_an_lb_without_a_proof_has_no_requirement():
    """The paired latency design's blocks run without lb_stats: each XenoFlow block is judged on its own
    readings (xenobench.measure.latency._paired_blocks), named by its block."""
    from xenobench.measure.common import judge_in_hardware, lb_reading

    class Proof:
        def read(self):
            return _reading(STAT_START, _ethtool(0, 0), (0, '"false"\n', ""))[0]

        def judge(self, before, after):
            return judge(before, after, ovs=True, node="fips5-dpu", **LIMITS)

    lb = _LB(Proof())
    v = Validity()
    verdict = judge_in_hardware(v, lb, lb_reading(lb), lb_reading(lb), block=3)
    assert not verdict["ok"] and v.checks == {"block_3_xenoflow_in_hardware": False}
    assert v.reasons == ["block_3_xenoflow_in_hardware: block 3 (xenoflow): fips5-dpu: OVS other_config:hw-offload "
                         "is not true (false at the start; false at the end; fix: sudo /usr/bin/ovs-vsctl set "
                         "Open_vSwitch . other_config:hw-offload=true && sudo systemctl restart openvswitch-switch)"]
    plain = type("LB", (), {"kind": "ebpf"})()
    assert lb_reading(plain) is None and judge_in_hardware(v, plain, None, None, block=4) is None
    assert lb_reading(None) is None and len(v.checks) == 1


def test_local_testbed_records_not_applicable_with_the_reason():
    """The namespace testbed runs the emulation: no requirement, the verdict recorded with why."""
    from xenobench.lb import get_lb
    from xenobench.measure.common import lb_checks
    from xenobench.testbed import get_testbed
    cfg = load_config("config/local.yaml")
    lb = get_lb("xenoflow", get_testbed(cfg))
    st0, st1 = {"backends": []}, {"backends": []}
    assert lb.in_hardware.read() is None
    v = Validity()
    lb_checks(v, _LB(lb.in_hardware), st0, st1)
    assert CHECK not in v.checks
    assert st1[CHECK] == {"check": CHECK, "applicable": False, "reason": (
        f"xenoflow.mode 'emulation': the emulated datapath is an XDP program on {cfg.role('lb').name}'s port, "
        "with no BlueField "
        "whose Arm cores or eSwitch could be checked")}


def test_fips_proof_reads_the_dpu_ingress_port_with_the_schema_defaults():
    from xenobench.lb import get_lb
    from xenobench.testbed import get_testbed
    proof = get_lb("xenoflow", get_testbed(load_config("config/fips.yaml"))).in_hardware
    assert (proof.why_not, proof.iface, proof.max_core, proof.max_sw_share, proof.ovs, proof.sudo) == (
        None, "p0", 0.5, 0.01, True, True)


# --- the read in the DPU's sudo rule (xenobench.dpu.root_commands: its one owner) ------------------
def test_sudo_rule_holds_the_ovs_reads_exactly_once():
    cfg = load_config("config/fips.yaml")
    cmds = dpu.root_commands(cfg, "/home/ubuntu")
    assert cmds.count(dpu.ovs_hw_offload_get()) == 1
    assert [c for c in cmds if c[:2] == [dpu.OVS_VSCTL, "get"]] == [*dpu.ovs_flavour_gets(), dpu.ovs_hw_offload_get()]
    rule = dpu.sudoers_rule("ubuntu", cmds)
    assert ", /usr/bin/ovs-vsctl get Open_vSwitch . other_config\\:hw-offload," in rule
    assert "set Open_vSwitch" not in rule  # the fix is the operator's, not the login's


def test_sudo_rule_without_ovs_has_no_hw_offload_read():
    import dataclasses
    cfg = load_config("config/fips.yaml")
    raw = {**cfg.raw, "xenoflow": {**cfg.raw["xenoflow"], "ovs": None}}
    cfg = dataclasses.replace(cfg, raw=raw)
    assert dpu.ovs_hw_offload_get() not in dpu.root_commands(cfg, "/home/ubuntu")


# --- deploy's readiness row -----------------------------------------------------------------------
FIX = ("sudo /usr/bin/ovs-vsctl set Open_vSwitch . other_config:hw-offload=true && "
       "sudo systemctl restart openvswitch-switch")
ROWS = [
    ("set true", (0, '"true"\n', ""), None, True, "other_config:hw-offload=true", ""),
    ("set false", (0, '"false"\n', ""), None, False,
     "other_config:hw-offload=false: OVS forwards in software on the Arm cores (thesis §6.1)", FIX),
    ("never set", (1, "", 'ovs-vsctl: no key "hw-offload" in Open_vSwitch record "." column other_config\n'), None,
     False, "other_config:hw-offload=false: OVS forwards in software on the Arm cores (thesis §6.1)", FIX),
    ("OVS down", (1, "", "ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed\n"), None, False,
     "unreadable: ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed",
     "systemctl start openvswitch-switch"),
    ("sudo refused", (1, "", "sudo: a password is required\n"), "install the rule", False,
     "sudo asks for a password", "install the rule"),
]


@pytest.mark.parametrize("desc,res,refused,ready,detail,fix", ROWS, ids=[r[0] for r in ROWS])
def test_deploy_hw_offload_row(desc, res, refused, ready, detail, fix):
    rc, out, err = res
    row = hw_offload_row("fips5-dpu", CommandResult(dpu.ovs_hw_offload_get(), rc, out, err), refused)
    assert (row.check, row.ready, row.detail, row.fix) == ("OVS hw-offload", ready, detail, fix)


# --- the OVS flavour: OVS-DOCA's PMD threads poll their cores in every trial -----------------------
#: (description, doca-init, pmd-cpu-mask, busy jiffies per core at the end, ok, reason or "", what is judged)
OVS_FLAVOURS = [
    ("kernel OVS, one core busy: the frames went through the Arm cores", None, None, {2: 1000}, False,
     "fips5-dpu: Arm core cpu2 was busy 100% of the trial (limit 50%, xenoflow.max_arm_core_busy_share): the "
     "frames went through the Arm cores", "OVS (kernel datapath)"),
    ("OVS-DOCA, its PMD on cpu1 (mask 0x2) at 100 %: not the frames", "true", "0x2", {1: 1000}, True, "", "OVS-DOCA"),
    ("OVS-DOCA with its PMD on cpu1, and cpu3 busy too: the frames", "true", "0x2", {1: 1000, 3: 900}, False,
     "fips5-dpu: Arm core cpu3 was busy 90% of the trial (limit 50%, xenoflow.max_arm_core_busy_share): the "
     "frames went through the Arm cores", "OVS-DOCA"),
    ("OVS-DOCA without a mask: cores recorded, not judged; the counters judge", "true", None, {0: 1000}, True, "",
     "OVS-DOCA"),
    ("doca-init false: the kernel datapath's rule", "false", "0x2", {1: 1000}, False,
     "fips5-dpu: Arm core cpu1 was busy 100% of the trial (limit 50%, xenoflow.max_arm_core_busy_share): the "
     "frames went through the Arm cores", "OVS (kernel datapath)"),
]


@pytest.mark.parametrize("desc,doca,mask,busy,ok,reason,flavour", OVS_FLAVOURS, ids=[c[0] for c in OVS_FLAVOURS])
def test_the_check_knows_the_ovs_flavour(desc, doca, mask, busy, ok, reason, flavour):
    before, _ = _reading(STAT_START, _ethtool(0, 0), doca_init=doca, pmd_mask=mask)
    after, node = _reading(_stat_end(busy), _ethtool(40, 3_000_000), doca_init=doca, pmd_mask=mask)
    assert ["sudo", "-n", *dpu.ovs_get(dpu.OVS_DOCA_INIT_KEY)] in node.calls  # through the rule's exact command
    v = judge(before, after, ovs=True, node="fips5-dpu", **LIMITS)
    assert (v["ok"], v["reason"], v["values"]["ovs_flavour"]) == (ok, reason, flavour), desc
    if flavour == "OVS-DOCA":
        assert v["values"]["cores_not_judged"] == (["cpu1"] if mask else
                                                   "all: OVS-DOCA polls cores of its choosing "
                                                   "(other_config:pmd-cpu-mask unset)")
