"""The generator contract: what a trial asks for (TrialSpec, its checks and its deadline), what
every generator answers (TrialResult, judged by the one validity rule `judge`), and the entry a
generator registers (Generator).

    spec = TrialSpec.of(50_000, duration_s=2)          # refused with a clear TrafficError if malformed
    spec.count, spec.deadline_s                         # 100000 frames, 4.5 s
    res = TrialResult.judged(spec, "xdpgen", tunables, profile, tx_packets=..., achieved_pps=...,
                             duration_s=..., where="fips4:eth0", faults=[...], **generator_keys)
    res["valid"], res["reason"], res.failed             # a dict: JSON as it is

A generator module (trafgen.py, xdpgen.py, trex.py) defines GENERATOR = Generator(name, start,
plan, counts): start(testbed, profile, tunables, spec, **opts) returns a started run whose wait()
and stop() return its TrialResult (stop() idempotent); plan(cfg, profile, tunables, spec) says
what the trial would do without sending (`traffic run --dry-run`). traffic/__init__.py holds the
registry.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

from ..errors import TrafficError

# paper §5: the offered load is verified with counters; a trial reaches >= 99 % of its rate
MIN_RATE_RATIO = 0.99
# the longest a trial may take, from its first frame: its expected time x 1.25 + 2 s; past it the
# harness stops the generator and the trial is judged on what was sent (too slow: invalid)
DEADLINE_FACTOR = 1.25
DEADLINE_SLACK_S = 2.0


def _number(v) -> float | None:
    """v as a finite float (bools refused), else None."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


@dataclass(frozen=True)
class TrialSpec:
    """One trial: the rate (0: as fast as the generator can), a duration or a count of frames,
    and the deadline by which it must be over. Build it with TrialSpec.of (the checks)."""
    rate_pps: float
    duration_s: float | None
    count: int | None           # frames; None: for the duration, or until stopped
    deadline_s: float | None    # from the first frame; None: none (the generator's own stall rule)

    @classmethod
    def of(cls, rate_pps, duration_s=None, count=None, *, counts: bool = True,
           blocking: bool = False) -> "TrialSpec":
        """The checked spec. counts=True (a local generator): a rate with a duration is sent as
        count = ceil(rate x duration) frames; counts=False (TRex sends for a duration): a count is
        sent as duration = count / rate. blocking: run to completion, so a duration or a count is
        needed (a background trial runs until stopped)."""
        rate = _number(rate_pps)
        if rate is None or rate < 0:
            raise TrafficError(f"Failed to start traffic: rate {rate_pps!r} pps must be a number >= 0 "
                               "(0: as fast as possible)")
        if duration_s is not None and not ((_number(duration_s) or 0) > 0):
            raise TrafficError(f"Failed to start traffic: duration {duration_s!r} s must be a number > 0")
        if count is not None and (_number(count) is None or _number(count) != int(_number(count))
                                  or _number(count) <= 0):
            raise TrafficError(f"Failed to start traffic: count {count!r} must be a positive integer")
        if duration_s is not None and count is not None:
            raise TrafficError("Failed to start traffic: give a duration or a count, not both")
        if blocking and duration_s is None and count is None:
            raise TrafficError("Failed to run traffic: give a duration or a count")
        duration = _number(duration_s) if duration_s is not None else None
        n = int(_number(count)) if count is not None else None
        if counts:
            if n is None and duration is not None and rate > 0:
                n = math.ceil(rate * duration)
        elif n is not None:
            if rate <= 0:
                raise TrafficError("Failed to run traffic: a count needs a rate with this generator, which "
                                   "sends for a duration (count / rate)")
            duration, n = n / rate, None
        expected = n / rate if (n is not None and rate > 0) else duration
        deadline = expected * DEADLINE_FACTOR + DEADLINE_SLACK_S if expected is not None else None
        return cls(rate, duration, n, deadline)

    def to_dict(self) -> dict:
        return asdict(self)


