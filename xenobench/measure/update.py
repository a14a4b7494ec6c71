"""The update kind: backend changes under load (experiments/update.yaml): what a runtime
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

(b), the installation rate (install_rates): the LB restarted on a base set that its largest change
fits (the class mask of a running LB cannot change), then one change per size under the same
background, each and its way back timed from the command to the LB's report (and the LB's own
apply time); entries per second = entries / (command → report). What an entry is, per LB
(LoadBalancer.install_unit, install_sets):
- XenoFlow: a class's entry of its root pipe, updated in place (one doca_flow_pipe_update_entry on
  pipe queue 0, completed by doca_flow_entries_process: lb/src/update.c); eBPF: a class's element of its `slots` map. The
  base has 2^K classes all to the set's first backend A, the change for k moves the last 2^k to its
  last backend B (k = K: every class, by rewriting A's entry in eBPF's `backends` map: one write,
  which the LB's own count, `lb_entries`, shows). K = 8, the largest either accepts: XenoFlow's
  XF_MAX_CLASS_BITS (lb/src/backends.h) = xenobench.backends.MAX_CLASS_BITS, the eBPF LB's
  XB_MAX_SLOTS (ebpf_baseline/lb_common.h); the emulation's pipes hold more (EMU_MAX_ENTRIES 4096
  entries, EMU_MAX_SHARED_CNT 1024 shared counters: lb/emu/bpf/emu_common.h) and its queue depth
  (128, XF_QUEUE_DEPTH in lb/src/flow_lb.h) less the margin DOCA's samples keep (8) is why XenoFlow
  updates 120 classes a round (XF_UPDATE_CLASSES_PER_ROUND, lb/src/update.h); DOCA's own limits on a BlueField are not measured
  here. A change of 2^(K+1) classes is refused (the strict reader: class_bits above 8), the LB
  keeps forwarding on its old set, and the run records both.
- Katran: a slot of its 65537-slot Maglev ring whose real changes (the control plane writes only
  those: katran_lb.update_reals). Base {A: 128, B: 128}; the change for k moves 2^k of weight from
  A to B (weights count in Maglev's first round only, so 2^k slots change while 2^k <= 64 on the
  namespace testbed's two reals; the LB's count is recorded, never assumed), and past the weights'
  reach (k > 6) the largest change its two reals allow: B removed (about half the ring). No change
  exceeds the ring, so nothing is refused for size.

The experiment's procedure (backend_update, dispatched by experiments/update.yaml) runs the
point's LB through `cycles` cycles, a burst per rate of `change_rates` (0 first) and the
installation sizes 1..install_max_k per repetition; a capacity point (load: a share of the LB's
capacity, capacity_from self) measures that capacity instead (xenobench.measure.rate.offered_load).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

from ..backends import CLASSES, MAX_CLASS_BITS, WeightRule, load_backends
from ..errors import BackendsError, NodeError, XenobenchError
from ..lb.base import UpdateRefused
from ..results import metric, row
from ..sampler import CounterReader, RateSampler
from ..traffic import start_traffic
from ..trials import Validity
from ..lb.inhardware import CHECK as IN_HARDWARE
from .common import (backend_ifaces, capacity_level, is_capacity_point, judge_in_hardware, lb_reading, payload_tunables,
                     watch_lb)
from .rate import offered_load

KIND = "update"
TABLES = ()  # its definitions' own (tidy.tables)
#: what this kind needs of every LB of its list (xenobench.experiments.check_lbs)
LB_NEED = ("change its backend set at runtime", "no_update", lambda lb: None if lb.can_update else lb.no_update)

PROFILE = "udp_payload"


class FastCounter:
    """One node:iface rx counter sampled in a thread every GAP_S or as fast as a read returns:
    [(monotonic in the middle of the read, value)]. A read through a session is a round trip of
    a fraction of a millisecond: back to back, the reading thread, sshd and the reader would take
    a CPU from the generator and the LB on a small machine."""

    GAP_S = 0.001

    def __init__(self, testbed, node: str, iface: str):
        self.reader = CounterReader(testbed.node(node), iface)
        self.samples: list[tuple[float, int]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                v = self.reader.read()
            except XenobenchError as e:
                self.error = str(e)
                return
            t1 = time.monotonic()
            self.samples.append(((t0 + t1) / 2, v))
            self._stop.wait(max(0.0, t0 + self.GAP_S - time.monotonic()))

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=10)
        self.reader.close()


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


def write_sets(backends_file, out_dir: Path, rule: WeightRule = CLASSES) -> tuple[Path, Path]:
    """The running file and the same without its last backend (same class_bits: an LB keeps its
    class mask), as JSON files in out_dir; read by the LB's weight rule (LoadBalancer.weights)."""
    bs = load_backends(backends_file, rule)
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



