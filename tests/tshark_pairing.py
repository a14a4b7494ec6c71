"""Wireshark's own pairing of DNS queries and answers, read from tshark, and compared with
xenobench.pcap_rtt's on a capture. tshark (Wireshark 4.0's packet-dns.c) names for each answer the
frame of the query it answers (dns.response_to) and the time between them (dns.time); the pairs
of the two are compared as (query frame, answer frame, RTT in ns), frames 0-based.

Run on files or folders: `.venv/bin/python -m tests.tshark_pairing CAPTURE_OR_DIR...` prints one
line per capture (agree, differ with the first differences, refused by both, or refused by one)
and the counts. tests/test_pcap_tshark.py runs it on the fixture captures when tshark is there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

from xenobench.capture import Capture
from xenobench.errors import DataError
from xenobench.pcap_rtt import analyze_pcap

TSHARK = shutil.which("tshark")


def tshark_pairs(path: Path, port: int = 53) -> list[tuple[int, int, int]]:
    """(query frame, answer frame, RTT ns) of every answer tshark pairs (frames 0-based), in
    answer order; only DNS on UDP `port` (tshark also decodes mDNS and LLMNR as DNS)."""
    decode = [] if port == 53 else ["-d", f"udp.port=={port},dns"]
    out = subprocess.run([TSHARK, "-n", "-r", str(path), *decode, "-Y", f"dns && udp.port == {port}",
                          "-T", "fields", "-e", "frame.number", "-e", "dns.response_to", "-e", "dns.time"],
                         capture_output=True, text=True, check=False)
    if out.returncode not in (0, 2):  # 2: a capture cut short, read up to the cut
        raise RuntimeError(f"tshark failed on {path}: {out.stderr.strip()}")
    pairs = []
    for line in out.stdout.splitlines():
        frame, to, dt = (line.split("\t") + ["", ""])[:3]
        if to and dt:
            pairs.append((int(to) - 1, int(frame) - 1, int(Decimal(dt) * 10 ** 9)))
    return pairs


def our_pairs(path: Path, port: int = 53, timeout_s: float | None = None):
    """(query frame, answer frame, RTT ns) of ours, or the refusal's text."""
    try:
        r = analyze_pcap(path, port=port, timeout_s=timeout_s)
    except DataError as e:
        return str(e)
    return [(q, a, int(t)) for (q, a), t in zip(r.pairs, r.rtts_ns.tolist())]


def readable_copy(path: Path, tmp: Path) -> Path | None:
    """The capture as tshark reads it: gzip as it is, other compression undone by our reader;
    None for text."""
    cap = Capture(path)
    try:
        if cap.fmt is None:
            return None
        if not cap.compression or cap.compression == ["gzip"]:
            return path
        out = tmp / (path.name + ".plain")
        with open(out, "wb") as w:
            w.write(cap.head)
            while chunk := cap._read(1 << 20):
                w.write(chunk)
        return out
    finally:
        cap.close()


def compare(path: Path, port: int = 53, timeout_s: float | None = None) -> tuple[str, str]:
    """(verdict, detail): agree | differ | both refuse | we refuse | tshark refuses | not a pcap."""
    with tempfile.TemporaryDirectory(prefix="xh-tshark-") as tmp:
        try:
            plain = readable_copy(path, Path(tmp))
        except DataError as e:
            return "not a pcap", str(e)
        if plain is None:
            return "not a pcap", "neither pcap nor pcapng (tshark does not read it)"
        theirs = tshark_pairs(plain, port)
    ours = our_pairs(path, port, timeout_s)
    if isinstance(ours, str):
        return ("both refuse" if not theirs else "we refuse"), ours.split(": ", 1)[-1]
    if not theirs:
        return "tshark refuses", f"we pair {len(ours)}"
    if sorted(ours) == sorted(theirs):
        return "agree", f"{len(ours)} pairs"
    # stamps finer than 1 ns: Wireshark cuts each to whole ns, the reader rounds it (1 ns apart)
    if len(ours) == len(theirs) and all(a[:2] == b[:2] and abs(a[2] - b[2]) <= 1
                                        for a, b in zip(sorted(ours), sorted(theirs))):
        return "agree", f"{len(ours)} pairs (within 1 ns: sub-ns stamps rounded, not cut)"
    a, b = set(ours), set(theirs)
    return "differ", (f"{len(ours)} ours, {len(theirs)} tshark's; only ours {sorted(a - b)[:3]}; "
                      f"only tshark's {sorted(b - a)[:3]}")


def main(argv: list[str]) -> int:
    if TSHARK is None:
        print("tshark is not installed", file=sys.stderr)
        return 2
    files = []
    for arg in argv:
        p = Path(arg)
        files += sorted(x for x in p.rglob("*") if x.is_file() and not x.name.endswith((".py", ".log", ".md"))) \
            if p.is_dir() else [p]
    counts: dict[str, int] = {}
    for f in files:
        verdict, detail = compare(f)
        counts[verdict] = counts.get(verdict, 0) + 1
        print(f"{verdict:15} {f}: {detail}")
    print("; ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
