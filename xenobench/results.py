"""The tidy results schema shared by every source: the namespace testbed, the thesis testbed live,
the thesis's raw data and published values. One CSV per measurement kind, long format: one row
per (trial or sample, metric). Documented in docs/results.md.

API (what the trial runner, the ingest, the plots and `xenobench compare` use):

    row(**columns) -> dict                       one row; unknown columns are an error
    validate(kind, df, where) -> DataFrame       checks columns, types, units; returns df[COLUMNS]
    write_tidy(kind, rows_or_df, path, how) -> Path   path is a results directory (→ <path>/<kind>.csv)
                                                 or a .csv file; validated, written atomically as a
                                                 plain CSV (header first: pandas.read_csv reads it as
                                                 it is) with its sidecar <kind>.csv.json beside it
    write_rows(out, fields, rows, what) -> Path  any other CSV (invalid.csv, unplanned.csv), with its sidecar
    remove_rows(out)                             such a CSV and its sidecar
    read_tidy(path, kind) -> DataFrame           the same path forms; validated; leading '#' lines
                                                 (files written before the sidecar) are skipped
    read_sidecar(path, kind) -> dict | None      how a table was made (SIDECAR_FIELDS)
    remove_tidy(kind, resdir)                    a table and its sidecar
    read_all(resdir) -> {kind: DataFrame}        every kind present
"""

from __future__ import annotations

import datetime
import json
import csv
import os
import re
import shlex
import stat
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from . import REPO_ROOT, __version__
from .errors import DataError

KINDS = ("pps", "loss", "rtt_samples", "rtt_summary", "compare", "ndr_pdr", "rtt_paired", "rtt_capacity", "update", "update_burst",
         "update_install",
         "rate_blocks", "rate_ranking", "distribution", "disruption")

COLUMNS = [
    "testbed",        # local | fips | thesis | ... (every figure is labelled with it)
    "experiment",     # the experiment the row was measured for (experiments/<id>.yaml)
    "point",          # its point: the variables in order (xenobench.layout.point_id, the trial's directory)
    "lb",             # xenoflow | ebpf | none | katran | kakao-loopback | kakao-255
    "server",         # RTT: the DNS backend answering the probes: reflector | python | bind9
    "generator",      # what offered the traffic (the trial's record): trex | xdpgen | trafgen
    "payload_bytes",  # UDP payload
    "frame_bytes",    # Ethernet frame without FCS = payload + 42
    "offered_pps",    # offered load (generator), packets/s
    "measured_pps",   # received at the backends, packets/s
    "repetition",     # 1, 2, ...
    "split",          # rtt under load: single | worst | X/Y (% of background to the DNS backend / other)
    "background_pps", # rtt under load, update: background load, packets/s
    "changes_per_s",  # update_burst: backend changes per second requested (0: none, the reference)
    "metric",         # e.g. rx_pps, loss_pct, rtt_us, rtt_median_us
    "value",
    "unit",
    "source",         # provenance: file and line/packet ranges, or document and figure
]
TEXT = tuple(c for c in COLUMNS if c not in ("payload_bytes", "frame_bytes", "offered_pps", "measured_pps",
                                              "repetition", "background_pps", "changes_per_s", "value"))
NUMERIC = ("payload_bytes", "frame_bytes", "offered_pps", "measured_pps", "repetition",
           "background_pps", "changes_per_s", "value")
REQUIRED = ("testbed", "experiment", "point", "lb", "metric", "value", "unit", "source")  # never empty
OPTIONAL = ("server", "generator", "changes_per_s")  # added later; files written before them read as empty

# What a value may be: the one owner. Each metric the harness writes declares its unit and range;
# validate() checks both where tidy rows are written (write_tidy) and where they are read
# (read_tidy: aggregate, plot, report, compare, the notebooks). A known metric with another unit is
# an error (a Mpps value in a packets/s column is the classic silent factor-10^6 bug); a value out
# of its range was not measured as the file says. Other metrics are allowed (unit and range free).
#: an unpaced block of an interleaved design whose backends received at least this share of what the
#: generator offered at its own rate is the generator's ceiling, not the LB's rate
#: (xenobench.measure.rank.block_figures: block_generator_bound; the report says "generator-bound")
GENERATOR_BOUND_SHARE = 0.95
COUNTER_SKEW = (0.001, 10)  # received <= sent x (1 + 0.001) + 10: the counters' tolerance (stray
                            # frames, a counter read a moment apart), as xenobench.procedures checks it
