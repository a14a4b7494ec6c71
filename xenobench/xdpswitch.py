"""One port, several XDP load balancers loaded at once, the port's program switched atomically
between them: the switcher of the interleaved rate design (xenobench.measure.rank).

Each LB is started "loaded, not attached" (LoadBalancer.start(attach=False): its program pinned on
the LB node's bpffs, its maps filled, its controller's stats loop running); the switcher attaches
the first pinned program to the port and then replaces it by another with one netlink XDP request
without XDP_FLAGS_UPDATE_IF_NOEXIST (`bpftool net attach xdpdrv pinned P dev D overwrite`): the
kernel swaps the program pointer (dev_xdp_install; veth's ndo_bpf keeps its NAPI and ring when a
program replaces a program), so the port is never without a program between blocks and the veth
never goes down. tests/test_rank.py counts it: frames sent across swaps = frames the LBs forwarded
= frames the backends received.

Every command runs on the LB node through the Node API (any transport). After each swap the port's
program id is read back and must be the pinned one's. `detach()` at the end (also on error) leaves
the port as it was found: without a program.

Why not a BPF link update (bpf_link_update): a link attached by one process is owned by its fd;
the controllers are separate processes, and the emulation's own BPF link would have to be handed
over. The netlink replace needs nothing but the pins.
"""

from __future__ import annotations

import time

from .errors import NodeError
from .progcost import pinned_prog_id, xdp_prog_id


class XdpSwitch:
    """The XDP program of node:iface, switched among pinned programs (module docstring)."""

    def __init__(self, node, iface: str, generic: bool = False):
        self.node, self.iface = node, iface
        self.mode = "xdpgeneric" if generic else "xdpdrv"
        self.ids: dict[str, int] = {}    # pin -> program id, read once per pin
        self.current: str | None = None  # the pin attached now
        self.swaps = 0
        #: the last attach or swap: (monotonic before, after) the netlink request's command; the
        #: program changed in between
        self.last: tuple[float, float] | None = None

    def prog_id(self, pin: str) -> int:
        if pin not in self.ids:
            pid = pinned_prog_id(self.node, pin)
            if pid is None:
                raise NodeError(f"Failed to switch {self.node.name}:{self.iface} to {pin}: no program pinned there "
                                "(was its LB started with attach=False, and is it still running?)")
            self.ids[pin] = pid
        return self.ids[pin]

    def attach(self, pin: str) -> None:
        """The first program: refused while the port has a program (someone else's)."""
        want = self.prog_id(pin)
        have = xdp_prog_id(self.node, self.iface)
        if have is not None:
            raise NodeError(f"Failed to attach {pin} to {self.node.name}:{self.iface}: XDP program {have} is already "
                            "attached (stop what attached it first)")
        self._net_attach(pin, overwrite=False, want=want)

    def switch(self, pin: str) -> None:
        """Replace the attached program by the one pinned at `pin`, atomically."""
        if self.current is None:
            raise NodeError(f"Failed to switch {self.node.name}:{self.iface} to {pin}: nothing attached by this "
                            "switcher yet (attach first)")
        if pin == self.current:
            return
        self._net_attach(pin, overwrite=True, want=self.prog_id(pin))
        self.swaps += 1

    def _net_attach(self, pin: str, overwrite: bool, want: int) -> None:
        argv = ["bpftool", "net", "attach", self.mode, "pinned", pin, "dev", self.iface]
        t0 = time.monotonic()
        r = self.node.run(argv + (["overwrite"] if overwrite else []), check=False)
        self.last = (t0, time.monotonic())
        if not r.ok:
            raise NodeError(f"Failed to {'switch' if overwrite else 'attach'} {self.node.name}:{self.iface} to {pin}: "
                            f"{(r.stderr or r.stdout).strip() or f'bpftool exited with status {r.returncode}'}")
        have = xdp_prog_id(self.node, self.iface)
        if have != want:
            raise NodeError(f"Failed to switch {self.node.name}:{self.iface} to {pin}: program {have} is attached, "
                            f"not {want}")
        self.current = pin

    def detach(self) -> bool:
        """Detach the switcher's program (only while one of its pins is attached); True if it did."""
        have = xdp_prog_id(self.node, self.iface)
        if have is None or have not in self.ids.values():
            self.current = None
            return False
        self.node.run(["bpftool", "net", "detach", self.mode, "dev", self.iface], check=False)
        self.current = None
        left = xdp_prog_id(self.node, self.iface)
        if left is not None:
            raise NodeError(f"Failed to detach XDP program {left} from {self.node.name}:{self.iface}")
        return True
