"""Local executor from XDP: a compiled profile sent by loadgen/build/xdpgen from the loadgen node
(loadgen/README.md), with live frames where the kernel allows them and an XDP loop where it refuses
them (traffic.xdpgen.driver; probe() asks the kernel). The same interface and result keys as
trafgen.py's TrafgenRun.

    run = XdpgenRun(testbed, compiled, TrialSpec.of(1e6, duration_s=2), cpu=0).start()
    res = run.wait()        # or run.stop() at any time; both return the TrialResult (idempotent)

What is sent: the compiled cycle written as a pcap (content-addressed in the state directory),
frame for frame and in order, repeated; xdpgen turns each live frame into the next frame of the
cycle, so the wire carries exactly what `xenobench traffic compile ... --out x.pcap` writes.

Duration and count: the contract's TrialSpec (trial.py): with a rate and a duration the trial is
count = rate x duration frames (ceil), cut off at the spec's deadline if the rate cannot be
reached; at the maximum rate (0) xdpgen stops itself after the duration.

Accounting: tx_packets = frames xdpgen's program handed to the device (its own counter, exact);
tx_link_packets = the frames the device took (veth: `ethtool -S` tx_queue_N_xdp_xmit, the peer's
ring), peer_dropped = the difference (the peer's ring full or its NAPI off: loss at the receiving
end, still offered load, as trafgen's peer_dropped), tx_dropped = tx_queue_N_xdp_xmit_errors.

Achieved rate: xdpgen samples its own frame counter every SAMPLE_MS; the project's steady-state
rule (xenobench.steady) picks the steady range and its span_rate (the mean rate over it) is the
achieved rate; with fewer than MIN_STEADY_INTERVALS sampled intervals it is xdpgen's own frames /
time from the first to the last frame. Validity: the contract's one rule (trial.judge), with
xdpgen's own faults (no result, frames it could not build). queue_full is always False: xdpgen
has no queue that can overflow unseen (frames the device refused are counted in
tx_dropped/peer_dropped).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

from .. import REPO_ROOT
from ..errors import GeneratorRefused
from ..steady import Steady, steady_state_of_counter
from .leftover import disown, own, stop_leftover
from .profiles import FCS, Compiled, TrafficError, check_local, compile_frames, frames_plan, port_for, write_pcap
from .trial import Generator, TrialResult, TrialSpec, _number

logger = logging.getLogger(__name__)

TAG = "xdpgen"
BINARY = REPO_ROOT / "loadgen" / "build" / "xdpgen"
SAMPLE_MS = 10              # xdpgen's frame-counter sampling period
MIN_STEADY_INTERVALS = 10   # sampled intervals needed for the steady-state rate
STARTUP_S = 15.0            # from start to "xdpgen: sending" (BPF load, templates, one RCU sync)
READY_LINE = "xdpgen: sending"


def leftover(testbed) -> list[str]:
    """What a killed harness left of xdpgen on the loadgen node: its process (the loop's namespace,
    pair and link die with it)."""
    return stop_leftover(testbed.node_for_role("loadgen"), TAG, BINARY)


#: xdpgen's --driver values (loadgen/xdpgen.c driver_names; config traffic.xdpgen.driver)
DRIVERS = ("auto", "live", "loop")


def probe(node, driver: str = "auto", binary: Path = BINARY) -> dict:
    """What xdpgen's --probe answers on the node, sending nothing: whether the kernel allows XDP
    live frames, the driver `driver` picks there and why, and whether it can send ("usable"). A
    probe that could not run raises TrafficError with xdpgen's own line."""
    if node.is_local and not Path(binary).is_file():
        raise TrafficError(f"Failed to probe xdpgen: {binary} does not exist (build it: `make build`)")
    r = node.run([str(binary), "--probe", "--driver", driver], check=False, timeout=30)
    res = parse_result(r.stdout)
    if res is None:
        raise TrafficError(f"Failed to probe xdpgen on {node.name}: "
                           f"{failure(r.stderr) or r.stderr.strip()[-300:] or f'exit status {r.returncode}'}")
    res["failure"] = failure(r.stderr) if not res.get("usable") else None
    return res