RATE_SKEW = 0.5  # a received rate is the steady-state median of short samples (0.25 s here, 1 s on the
                 # thesis's hosts), the offered one the generator's mean over the whole trial: a paced
                 # generator catching up after a stall makes a window 10-15 % faster than the mean (seen
                 # in the CI study: 2.26 Mpps received at 2.0 offered). What is a real impossibility (3x
                 # the offered rate) stays refused; totals are held to COUNTER_SKEW per trial.
LOSS_MIN_PCT = -10.0  # rx/tx - 1 of counters sampled on two hosts' clocks (the thesis's raw data: down to
                     # -0.2 %); a 1 s sampler cannot gain 10 % (100 ms). The harness's own trials are
                     # held to COUNTER_SKEW per trial (xenobench.procedures: counters_consistent)
MAX_PPS = 10**12  # packets/s: ~7000 x the 100 Gbit/s line rate at 64 B (as xenobench.ingest's MAX_COUNT)
MAX_RTT_US = 60e6  # an RTT is below the probe timeout; no prober waits longer than 60 s
MAX_UPDATE_MS = 600e3  # a backend change the harness waits for: LoadBalancer.update's timeout is far below


HIGHER, LOWER = "higher", "lower"  # which way a metric is better (Metric.better)


@dataclass(frozen=True)
class Metric:
    """A metric's unit and range: low/high bounds (open or closed), a received rate at most the
    offered one (RATE_SKEW), or one of a few values; and which way it is better (`xenobench diff`'s
    verdicts): HIGHER for what a load balancer delivers (rates), LOWER for what it costs (RTT,
    loss, latency of a change), None for what is set, counted or describes the machine."""
    unit: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    received: bool = False  # a received rate: <= offered_pps x (1 + RATE_SKEW) + 10 where offered is known
    values: tuple | None = None
    better: str | None = None  # HIGHER | LOWER | None

    def rule(self) -> str:
        if self.values is not None:
            return "one of " + ", ".join(f"{v:g}" for v in self.values)
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        if self.received:
            parts.append(f"<= offered_pps x {1 + RATE_SKEW:g} + {COUNTER_SKEW[1]}")
        return " and ".join(parts) or "any"

    def bad(self, v: np.ndarray, offered: np.ndarray) -> np.ndarray:
        """Mask of the values (NaN: absent, not checked) that break the rule."""
        with np.errstate(invalid="ignore", divide="ignore"):
            bad = np.zeros(len(v), dtype=bool)
            if self.values is not None:
                return ~np.isnan(v) & ~np.isin(v, self.values)
            if self.low is not None:
                bad |= (v <= self.low) if self.low_open else (v < self.low)
            if self.high is not None:
                bad |= (v >= self.high) if self.high_open else (v > self.high)
            if self.received:
                bad |= v > offered * (1 + RATE_SKEW) + COUNTER_SKEW[1]  # NaN offered: not compared
            return bad


