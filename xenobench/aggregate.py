"""Trial directories → tidy CSVs (docs/results.md). Nothing but the trial directories is read, so
the CSVs can be regenerated at any time: `xenobench experiment aggregate results/<testbed>`.

Only valid trials become rows; invalid ones are listed in invalid.csv (and in the run report) with
their reasons, never dropped silently.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from .errors import DataError
from .layout import ResultsTree, TrialDir
from .results import KINDS, row, write_tidy

RTT_PERCENTILES = (1, 5, 25, 75, 95, 99)


def trial_results(resdir: Path) -> list[tuple[TrialDir, dict]]:
    """(trial, result.json) of every completed trial under <resdir>/trials, in sorted order."""
    return [(t, t.read_result()) for t in ResultsTree.of(resdir).completed_trials()]


def read_probe_records(path: Path) -> list[float]:
    """RTTs in µs of the answered probes (status ok) in a prober's raw records: JSON lines
    (xenobench.rtt) or CSV, each with rtt_ns and status."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DataError(f"Failed to read probe records {path}: no such file") from None
    if path.suffix == ".jsonl":
        recs = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DataError(f"Failed to read probe records {path}: line {n}: {e.msg}") from None
    else:
        rd = csv.DictReader(text.splitlines())
        if rd.fieldnames is None or "rtt_ns" not in rd.fieldnames:
            raise DataError(f"Failed to read probe records {path}: no rtt_ns column")
        recs = list(rd)
    return [int(r["rtt_ns"]) / 1000.0 for r in recs
            if r.get("status", "ok") == "ok" and r.get("rtt_ns") not in ("", None)]


def _rtt_stats(v: np.ndarray) -> dict:
    st = {"median": float(np.median(v)), "mean": float(np.mean(v)),
          "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
          "min": float(v.min()), "max": float(v.max())}
    for p in RTT_PERCENTILES:
        st[f"p{p}"] = float(np.percentile(v, p))
    return st


def rows_for_trial(testbed: str, trial: TrialDir, res: dict, resdir: Path) -> dict[str, list[dict]]:
    exp, pt, rep = res["experiment"], res["point"], int(res["repetition"])
    o = res["outputs"]
    src = str(trial.path.relative_to(resdir))
    out: dict[str, list[dict]] = {k: [] for k in KINDS}
    if exp in ("pps", "loss", "compare"):
        gen = o.get("generator") or {}
        offered = gen.get("achieved_pps")
        common = dict(testbed=testbed, lb=pt.get("lb"), payload_bytes=o["payload"], repetition=rep,
                      offered_pps=offered, measured_pps=o["rx_pps"], source=src)
        if exp == "pps":
            out["pps"].append(row(**common, metric="rx_pps", value=o["rx_pps"], unit="packets/s"))
            if o.get("rx_cv_pct") is not None:
                out["pps"].append(row(**common, metric="cv_pct", value=o["rx_cv_pct"], unit="%"))
        elif exp == "loss":
            out["loss"].append(row(**common, metric="loss_pct", value=o["loss_pct"], unit="%"))
            out["loss"].append(row(**common, metric="nominal_offered_pps", value=o["requested_pps"],
                                   unit="packets/s"))
        else:
            out["compare"].append(row(**common, metric="max_pps", value=o["rx_pps"], unit="packets/s"))
        return out
    if exp in ("rtt", "rtt_load"):
        s = o["probe"]
        split = pt.get("split")
        bg = pt.get("level_pps") if exp == "rtt_load" else None
        lb = pt.get("lb") or ("xenoflow" if exp == "rtt_load" else "none")
        common = dict(testbed=testbed, lb=lb, server=o.get("server"), repetition=rep, split=split,
                      background_pps=bg)
        chosen = trial.attempt(res["chosen_attempt"]).probe_records
        rtts = np.array(read_probe_records(chosen))
        rel = chosen.relative_to(resdir)
        for i, v in enumerate(rtts):
            out["rtt_samples"].append(row(**common, metric="rtt_us", value=float(v), unit="us", source=f"{rel}:{i}"))
        summ = [("n", len(rtts), "count"), ("lost", s.get("lost", 0), "count")]
        if len(rtts):
            summ += [(f"rtt_{k}_us", v, "us") for k, v in _rtt_stats(rtts).items()]
        pc = s.get("pcap") or {}
        if pc.get("median_us") is not None:
            summ += [("rtt_pcap_median_us", pc["median_us"], "us"),
                     ("rtt_pcap_diff_us", s.get("pcap_median_diff_us"), "us")]
        for m, v, u in summ:
            if v is not None:
                out["rtt_summary"].append(row(**common, metric=m, value=float(v), unit=u, source=str(rel)))
        return out
    raise DataError(f"Failed to aggregate trial {trial.path}: unknown experiment {exp!r}")


def aggregate(resdir: str | Path, testbed: str | None = None, progress=print) -> dict:
    """Write <resdir>/<kind>.csv for every kind with rows, and <resdir>/invalid.csv."""
    resdir = Path(resdir)
    testbed = testbed or resdir.name
    rows: dict[str, list[dict]] = {k: [] for k in KINDS}
    invalid = []
    for trial, res in trial_results(resdir):
        if not res.get("valid"):
            reasons = [r for a in res["attempts"] if a["attempt"] == res["chosen_attempt"] for r in a["reasons"]]
            invalid.append({"trial": str(trial.path.relative_to(resdir)), "experiment": res["experiment"],
                            "attempts": len(res["attempts"]), "reasons": "; ".join(reasons)})
            continue
        for k, rs in rows_for_trial(testbed, trial, res, resdir).items():
            rows[k] += rs
    written = {}
    for k, rs in rows.items():
        if rs:
            write_tidy(k, rs, resdir, header=f"xenobench experiment aggregate {resdir} (valid trials only)")
            written[k] = len(rs)
            progress(f"{k}.csv: {len(rs)} rows")
        elif (resdir / f"{k}.csv").exists():  # this directory's CSVs are ours: none stale
            (resdir / f"{k}.csv").unlink()
    with open(resdir / "invalid.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["trial", "experiment", "attempts", "reasons"])
        w.writeheader()
        w.writerows(invalid)
    written["invalid"] = len(invalid)
    progress(f"invalid.csv: {len(invalid)} invalid trials")
    return written
