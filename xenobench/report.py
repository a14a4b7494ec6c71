"""The run report: results/<testbed>/report.md (and report.html, the same document as HTML),
written at the end of `snakemake all`.

It starts with the run's header (commit, date, config and its sha256, testbed, machine, validity
counts), then lists every figure by experiment, every invalid trial with its reasons, the wall time
per experiment, the headline numbers of this testbed, and the published-vs-reproduced table (from
the thesis's raw data, and from this testbed where the comparison is meaningful). Beside it
report.tex: the headline and published-vs-reproduced tables in LaTeX (booktabs, xenobench.latex).

RunSummary is what `snakemake --report` reads for its header and figure captions (report/*.rst
through Snakemake's caption templating): the same header, and per figure what it shows and the
trials behind it.
"""

from __future__ import annotations

import csv
import datetime
import functools
import hashlib
import html
import json
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import REPO_ROOT, latex, machine
from .errors import DataError, XenobenchError
from .layout import chosen_reasons, read_json, trial_results
from .latency import NOT_DISTINGUISHABLE
from .lb import LBS
from .rateblocks import MIN_ROUNDS, ratios_from_rows
from .results import read_all

HARDWARE_TESTBEDS = ("fips", "thesis")


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join("" if c is None else str(c) for c in r) + " |" for r in rows]
    return out


def _reproduced(r: dict):
    """The value, with its 95 % CI and verdict where the row comes from the paired design."""
    if "ci" not in r:
        return r["reproduced"]
    return f"{r['reproduced']} [{r['ci'][0]}, {r['ci'][1]}] ({r['verdict']})"


def _compare_rows(rows: list[dict]) -> list[list]:
    """Published vs reproduced; a shape this testbed cannot tell apart: the sentence and why, no deviation."""
    def dev(r):
        return f"{r['deviation_pct']:+.2f} %" if isinstance(r["reproduced"], (int, float)) else "—"

    def rep(r):
        return _reproduced(r) if isinstance(r["reproduced"], (int, float)) else f"{r['reproduced']} ({r.get('why', '')})"
    return [[r["metric"], r["published"], rep(r), r["unit"], dev(r),
             "yes" if r["ok"] else "**no**", r["source"]] for r in rows]


MAX_COMPARE_BYTES = 1 << 20  # `xenobench compare` writes one short row per published number
_NUMBER = (int, float)
_COMPARE_FIELDS = {"metric": str, "unit": str, "source": str, "ok": bool, "deviation_pct": _NUMBER,
                   "published": _NUMBER}
_KIND_NAMES = {str: "a string", bool: "true or false", _NUMBER: "a number"}


def read_compare_rows(path: str | Path) -> list[dict]:
    """The rows `xenobench compare` wrote to a JSON file (the thesis data's compare.json), checked
    field by field so a wrong or truncated file is named, not a KeyError in the report."""
    from .config import read_capped
    where = f"Failed to read the comparison {path}"
    try:
        rows = json.loads(read_capped(Path(path), MAX_COMPARE_BYTES))
    except OSError as e:
        raise DataError(f"{where}: {e.strerror or e}") from None
    except ValueError as e:  # too large, not UTF-8, not JSON
        raise DataError(f"{where}: {e}") from None
    if not isinstance(rows, list):
        raise DataError(f"{where}: expected a JSON list of rows (`xenobench compare` output), "
                        f"got {type(rows).__name__}")
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise DataError(f"{where}: row {i}: expected an object, got {type(r).__name__}")
        for key, kind in _COMPARE_FIELDS.items():
            v = r.get(key)
            if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
                raise DataError(f"{where}: row {i}: {key}: {v!r} is not {_KIND_NAMES[kind]}")
            if key == "deviation_pct" and not np.isfinite(v):
                raise DataError(f"{where}: row {i}: {key}: {v!r} is not a finite number")
        if "reproduced" not in r:
            raise DataError(f"{where}: row {i}: reproduced: missing")
        if "ci" in r and not (isinstance(r["ci"], list) and len(r["ci"]) == 2 and "verdict" in r):
            raise DataError(f"{where}: row {i}: ci: {r['ci']!r} is not [low, high] with a verdict")
    return rows


def _ndr_pdr_lines(tidy: dict) -> list[list]:
    """NDR/PDR per LB and frame: median over searches, the bounds' spread, trials per search."""
    if "ndr_pdr" not in tidy:
        return []
    x, out = tidy["ndr_pdr"], []
    for (lb, pl), g in x.groupby(["lb", "payload_bytes"]):
        trials = g[g.metric == "search_trials"].value
        for m, name in (("ndr_pps", "NDR (0 % loss)"), ("pdr_pps", "PDR (0.5 % loss)")):
            v = g[g.metric == m].value
            if len(v):
                out.append([f"{name}, {lb}, {int(pl) + 42} B frame", f"{v.median() / 1e6:.4f} Mpps", _span(v, 1e6),
                            len(v)])
        if len(trials):
            out.append([f"trials per search, {lb}, {int(pl) + 42} B frame", f"{trials.median():g}",
                        _span(trials, fmt="g"), len(trials)])
    # the paired design: each LB's bound relative to the reference's searched in the same turns
    for pl, g in x.groupby("payload_bytes"):
        for goal in ("ndr", "pdr"):
            for r in ratios_from_rows(g, goal):
                out.append([f"{goal.upper()} relative to {r.reference}, {r.lb}, {int(pl) + 42} B frame",
                            f"{r.median:.3f}: {_verdict(r)}", f"95 % CI [{r.ci_low:.3f}, {r.ci_high:.3f}]",
                            r.repetitions])
    return out


def _verdict(r) -> str:
    """A ratio's verdict in words (rateblocks.RateRatio), saying why where too few ratios make it."""
    if r.verdict != NOT_DISTINGUISHABLE:
        return f"{r.lb} {r.verdict} than {r.reference}"
    if r.rounds < MIN_ROUNDS:
        return f"{NOT_DISTINGUISHABLE} ({r.rounds} ratios; an order needs {MIN_ROUNDS})"
    return NOT_DISTINGUISHABLE


@dataclass(frozen=True)
class PairedPoint:
    """A point of the paired RTT design (its rtt_paired rows): where it was measured and its pairs."""
    experiment: str
    point: str
    server: object
    where: str  # "rtt, server xdp, idle", "rtt_load, server xdp, split 50/50, 100 kpps"
    idle: bool  # no background load
    diffs: list


