"""Local executor: a compiled profile sent by trafgen (netsniff-ng) from the loadgen node.

Why these trafgen options:
- `-t 0`: sendto() per frame. The TX_RING path fails with EAGAIN when a veth peer backs up.
- `-P N` (default 1): with one CPU the frames leave in exactly the compiled order.
- `--no-sock-mem -Q`: do not retune global socket memory or IRQ affinity (a shared machine).
- Rate: trafgen's own `-b NNpps` sends each second's packets back to back and then sleeps, and
  `-t GAP` is bounded by nanosleep() latency; both are poor at 10–100 kpps. So the rate comes from
  a tbf qdisc on the loadgen's interface (trafgen `-q`: through the qdisc layer), with a small
  queue: when tbf is full sendto() returns ENOBUFS and trafgen retries the same frame, so the
  order and the count are kept and the offered load is smooth. rate 0: no qdisc, as fast as
  trafgen can.

Frames sent (tx_packets) = the frames the device accepted: trafgen's own count (a sendto() that
failed with ENOBUFS is retried and counted once). Of those, the link counts in tx_packets what
the peer took; the rest the peer refused (the switch's backlog or an XDP ring full: loss at the
receiving end, which TRex would count as sent, too) and is reported as peer_dropped. The
interface's tx_dropped is not used for accounting: it also counts every refused retry.

Achieved rate: the interface's tx_packets sampled every SAMPLE_S from /proc/<trafgen pid>/net/dev
(the namespace's counters, read without spawning a process, so the timestamps are exact to
microseconds), reduced by the project's one steady-state rule (xenobench.steady: the median of the
steady intervals, so neither tbf's start burst nor the drain after trafgen's last sendto() moves
it). Trials too short for that (< MIN_STEADY_INTERVALS) fall back to the frames sent / trafgen's
own send-loop time. With peer drops the sampled rate is scaled by
sent / transmitted (drops assumed spread over the trial). Validity: the contract's one rule
(trial.judge), with trafgen's own faults (stalled, no summary). queue_full is always False for
trafgen: it has no queue that can overflow unseen (tbf's full queue is how the rate is kept;
ENOBUFS is retried), unlike TRex's.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import threading
import time
from pathlib import Path

from ..counters import read_proc_net_dev, snapshot
from ..steady import steady_state_of_counter
from .leftover import disown, own, stop_leftover
from .profiles import FCS, Compiled, check_local, compile_frames, frames_plan, port_for, to_trafgen
from .trial import Generator, TrialResult, TrialSpec

logger = logging.getLogger(__name__)

TAG = "trafgen"
SHAPER_WINDOW_S = 0.010  # tbf bucket and queue, in seconds of traffic at the requested rate
SAMPLE_S = 0.02          # tx counter sampling period
MIN_STEADY_INTERVALS = 10  # sampled intervals needed for the steady-state rate
STALL_S = 2.0            # no frame left for this long: the trial is stopped as stalled
STARTUP_S = 30.0         # no first frame within this long: stalled too (configuration parse, fork)
_OUT = re.compile(r"^\s*(\d+) packets outgoing", re.M)
_CPU = re.compile(r"^\s*(\d+) sec, (\d+) usec on CPU(\d+) \((\d+) packets\)", re.M)


def write_config(testbed, c: Compiled) -> Path:
    """The trafgen configuration in the state directory (content-addressed)."""
    text = to_trafgen(c)
    d = testbed.cfg.state_dir / "traffic"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{c.profile.stem}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.cfg"
    if not p.exists():
        tmp = p.with_suffix(".tmp")
        try:
            tmp.write_text(text)
            tmp.replace(p)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return p


_version: list[str] = []


def trafgen_version() -> str:
    """`trafgen -v`'s first line, e.g. "trafgen 0.6.8 (Flutternozzle), Git id: (none)"."""
    if not _version:
        import subprocess
        try:
            out = subprocess.run(["trafgen", "-v"], capture_output=True, text=True, timeout=10).stdout
            _version.append(out.strip().splitlines()[0] if out.strip() else "unknown")
        except (OSError, subprocess.SubprocessError):
            _version.append("unknown")
    return _version[0]


def parse_output(text: str) -> dict:
    """trafgen's exit summary: packets sent and the longest per-CPU send-loop time."""
    m = _OUT.search(text)
    cpus = [(int(s) + int(us) / 1e6, int(n)) for s, us, _, n in _CPU.findall(text)]
    return {"tx_packets": int(m.group(1)) if m else None,
            "loop_s": max((t for t, _ in cpus), default=None),
            "cpus": len(cpus)}