_RATE = Metric("packets/s", 0, MAX_PPS)                  # a rate that was set (offered)
_THROUGHPUT = replace(_RATE, better=HIGHER)              # a rate the LB reached (search results)
_RECEIVED = Metric("packets/s", 0, MAX_PPS, received=True, better=HIGHER)
_COUNT = Metric("count", 0)
_FEWER = replace(_COUNT, better=LOWER)                   # frames or probes that should not be there
_RTT = Metric("us", 0, MAX_RTT_US, low_open=True, high_open=True, better=LOWER)     # a measured round trip
_RTT_SPREAD = Metric("us", 0, MAX_RTT_US, high_open=True, better=LOWER)               # a standard deviation
_RTT_DIFF = Metric("us", -MAX_RTT_US, MAX_RTT_US, low_open=True, high_open=True)  # a difference of RTTs
_CHANGE_MS = Metric("ms", 0, MAX_UPDATE_MS, low_open=True, better=LOWER)  # command -> the LB's report: after the command
_APPLY_MS = Metric("ms", 0, MAX_UPDATE_MS, better=LOWER)   # the LB's own apply time; command -> first frame
_CHANGE_OFFSET_MS = Metric("ms", -MAX_UPDATE_MS, MAX_UPDATE_MS, better=LOWER)  # a frame's time from a command or a report
METRICS = {
    "rx_pps": _RECEIVED, "max_pps": _RECEIVED, "tx_pps": _RATE, "nominal_offered_pps": _RATE,
    "lb_prog_ns_per_frame": Metric("ns", 0, 1e9, better=LOWER),  # xenobench.progcost
    "loss_pct": Metric("%", LOSS_MIN_PCT, 100, better=LOWER), "cv_pct": Metric("%", 0, better=LOWER),
    "rtt_us": _RTT, "n": _COUNT, "lost": _FEWER,
    # ndr_pdr (xenobench.search): per goal <goal>_pps, _upper_bound_pps, _conditional_throughput_pps
    "ndr_pps": _THROUGHPUT, "pdr_pps": _THROUGHPUT, "ndr_upper_bound_pps": _THROUGHPUT, "pdr_upper_bound_pps": _THROUGHPUT,
    "ndr_conditional_throughput_pps": _RECEIVED, "pdr_conditional_throughput_pps": _RECEIVED,
    "ndr_relative_width": Metric("ratio", 0), "pdr_relative_width": Metric("ratio", 0),
    "search_trials": _COUNT, "search_trial_seconds": Metric("s", 0), "search_wall_s": Metric("s", 0),
    # update (xenobench.measure.update): one change's times on the harness clock; the LB's own apply time
    "remove_control_ms": _CHANGE_MS, "add_control_ms": _CHANGE_MS,
    "remove_apply_ms": _APPLY_MS, "add_apply_ms": _APPLY_MS,
    "remove_last_frame_ms": _CHANGE_OFFSET_MS, "done_to_last_frame_ms": _CHANGE_OFFSET_MS,
    "add_first_frame_ms": _APPLY_MS,  # the first frame after the command
    "after_done_frames": _FEWER, "after_done_frames_max": _FEWER,
    # the removed backend stopped receiving before the add-back
    "drained": Metric("flag", values=(0, 1), better=HIGHER),
    # update_burst: the changes a burst made, per second of its window
    "changes": _COUNT, "achieved_changes_per_s": Metric("changes/s", 0, better=HIGHER),
    # update_install: one change of `entries` entries (the LB's own count: lb_entries), command ->
    # the LB's report and its own apply time, and entries per second of each; a change above the
    # LB's limit: refused (1) or not, and the frames its old set forwarded after it
    "entries": _COUNT, "lb_entries": _COUNT, "install_control_ms": _CHANGE_MS,
    "install_apply_ms": _APPLY_MS,
    "entries_per_s": Metric("entries/s", 0, low_open=True, better=HIGHER),
    "apply_entries_per_s": Metric("entries/s", 0, low_open=True, better=HIGHER),
    "over_limit_refused": Metric("flag", values=(0, 1)), "frames_after_refusal": _FEWER,
    # rank (xenobench.measure.rank): one block's rate, the backends' rx over its window
    "block_rx_pps": _THROUGHPUT,
    # ... and its rx per second of the DUT NAPI thread's CPU time (xenobench.measure.rank.dut_cpu_reader)
    "block_rx_per_dut_cpu_s": Metric("packets/cpu-s", 0, MAX_PPS, better=HIGHER),
    # ... what the round it is in was judged by (the machine rule, xenobench.machine.RULES; a round over a limit is in
    # no ranking, block_round_kept 0): the page allocations on the generator's node per frame received,
    # the cache-line round trip between the generator's and the DUT's CPU (the machine, not the LB) and,
    # unpaced, the share of the frames the generator offered that the backends received
    "block_page_allocs_per_frame": Metric("pages/frame", 0),
    "block_received_share": Metric("share", 0),
    # ... judged only where the generator offered less than rank.HELD_DOWN of its median rate in the
    # repetition (held down by what took its CPU); at its own rate a share of GENERATOR_BOUND_SHARE or more
    # is the generator's ceiling (block_generator_bound 1: kept, labelled generator-bound)
    "block_held_down_share": Metric("share", 0),
    # an LB's share of such blocks in a repetition (pps, compare in the interleaved design)
    "generator_bound_share": Metric("share", 0, 1),
    "block_generator_bound": Metric("flag", values=(0, 1)),
    "block_cpu_pair_rtt_ns": Metric("ns", 0, 1e9, low_open=True),
    "block_round_kept": Metric("flag", values=(0, 1)),
    # distribution (xenobench.measure.distribution, xenobench.fairness): per (LB, population) over its backends,
    # of the frames measured at the backends (rule_flow_...: of the population's flows by the LB's rule); per backend the
    # `<measure>@<backend>` patterns below
    "jain_index": Metric("index", 0, 1, low_open=True, better=HIGHER),
    "max_min_ratio": Metric("ratio", 1, better=LOWER), "chi2_distance": Metric("chi2", 0, better=LOWER),
    "max_share": Metric("share", 0, 1), "min_share": Metric("share", 0, 1),
    "rule_flow_jain_index": Metric("index", 0, 1, low_open=True, better=HIGHER),
    "rule_flow_max_min_ratio": Metric("ratio", 1, better=LOWER),
    "rule_flow_chi2_distance": Metric("chi2", 0, better=LOWER),
    "rule_flow_max_share": Metric("share", 0, 1), "rule_flow_min_share": Metric("share", 0, 1),
    "frames": _COUNT, "flows": _COUNT,
    # disruption: the share of a population's flows whose backend the LB's rule changes when the last
    # backend leaves or joins; `other`: those not on that backend (moved without need); ideal 1/N
    "moved_on_remove_share": Metric("share", 0, 1), "moved_on_add_share": Metric("share", 0, 1),
    "moved_other_on_remove_share": Metric("share", 0, 1, better=LOWER),
    "moved_other_on_add_share": Metric("share", 0, 1, better=LOWER), "moved_ideal_share": Metric("share", 0, 1),
}
# rtt_summary's statistics (xenobench.aggregate) and the paired design's rows (rtt_vs_<ref>_...)
_RTT_PATTERNS = [
    (re.compile(r"rtt_(median|mean|min|max|p\d+(\.\d+)?|pcap_median)_us"), _RTT),
    (re.compile(r"rtt_std_us"), _RTT_SPREAD),
    (re.compile(r"rtt_vs_.+_(median|ci_low|ci_high)_us"), replace(_RTT_DIFF, better=LOWER)),  # added RTT
    (re.compile(r"rtt_pcap_diff_us"), _RTT_DIFF),  # prober - capture: agreement of two clocks
    (re.compile(r"rtt_vs_.+_(pairs|bootstrap_resamples)"), _COUNT),
    (re.compile(r"rtt_vs_.+_verdict"), Metric("sign", values=(-1, 0, 1))),
    (re.compile(r"rtt_vs_.+_bootstrap_seed"), Metric("seed", 0)),
    (re.compile(r"rtt_median_raw_us"), Metric("us", better=LOWER)),
    (re.compile(r"rtt_.+_us"), Metric("us")),  # any other RTT statistic: the unit only
    # rank's rows (rate[_per_cpu]_vs_<ref>_...: xenobench.rateblocks' ratio of an LB's rate to ref's)
    (re.compile(r"rate(_per_cpu)?_vs_.+_(median|ci_low|ci_high)"), Metric("ratio", 0, low_open=True, better=HIGHER)),
    (re.compile(r"rate(_per_cpu)?_vs_.+_(rounds|repetitions|bootstrap_resamples)"), _COUNT),
    (re.compile(r"rate(_per_cpu)?_vs_.+_half_width_pct"), Metric("%", 0)),
    (re.compile(r"rate(_per_cpu)?_vs_.+_verdict"), Metric("sign", values=(-1, 0, 1))),
    (re.compile(r"rate(_per_cpu)?_vs_.+_bootstrap_seed"), Metric("seed", 0)),
    # ndr_pdr's paired design (xenobench.measure.search): a repetition's <goal>_vs_<ref>, and per point the
    # same parts as rank's over its repetitions
    (re.compile(r"(ndr|pdr)_vs_[a-z0-9]+"), Metric("ratio", 0, low_open=True, better=HIGHER)),
    (re.compile(r"(ndr|pdr)_vs_.+_(median|ci_low|ci_high)"), Metric("ratio", 0, low_open=True, better=HIGHER)),
    (re.compile(r"(ndr|pdr)_vs_.+_(rounds|repetitions|bootstrap_resamples)"), _COUNT),
    (re.compile(r"(ndr|pdr)_vs_.+_half_width_pct"), Metric("%", 0)),
    (re.compile(r"(ndr|pdr)_vs_.+_verdict"), Metric("sign", values=(-1, 0, 1))),
    (re.compile(r"(ndr|pdr)_vs_.+_bootstrap_seed"), Metric("seed", 0)),
    # distribution's per-backend shares (`<measure>@<backend>`, xenobench.fairness) and a point's mean with its
    # 95 % t interval over the repetitions (`<figure>_mean`, `_ci_low`, `_ci_high`, before any `@<backend>`)
    (re.compile(r"(frame|lb_frame|rule_frame|rule_flow|weight)_share@.+"), Metric("share", 0, 1)),
    # (the interval clipped to the figure's range)
    (re.compile(r"frame_share_(mean|ci_low|ci_high)@.+"), Metric("share", 0, 1)),
    (re.compile(r"jain_index_(mean|ci_low|ci_high)"), Metric("index", 0, 1)),
    (re.compile(r"max_min_ratio_(mean|ci_low|ci_high)"), Metric("ratio", 1)),
    (re.compile(r"chi2_distance_(mean|ci_low|ci_high)"), Metric("chi2", 0)),
    (re.compile(r"(max|min)_share_(mean|ci_low|ci_high)"), Metric("share", 0, 1)),
]
# the numeric columns' ranges (value's is its metric's)
MAX_UDP_PAYLOAD = 65507  # IPv4: 65535 - 20 - 8
COLUMN_RANGES = {"payload_bytes": Metric("bytes", 0, MAX_UDP_PAYLOAD),
                 "frame_bytes": Metric("bytes", 0, MAX_UDP_PAYLOAD + 42),
                 "offered_pps": _RATE, "measured_pps": _RECEIVED, "repetition": Metric("", 1),
                 "background_pps": _RATE, "changes_per_s": Metric("changes/s", 0)}