def _paired_points(tidy: dict) -> list[PairedPoint]:
    """Every point of rtt_paired with its PairedDiffs (xenobench.latency.diffs_from_rows): what the
    paired table and the headline's added RTT both read."""
    from . import latency
    if "rtt_paired" not in tidy:
        return []
    out = []
    for (exp, pt), g in tidy["rtt_paired"].groupby(["experiment", "point"], sort=False):
        srv, sp, bg = g.server.iloc[0], g.split.iloc[0], g.background_pps.iloc[0]
        idle = not isinstance(sp, str)
        where = f"{exp}, server {srv}" + (", idle" if idle else f", split {sp}, {bg / 1e3:g} kpps")
        out.append(PairedPoint(exp, pt, srv, where, idle, latency.diffs_from_rows(g)))
    return out


def _diff_cells(d) -> tuple[str, str, str]:
    """A paired difference (xenobench.latency.PairedDiff) as the report prints it: its median, its
    95 % CI and its verdict."""
    return (f"{d.median_us:+.2f} µs", f"[{d.ci_low_us:+.2f}, {d.ci_high_us:+.2f}]",
            d.verdict if d.verdict == NOT_DISTINGUISHABLE else f"{d.verdict} than {d.reference}")


def _paired_section(tidy: dict) -> list[str]:
    """The paired design: each LB against no LB (and the LBs against each other) with the 95 % CI;
    a ranking only where the CI excludes zero."""
    from . import latency
    points = _paired_points(tidy)
    if not points:
        return []
    L = ["## Added latency, paired design (median of per-round differences, bootstrap 95 % CI)", ""]
    rows, ranks = [], []
    for p in points:
        for d in p.diffs:
            med, ci, verdict = _diff_cells(d)
            rows.append([p.where, d.lb, d.reference, med, ci, d.pairs, verdict])
        ranks.append(f"- {p.where}: {latency.ranking(p.diffs)}")
    L += _table(["where", "LB", "vs", "median difference", "95 % CI", "pairs", "verdict"], rows)
    L += ["", "Ranking ('<' only where the pair's CI excludes zero; '~': not distinguishable):", "", *ranks, ""]
    return L


def _rank_section(tidy: dict) -> list[str]:
    """The interleaved rate design (xenobench.measure.rank): per point each LB against the reference and
    every pair, median ratio with its bootstrap 95 % CI; an order only where the CI excludes 1."""
    if "rate_ranking" not in tidy:
        return []
    x = tidy["rate_ranking"]
    L = ["## Rates a reviewer can rank (interleaved blocks, atomic XDP switch; median ratio, bootstrap 95 % CI)", ""]
    rows = []
    for measure, what in (("rate", "rx per second"), ("rate_per_cpu", "rx per CPU-second of the DUT's NAPI thread")):
        for pay, g in x.groupby("payload_bytes"):
            for r in ratios_from_rows(g, measure):
                rows.append([what, f"{pay:g} B", r.lb, r.reference, f"{r.median:.4f}", f"[{r.ci_low:.4f}, {r.ci_high:.4f}]",
                             f"{r.half_width_pct:.2f} %", f"{r.rounds} ({r.repetitions})", _verdict(r)])
    L += _table(["measure", "payload", "LB", "vs", "median ratio", "95 % CI", "CI half-width", "rounds (repetitions)", "verdict"], rows)
    L += ["", "A ratio is one round's rate of the LB over the other's in the same round (blocks of one repetition, "
              "the generator unpaced throughout); an order is claimed only where the CI excludes 1. The CI "
              "resamples the repetitions, then the rounds within them: the ratios move with the machine's state "
              "between repetitions (programs loaded afresh, minutes apart), not only from round to round. The second "
              "measure divides out the share of its CPU the LB port's pinned NAPI thread got in the block (on a "
              "shared machine other threads take turns on that CPU). The interval is this run's median's: a rerun of "
              "the study on a machine of the same kind, in the states the machine rule accepts, carries its own "
              "noise as well, so its median falls inside this interval about 5 times in 6 and inside the interval "
              "widened by the square root of 2 about 19 times in 20 (`xenobench diff` reads two runs' intervals "
              "against each other). Neither covers a machine of another kind (another host CPU or cache layout), "
              "where the ratio itself moves (docs/vm-noise.md).", ""]
    left = _rounds_left_out(tidy.get("rate_blocks"))
    if left:
        why = "; ".join(f"over experiments.{r.key}, {r.what}" for r in machine.RULES if r.per_block)
        L += [f"Rounds left out of the ranking: {left} (a block the machine rule judged disturbed: {why}. "
              "rate_blocks.csv has their blocks, block_round_kept 0).", ""]
    return L


def _rounds_left_out(blocks) -> str:
    """'N of M' rounds over the rank trials' blocks (rate_blocks rows) that were left out, or ''."""
    if blocks is None or "metric" not in blocks:
        return ""
    k = blocks[blocks.metric == "block_round_kept"]
    if k.empty:
        return ""
    rnd = k.source.str.replace(r":block-\d+:", ":", regex=True)  # trial + round
    per = k.groupby(rnd).value.min()
    return f"{int((per == 0).sum())} of {len(per)}" if (per == 0).any() else ""


