"""The latency kind (rtt, rtt_load): DNS probes through the LB (or straight to the DNS backend for
'none'), timed with kernel timestamps by the prober and independently from a client-side capture
(thesis Sec. 7.4-7.5; paper Fig. 7-8); under a background load at a level (rtt_load). The paired
design (section `paired`, the default) runs every LB variant of `lbs` in interleaved blocks of a
repetition (xenobench.latency: block order and the bootstrap of per-round differences).

Owns its procedures (rtt_probe, rtt_under_load) and its rows: samples and summaries per trial
(rows), the per-point paired comparison over the valid repetitions (point_rows).
"""

from __future__ import annotations

import csv
import functools
import json
import time
from pathlib import Path

import numpy as np

from ..errors import DataError, NodeError
from ..latency import block_order, compare as compare_blocks
from ..lb import NONE, get_lb, split_measured, stop_all
from ..layout import TrialDir
from ..results import row
from ..rtt import probe
from ..traffic import start_traffic
from ..trials import TrialContext, Validity
from ..lb.inhardware import CHECK as IN_HARDWARE
from .common import (background_tunables, capacity_level, is_capacity_point, judge_in_hardware, lb_checks,
                     lb_reading, lb_split, lb_stats, watch_generator, watch_lb)
from .rate import offered_load

KIND = "latency"
TABLES = ()  # its definitions' own (tidy.tables)
#: what this kind needs of every LB of its list (xenobench.experiments.check_lbs): its probes are sent
#: on one flow that must reach the DNS backend through each LB
LB_NEED = ("say which backend a flow reaches", "no_route", lambda lb: lb.no_route)
MAX_LOST_PCT = 1.0     # experiments/rtt*.yaml: no probe lost beyond 1 %
RTT_PERCENTILES = (1, 5, 25, 75, 95, 99)


def paired(ctx: TrialContext) -> bool:
    """Whether the trial runs the paired design (the section's `paired`, a capacity point never)."""
    return bool(ctx.section.get("paired")) and not is_capacity_point(ctx.point)


def via(ctx: TrialContext) -> str:
    """How the unpaired protocol's probes go: straight to the DNS backend for lb none, else the LB."""
    return "direct" if ctx.knob("lb", NONE) == NONE else "lb"