#: what a background's generator result keeps in the outputs: how its rate was judged (TRex's
#: window inside an open-ended run and the whole run's rate; xdpgen's tokens lost to being held off
#: its CPU), for the report and for an operator reading an invalid trial
GEN_KEYS = ("requested_pps", "achieved_pps", "tx_packets", "duration_s", "rate_window", "achieved_pps_whole_run",
            "tokens_lost", "queue_full_pct", "valid", "reason")


def _gen_record(gen: dict) -> dict:
    return {k: gen[k] for k in GEN_KEYS if gen.get(k) is not None}


def _start_background(testbed, payload: int, flows: int, load_pps: float, *samplers):
    """The background, started; the samplers' readers ended when it cannot be."""
    try:
        return start_traffic(testbed, PROFILE, payload_tunables(payload, flows), load_pps)
    except BaseException:
        for s in samplers:
            s.close()
        raise


def _stop_and_count(h, all_rx, rx0: int) -> tuple[dict, int, int]:
    """Stop the background, let the last frames drain, and count: (generator result, frames the
    backends received since rx0, frames the generator sent)."""
    try:
        gen = h.stop()
        time.sleep(0.3)
        return gen, all_rx.read_total() - rx0, int(gen.get("tx_packets") or 0)
    finally:
        all_rx.close()  # its last read


def change_cycle(testbed, lb, full: Path, less: Path, *, load_pps: float, payload: int = 22, flows: int = 256,
                 settle_s: float = 0.5, hold_s: float = 1.0, bucket_ns: int = 1_000_000) -> dict:
    """One remove/add cycle of the last backend of `full` under load (module doc); the LB runs on
    `full` before and after."""
    cfg = testbed.cfg
    gone = load_backends(full).backends[-1]
    all_rx = RateSampler(testbed, backend_ifaces(cfg))
    rx0 = all_rx.read_total()
    h = _start_background(testbed, payload, flows, load_pps, all_rx)
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
           "generator": _gen_record(gen), "generator_valid": bool(gen.get("valid")), "generator_reason": gen.get("reason"),
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
    all_rx = RateSampler(testbed, backend_ifaces(testbed.cfg))
    rx0 = all_rx.read_total()
    h = _start_background(testbed, payload, flows, load_pps, all_rx)
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
            "generator_achieved_pps": gen.get("achieved_pps"), "generator": _gen_record(gen), "generator_valid": bool(gen.get("valid")),
            "generator_reason": gen.get("reason"), "tx_packets": tx, "rx_packets": rx, "lost_frames": tx - rx,
            "loss_pct": 100 * (tx - rx) / tx if tx else None}


# --- (b) installation rate ---------------------------------------------------------------------------
KATRAN_WEIGHT_K = 6  # 2^k of weight moved between two reals of weight 128 changes 2^k ring slots up to k = 6


def _doc(class_bits: int | None, backends) -> dict:
    d = {"backends": [{"name": b.name, "mac_address": b.mac, "weight": w} for b, w in backends]}
    if class_bits is not None:
        d["class_bits"] = class_bits
    return d


