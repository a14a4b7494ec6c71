#!/usr/bin/env python3
"""Benchmark: `xenobench rtt pcap` on a multi-GB capture, plain and gzip-compressed, against an
independent dpkt pairing (tests/dpkt_pairing.py) on the same files: wall time and peak memory
(the child process's maximum RSS), plus the record reader alone (xenobench.capture against
dpkt.pcap.Reader). The capture is generated into WORKDIR and deleted afterwards: a client-side
capture under load, a DNS probe and its answer (ids counting up, RTT 15-40 µs) among every
DNS_EVERY frames, the rest UDP load frames of 64-1518 bytes, nanosecond pcap.
Checks free space first (plain + compressed need about 1.6 x SIZE_GB).
Usage: .venv/bin/python scripts/bench_pcap_stream.py [SIZE_GB] [WORKDIR] [DNS_EVERY]"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

import benchargs  # scripts/benchargs.py

from xenobench import REPO_ROOT

args = benchargs.parse(__doc__, ("SIZE_GB", benchargs.positive_float, 2.0, "size of the plain capture in GB"),
                       ("WORKDIR", benchargs.existing_dir, Path("/tmp"), "where the captures are written"),
                       ("DNS_EVERY", benchargs.positive_int, 50, "one probe and its answer per this many frames"))
size = int(args.size_gb * 1e9)
free = shutil.disk_usage(args.workdir).free
if free < 1.6 * size + 1e9:
    sys.exit(f"Failed to run the benchmark: {args.workdir} has {free / 1e9:.1f} GB free, {1.6 * size / 1e9 + 1:.1f} GB "
             "needed (give a smaller SIZE_GB or another WORKDIR)")

CLIENT, GW, SERVER = (bytes.fromhex(m) for m in ("020000000100", "020000000500", "020000000200"))


def _ip_udp(src: bytes, dst: bytes, sport: int, dport: int, payload: bytes) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0, src, dst)
    return ip + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def _dns(qid: int, answer: bool) -> bytes:
    q = b"\x07example\x03com\x00\x00\x01\x00\x01"
    if not answer:
        return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q
    return struct.pack("!HHHHHH", qid, 0x8580, 1, 1, 0, 0) + q + b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x01\x2c\x00\x04" \
        + bytes([198, 18, 0, 53])


def generate(path: Path, every: int) -> tuple[int, int]:
    """Write the capture; (frames, probes)."""
    c_ip, s_ip, load_dst = bytes([198, 18, 0, 16]), bytes([198, 18, 0, 100]), bytes([198, 18, 1, 1])
    payloads = [os.urandom(1500) for _ in range(16)]
    sizes = [64, 128, 256, 512, 1024, 1518, 90, 700]
    rec = struct.Struct("<IIII")
    t = 1_700_000_000 * 10 ** 9
    frames = probes = written = 0
    with open(path, "wb", buffering=1 << 22) as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        written = 24
        while written < size:
            out = []
            for i in range(every - 2):
                n = sizes[(frames + i) % len(sizes)]
                body = _ip_udp(c_ip, load_dst, 9000, 9, payloads[i % 16][:n - 42])
                out.append((t, GW + CLIENT + b"\x08\x00" + body))
                t += 700
            qid = probes & 0xFFFF
            out.append((t, GW + CLIENT + b"\x08\x00" + _ip_udp(c_ip, s_ip, 40000, 53, _dns(qid, False))))
            out.append((t + 15_000 + probes % 25_000, CLIENT + SERVER + b"\x08\x00" +
                        _ip_udp(s_ip, c_ip, 53, 40000, _dns(qid, True))))
            t += 50_000
            for ts, b in out:
                chunk = rec.pack(ts // 10 ** 9, ts % 10 ** 9, len(b), len(b)) + b
                f.write(chunk)
                written += len(chunk)
            frames += len(out)
            probes += 1
    return frames, probes


def rusage_child(argv: list[str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, stdout) of `python argv...`; the RSS from wait4 of this child."""
    r, w = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.execve(sys.executable, [sys.executable, *argv], {**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    os.close(w)
    with os.fdopen(r) as fh:
        out = fh.read()
    _, status, ru = os.wait4(pid, 0)
    dt = time.perf_counter() - t
    if status:
        sys.exit(f"Failed to run {' '.join(argv[:4])}: exit status {status}")
    return dt, ru.ru_maxrss / 1024, out


OURS_READER = "import sys; from xenobench.capture import Capture\nn=0\nfor r in Capture(sys.argv[1]).frames(): n+=1\nprint(n)"
DPKT_READER = ("import sys, gzip, dpkt\nf=open(sys.argv[1],'rb')\nif f.read(2)==b'\\x1f\\x8b': f=gzip.open(sys.argv[1])\n"
               "else: f.seek(0)\nn=0\nfor r in dpkt.pcap.Reader(f): n+=1\nprint(n)")
DPKT_PAIRING = ("import sys, gzip, statistics\nsys.path.insert(0, sys.argv[2])\nfrom tests.dpkt_pairing import dpkt_rtts\n"
                "f=open(sys.argv[1],'rb')\nif f.read(2)==b'\\x1f\\x8b': f=gzip.open(sys.argv[1])\nelse: f.seek(0)\n"
                "r=dpkt_rtts(f, '02:00:00:00:01:00', in_order=True)\nprint(len(r), statistics.median(r)/1000)")

work = Path(tempfile.mkdtemp(prefix="xbbench-", dir=args.workdir))
try:
    plain, packed = work / "load.pcap", work / "load.pcap.gz"
    t = time.perf_counter()
    frames, probes = generate(plain, args.dns_every)
    print(f"generated {plain}: {plain.stat().st_size / 1e9:.2f} GB, {frames} frames, {probes} probes "
          f"({time.perf_counter() - t:.0f} s)", flush=True)
    t = time.perf_counter()
    with open(plain, "rb") as src, gzip.open(packed, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 22)
    print(f"gzip -1: {packed.stat().st_size / 1e9:.2f} GB ({time.perf_counter() - t:.0f} s)", flush=True)
    print(f"{'what':44} {'file':8} {'seconds':>8} {'peak RSS MB':>12}  result")
    for f, label in ((plain, "plain"), (packed, "gzip")):
        for what, argv, parse in (
                ("read records: xenobench.capture", ["-c", OURS_READER, str(f)], str.strip),
                ("read records: dpkt.pcap.Reader", ["-c", DPKT_READER, str(f)], str.strip),
                ("pair: xenobench rtt pcap --json", ["-m", "xenobench", "rtt", "pcap", str(f), "--json"],
                 lambda o: (lambda s: f"n={s['n']} median {s['median_raw_us']} µs")(json.loads(o))),
                ("pair: dpkt (tests/dpkt_pairing.py)", ["-c", DPKT_PAIRING, str(f), str(REPO_ROOT)],
                 lambda o: "n={} median {} µs".format(*o.split()))):
            dt, rss, out = rusage_child(argv)
            print(f"{what:44} {label:8} {dt:8.1f} {rss:12.0f}  {parse(out)}", flush=True)
finally:
    shutil.rmtree(work, ignore_errors=True)
