#!/usr/bin/env python3
"""Benchmark: time from doca_flow_pipe_add_entry to the entry forwarding traffic, on the DOCA Flow
emulation (thesis related work: 305 µs for a rule insertion on a BlueField). Runs
lb/build/tests/bench_entry_latency (lb/tests/bench_entry_latency.c says how it measures: frames
back to back into port 0, kernel receive timestamp of the first rewritten frame on port 1's peer),
in its own private network namespace. Usage (root): .venv/bin/python scripts/bench_xenoflow_entry_latency.py [ROUNDS]"""

import subprocess
import sys
from pathlib import Path
import benchargs  # scripts/benchargs.py

exe = Path(__file__).resolve().parent.parent / "lb" / "build" / "tests" / "bench_entry_latency"
if not exe.exists():
    sys.exit(f"Failed to run {exe}: not built (make -C lb)")
rounds = str(benchargs.parse(__doc__, ("ROUNDS", benchargs.positive_int, 50, "entry insertions timed")).rounds)
sys.exit(subprocess.run([str(exe), rounds]).returncode)