def install_sets(backends_file, unit: str, max_k: int, rule: WeightRule = CLASSES) -> dict:
    """The base set and one change per size for an LB whose entries are `unit` (module doc): {"base":
    doc, "targets": [{"k", "planned" (entries the change makes; None: the LB's count), "doc"}],
    "over": doc of a change above the LB's limit (refused) or None}. Sizes k = 1..max_k, capped at
    the largest the LB accepts. A and B: the backends file's first and last backend (read by the
    LB's weight rule)."""
    bs = load_backends(backends_file, rule)
    if len(bs.backends) < 2:
        raise XenobenchError(f"Failed to plan the installation sizes from {backends_file}: it needs two backends or "
                             "more (the set's first and last)")
    a, b = bs.backends[0], bs.backends[-1]
    if unit == "ring slot":
        half = 1 << (MAX_CLASS_BITS - 1)
        targets = [{"k": k, "planned": None, "doc": _doc(MAX_CLASS_BITS, [(a, half - (1 << k)), (b, half + (1 << k))])}
                   for k in range(1, min(max_k, KATRAN_WEIGHT_K) + 1)]
        if max_k > KATRAN_WEIGHT_K:
            targets.append({"k": None, "planned": None, "doc": _doc(None, [(a, 1)])})  # B removed
        return {"base": _doc(MAX_CLASS_BITS, [(a, half), (b, half)]), "targets": targets, "over": None}
    if unit != "class":
        raise XenobenchError(f"Failed to plan the installation sizes: unknown entry unit {unit!r} (class, ring slot)")
    n = 1 << MAX_CLASS_BITS
    targets = [{"k": k, "planned": 1 << k,
                "doc": _doc(MAX_CLASS_BITS, [(a, n - (1 << k)), (b, 1 << k)] if k < MAX_CLASS_BITS else [(b, n)])}
               for k in range(1, min(max_k, MAX_CLASS_BITS) + 1)]
    over = _doc(MAX_CLASS_BITS + 1, [(a, n), (b, n)]) if max_k > MAX_CLASS_BITS else None
    return {"base": _doc(MAX_CLASS_BITS, [(a, n)]), "targets": targets, "over": over}


def _timed_change(lb, path: Path, planned, k, direction: str) -> dict:
    u = lb.update(path)
    rep = u["lb_report"]
    got = rep.get(lb.update_entries_key) if lb.update_entries_key else None
    entries = planned if planned is not None else got
    return {"k": k, "direction": direction, "entries": entries, "lb_entries": got,
            "control_s": u["control_s"], "apply_s": rep.get("apply_s"),
            "entries_per_s": entries / u["control_s"] if entries else None,
            "apply_entries_per_s": entries / rep["apply_s"] if entries and rep.get("apply_s") else None}


def install_rates(testbed, lb, sets: dict, out_dir: Path, *, load_pps: float, payload: int = 22, flows: int = 256,
                  settle_s: float = 0.5, repeats: int = 1, gap_s: float = 0.05, check_s: float = 0.3) -> dict:
    """(b) under the background: each target of `sets` (install_sets; the LB runs on sets["base"])
    applied and taken back `repeats` times, each change timed (_timed_change); then the change
    above the limit, which must be refused, and the base's first backend must still receive
    frames over `check_s` after it (the LB forwards on its old set)."""
    out_dir.mkdir(parents=True, exist_ok=True)

    def write(name, doc):
        f = out_dir / f"{name}.json"
        f.write_text(json.dumps(doc))
        return f
    base = write("base", sets["base"])
    first = load_backends(base).backends[0].name
    at_first = RateSampler(testbed, [(n, i) for n, i in backend_ifaces(testbed.cfg) if n == first])
    all_rx = RateSampler(testbed, backend_ifaces(testbed.cfg))
    rx0 = all_rx.read_total()
    changes, refusal = [], None
    h = _start_background(testbed, payload, flows, load_pps, all_rx, at_first)
    try:
        time.sleep(settle_s)
        for t in sets["targets"]:
            f = write(f"k-{t['k'] if t['k'] is not None else 'real'}", t["doc"])
            for _ in range(repeats):
                changes.append(_timed_change(lb, f, t["planned"], t["k"], "install"))
                time.sleep(gap_s)
                changes.append(_timed_change(lb, base, t["planned"], t["k"], "revert"))
                time.sleep(gap_s)
        if sets["over"] is not None:
            over = write("over", sets["over"])
            try:
                lb.update(over)
                refusal = {"refused": False, "error": None}
            except (BackendsError, UpdateRefused) as e:
                refusal = {"refused": True, "error": str(e)}
            c0 = at_first.read_total()
            time.sleep(check_s)
            refusal["frames_at_old_set_after"] = at_first.read_total() - c0
            refusal["backend"] = first
    finally:
        at_first.close()
        gen, rx, tx = _stop_and_count(h, all_rx, rx0)
    return {"lb": lb.kind, "unit": lb.install_unit, "load_pps": load_pps, "changes": changes, "over": refusal,
            "generator": _gen_record(gen), "generator_valid": bool(gen.get("valid")), "generator_reason": gen.get("reason"),
            "tx_packets": tx, "rx_packets": rx, "loss_pct": 100 * (tx - rx) / tx if tx else None}


