"""Ingest of the thesis's raw measurements (../shared/thesis-data, formats in its README) into
the tidy schema under results/thesis/.

Steady state (documented rule): a per-second series starts and ends with ramp seconds while TRex
starts and stops. A second belongs to the steady state when its value is at least 95 % of the
series' median; leading and trailing seconds below that are ramp and excluded (interior dips are
kept: they are measurement). The steady-state rate of a trial is the median of its steady
seconds. Loss uses the seconds where the transmit series is steady: loss = 1 − Σrx / Σtx over
them. At low load Σrx can exceed Σtx by a few 0.1 %: generator and backend sample their
counters on different clocks; the value is kept as measured.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .errors import DataError
from .results import row, write_tidy

STEADY_FRACTION = 0.95


def read_series(path: Path) -> np.ndarray:
    """One integer per line; DataError naming file and line otherwise."""
    try:
        text = path.read_text()
    except OSError as e:
        raise DataError(f"Failed to read series {path}: {e.strerror}") from None
    vals = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        try:
            vals.append(int(s))
        except ValueError:
            raise DataError(f"Failed to read series {path}: line {n}: {s[:40]!r} is not an integer") from None
    if not vals:
        raise DataError(f"Failed to read series {path}: the file is empty")
    return np.array(vals, dtype=np.int64)


def steady_range(x: np.ndarray) -> tuple[int, int]:
    """[first, last) of the steady seconds (ramp seconds at both ends excluded)."""
    thr = STEADY_FRACTION * np.median(x)
    ok = np.nonzero(x >= thr)[0]
    return int(ok[0]), int(ok[-1]) + 1


def ingest_pps(d: Path) -> list[dict]:
    rows = []
    for f in sorted(d.glob("*b_*.txt")):
        m = re.fullmatch(r"(\d+)b_(\d+)\.txt", f.name)
        if not m:
            continue
        x = read_series(f)
        a, b = steady_range(x)
        steady = x[a:b]
        common = dict(testbed="thesis", lb="xenoflow", payload_bytes=int(m[1]), repetition=int(m[2]),
                      measured_pps=float(np.median(steady)),
                      source=f"thesis-data/pps/{f.name} lines {a + 1}-{b} of {len(x)}")
        rows.append(row(**common, metric="rx_pps", value=float(np.median(steady)), unit="packets/s"))
        # spread of the per-second rate inside the trial (the paper quotes CV < 0.08 %)
        cv = 100.0 * float(np.std(steady, ddof=1) / np.mean(steady)) if len(steady) > 1 else 0.0
        rows.append(row(**common, metric="cv_pct", value=cv, unit="%"))
    return rows


def ingest_loss(d: Path) -> list[dict]:
    rows = []
    for tx_f in sorted(d.glob("tx_*m_*.txt")):
        m = re.fullmatch(r"tx_(\d+)m_(\d+)\.txt", tx_f.name)
        if not m:
            continue
        rx_f = d / tx_f.name.replace("tx_", "rx_", 1)
        tx = read_series(tx_f)
        rx = read_series(rx_f)
        n = min(len(tx), len(rx))
        a, b = steady_range(tx[:n])
        loss = 1.0 - rx[a:b].sum() / tx[a:b].sum()
        offered = float(np.median(tx[a:b]))
        src = f"thesis-data/loss/{tx_f.name},{rx_f.name} lines {a + 1}-{b}"
        common = dict(testbed="thesis", lb="xenoflow", payload_bytes=22, repetition=int(m[2]),
                      offered_pps=offered, measured_pps=float(np.median(rx[a:b])), source=src)
        rows.append(row(**common, metric="loss_pct", value=100.0 * loss, unit="%"))
        rows.append(row(**common, metric="nominal_offered_pps", value=int(m[1]) * 1e6, unit="packets/s"))
    return rows


def split_name(x: int, y: int) -> str:
    """x % of the background to the DNS backend (fips2), y % to the other backend."""
    return "single" if (x, y) == (100, 0) else "worst" if (x, y) == (0, 100) else f"{x}/{y}"


def ingest_rtt(d: Path) -> tuple[list[dict], list[dict]]:
    from .pcap_rtt import analyze_pcap
    samples, summary = [], []

    def add(res, lb, f, split=None, bg=None):
        sm = res.summary()
        src = (f"thesis-data/rtt/{f.parent.name}/{f.name} packets {sm['first_packet']}-{sm['last_packet']} "
               f"(0-based), client {res.client_mac}")
        for (qi, ai), v in zip(res.pairs, res.rtts_us):
            samples.append(row(testbed="thesis", lb=lb, server="reflector", repetition=1, split=split, background_pps=bg,
                               metric="rtt_us", value=float(v), unit="us", source=f"{f.name}:{qi}>{ai}"))
        for k, v in sm.items():
            if k.endswith("_us") or k in ("n", "lost"):
                summary.append(row(testbed="thesis", lb=lb, server="reflector", repetition=1, split=split, background_pps=bg,
                                   metric=k if k in ("n", "lost") else f"rtt_{k}", value=v,
                                   unit="us" if k.endswith("_us") else "count", source=src))

    base = d / "baseline"
    for name, lb in (("rtt_xenoflow.pcap", "xenoflow"), ("pingpong_xenoflow.pcap", "none")):
        if (base / name).exists():
            add(analyze_pcap(base / name), lb, base / name)
    # rtt_NNm_X_Y: X % of the background to fips2 (the probe's backend) — an assumption, see the
    # data README: 100_0 = single endpoint, 0_100 = worst case
    for f in sorted((d / "under-load").glob("rtt_*m_*_*.pcap")):
        m = re.fullmatch(r"rtt_(\d+)m_(\d+)_(\d+)\.pcap", f.name)
        if not m:
            continue
        x, y = int(m[2]), int(m[3])
        split = split_name(x, y)
        add(analyze_pcap(f), "xenoflow", f, split, int(m[1]) * 1e6)
    return samples, summary


def ingest_thesis(datadir: str | Path, outdir: str | Path, progress=print) -> dict[str, int]:
    """Ingest whichever of pps/, loss/, rtt/ exist; returns rows written per kind."""
    datadir, outdir = Path(datadir), Path(outdir)
    if not datadir.is_dir():
        raise DataError(f"Failed to ingest thesis data {datadir}: no such directory")
    written = {}
    if (datadir / "pps").is_dir():
        written["pps"] = len(r := ingest_pps(datadir / "pps"))
        write_tidy("pps", r, outdir)
        progress(f"pps: {written['pps']} rows ({written['pps'] // 2} trials)")
    if (datadir / "loss").is_dir():
        written["loss"] = len(r := ingest_loss(datadir / "loss"))
        write_tidy("loss", r, outdir)
        progress(f"loss: {written['loss']} rows")
    if (datadir / "rtt").is_dir():
        s, m = ingest_rtt(datadir / "rtt")
        write_tidy("rtt_samples", s, outdir)
        write_tidy("rtt_summary", m, outdir)
        written["rtt_samples"], written["rtt_summary"] = len(s), len(m)
        progress(f"rtt: {len(s)} samples")
    if not written:
        raise DataError(f"Failed to ingest thesis data {datadir}: none of pps/, loss/, rtt/ present")
    return written