MAX_FRAMES = 4194304        # loadgen/xdpgen_common.h XG_MAX_FRAMES: frames in one cycle
MAX_FRAME_LEN = 3000        # XG_MAX_FRAME_LEN: bytes of a live frame (a page minus XDP's own)


def check_frames(c: Compiled) -> None:
    """What xdpgen cannot send, refused before it starts, naming the numbers: one frame length
    per cycle (its live frames are templates over frame 0), at most MAX_FRAME_LEN bytes, at most
    MAX_FRAMES frames."""
    lens = sorted({len(f) for f in c.frames})
    if len(lens) > 1:
        raise TrafficError(f"Failed to start xdpgen: profile {c.profile.name}'s cycle has frames of {len(lens)} "
                           f"lengths ({lens[0]}..{lens[-1]} B); xdpgen sends one length per cycle "
                           "(send it with trafgen: traffic.generator: trafgen)")
    if lens[0] > MAX_FRAME_LEN:
        raise TrafficError(f"Failed to start xdpgen: profile {c.profile.name}'s frames are {lens[0]} B; xdpgen "
                           f"sends at most {MAX_FRAME_LEN} B (send it with trafgen: traffic.generator: trafgen)")
    if c.cycle > MAX_FRAMES:
        raise TrafficError(f"Failed to start xdpgen: profile {c.profile.name}'s cycle is {c.cycle} frames; "
                           f"xdpgen holds at most {MAX_FRAMES}")


def write_frames(testbed, c: Compiled) -> Path:
    """The compiled cycle as a pcap in the state directory (content-addressed)."""
    h = hashlib.sha256(b"".join(len(f).to_bytes(4, "big") + f for f in c.frames)).hexdigest()[:16]
    d = testbed.cfg.state_dir / "traffic"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{c.profile.stem}-{h}.pcap"
    if not p.exists():
        tmp = p.with_suffix(".tmp")
        try:
            write_pcap(c.frames, tmp)
            tmp.replace(p)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
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


#: xdpgen's failures at start that no attempt changes (the kernel's answer, the device, the object)
REFUSED_AT_START = ("Failed to run XDP live frames", "Failed to load BPF program", "Failed to open BPF skeleton",
                    "Failed to set up the XDP loop", "Failed to find interface")


#: the fix of live frames a kernel refuses
DRIVER_FIX = "traffic.xdpgen.driver: auto (or loop)"


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


def _integer(v) -> int | None:
    f = _number(v)
    return int(f) if f is not None and f == int(f) else None