def rtt_probe(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """rtt: N probes to the DNS backend through the LB (or straight to it for lb=none), measured
    with kernel timestamps by the prober and independently from a client-side capture; in the
    paired design every LB variant in interleaved blocks (_paired_blocks)."""
    if paired(ctx):
        return _paired_blocks(ctx)
    return _probe(ctx, lb)


def background_level(ctx: TrialContext) -> dict:
    """rtt_load's background rate: level_unit pps as given; capacity: level x the maximum of the
    point's LB (unpaired) or the smallest of its LBs' (paired), from capacity_level (from self:
    those of the point's split)."""
    level = float(ctx.point["level"])
    unit = ctx.knob("level_unit", None)
    if unit == "pps" or level <= 0:
        return {"level": level, "level_unit": unit, "background_pps": level if level > 0 else 0.0}
    return {"level": level, "level_unit": "capacity", **capacity_level(ctx, level)}


def rtt_under_load(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """rtt_load: background load with the point's split at its level while the probes run; a
    capacity point: the background unpaced through its LB, no probes (offered_load)."""
    p = ctx.point
    if is_capacity_point(p):
        return offered_load(ctx, lb)
    bg_level = background_level(ctx)
    level = bg_level["background_pps"]
    measure = _paired_blocks if paired(ctx) else (lambda c: _probe(c, lb))
    if level <= 0:
        out, v = measure(ctx)
        return {**out, **bg_level}, v
    tun = background_tunables(p["split"], int(ctx.knob("payload")))
    profile = ctx.plan.profile
    carrier = None
    if paired(ctx):  # one LB carries the background through every block (BlockLBs)
        carrier = BlockLBs(ctx, hold=True)
        measure = lambda c: _paired_blocks(c, carrier)  # noqa: E731
    key = None
    try:
        if carrier is not None:  # up before the background: it never meets a port without its LB
            stop_all(ctx.testbed)  # a block's LB is the only one running
            carrier.use(next((k for k in _block_plan(ctx)[0] if k != NONE), None))
        h = start_traffic(ctx.testbed, profile, tun, level)
        try:
            key = watch_generator(ctx, h)  # the background's generator, checked with the probes' actors
            time.sleep(float(ctx.knob("load_settle_s")))
            out, v = measure(ctx)
        finally:
            ctx.watch.release(key)
            bg = h.stop()
    finally:
        if carrier is not None:
            carrier.close()
    out["background"] = dict(bg)  # carries the filled tunables it ran with
    out.update(bg_level)
    v.require("background_ok", bool(bg.get("valid")), bg.get("reason") or "background load invalid")
    return out, v


def flow_through(ctx: TrialContext, kinds) -> tuple[str, ...]:
    """The LBs the probes' one flow must reach the DNS backend through: every LB of the study's
    latency experiments (the plan's flow_lbs) and the trial's own, so every RTT is of the same frames."""
    return tuple(dict.fromkeys(k for k in (*ctx.plan.flow_lbs, *kinds) if k != NONE))


def _probe(ctx: TrialContext, lb) -> tuple[dict, Validity]:
    count = int(ctx.knob("probes"))
    how = via(ctx)
    st0 = lb_stats(lb)
    s = probe(ctx.testbed, count=count, rate_qps=float(ctx.knob("rate_qps")),
              out=ctx.attempt.probe_records, via=how, capture=True, watch=ctx.watch,
              through=flow_through(ctx, [lb.kind] if lb is not None else []))
    st1 = lb_stats(lb)
    v = Validity()
    out = {"probe": s, "server": server(ctx), "via": how,
           "lb_per_backend": lb_checks(v, lb, st0, st1), "lb_split": lb_split(lb, st0, st1)}
    if st1 is not None and IN_HARDWARE in st1:  # the verdict with its values (xenobench.lb.inhardware)
        out[IN_HARDWARE] = st1[IN_HARDWARE]
    lost = int(s.get("lost") or 0)
    v.require("probes_answered", s.get("n", 0) > 0, "no probe was answered")
    v.require("loss_below_1pct", lost <= count * MAX_LOST_PCT / 100,
              f"{lost} of {count} probes lost (> {MAX_LOST_PCT:g} %)")
    ok, why = pcap_agreement(s)
    v.require("prober_pcap_agree", ok, why)
    return out, v


def pcap_agreement(s: dict) -> tuple[bool, str]:
    """Whether the prober's median and the capture's agree within the tolerance (a probe summary,
    xenobench.rtt.probe), and the reason: their difference, or which median is missing and why."""
    tol, d = float(s["tolerance_us"]), s.get("pcap_median_diff_us")
    if d is not None:
        return abs(d) <= tol, f"prober and pcap medians differ by {d} us (tolerance {tol:g} us)"
    if s.get("median_us") is None:
        return False, "no prober median to compare with the pcap's (no probe was answered)"
    if s.get("pcap_error"):
        return False, f"no pcap median to compare with the prober's: {s['pcap_error']}"
    return False, "no pcap median to compare with the prober's (the capture holds no query with its answer)"


class BlockLBs:
    """The LB the paired design's blocks run with (use(kind), close()). By default (`hold` false)
    each block starts its LB and stops it after (`use(None)` for a block without one). Under a
    background (rtt_load, `hold`), an LB that is up stays up through the blocks that need none: a
    'none' block probes the DNS backend directly while that LB keeps carrying the background to
    the backends with the point's split, so every block of a repetition has the same background
    (the pairs' premise). Without it, a 'none' block sent the background into the LB node's bare
    port: its kernel stack dropped it at a fraction of the rate, and on the namespace testbed,
    whose generator shares its CPU with that path, the paced background fell to 72-78 % of its
    level (2026-11-25, make all's rtt_load 0.9 points)."""

    def __init__(self, ctx: TrialContext, hold: bool = False):
        self.ctx, self.hold = ctx, hold
        self.lb, self.key = None, None

    @property
    def kind(self) -> str | None:
        return self.lb.kind if self.lb is not None else None

    def use(self, kind: str | None) -> None:
        """Make `kind`'s LB the one running (None: a block that probes directly)."""
        if kind is None and self.hold:
            return
        if self.lb is not None and self.lb.kind != kind:
            self.close()
        if kind is not None and self.lb is None:
            self.lb = get_lb(kind, self.ctx.testbed)
            try:
                self.lb.start()
            except BaseException:
                self.close()
                raise
            self.key = watch_lb(self.ctx, self.lb)

    def close(self) -> None:
        """Stop the running LB (stopped on purpose: released from the watch first)."""
        lb, self.lb = self.lb, None
        if self.key is not None:
            self.ctx.watch.release(self.key)  # a death in its blocks is recorded
            self.key = None
        if lb is not None:
            lb.stop()


def _block_plan(ctx: TrialContext) -> tuple[list[str], int]:
    """The paired design's block order (every LB of `lbs` once per round, shuffled by the seed +
    repetition, xenobench.latency.block_order) and its seed."""
    seed = int(ctx.knob("seed")) + int(ctx.repetition)
    return block_order(list(ctx.knob("lbs")), int(ctx.knob("blocks")), seed), seed


def _paired_blocks(ctx: TrialContext, lbs: BlockLBs | None = None) -> tuple[dict, Validity]:
    """The paired design (xenobench.latency): `blocks` rounds, each running every LB of the
    experiment once in a shuffled order (seed + repetition, recorded), `block_probes` probes per
    block, the block's LB running while it probes (BlockLBs: started for the block and stopped
    after it; under a background, `lbs` holds the LB carrying it through the 'none' blocks). The
    client-side capture runs in each LB's first block only (capture start and stop cost ~2.5 s a
    block); the prober's kernel timestamps are the measurement in every block."""
    kinds = list(ctx.knob("lbs"))
    order, seed = _block_plan(ctx)
    count, rate = int(ctx.knob("block_probes")), float(ctx.knob("rate_qps"))
    own = lbs is None
    if own:
        stop_all(ctx.testbed)  # a block's LB is the only one running
        lbs = BlockLBs(ctx)
    blocks, captured = [], set()
    v = Validity()
    stopped = None
    try:
        for i, kind in enumerate(order, 1):
            bd = ctx.attempt.block(i, kind)
            capture = kind not in captured
            captured.add(kind)
            split = hw = None
            try:  # stopped also when its start failed half-way: nothing of a block outlives it
                lbs.use(None if kind == NONE else kind)
                lb = lbs.lb if kind != NONE else None
                hashed = lb is not None and split_measured(lb.kind)
                st0 = lb_stats(lb) if hashed else None
                hw0 = lb_reading(lb)  # XenoFlow's proof that it ran in the hardware, over the block
                s = probe(ctx.testbed, count=count, rate_qps=rate, out=bd.probe_records,
                          via="direct" if kind == NONE else "lb", capture=capture, watch=ctx.watch,
                          through=flow_through(ctx, kinds))
                if hashed:
                    split = lb_split(lb, st0, lb_stats(lb))
                hw = judge_in_hardware(v, lb, hw0, lb_reading(lb), block=i)
            except NodeError as e:
                if not ctx.watch.gone():
                    raise
                stopped = f"block {i} ({kind}): {e}"  # an actor is gone: the remaining blocks would measure nothing
            finally:
                if not lbs.hold:
                    lbs.close()
            if stopped is not None:
                break
            s.pop("per_query", None)  # the records and the pcap hold it; outputs stay small
            blocks.append({"block": i, "round": (i - 1) // len(kinds) + 1, "lb": kind, "captured": capture,
                           "records": str(bd.probe_records.relative_to(ctx.attempt.path)), "probe": s,
                           **({"background_via": lbs.kind} if lbs.hold else {}),
                           **({"lb_split": split} if split is not None else {}),
                           **({IN_HARDWARE: hw} if hw is not None else {})})
            lost = int(s.get("lost") or 0)
            v.require(f"block_{i}_answered", s.get("n", 0) > 0, f"block {i} ({kind}): no probe was answered")
            v.require(f"block_{i}_loss_below_1pct", lost <= count * MAX_LOST_PCT / 100,
                      f"block {i} ({kind}): {lost} of {count} probes lost (> {MAX_LOST_PCT:g} %)")
            if capture:
                ok, why = pcap_agreement(s)
                v.require(f"block_{i}_prober_pcap_agree", ok, f"block {i} ({kind}): {why}")
            if ctx.watch.check():
                stopped = f"after block {i} ({kind}): {'; '.join(ctx.watch.gone())}"
                break
    finally:
        if own:
            lbs.close()
    if stopped is not None:  # the remaining blocks would measure nothing
        v.require("blocks_completed", False, f"{len(blocks)} of {len(order)} blocks completed, stopped early "
                                             f"{stopped}")
    out = {"paired": True, "lbs": kinds, "order": order, "order_seed": seed, "rounds": int(ctx.knob("blocks")),
           "block_probes": count, "bootstrap_seed": int(ctx.knob("seed")),
           "bootstrap_resamples": int(ctx.knob("bootstrap")), "server": server(ctx), "blocks": blocks,
           "stopped_early": stopped}
    return out, v


def server(ctx: TrialContext) -> str:
    """The DNS server answering the probes: the point's, the experiment's, or the config's dns.server."""
    return ctx.knob("server", None) or ctx.testbed.cfg.section("dns")["server"]


PROCEDURES = {"rtt_probe": rtt_probe, "rtt_under_load": rtt_under_load}


def headline(o: dict) -> str:
    """A valid trial's value on the terminal: the RTT median (per LB over the paired blocks, the
    median of the blocks' medians), and the background's rate under load."""
    if o.get("paired"):
        per: dict[str, list[float]] = {}
        for b in o.get("blocks") or ():
            if b["probe"].get("median_us") is not None:
                per.setdefault(b["lb"], []).append(float(b["probe"]["median_us"]))
        return "RTT median " + ", ".join(f"{lb} {float(np.median(v)):.1f}" for lb, v in per.items()) + " us"
    bg = o.get("background_pps")
    return (f"RTT median {float(o['probe']['median_us']):.1f} us"
            + (f" under {float(bg) / 1e3:g} kpps" if bg else ""))


# --- rows --------------------------------------------------------------------------------------------
def _block_rtts(path: Path) -> tuple[float, ...]:
    """A block's RTTs (read_probe_records), read once per file version in a process: a paired
    point's rows and its comparison both need them."""
    try:
        st = path.stat()
    except OSError:
        return tuple(read_probe_records(path))  # it names what is wrong
    return _rtts_of(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=512)
def _rtts_of(path: str, mtime_ns: int, size: int) -> tuple[float, ...]:
    return tuple(read_probe_records(Path(path)))


def read_probe_records(path: Path) -> list[float]:
    """RTTs in µs of the answered probes (status ok) in a prober's raw records: JSON lines
    (xenobench.rtt) or CSV, each with rtt_ns and status. A line that is not a record or an
    rtt_ns that is not a whole number of ns is refused, naming the line."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DataError(f"Failed to read probe records {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"Failed to read probe records {path}: {getattr(e, 'strerror', None) or e}") from None
    recs = []  # (line, record)
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"Failed to read probe records {path}: line {n}: {e.msg}") from None
            except RecursionError:
                raise DataError(f"Failed to read probe records {path}: line {n}: nested too deeply") from None
            if not isinstance(r, dict):
                raise DataError(f"Failed to read probe records {path}: line {n}: {line[:40]!r} is not a record "
                                "(a JSON object)")
            recs.append((n, r))
    else:
        rd = csv.DictReader(text.splitlines())
        if rd.fieldnames is None or "rtt_ns" not in rd.fieldnames:
            raise DataError(f"Failed to read probe records {path}: no rtt_ns column")
        recs = list(enumerate(rd, 2))
    out = []
    for n, r in recs:
        v = r.get("rtt_ns")
        if r.get("status", "ok") != "ok" or v in ("", None):
            continue
        try:
            ns = int(v) if not isinstance(v, float) else None  # 1.5 or NaN ns: not the prober's record
        except ValueError:
            ns = None
        if ns is None or isinstance(v, bool):
            raise DataError(f"Failed to read probe records {path}: line {n}: rtt_ns: {v!r} is not a whole number "
                            "of nanoseconds")
        out.append(ns / 1000.0)
    return out


def _rtt_stats(v: np.ndarray) -> dict:
    st = {"median": float(np.median(v)), "mean": float(np.mean(v)),
          "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
          "min": float(v.min()), "max": float(v.max())}
    for p in RTT_PERCENTILES:
        st[f"p{p}"] = float(np.percentile(v, p))
    return st


def _rtt_rows(common: dict, rtts: np.ndarray, s: dict, rel_records: Path, rel_summary: Path,
              out: dict[str, list[dict]], samples: bool = True) -> None:
    for i, v in enumerate(rtts if samples else ()):
        out["rtt_samples"].append(row(**common, metric="rtt_us", value=float(v), unit="us",
                                      source=f"{rel_records}:{i}"))
    summ = [("n", len(rtts), "count"), ("lost", s.get("lost", 0), "count")]
    if len(rtts):
        summ += [(f"rtt_{k}_us", v, "us") for k, v in _rtt_stats(rtts).items()]
    pc = s.get("pcap") or {}
    if pc.get("median_us") is not None:
        summ += [("rtt_pcap_median_us", pc["median_us"], "us"),
                 ("rtt_pcap_diff_us", s.get("pcap_median_diff_us"), "us")]
    for m, v, u in summ:
        if v is not None:
            out["rtt_summary"].append(row(**common, metric=m, value=float(v), unit=u, source=str(rel_summary)))


def _paired_rtt_rows(common: dict, trial: TrialDir, res: dict, resdir: Path, out: dict[str, list[dict]] | None) -> list:
    """Paired design: samples per block (source names the block), one summary per LB and
    repetition over its blocks; returns (repetition, round, lb, block median) for latency.compare
    (out None: only those, no rows)."""
    o = res["outputs"]
    att = trial.attempt(res["chosen_attempt"])
    rep = int(res["repetition"])
    per_lb: dict[str, list[float]] = {}
    lost: dict[str, int] = {}
    captured: dict[str, dict] = {}
    medians = []
    for b in o["blocks"]:
        f = att.path / b["records"]
        r = _block_rtts(f)
        if r:
            medians.append((rep, int(b["round"]), b["lb"], float(np.median(r))))
        if out is None:
            continue
        rel = f.relative_to(resdir)
        c = dict(common, lb=b["lb"])
        for i, v in enumerate(r):
            out["rtt_samples"].append(row(**c, metric="rtt_us", value=float(v), unit="us", source=f"{rel}:{i}"))
        per_lb.setdefault(b["lb"], []).extend(r)
        lost[b["lb"]] = lost.get(b["lb"], 0) + int(b["probe"].get("lost") or 0)
        if b["captured"]:
            captured[b["lb"]] = b["probe"]
    if out is None:
        return medians
    rel_att = att.path.relative_to(resdir)
    for lb, r in per_lb.items():
        s = {"lost": lost[lb], **{k: captured.get(lb, {}).get(k) for k in ("pcap", "pcap_median_diff_us")}}
        _rtt_rows(dict(common, lb=lb), np.array(r), s, rel_att, rel_att, out, samples=False)
    return medians


def paired_rows(blocks: list, lbs: list[str], common: dict, resamples: int, seed: int) -> list[dict]:
    """rtt_paired rows of one point: every LB against 'none' (the added latency) and every other
    pair of LBs, each the median of per-round differences with its bootstrap 95 % CI; verdict
    +1 / -1 where the CI excludes zero (higher / lower than the reference), 0 = not distinguishable."""
    refs = [(lb, "none") for lb in lbs if lb != "none" and "none" in lbs]
    others = [x for x in lbs if x != "none"]
    refs += [(a, b) for i, a in enumerate(others) for b in others[i + 1:]]
    out = []
    for lb, ref in refs:
        d = compare_blocks(blocks, lb, ref, resamples, seed)
        if d is None:
            continue
        c = dict(common, lb=lb)
        sign = {"higher": 1, "lower": -1}.get(d.verdict, 0)
        for m, v, u in ((f"rtt_vs_{ref}_median_us", d.median_us, "us"),
                        (f"rtt_vs_{ref}_ci_low_us", d.ci_low_us, "us"),
                        (f"rtt_vs_{ref}_ci_high_us", d.ci_high_us, "us"),
                        (f"rtt_vs_{ref}_pairs", d.pairs, "count"),
                        (f"rtt_vs_{ref}_verdict", sign, "sign"),
                        (f"rtt_vs_{ref}_bootstrap_seed", d.seed, "seed"),
                        (f"rtt_vs_{ref}_bootstrap_resamples", d.resamples, "count")):
            out.append(row(**c, metric=m, value=float(v), unit=u))
    return out


def rows(t) -> dict[str, list[dict]]:
    """A latency trial's samples and summaries (`t`: xenobench.measure.TrialRecord); a paired trial's
    per LB over its blocks."""
    o, pt = t.outputs, t.point
    out: dict[str, list[dict]] = {"rtt_samples": [], "rtt_summary": []}
    # the rate the background ran at (rtt_load records it; older trials' point named it)
    common = {k: v for k, v in t.common.items() if k != "source"}  # each row names its own: a probe, a block
    common.update(server=t.facts.get("server"), split=pt.get("split"),
                  background_pps=o.get("background_pps", pt.get("level_pps")))
    if t.facts.get("paired"):
        _paired_rtt_rows(common, t.trial, t.result, t.resdir, out)
        return out
    chosen = t.trial.attempt(t.result["chosen_attempt"]).probe_records
    rtts = np.array(read_probe_records(chosen))
    rel = chosen.relative_to(t.resdir)
    _rtt_rows(common, rtts, o["probe"], rel, rel, out)
    return out


def point_rows(records: list) -> dict[str, list[dict]]:
    """rtt_paired rows of one point of the paired design over its valid repetitions (`records`:
    xenobench.measure.TrialRecord, in repetition order): every LB against 'none' and every pair."""
    paired_recs = [t for t in records if t.facts.get("paired")]
    if not paired_recs:
        return {}
    blocks = []
    for t in paired_recs:
        blocks += _paired_rtt_rows({}, t.trial, t.result, t.resdir, None)
    first = paired_recs[0]
    o, pt = first.outputs, first.point
    common = dict(first.common, server=first.facts.get("server"), split=pt.get("split"),
                  background_pps=o.get("background_pps", pt.get("level_pps")), repetition=None,
                  source=str(first.trial.path.parent.relative_to(first.resdir)))
    return {"rtt_paired": paired_rows(blocks, o["lbs"], common, int(o["bootstrap_resamples"]),
                                      int(o["bootstrap_seed"]))}
