"""Shared fixtures. Tests that need root (namespaces, XDP) skip with a reason when not root.

The namespace prefix defaults to `xbt-` so the tests never touch a testbed a user brought up with
the default `xb-`; set XENOBENCH_NS_PREFIX to run several suites side by side on one machine.
"""

import json
import os
import subprocess
from contextlib import contextmanager

import pytest
from hypothesis import settings

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbt-")
# pytest-xdist (`make test` runs `-n 2`): each worker builds its own session testbed, so each gets
# its own namespace prefix, the run's prefix with the worker's number (xbt- -> xbt0-, xbt1-; the
# config allows 6 characters)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw"):
    _n = _WORKER[2:]
    _stem = os.environ["XENOBENCH_NS_PREFIX"].rstrip("-")
    os.environ["XENOBENCH_NS_PREFIX"] = f"{_stem[:5 - len(_n)]}{_n}-"

# Hypothesis profiles (docs/tests.md). Each property test states its example count for the deep
# profile through tests/strategies.py examples(); `make test` loads "quick", a quarter of each
# count; `make test-e2e` re-runs every Hypothesis test (Hypothesis's own pytest plugin marks them
# `hypothesis`) under "deep", the counts as written.
settings.register_profile("deep", max_examples=100)
settings.register_profile("quick", max_examples=25)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick"))

from xenobench.config import load_config  # noqa: E402
from xenobench.lb import LBS  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402
from xenobench.traffic.xdpgen import BINARY as XDPGEN  # noqa: E402

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: network namespaces, XDP, bpftool")


def _live_frames_refused() -> str | None:
    """None where this kernel allows XDP live frames; else why not, from xdpgen's own probe (the
    generator's live driver: BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, EPERM on some kernels even
    for root)."""
    if not IS_ROOT:
        return "needs root"
    if not XDPGEN.is_file():
        subprocess.run(["make", "-s", "-C", str(XDPGEN.parents[1])], check=False, capture_output=True)
    p = subprocess.run([str(XDPGEN), "--probe", "--driver", "live"], capture_output=True, text=True)
    try:
        answer = json.loads(p.stdout)["live_frames"]
    except (ValueError, KeyError):
        return f"xdpgen --probe failed: {p.stderr.strip() or p.returncode}"
    return None if answer == "allowed" else answer


LIVE_FRAMES_REFUSED = _live_frames_refused()
#: xdpgen's drivers as test parameters: every test of a driver runs where the kernel runs it (the
#: loop everywhere; live frames where allowed), so one suite covers both kinds of kernel
GENERATOR_DRIVERS = [
    pytest.param("live", id="live", marks=pytest.mark.skipif(
        LIVE_FRAMES_REFUSED is not None,
        reason=f"xdpgen's live driver: this kernel's XDP live frames are {LIVE_FRAMES_REFUSED} "
               "(the same tests ran with the loop driver)")),
    pytest.param("loop", id="loop"),
]


@pytest.fixture(scope="session")
def local_cfg():
    """config/local.yaml with the machine rule's placement, allocator, other-load and steadiness limits
    off (steal stays judged): the tests check procedures and their records on a machine other suites
    share, not that machine's state; tests/test_machine.py and tests/test_rank.py check the rule itself."""
    cfg = load_config()
    cfg.section("experiments").update(max_cpu_pair_rtt_ns=None, max_page_allocs_per_frame=None, max_received_share=None,
                                      max_other_load_share=None, max_unpaced_cv_pct=None)
    return cfg


@pytest.fixture(scope="session")
def testbed(local_cfg):
    """The embedded namespace testbed, up for the whole session, torn down at the end."""
    if not IS_ROOT:
        pytest.skip("needs root: network namespaces")
    tb = get_testbed(local_cfg)
    tb.up()
    yield tb
    tb.down()


@pytest.fixture(autouse=True)
def _lb_kinds_as_the_test_found_them():
    """The LB kinds a config declares stay declared until another config is loaded (xenobench.lb:
    the last config loaded owns them). A test that loads such a config would hand them to the next
    test of its worker; each test ends with the kinds it started with."""
    declared = LBS._declared
    yield
    LBS._declared = declared


