"""Interface counters: `ethtool -S` and /sys/class/net/<if>/statistics, kept verbatim, plus a
driver-aware view naming the standard quantities, and diffs between two snapshots.

Standard quantities (the `view`): rx_packets, tx_packets, rx_bytes, tx_bytes, rx_dropped,
tx_dropped from the kernel's statistics; and per driver
- veth: xdp_packets, xdp_bytes, xdp_drops, xdp_tx, xdp_tx_errors, xdp_redirect, rx_drops
  (summed over rx queues; rx_drops counts frames lost e.g. to an XDP_REDIRECT into a veth whose
  peer has no NAPI);
- mlx5: rx_packets_phy, tx_packets_phy, rx_bytes_phy, tx_bytes_phy, rx_discards_phy,
  tx_discards_phy, rx_out_of_buffer, rx_vport_unicast_packets, tx_vport_unicast_packets
  (the thesis sampled rx_packets_phy once per second).

/proc/net/dev (per network namespace; /proc/<pid>/net/dev is the namespace of that process) is
read here too: the rate sampler's rx counter and trafgen's tx sampler.
"""

from __future__ import annotations

import re
import time

from .errors import DataError, NodeError
from .nodes import Node

VETH_QUEUE_KEYS = {  # view name → per-queue ethtool suffix (rx_queue_<n>_<suffix>)
    "xdp_packets": "xdp_packets", "xdp_bytes": "xdp_bytes", "xdp_drops": "xdp_drops",
    "xdp_tx": "xdp_tx", "xdp_tx_errors": "xdp_tx_errors", "xdp_redirect": "xdp_redirect",
    "rx_drops": "drops",
}
MLX5_KEYS = ("rx_packets_phy", "tx_packets_phy", "rx_bytes_phy", "tx_bytes_phy", "rx_discards_phy",
             "tx_discards_phy", "rx_out_of_buffer", "rx_vport_unicast_packets",
             "tx_vport_unicast_packets", "rx_vport_unicast_bytes", "tx_vport_unicast_bytes")
SYSFS_KEYS = ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped",
              "rx_errors", "tx_errors")

_ETHTOOL_LINE = re.compile(r"^\s*([^:]+?):\s+(-?\d+)\s*$")


def parse_ethtool_stats(text: str) -> dict[str, int]:
    """Parse `ethtool -S` output ("     name: value" lines; the header line is skipped)."""
    out = {}
    for line in text.splitlines():
        m = _ETHTOOL_LINE.match(line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def parse_sysfs_stats(text: str) -> dict[str, int]:
    """Parse `grep -H . *` output of a statistics directory ("rx_packets:123")."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if v.strip().lstrip("-").isdigit():
            out[k.strip()] = int(v)
    return out


# the columns of /proc/net/dev after "iface:" (net/core/net-procfs.c dev_seq_printf_stats)
PROC_NET_DEV_FIELDS = ("rx_bytes", "rx_packets", "rx_errs", "rx_drop", "rx_fifo", "rx_frame", "rx_compressed",
                       "rx_multicast", "tx_bytes", "tx_packets", "tx_errs", "tx_drop", "tx_fifo", "tx_colls",
                       "tx_carrier", "tx_compressed")


def parse_proc_net_dev(text: str, iface: str, key: str = "rx_packets") -> int:
    """One counter (PROC_NET_DEV_FIELDS) of one interface from /proc/net/dev text."""
    col = PROC_NET_DEV_FIELDS.index(key)
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name.strip() == iface:
            fields = rest.split()
            if len(fields) <= col or not fields[col].isdigit():
                break
            return int(fields[col])
    raise DataError(f"Failed to read /proc/net/dev: no interface {iface!r}")


def read_proc_net_dev(path: str, iface: str, key: str) -> int | None:
    """One counter of one interface from a /proc/.../net/dev file read directly (no process:
    the read's timestamp is exact); None when the file or the interface is gone."""
    try:
        with open(path) as f:
            return parse_proc_net_dev(f.read(), iface, key)
    except (OSError, DataError):
        return None


def driver_view(driver: str, ethtool: dict[str, int], sysfs: dict[str, int]) -> dict[str, int]:
    view = {k: sysfs[k] for k in SYSFS_KEYS if k in sysfs}
    if driver == "veth":
        for name, suffix in VETH_QUEUE_KEYS.items():
            pat = re.compile(rf"^rx_queue_\d+_{suffix}$")
            view[name] = sum(v for k, v in ethtool.items() if pat.match(k))
    elif driver.startswith("mlx5"):
        for k in MLX5_KEYS:
            if k in ethtool:
                view[k] = ethtool[k]
    return view


def snapshot(node: Node, iface: str) -> dict:
    """One interface's counters: raw ethtool/sysfs text, parsed values and the driver view."""
    drv = node.run(["ethtool", "-i", iface], check=False)
    if not drv.ok:
        raise NodeError(f"Failed to read counters of {node.name}:{iface}: "
                        f"{(drv.stderr or drv.stdout).strip() or 'no such interface'}")
    driver = next((l.split(":", 1)[1].strip() for l in drv.stdout.splitlines()
                   if l.startswith("driver:")), "unknown")
    # the duration between two snapshots comes from the monotonic clock (an NTP step moves
    # time.time() by whole seconds between them); the wall clock is kept as the snapshot's stamp
    t, mono = time.time(), time.monotonic()
    eth = node.run(["ethtool", "-S", iface], check=False)
    # argv only, no interpolation: the interface name is $1 of a fixed script
    sysfs = node.run(["sh", "-c", 'cd "/sys/class/net/$1/statistics" && grep -H . *', "sh", iface],
                     check=False, own_sysfs=True)
    ethtool = parse_ethtool_stats(eth.stdout) if eth.ok else {}
    sysv = parse_sysfs_stats(sysfs.stdout) if sysfs.ok else {}
    if not sysv:
        raise NodeError(f"Failed to read /sys/class/net/{iface}/statistics on {node.name}: "
                        f"{sysfs.stderr.strip() or 'empty'}")
    return {
        "node": node.name, "iface": iface, "driver": driver, "time": t, "monotonic": mono,
        "raw": {"ethtool_S": eth.stdout, "ethtool_i": drv.stdout, "sysfs": sysfs.stdout},
        "ethtool": ethtool, "sysfs": sysv, "view": driver_view(driver, ethtool, sysv),
    }


def snapshot_many(node: Node, ifaces: list[str]) -> dict[str, dict]:
    return {i: snapshot(node, i) for i in ifaces}


def diff(before: dict, after: dict) -> dict:
    """after − before for the driver view and every parsed counter of one interface; `seconds`
    between them on the harness's monotonic clock (both snapshots are the harness's; a snapshot
    written before they carried "monotonic" falls back to their wall-clock stamps)."""
    def d(a, b):
        return {k: b[k] - a.get(k, 0) for k in b}
    clock = "monotonic" if "monotonic" in before and "monotonic" in after else "time"
    return {"node": after["node"], "iface": after["iface"], "driver": after["driver"],
            "seconds": after[clock] - before[clock],
            "view": d(before["view"], after["view"]),
            "ethtool": d(before["ethtool"], after["ethtool"]),
            "sysfs": d(before["sysfs"], after["sysfs"])}