class TrafgenRun:
    """One trafgen trial on the loadgen node: start() returns at once; stop()/wait() → result."""

    def __init__(self, testbed, compiled: Compiled, spec: TrialSpec, cpus: int = 1, iface: str | None = None):
        self.tb = testbed
        self.c = compiled
        self.spec = spec
        self.rate = spec.rate_pps
        self.count = spec.count
        self.cpus = cpus
        self.node = testbed.node_for_role("loadgen")
        self.iface = iface or self.node.ncfg.iface().name
        self.qdisc = False
        self.stalled = False
        self.running_since = None
        self.sampler = None
        self.t0 = self.t1 = None
        self.before = None
        self._result = None

    # --- qdisc ---------------------------------------------------------------------------------
    def _frame_len(self) -> float:
        return sum(len(f) for f in self.c.frames) / len(self.c.frames)

    def _set_rate(self) -> None:
        flen = self._frame_len()
        bits = max(8, round(self.rate * flen * 8))
        big = max(len(f) for f in self.c.frames)
        # bucket and queue of SHAPER_WINDOW_S worth of frames: a late qdisc timer or a descheduled
        # trafgen (shared vCPUs) is caught up instead of losing tokens (with 25 frames of bucket
        # 75 kpps reached only 0.87 of the rate here); the price is a start burst and a queue of
        # that many frames, both left out of the steady-state rate
        window = round(self.rate * flen * SHAPER_WINDOW_S)
        burst = max(2 * big, window)
        limit = max(4 * big, window)
        self.node.run(["tc", "qdisc", "replace", "dev", self.iface, "root", "tbf", "rate", f"{bits}bit",
                       "burst", str(burst), "limit", str(limit)])
        self.qdisc = True

    def _clear_rate(self) -> None:
        if self.qdisc:
            self.node.run(["tc", "qdisc", "del", "dev", self.iface, "root"], check=False)
            self.qdisc = False

    # --- run -------------------------------------------------------------------------------
    def argv(self, cfg_path: str) -> list[str]:
        a = ["trafgen", "-o", self.iface, "-i", cfg_path, "-P", str(self.cpus), "-t", "0", "--no-sock-mem", "-Q",
             "-n", str(self.count or 0)]
        if self.rate > 0:
            a.append("-q")
        return a

    def start(self) -> "TrafgenRun":
        cfg_path = write_config(self.tb, self.c)
        remote = self.node.stage(cfg_path, f"traffic/{cfg_path.name}")
        # a killed harness's run holds the tag and sends into this trial's counters: stopped first
        stop_leftover(self.node, TAG, trafgen_binary())
        try:
            if self.rate > 0:
                self._set_rate()
            self.before = snapshot(self.node, self.iface)
            self.t0 = time.monotonic()
            log = self.node.log_path(TAG)
            self.log_offset = len(self.node.read_text(log))
            self.h = self.node.start(TAG, self.argv(remote), log=log, ready=0.0)
            own(self.node, TAG, self.h.pid)
            # /proc/<pid>/net/dev is readable only where the process runs on this host
            self.sampler = TxSampler(self.h.pid, self.iface) if self.node.is_local else None
        except Exception:
            self._clear_rate()
            raise
        return self

    def _wait(self, timeout: float | None) -> None:
        """Until trafgen exits, the timeout passes (counted from the first frame on the wire when
        the counter is sampled: parsing a 65535-frame configuration takes seconds), or no frame
        has left for STALL_S after the first one or after trafgen said "Running!", or none within
        STARTUP_S (trafgen retries a refused frame forever, e.g. with the peer down, and does not
        look at SIGTERM meanwhile)."""
        t_enter = time.monotonic()
        while self.node.running(TAG):
            now = time.monotonic()
            moved = self.sampler.first_move() if self.sampler is not None else t_enter
            if timeout is not None and now >= (moved or t_enter) + timeout \
                    and (moved is not None or now >= t_enter + timeout + STARTUP_S):
                return
            if self.sampler is not None and moved is None and self.running_since is None \
                    and "Running!" in self.node.read_text(self.h.log)[self.log_offset:]:
                self.running_since = now  # configuration parsed, sending begins
            if self.sampler is not None and (
                    (moved is not None and self.sampler.idle_s() >= STALL_S)
                    or (moved is None and self.running_since is not None and now - self.running_since >= STALL_S)
                    or (moved is None and now - t_enter >= STARTUP_S)):
                self.stalled = True
                return
            time.sleep(0.02)

    def wait(self) -> dict:
        """Block until trafgen ends (count sent) or the spec's deadline, then collect. trafgen
        cannot stop itself after a duration: a trial of a duration alone (rate 0) ends then."""
        self._wait(self.spec.duration_s if self.count is None else self.spec.deadline_s)
        return self.stop()

    def stop(self) -> dict:
        if self._result is not None:
            return self._result
        try:
            self.node.stop(TAG, timeout=1.0 if self.stalled else 5.0)
            if self.h is not None:
                disown(self.node, TAG, self.h.pid)
            self.t1 = time.monotonic()
            samples = self.sampler.stop() if self.sampler else []
            if self.qdisc:
                time.sleep(2 * SHAPER_WINDOW_S)  # the tbf queue drains onto the link
            after = snapshot(self.node, self.iface)
            out = self.node.read_text(self.h.log)[self.log_offset:]
        finally:
            self._clear_rate()
        self._result = self._collect(out, after, samples)
        return self._result

    def _collect(self, out: str, after: dict, samples: list) -> TrialResult:
        summary = parse_output(out)
        v0, v1 = self.before["view"], after["view"]
        dropped = v1.get("tx_dropped", 0) - v0.get("tx_dropped", 0)
        link = v1["tx_packets"] - v0["tx_packets"]
        gen = summary["tx_packets"]
        tx = max(link, gen) if gen is not None else link
        wall = self.t1 - self.t0
        loop = summary["loop_s"] or wall
        achieved = tx / loop if loop > 0 else 0.0
        steady = steady_state_of_counter(samples) if samples else None
        if steady is not None and steady.intervals < MIN_STEADY_INTERVALS:
            steady = None
        if steady is not None:
            achieved = steady.rate * (tx / link if link else 1.0)
        faults = []
        if self.stalled:
            faults.append(f"trafgen stalled: no frame left {self.node.name}:{self.iface} for {STALL_S:g} s "
                          f"(or none within {STARTUP_S:g} s of the start; link down or peer backed up?)")
        if summary["tx_packets"] is None:
            tail = " | ".join(l.strip() for l in out.strip().splitlines()[-3:])
            faults.append(f"trafgen printed no summary (did it fail? log: {tail or 'empty'})")
        return TrialResult.judged(
            self.spec, "trafgen", self.c.tunables, self.c.profile, tx_packets=tx, achieved_pps=achieved,
            duration_s=loop, where=f"{self.node.name}:{self.iface}", faults=faults,
            wall_s=wall, tx_link_packets=link, peer_dropped=tx - link, tx_dropped=dropped,
            trafgen_tx_packets=summary["tx_packets"], cpus=self.cpus, cycle=self.c.cycle,
            frame_len=len(self.c.frames[0]), frame_len_fcs=len(self.c.frames[0]) + FCS,
            trafgen_version=trafgen_version(), iface=self.iface, shaper="tbf" if self.rate > 0 else None,
            rate_method="steady tx counter" if steady is not None else "tx / trafgen loop time",
            steady_intervals=steady.intervals if steady else None)


