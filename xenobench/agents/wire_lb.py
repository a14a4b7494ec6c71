"""The wire reference LB's agent (switch/wire.bpf.c), an XdpLbAgent (xenobench.agents.xdp_lb):
`python -m xenobench.agents.wire_lb run ...` on the LB node.

The wire forwards every frame from the ingress to the egress port with its MACs rewritten to the
backend the LBs would pick for it (the same backends file, the same class split) and the egress
port, with one lookup and no parsing: the testbed's own forwarding limit for the same traffic to
the same backends, against which the load balancers are plotted and ranked.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Callable

from .. import REPO_ROOT
from ..backends import load_backends
from .bpf import bpftool_stdout, map_update, map_update_batch, percpu_sum
from .net import mac_bytes
from .xdp_lb import XdpLbAgent

OBJ = REPO_ROOT / "switch" / "build" / "wire.bpf.o"
PROG = "wire"
CLASSES = 256    # WIRE_CLASSES (switch/switch_common.h): the source address's last byte
MALFORMED = CLASSES  # WIRE_STAT_MALFORMED: wire_stats' entry after the classes'
CONFIG_SIZE = 12  # struct wire_config: dst_mac, src_mac


def config_bytes(dst_mac: str, src_mac: str) -> bytes:
    """struct wire_config (switch_common.h)."""
    return mac_bytes(dst_mac) + mac_bytes(src_mac)


def class_table(bs) -> list[int]:
    """wire_slots' backend per class: the backends file's 2^k-slot table repeated over the 256
    classes (class c = slot c & (2^k - 1), as xenobench.backends classifies)."""
    return [bs.slots[c & bs.mask] for c in range(CLASSES)]


def read_stats(pindir: Path, backends_file, mode: str, run: Callable[..., str] = bpftool_stdout) -> dict:
    """Counters in the shape `lb stats` prints for every LB: each class's frames summed into its
    backend's; the wire looks at nothing, so it has no miss or non-IPv4 frames."""
    bs = load_backends(backends_file)
    st = percpu_sum(pindir / "maps" / "wire_stats", "<QQ", run)
    per = [[0, 0] for _ in bs.backends]
    for c, bi in enumerate(class_table(bs)):
        pk, by = st.get(c, (0, 0))
        per[bi][0] += pk
        per[bi][1] += by
    return {"backends": [{"name": b.name, "mac": b.mac, "packets": per[i][0], "bytes": per[i][1]}
                         for i, b in enumerate(bs.backends)],
            "miss": 0, "non_ipv4": 0, "non_service": 0, "malformed": st.get(MALFORMED, (0, 0))[0], "tx_error": 0,
            "mode": mode}


def _configure(pindir: Path, backends: Path, a, egress_ifindex: int | None) -> dict:
    bs = load_backends(backends)
    m = pindir / "maps"
    map_update_batch([(m / "wire_slots", struct.pack("<I", c), config_bytes(bs.backends[bi].mac, a.src_mac))
                      for c, bi in enumerate(class_table(bs))])
    map_update(m / "wire_egress", struct.pack("<I", 0), struct.pack("<I", egress_ifindex))
    return {"backends": [b.name for b in bs.backends], "class_bits": bs.class_bits, "slots": list(bs.slots)}


AGENT = XdpLbAgent(name="the wire LB", prog_name="xenobench.agents.wire_lb", obj=OBJ, prog=PROG,
                   build_hint="make -C switch", configure=_configure, read_stats=read_stats,
                   egress_required=True, description="wire reference LB controller",
                   forwarded_map="wire_stats", forwarded_keys=CLASSES)

if __name__ == "__main__":
    sys.exit(AGENT.main())
