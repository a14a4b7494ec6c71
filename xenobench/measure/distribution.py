"""The distribution kind (experiments/distribution.yaml): how evenly each LB spreads a client
population that stands for a real one, and how many of its flows move when a backend leaves or
joins. The paper's open question: XenoFlow splits by the low bits of the IPv4 source address,
which a real population does not spread evenly; a hash of the flow is its proposed fix.

One trial (population_shares), the point's LB running on the backends file (service.backends):

- the population (trex_profiles/population.py, the point's `population`) is compiled as the
  generator sends it (xenobench.traffic.compile_for): its flows (source address, source port) and
  the frames of each in one cycle;
- it is sent at `rate_pps` for `duration_s`; what each backend received is counted where the frames
  arrive (Testbed.arrival_recorder: the namespace testbed's sink, the generator's frames per
  backend MAC), else by each backend's rx counter (hosts: ethtool, every frame the NIC got); the
  LB's own stats give what it sent each backend;
- the LB's rule (LoadBalancer.backend_of over the backends file as the LB reads it) says where each
  flow of the population goes: the flows per backend, and the frames the rule sends each backend,
  which the measured frames must match within `share_tolerance` (a mismatch means backend_of does
  not follow the LB's data plane: the trial is invalid as rule_matches_frames). An LB whose driver
  cannot say (no_route) is measured without flows and without that check;
- disruption, by the LB's rule: the flows whose backend differs when the backends file's last
  backend is removed, and when it is added back, beside the ideal 1/N.

Rows (tables distribution, disruption; per backend `<measure>@<backend>`, xenobench.fairness):
frame_share (measured at the backends), lb_frame_share (the LB's counters), rule_frame_share and
rule_flow_share (the LB's rule over the population's frames and flows), weight_share (the backends
file); per (LB, population) Jain's index, max/min, the chi-square distance from the weights and the
largest and smallest share of the measured frames (rule_flow_...: of the rule's flows); per point
over two or more valid repetitions each figure's mean with its 95 % t interval.
"""

from __future__ import annotations

import ipaddress
import math
import struct
import time
from collections import Counter

from ..backends import BackendSet, load_backends, parse_backends
from ..errors import BackendsError, ConfigError, XenobenchError
from ..fairness import (FAIRNESS_METRICS, backend_metric, fairness, mean_interval, moved, populations, shares,
                        split_backend)
from ..lb.base import Flow
from ..results import metric, row
from ..sampler import CounterReader
from ..traffic import compile_for
from ..trials import Validity
from .common import DRAIN_S, lb_checks, lb_stats, traffic_watched

KIND = "distribution"
TABLES = ()  # its definitions' own (tidy.tables)
#: the machine rule (xenobench.machine, docs/vm-noise.md) judges rates, which move with the machine's state; a
#: share of frames does not: its figures are recorded, not judged (run_trial's judge_machine off, as for a
#: search). A stall that lost frames is judged here (frames_counted)
JUDGED_INSIDE = True
#: one arrival bucket longer than any trial: the sink counts each backend's frames in one record
ARRIVAL_BUCKET_NS = 600_000_000_000
#: the generator's result kept in the outputs
GEN_KEYS = ("requested_pps", "achieved_pps", "tx_packets", "duration_s", "valid", "reason", "driver")


# --- the population's flows -------------------------------------------------------------------------
def frame_flows(frames: list[bytes]) -> Counter:
    """Frames per flow (xenobench.lb.base.Flow: IPv4 source, source port, destination, port,
    protocol) of Ethernet/IPv4 frames; a frame of another kind is refused by its index."""
    out: Counter = Counter()
    for i, f in enumerate(frames):
        if len(f) < 34 or f[12:14] != b"\x08\x00" or f[14] >> 4 != 4:
            raise XenobenchError(f"Failed to read the population's flows: frame {i} is not Ethernet/IPv4")
        l4 = 14 + (f[14] & 0x0F) * 4
        sport, dport = struct.unpack_from("!HH", f, l4) if f[23] in (6, 17) else (0, 0)
        out[Flow(str(ipaddress.IPv4Address(f[26:30])), sport, str(ipaddress.IPv4Address(f[30:34])), dport,
                 f[23])] += 1
    return out


def by_rule(lb, flows, backends: BackendSet) -> dict:
    """Each flow's backend by the LB's own rule (LoadBalancer.backend_of); None where it cannot say."""
    return {f: lb.backend_of(f, backends) for f in flows}


def rule_counts(assigned: dict, flows: Counter, names) -> tuple[dict, dict] | None:
    """(flows, frames) per backend of `names` by a rule's answers; None unless it answered for
    every flow."""
    if not assigned or any(b is None for b in assigned.values()):
        return None
    nf, nfr = dict.fromkeys(names, 0), dict.fromkeys(names, 0)
    for f, b in assigned.items():
        nf[b] = nf.get(b, 0) + 1
        nfr[b] = nfr.get(b, 0) + flows[f]
    return nf, nfr


