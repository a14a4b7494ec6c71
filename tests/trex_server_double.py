"""Test double of a TRex v3.04 server: the TRex stand-in (standins/trex/trex_standin.py) with a
simulated transmitter, in this process, on loopback with random ports.

Everything but the wire is the stand-in's: TRex's RPC over real ZeroMQ (so the unmodified
`trex.stl.api.STLClient` of lbr-trex-client 3.4.0 talks to it exactly as to a real server, in this
process or in the TRex worker process), its parameter checks and wording, port ownership, the
multiplier, and the compilation of every stream over the configured cores (split, cache per
core, TRex's limits) at start_traffic. Only the transmission is simulated: a started port "sends"
rate x duration frames (times `achieved`, to model a generator that falls short), adds
`queue_full` to TRex's queue-full counter per transmission, and announces the end with the
profile-finished events, as TRex does. tests/test_trex_standin.py drives the stand-in on a real wire.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "standins" / "trex"))

from trex_standin import VERSION, Config, PortCfg, TrexStandin, TxResult  # noqa: E402


LINE_RATE_BPS = 100e9   # a 100 Gbit/s ConnectX port


class SimulatedTx:
    """The transmitter of the double: counts instead of sending."""

    def __init__(self, srv: "TrexServerDouble"):
        self.srv = srv
        self.result = None
        self._stopped = threading.Event()

    def start(self, plan, on_done):
        time.sleep(self.srv.start_delay)  # as the stand-in writing a pcap and starting xdpgen before it sends
        self.plan, self.t0 = plan, time.monotonic()
        self.srv.plans.append(plan)
        if plan.duration > 0:
            def run():
                if not self._stopped.wait(plan.duration):
                    on_done(self._finish(plan.duration))
            threading.Thread(target=run, daemon=True).start()

    def _finish(self, seconds):
        if self.result is None:
            n = int(round(self.plan.pps * seconds * self.srv.achieved))
            self.result = TxResult(opackets=n, obytes=n * self.plan.frame_len, queue_full=self.srv.queue_full)
        return self.result

    def live(self):
        """Frames sent so far (TRex's opackets grow while it sends)."""
        if self.result is not None:
            return 0  # counted in the port's totals
        return int(self.plan.pps * (time.monotonic() - self.t0) * self.srv.achieved)

    def stop(self):
        self._stopped.set()
        return self._finish(time.monotonic() - self.t0)


class TrexServerDouble(TrexStandin):
    """Start with `with TrexServerDouble(ports=2) as srv:`; srv.sync_port / srv.async_port;
    srv.calls: (method, params) in arrival order; srv.plans: what each start_traffic would send.
    cores: data-path cores per dual port (as `t-rex-64 -c`); achieved: fraction of the requested
    frames a port sends; queue_full: TRex's queue-full counter grows by this per transmission;
    start_delay: seconds start_traffic takes before the port sends (its reply comes after)."""

    def __init__(self, ports: int = 2, achieved: float = 1.0, queue_full: int = 0, version: str = VERSION,
                 cores: int = 14, start_delay: float = 0.0):
        super().__init__(Config(ports=[PortCfg(None, speed_bps=LINE_RATE_BPS) for _ in range(ports)], cores=cores, version=version),
                         transmitter=lambda: SimulatedTx(self))
        self.achieved, self.queue_full, self.start_delay = achieved, queue_full, start_delay
        self.calls = []
        self.plans: list = []

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls if m not in ("get_async_events", "publish_now")]

    def call(self, method: str) -> list[dict]:
        return [p for m, p in self.calls if m == method]
