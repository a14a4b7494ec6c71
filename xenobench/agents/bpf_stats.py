"""Keeps the kernel's BPF run-time statistics on while it runs, on the node whose programs are
measured: `python -m xenobench.agents.bpf_stats hold`.

With the statistics on, the kernel times every run of every BPF program and adds the time and a
count to the program's `run_time_ns` and `run_cnt` (`bpftool prog show`). It costs two clock
reads per run of every program on the machine, so it is on only while a cost is measured, never
while a rate is. The agent turns it on with the bpf(2) command BPF_ENABLE_STATS rather than the
kernel.bpf_stats_enabled sysctl: the kernel keeps the statistics on while the returned file
descriptor is open, so they end with this process however it ends (a SIGKILL included), and
nothing is left switched on.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import signal
import struct
import sys

BPF_ENABLE_STATS = 32        # enum bpf_cmd (include/uapi/linux/bpf.h)
BPF_STATS_RUN_TIME = 0       # enum bpf_stats_type
NR_BPF = {"x86_64": 321, "aarch64": 280}  # __NR_bpf per architecture


def enable_run_time_stats() -> int:
    """BPF_ENABLE_STATS(BPF_STATS_RUN_TIME); returns the fd that keeps them on (needs CAP_SYS_ADMIN)."""
    nr = NR_BPF.get(platform.machine())
    if nr is None:
        raise OSError(f"bpf(2) syscall number unknown for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(struct.pack("<I", BPF_STATS_RUN_TIME), 4)  # attr.enable_stats.type
    fd = libc.syscall(nr, BPF_ENABLE_STATS, attr, ctypes.sizeof(attr))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"bpf(BPF_ENABLE_STATS): {os.strerror(err)}")
    return fd


def hold() -> int:
    try:
        fd = enable_run_time_stats()
    except OSError as e:
        print(f"Failed to turn BPF run-time statistics on: {e}", file=sys.stderr)
        return 2
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # taken by sigwait below, not as an exception
    print(json.dumps({"event": "started", "stats": "run_time"}), flush=True)
    signal.sigwait(stop)
    os.close(fd)
    print(json.dumps({"event": "stopped"}), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xenobench.agents.bpf_stats", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("hold", help="turn the run-time statistics on until SIGTERM/SIGINT")
    ap.parse_args(argv)
    return hold()


if __name__ == "__main__":
    sys.exit(main())
