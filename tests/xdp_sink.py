"""Test fixture (also used by scripts/bench_generator.py): a veth pair whose peer drops every
frame at XDP, to measure and test the XDP live-frames generator (loadgen/xdpgen) alone, apart
from the testbed (whose switch path, a Linux bridge, takes a few hundred kpps)."""

import contextlib
import subprocess

from xenobench import REPO_ROOT
from xenobench.errors import TrafficError

SINK_OBJ = REPO_ROOT / "loadgen" / "build" / "xdp_sink.bpf.o"


@contextlib.contextmanager
def xdp_sink_pair(prefix: str, drop: bool = True):
    """For benchmarks and tests of the generator alone: namespaces <prefix>xg-gen and
    <prefix>xg-sink joined by a veth pair gen0 - sink0, sink0 dropping every frame at XDP
    (loadgen/xdp_sink.bpf.o), or with drop=False taking them into its stack (GRO on gives the veth
    the NAPI that XDP frames need; a capture on sink0 sees them). Yields (gen namespace, sink
    namespace); removed on exit."""
    names = (f"{prefix}xg-gen", f"{prefix}xg-sink")

    def ip(*a):
        p = subprocess.run(["ip", *map(str, a)], capture_output=True, text=True)
        if p.returncode:
            raise TrafficError(f"Failed to set up the XDP sink pair: `ip {' '.join(map(str, a))}`: {p.stderr.strip()}")

    def remove():
        for ns in names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    remove()
    try:
        for ns in names:
            ip("netns", "add", ns)
        gen, sink = names
        ip("-n", gen, "link", "add", "gen0", "type", "veth", "peer", "name", "sink0", "netns", sink)
        if drop:
            ip("-n", sink, "link", "set", "dev", "sink0", "xdp", "obj", SINK_OBJ, "sec", "xdp")
        else:
            p = subprocess.run(["ip", "netns", "exec", sink, "ethtool", "-K", "sink0", "gro", "on"],
                               capture_output=True, text=True)
            if p.returncode:
                raise TrafficError(f"Failed to set up the sink pair: ethtool -K sink0 gro on: {p.stderr.strip()}")
        ip("-n", gen, "link", "set", "gen0", "up")
        ip("-n", sink, "link", "set", "sink0", "up")
        yield gen, sink
    finally:
        remove()
