"""BPF fixture tables: one table of frames drives an XDP program's correctness test and its perf run
(after Katran's BpfTester, testing/framework/BpfTester.cpp, and its fixture tables,
testing/fixtures/KatranBaseTestFixtures.h).

A row (`Fixture`) is a description, an input frame, the expected XDP verdict and the expected
output frame (`out=None`: the input, untouched). Rows run through BPF_PROG_TEST_RUN
(`bpftool prog run`: the real kernel and verifier, no NIC, no namespace) against a program pinned
in bpffs, after the caller has filled its maps. `check()` runs every row and raises
`FixtureMismatch` naming each row that differed, with its input, expected and actual bytes in
hex; `perf()` runs each row `repeat` times inside the kernel and gives ns per run, so a benchmark
times the same frames the test checks. Needs root (bpftool, bpffs). Under test-run a redirect is
not carried out: the verdict is XDP_REDIRECT when the map lookup succeeds, the frame as rewritten.

Example (the eBPF baseline, loaded and configured as its controller does):

    from xenobench.bpftest import Fixture, check, perf

    prog = pindir / "progs" / "xb_lb"     # bpftool prog loadall OBJ pindir/progs ... pinmaps pindir/maps
    rows = [Fixture("even source: backend 0, MACs rewritten", frame_in, "XDP_TX", frame_out),
            Fixture("ARP passes untouched", arp_frame, "XDP_PASS")]
    check(prog, rows)                     # FixtureMismatch lists every row that differed
    for row, ns in perf(prog, rows, repeat=1_000_000):
        print(f"{row.description}: {ns:.0f} ns/run")
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .agents.bpf import bpftool

VERDICTS = ("XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT")  # enum xdp_action order
ETH_HLEN = 14  # BPF_PROG_TEST_RUN refuses shorter XDP input (EINVAL): a table cannot hold a runt


@dataclass(frozen=True)
class Fixture:
    description: str
    frame: bytes
    verdict: str  # one of VERDICTS
    out: bytes | None = None  # the frame the program leaves; None: the input, untouched

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"Failed to build fixture {self.description!r}: verdict {self.verdict!r} is not one "
                             f"of {', '.join(VERDICTS)}")
        if len(self.frame) < ETH_HLEN:
            raise ValueError(f"Failed to build fixture {self.description!r}: {len(self.frame)} B frame, "
                             f"BPF_PROG_TEST_RUN needs at least {ETH_HLEN}")

    @property
    def expected(self) -> bytes:
        return self.frame if self.out is None else self.out


@dataclass(frozen=True)
class Run:
    verdict: str
    out: bytes
    ns: float  # the kernel's mean duration of one run (BPF_PROG_TEST_RUN's duration / repeat)


class FixtureMismatch(AssertionError):
    """Rows whose verdict or output frame differed; the message shows each in full."""


def run(prog: Path | str, frame: bytes, repeat: int = 1) -> Run:
    """One frame through the pinned program `prog`, `repeat` times in the kernel."""
    if repeat < 1:
        raise ValueError(f"Failed to run {prog}: repeat {repeat} is not a positive count")
    with tempfile.TemporaryDirectory(prefix="xb-bpftest-") as d:
        fin, fout = Path(d) / "in", Path(d) / "out"
        fin.write_bytes(frame)
        p = bpftool("prog", "run", "pinned", str(prog), "data_in", str(fin), "data_out", str(fout),
                    "repeat", str(repeat))
        m = re.search(r"Return value: (\d+), duration( \(average\))?: (\d+)ns", p.stdout + p.stderr)
        if not m:
            raise RuntimeError(f"Failed to read `bpftool prog run` output for {prog}: {(p.stdout + p.stderr).strip()!r}")
        rv = int(m.group(1))
        return Run(VERDICTS[rv] if rv < len(VERDICTS) else f"unknown verdict {rv}", fout.read_bytes(),
                   float(m.group(3)))


def _row(f: Fixture, got: Run) -> str:
    return (f"- {f.description}\n    input    {f.frame.hex()}\n"
            f"    expected {f.verdict} {f.expected.hex()}\n    actual   {got.verdict} {got.out.hex()}")


def check(prog: Path | str, rows: list[Fixture]) -> list[Run]:
    """Every row through `prog`; FixtureMismatch listing each row whose verdict or output differed
    (all rows run, so one failure shows every difference). The runs, in row order."""
    runs = [run(prog, f.frame) for f in rows]
    bad = [_row(f, r) for f, r in zip(rows, runs) if (r.verdict, r.out) != (f.verdict, f.expected)]
    if bad:
        raise FixtureMismatch(f"{len(bad)} of {len(rows)} fixtures of {prog} differ:\n" + "\n".join(bad))
    return runs


def perf(prog: Path | str, rows: list[Fixture], repeat: int = 1_000_000) -> list[tuple[Fixture, float]]:
    """Each row `repeat` times in the kernel: (row, ns per run). The rows are check()ed first, so a
    number is never of a program that misbehaves. The kernel runs the repeats on one buffer
    (net/bpf/test_run.c does not reset it between them): a program that rewrites a frame in
    place sees its own output from the second run on, which costs the same for idempotent
    rewrites (MAC rewrites) but not for, say, a DNS responder turning a query into a reply."""
    check(prog, rows)
    return [(f, run(prog, f.frame, repeat).ns) for f in rows]