class XdpgenRun:
    """One xdpgen trial on the loadgen node: start() returns once frames are about to flow (or
    raises TrafficError with xdpgen's own message); stop()/wait() → the result dict."""

    def __init__(self, testbed, compiled: Compiled, spec: TrialSpec, cpu: int | None = None,
                 iface: str | None = None, bucket_ms: float | None = None, binary: str | Path | None = None,
                 driver: str | None = None, loop_frames: int | None = None):
        if driver is not None and driver not in DRIVERS:
            raise TrafficError(f"Failed to start xdpgen: driver {driver!r} is not one of {', '.join(DRIVERS)}")
        if cpu is not None and (_integer(cpu) is None or _integer(cpu) < 0):
            raise TrafficError(f"Failed to start xdpgen: cpu {cpu!r} must be a CPU number >= 0")
        if bucket_ms is not None and not ((_number(bucket_ms) or 0) > 0):
            raise TrafficError(f"Failed to start xdpgen: bucket_ms {bucket_ms!r} must be a number > 0")
        self.tb = testbed
        self.c = compiled
        self.spec = spec
        self.rate = spec.rate_pps
        self.duration = spec.duration_s
        self.count = spec.count
        self.deadline_s = spec.deadline_s  # from the first frame
        self.cpu = _integer(cpu) if cpu is not None else None
        self.bucket_ms = _number(bucket_ms) if bucket_ms is not None else None
        self.binary = Path(binary) if binary else BINARY
        self.driver = driver
        self.loop_frames = _integer(loop_frames) if loop_frames is not None else None
        self.node = testbed.node_for_role("loadgen")
        self.iface = iface or self.node.ncfg.iface().name
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
        if self.driver is not None:
            a += ["--driver", self.driver]
        if self.loop_frames is not None:
            a += ["--loop-frames", str(self.loop_frames)]
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
        stop_leftover(self.node, TAG, self.binary)  # a killed harness's open-ended run holds the tag
        self.h = self.node.start(TAG, self.argv(pcap), log=log, ready=0.0)
        own(self.node, TAG, self.h.pid)
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
                where = f"xdpgen on {self.node.name}:{self.iface}"
                if msg.startswith(REFUSED_AT_START[0]):
                    raise GeneratorRefused(f"{msg} ({where}); fix: {DRIVER_FIX} in {self.tb.cfg.path}")
                raise (GeneratorRefused if msg.startswith(REFUSED_AT_START) else TrafficError)(f"{msg} ({where})")
            if time.monotonic() - self.t0 > STARTUP_S:
                self.node.stop(TAG)
                raise TrafficError(f"Failed to start xdpgen on {self.node.name}:{self.iface}: not sending "
                                   f"after {STARTUP_S:g} s (log {self.h.log})")
            time.sleep(0.01)

    def actor(self) -> tuple:
        """xdpgen as an actor of the trial (TrafficHandle.actor): its process; it ends by itself,
        done when it printed its result (killed, it prints none)."""
        from ..actors import tagged
        return ("generator_xdpgen", "generator xdpgen", tagged(self.node, TAG),
                lambda: parse_result(self._out()) is not None)

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
        if self.h is not None:
            disown(self.node, TAG, self.h.pid)
        self.t1 = time.monotonic()
        out = self._out()
        self._result = self._collect(out)
        return self._result

    def _collect(self, out: str) -> TrialResult:
        r = parse_result(out) or {}
        tx = int(r.get("frames", 0))
        xmit, xmit_err = r.get("xdp_xmit"), r.get("xdp_xmit_errors")
        achieved, steady = achieved_rate(r)
        samples = r.get("samples") or []
        faults = []
        if not r:
            faults.append(f"xdpgen printed no result ({failure(out) or 'log: ' + (out.strip()[-300:] or 'empty')})")
        bad = int(r.get("no_template", 0)) + int(r.get("store_failed", 0))
        if bad:
            faults.append(f"xdpgen could not build {bad} frames (template lookup or store failed)")
        frame_len = len(self.c.frames[0])
        return TrialResult.judged(
            self.spec, "xdpgen", self.c.tunables, self.c.profile, tx_packets=tx, achieved_pps=achieved,
            duration_s=float(r.get("elapsed_s") or 0.0), where=f"{self.node.name}:{self.iface}", faults=faults,
            wall_s=self.t1 - self.t0, tx_link_packets=xmit, peer_dropped=(tx - xmit) if xmit is not None else None,
            tx_dropped=xmit_err, cpus=1, cpu=r.get("cpu"), pinned=r.get("pinned"),
            cycle=self.c.cycle, frame_len=frame_len, frame_len_fcs=frame_len + FCS,
            xdpgen_version=f"xdpgen {r['version']}" if r.get("version") else None, iface=self.iface,
            shaper="xdpgen token bucket" if self.rate > 0 else None,
            rate_method="steady frame counter" if steady is not None else "frames / xdpgen send time",
            steady_intervals=steady.intervals if steady else None,
            steady_s=samples[steady.last][0] - samples[steady.first][0] if steady else None,
            sender_cpu_s=r.get("sender_cpu_s"), idle_runs=r.get("idle_runs"),
            driver=r.get("driver"), driver_reason=r.get("driver_reason"), live_frames=r.get("live_frames"),
            loop_seeded=r.get("loop_seeded"),
            tokens_lost=r.get("tokens_lost"), stopped_by=r.get("stopped_by"),
            bucket=r.get("bucket"), span_bytes=r.get("span_bytes"))