def start(testbed, profile, tunables: dict, spec: TrialSpec, cpus: int | None = None,
          iface: str | None = None) -> TrafgenRun:
    """The contract's start: the profile compiled with the filled tunables, sent by trafgen with
    traffic.trafgen.cpus sending processes (or cpus)."""
    if cpus is None:
        cpus = testbed.cfg.section("traffic")["trafgen"]["cpus"]
    c = compile_frames(profile, tunables, port_for(testbed.cfg))
    check_local("trafgen", c, spec)
    return TrafgenRun(testbed, c, spec, cpus=cpus, iface=iface).start()


def plan(cfg, profile, tunables: dict, spec: TrialSpec) -> dict:
    return frames_plan("trafgen", profile, tunables, spec, port_for(cfg))


def trafgen_binary() -> str:
    """The trafgen program a process of ours runs (its /proc/PID/exe), for finding leftovers."""
    return shutil.which("trafgen") or "/usr/sbin/trafgen"


def leftover(testbed) -> list[str]:
    """What a killed harness left of trafgen on the loadgen node: its process, and the tbf qdisc that
    paced it (which would pace every later trial of any generator on the port)."""
    node = testbed.node_for_role("loadgen")
    iface = node.ncfg.iface().name
    out = stop_leftover(node, TAG, trafgen_binary())
    if node.running(TAG):  # a run of this harness process is under way: its qdisc is its own
        return out
    q = node.run(["tc", "qdisc", "show", "dev", iface, "root"], check=False).stdout
    if q.startswith("qdisc tbf "):
        node.run(["tc", "qdisc", "del", "dev", iface, "root"], check=False)
        out.append(f"trafgen's tbf qdisc on {node.name}:{iface}")
        logger.warning("%s: removed a leftover generator's qdisc: %s", node.name, q.strip())
    return out


GENERATOR = Generator("trafgen", start, plan, counts=True, leftover=leftover)


class TxSampler:
    """Samples an interface's tx_packets from /proc/<pid>/net/dev (pid: a process inside the
    namespace) every SAMPLE_S until the process ends or stop() is called."""

    def __init__(self, pid: int, iface: str):
        self.path, self.iface = f"/proc/{pid}/net/dev", iface
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def read(self) -> int | None:
        return read_proc_net_dev(self.path, self.iface, "tx_packets")

    def _loop(self) -> None:
        while not self._stop.is_set():
            v = self.read()
            if v is None:
                return
            self.samples.append((time.monotonic(), v))
            self._stop.wait(SAMPLE_S)

    def first_move(self) -> float | None:
        """Time of the first sample at which the counter had moved (None: not yet)."""
        smp = self.samples
        if not smp:
            return None
        v0 = smp[0][1]
        return next((t for t, v in smp if v != v0), None)

    def idle_s(self) -> float:
        """Seconds since the counter last moved (since the first sample if it never did)."""
        smp = self.samples
        if not smp:
            return 0.0
        last_t, last_v = smp[-1]
        t_moved = smp[0][0]
        for t, v in reversed(smp):
            if v != last_v:
                break
            t_moved = t
        return last_t - t_moved

    def stop(self) -> list[tuple[float, int]]:
        self._stop.set()
        self._t.join(timeout=2)
        return self.samples

