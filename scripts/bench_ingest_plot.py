#!/usr/bin/env python3
"""Benchmark: ingest all shared thesis data and draw all six figures (target: <= 60 s).
Prints the time of each stage; run it on an otherwise idle machine.
Usage: .venv/bin/python scripts/bench_ingest_plot.py [THESIS_DATA_DIR]"""

import tempfile
import time
from pathlib import Path

from xenobench import REPO_ROOT
from xenobench.ingest import ingest_thesis
from xenobench.plots import plot_all
import benchargs  # scripts/benchargs.py

data = benchargs.parse(__doc__, ("THESIS_DATA_DIR", benchargs.existing_dir, REPO_ROOT.parent / "shared" / "thesis-data",
                                "the thesis's raw data")).thesis_data_dir
files = [f for f in data.rglob("*") if f.is_file()]
size_mb = sum(f.stat().st_size for f in files) / 1e6
with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    rows = ingest_thesis(data, Path(tmp) / "res", progress=lambda s: None)
    t1 = time.perf_counter()
    figs = plot_all(Path(tmp) / "res", Path(tmp) / "fig", "thesis", progress=lambda s: None)
    t2 = time.perf_counter()
print(f"input: {len(files)} files, {size_mb:.1f} MB from {data}")
print(f"ingest: {t1 - t0:.2f} s ({sum(rows.values())} tidy rows: {rows})")
print(f"plots:  {t2 - t1:.2f} s ({len(figs)} figures x PNG+PDF)")
print(f"total:  {t2 - t0:.2f} s (target <= 60 s)")