def metric(name: str) -> Metric | None:
    """The unit and range a metric's values must have; None: a metric the harness does not know."""
    if name in METRICS:
        return METRICS[name]
    return next((m for p, m in _RTT_PATTERNS if p.fullmatch(name)), None)


UNITS = {m: r.unit for m, r in METRICS.items()}  # the units alone

MAX_TIDY_BYTES = 2 << 30  # rtt_samples of a full study is ~100 MB; beyond this it is not a tidy file
HEADERS = 42      # Ethernet 14 + IPv4 20 + UDP 8 (frame without FCS = payload + 42)
FCS = 4
L1_OVERHEAD = 20  # preamble 8 + inter-frame gap 12


def frame_bytes(payload: int) -> int:
    """Ethernet frame without FCS."""
    return payload + HEADERS


def line_rate_pps(payload: int, gbps: float = 100.0) -> float:
    """Layer-1 maximum: frame + 4 B FCS + 20 B preamble and inter-frame gap on the wire."""
    return gbps * 1e9 / ((payload + HEADERS + FCS + L1_OVERHEAD) * 8)


def l2_gbps(pps: float, payload: int) -> float:
    """Bandwidth as the paper computes it (pps × frame bytes × 8, frame without FCS)."""
    return pps * (payload + HEADERS) * 8 / 1e9