def _update_section(tidy: dict) -> list[str]:
    """Backend changes under load (xenobench.measure.update): per LB the medians over every change cycle and
    repetition, and the burst throughput against the same LB without changes."""
    if "update" not in tidy:
        return []
    x = tidy["update"]
    L = ["## Backend changes under load (medians over every change; frame times where the frames arrive)", ""]

    def med(g, m, fmt):
        v = g[g.metric == m].value
        return fmt.format(float(v.median())) if len(v) else "n/a"
    rows = []
    for lb, g in x.groupby("lb"):
        d = g[g.metric == "drained"].value
        rows.append([lb, f"{float(g.background_pps.median()) / 1e3:g} kpps",
                     med(g, "remove_control_ms", "{:.2f} ms"), med(g, "remove_last_frame_ms", "{:.2f} ms"),
                     med(g, "done_to_last_frame_ms", "{:+.2f} ms"), med(g, "add_control_ms", "{:.2f} ms"),
                     med(g, "add_first_frame_ms", "{:.2f} ms"), med(g, "after_done_frames", "{:.0f}"),
                     f"{int(d.sum())}/{len(d)}", med(g, "loss_pct", "{:.2f} %")])
    L += _table(["LB", "background", "removal: command → report", "command → last frame at removed",
                 "report → last frame", "add: command → report", "command → first frame at added",
                 "frames to removed after report", "drained", "loss over the cycle"], rows)
    stuck = [r[0] for r in rows if r[8].split("/")[0] != r[8].split("/")[1]]
    if stuck:
        L += ["", f"Finding: the removed backend kept receiving after the LB reported the change done ({', '.join(stuck)}): "
                  "flows already in the LB's connection table (Katran's LRU) keep a removed real; there the last "
                  "frame and the first frame after the add-back are not measurable (no row)."]
    if "update_burst" in tidy:
        b = tidy["update_burst"]
        b = b[b.metric == "rx_pps"]
        brows = []
        for lb, g in b.groupby("lb"):
            ref = g[g.changes_per_s == 0].value.median()
            for r, gr in g.groupby("changes_per_s"):
                brows.append([lb, f"{r:g}", f"{float(gr.value.median()) / 1e3:.1f} kpps",
                              f"{100 * float(gr.value.median()) / ref:.1f} %" if ref == ref and ref > 0 else "n/a"])
        L += ["", "Throughput during a burst of changes (received rate over the burst's window):", ""]
        L += _table(["LB", "changes/s requested", "received", "of the same LB without changes"], brows)
    if "update_install" in tidy:
        from .plots import install_points
        u = tidy["update_install"]
        irows = []
        for lb, by in sorted(install_points(u).items()):
            for e in sorted(by):
                r = [a for a, _ in by[e]]
                ap = [b for _, b in by[e] if b]
                irows.append([lb, f"{e:g}", f"{float(np.median(r)):,.0f}", f"{float(np.median(ap)):,.0f}" if ap else "n/a",
                              len(r)])
        L += ["", "Installation rate (one change of N entries; entries/s from the command to the LB's report, "
                  "and by the LB's own apply time):", ""]
        L += _table(["LB", "entries", "entries/s", "entries/s (LB's apply)", "changes"], irows)
        ov = u[u.metric == "over_limit_refused"]
        for lb, g in ov.groupby("lb"):
            f = u[(u.lb == lb) & (u.metric == "frames_after_refusal")].value
            L += ["", f"Above its limit ({lb}): {int(g.value.sum())} of {len(g)} changes refused; its old set "
                      f"forwarded {int(f.min()) if len(f) else 0}+ frames in the check after each."]
    L.append("")
    return L


def _open_questions_section(tidy: dict) -> list[str]:
    """The paper's open questions (§6): hash-based distribution instead of the source-address classes,
    per population and LB from the distribution table (xenobench.fairness.summary); the per-client
    table in pipe entries (no experiment fills one yet)."""
    from .fairness import summary

    def f(v, fmt=".3f", none="n/a"):
        return none if v is None else format(v, fmt)
    L = ["## The paper's open questions", "", "### Hash-based distribution instead of the source-address classes", ""]
    d = tidy.get("distribution")
    rows = summary(d, tidy.get("disruption")) if d is not None else []
    if not rows:
        L += ["Not measured in this run (no valid trial of an experiment filling the distribution table).", ""]
    else:
        L += _table(["population", "LB", "split by", "Jain (frames)", "max/min", "χ² from the weights",
                     "Jain (flows, LB's rule)", "flows moved when the last backend leaves (LB's rule)", "repetitions"],
                    [[r["population"], r["lb"], LBS[r["lb"]].split_by if r["lb"] in LBS else "?", f(r["jain_index"]),
                      f(r["max_min_ratio"], ".2f", "∞ (a backend got none)"), f(r["chi2_distance"]),
                      f(r["rule_flow_jain_index"], none="n/a (no rule)"),
                      f"{f(r['moved_on_remove'])} (ideal {f(r['moved_ideal'])})", r["repetitions"]] for r in rows])
        L += ["", "Frames counted where they arrive (the backends' sink; hosts: rx counters). Jain's index and "
                  "max/min of each backend's share over its weight's share (1: as the weights); flows: the "
                  "population's flows through the LB's own rule (its driver's backend_of); medians over the "
                  "repetitions.", ""]
    tables = sorted(k for k in tidy if k.startswith("client_table"))
    L += ["### A per-client table in pipe entries", "",
          f"Measured: table(s) {', '.join(tables)}." if tables else "Not measured yet.", ""]
    return L


NO_SPREAD = "—"  # a headline of one trial
UNPAIRED = "no interval (unpaired: a difference of medians)"  # the added RTT of the thesis's protocol


def _span(v, scale: float = 1.0, fmt: str = ".4f") -> str:
    """The smallest and largest of a headline's trials, in the unit of its value ('—' for one)."""
    if len(v) < 2:
        return NO_SPREAD
    return f"{v.min() / scale:{fmt}}–{v.max() / scale:{fmt}}"


def generator_bound(rows) -> str:
    """' — generator-bound (...)' for an LB's rate at a payload (its rows of the experiment's table)
    where the generator at its own rate set most of its kept blocks' rates (generator_bound_share,
    xenobench.measure.rank.block_figures): the rate is the generator's ceiling, not the LB's; ''
    otherwise or without the metric (paced, the thesis's protocol, TRex)."""
    share = rows[rows.metric == "generator_bound_share"].value
    if share.empty or share.median() <= 0.5:
        return ""
    return f" — generator-bound (the generator's own rate set {share.median():.0%} of the blocks)"


