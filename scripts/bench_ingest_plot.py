#!/usr/bin/env python3
"""Benchmark: ingest all shared thesis data and draw all figures (issue target: <= 60 s).
Usage: .venv/bin/python scripts/bench_ingest_plot.py [THESIS_DATA_DIR]"""

import sys
import tempfile
import time
from pathlib import Path

from xenobench import REPO_ROOT
from xenobench.ingest import ingest_thesis
from xenobench.plots import plot_all

data = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT.parent / "shared" / "thesis-data"
with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    rows = ingest_thesis(data, Path(tmp) / "res", progress=lambda s: None)
    t1 = time.perf_counter()
    figs = plot_all(Path(tmp) / "res", Path(tmp) / "fig", "thesis", progress=lambda s: None)
    t2 = time.perf_counter()
print(f"ingest: {t1 - t0:.2f} s ({sum(rows.values())} rows)  plots: {t2 - t1:.2f} s ({len(figs)} figures x 2 formats)"
      f"  total: {t2 - t0:.2f} s (target <= 60 s)")
