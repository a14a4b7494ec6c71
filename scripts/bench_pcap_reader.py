#!/usr/bin/env python3
"""Benchmark: reading the thesis's RTT captures with xenobench.pcap_rtt's reader vs dpkt's.
The choice of reader (prefer dpkt unless it is slower on these captures) is decided by
these figures; the pairing and statistics after the read are the same for both. Prints the best of
3 runs per reader; run it on an otherwise idle machine.
Usage: .venv/bin/python scripts/bench_pcap_reader.py [THESIS_DATA_DIR]"""

import sys
import time

import dpkt

from xenobench import REPO_ROOT
from xenobench.pcap_rtt import analyze_pcap, read_pcap
import benchargs  # scripts/benchargs.py

data = benchargs.parse(__doc__, ("THESIS_DATA_DIR", benchargs.existing_dir, REPO_ROOT.parent / "shared" / "thesis-data",
                                "the thesis's raw data (captures under rtt/)")).thesis_data_dir
files = sorted((data / "rtt").rglob("*.pcap"))
if not files:
    sys.exit(f"no captures under {data}/rtt")


def ours():
    n = 0
    for f in files:
        for _idx, _ts_ns, _frame in read_pcap(f):
            n += 1
    return n


def dpkt_reader():
    # dpkt's own reader: float seconds (Decimal for ns captures)
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            for _ts, _frame in dpkt.pcap.UniversalReader(fh):
                n += 1
    return n


def dpkt_integer_ns():
    # what a dpkt-based reader with integer ns costs: dpkt's record headers, our arithmetic
    n = 0
    for f in files:
        data_ = f.read_bytes()
        magic = dpkt.pcap.FileHdr(data_[:24]).magic
        hdr = dpkt.pcap.MAGIC_TO_PKT_HDR[magic]
        unit = 1 if magic in (dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC_NANO) else 1000
        off, hl = 24, hdr.__hdr_len__
        while off < len(data_):
            h = hdr(data_[off:off + hl])
            off += hl
            _ts_ns, _frame = h.tv_sec * 10 ** 9 + h.tv_usec * unit, data_[off:off + h.caplen]
            off += h.caplen
            n += 1
    return n


def best(fn, runs=3):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t)
    return min(times), n


size = sum(f.stat().st_size for f in files) / 1e6
print(f"input: {len(files)} captures, {size:.1f} MB from {data}/rtt")
for name, fn in (("xenobench reader (integer ns)", ours), ("dpkt UniversalReader (float s)", dpkt_reader),
                 ("dpkt record headers (integer ns)", dpkt_integer_ns)):
    t, n = best(fn)
    print(f"read   {name:34} {t:6.3f} s  ({n} records, {t / n * 1e6:.2f} µs per record)")
t = time.perf_counter()
pairs = sum(analyze_pcap(f).n for f in files)
print(f"analyze (read + DNS parse + pairing)     {time.perf_counter() - t:6.3f} s  ({pairs} RTTs)")