def without_last(bs: BackendSet, rule) -> BackendSet:
    """The set without its last backend, read by the same rule (the class mask kept: an LB keeps
    it); BackendsError where the remaining weights make no set (the reason)."""
    doc = {"backends": [{"name": b.name, "mac_address": b.mac, "weight": b.weight} for b in bs.backends[:-1]]}
    if bs.class_bits is not None and rule.classes:
        doc["class_bits"] = bs.class_bits
    return parse_backends(doc, f"{bs.source} without {bs.backends[-1].name}", rule)


def disruption(lb, flows, bs: BackendSet) -> dict:
    """By the LB's rule: the flows that change backend when the set's last backend leaves and when
    it joins again (xenobench.fairness.moved), beside the ideal 1/N."""
    gone = bs.backends[-1].name
    try:
        less = without_last(bs, lb.weights)
    except BackendsError as e:
        return {"removed": gone, "error": str(e)}
    full = by_rule(lb, flows, bs)
    rest = by_rule(lb, flows, less)
    rm, add = moved(full, rest, gone), moved(rest, full, gone)
    if not rm["flows"]:
        return {"removed": gone, "error": f"{lb.kind}'s driver does not say where a flow goes ({lb.no_route})"}
    return {"removed": gone, "backends": len(bs.backends), "flows": rm["flows"], "moved_on_remove": rm["moved"],
            "moved_other_on_remove": rm["other"], "moved_on_add": add["moved"], "moved_other_on_add": add["other"],
            "ideal": 1 / len(bs.backends)}


# --- what the backends received ---------------------------------------------------------------------
class BackendCounts:
    """Frames each backend received over a `with` block: the testbed's arrival recorder where it
    has one (the generator's frames per backend MAC), else each backend node's rx counter.
    `frames` {backend node: frames}, `stray` (frames to a MAC no backend node has), `counted_by`."""

    def __init__(self, testbed):
        self.cfg = testbed.cfg
        self.rec = testbed.arrival_recorder()
        nodes = self.cfg.backend_nodes()
        self.readers = {} if self.rec is not None else {
            n.name: CounterReader(testbed.node(n.name), n.iface().name) for n in nodes}
        self.macs = {n.iface().mac.lower(): n.name for n in nodes if n.iface().mac}
        self.counted_by = "arrivals" if self.rec is not None else "rx counters"
        self.frames, self.stray, self._c0 = {n.name: 0 for n in nodes}, 0, {}

    def __enter__(self):
        if self.rec is not None:
            self.rec.start_arrivals(ARRIVAL_BUCKET_NS)
        else:
            self._c0 = {k: r.read() for k, r in self.readers.items()}
        return self

    def __exit__(self, *exc):
        try:
            if self.rec is not None:
                for a in self.rec.stop_arrivals():
                    name = self.macs.get(a.mac.lower())
                    if name is None:
                        self.stray += a.packets
                    else:
                        self.frames[name] += a.packets
            else:
                self.frames.update({k: r.read() - self._c0[k] for k, r in self.readers.items()})
        finally:
            for r in self.readers.values():
                r.close()


# --- the procedure --------------------------------------------------------------------------------
def _tunables(ctx) -> dict:
    return {"population": ctx.knob("population"), "payload": int(ctx.knob("payload")), "seed": int(ctx.knob("seed"))}


def _sent(ctx, lb, profile: str, tun: dict) -> tuple[dict, BackendCounts, dict | None, dict | None]:
    """The population at the point's rate for its duration: (generator result, backend counts,
    the LB's stats before and after)."""
    st0 = lb_stats(lb)
    with BackendCounts(ctx.testbed) as counts:
        gen = traffic_watched(ctx, profile, tun, float(ctx.knob("rate_pps")), float(ctx.knob("duration_s")))
        time.sleep(DRAIN_S)
    return gen, counts, st0, lb_stats(lb)


def _rule(lb, flows: Counter, bs: BackendSet) -> dict:
    """Where the LB's own rule sends the population: flows and frames per backend; why not, where
    its driver cannot say for every flow."""
    counts = rule_counts(by_rule(lb, flows, bs), flows, [b.name for b in bs.backends])
    return {"by": lb.split_by, "why_not": None if counts else (lb.no_route or "a flow its rule sends to no backend"),
            "flows": counts[0] if counts else None, "frames": counts[1] if counts else None}


