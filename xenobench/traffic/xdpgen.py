"""Local executor on XDP live frames: a compiled profile sent by loadgen/build/xdpgen from the
loadgen node (loadgen/README.md). The same interface and result keys as trafgen.py's TrafgenRun.

    run = XdpgenRun(testbed, compiled, rate_pps=1e6, duration_s=2, cpu=0).start()
    res = run.wait()        # or run.stop() at any time; both return the result dict (idempotent)

What is sent: the compiled cycle written as a pcap (content-addressed in the state directory),
frame for frame and in order, repeated; xdpgen turns each live frame into the next frame of the
cycle, so the wire carries exactly what `xenobench traffic compile ... --out x.pcap` writes.

Duration and count, as for trafgen: with a rate and a duration the trial is count = rate x
duration frames (ceil), cut off at a deadline (duration x 1.25 + 1 s) if the rate cannot be
reached; at the maximum rate (0) xdpgen stops itself after the duration.

Accounting: tx_packets = frames xdpgen's program handed to the device (its own counter, exact);
tx_link_packets = the frames the device took (veth: `ethtool -S` tx_queue_N_xdp_xmit, the peer's
ring), peer_dropped = the difference (the peer's ring full or its NAPI off: loss at the receiving
end, still offered load, as trafgen's peer_dropped), tx_dropped = tx_queue_N_xdp_xmit_errors.

Achieved rate: xdpgen samples its own frame counter every SAMPLE_MS; the project's steady-state
rule (xenobench.steady) picks the steady range and its span_rate (the mean rate over it) is the
achieved rate; with fewer than MIN_STEADY_INTERVALS sampled intervals it is xdpgen's own frames /
time from the first to the last frame. A trial is invalid when the achieved rate is below 99 % of
the requested rate, when fewer frames were sent than asked for, when xdpgen could not build a
frame, or when it failed. queue_full is always False: xdpgen has no queue that can overflow
unseen (frames the device refused are counted in tx_dropped/peer_dropped).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import subprocess
import time
from pathlib import Path

from .. import REPO_ROOT
from ..steady import Steady, steady_state_of_counter
from .profiles import FCS, Compiled, TrafficError, write_pcap

logger = logging.getLogger(__name__)

TAG = "xdpgen"
BINARY = REPO_ROOT / "loadgen" / "build" / "xdpgen"
MIN_RATIO = 0.99
SAMPLE_MS = 10              # xdpgen's frame-counter sampling period
MIN_STEADY_INTERVALS = 10   # sampled intervals needed for the steady-state rate
STARTUP_S = 15.0            # from start to "xdpgen: sending" (BPF load, templates, one RCU sync)
READY_LINE = "xdpgen: sending"


def write_frames(testbed, c: Compiled) -> Path:
    """The compiled cycle as a pcap in the state directory (content-addressed)."""
    h = hashlib.sha256(b"".join(len(f).to_bytes(4, "big") + f for f in c.frames)).hexdigest()[:16]
    d = testbed.cfg.state_dir / "traffic"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{c.profile.stem}-{h}.pcap"
    if not p.exists():
        tmp = p.with_suffix(".tmp")
        write_pcap(c.frames, tmp)
        tmp.replace(p)
    return p


def parse_result(text: str) -> dict | None:
    """xdpgen's JSON result: the last line of its output that parses as a JSON object."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def failure(text: str) -> str | None:
    """xdpgen's last "Failed to ..." message (without the "xdpgen: " prefix)."""
    for line in reversed(text.strip().splitlines()):
        if "Failed to " in line:
            return line[line.index("Failed to "):].strip()
    return None


def achieved_rate(r: dict) -> tuple[float, Steady | None]:
    """The achieved rate of an xdpgen result: span_rate of the steady range of its frame-counter
    samples, or (too few intervals) its own frames / time from the first to the last frame."""
    samples = r.get("samples") or []
    steady = steady_state_of_counter(samples) if len(samples) > 2 else None
    if steady is not None and steady.intervals >= MIN_STEADY_INTERVALS:
        return steady.span_rate, steady
    return float(r.get("achieved_pps") or 0.0), None


