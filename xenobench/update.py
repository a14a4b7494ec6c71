"""Backend changes under load (issue 28 §1, DESIGN §4.9): what one runtime change of an LB's backend
set costs the traffic, measured on the harness clock (CLOCK_MONOTONIC).

One cycle under a steady background load (the udp_payload profile over `flows` sources, so every
class carries frames): backend B (the set's last) is removed — {…, B} → {…} — and, `hold_s` later,
added back. The harness samples B's receive counter (xenobench.sampler.CounterReader) as fast as
its transport allows, from before the first change to after the second, and reads the LB's answer
to each change (LoadBalancer.update: t_sent, t_done). From those:

- remove_last_frame_s: t_sent → the first sample after which B's counter no longer grows: the
  last frame at the removed backend (an upper bound; `resolution_s` is the gap to the sample before);
- add_first_frame_s: t_sent → the first sample in which B's counter grew: the first frame at the
  new backend (an upper bound, same resolution);
- after_done_frames: frames B received after the first sample taken after the removal was
  reported done (a lower bound of frames delivered to a removed backend after the change was done);
- control_s: t_sent → t_done of each change (the LB's report seen by the harness), and the LB's own
  apply time (`apply_s`, its clock);
- lost_frames / loss_pct: the generator's frames minus every backend's over the cycle.

Nothing here starts an LB: the caller hands a running one (and its backends files).
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


def change_cycle(testbed, lb, full: Path, less: Path, *, load_pps: float, payload: int = 22, flows: int = 256,
                 settle_s: float = 0.5, hold_s: float = 1.0) -> dict:
    """One remove/add cycle of the last backend of `full` under load (module doc); the LB runs on
    `full` before and after."""
    from .backends import load_backends
    from .procedures import backend_ifaces, payload_tunables
    from .traffic import start_traffic
    from .sampler import RateSampler
    cfg = testbed.cfg
    gone = load_backends(full).backends[-1].name
    node = cfg.nodes[gone]
    all_rx = RateSampler(testbed, backend_ifaces(cfg))
    rx0 = all_rx.read_total()
    h = start_traffic(testbed, PROFILE, payload_tunables(payload, flows), load_pps)
    try:
        with FastCounter(testbed, gone, node.iface().name) as fc:
            time.sleep(settle_s)
            rm = lb.update(less)
            time.sleep(hold_s)
            add = lb.update(full)
            time.sleep(hold_s)
    finally:
        gen = h.stop()
    time.sleep(0.3)
    rx = all_rx.read_total() - rx0
    if fc.error:
        raise NodeError(f"Failed to sample {gone}'s counter: {fc.error}")
    s = fc.samples
    tx = int(gen.get("tx_packets") or 0)
    gaps = [b[0] - a[0] for a, b in zip(s, s[1:])]
    return {"lb": lb.kind, "removed_backend": gone, "load_pps": load_pps, "generator_valid": bool(gen.get("valid")),
            "tx_packets": tx, "rx_packets": rx, "lost_frames": tx - rx, "loss_pct": 100 * (tx - rx) / tx if tx else None,
            "samples": len(s), "sample_gap_median_s": sorted(gaps)[len(gaps) // 2] if gaps else None,
            "remove": {"control_s": rm["control_s"], "apply_s": rm["lb_report"].get("apply_s"),
                       **removal_metrics(s, rm["t_sent"], rm["t_done"], add["t_sent"])},
            "add": {"control_s": add["control_s"], "apply_s": add["lb_report"].get("apply_s"),
                    **addition_metrics(s, add["t_sent"])}}