def population_shares(ctx, lb=None) -> tuple[dict, Validity]:
    """One population through the point's LB (module docstring)."""
    if lb is None:
        raise ConfigError(f"Failed to measure the distribution of {ctx.point}: no LB runs for this point (give "
                          f"experiments.{ctx.experiment}.lbs in {ctx.testbed.cfg.path})")
    tun = _tunables(ctx)
    compiled = compile_for(ctx.testbed, ctx.plan.profile, tun)
    flows = frame_flows(compiled.frames)
    bs = load_backends(lb.backends_file(), lb.weights)
    rule = _rule(lb, flows, bs)
    gen, counts, st0, st1 = _sent(ctx, lb, ctx.plan.profile, tun)
    v = Validity()
    rx, tx = sum(counts.frames.values()) + counts.stray, int(gen.get("tx_packets") or 0)
    out = {"population": tun["population"], "payload": tun["payload"], "requested_pps": float(ctx.knob("rate_pps")),
           "generator": {k: gen[k] for k in GEN_KEYS if gen.get(k) is not None}, "tunables": gen.get("tunables"),
           "cycle_frames": compiled.cycle, "flows": len(flows), "counted_by": counts.counted_by,
           "weights": {b.name: b.weight for b in bs.backends}, "frames": counts.frames, "stray_frames": counts.stray,
           "tx_packets": tx, "rx_packets": rx, "loss_pct": 100 * (1 - rx / tx) if tx else None,
           "lb_frames": lb_checks(v, lb, st0, st1, rx, tx), "lb_stats_after": st1, "rule": rule,
           "disruption": disruption(lb, flows, bs)}
    _judge(v, out, gen, [b.name for b in bs.backends], float(ctx.knob("share_tolerance")),
           float(ctx.knob("max_loss_pct")))
    return out, v


def _gap(a: dict | None, b: dict | None, names) -> float | None:
    """The largest difference of two share maps over `names` (None where either is missing)."""
    return None if a is None or b is None else max(abs(a.get(n, 0.0) - b.get(n, 0.0)) for n in names)


def _judge(v: Validity, out: dict, gen: dict, names, tol: float, max_loss: float) -> None:
    v.require("generator_ok", bool(gen.get("valid")), gen.get("reason") or "generator reported invalid")
    v.require("traffic_sent", out["tx_packets"] > 0, "the generator sent nothing")
    stray = {n: k for n, k in out["frames"].items() if k and n not in names}
    v.require("frames_at_backends", not stray and not out["stray_frames"],
              f"frames reached backend nodes the backends file does not list ({stray}) or a MAC of no backend node "
              f"({out['stray_frames']})")
    loss = out["loss_pct"]
    v.require("frames_counted", loss is not None and loss <= max_loss,
              f"the backends counted {out['rx_packets']} of the {out['tx_packets']} frames sent, more than "
              f"max_loss_pct {max_loss:g} % lost: a share of what arrived is not the LB's split")
    measured = shares({n: out["frames"].get(n, 0) for n in names})
    lb_share = shares({n: (out["lb_frames"] or {}).get(n, 0) for n in names}) if out["lb_frames"] else None
    gap = _gap(measured, lb_share, names)
    v.require("lb_shares_match", gap is not None and gap <= tol,
              f"the LB's counters give each backend a share up to {gap} away from the frames counted at the "
              f"backends (share_tolerance {tol:g})" if gap is not None else "the LB's stats could not be read")
    if out["rule"]["frames"] is None:
        return  # no rule to check (the driver cannot say where a flow goes): measured only
    gap = _gap(measured, shares(out["rule"]["frames"]), names)
    out["rule"]["gap"] = gap
    v.require("rule_matches_frames", gap is not None and gap <= tol,
              f"the LB's rule (its driver's backend_of) sends each backend a share of the population's frames up to "
              f"{gap} away from what the backends received (share_tolerance {tol:g}): backend_of does not follow "
              f"its data plane")


PROCEDURES = {"population_shares": population_shares}


def headline(o: dict) -> str:
    """A valid trial's value on the terminal: each backend's share of the frames, and Jain's index."""
    s = shares(o["frames"]) or {}
    f = fairness(s, shares(o["weights"]) or {})
    return ", ".join(f"{b} {100 * x:.1f} %" for b, x in s.items()) + f"; Jain {f['jain_index']:.3f}"


# --- rows --------------------------------------------------------------------------------------------
def _per_backend(measure: str, share: dict | None) -> list[tuple[str, float]]:
    return [(backend_metric(measure, b), x) for b, x in (share or {}).items()]


def _figures(prefix: str, share: dict | None, weight: dict) -> list[tuple[str, float | None]]:
    return [(prefix + k, x) for k, x in fairness(share, weight).items()] if share else []