def _restart(ctx, lb, backends) -> None:
    """Stop the point's LB and start it on `backends`, its watch moved to the new process."""
    ctx.watch.release(f"lb_{lb.kind}")
    lb.stop()
    lb.start(backends)
    watch_lb(ctx, lb)


# --- the experiment's procedure (experiments/update.yaml) ------------------------------------------
def background_pps(ctx) -> dict:
    """The background of the point: `load` x the LB's maximum measured in this run
    (xenobench.measure.common.capacity_level, the mechanism of rtt_load's capacity levels), or load_pps."""
    if ctx.knob("load", None):
        share = float(ctx.knob("load"))
        return {"load_pps_from": "capacity", "load_share": share, **capacity_level(ctx, share)}
    return {"load_pps_from": "config", "background_pps": float(ctx.knob("load_pps"))}


def backend_update(ctx, lb=None):
    """`cycles` change cycles ((a), (c)), a burst per rate of change_rates ((d), 0 first: the
    reference without changes), then the installation sizes ((b), install_max_k > 0: the LB
    restarted on their base and, after them, on the point's set again), on the point's running LB
    under the background; the backends files are written into the attempt's directory. A capacity
    point: the background's maximum through the LB (offered_load)."""
    cfg = ctx.testbed.cfg
    if is_capacity_point(ctx.point):
        return offered_load(ctx, lb)
    ex = {k: ctx.knob(k) for k in ("payload", "flows", "settle_s", "bucket_ms", "cycles", "hold_s", "change_rates",
                                   "burst_s", "install_max_k", "install_repeats")}
    if lb is None or not lb.can_update:
        why = lb.no_update if lb is not None else "no LB runs for this point"
        raise XenobenchError(f"Failed to measure backend changes of {ctx.point.get('lb')!r}: {why} (remove it from "
                             f"experiments.{ctx.experiment}.lbs in {cfg.path})")
    full, less = write_sets(cfg.service.backends, ctx.attempt.path / "backends", lb.weights)
    bg = background_pps(ctx)
    kw = dict(load_pps=bg["background_pps"], payload=int(ex["payload"]), flows=int(ex["flows"]),
              settle_s=float(ex["settle_s"]), bucket_ns=int(round(float(ex["bucket_ms"]) * 1e6)))
    v = Validity()
    hw0 = lb_reading(lb)  # XenoFlow's proof that it ran in the hardware, over the whole trial
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
    install = None
    max_k = int(ex["install_max_k"])
    if max_k > 0:
        sets = install_sets(cfg.service.backends, lb.install_unit, max_k, lb.weights)
        d = ctx.attempt.path / "backends" / "install"
        d.mkdir(parents=True, exist_ok=True)
        (d / "base.json").write_text(json.dumps(sets["base"]))
        _restart(ctx, lb, d / "base.json")
        try:
            install = install_rates(ctx.testbed, lb, sets, d, repeats=int(ex["install_repeats"]),
                                    **{k: kw[k] for k in ("load_pps", "payload", "flows", "settle_s")})
        finally:
            _restart(ctx, lb, None)  # the point's set again, for the next repetition
        v.require("install_background", install["generator_valid"],
                  f"installation: background invalid: {install['generator_reason']}")
        o = install["over"]
        if o is not None:
            v.require("install_over_limit_refused", o["refused"], "a change above the LB's limit was applied")
            v.require("install_forwarding_after_refusal", o["frames_at_old_set_after"] > 0,
                      f"no frame reached {o['backend']} after the refused change")
    out = {"payload": kw["payload"], "load_pps": kw["load_pps"], **{k: x for k, x in bg.items() if k != "background_pps"},
           "bucket_ns": kw["bucket_ns"], "backends_sets": [str(full), str(less)],
           "cycles": cycles, "bursts": bursts, "install": install}
    hw = judge_in_hardware(v, lb, hw0, lb_reading(lb))
    if hw is not None:
        out[IN_HARDWARE] = hw
    return out, v


PROCEDURES = {"backend_update": backend_update}


