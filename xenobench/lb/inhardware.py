"""Whether XenoFlow ran in the BlueField's hardware during a trial: the per-trial check
`xenoflow_in_hardware`.

Why: on the authors' first experiments the BlueField-3 did not handle the traffic in hardware; "as
soon as packet load arose, the performance was bound to a single ARM core" with very poor rates
(thesis §6.1). Only after an Open vSwitch rule on the BlueField "the load on the ARM cores
vanished", and "neither on port 0 nor on port 1 packets can be observed on the BlueField-3's
operating system" (thesis §7.4). A trial in that state measures the Arm's kernel, not the eSwitch,
and nothing else in a trial notices it. So every XenoFlow trial in DOCA mode reads, at the start and
at the end of its measured phase (xenobench.measure.common.lb_stats), on the DPU node with the
login's own rights where it can:

- the Arm cores: /proc/stat's per-CPU jiffies (proc(5): user nice system idle iowait irq softirq
  steal; guest is inside user). The failure's signature is ONE busy core, so the busiest core's
  busy share over the phase is judged (xenoflow.max_arm_core_busy_share), never the average;
- the frames the Arm's kernel got on the ingress port (the uplink representor p0): mlx5's
  `ethtool -S` software counter `rx_packets` (the sum of the rings' rx[i]_packets, "the number of
  packets received on ring i": the driver's receive path) and `rx_out_of_buffer` (frames steered
  to the software rings that found no buffer: sent to software all the same) against the physical
  port's `rx_packets_phy` ("the number of packets received on the physical port"), per the kernel's
  Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst (Linux 6.14). More
  than xenoflow.max_software_rx_share of the port's frames (and more than SOFTWARE_RX_FLOOR, the
  control frames a quiet port sees) reaching software = not in hardware. Under overload only what
  one core takes shows up in rx_packets, hence rx_out_of_buffer beside it;
- OVS's hardware offload (`ovs-vsctl get Open_vSwitch . other_config:hw-offload`, through the
  exact command of xenobench.dpu's rule: OVS's database socket is root's), where xenoflow.ovs is
  configured: "true" at both ends (NVIDIA DOCA 2.9 "Virtual Switch on BlueField": with it OVS puts
  its datapath flows into the eSwitch instead of passing every frame through the Arm cores).

The verdict (judge) names each signal's values; a signal that could not be read makes the trial
invalid by name, never silently passed. A limit set to null is recorded, not judged. XenoFlow in
emulation mode (the namespace testbed) has no BlueField: the check is recorded as not applicable,
with the reason (not_applicable).
"""

from __future__ import annotations

import shlex
import time

from .. import dpu
from ..counters import parse_ethtool_stats
from ..machine import cpu_times
from ..errors import XenobenchError
from ..nodes.base import sudo_argv

CHECK = "xenoflow_in_hardware"
#: where lb_stats puts a reading and lb_checks the verdict, in the LB's stats dicts
READING_KEY = "in_hardware"
#: frames of the port's own control traffic (ARP, LLDP, neighbour resolution for the probes) that
#: may reach the Arm's kernel in any trial, however few frames the trial sends
SOFTWARE_RX_FLOOR = 100
#: the mlx5 counters the check reads of the ingress port (counters.rst: software port, vPort/queue
#: and physical port groups)
SW_KEYS = ("rx_packets", "rx_out_of_buffer")
PHY_KEY = "rx_packets_phy"
#: proc(5): the /proc/stat cpuN columns that count busy time and idle time
_BUSY = (0, 1, 2, 5, 6, 7)     # user nice system irq softirq steal
_IDLE = (3, 4)                 # idle iowait


def parse_proc_stat(text: str) -> dict[str, tuple[int, int]]:
    """/proc/stat → {"cpuN": (busy jiffies, total jiffies)} per CPU (the aggregate "cpu" line left out)."""
    out = {}
    for line in text.splitlines():
        cpu = cpu_times(line)
        if cpu is not None:
            n, v = cpu
            busy, idle = sum(v[i] for i in _BUSY), sum(v[i] for i in _IDLE)
            out[f"cpu{n}"] = (busy, busy + idle)
    return out