def _headlines(tidy: dict) -> list[list]:
    """[quantity, median, spread (the trials' min-max; a ratio's CI), trials] per headline number."""
    out = []
    if "pps" in tidy:
        p = tidy["pps"]
        x = p[p.metric == "rx_pps"]
        for (lb, pl), g in x.groupby(["lb", "payload_bytes"]):
            bound = generator_bound(p[(p.lb == lb) & (p.payload_bytes == pl)])
            out.append([f"rx rate, {lb}, {int(pl)} B payload", f"{g.value.median() / 1e6:.4f} Mpps{bound}",
                        _span(g.value, 1e6), len(g)])
    if "compare" in tidy:
        c = tidy["compare"]
        for lb, g in c[c.metric == "max_pps"].groupby("lb"):
            bound = generator_bound(c[c.lb == lb])
            out.append([f"max rate at 64 B frames, {lb}", f"{g.value.median() / 1e6:.4f} Mpps{bound}",
                        _span(g.value, 1e6), len(g)])
        for lb, g in c[c.metric == "lb_prog_ns_per_frame"].groupby("lb"):
            out.append([f"LB program time per frame (BPF run-time statistics), {lb}",
                        f"{g.value.median():.1f} ns", _span(g.value, fmt=".1f"), len(g)])
    if "loss" in tidy:
        x = tidy["loss"][tidy["loss"].metric == "loss_pct"]
        for req, g in x.groupby(x.source.str.extract(r"rate_pps-(\d+)")[0].astype(float)):
            out.append([f"loss at {int(req) / 1e3:g} kpps requested", f"{g.value.median():.3f} %",
                        _span(g.value, fmt=".3f"), len(g)])
    if "rtt_summary" in tidy:
        m = tidy["rtt_summary"]
        med = m[m.metric == "rtt_median_us"]
        idle = med[med.split.isna()]  # per experiment: the points without a background
        for exp, e in idle.groupby("experiment", sort=False):
            for (lb, srv), g in e.groupby(["lb", "server"], dropna=False):
                out.append([f"RTT median ({exp}), {lb}, server {srv}", f"{g.value.median():.1f} µs",
                            _span(g.value, fmt=".1f"), len(g)])
            out += _added_rtt(tidy, exp, e)
        load = med[med.split.notna()]
        for (exp, lb, sp, bg), g in load.groupby(["experiment", "lb", "split", "background_pps"]):
            out.append([f"RTT median under load ({exp}), {lb}, split {sp}, {bg / 1e3:g} kpps",
                        f"{g.value.median():.1f} µs", _span(g.value, fmt=".1f"), len(g)])
    if "rtt_capacity" in tidy:  # what rtt_load's levels (update's load) are shares of (capacity_from: self)
        c = tidy["rtt_capacity"]
        c = c[c.metric == "max_pps"]
        for (exp, lb, sp), g in c.groupby(["experiment", "lb", c.split.fillna("")], sort=False):
            out.append([f"capacity under {exp}'s conditions ({exp}'s 100 %), {lb}" + (f", split {sp}" if sp else ""),
                        f"{g.value.median() / 1e3:.1f} kpps", _span(g.value, 1e3, ".1f"), len(g)])
    return out


def _added_rtt(tidy: dict, exp: str, idle) -> list[list]:
    """Headline rows of each LB's added RTT against no LB at an experiment's idle points: the paired
    design's estimate with its 95 % CI (as the paired table gives it, _diff_cells); at points not
    measured paired (the thesis's protocol; `idle`: their rtt_summary median rows) the difference
    of the medians, which has no interval."""
    out, paired = [], set()
    for p in _paired_points(tidy):
        if p.experiment == exp and p.idle:
            paired.add(p.point)
            for d in (d for d in p.diffs if d.reference == "none"):
                med, ci, verdict = _diff_cells(d)
                out.append([f"added RTT ({exp}), {d.lb} vs no LB, server {p.server}", f"{med}: {verdict}",
                            f"95 % CI {ci}", d.pairs])
    for srv, s in idle[~idle.point.isin(paired)].groupby("server", dropna=False):
        base = s[s.lb == "none"].value.median()
        if np.isnan(base):  # no trial without an LB at this server
            continue
        for lb, g in s[s.lb != "none"].groupby("lb"):
            added = g.value.median() - base
            # an LB cannot take time off the path: a negative difference of medians is noise
            note = " (below 0: within the noise of this testbed)" if added < 0 else ""
            out.append([f"added RTT ({exp}), {lb} vs no LB, server {srv}", f"{added:+.1f} µs{note}", UNPAIRED,
                        len(g)])
    return out


def _is_rate(experiment) -> bool:
    """A rate experiment (experiments/<id>.yaml kind: rate): traffic counted along its path."""
    from .definitions import definitions
    d = definitions().get(experiment) if isinstance(experiment, str) else None
    return d is not None and d.kind == "rate"


#: the stages of an LB on the host, in path order (the columns of the first frame-loss table)
HOST_STAGES = ("the generator", "the switch", "the LB's ingress", "the LB", "after the LB")
#: the stages of an LB in a DPU's eSwitch (XenoFlow on the BlueField, xenoflow.mode doca): the
#: frames enter the DPU's uplink p0 and leave by p1 through the hairpin; the host port behind the
#: DPU is not on their path
DPU_STAGES = ("the generator", "the switch", "the DPU's port", "the LB's pipe", "the hairpin", "after the LB")


def _dpu_ports(cfg, lb_kind):
    """(node, p0, p1) names of the DPU an LB runs in (XenoFlow's DOCA build: the node of role dpu,
    its lb_port ingress and egress), None for an LB on a host."""
    if lb_kind not in ("xenoflow", "xenoflow-hash") or (cfg.section("xenoflow") or {}).get("mode") != "doca":
        return None
    dpus = cfg.nodes_with_role("dpu")
    if not dpus or dpus[0].lb_port("ingress") is None or dpus[0].lb_port("egress") is None:
        return None
    d = dpus[0]
    return d.name, d.lb_port("ingress").name, d.lb_port("egress").name


