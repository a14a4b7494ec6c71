"""The wire reference LB's agent (switch/wire.bpf.c), an XdpLbAgent (xenobench.agents.xdp_lb):
`python -m xenobench.agents.wire_lb run ...` on the LB node.

The wire forwards every frame from the ingress to the egress port with its MACs rewritten to one
backend (the backends file's first) and the egress port, and nothing else: the testbed's own
forwarding limit, against which the eBPF LB and XenoFlow are plotted.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Callable

from .. import REPO_ROOT
from ..backends import load_backends
from .bpf import bpftool_stdout, map_update, percpu_sum
from .net import mac_bytes
from .xdp_lb import XdpLbAgent

OBJ = REPO_ROOT / "switch" / "build" / "wire.bpf.o"
PROG = "wire"
STATS_NAMES = ("forwarded", "malformed")  # enum wire_stat order (switch/switch_common.h)
CONFIG_SIZE = 12  # struct wire_config: dst_mac, src_mac


def config_bytes(dst_mac: str, src_mac: str) -> bytes:
    """struct wire_config (switch_common.h)."""
    return mac_bytes(dst_mac) + mac_bytes(src_mac)


def read_stats(pindir: Path, backends_file, mode: str, run: Callable[..., str] = bpftool_stdout) -> dict:
    """Counters in the shape `lb stats` prints for every LB: all forwarded frames went to the
    first backend; the wire looks at nothing, so it has no miss or non-IPv4 frames."""
    bs = load_backends(backends_file)
    st = percpu_sum(pindir / "maps" / "wire_stats", "<QQ", run)
    fwd, mal = st.get(0, (0, 0)), st.get(1, (0, 0))
    return {"backends": [{"name": b.name, "mac": b.mac, "packets": fwd[0] if i == 0 else 0,
                          "bytes": fwd[1] if i == 0 else 0} for i, b in enumerate(bs.backends)],
            "miss": 0, "non_ipv4": 0, "non_service": 0, "malformed": mal[0], "tx_error": 0, "mode": mode}


def _configure(pindir: Path, backends: Path, a, egress_ifindex: int | None) -> dict:
    to = load_backends(backends).backends[0]
    m = pindir / "maps"
    map_update(m / "wire_config", struct.pack("<I", 0), config_bytes(to.mac, a.src_mac))
    map_update(m / "wire_egress", struct.pack("<I", 0), struct.pack("<I", egress_ifindex))
    return {"backend": to.name}


AGENT = XdpLbAgent(name="the wire LB", prog_name="xenobench.agents.wire_lb", obj=OBJ, prog=PROG,
                   build_hint="make -C switch", configure=_configure, read_stats=read_stats,
                   egress_required=True, description="wire reference LB controller")

if __name__ == "__main__":
    sys.exit(AGENT.main())