def start(testbed, profile, tunables: dict, spec: TrialSpec, cpu: int | None = None, iface: str | None = None,
          bucket_ms: float | None = None) -> XdpgenRun:
    """The contract's start: the profile compiled with the filled tunables for the testbed's port
    (its MACs where the profile leaves scapy's, as TRex fills them), sent by xdpgen with the
    config's traffic.xdpgen settings (cpu, bucket_ms, driver, loop_frames); cpu and bucket_ms
    overridable here."""
    xc = testbed.cfg.section("traffic").get("xdpgen") or {}
    c = compile_frames(profile, tunables, port_for(testbed.cfg))
    check_local("xdpgen", c, spec)
    check_frames(c)
    return XdpgenRun(testbed, c, spec,
                     cpu=xc.get("cpu") if cpu is None else cpu, iface=iface,
                     bucket_ms=xc.get("bucket_ms") if bucket_ms is None else bucket_ms,
                     driver=xc.get("driver"), loop_frames=xc.get("loop_frames")).start()


def plan(cfg, profile, tunables: dict, spec: TrialSpec) -> dict:
    return frames_plan("xdpgen", profile, tunables, spec, port_for(cfg))


#: page allocations per frame sent, by driver: the loop's devmap broadcast clones every frame it
#: sends into a new page (kernel/bpf/devmap.c, xdpf_clone); live frames come from the test run's
#: page pool and are recycled. tests/test_xdpgen.py measures both into an XDP sink, and
#: scripts/bench_generator.py prints them
PAGES_PER_FRAME = {"live": 0.0, "loop": 1.0}

#: (node, driver asked for) -> the probe's answer, once per harness process
_PROBED: dict[tuple[str, str], dict] = {}


def describe(testbed) -> dict:
    """How xdpgen sends on the loadgen node with the config's traffic.xdpgen.driver (the kernel asked
    once per harness process): driver, driver_reason, live_frames, pages_per_frame."""
    node = testbed.node_for_role("loadgen")
    want = (testbed.cfg.section("traffic").get("xdpgen") or {}).get("driver", "auto")
    key = (f"{testbed.cfg.prefix}{node.name}", want)
    if key not in _PROBED:
        _PROBED[key] = probe(node, want)
    p = _PROBED[key]
    return {"driver": p["driver"], "driver_reason": p.get("driver_reason"), "live_frames": p.get("live_frames"),
            "pages_per_frame": PAGES_PER_FRAME[p["driver"]]}


def check(testbed) -> list[tuple[str, bool, str]]:
    """`testbed check`'s row: the driver xdpgen takes on the loadgen node (traffic.xdpgen.driver)
    and why; a driver the kernel refuses fails the row with the fix."""
    node = testbed.node_for_role("loadgen")
    want = (testbed.cfg.section("traffic").get("xdpgen") or {}).get("driver", "auto")
    try:
        p = probe(node, want)
    except TrafficError as e:
        return [(f"xdpgen can send on {node.name}", False, str(e))]
    desc = f"xdpgen on {node.name} sends with driver {p.get('driver')} (live frames: {p.get('live_frames')})"
    if p.get("usable"):
        return [(desc, True, p.get("driver_reason") or "")]
    return [(desc, False, f"{p.get('failure') or 'refused'}; fix: {DRIVER_FIX} in {testbed.cfg.path}")]


GENERATOR = Generator("xdpgen", start, plan, counts=True, check=check, describe=describe, leftover=leftover)