@pytest.fixture(autouse=True)
def _backends_left_with_their_sink(request):
    """After every test on the session testbed: each backend's interface runs the sink again (or
    Katran's decap chain in front of it). A test that leaves one without it would make a later
    test's arrival count fail far from its cause; this names the test that left it."""
    yield
    tb = getattr(request.node, "funcargs", {}).get("testbed")  # the fixture's testbed (a parameter may share the name)
    if getattr(tb, "sink", None) is None or not tb.cfg.section("testbed")["backend_sink"] or not tb.is_up():
        return
    left = {b.name: p for b, p in tb.sink.uncounted().items()}
    assert not left, f"the test left a backend's interface without the sink: {left}"


def start_sshd(testbed, node_name: str, d, port: int = 2222, listen: str | None = None, *, sftp: bool = True,
               tag: str = "sshd-test"):
    """A real OpenSSH server in a node's namespace, on its first address (or `listen`, e.g.
    127.0.0.1 for an out-of-band port); returns the client key, known_hosts and address. Stop it
    with testbed.node(node_name).stop(tag). `sftp`: False leaves out the `Subsystem sftp` line
    (a hardened sshd: SFTP refused, exec channels only)."""
    import subprocess
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "client_key")], check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    addr = listen or testbed.cfg.nodes[node_name].iface().addr
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress {addr}\nHostKey {d / 'host_key'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\n" + ("Subsystem sftp internal-sftp\n" if sftp else ""))
    subprocess.run(["mkdir", "-p", "/run/sshd"], check=True)
    testbed.node(node_name).start(tag, ["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")],
                                  ready=0.5)
    host_pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[{addr}]:{port} {host_pub[0]} {host_pub[1]}\n")
    return d / "client_key", d / "known_hosts", addr


def send_udp(testbed, role: str, *, dst_mac: str, dst_ip: str, port: int, payload: str, count: int,
             src_ip: str | None = None, check: bool = True, timeout: float | None = None, sport: int = 40000):
    """`count` UDP frames out of the interface of the node with `role` (xenobench.agents.udpcheck:
    raw frames, so any destination MAC), from that interface's address unless src_ip is given
    (the loadgen's tests use the generator's range, 198.19.0.x, which the backends' sink drops).
    Returns the run's result."""
    nc = testbed.cfg.role(role)
    i, node = nc.iface(), testbed.node(nc.name)
    return node.run(node.python_argv("xenobench.agents.udpcheck", "send", "--iface", i.name, "--src-mac", i.mac,
                                     "--dst-mac", dst_mac, "--src-ip", src_ip or i.addr, "--dst-ip", dst_ip,
                                     "--port", str(port), "--sport", str(sport), "--payload", payload,
                                     "--count", str(count)),
                    check=check, timeout=timeout)



@contextmanager
def backend_arrivals(testbed):
    """Count the generator's frames (traffic.src_ip_base's block) each backend receives inside the
    block, by the backends' sink (switch/sink.bpf.c, per destination MAC); yields a dict filled on
    exit: backend name -> frames, and "other" for frames to a MAC no backend has. An interface's
    rx_packets also counts the segment's own frames (an ARP probe between other nodes)."""
    rec = testbed.arrival_recorder()
    assert rec is not None, "the testbed has no backend sink (testbed.backend_sink)"
    macs = {b.iface().mac: b.name for b in testbed.cfg.backend_nodes()}
    counts: dict[str, int] = {name: 0 for name in macs.values()}
    rec.start_arrivals(600_000_000_000)
    try:
        yield counts
    finally:
        for a in rec.stop_arrivals():
            key = macs.get(a.mac, "other")
            counts[key] = counts.get(key, 0) + a.packets


#: the port of sshd_without_sftp, in the DNS backend's namespace
NO_SFTP_PORT = 2224


@pytest.fixture(scope="module")
def sshd_without_sftp(testbed, tmp_path_factory):
    """A hardened sshd on the DNS backend: no `Subsystem sftp` line, so SFTP is refused (paramiko:
    Channel closed.). (its directory, the node's config)"""
    d = tmp_path_factory.mktemp("sshd-nosftp")
    server = testbed.cfg.role("dns_backend")
    start_sshd(testbed, server.name, d, NO_SFTP_PORT, sftp=False, tag="sshd-nosftp")
    yield d, server
    testbed.node(server.name).stop("sshd-nosftp")
