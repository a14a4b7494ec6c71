"""The namespace testbed on real namespaces: up/check/down leave the machine as before, up is
idempotent, down cleans up after a SIGKILLed harness; netns node operations; counters."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xenobench.config import load_config
from xenobench.counters import diff, snapshot
from xenobench.errors import NodeError
from xenobench.testbed import get_testbed

from .conftest import needs_root, send_udp

pytestmark = needs_root


def machine_state(prefix: str):
    """What a testbed could leave behind: namespaces, root-namespace links, pinned BPF objects
    and processes in namespaces. Only entries of this prefix are compared, so parallel suites on
    one machine with other prefixes do not disturb the comparison."""
    ns = sorted(l.split()[0] for l in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                     text=True).stdout.splitlines() if l.strip())
    links = sorted(l["ifname"] for l in json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True,
                                                                  text=True).stdout))
    bpf = sorted(os.listdir("/sys/fs/bpf")) if os.path.isdir("/sys/fs/bpf") else []
    return {"netns": [n for n in ns if n.startswith(prefix)], "links": links,
            "bpffs": [b for b in bpf if b.startswith(prefix)]}


def own_prefix(tag: str) -> str:
    """A prefix of a test's own, derived from the session's (as parallel suites use distinct
    session prefixes, their tests' testbeds stay apart too): `xbt-` and "u" give `xbtu-`."""
    return os.environ.get("XENOBENCH_NS_PREFIX", "xbt-").rstrip("-")[:4] + tag + "-"


U = own_prefix("u")


@pytest.fixture
def fresh(monkeypatch):
    """A testbed with its own prefix, so this module can bring it up and down at will."""
    monkeypatch.setenv("XENOBENCH_NS_PREFIX", U)
    tb = get_testbed(load_config())
    tb.down()
    yield tb
    tb.down()


def test_up_check_down_leaves_machine_as_before(fresh):
    before = machine_state(U)
    res = fresh.up()
    assert res["changed"] is True
    st = fresh.status()
    assert st["up"] and all(n["exists"] for n in st["nodes"].values())
    assert st["nodes"]["fips5"]["interfaces"]["p1"]["mac"] == "02:00:00:00:05:01"
    rows = fresh.check()
    # ping and UDP to the VIP per backend, (config/local.yaml runs Katran) IPIP to each real, then the
    # generator: its driver, and frames it sends to a backend
    assert [d.split(" ")[0] for d, _, _ in rows] == ["client", "client", "UDP", "UDP", "IPIP", "IPIP",
                                                     "xdpgen", "xdpgen"], rows
    assert st["generator"]["name"] == "xdpgen" and st["generator"]["driver"] in ("live", "loop"), st["generator"]
    assert [r for r in rows if not r[1]] == []
    # the topology lives in namespaces only: the root namespace has no new link
    assert machine_state(U)["links"] == before["links"]
    assert fresh.up()["changed"] is False  # up twice is harmless
    fresh.down()
    assert machine_state(U) == before


def test_down_after_sigkilled_harness(fresh, tmp_path):
    before = machine_state(U)
    # a harness that brings the testbed up, starts a background process, pins an object, and dies
    script = tmp_path / "harness.py"
    script.write_text(
        "import os, signal\n"
        "from xenobench.config import load_config\n"
        "from xenobench.testbed import get_testbed\n"
        "tb = get_testbed(load_config()); tb.up()\n"
        "tb.bpffs_dir.mkdir(parents=True, exist_ok=True)\n"
        "h = tb.node('fips2').start('sleeper', ['sleep', '300'])\n"
        "print(h.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env={**os.environ, "XENOBENCH_NS_PREFIX": U})
    assert p.returncode == -signal.SIGKILL
    pid = int(p.stdout.split()[0])
    assert Path(f"/proc/{pid}").exists()
    assert f"{U}fips2" in machine_state(U)["netns"]
    fresh.down()
    time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert machine_state(U) == before


def test_netns_node_run_start_stop_files(testbed, tmp_path):
    n = testbed.node("fips3")
    r = n.run(["ip", "-j", "addr", "show", "dev", "eth0"])
    assert "198.18.0.3" in r.stdout
    tricky = "a b; echo 'pwned' \"$HOME\""
    r = n.run([sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", tricky, ""])
    assert json.loads(r.stdout) == [tricky, ""]
    r = n.run(["sh", "-c", "exit 3"], check=False)
    assert r.returncode == 3
    with pytest.raises(NodeError, match=r"Failed to run `sh -c 'exit 3'` on fips3: exit status 3"):
        n.run(["sh", "-c", "exit 3"])
    with pytest.raises(NodeError, match=r"timed out after 0.3 s"):
        n.run(["sleep", "5"], timeout=0.3)
    h = n.start("sleeper", ["sleep", "60"])
    assert n.running("sleeper")
    with pytest.raises(NodeError, match="already running as pid"):
        n.start("sleeper", ["sleep", "60"])
    # it really runs inside the node's namespace
    assert str(h.pid) in subprocess.run(["ip", "netns", "pids", n.netns], capture_output=True, text=True).stdout
    assert n.stop("sleeper") is True
    assert not n.running("sleeper") and n.stop("sleeper") is False
    with pytest.raises(NodeError, match="exited at once"):
        n.start("bad", ["sh", "-c", "echo oops >&2; exit 1"], ready=0.3)
    src = tmp_path / "a.txt"
    src.write_text("payload")
    n.put(src, str(tmp_path / "sub" / "b.txt"))
    n.get(str(tmp_path / "sub" / "b.txt"), tmp_path / "c.txt")
    assert (tmp_path / "c.txt").read_text() == "payload"


def test_counters_diff_counts_exactly_the_frames_sent(testbed):
    client, backend = testbed.node("fips1"), testbed.node("fips2")
    bi = testbed.cfg.role("dns_backend").iface()
    # to an address nobody owns: the backend drops it silently (no ICMP, hence no ARP back)
    b0, c0 = snapshot(backend, "eth0"), snapshot(client, "eth0")
    n = 137
    send_udp(testbed, "client", dst_mac=bi.mac, dst_ip="198.18.0.250", port=9, payload="count-me", count=n)
    time.sleep(0.2)
    b1, c1 = snapshot(backend, "eth0"), snapshot(client, "eth0")
    assert c1["driver"] == "veth"
    assert diff(c0, c1)["view"]["tx_packets"] == n
    assert diff(b0, b1)["view"]["rx_packets"] == n
    assert "rx_packets" in b1["raw"]["sysfs"] and "peer_ifindex" in b1["raw"]["ethtool_S"]


def test_counters_unknown_interface_is_a_clear_error(testbed):
    with pytest.raises(NodeError, match="Failed to read counters of fips1:nope0"):
        snapshot(testbed.node("fips1"), "nope0")


# --- teardown owns everything its prefix created, whatever config is given ---------------------------
D = own_prefix("d")


def _configs(tmp_path) -> tuple[Path, Path]:
    """Two testbeds on one prefix, as config/local.yaml and config/ci.yaml share `xb-`."""
    out = []
    for name in ("tda", "tdb"):
        f = tmp_path / f"{name}.yaml"
        f.write_text(f"extends: {load_config().path}\ntestbed: {{name: {name}, state_dir: {tmp_path / 'state'}}}\n")
        out.append(f)
    return out[0], out[1]


def _xb(cfg: Path, *args: str, prefix: str = D) -> str:
    p = subprocess.run([sys.executable, "-m", "xenobench.cli", "--config", str(cfg), *args], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "XENOBENCH_NS_PREFIX": prefix})
    assert p.returncode == 0, f"xenobench {' '.join(args)}: exit {p.returncode}: {p.stderr}"
    return p.stdout


@pytest.fixture
def two_configs(tmp_path):
    a, b = _configs(tmp_path)
    before = machine_state(D)
    yield a, b, before
    for f in (a, b):
        _xb(f, "testbed", "down")


def test_down_with_another_config_on_the_prefix_removes_the_first_testbeds_pins(two_configs, tmp_path):
    """Pins are named by prefix and testbed (/sys/fs/bpf/<prefix><name>), namespaces by prefix
    alone: `down` with the other config removed the namespaces and left the first one's pins."""
    a, b, before = two_configs
    _xb(a, "testbed", "up")
    assert machine_state(D)["bpffs"] == [f"{D}tda"]
    _xb(b, "testbed", "down")
    assert machine_state(D) == before
    # bringing the other config up replaces the first testbed whole, and it goes down with either config
    _xb(a, "testbed", "up")
    _xb(b, "testbed", "up")
    assert machine_state(D)["bpffs"] == [f"{D}tdb"]
    _xb(a, "testbed", "down")
    assert machine_state(D) == before
    # without --purge the state directories (logs) stay
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [f"tda-{D[:-1]}", f"tdb-{D[:-1]}"]


def test_down_purge_removes_the_state_directories(two_configs, tmp_path):
    """`.xenobench/state/<testbed>-<prefix>/` stayed after down: --purge removes it, the first
    testbed's too when another config on the prefix takes it down."""
    a, b, before = two_configs
    _xb(a, "testbed", "up")
    _xb(a, "testbed", "check")  # a run leaves logs in the state directory
    assert list((tmp_path / "state" / f"tda-{D[:-1]}" / "logs").iterdir())
    out = _xb(b, "testbed", "down", "--purge")
    assert "removed 6 namespaces" in out
    assert machine_state(D) == before
    assert list((tmp_path / "state").iterdir()) == []
    # a plain `down` with the other config first removes the record that named the state directory:
    # the purge after it still finds the first testbed's (marked by its `up`), and only the prefix's
    _xb(a, "testbed", "up")
    other = tmp_path / "state" / "fips-xq"        # another prefix's (or a hosts testbed's): not ours
    other.mkdir()
    _xb(b, "testbed", "down")
    assert (tmp_path / "state" / f"tda-{D[:-1]}").is_dir()
    _xb(b, "testbed", "down", "--purge")
    assert list((tmp_path / "state").iterdir()) == [other]


# (case, what the mount namespace holds at /sys/fs/bpf before `up`, what happens to it while the
# testbed is up, whether a bpffs is mounted after `down`); each runs in a mount namespace of its own
# (unshare), so the machine's /sys/fs/bpf, and other suites' pins in it, are never touched
BPFFS_CASES = [
    ("up-mounted-it", "none", "nothing", False),          # left as found: unmounted
    ("mounted-before", "mounted", "nothing", True),       # the host's mount stays
    ("remounted-by-another", "none", "remount", True),     # someone else's mount now: it stays
]


@pytest.mark.parametrize("case,before,meanwhile,mounted_after", BPFFS_CASES, ids=[c[0] for c in BPFFS_CASES])
def test_down_unmounts_only_the_bpffs_the_testbed_mounted(tmp_path, case, before, meanwhile, mounted_after):
    cfg, _ = _configs(tmp_path)
    prefix = own_prefix("m")
    xb = f"{sys.executable} -m xenobench.cli --config {cfg}"
    script = "\n".join([
        "set -e",
        f"trap '{xb} testbed down >/dev/null 2>&1' EXIT",
        "if mountpoint -q /sys/fs/bpf; then umount /sys/fs/bpf; fi",
        *(["mount -t bpf bpf /sys/fs/bpf"] if before == "mounted" else []),
        f"{xb} testbed up",
        *(["umount /sys/fs/bpf", "mount -t bpf bpf /sys/fs/bpf"] if meanwhile == "remount" else []),
        f"{xb} testbed down",
        "if mountpoint -q /sys/fs/bpf; then echo MOUNTED; else echo UNMOUNTED; fi"])
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "XENOBENCH_NS_PREFIX": prefix})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[-1] == ("MOUNTED" if mounted_after else "UNMOUNTED"), (case, p.stdout, p.stderr)
    assert machine_state(prefix)["netns"] == []