def _number(v) -> float | None:
    """v as a finite float (bools refused), else None."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _integer(v) -> int | None:
    f = _number(v)
    return int(f) if f is not None and f == int(f) else None


class XdpgenRun:
    """One xdpgen trial on the loadgen node: start() returns once frames are about to flow (or
    raises TrafficError with xdpgen's own message); stop()/wait() → the result dict."""

    def __init__(self, testbed, compiled: Compiled, rate_pps: float, duration_s: float | None = None,
                 count: int | None = None, cpu: int | None = None, iface: str | None = None,
                 bucket_ms: float | None = None, binary: str | Path | None = None):
        rate = _number(rate_pps)
        if rate is None or rate < 0:
            raise TrafficError(f"Failed to start xdpgen: rate {rate_pps!r} pps must be a number >= 0 "
                               "(0: as fast as possible)")
        if duration_s is not None and not ((_number(duration_s) or 0) > 0):
            raise TrafficError(f"Failed to start xdpgen: duration {duration_s!r} s must be a number > 0")
        if count is not None and (_integer(count) or 0) <= 0:
            raise TrafficError(f"Failed to start xdpgen: count {count!r} must be a positive integer")
        if duration_s is not None and count is not None:
            raise TrafficError("Failed to start xdpgen: give a duration or a count, not both")
        if cpu is not None and (_integer(cpu) is None or _integer(cpu) < 0):
            raise TrafficError(f"Failed to start xdpgen: cpu {cpu!r} must be a CPU number >= 0")
        if bucket_ms is not None and not ((_number(bucket_ms) or 0) > 0):
            raise TrafficError(f"Failed to start xdpgen: bucket_ms {bucket_ms!r} must be a number > 0")
        self.tb = testbed
        self.c = compiled
        self.rate = rate
        self.duration = _number(duration_s) if duration_s is not None else None
        self.cpu = _integer(cpu) if cpu is not None else None
        self.bucket_ms = _number(bucket_ms) if bucket_ms is not None else None
        self.binary = Path(binary) if binary else BINARY
        self.node = testbed.node_for_role("loadgen")
        self.iface = iface or self.node.ncfg.iface().name
        if count is None and self.duration is not None and self.rate > 0:
            count = math.ceil(self.rate * self.duration)
        self.count = _integer(count) if count is not None else None
        self.deadline_s = None  # from the first frame
        if self.count is not None and self.rate > 0:
            self.deadline_s = self.count / self.rate * 1.25 + (1.0 if self.duration is not None else 2.0)
        elif self.duration is not None:
            self.deadline_s = self.duration * 1.25 + 1.0
        self.h = None
        self.t0 = self.t1 = self.t_ready = None
        self._result = None

    def argv(self, pcap: str) -> list[str]:
        a = [str(self.binary), "--dev", self.iface, "--pcap", pcap, "--rate", repr(self.rate),
             "--sample-ms", str(SAMPLE_MS)]
        if self.count is not None:
            a += ["--count", str(self.count)]
        elif self.duration is not None:
            a += ["--duration", repr(float(self.duration))]
        if self.cpu is not None:
            a += ["--cpu", str(int(self.cpu))]
        if self.bucket_ms is not None:
            a += ["--bucket-ms", repr(float(self.bucket_ms))]
        return a

    def _out(self) -> str:
        return self.node.read_text(self.h.log)[self.log_offset:]

    def start(self) -> "XdpgenRun":
        if self.node.is_local and not self.binary.is_file():
            raise TrafficError(f"Failed to start xdpgen: {self.binary} does not exist "
                               "(build it: `make build` or `make -C loadgen`)")
        local = write_frames(self.tb, self.c)
        pcap = self.node.stage(local, f"traffic/{local.name}")
        log = self.node.log_path(TAG)
        self.log_offset = len(self.node.read_text(log))
        self.t0 = time.monotonic()
        self.h = self.node.start(TAG, self.argv(pcap), log=log, ready=0.0)
        # until the BPF program is loaded and the first test run is about to start
        while True:
            out = self._out()
            if READY_LINE in out:
                self.t_ready = time.monotonic()
                return self
            if not self.node.running(TAG):
                out = self._out()
                if READY_LINE in out:  # a very short trial: already done
                    self.t_ready = time.monotonic()
                    return self
                self.node.stop(TAG)
                msg = failure(out) or f"exited without a result (log {self.h.log}: {out.strip()[-300:] or 'empty'})"
                raise TrafficError(f"{msg} (xdpgen on {self.node.name}:{self.iface})")
            if time.monotonic() - self.t0 > STARTUP_S:
                self.node.stop(TAG)
                raise TrafficError(f"Failed to start xdpgen on {self.node.name}:{self.iface}: not sending "
                                   f"after {STARTUP_S:g} s (log {self.h.log})")
            time.sleep(0.01)

    def wait(self) -> dict:
        """Block until xdpgen ends (count sent, duration over) or the deadline, then collect."""
        if self._result is None:
            while self.node.running(TAG):
                if self.deadline_s is not None and time.monotonic() - self.t_ready >= self.deadline_s:
                    break
                time.sleep(0.02)
        return self.stop()

    def stop(self) -> dict:
        if self._result is not None:
            return self._result
        # SIGTERM: xdpgen ends its test run between two XDP batches and prints its result
        self.node.stop(TAG, timeout=5.0)
        self.t1 = time.monotonic()
        out = self._out()
        self._result = self._collect(out)
        return self._result

    def _collect(self, out: str) -> dict:
        r = parse_result(out) or {}
        tx = int(r.get("frames", 0))
        xmit, xmit_err = r.get("xdp_xmit"), r.get("xdp_xmit_errors")
        wall = self.t1 - self.t0
        elapsed = float(r.get("elapsed_s") or 0.0)
        achieved, steady = achieved_rate(r)
        samples = r.get("samples") or []
        reasons = []
        if not r:
            reasons.append(f"xdpgen printed no result ({failure(out) or 'log: ' + (out.strip()[-300:] or 'empty')})")
        elif tx == 0:
            reasons.append(f"no frames left {self.node.name}:{self.iface}")
        bad = int(r.get("no_template", 0)) + int(r.get("store_failed", 0))
        if bad:
            reasons.append(f"xdpgen could not build {bad} frames (template lookup or store failed)")
        if self.rate > 0 and r and achieved < MIN_RATIO * self.rate:
            reasons.append(f"achieved {achieved:.0f} pps < 99 % of requested {self.rate:.0f} pps")
        if self.count is not None and tx < self.count:
            reasons.append(f"only {tx} of {self.count} frames were sent")
        frame_len = len(self.c.frames[0])
        return {
            "requested_pps": self.rate, "achieved_pps": achieved, "tx_packets": tx,
            "valid": not reasons, "reason": "; ".join(reasons),
            "generator": "xdpgen", "duration_s": elapsed, "wall_s": wall, "queue_full": False,
            "tx_link_packets": xmit, "peer_dropped": (tx - xmit) if xmit is not None else None,
            "tx_dropped": xmit_err, "cpus": 1, "cpu": r.get("cpu"), "pinned": r.get("pinned"),
            "count": self.count, "cycle": self.c.cycle, "frame_len": frame_len, "frame_len_fcs": frame_len + FCS,
            "xdpgen_version": f"xdpgen {r['version']}" if r.get("version") else None,
            "profile": str(self.c.profile), "tunables": self.c.tunables, "iface": self.iface,
            "shaper": "xdpgen token bucket" if self.rate > 0 else None,
            "rate_method": "steady frame counter" if steady is not None else "frames / xdpgen send time",
            "steady_intervals": steady.intervals if steady else None,
            "steady_s": samples[steady.last][0] - samples[steady.first][0] if steady else None,
            "sender_cpu_s": r.get("sender_cpu_s"), "idle_runs": r.get("idle_runs"), "stopped_by": r.get("stopped_by"), "bucket": r.get("bucket"),
            "span_bytes": r.get("span_bytes"),
        }


def from_config(testbed, compiled: Compiled, rate_pps: float, duration_s=None, count=None, **opts) -> XdpgenRun:
    """An XdpgenRun with the config's traffic.xdpgen settings (cpu), overridable by opts."""
    xc = testbed.cfg.section("traffic").get("xdpgen") or {}
    return XdpgenRun(testbed, compiled, rate_pps, duration_s, count, cpu=opts.get("cpu", xc.get("cpu")),
                     iface=opts.get("iface"), bucket_ms=opts.get("bucket_ms", xc.get("bucket_ms")))



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
