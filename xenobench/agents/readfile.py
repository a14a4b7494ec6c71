"""Fresh copies of files on request, with no process started per read.

    python -m xenobench.agents.readfile PATH...

Each line on stdin is the index of a PATH; the reply on stdout is the file read afresh from its
start (a /proc file is generated at each read from offset 0, proc(5)), framed as one line with its
length in bytes and then the bytes; a file that cannot be read is one line `E <reason>`. The
program ends at EOF on stdin, which is what it sees when the harness, or its SSH connection, goes.

Why: under full load on a 2-core machine (the generator busy on one CPU, the LB's NAPI thread at
SCHED_FIFO on the other) a counter read that forks `nsenter ... cat /proc/net/dev` waited 100-200 ms
for the CPU, so a sampler asked for one read every 50 ms got one in 200 ms and a 0.3 s block of the
interleaved rate design was left with a single sample (xenobench.sampler, xenobench.measure.rank). A read
here is a pipe round trip to a process that is already running.
"""

from __future__ import annotations

import os
import sys


def read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    parts = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            return b"".join(parts)
        parts.append(b)


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m xenobench.agents.readfile PATH...", file=sys.stderr)
        return 2
    fds: dict[int, int] = {}
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            i = int(line)
            if not 0 <= i < len(paths):
                raise ValueError
        except ValueError:
            out.write(f"E no path with index {line.strip()[:20].decode(errors='replace')!r} (0..{len(paths) - 1})\n".encode())
            out.flush()
            continue
        try:
            if i not in fds:
                fds[i] = os.open(paths[i], os.O_RDONLY)
            data = read_all(fds[i])
        except OSError as e:
            fd = fds.pop(i, None)
            if fd is not None:
                os.close(fd)
            out.write(f"E {paths[i]}: {e.strerror or e}\n".encode())
        else:
            out.write(b"%d\n" % len(data) + data)
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
