"""Counter parsing and the driver-aware view, on recorded text (no NIC needed)."""

import json
import subprocess
import sys
from pathlib import Path

from xenobench.counters import diff, driver_view, parse_ethtool_stats, parse_sysfs_stats

from .conftest import needs_root

FIX = Path(__file__).parent / "fixtures/counters"


def test_mlx5_view_names_the_phy_counters():
    eth = parse_ethtool_stats((FIX / "mlx5_ethtool_S.txt").read_text())
    assert eth["rx_packets_phy"] == 96919452 and "NIC statistics" not in eth
    sysfs = parse_sysfs_stats("rx_packets:1000\ntx_packets:10\nrx_dropped:0\nbogus:x\n")
    assert sysfs == {"rx_packets": 1000, "tx_packets": 10, "rx_dropped": 0}
    v = driver_view("mlx5_core", eth, sysfs)
    assert v["rx_packets_phy"] == 96919452 and v["rx_discards_phy"] == 3 and v["rx_out_of_buffer"] == 7
    assert v["rx_packets"] == 1000 and "ch0_arm" not in v


def test_veth_view_sums_xdp_counters_over_queues():
    eth = parse_ethtool_stats("NIC statistics:\n     peer_ifindex: 5\n     rx_queue_0_xdp_packets: 4\n"
                              "     rx_queue_1_xdp_packets: 6\n     rx_queue_0_xdp_redirect: 3\n"
                              "     rx_queue_1_drops: 2\n     tx_queue_0_xdp_xmit: 9\n")
    v = driver_view("veth", eth, {"rx_packets": 1})
    assert (v["xdp_packets"], v["xdp_redirect"], v["rx_drops"], v["xdp_tx"]) == (10, 3, 2, 0)


def test_diff_is_after_minus_before():
    a = {"node": "n", "iface": "i", "driver": "veth", "time": 1.0, "view": {"rx_packets": 5},
         "ethtool": {"x": 1}, "sysfs": {"rx_packets": 5}}
    b = {**a, "time": 3.5, "view": {"rx_packets": 12}, "ethtool": {"x": 4}, "sysfs": {"rx_packets": 12}}
    d = diff(a, b)
    assert d["view"]["rx_packets"] == 7 and d["ethtool"]["x"] == 3 and d["seconds"] == 2.5


@needs_root
def test_cli_counters_and_status_json(testbed):
    env_cmd = [sys.executable, "-m", "xenobench"]
    p = subprocess.run(env_cmd + ["counters", "fips5", "p0", "p1", "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    snap = json.loads(p.stdout)
    assert set(snap) == {"p0", "p1"} and snap["p0"]["driver"] == "veth"
    assert "rx_packets" in snap["p1"]["view"] and snap["p1"]["raw"]["ethtool_S"].startswith("NIC statistics")
    p = subprocess.run(env_cmd + ["counters", "fips9", "eth0"], capture_output=True, text=True)
    assert p.returncode == 1 and "Failed to find node 'fips9'" in p.stderr
    p = subprocess.run(env_cmd + ["testbed", "status", "--json"], capture_output=True, text=True)
    st = json.loads(p.stdout)
    assert st["up"] and st["nodes"]["fips5"]["interfaces"]["p0"]["mac"] == "02:00:00:00:05:00"
