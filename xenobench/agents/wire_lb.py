"""The wire reference LB's controller (switch/wire.bpf.c), run on the LB node as
`python -m xenobench.agents.wire_lb run ...` inside the node's namespace, so the devmap's ifindex
resolves there.

The wire forwards every frame from the ingress to the egress port with its MACs rewritten to one
backend (the backends file's first) and the egress port, and nothing else: the testbed's own
forwarding limit, against which the eBPF LB and XenoFlow are plotted. It loads
switch/build/wire.bpf.o with its maps pinned under --pin-dir, fills them, attaches (native unless
--generic), prints stats as JSON lines every interval and on SIGINT/SIGTERM detaches and unpins
(xenobench.agents.bpf.run_controller).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Callable

from .. import REPO_ROOT
from ..backends import load_backends
from ..errors import XenobenchError
from .bpf import (bpftool_stdout, controller_parser, ip_link, keep_lb_state, load_pinned, map_update,
                  percpu_sum, run_controller)
from .net import mac_bytes

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


def run(a) -> int:
    pindir = Path(a.pin_dir)
    mode = "generic" if a.generic else "native"

    def setup() -> dict:
        link = ip_link(a.egress)
        if link is None:
            raise XenobenchError(f"Failed to find egress interface {a.egress}")
        bs = load_backends(a.backends)  # validate before anything is loaded
        to = bs.backends[0]
        load_pinned(OBJ, pindir, "make -C switch")
        m = pindir / "maps"
        map_update(m / "wire_config", struct.pack("<I", 0), config_bytes(to.mac, a.src_mac))
        map_update(m / "wire_egress", struct.pack("<I", 0), struct.pack("<I", link["ifindex"]))
        return {"ingress": a.ingress, "egress": a.egress, "mode": mode, "backend": to.name}

    return run_controller(what="the wire LB", iface=a.ingress, pindir=pindir, prog=PROG, generic=a.generic,
                          setup=setup, read_stats=lambda: read_stats(pindir, a.backends, mode),
                          interval=a.interval,
                          after_attach=lambda: keep_lb_state(a.state_dir, mode, a.backends))


def main(argv=None) -> int:
    ap, r = controller_parser("python -m xenobench.agents.wire_lb", "wire reference LB controller", 1.0)
    r.add_argument("--backends", required=True, help="its first backend receives every frame")
    r.add_argument("--ingress", required=True)
    r.add_argument("--egress", required=True)
    r.add_argument("--src-mac", required=True, help="source MAC written into forwarded frames")
    r.add_argument("--state-dir", required=True, help="where the mode and a copy of the backends file go")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
