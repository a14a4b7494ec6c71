"""The tidy results schema shared by every source: the namespace testbed, the thesis testbed live,
the thesis's raw data and published values. One CSV per measurement kind, long format: one row
per (trial or sample, metric). Documented in docs/results.md.

API (what the trial runner, the ingest, the plots and `xenobench compare` use):

    row(**columns) -> dict                       one row; unknown columns are an error
    validate(kind, df, where) -> DataFrame       checks columns, types, units; returns df[COLUMNS]
    write_tidy(kind, rows_or_df, path) -> Path   path is a results directory (→ <path>/<kind>.csv)
                                                 or a .csv file; validated, written atomically
    read_tidy(path, kind) -> DataFrame           the same path forms; leading '#' lines (how a
                                                 fixture was made) are skipped; validated
    read_all(resdir) -> {kind: DataFrame}        every kind present
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import DataError

KINDS = ("pps", "loss", "rtt_samples", "rtt_summary", "compare", "ndr_pdr", "rtt_paired")

COLUMNS = [
    "testbed",        # local | fips | thesis | ... (every figure is labelled with it)
    "lb",             # xenoflow | ebpf | none | katran | kakao-loopback | kakao-255
    "server",         # RTT: the DNS backend answering the probes: reflector | python | bind9
    "generator",      # what offered the traffic (the trial's record): trex | xdpgen | trafgen
    "payload_bytes",  # UDP payload
    "frame_bytes",    # Ethernet frame without FCS = payload + 42
    "offered_pps",    # offered load (generator), packets/s
    "measured_pps",   # received at the backends, packets/s
    "repetition",     # 1, 2, ...
    "split",          # rtt under load: single | worst | X/Y (% of background to the DNS backend / other)
    "background_pps", # rtt under load: background load, packets/s
    "metric",         # e.g. rx_pps, loss_pct, rtt_us, rtt_median_us
    "value",
    "unit",
    "source",         # provenance: file and line/packet ranges, or document and figure
]
NUMERIC = ("payload_bytes", "frame_bytes", "offered_pps", "measured_pps", "repetition",
           "background_pps", "value")
REQUIRED = ("testbed", "lb", "metric", "value", "unit", "source")  # never empty
OPTIONAL = ("server", "generator")  # added later; files written before them read as empty

# Units of the metrics the harness writes; a known metric with another unit is an error (a Mpps
# value in a packets/s column is the classic silent factor-10^6 bug). Other metrics are allowed.
UNITS = {
    "rx_pps": "packets/s", "tx_pps": "packets/s", "max_pps": "packets/s",
    "lb_prog_ns_per_frame": "ns",  # xenobench.progcost
    "nominal_offered_pps": "packets/s",
    "loss_pct": "%", "cv_pct": "%",
    "rtt_us": "us", "n": "count", "lost": "count",
    # ndr_pdr (xenobench.search): per goal <goal>_pps, _upper_bound_pps, _conditional_throughput_pps
    "ndr_pps": "packets/s", "pdr_pps": "packets/s",
    "ndr_upper_bound_pps": "packets/s", "pdr_upper_bound_pps": "packets/s",
    "ndr_conditional_throughput_pps": "packets/s", "pdr_conditional_throughput_pps": "packets/s",
    "ndr_relative_width": "ratio", "pdr_relative_width": "ratio",
    "search_trials": "count", "search_trial_seconds": "s", "search_wall_s": "s",
}
RTT_STAT_PREFIX = "rtt_"  # rtt_median_us, rtt_p99_us, ...: unit us

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


def validate(kind: str, df: pd.DataFrame, where: str = "rows", skipped_lines: int = 0) -> pd.DataFrame:
    """Check a tidy table; returns it with exactly COLUMNS in order and numeric columns as floats.
    Errors name `where` (the file), the line in the file, the column and the value."""
    _kind_ok(kind)
    df = df.assign(**{c: None for c in OPTIONAL if c not in df.columns})
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"Failed to read tidy results {where}: missing columns {', '.join(missing)}")
    df = df[COLUMNS].reset_index(drop=True)
    line = lambda i: i + 2 + skipped_lines  # noqa: E731  (after comments and the header)
    for c in REQUIRED:
        empty = df[c].isna() | (df[c].astype(str).str.strip() == "")
        if empty.any():
            i = int(np.flatnonzero(empty.to_numpy())[0])
            raise DataError(f"Failed to read tidy results {where}: line {line(i)}: column {c} is empty")
    for c in NUMERIC:
        num = pd.to_numeric(df[c], errors="coerce")
        bad = num.isna() & df[c].notna() & (df[c].astype(str).str.strip() != "")
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(f"Failed to read tidy results {where}: line {line(i)}: column {c}: "
                            f"{str(df[c].iloc[i])[:40]!r} is not a number")
        df[c] = num.astype(float)
        inf = np.isinf(df[c].to_numpy())
        if inf.any():  # a rate or RTT is finite; inf breaks every median, axis and ratio after it
            i = int(np.flatnonzero(inf)[0])
            raise DataError(f"Failed to read tidy results {where}: line {line(i)}: column {c}: "
                            f"{str(df[c].iloc[i])!r} is not a finite number")
    for i, (m, u) in enumerate(zip(df.metric, df.unit)):
        want = UNITS.get(m) or ("us" if m.startswith(RTT_STAT_PREFIX) and m.endswith("_us") else None)
        if want and u != want:
            raise DataError(f"Failed to read tidy results {where}: line {line(i)}: metric {m} has unit "
                            f"{u!r}, expected {want!r}")
    return df


def write_tidy(kind: str, rows, path: str | Path, header: str | None = None) -> Path:
    """Write rows (dicts from row() or a DataFrame) as <path>/<kind>.csv (or to path if it ends in
    .csv). `header`: comment lines written first with '# ' (how the file was made)."""
    _kind_ok(kind)
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=COLUMNS)
    out = _csv_path(path, kind)
    df = validate(kind, df, str(out))
    for c in ("payload_bytes", "frame_bytes", "repetition"):  # integers stay integers in the file
        df[c] = df[c].astype("Int64")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", newline="") as f:
            for line in (header or "").splitlines():
                f.write(f"# {line}\n")
            df.to_csv(f, index=False)
        os.replace(tmp, out)  # readers never see a half-written file
    except OSError as e:
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
        raise DataError(f"Failed to write tidy results {out}: {e.strerror or e}") from None
    return out


def read_tidy(path: str | Path, kind: str) -> pd.DataFrame:
    """Read and validate <path>/<kind>.csv (or path itself if it ends in .csv)."""
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
        df = pd.read_csv(f, skiprows=skip, dtype={c: str for c in ("testbed", "lb", "server", "generator", "split", "metric",
                                                                   "unit", "source")})
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