def headline(o: dict) -> str:
    """A valid trial's value on the terminal: the median command-to-report time of the removals and
    additions over its change cycles, and their loss."""
    cyc = o["cycles"]
    if not cyc:
        return "no change cycle"

    def med(vals):
        vals = [float(v) for v in vals if v is not None]
        return statistics.median(vals) if vals else float("nan")
    return (f"remove {1e3 * med(c['remove'].get('control_s') for c in cyc):.2f} ms, "
            f"add {1e3 * med(c['add'].get('control_s') for c in cyc):.2f} ms, "
            f"loss {med(c.get('loss_pct') for c in cyc):.2f} % over {len(cyc)} cycle(s)")


# --- rows --------------------------------------------------------------------------------------------
def _ms(v):
    return None if v is None else 1e3 * float(v)


def rows(t) -> dict[str, list[dict]]:
    """An update trial's rows (`t`: xenobench.measure.TrialRecord): a row per metric of each change cycle (source: the trial and
    cycle), of each burst (changes_per_s: its requested rate; 0 the reference) and of each change of
    the installation sizes (source: the trial, change, k and direction; the rows of one change share
    it) and the refused change above the limit. A metric the cycle could not measure (the removed
    backend never drained) has no row."""
    o = t.outputs
    src = t.common["source"]
    common = dict(t.common, payload_bytes=o["payload"], background_pps=o["load_pps"])
    del common["source"]
    cyc = []
    for i, c in enumerate(o["cycles"], 1):
        rm, add = c["remove"], c["add"]
        vals = [("remove_control_ms", _ms(rm["control_s"])), ("add_control_ms", _ms(add["control_s"])),
                ("remove_apply_ms", _ms(rm.get("apply_s"))), ("add_apply_ms", _ms(add.get("apply_s"))),
                ("remove_last_frame_ms", _ms(rm.get("remove_last_frame_s"))),
                ("done_to_last_frame_ms", _ms(rm.get("done_to_last_frame_s"))),
                ("add_first_frame_ms", _ms(add.get("add_first_frame_s"))),
                ("after_done_frames", rm.get("after_done_frames")),
                ("after_done_frames_max", rm.get("after_done_frames_max")),
                ("drained", None if rm.get("drained") is None else int(rm["drained"])),
                ("loss_pct", c.get("loss_pct"))]
        cyc += [row(**common, offered_pps=o["load_pps"], metric=m, value=float(v), unit=metric(m).unit,
                    source=f"{src}:cycle-{i}") for m, v in vals if v is not None]
    bursts = []
    for i, b in enumerate(o["bursts"], 1):
        c = dict(common, offered_pps=b.get("generator_achieved_pps"), measured_pps=b["rx_pps"],
                 changes_per_s=b["changes_per_s"], source=f"{src}:burst-{i}")
        vals = [("rx_pps", b["rx_pps"]), ("loss_pct", b.get("loss_pct")), ("changes", b["changes"]),
                ("achieved_changes_per_s", b.get("achieved_changes_per_s"))]
        bursts += [row(**c, metric=m, value=float(v), unit=metric(m).unit) for m, v in vals if v is not None]
    inst = []
    ins = o.get("install") or {}
    for i, c in enumerate(ins.get("changes") or (), 1):
        k = "real" if c["k"] is None else c["k"]
        vals = [("entries", c.get("entries")), ("lb_entries", c.get("lb_entries")),
                ("install_control_ms", _ms(c["control_s"])), ("install_apply_ms", _ms(c.get("apply_s"))),
                ("entries_per_s", c.get("entries_per_s")), ("apply_entries_per_s", c.get("apply_entries_per_s"))]
        inst += [row(**common, offered_pps=ins.get("load_pps"), metric=m, value=float(v), unit=metric(m).unit,
                     source=f"{src}:install-{i}:k-{k}:{c['direction']}") for m, v in vals if v is not None]
    over = ins.get("over")
    if over is not None:
        inst += [row(**common, metric=m, value=float(v), unit=metric(m).unit, source=f"{src}:install-over")
                 for m, v in (("over_limit_refused", int(over["refused"])),
                              ("frames_after_refusal", over["frames_at_old_set_after"]))]
    return {"update": cyc, "update_burst": bursts, "update_install": inst}