def l1_gbps(pps: float, payload: int) -> float:
    """Bandwidth on the wire (frame + FCS + preamble + IFG); 100 at line rate."""
    return pps * (payload + HEADERS + FCS + L1_OVERHEAD) * 8 / 1e9


def row(**kw) -> dict:
    """One tidy row; frame_bytes is derived from payload_bytes when not given."""
    unknown = set(kw) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown tidy columns {sorted(unknown)} (known: {', '.join(COLUMNS)})")
    r = {c: kw.get(c) for c in COLUMNS}
    if r["payload_bytes"] is not None and r["frame_bytes"] is None:
        r["frame_bytes"] = frame_bytes(int(r["payload_bytes"]))
    return r


def _kind_ok(kind: str) -> None:
    if kind not in KINDS:
        raise DataError(f"Failed to use tidy kind {kind!r}: unknown (known: {', '.join(KINDS)})")


def _csv_path(path: str | Path, kind: str) -> Path:
    p = Path(path)
    return p if p.suffix == ".csv" else p / f"{kind}.csv"


def validate(kind: str, df: pd.DataFrame, where: str = "rows", skipped_lines: int = 0,
             by_source: bool = False) -> pd.DataFrame:
    """Check a tidy table: columns, types, and each metric's unit and range (METRICS); returns it
    with exactly COLUMNS in order and numeric columns as floats. Errors name `where` (the file),
    the line in the file (the row's source where it is not a file yet), the column, the value and
    the rule."""
    _kind_ok(kind)
    failed = "Failed to check rows" if by_source else "Failed to read tidy results"
    df = df.assign(**{c: None for c in OPTIONAL if c not in df.columns})
    missing = [c for c in COLUMNS if c not in df.columns]
    if "experiment" in missing or "point" in missing:
        raise DataError(f"{failed} {where}: no experiment and point columns (written before every row named its "
                        "experiment and point): regenerate it with `xenobench experiment aggregate <results dir>` "
                        "(thesis data: `xenobench ingest thesis`)")
    if missing:
        raise DataError(f"{failed} {where}: missing columns {', '.join(missing)}")
    df = df[COLUMNS].reset_index(drop=True)
    line = ((lambda i: f"row from {df.source.iloc[i]}") if by_source  # rows not in a file yet
            else (lambda i: f"line {i + 2 + skipped_lines}"))  # after comments and the header
    for c in REQUIRED:
        empty = df[c].isna() | (df[c].astype(str).str.strip() == "")
        if empty.any():
            i = int(np.flatnonzero(empty.to_numpy())[0])
            raise DataError(f"{failed} {where}: {line(i)}: column {c} is empty")
    for c in NUMERIC:
        num = pd.to_numeric(df[c], errors="coerce")
        bad = num.isna() & df[c].notna() & (df[c].astype(str).str.strip() != "")
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(f"{failed} {where}: {line(i)}: column {c}: "
                            f"{str(df[c].iloc[i])[:40]!r} is not a number")
        df[c] = num.astype(float)
        inf = np.isinf(df[c].to_numpy())
        if inf.any():  # a rate or RTT is finite; inf breaks every median, axis and ratio after it
            i = int(np.flatnonzero(inf)[0])
            raise DataError(f"{failed} {where}: {line(i)}: column {c}: "
                            f"{str(df[c].iloc[i])!r} is not a finite number")
    offered = df.offered_pps.to_numpy()
    for c, rule in COLUMN_RANGES.items():
        bad = rule.bad(df[c].to_numpy(), offered)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"{failed} {where}: {line(i)}: column {c}: {df[c].iloc[i]:g} is "
                            f"out of range (must be {rule.rule()})")
    for name, idx in df.groupby("metric", sort=False).indices.items():
        rule = metric(str(name))
        if rule is None:
            continue
        units = df.unit.iloc[idx].to_numpy()
        wrong = units != rule.unit
        if wrong.any():
            i = int(idx[np.flatnonzero(wrong)[0]])
            raise DataError(f"{failed} {where}: {line(i)}: metric {name} has unit "
                            f"{df.unit.iloc[i]!r}, expected {rule.unit!r}")
        bad = rule.bad(df.value.to_numpy()[idx], offered[idx])
        if bad.any():
            i = int(idx[np.flatnonzero(bad)[0]])
            extra = f" (offered_pps {offered[i]:g})" if rule.received else ""
            raise DataError(f"{failed} {where}: {line(i)}: metric {name}: value "
                            f"{df.value.iloc[i]:g} is out of range{extra}: must be {rule.rule()}")
    return df