def judge(spec: TrialSpec, *, tx_packets: int, achieved_pps: float, where: str, queue_full: int = 0,
          queue_full_max_pct: float = 0.0, faults: list[str] | tuple = ()) -> dict[str, str]:
    """The one validity rule. Returns {check: reason} of the checks a trial failed, in this order
    (empty: valid):
      fault  what the generator itself reported (stalled, failed, could not build frames)
      sent   no frame left
      rate   a rate was requested and frames left, but fewer than MIN_RATE_RATIO of it
      count  a count was asked for and fewer frames left
      queue  the generator's queue was full more often than queue_full_max_pct % of the frames it
             sent (TRex's queue_full: counted once per retry while the NIC's ring is full, so it
             is routine at "100%"; TRex's NDR bench allows 2 % of opackets, config
             traffic.trex.queue_full_max_pct; the local generators report 0)"""
    out: dict[str, str] = {}
    if faults:
        out["fault"] = "; ".join(faults)
    if not tx_packets:
        out["sent"] = f"no frames left {where}"
    elif spec.rate_pps > 0 and achieved_pps < MIN_RATE_RATIO * spec.rate_pps:
        out["rate"] = (f"achieved {achieved_pps:.0f} pps < {MIN_RATE_RATIO * 100:g} % of requested "
                       f"{spec.rate_pps:.0f} pps")
    if spec.count is not None and tx_packets < spec.count:
        out["count"] = f"only {tx_packets} of {spec.count} frames were sent"
    if queue_full and queue_full * 100 > queue_full_max_pct * tx_packets:
        pct = f"{queue_full * 100 / tx_packets:.3g} % of the {tx_packets}" if tx_packets else "with no"
        out["queue"] = (f"queue full: {where} reported queue_full {queue_full}, {pct} frames sent, above the "
                        f"{queue_full_max_pct:g} % allowed (traffic.trex.queue_full_max_pct)")
    return out


class TrialResult(dict):
    """A trial's result: a plain dict (JSON as it is, records keep it whole), with these keys
    from every generator:
      generator, profile, tunables (the filled tunables it ran with), spec (TrialSpec.to_dict:
      rate_pps, duration_s, count, deadline_s), requested_pps, achieved_pps, tx_packets,
      duration_s (the measured send time), queue_full, tx_link_packets, tx_dropped,
      peer_dropped (None where the generator cannot tell), valid, reason ("; "-joined),
      failed (the judge's check names: fault, sent, rate, count, queue)
    plus the generator's own keys."""

    COMMON = ("generator", "profile", "tunables", "spec", "requested_pps", "achieved_pps", "tx_packets",
              "duration_s", "queue_full", "tx_link_packets", "tx_dropped", "peer_dropped", "valid", "reason",
              "failed")

    @classmethod
    def judged(cls, spec: TrialSpec, generator: str, tunables: dict, profile: str, *, tx_packets: int,
               achieved_pps: float, duration_s: float, where: str, queue_full: int = 0,
               queue_full_max_pct: float = 0.0, faults: list[str] | tuple = (), **extra) -> "TrialResult":
        verdict = judge(spec, tx_packets=tx_packets, achieved_pps=achieved_pps, where=where,
                        queue_full=queue_full, queue_full_max_pct=queue_full_max_pct, faults=faults)
        base = {"requested_pps": spec.rate_pps, "achieved_pps": achieved_pps, "tx_packets": tx_packets,
                "valid": not verdict, "reason": "; ".join(verdict.values()), "failed": list(verdict),
                "generator": generator, "duration_s": duration_s, "queue_full": queue_full > 0,
                "tx_link_packets": None, "tx_dropped": None, "peer_dropped": None,
                "profile": str(profile), "tunables": dict(tunables), "spec": spec.to_dict()}
        return cls({**base, **extra})

    @property
    def failed(self) -> list[str]:
        return list(self.get("failed") or [])


@dataclass(frozen=True)
class Generator:
    """A registered generator: its name (config traffic.generator), how it starts a trial, how it
    plans one (the dry run), what `testbed check` asks of it, and whether it sends a rate x duration trial as an exact count of
    frames (counts=True, the local generators) or for the duration (TRex)."""
    name: str
    start: Callable   # (testbed, profile, tunables, spec: TrialSpec, **opts) -> started run
    plan: Callable    # (cfg, profile, tunables, spec: TrialSpec) -> dict, nothing sent
    counts: bool = True
    #: (testbed) -> [(description, ok, detail)]: whether it can send on this node and how, asked
    #: without sending (xdpgen: the kernel's answer on live frames, the driver chosen and why)
    check: Callable | None = None
    #: (testbed) -> how it sends there, for every trial's metadata and the report's header (xdpgen:
    #: driver, driver_reason, live_frames) and pages_per_frame: the page allocations its frames cost
    #: by design per frame sent (xdpgen's loop clones each frame it sends into a new page; live
    #: frames and TRex's DPDK pools recycle theirs), which the machine rule's page-allocator figure
    #: does not count against the machine
    describe: Callable | None = None
    #: (testbed) -> what a harness killed mid-trial left of it, stopped or removed now, one line each
    #: (xenobench.traffic.leftover; Testbed.restore_state calls every generator's)
    leftover: Callable | None = None