def core_shares(before: dict, after: dict) -> dict[str, float]:
    """Each CPU's busy share between two parse_proc_stat readings (CPUs present in both)."""
    out = {}
    for cpu, (b1, t1) in after.items():
        if cpu in before:
            b0, t0 = before[cpu]
            out[cpu] = (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
    return out


def parse_hw_offload(returncode: int, stdout: str, stderr: str) -> tuple[str | None, str]:
    """`ovs-vsctl get Open_vSwitch . other_config:hw-offload` → (value, error): "true"/"false" (the
    quotes ovs-vsctl prints removed); a key never set is OVS's default "false"; (None, why) when
    the read itself failed."""
    if returncode == 0:
        return stdout.strip().strip('"'), ""
    if "no key" in stderr:
        return "false", ""
    return None, (stderr.strip().splitlines() or [f"exit status {returncode}"])[-1]


def read(node, iface: str, *, ovs: bool, sudo: bool) -> dict:
    """One reading on the DPU node: per-CPU jiffies, the ingress port's counters (SW_KEYS,
    PHY_KEY) and, with `ovs`, OVS's hw-offload. What failed is kept as {"error": ...} per signal."""
    out: dict = {"time": time.time(), "iface": iface}
    try:
        r = node.run(["cat", "/proc/stat"], check=False)
        out["cpus"] = ({k: list(v) for k, v in parse_proc_stat(r.stdout).items()} if r.ok else
                       {"error": r.stderr.strip() or f"exit status {r.returncode}"})
        r = node.run(["ethtool", "-S", iface], check=False)
        eth = parse_ethtool_stats(r.stdout) if r.ok else {}
        out["counters"] = ({k: eth[k] for k in (*SW_KEYS, PHY_KEY) if k in eth} if r.ok else
                           {"error": r.stderr.strip() or f"exit status {r.returncode}"})
        if ovs:
            for key, argv in (("doca_init", dpu.ovs_get(dpu.OVS_DOCA_INIT_KEY)),
                              ("pmd_cpu_mask", dpu.ovs_get(dpu.OVS_PMD_MASK_KEY)),
                              ("hw_offload", dpu.ovs_hw_offload_get())):
                r = node.run(sudo_argv(argv) if sudo else argv, check=False)
                value, err = parse_hw_offload(r.returncode, r.stdout, r.stderr)
                if key == "pmd_cpu_mask" and r.returncode and "no key" in r.stderr:
                    value = None  # never set: OVS-DOCA's own choice of PMD cores
                out[key] = value if value is not None or not err else {"error": f"`{shlex.join(argv)}`: {err}"}
    except XenobenchError as e:  # the node stopped answering: the verdict names it
        out["error"] = str(e)
    return out


def pmd_cores(mask: str | None) -> set[str] | None:
    """The /proc/stat names of the cores an OVS pmd-cpu-mask names ("0x6" → {cpu1, cpu2}); None for
    no mask or one that does not parse."""
    try:
        bits = int(str(mask).strip().strip('"'), 16) if mask else 0
    except ValueError:
        return None
    return {f"cpu{i}" for i in range(bits.bit_length()) if bits >> i & 1} or None


def ovs_flavour(after: dict) -> tuple[str, set[str] | None]:
    """("OVS-DOCA" or "OVS (kernel datapath)", the cores its PMD threads poll: pmd-cpu-mask's, None
    where unknown or none) from the end reading; a flavour that could not be read is the kernel
    datapath's (the hw-offload read names a failed OVS)."""
    doca = after.get("doca_init")
    if doca != "true":
        return "OVS (kernel datapath)", None
    mask = after.get("pmd_cpu_mask")
    return "OVS-DOCA", pmd_cores(mask if isinstance(mask, str) else None)


def not_applicable(reason: str) -> dict:
    return {"check": CHECK, "applicable": False, "reason": reason}


def _err(x) -> str | None:
    return x.get("error") if isinstance(x, dict) and "error" in x else None


def judge(before: dict | None, after: dict | None, *, max_core: float | None, max_sw_share: float | None,
          ovs: bool, node: str = "the DPU") -> dict:
    """The verdict from two readings: {"check", "applicable": True, "ok", "reason" (every failed
    signal with its values; "" when ok), "values"}. A signal missing at either end fails by name."""
    why: list[str] = []
    values: dict = {"limits": {"max_arm_core_busy_share": max_core, "max_software_rx_share": max_sw_share,
                               "software_rx_floor": SOFTWARE_RX_FLOOR}}
    for when, r in (("start", before), ("end", after)):
        if r is None:
            why.append(f"not read at the trial's {when}")
        elif r.get("error"):
            why.append(f"not read at the trial's {when}: {r['error']}")
    if why:
        return {"check": CHECK, "applicable": True, "ok": False, "reason": f"{node}: " + "; ".join(why),
                "values": values}
    # the Arm cores, less those OVS-DOCA's PMD threads poll (busy in every trial by design); with
    # OVS-DOCA and no pmd-cpu-mask its PMD cores are not known: the cores are recorded, not judged,
    # and the frames that reached the Arm's kernel (below) tell where XenoFlow ran
    flavour, pmd = ovs_flavour(after) if ovs else ("no OVS", None)
    values["ovs_flavour"] = flavour
    e = _err(before["cpus"]) or _err(after["cpus"])
    shares = {} if e else core_shares({k: tuple(v) for k, v in before["cpus"].items()},
                                      {k: tuple(v) for k, v in after["cpus"].items()})
    if pmd:
        values["cores_not_judged"] = sorted(pmd, key=lambda c: int(c[3:]))
        values["pmd_core_shares"] = {c: round(shares[c], 4) for c in values["cores_not_judged"] if c in shares}
        shares = {c: v for c, v in shares.items() if c not in pmd}
    if e or (not shares and not pmd):
        why.append(f"the Arm cores' load could not be read (/proc/stat: {e or 'no cpuN lines'})")
    elif flavour == "OVS-DOCA" and not pmd:
        values["cores_not_judged"] = "all: OVS-DOCA polls cores of its choosing (other_config:pmd-cpu-mask unset)"
        values["core_shares"] = {c: round(s, 4) for c, s in shares.items()}
    elif shares:
        busiest = max(shares, key=lambda c: (shares[c], -int(c[3:])))
        values.update(busiest_core=busiest, busiest_share=round(shares[busiest], 4),
                      core_shares={c: round(s, 4) for c, s in shares.items()})
        if max_core is not None and shares[busiest] > max_core:
            why.append(f"Arm core {busiest} was busy {shares[busiest]:.0%} of the trial (limit {max_core:.0%}, "
                       "xenoflow.max_arm_core_busy_share): the frames went through the Arm cores")
    # the frames the Arm's kernel got on the ingress port
    iface = after.get("iface", "the ingress port")
    c0, c1 = before["counters"], after["counters"]
    e = _err(c0) or _err(c1)
    missing = [k for k in ("rx_packets", PHY_KEY) if not e and (k not in c0 or k not in c1)]
    if e or missing:
        why.append(f"{iface}'s counters could not be read (`ethtool -S {iface}`: "
                   + (e or f"no {' and no '.join(missing)}; an mlx5 uplink representor has both") + ")")
    else:
        sw = sum(c1.get(k, 0) - c0.get(k, 0) for k in SW_KEYS)
        phy = c1[PHY_KEY] - c0[PHY_KEY]
        share = sw / phy if phy > 0 else (0.0 if sw == 0 else 1.0)
        values.update(iface=iface, software_rx=sw, phy_rx=phy, software_share=round(share, 6))
        allowed = max((max_sw_share or 0.0) * phy, SOFTWARE_RX_FLOOR)
        if max_sw_share is not None and sw > allowed:
            why.append(f"{sw} of the {phy} frames {iface} received reached the Arm's kernel ({share:.1%}; "
                       f"rx_packets + rx_out_of_buffer against rx_packets_phy; limit {max_sw_share:.1%}, "
                       "xenoflow.max_software_rx_share)")
    # OVS's hardware offload
    if ovs:
        seen = {w: r.get("hw_offload") for w, r in (("start", before), ("end", after))}
        values["ovs_hw_offload"] = {w: (v if not isinstance(v, dict) else None) for w, v in seen.items()}
        bad = [(w, v) for w, v in seen.items() if v != "true"]
        if bad:
            what = "; ".join(f"at the {w}: {_err(v) or 'not read'}" if isinstance(v, dict) or v is None
                             else f"{v} at the {w}" for w, v in bad)
            why.append(f"OVS other_config:hw-offload is not true ({what}; fix: {dpu.ovs_hw_offload_fix()})")
    return {"check": CHECK, "applicable": True, "ok": not why, "reason": f"{node}: " + "; ".join(why) if why else "",
            "values": values}


class HardwareProof:
    """What an LB offers lb_stats and lb_checks (xenobench.measure.common) to prove where it ran:
    read() at the trial's start and end, judge(before, after) the verdict. For XenoFlow in DOCA mode
    on its DPU node; otherwise (`why_not`) every verdict is not_applicable."""

    def __init__(self, cfg, node_fn=None, iface: str | None = None, why_not: str | None = None):
        self.cfg, self.node_fn, self.iface, self.why_not = cfg, node_fn, iface, why_not
        sec = cfg.section("xenoflow") or {}
        self.ovs = bool(sec.get("ovs"))
        self.sudo = bool(sec.get("sudo"))
        self.max_core = sec.get("max_arm_core_busy_share")
        self.max_sw_share = sec.get("max_software_rx_share")

    def read(self) -> dict | None:
        if self.why_not:
            return None
        return read(self.node_fn(), self.iface, ovs=self.ovs, sudo=self.sudo)

    def judge(self, before: dict | None, after: dict | None) -> dict:
        if self.why_not:
            return not_applicable(self.why_not)
        return judge(before, after, max_core=self.max_core, max_sw_share=self.max_sw_share, ovs=self.ovs,
                     node=self.node_fn().name)