SIDECAR = ".json"  # <kind>.csv → <kind>.csv.json: how the table was made, beside it (the CSV stays plain)
#: what a sidecar holds: the table, its rows and columns, the caller's words on how it was made, the
#: command line of the process that wrote it, when (UTC), the xenobench checkout's commit (None
#: outside a git checkout; "-dirty" with uncommitted changes) and the package version
SIDECAR_FIELDS = ("table", "rows", "columns", "how", "command", "written_utc", "commit", "xenobench")
MAX_SIDECAR_BYTES = 1 << 20


def sidecar_path(path: str | Path, kind: str) -> Path:
    """The sidecar of <path>/<kind>.csv (or of path itself if it ends in .csv)."""
    f = _csv_path(path, kind)
    return f.with_name(f.name + SIDECAR)


def source_commit() -> str | None:
    """The commit of the xenobench checkout ("-dirty" with uncommitted changes), None outside git."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def _command_line() -> str:
    """This process's command line with the program's directory left out (no machine paths)."""
    argv = list(sys.argv) or ["python"]
    prog = Path(argv[0])
    # `python -m xenobench ...` is the `xenobench` command
    argv[0] = "xenobench" if prog.name == "__main__.py" and "xenobench" in prog.parts else prog.name
    return shlex.join(argv)


def _write_atomic(out: Path, write, what: str = "tidy results") -> None:
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "w", newline="") as f:
                write(f)
            os.replace(tmp, out)  # readers never see a half-written file
        except BaseException:  # a full disk, an interrupt: no temporary file left
            if tmp.parent.is_dir():
                tmp.unlink(missing_ok=True)
            raise
    except OSError as e:
        raise DataError(f"Failed to write {what} {out}: {e.strerror or e}") from None


def _write_sidecar(out: Path, table: str, rows: int, columns: list[str], how: str | None) -> None:
    """<out>.json beside the CSV `out` (SIDECAR_FIELDS): what it holds and how it was made."""
    meta = {"table": table, "rows": rows, "columns": list(columns), "how": how, "command": _command_line(),
            "written_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": source_commit(), "xenobench": __version__}
    _write_atomic(out.with_name(out.name + SIDECAR), lambda f: f.write(json.dumps(meta, indent=1, ensure_ascii=False) + "\n"))


def write_rows(out: str | Path, fields: list[str], rows: list[dict], what: str) -> Path:
    """Rows (dicts; a missing field empty) as a CSV with these columns, written whole or not at all,
    with its sidecar (table: the file's stem, how: `what`); `what` names the file in the error."""
    out = Path(out)

    def write(f):
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    _write_atomic(out, write, what)
    _write_sidecar(out, out.stem, len(rows), fields, what)
    return out


def remove_rows(out: str | Path) -> None:
    """Delete a CSV write_rows wrote and its sidecar (where present)."""
    out = Path(out)
    for f in (out, out.with_name(out.name + SIDECAR)):
        try:
            f.unlink(missing_ok=True)
        except OSError as e:
            raise DataError(f"Failed to remove {f}: {e.strerror or e}") from None


def write_tidy(kind: str, rows, path: str | Path, how: str | None = None) -> Path:
    """Write rows (dicts from row() or a DataFrame) as <path>/<kind>.csv (or to path if it ends in
    .csv): a plain CSV, header first, that pandas.read_csv reads as it is. Beside it
    <kind>.csv.json (SIDECAR_FIELDS): `how` (the caller's words: what the rows are, how to make them
    again), the command, the time and the commit."""
    _kind_ok(kind)
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=COLUMNS)
    out = _csv_path(path, kind)
    df = validate(kind, df, str(out))
    for c in ("payload_bytes", "frame_bytes", "repetition"):  # integers stay integers in the file
        df[c] = df[c].astype("Int64")
    text = df.to_csv(index=False)
    if _unchanged(out, text, kind, how):  # the same rows made the same way: the record stays as it is
        os.utime(out)
        return out
    _write_atomic(out, lambda f: f.write(text))
    _write_sidecar(out, kind, len(df), COLUMNS, how)
    return out