def _stages_row(exp, lb, v: list[int], where: tuple[str, ...]) -> list:
    """[experiment, lb, offered, a cell per stage, received, most lost at]: v = [offered, the loss
    at each stage of `where`, received]. A stage that "lost" a negative count got frames from
    nowhere: beyond a few stray frames (a backend's own ARP) the counters disagree, named; within
    them the cell says what it is."""
    n = len(where)
    worst = max(range(n), key=lambda i: v[1 + i])
    tolerance = max(10, v[0] // 1000)
    bad = [where[i] for i in range(n) if v[1 + i] < -tolerance]
    stages = [f"0 ({-x} stray)" if -tolerance <= x < 0 else x for x in v[1:1 + n]]
    return [exp, lb, v[0], *stages, v[1 + n], f"counters disagree ({', '.join(bad)}: negative)" if bad
            else where[worst] if v[1 + worst] > 0 else "nowhere"]


def _drop_rows(trials) -> tuple[list[list], list[list]]:
    """Where the frames of the offered-load trials were lost, summed per experiment and LB over the
    valid trials, from the counters every trial snapshots (interface names from its config's roles)
    and the LB's own counters: (rows of the LBs on a host, rows of the LBs in a DPU's eSwitch).

    An LB on a host (HOST_STAGES): at the generator (frames it made that its device refused), in the
    switch (taken by the generator's device, never offered to the LB's ingress), at the LB's ingress
    (its receive ring was full: rx_dropped), in the LB (received, not sent out of its egress, or out
    of its ingress for an LB that sends back by XDP_TX, Katran) and after it.

    An LB in the DPU's eSwitch (DPU_STAGES; XenoFlow on the BlueField: its frames never reach the
    host port, whose counters say nothing of them): in the switch (taken by the generator's device,
    not received at the DPU's uplink p0: mlx5 rx_packets_phy), at the DPU's port (rx_discards_phy:
    no receive buffer), in the LB's pipe (received at p0 and not forwarded by an entry: the pipe's
    miss and anything the eSwitch dropped before it; XenoFlow's per-backend counters, the trial's
    lb_forwarded, are what it forwarded), in the hairpin (forwarded, not sent out of p1:
    tx_packets_phy) and after the LB (sent out of p1, not received by the backends). rx_packets_phy
    is taken to count the frames later discarded for lack of buffers too (the port's frames received
    OK); the DPU's ports are those of its lb_port ingress and egress. A paired design's trial (blocks
    of several LBs switched on one port) is left out: its counters hold no one LB's path."""
    from .config import load_config
    cfgs, host, dpu = {}, {}, {}
    for t, r in trials:
        if not _is_rate(r.get("experiment")) or not r.get("valid"):
            continue
        if ((r.get("outputs") or {}).get("facts") or {}).get("paired"):  # blocks of several LBs: no one LB's path
            continue
        try:
            meta = json.loads(t.metadata.read_text())
            if meta["config"] not in cfgs:
                cfgs[meta["config"]] = load_config(meta["config"])
            cfg = cfgs[meta["config"]]
            out = json.loads(t.attempt(r["chosen_attempt"]).outputs.read_text())
            c = {k: v["view"] for k, v in out["counters"].items()}
            lb_kind = (r["outputs"].get("facts") or {}).get("lb")  # the LB the trial recorded
            # every traffic phase the counters span: the rate's, and compare's program-cost phase
            gens = [out["generator"]] + [p for p in [(out.get("lb_prog") or {}).get("phase")] if p]
            rx_be = sum(c[f"{b.name}:{b.iface().name}"]["rx_packets"] for b in cfg.backend_nodes())
            sent = sum(int(g.get("tx_packets") or 0) for g in gens)
            # frames the generator's device took (its own count where it has one, else all it made)
            link = sum(int(g.get("tx_link_packets") if g.get("tx_link_packets") is not None
                           else g.get("tx_packets") or 0) for g in gens)
            refused = sum(int(g.get("tx_dropped") or 0) for g in gens)
            key = (r["experiment"], lb_kind)
            ports = _dpu_ports(cfg, lb_kind)
            if ports:
                node, p0, p1 = ports
                rx, tx = c[f"{node}:{p0}"], c[f"{node}:{p1}"]
                fwd = int(out["lb_forwarded"])
                rx_ok = rx["rx_packets_phy"] - rx["rx_discards_phy"]
                row = [sent, sent - link + refused, link - rx["rx_packets_phy"], rx["rx_discards_phy"],
                       rx_ok - fwd, fwd - tx["tx_packets_phy"], tx["tx_packets_phy"] - rx_be, rx_be]
                sums = dpu
            else:
                lb = cfg.role("lb")
                ing = c[f"{lb.name}:{(lb.lb_port('ingress') or lb.iface()).name}"]
                kind = LBS.get(lb_kind)
                out_port = "ingress" if kind is not None and kind.out_of_ingress else "egress"  # Katran: XDP_TX
                eg = c[f"{lb.name}:{(lb.lb_port(out_port) or lb.iface()).name}"]
                row = [sent, sent - link + refused, link - ing["rx_packets"] - ing["rx_dropped"],
                       ing["rx_dropped"], ing["rx_packets"] - eg["tx_packets"], eg["tx_packets"] - rx_be, rx_be]
                sums = host
        except (OSError, ValueError, KeyError, TypeError, XenobenchError):
            continue
        sums[key] = [a + b for a, b in zip(sums.get(key, [0] * len(row)), row)]
    return ([_stages_row(e, lb, v, HOST_STAGES) for (e, lb), v in host.items()],
            [_stages_row(e, lb, v, DPU_STAGES) for (e, lb), v in dpu.items()])


def _drop_section(trials) -> list[str]:
    """The report's "Where frames were lost": a table for the LBs on a host, one for an LB in the
    DPU's eSwitch (_drop_rows); [] when no offered-load trial is valid."""
    host, dpu = _drop_rows(trials)
    if not host and not dpu:
        return []
    L = ["## Where frames were lost (offered-load trials, from the trials' counters)", ""]
    if host:
        L += _table(["experiment", "lb", "offered", "at the generator", "in the switch", "at the LB's ingress",
                     "in the LB", "after the LB", "received by the backends", "most lost at"], host)
        L.append("")
    if dpu:
        L += ["LB in the DPU's eSwitch (XenoFlow on the BlueField): from the DPU's uplink p0 (mlx5 "
              "rx_packets_phy, rx_discards_phy) through the LB's pipe (its per-backend counters: what it "
              "forwarded) and the hairpin to p1 (tx_packets_phy); the host port behind the DPU is not on the "
              "frames' path.", ""]
        L += _table(["experiment", "lb", "offered", "at the generator", "in the switch", "at the DPU's port",
                     "in the LB's pipe", "in the hairpin", "after the LB", "received by the backends",
                     "most lost at"], dpu)
        L.append("")
    return L


def _hash_split_rows(trials) -> list[list]:
    """What an LB that splits by flow hash (Katran) sent to each backend in the latency trials, summed
    over the valid trials per experiment, point and LB: measured from its own counters (the trial's
    or paired block's lb_split), beside each backend's share of its ring. A split's caption (single,
    50/50, 70/30, worst) is the class split the background profile makes; such an LB does not follow it."""
    sums: dict = {}
    for _, r in trials:
        if not r.get("valid"):
            continue
        out = r.get("outputs") or {}
        pt = r.get("point") or {}
        where = (f"split {pt['split']}, {float(pt.get('level_pps') or 0) / 1e3:g} kpps" if pt.get("split")
                 else "idle")
        recs = [((out.get("facts") or {}).get("lb"), out.get("lb_split"))]
        recs += [(b.get("lb"), b.get("lb_split")) for b in out.get("blocks") or ()]
        for lb, rec in recs:
            if not isinstance(rec, dict) or not isinstance(rec.get("packets"), dict):
                continue
            key = (r.get("experiment"), where, lb)
            acc = sums.setdefault(key, {"packets": {}, "ring": rec.get("ring_share") or {}, "n": 0})
            acc["n"] += 1
            for name, n in rec["packets"].items():
                acc["packets"][name] = acc["packets"].get(name, 0) + int(n)
    rows = []
    for (exp, where, lb), a in sorted(sums.items(), key=lambda kv: tuple(map(str, kv[0]))):
        total = sum(a["packets"].values())
        names = sorted(a["packets"])
        rows.append([exp, where, lb, ", ".join(f"{n} {a['packets'][n]}" for n in names),
                     ", ".join(f"{n} {100 * a['packets'][n] / total:.1f} %" for n in names) if total else "-",
                     ", ".join(f"{n} {100 * a['ring'][n]:.1f} %" for n in sorted(a["ring"])) or "-", a["n"]])
    return rows


# --- the run's header ----------------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def config_chain(path: str | Path) -> list[tuple[str, str]]:
    """(file, sha256 of its bytes) of a config and every file it `extends:`, the given file first;
    a file that cannot be read is named with the reason instead of a hash."""
    import yaml
    out, seen, p = [], set(), Path(path)
    while p is not None and p.resolve() not in seen:
        seen.add(p.resolve())
        try:
            out.append((str(p), _sha256(p)))
            doc = yaml.safe_load(p.read_text())
        except (OSError, ValueError, yaml.YAMLError) as e:
            out.append((str(p), f"unreadable: {getattr(e, 'strerror', None) or e}"))
            break
        base = doc.get("extends") if isinstance(doc, dict) else None
        p = (p.parent / base) if isinstance(base, str) else None
    return out


def _git_head() -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() or None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return None


def _utc(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def run_header(resdir: str | Path, config: str | Path | None = None, trials=None) -> list[tuple[str, str]]:
    """The run's header, as (field, value) rows: testbed, commit, date, config (each file of its
    `extends:` chain with its sha256), machine, trials and their validity. Commit, machine and dates
    are those the trials recorded (metadata.json); a run without trials says so."""
    resdir = Path(resdir)
    if trials is None:
        trials = trial_results(resdir) if resdir.is_dir() else []
    metas = []
    for t, _ in trials:
        try:
            metas.append(json.loads(t.metadata.read_text()))
        except (OSError, ValueError):
            continue
    testbed = resdir.name
    recorded = sorted({(m.get("config"), m.get("config_hash")) for m in metas if m.get("config")}, key=str)
    if config is None and len({c for c, _ in recorded}) == 1 and Path(recorded[0][0]).is_file():
        config = recorded[0][0]  # the one the trials ran under
    if config is not None:
        try:
            from .config import load_config
            cfg = load_config(config)
            testbed = f"{cfg.name} ({cfg.testbed_kind}; {', '.join(f'{n.name}: {n.role}' for n in cfg.nodes.values())})"
        except XenobenchError as e:
            testbed = f"{testbed} (config unreadable: {e})"
    commits = sorted({str(m.get("git_commit")) for m in metas if m.get("git_commit")})
    head = _git_head()
    commit = ", ".join(commits) if commits else "no trial recorded one"
    if head and not any(c.startswith(head) for c in commits):
        commit += f" (report written at {head})"
    times = [m["time"] for m in metas if isinstance(m.get("time"), (int, float))]
    now = _utc(datetime.datetime.now(datetime.timezone.utc).timestamp())
    date = (f"trials {_utc(min(times))} to {_utc(max(times))}; report {now}" if times else f"report {now}")
    rows = [("testbed", testbed), ("commit", commit), ("date", date)]
    if config is not None:
        rows.append(("config", "; ".join(f"{f} (sha256 {h})" for f, h in config_chain(config))))
    if recorded:
        rows.append(("config the trials recorded", "; ".join(f"{c} (sha256 {h}...)" for c, h in recorded)))
    hosts = sorted({f"{m.get('harness_host')} (Linux {m.get('harness_kernel')})" for m in metas if m.get("harness_host")})
    here = f"{platform.node()} (Linux {platform.release()}, {os.cpu_count()} CPUs, {_cpu_model() or 'CPU model unknown'})"
    rows.append(("machine", (", ".join(hosts) + f"; report written on {here}") if hosts else here))
    gens = sorted({generator_line(m["generator"]) for m in metas if isinstance(m.get("generator"), dict)})
    if gens:
        rows.append(("generator", "; ".join(gens)))
    per: dict[str, list[int]] = {}
    for _, r in trials:
        c = per.setdefault(str(r.get("experiment")), [0, 0])
        c[0 if r.get("valid") else 1] += 1
    valid = sum(v for v, _ in per.values())
    rows.append(("trials", f"{len(trials)}: {valid} valid, {len(trials) - valid} invalid"
                 + ("" if not per else " (" + "; ".join(f"{e} {v} valid, {i} invalid" for e, (v, i) in per.items()) + ")")))
    return rows


def generator_line(g: dict) -> str:
    """One trial's generator as the header names it: 'xdpgen, loop driver (this kernel refuses XDP
    live frames (EPERM): using the XDP loop)'."""
    if g.get("driver"):
        return f"{g.get('name')}, {g['driver']} driver ({g.get('driver_reason') or 'no reason recorded'})"
    return str(g.get("name")) + (f" ({g['error']})" if g.get("error") else "")


def rst_text(text) -> str:
    """Text as reStructuredText shows it verbatim (markup characters escaped)."""
    return re.sub(r"([\\`*_|<>\[\]])", r"\\\1", " ".join(str(text).split()))


class RunSummary(dict):
    """What `snakemake --report` reads (report/workflow.rst and report/*figure.rst through Snakemake's
    caption templating, which hands the workflow's description the config only: the workflow puts
    this in `config`): the run's header and, per figure, what it shows and the trials of the
    experiments drawing it. An empty mapping to anything that serialises the config; read from the
    results tree when first asked, so that parsing the workflow costs nothing."""

    def __init__(self, resdir: str | Path, config: str | Path | None = None):
        super().__init__()
        self.resdir = Path(resdir)
        self.config = config

    @functools.cached_property
    def trials(self) -> list:
        try:
            return trial_results(self.resdir) if self.resdir.is_dir() else []
        except DataError:
            return []

    @functools.cached_property
    def header(self) -> list[tuple[str, str]]:
        return run_header(self.resdir, self.config, self.trials)

    @property
    def testbed_is_hardware(self) -> bool:
        return self.resdir.name in HARDWARE_TESTBEDS

    @property
    def header_rst(self) -> list[tuple[str, str]]:
        return [(k, rst_text(v)) for k, v in self.header]

    def figure(self, name: str) -> dict:
        """A figure's caption data, escaped for reStructuredText: what it draws (its function's
        docstring's first paragraph) and per experiment drawing it: id, title, thesis section,
        published value, what is measured, valid and invalid trials of this run."""
        from .definitions import definitions
        from .plots import FIGURES, drawn_by
        doc = (FIGURES[name].__doc__ or name).strip().split("\n\n")[0]
        exps = []
        for e in drawn_by().get(name, ()):
            d = definitions()[e].raw
            rs = [r for _, r in self.trials if r.get("experiment") == e]
            exps.append({"id": e, **{k: rst_text(d[k]) if d.get(k) else None
                                     for k in ("title", "thesis", "published", "measure")},
                         "valid": sum(1 for r in rs if r.get("valid")),
                         "invalid": sum(1 for r in rs if not r.get("valid"))})
        return {"name": name, "what": rst_text(doc), "experiments": exps}


def figure_category(name: str) -> str:
    """The experiment a figure is filed under (report.md, the HTML report): the first, in plan order,
    that draws it."""
    from .plots import drawn_by
    return (drawn_by().get(name) or ("other",))[0]


# --- report.md as HTML --------------------------------------------------------------------------------
_INLINE = re.compile(r"`([^`]*)`|\*\*([^*]+)\*\*")


def _inline(text: str) -> str:
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        out.append(f"<code>{html.escape(m.group(1))}</code>" if m.group(1) is not None
                   else f"<strong>{html.escape(m.group(2))}</strong>")
        pos = m.end()
    return "".join(out) + html.escape(text[pos:])


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def markdown_html(text: str, title: str) -> str:
    """report.md as one HTML page: the subset write_report writes (headings, pipe tables, `- ` lists,
    paragraphs, `code` and **bold**), every text escaped."""
    body, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif m := re.match(r"(#{1,6}) (.*)", line):
            n = len(m.group(1))
            body.append(f"<h{n}>{_inline(m.group(2))}</h{n}>")
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            rows = [b for b in block if not re.fullmatch(r"\|(-+\|)+", b.strip())]
            body.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in _cells(rows[0]))
                        + "</tr></thead><tbody>")
            body += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(r)) + "</tr>" for r in rows[1:]]
            body.append("</tbody></table>")
        elif line.startswith("- "):
            body.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                body.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            body.append("</ul>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not re.match(r"#{1,6} |\||- ", lines[i]):
                para.append(lines[i])
                i += 1
            body.append(f"<p>{_inline(' '.join(para))}</p>")
    style = ("body{font-family:sans-serif;max-width:80em;margin:1em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #bbb;padding:.2em .5em;"
             "text-align:left;vertical-align:top;font-size:90%}th{background:#eee}code{font-size:90%}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _figure_lines(figdir: Path) -> list[str]:
    """The figures of figdir by the experiment they are filed under (figure_category), then any other."""
    from .definitions import definitions
    figs = sorted(figdir.glob("*.png"))
    by: dict[str, list[Path]] = {}
    for f in figs:
        by.setdefault(figure_category(f.stem), []).append(f)
    L = []
    for e in [*definitions(), *(k for k in by if k not in definitions())]:
        if e in by:
            title = definitions()[e].raw.get("title", e) if e in definitions() else e
            L += [f"### {e}: {title}", ""] + [f"- `{f}` (+ `.pdf`)" for f in by[e]] + [""]
    return L or ["- none", ""]


def write_report(resdir: str | Path, figdir: str | Path, thesis_compare: str | Path | None = None,
                 out: str | Path | None = None, config: str | Path | None = None,
                 left_out: list[str] | None = None) -> Path:
    """report.md (or `out`) and the same document as HTML beside it (.html). `config`: the run's
    configuration file, named with its sha256 in the header; `left_out`: the LBs its plan left out
    and why (xenobench.experiments.left_out lines)."""
    from .compare import agreement, compare
    resdir, figdir = Path(resdir), Path(figdir)
    testbed = resdir.name
    out = Path(out) if out else resdir / "report.md"
    L = [f"# xenobench run report — testbed `{testbed}`", ""]
    trials, unplanned = _planned(resdir, trial_results(resdir))
    L += _table(["run", ""], [[k, v] for k, v in run_header(resdir, config, trials)])
    n_valid = sum(1 for _, r in trials if r.get("valid"))
    L += ["", f"Trials: {len(trials)} ({n_valid} valid, {len(trials) - n_valid} invalid) of the points the "
          "config plans.", ""]
    if left_out:
        L += ["LBs left out of the plan (this testbed cannot run them):", ""] + [f"- {x}" for x in left_out] + [""]
    if unplanned:
        L += [f"Recorded for another plan (an earlier config's points; not drawn, not counted): {len(unplanned)} "
              "trials, listed in unplanned.csv: " + ", ".join(sorted({u for u in unplanned})[:8])
              + (" ..." if len(set(unplanned)) > 8 else "") + ".", ""]
    if testbed not in HARDWARE_TESTBEDS:
        L += ["Numbers from this testbed describe this machine (Linux namespaces, veth, trafgen or xdpgen, XDP; "
              "XenoFlow on the DOCA Flow emulation), never a BlueField-3.", ""]

    L += ["## Figures", ""]
    L += _figure_lines(figdir)

    L += ["## Invalid trials", ""]
    inv = [(t, r) for t, r in trials if not r.get("valid")]
    if inv:
        rows = []
        for t, r in inv:
            reasons = chosen_reasons(r)
            rows.append([str(t.path.relative_to(resdir)), len(r["attempts"]), "; ".join(reasons)])
        L += _table(["trial", "attempts", "reasons"], rows)
        L += ["", "To measure them again: `xenobench --config <the run's config> experiment retry-invalid` "
              "(sets them aside under stale/), then the same `snakemake` command."]
    else:
        L.append("None.")
    L.append("")

    L += _machine_section(trials, resdir)
    from .readiness import report_lines as readiness_lines  # publication-ready points, the others' reasons
    L += readiness_lines(resdir, config)

    L += ["## Wall time per experiment", ""]
    per: dict[str, list[float]] = {}
    for t, r in trials:
        per.setdefault(r["experiment"], []).append(
            sum(_seconds(t.attempt(a["attempt"]).outputs) for a in r["attempts"]
                if t.attempt(a["attempt"]).outputs.exists()))
    L += _table(["experiment", "trials", "seconds in procedures"],
                [[e, len(v), f"{sum(v):.1f}"] for e, v in per.items()]) if per else ["No trials."]
    L.append("")

    try:
        tidy = read_all(resdir)
    except DataError as e:
        tidy = {}
        L += [f"Tidy results unreadable: {e}", ""]
    L += ["## Headline numbers (medians over valid repetitions)", ""]
    hl = _headlines(tidy) + _ndr_pdr_lines(tidy)
    L += _table(latex.HEADLINE_HEADER, hl) + ["", "Spread: the smallest and largest of the trials (the repetitions, "
                                           "or the searches); for a ratio or a paired difference its bootstrap "
                                           "95 % CI (a paired difference counts its pairs, as the paired table)."] \
        if hl else ["No valid results."]
    L.append("")

    L += ["## Agreement of this run's tables (compare's ratios against rank's; the reference flat across payloads)", ""]
    found = agreement(resdir)
    L += _table(["check", "agree", ""], [[f.check, {True: "yes", False: "**no**", None: "not judged"}[f.ok], f.text]
                                         for f in found]) if found \
        else ["Nothing to compare in this run."]
    L.append("")

    L += _paired_section(tidy)
    L += _update_section(tidy)
    L += _rank_section(tidy)
    L += _open_questions_section(tidy)

    hsplit = _hash_split_rows(trials)
    if hsplit:
        L += ["## Split of the hash-based LBs (Katran), measured", "",
              "Katran sends a flow to the real its Maglev ring names for the flow's hash, not by the source's "
              "class: a split's caption (single, 50/50, 70/30, worst) is the class split the background "
              "profile makes, not what Katran gave each backend. These are the packets its own counters "
              "(reals_stats) gave each backend while the probes ran (probes and background), beside each "
              "backend's share of the ring (what many flows approach; a few flows land where their hashes fall).",
              ""]
        L += _table(["experiment", "where", "lb", "packets per backend", "measured share", "ring share",
                     "trials/blocks"], hsplit)
        L.append("")

    L += _drop_section(trials)

    tex = [latex.headline_table(hl, f"Headline numbers of testbed {testbed} (medians over valid repetitions)",
                                f"tab:headline-{testbed}")] if hl else []
    L += ["## Published vs reproduced", ""]
    if thesis_compare:
        L += ["From the thesis's raw measurements (`results/thesis`):", ""]
        thesis_rows = read_compare_rows(thesis_compare)
        L += _table(["metric", "published", "reproduced", "unit", "deviation", "ok", "source"],
                    _compare_rows(thesis_rows))
        L.append("")
        tex.append(latex.compare_table(thesis_rows, "Published vs reproduced from the thesis's raw measurements",
                                       "tab:published-vs-reproduced-thesis"))
    try:
        rows = compare(resdir)
        note = ("" if testbed in HARDWARE_TESTBEDS else
                " (absolute values describe this machine, not a BlueField: the comparison shows the "
                "method, not a reproduction)")
        L += [f"From this testbed (`{resdir}`){note}:", ""]
        L += _table(["metric", "published", "measured", "unit", "deviation", "within 5 % (or CI)", "source"],
                    _compare_rows(rows))
        tex.append(latex.compare_table(rows, f"Published vs measured on testbed {testbed}{note}",
                                       f"tab:published-vs-reproduced-{testbed}"))
    except DataError as e:
        L.append(f"This testbed: {e}")
    L.append("")
    text = "\n".join(L)
    page = out.with_suffix(".html")
    try:
        out.write_text(text)
        page.write_text(markdown_html(text, f"xenobench run report — {testbed}"))
    except OSError as e:
        raise DataError(f"Failed to write the report {out}: {e.strerror or e}") from None
    latex.write(out.with_suffix(".tex"), tex, f"xenobench run report, testbed {testbed}: the tables of {out.name}")
    return out


def _planned(resdir: Path, trials: list) -> tuple[list, list[str]]:
    """The trials of the points the run's config plans, and the points (experiment/point) of those it
    does not, as aggregate listed them in unplanned.csv (absent: every trial counts)."""
    path = resdir / "unplanned.csv"
    if not path.exists():
        return trials, []
    try:
        with open(path, newline="") as f:
            listed = {r["trial"]: f"{r['experiment']}/{r['point']}" for r in csv.DictReader(f)}
    except (OSError, KeyError, csv.Error) as e:
        raise DataError(f"Failed to read {path}: {e} (regenerate it: xenobench experiment aggregate {resdir})") from None
    keep = [(t, r) for t, r in trials if str(t.path.relative_to(resdir)) not in listed]
    return keep, list(listed.values())


def _machine_section(trials, resdir: Path) -> list[str]:
    """Trials the machine disturbed: every trial with an attempt the machine rule
    (xenobench.machine.RULES, recorded in its metadata.json) judged disturbed, retried or not, with
    each such attempt's figures over their limits; the count; and the largest figures over all
    attempts."""
    rows, worst = [], {}
    attempts = disturbed = 0
    for t, r in trials:
        try:
            m = (json.loads(t.metadata.read_text()).get("machine") or {})
        except (OSError, ValueError):
            continue
        bad = {}
        for a, rec in sorted(m.items()):
            attempts += 1
            for h in (rec.get("hosts") or {}).values():
                for c in (h.get("cpus") or {}).values():
                    worst["steal_share"] = max(worst.get("steal_share", 0), c.get("steal_share") or 0)
                    worst["other_load_share"] = max(worst.get("other_load_share", 0), c.get("other_share") or 0)
            for x in rec.get("cpu_pair_rtt_ns") or ():
                worst["cpu_pair_rtt_ns"] = max(worst.get("cpu_pair_rtt_ns", 0), x)
            over = rec.get("over") or ({"steal_share": rec.get("steal_share_max")} if rec.get("flagged") else {})
            if over:
                bad[a] = over
        if bad:
            disturbed += 1
            rows.append([str(t.path.relative_to(resdir)), "; ".join(
                f"{a}: " + ", ".join(f"{f} {v:g}" for f, v in o.items()) for a, o in bad.items()),
                "valid (a later attempt)" if r.get("valid") else "invalid"])
    what = {rule.figure: rule for rule in machine.RULES}
    L = [f"## Trials the machine disturbed ({disturbed} of {len(trials)} trials; the machine rule: "
         + ", ".join(f"{rule.figure} over experiments.{rule.key}" for rule in machine.RULES) + ")", ""]
    L += _table(["trial", "disturbed attempts (figures over their limits)", "trial"], rows) if rows else ["None."]
    L += ["", "Over every attempt (" + str(attempts) + "): largest " + "; ".join(
        f"{what[f].what} {v:.4g}" for f, v in worst.items()) + " (per attempt in each trial's metadata.json, "
        "`machine`; docs/vm-noise.md).", ""]
    return L


def _seconds(outputs: Path) -> float:
    """The seconds an attempt's procedure took (outputs.json), refused by name when malformed."""
    o = read_json(outputs, "attempt outputs")
    v = o.get("seconds", 0) if isinstance(o, dict) else None
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v) or v < 0:
        raise DataError(f"Failed to read attempt outputs {outputs}: seconds: {v!r} is not a number of seconds >= 0")
    return float(v)