def trial_values(o: dict) -> dict[str, float | None]:
    """A trial's distribution figures by metric (before rows: None where not measurable)."""
    names = list(o["weights"])
    weight = shares(o["weights"])
    measured = shares({n: o["frames"].get(n, 0) for n in names})
    rule = o["rule"]
    flow_share = shares(rule["flows"]) if rule["flows"] else None
    lb_share = shares({n: (o.get("lb_frames") or {}).get(n, 0) for n in names}) if o.get("lb_frames") else None
    return dict([*_per_backend("frame_share", measured), *_per_backend("lb_frame_share", lb_share),
                 *_per_backend("rule_frame_share", shares(rule["frames"]) if rule["frames"] else None),
                 *_per_backend("rule_flow_share", flow_share), *_per_backend("weight_share", weight),
                 *_figures("", measured, weight), *_figures("rule_flow_", flow_share, weight),
                 ("frames", o["rx_packets"]), ("flows", o["flows"])])


DISRUPTION = (("moved_on_remove_share", "moved_on_remove"), ("moved_other_on_remove_share", "moved_other_on_remove"),
              ("moved_on_add_share", "moved_on_add"), ("moved_other_on_add_share", "moved_other_on_add"),
              ("moved_ideal_share", "ideal"), ("flows", "flows"))


def rows(t) -> dict[str, list[dict]]:
    """A distribution trial's rows (`t`: xenobench.measure.TrialRecord); a figure that cannot be
    measured (max/min where a backend got nothing; the rule's where the LB cannot say where a flow
    goes) has no row. What the LB's rule gives (rule_..., disruption) says so in its source
    (`<trial>:rule`)."""
    o = t.outputs
    gen = o.get("generator") or {}
    secs = float(gen.get("duration_s") or 0)
    common = dict(t.common, payload_bytes=o["payload"], offered_pps=gen.get("achieved_pps"),
                  measured_pps=o["rx_packets"] / secs if secs > 0 else None)

    def one(m, x, tag):
        return row(**dict(common, source=t.common["source"] + tag), metric=m, value=float(x), unit=_unit(m))
    dist = [one(m, x, ":rule" if m.startswith("rule_") else "") for m, x in trial_values(o).items() if x is not None]
    d = o.get("disruption") or {}
    dis = [] if "error" in d else [one(m, d[k], f":rule:remove-{d['removed']}") for m, k in DISRUPTION]
    return {"distribution": dist, "disruption": dis}


def _unit(m: str) -> str:
    return metric(m).unit  # every metric of this kind is known (xenobench.results.METRICS)


def _clipped(m: str, x: float) -> float:
    """x within what metric `m` can be (xenobench.results.METRICS): a t interval of few repetitions
    reaches past a share's 0..1."""
    rule = metric(m)
    lo = -math.inf if rule.low is None else rule.low
    hi = math.inf if rule.high is None else rule.high
    return min(max(x, lo), hi)


#: the figures a point's repetitions get an interval of
INTERVAL = ("frame_share", *FAIRNESS_METRICS)


def point_rows(records: list) -> dict[str, list[dict]]:
    """Over a point's valid repetitions (two or more): each measured figure's mean with its 95 % t
    interval, `<figure>_mean`, `_ci_low`, `_ci_high` (per backend: `frame_share_mean@<backend>`)."""
    by: dict[str, list[float]] = {}
    for t in records:
        for m, x in trial_values(t.outputs).items():
            if x is not None and split_backend(m)[0] in INTERVAL:
                by.setdefault(m, []).append(x)
    t0 = records[0]
    common = {k: t0.common[k] for k in ("testbed", "experiment", "point", "lb", "generator")}
    out = []
    for m, vals in by.items():
        iv = mean_interval(vals) if len(vals) == len(records) else None
        if iv is None:
            continue
        iv = [_clipped(m, x) for x in iv]
        base, b = split_backend(m)
        out += [row(**common, payload_bytes=t0.outputs["payload"],
                    metric=f"{base}_{part}" if b is None else backend_metric(f"{base}_{part}", b), value=x,
                    unit=_unit(m), source=f"{t0.trial.path.parent.relative_to(t0.resdir)}: {len(vals)} repetitions")
                for part, x in zip(("mean", "ci_low", "ci_high"), iv)]
    return {"distribution": out} if out else {}


def check_section(cfg, experiment: str, section: dict) -> None:
    """When the plan is made: every population of the section is one its definition's profile
    offers (xenobench.fairness.populations)."""
    from ..definitions import definition
    from ..traffic.profiles import resolve_profile
    path = resolve_profile(definition(experiment).profile)
    known = populations(path)
    bad = [p for p in section.get("populations") or () if p not in known]
    if bad:
        raise ConfigError(f"Failed to plan experiment {experiment}: experiments.{experiment}.populations: {bad[0]!r} "
                          f"is not a population of {path.name} (known: {', '.join(known)}) in {cfg.path}")
