"""The tidy results schema shared by every source: the namespace testbed, the thesis testbed live,
the thesis's raw data and published values. One CSV per measurement kind, long format: one row
per (trial or sample, metric). Documented in docs/results.md.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .errors import DataError

KINDS = ("pps", "loss", "rtt_samples", "rtt_summary", "compare")

COLUMNS = [
    "testbed",        # local | fips | thesis | published
    "lb",             # xenoflow | ebpf | none | katran | kakao-loopback | kakao-255
    "payload_bytes",  # UDP payload
    "frame_bytes",    # Ethernet frame without FCS = payload + 42
    "offered_pps",    # offered load (generator), packets/s
    "measured_pps",   # received at the backends, packets/s
    "repetition",
    "split",          # rtt under load: single | 50/50 | 70/30 | worst | X/Y
    "background_pps", # rtt under load: background load, packets/s
    "metric",         # e.g. rx_pps, loss_pct, rtt_us, rtt_median_us
    "value",
    "unit",
    "source",         # where the row came from (file, line/packet ranges; document and figure)
]

HEADERS = 42  # Ethernet 14 + IPv4 20 + UDP 8


def frame_bytes(payload: int) -> int:
    return payload + HEADERS


def line_rate_pps(payload: int, gbps: float = 100.0) -> float:
    """Layer-1 maximum: frame + 4 B FCS + 20 B preamble and inter-frame gap."""
    return gbps * 1e9 / ((payload + HEADERS + 4 + 20) * 8)


def row(**kw) -> dict:
    unknown = set(kw) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown tidy columns {sorted(unknown)}")
    r = {c: kw.get(c) for c in COLUMNS}
    if r["payload_bytes"] is not None and r["frame_bytes"] is None:
        r["frame_bytes"] = frame_bytes(int(r["payload_bytes"]))
    return r


def write_tidy(kind: str, rows, outdir: str | Path) -> Path:
    if kind not in KINDS:
        raise ValueError(f"unknown tidy kind {kind!r} (known: {', '.join(KINDS)})")
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=COLUMNS)
    out = Path(outdir) / f"{kind}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    df[COLUMNS].to_csv(out, index=False)
    return out


def read_tidy(resdir: str | Path, kind: str) -> pd.DataFrame:
    f = Path(resdir) / f"{kind}.csv"
    try:
        df = pd.read_csv(f)
    except FileNotFoundError:
        raise DataError(f"Failed to read tidy results {f}: no such file") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as e:
        raise DataError(f"Failed to read tidy results {f}: {e}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"Failed to read tidy results {f}: missing columns {', '.join(missing)}")
    return df
