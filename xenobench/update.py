"""Backend changes under load (issue 28 §1, DESIGN §4.9; experiments/update.yaml): what a runtime
change of an LB's backend set costs the traffic, measured on the harness clock (CLOCK_MONOTONIC).

(a) + (c), one cycle (change_cycle) under a steady background load (the udp_payload profile over
`flows` sources, so every class carries frames): backend B (the set's last) is removed — {…, B} →
{…} — and, `hold_s` later, added back. The LB answers each change (LoadBalancer.update: t_sent, the
command; t_done, its report seen). Where the frames arrive, the testbed records their times
(Testbed.arrival_recorder: on the namespace testbed the backends' XDP sink stamps each frame with
bpf_ktime_get_ns(), per backend MAC and time bucket of `bucket_ns`, read once after the cycle;
tests/test_switch_fastpath.py checks it is the clock of time.monotonic_ns()). From those:

- remove_control_s / add_control_s: command → the LB's report (and the LB's own `apply_s`);
- remove_last_frame_s: command → the last frame at the removed backend (exact);
- done_to_last_frame_s: the report → that last frame (negative: the backend was drained before
  the LB said it was done);
- add_first_frame_s: the add-back command → the first frame at the added backend (exact);
- after_done_frames: frames the removed backend received after the removal was reported done,
  counted in whole buckets (a lower bound; `after_done_frames_max` the upper one, the buckets
  around the report included);
- lost_frames / loss_pct: the generator's frames minus every backend's counter over the cycle.
Where the removed backend never drains (an LB whose connection table keeps flows on a removed
backend: Katran's LRU), the last frame and the first frame after the add-back are not measurable
(None, with `drained: false`); the frames after done are the finding.

Without a recorder (the thesis testbed: the backends are hosts whose NIC counts, nothing stamps
frames) B's rx counter (ethtool rx_packets) is read back to back (FastCounter) and the same
metrics are upper bounds at the resolution of one read (~10 ms over SSH); `timing` says which.

(d), a burst (change_burst): the same background, then for `duration_s` changes alternating
{…} and {…, B} at a requested rate (as fast as the LB answers when it is slower); the received rate
over the burst's window (arrival records, whole buckets) and the run's loss, against the same LB
with no changes (rate 0), same background and duration.

The experiment's procedure (backend_update, dispatched by experiments/update.yaml) runs the
point's LB through `cycles` cycles and a burst per rate of `change_rates` (0 first) per repetition.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from .errors import NodeError, XenobenchError
from .sampler import CounterReader

PROFILE = "udp_payload"


class FastCounter:
    """One node:iface rx counter sampled back to back in a thread: [(monotonic after the read, value)]."""

    def __init__(self, testbed, node: str, iface: str):
        self.reader = CounterReader(testbed.node(node), iface)
        self.samples: list[tuple[float, int]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            try:
                v = self.reader.read()
            except XenobenchError as e:
                self.error = str(e)
                return
            self.samples.append((time.monotonic(), v))

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=10)


def _first_after(samples, t):
    return next((i for i, (ts, _) in enumerate(samples) if ts >= t), None)


def removal_metrics(samples, t_sent: float, t_done: float, t_end: float) -> dict:
    """Last frame at the removed backend from its counter samples between the change and t_end."""
    win = [(ts, v) for ts, v in samples if ts <= t_end]
    i0 = _first_after(win, t_sent)
    if i0 is None or i0 == 0:
        raise XenobenchError("Failed to time the removal: no counter sample before and after it")
    plateau = win[-1][1]
    k = next(i for i in range(i0 - 1, len(win)) if win[i][1] == plateau)  # first sample at the plateau
    k = max(k, i0)
    idone = _first_after(win, t_done)
    return {"remove_last_frame_s": win[k][0] - t_sent, "remove_resolution_s": win[k][0] - win[k - 1][0],
            "after_done_frames": plateau - win[idone][1] if idone is not None else None,
            "after_done_first_sample_s": win[idone][0] - t_done if idone is not None else None,
            "frames_at_removed_after_send": plateau - win[i0 - 1][1]}


def addition_metrics(samples, t_sent: float) -> dict:
    i0 = _first_after(samples, t_sent)
    if i0 is None or i0 == 0:
        raise XenobenchError("Failed to time the addition: no counter sample before and after it")
    base = samples[i0 - 1][1]
    k = next((i for i in range(i0, len(samples)) if samples[i][1] > base), None)
    if k is None:
        return {"add_first_frame_s": None, "add_resolution_s": None}
    return {"add_first_frame_s": samples[k][0] - t_sent, "add_resolution_s": samples[k][0] - samples[k - 1][0]}


def write_sets(backends_file, out_dir: Path) -> tuple[Path, Path]:
    """The running file and the same without its last backend (same class_bits: an LB keeps its
    class mask), as JSON files in out_dir."""
    from .backends import load_backends
    bs = load_backends(backends_file)
    if len(bs.backends) < 2:
        raise XenobenchError(f"Failed to plan a backend change from {backends_file}: it needs two backends or more")
    full = {"class_bits": bs.class_bits,
            "backends": [{"name": b.name, "mac_address": b.mac} for b in bs.backends]}
    less = dict(full, backends=full["backends"][:-1])
    out_dir.mkdir(parents=True, exist_ok=True)
    a, b = out_dir / "full.json", out_dir / "less.json"
    a.write_text(json.dumps(full))
    b.write_text(json.dumps(less))
    return a, b


# --- from the sink's arrival records (exact times, harness clock) ----------------------------------
NS = 1_000_000_000


def arrival_removal(recs, mac: str, t_sent_ns: int, t_done_ns: int, t_next_ns: int, quiet_ns: int) -> dict:
    """Removal of the backend with MAC `mac` at t_sent (reported done at t_done), the next change
    at t_next; `recs` are the sink's (mac, bucket, first_ns, last_ns, packets) records. Drained:
    no frame at the backend within `quiet_ns` before t_next."""
    mine = [a for a in recs if a.mac == mac and a.first_ns < t_next_ns]
    drained = not any(a.last_ns >= t_next_ns - quiet_ns for a in mine)
    last = max((a.last_ns for a in mine), default=None)
    lo = sum(a.packets for a in mine if a.first_ns > t_done_ns and a.last_ns < t_next_ns)
    hi = sum(a.packets for a in mine if a.last_ns > t_done_ns)
    ok = drained and last is not None
    return {"drained": drained,
            "remove_last_frame_s": (last - t_sent_ns) / NS if ok else None,
            "done_to_last_frame_s": (last - t_done_ns) / NS if ok else None,
            "after_done_frames": lo, "after_done_frames_max": hi,
            "frames_at_removed_after_send": sum(a.packets for a in mine if a.first_ns >= t_sent_ns)}


def arrival_addition(recs, mac: str, t_sent_ns: int, drained: bool) -> dict:
    """The first frame at the added backend after the command (only where it had drained: a
    backend still receiving has no first frame to find)."""
    after = [a.first_ns for a in recs if a.mac == mac and a.first_ns >= t_sent_ns]
    if not drained or not after:
        return {"add_first_frame_s": None}
    return {"add_first_frame_s": (min(after) - t_sent_ns) / NS}


def window_frames(recs, t0_ns: int, bucket_ns: int, t_a_ns: int, t_b_ns: int) -> tuple[int, float]:
    """Frames at every backend in the whole buckets inside [t_a, t_b], and those buckets' seconds."""
    b_lo = -(-(t_a_ns - t0_ns) // bucket_ns)  # ceil
    b_hi = (t_b_ns - t0_ns) // bucket_ns
    if b_hi <= b_lo:
        return 0, 0.0
    return sum(a.packets for a in recs if b_lo <= a.bucket < b_hi), (b_hi - b_lo) * bucket_ns / NS


def longest_gap_s(recs, t_a_ns: int, t_b_ns: int) -> float | None:
    """The longest time without a frame at any backend between t_a and t_b (exact where the gap
    spans more than a bucket; within a bucket gaps are not seen): a stalled background (the
    machine's CPUs, not the LB) shows here and puts a "last frame" before its command."""
    by = {}
    for a in recs:
        f, l_ = by.get(a.bucket, (a.first_ns, a.last_ns))
        by[a.bucket] = (min(f, a.first_ns), max(l_, a.last_ns))
    spans = sorted(v for v in by.values() if v[1] >= t_a_ns and v[0] <= t_b_ns)
    if not spans:
        return None
    gaps = [b[0] - a[1] for a, b in zip(spans, spans[1:])]
    return max([0, *gaps]) / NS


def _ns(t: float) -> int:
    return int(round(t * NS))


class _Recording:
    """The testbed's arrival recorder for one traffic run, or (no recorder) the removed backend's
    counter sampled back to back; stopped on exit, also on error."""

    def __init__(self, testbed, bucket_ns: int, node: str | None):
        self.rec = testbed.arrival_recorder()
        self.bucket_ns = int(bucket_ns)
        self.fc = FastCounter(testbed, node, testbed.cfg.nodes[node].iface().name) if (
            self.rec is None and node) else None
        self.records, self.t0 = [], None

    @property
    def timing(self) -> str:
        return "arrivals" if self.rec is not None else "counters"

    def __enter__(self):
        if self.rec is not None:
            self.t0 = self.rec.start_arrivals(self.bucket_ns)
        elif self.fc is not None:
            self.fc.__enter__()
        return self

    def __exit__(self, *exc):
        if self.rec is not None:
            self.records = self.rec.stop_arrivals()
        elif self.fc is not None:
            self.fc.__exit__()
            if self.fc.error:
                raise NodeError(f"Failed to sample the removed backend's counter: {self.fc.error}")



def _stop_and_count(h, all_rx, rx0: int) -> tuple[dict, int, int]:
    """Stop the background, let the last frames drain, and count: (generator result, frames the
    backends received since rx0, frames the generator sent)."""
    gen = h.stop()
    time.sleep(0.3)
    return gen, all_rx.read_total() - rx0, int(gen.get("tx_packets") or 0)

def change_cycle(testbed, lb, full: Path, less: Path, *, load_pps: float, payload: int = 22, flows: int = 256,
                 settle_s: float = 0.5, hold_s: float = 1.0, bucket_ns: int = 1_000_000) -> dict:
    """One remove/add cycle of the last backend of `full` under load (module doc); the LB runs on
    `full` before and after."""
    from .backends import load_backends
    from .procedures import backend_ifaces, payload_tunables
    from .traffic import start_traffic
    from .sampler import RateSampler
    cfg = testbed.cfg
    gone = load_backends(full).backends[-1]
    all_rx = RateSampler(testbed, backend_ifaces(cfg))
    rx0 = all_rx.read_total()
    h = start_traffic(testbed, PROFILE, payload_tunables(payload, flows), load_pps)
    try:
        with _Recording(testbed, bucket_ns, gone.name) as r:
            time.sleep(settle_s)
            rm = lb.update(less)
            time.sleep(hold_s)
            add = lb.update(full)
            time.sleep(hold_s)
    finally:
        gen, rx, tx = _stop_and_count(h, all_rx, rx0)
    out = {"lb": lb.kind, "removed_backend": gone.name, "load_pps": load_pps, "timing": r.timing,
           "generator_valid": bool(gen.get("valid")), "generator_reason": gen.get("reason"),
           "tx_packets": tx, "rx_packets": rx, "lost_frames": tx - rx,
           "loss_pct": 100 * (tx - rx) / tx if tx else None}
    rm_c = {"control_s": rm["control_s"], "apply_s": rm["lb_report"].get("apply_s")}
    add_c = {"control_s": add["control_s"], "apply_s": add["lb_report"].get("apply_s")}
    if r.rec is not None:
        mac = gone.mac.lower()
        removal = arrival_removal(r.records, mac, _ns(rm["t_sent"]), _ns(rm["t_done"]), _ns(add["t_sent"]),
                                  _ns(hold_s / 2))
        addition = arrival_addition(r.records, mac, _ns(add["t_sent"]), removal["drained"])
        out.update(bucket_ns=r.bucket_ns, arrival_records=len(r.records),
                   # the background's longest pause around the removal (20 ms either side)
                   arrival_gap_s=longest_gap_s(r.records, _ns(rm["t_sent"]) - 20_000_000,
                                               _ns(rm["t_done"]) + 20_000_000))
    else:
        s = r.fc.samples
        gaps = [b[0] - a[0] for a, b in zip(s, s[1:])]
        removal = removal_metrics(s, rm["t_sent"], rm["t_done"], add["t_sent"])
        removal["done_to_last_frame_s"] = removal["remove_last_frame_s"] - rm["control_s"]
        addition = addition_metrics(s, add["t_sent"])
        out.update(samples=len(s), sample_gap_median_s=sorted(gaps)[len(gaps) // 2] if gaps else None)
    out["remove"] = {**rm_c, **removal}
    out["add"] = {**add_c, **addition}
    return out


def change_burst(testbed, lb, full: Path, less: Path, *, rate_per_s: float, duration_s: float, load_pps: float,
                 payload: int = 22, flows: int = 256, settle_s: float = 0.5, bucket_ns: int = 1_000_000) -> dict:
    """(d): changes alternating `less` and `full` at `rate_per_s` (0: none) for `duration_s` under the
    background; the received rate over that window and the run's loss. The LB is back on `full`
    after it (a last change outside the window where the count was odd)."""
    from .procedures import backend_ifaces, payload_tunables
    from .traffic import start_traffic
    from .sampler import RateSampler
    all_rx = RateSampler(testbed, backend_ifaces(testbed.cfg))
    rx0 = all_rx.read_total()
    h = start_traffic(testbed, PROFILE, payload_tunables(payload, flows), load_pps)
    n, control = 0, []
    try:
        with _Recording(testbed, bucket_ns, None) as r:
            time.sleep(settle_s)
            c_a = all_rx.read_total()
            t_a = time.monotonic()
            nxt = t_a
            while rate_per_s > 0 and time.monotonic() < t_a + duration_s:
                time.sleep(max(0.0, nxt - time.monotonic()))
                u = lb.update(less if n % 2 == 0 else full)
                control.append(u["control_s"])
                n += 1
                nxt = max(nxt + 1 / rate_per_s, time.monotonic())
            time.sleep(max(0.0, t_a + duration_s - time.monotonic()))
            t_b = time.monotonic()
            c_b = all_rx.read_total()
            if n % 2:
                lb.update(full)
    finally:
        gen, rx, tx = _stop_and_count(h, all_rx, rx0)
    win = t_b - t_a
    if r.rec is not None:
        frames, secs = window_frames(r.records, r.t0, r.bucket_ns, _ns(t_a), _ns(t_b))
    else:  # the backends' counters read at the window's ends
        frames, secs = c_b - c_a, win
    return {"lb": lb.kind, "changes_per_s": rate_per_s, "changes": n, "window_s": win,
            "achieved_changes_per_s": n / win if win > 0 else None,
            "control_median_s": sorted(control)[len(control) // 2] if control else None,
            "timing": r.timing, "window_frames": frames, "window_frames_s": secs,
            "rx_pps": frames / secs if secs > 0 else None, "load_pps": load_pps,
            "generator_achieved_pps": gen.get("achieved_pps"), "generator_valid": bool(gen.get("valid")),
            "generator_reason": gen.get("reason"), "tx_packets": tx, "rx_packets": rx, "lost_frames": tx - rx,
            "loss_pct": 100 * (tx - rx) / tx if tx else None}


# --- the experiment's procedure (experiments/update.yaml) ------------------------------------------
def backend_update(ctx, lb=None):
    """`cycles` change cycles ((a), (c)), then a burst per rate of change_rates ((d), 0 first: the
    reference without changes) on the point's running LB under the configured background; the
    backends file's sets are written into the attempt's directory."""
    from .procedures import _ex
    from .trials import Validity
    cfg = ctx.testbed.cfg
    ex = _ex(cfg, ctx.experiment)
    if lb is None or not lb.can_update:
        why = lb.no_update if lb is not None else "no LB runs for this point"
        raise XenobenchError(f"Failed to measure backend changes of {ctx.point.get('lb')!r}: {why} (remove it from "
                             f"experiments.{ctx.experiment}.lbs in {cfg.path})")
    full, less = write_sets(cfg.service.backends, ctx.attempt.path / "backends")
    kw = dict(load_pps=float(ex["load_pps"]), payload=int(ex["payload"]), flows=int(ex["flows"]),
              settle_s=float(ex["settle_s"]), bucket_ns=int(round(float(ex["bucket_ms"]) * 1e6)))
    v = Validity()
    cycles = []
    for i in range(int(ex["cycles"])):
        c = change_cycle(ctx.testbed, lb, full, less, hold_s=float(ex["hold_s"]), **kw)
        cycles.append(c)
        v.require(f"cycle_{i + 1}_background", c["generator_valid"],
                  f"cycle {i + 1}: background invalid: {c['generator_reason']}")
    rates = sorted(set(float(r) for r in ex["change_rates"]) | {0.0})
    bursts = []
    for r in rates:
        b = change_burst(ctx.testbed, lb, full, less, rate_per_s=r, duration_s=float(ex["burst_s"]), **kw)
        bursts.append(b)
        v.require(f"burst_{r:g}_background", b["generator_valid"],
                  f"burst at {r:g} changes/s: background invalid: {b['generator_reason']}")
        v.require(f"burst_{r:g}_window", b["rx_pps"] is not None, f"burst at {r:g} changes/s: an empty window")
    out = {"payload": kw["payload"], "load_pps": kw["load_pps"],
           # TODO(capacity): a share of the LB's capacity as rtt_load's level_unit: capacity
           # (xenobench.procedures.background_level); a fixed rate until that mechanism serves this
           "load_pps_from": "config", "bucket_ns": kw["bucket_ns"], "backends_sets": [str(full), str(less)],
           "cycles": cycles, "bursts": bursts}
    return out, v