def _unchanged(out: Path, text: str, kind: str, how: str | None) -> bool:
    """Whether `out` already holds exactly `text` and its sidecar says it was made as now (same
    table, columns and `how`): then neither is rewritten, so a run leaves a tracked table and its
    sidecar (its command, commit and time of making) as they were."""
    try:
        with open(out, newline="") as f:
            if f.read() != text:
                return False
        meta = read_sidecar(out, kind)
    except (OSError, UnicodeDecodeError, DataError):
        return False
    return bool(meta) and (meta.get("table"), meta.get("columns"), meta.get("how")) == (kind, list(COLUMNS), how)


def read_sidecar(path: str | Path, kind: str) -> dict | None:
    """How <path>/<kind>.csv was made (its sidecar, SIDECAR_FIELDS); None where it has none (files
    written before sidecars say it in leading '#' lines)."""
    _kind_ok(kind)
    f = sidecar_path(path, kind)
    try:
        with open(f, "rb") as fh:
            data = fh.read(MAX_SIDECAR_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise DataError(f"Failed to read the sidecar {f}: {e.strerror or e}") from None
    if len(data) > MAX_SIDECAR_BYTES:
        raise DataError(f"Failed to read the sidecar {f}: larger than {MAX_SIDECAR_BYTES} bytes")
    try:
        meta = json.loads(data)
    except ValueError as e:  # not UTF-8, not JSON
        raise DataError(f"Failed to read the sidecar {f}: {e} (delete it, or write the table again "
                        "with xenobench.results.write_tidy)") from None
    if not isinstance(meta, dict):
        raise DataError(f"Failed to read the sidecar {f}: expected a JSON object, got {type(meta).__name__}")
    return meta


def remove_tidy(kind: str, resdir: str | Path) -> None:
    """Delete <resdir>/<kind>.csv and its sidecar (where present)."""
    _kind_ok(kind)
    for f in (_csv_path(resdir, kind), sidecar_path(resdir, kind)):
        try:
            f.unlink(missing_ok=True)
        except OSError as e:
            raise DataError(f"Failed to remove tidy results {f}: {e.strerror or e}") from None


def read_tidy(path: str | Path, kind: str) -> pd.DataFrame:
    """Read and validate <path>/<kind>.csv (or path itself if it ends in .csv). Leading '#' lines
    (how a file written before sidecars was made) are skipped."""
    _kind_ok(kind)
    f = _csv_path(path, kind)
    try:
        st = os.stat(f)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_TIDY_BYTES:  # bounded before reading
            raise DataError(f"Failed to read tidy results {f}: not a regular file of at most "
                            f"{MAX_TIDY_BYTES} bytes")
        with open(f) as fh:
            skip = 0
            for line in fh:
                if not line.startswith("#"):
                    break
                skip += 1
        # text columns as text: a metric or unit written as a number must not become an int
        df = pd.read_csv(f, skiprows=skip, dtype={c: str for c in TEXT})
    except FileNotFoundError:
        raise DataError(f"Failed to read tidy results {f}: no such file") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"Failed to read tidy results {f}: the file is empty") from None
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise DataError(f"Failed to read tidy results {f}: {e}") from None
    return validate(kind, df, str(f), skip)


def read_all(resdir: str | Path) -> dict[str, pd.DataFrame]:
    """Every tidy kind present in a results directory."""
    return {k: read_tidy(resdir, k) for k in KINDS if (Path(resdir) / f"{k}.csv").exists()}
