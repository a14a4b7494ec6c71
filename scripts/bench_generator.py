#!/usr/bin/env python3
"""Benchmark: the generator's drivers (loadgen/xdpgen: live frames where the kernel allows them,
the XDP loop everywhere) and trafgen, all sending 64 B frames (udp_payload, 22 B payload, 256
sources) from one pinned CPU into a veth whose peer drops every frame at XDP (tests/xdp_sink.py
xdp_sink_pair, a test fixture: namespaces <prefix>xg-gen and <prefix>xg-sink, removed at the end).
The peer's NAPI runs on the sender's CPU too, so "one core" is the whole path.

Prints, in one run, the methods interleaved round by round (the machine is shared and its state
moves: a figure per method is the median over ROUNDS rounds with its range, and the drivers'
ratio is taken within each round):
1. per driver the kernel runs and trafgen: the maximum rate, and the page allocations per frame
   (/proc/vmstat, system-wide: the loop clones each frame it sends, xdpgen.PAGES_PER_FRAME);
2. per driver: achieved/requested paced at 20 kpps, 1 Mpps and at 50 % and 90 % of its own maximum
   (count = rate x DURATION; the executor's rate rule, the steady-state span rate), the error in %;
3. where both drivers run: loop / live maximum per round.
A rate at a driver's maximum is the generator's, not a load balancer's: `testbed check` names the
driver a testbed uses, and the study records it with every trial.

The figures describe this machine only. With them: the load average, and the share of the sender's
CPU spent in the kernel while a driver ran (from /proc/stat; the rest went to other processes).
Usage (root): XENOBENCH_NS_PREFIX=xbb- .venv/bin/python scripts/bench_generator.py [DURATION] [ROUNDS] [CPU]"""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbb-")

from xenobench import REPO_ROOT  # noqa: E402
from xenobench.config import load_config  # noqa: E402
from xenobench.machine import page_allocs  # noqa: E402
from xenobench.traffic.profiles import compile_frames, to_trafgen, write_pcap  # noqa: E402
from xenobench.traffic.trafgen import parse_output  # noqa: E402
from xenobench.traffic.xdpgen import BINARY, achieved_rate  # noqa: E402

sys.path.insert(0, str(REPO_ROOT))  # the sink pair is a test fixture: tests/xdp_sink.py
from tests.xdp_sink import xdp_sink_pair  # noqa: E402
import benchargs  # noqa: E402  (scripts/benchargs.py)

args = benchargs.parse(__doc__, ("DURATION", benchargs.positive_float, 2.0, "seconds per trial"),
                       ("ROUNDS", benchargs.positive_int, 3, "trials per figure"),
                       ("CPU", benchargs.non_negative_int, 1, "CPU the sender is pinned to"))
duration, rounds, cpu = args.duration, args.rounds, args.cpu
TUN = {"payload": 22, "flows": 256, "vip": "198.18.0.100", "dst_mac": "02:00:00:00:05:00",
       "src_mac": "02:00:00:00:04:00", "src_ip_base": "198.19.0.0"}


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0]


def cpu_ticks() -> list[int]:
    """user, nice, system, idle, iowait, irq, softirq, steal of the sender's CPU (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            return [int(x) for x in line.split()[1:9]]
    return [0] * 8


def kernel_share(t0: list[int], t1: list[int]) -> float:
    """Share of the sender's CPU spent in the kernel (system + softirq: the generator and the
    sink's NAPI) while it ran; the rest went to other processes (user) or was stolen."""
    d = [b - a for a, b in zip(t0, t1)]
    return (d[2] + d[5] + d[6]) / max(1, sum(d))


shares: dict[str, list[float]] = {}


def xdpgen(driver: str, gen: str, pcap: Path, *args) -> tuple[dict, float]:
    """One run; (its result, page allocations per frame sent)."""
    t0, a0 = cpu_ticks(), page_allocs(Path("/proc/vmstat").read_text())
    p = subprocess.run(["ip", "netns", "exec", gen, str(BINARY), "--driver", driver, "--dev", "gen0",
                        "--pcap", str(pcap), "--cpu", str(cpu), *map(str, args)],
                       capture_output=True, text=True, timeout=600)
    a1 = page_allocs(Path("/proc/vmstat").read_text())
    shares.setdefault(driver, []).append(kernel_share(t0, cpu_ticks()))
    if p.returncode:
        raise SystemExit(f"xdpgen --driver {driver} failed (exit {p.returncode}): {p.stderr.strip()}")
    r = json.loads(p.stdout)
    return r, (a1 - a0) / max(1, r["frames"])


def trafgen_max(gen: str, cfg: Path, frames: int) -> float:
    p = subprocess.run(["ip", "netns", "exec", gen, "taskset", "-c", str(cpu), "trafgen", "-o", "gen0", "-i", str(cfg),
                        "-P", "1", "-t", "0", "--no-sock-mem", "-Q", "-n", str(frames)],
                       capture_output=True, text=True, timeout=600)
    s = parse_output(p.stdout + p.stderr)
    if not s["tx_packets"] or not s["loop_s"]:
        raise SystemExit(f"trafgen failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
    return s["tx_packets"] / s["loop_s"]


def spread(xs: list[float], scale: float = 1.0, fmt: str = ".2f") -> str:
    return (f"{statistics.median(xs) * scale:{fmt}} (range {min(xs) * scale:{fmt}}-{max(xs) * scale:{fmt}}, "
            f"n {len(xs)})")


def drivers_here() -> list[str]:
    p = subprocess.run([str(BINARY), "--probe", "--driver", "live"], capture_output=True, text=True)
    live = json.loads(p.stdout)["live_frames"] if p.stdout else p.stderr.strip()
    print(f"live frames on this kernel: {live}", flush=True)
    return ["live", "loop"] if live == "allowed" else ["loop"]


def main() -> None:
    if not BINARY.is_file():
        raise SystemExit(f"{BINARY} is missing: make -C loadgen")
    c = compile_frames("udp_payload", TUN)
    prefix = load_config().prefix
    drivers = drivers_here()
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="bench-generator-") as d, xdp_sink_pair(prefix) as (gen, _):
        pcap, cfg = Path(d) / "u22.pcap", Path(d) / "u22.cfg"
        write_pcap(c.frames, pcap)
        cfg.write_text(to_trafgen(c))
        print(f"64 B frames ({len(c.frames[0])} B + FCS), {c.cycle}-frame cycle, CPU {cpu}, into an XDP drop "
              f"peer; {rounds} rounds of {duration:g} s, methods interleaved; load average {loadavg()}", flush=True)

        maxes: dict[str, list[float]] = {m: [] for m in (*drivers, "trafgen")}
        pages: dict[str, list[float]] = {m: [] for m in drivers}
        for _ in range(rounds):
            for m in rng.sample(list(maxes), len(maxes)):
                if m == "trafgen":  # about DURATION s worth at trafgen's usual 0.1-1 Mpps
                    maxes[m].append(trafgen_max(gen, cfg, int(300_000 * duration)))
                else:
                    r, pg = xdpgen(m, gen, pcap, "--duration", duration)
                    maxes[m].append(achieved_rate(r)[0])
                    pages[m].append(pg)
                time.sleep(0.2)
        for m, xs in maxes.items():
            extra = (f"; page allocations per frame {spread(pages[m], fmt='.3f')}; CPU {cpu} in the kernel "
                     f"{statistics.median(shares[m]) * 100:.0f} % of the time") if m in pages else ""
            print(f"{m:8} maximum: {spread(xs, 1e-6)} Mpps{extra}", flush=True)
        if len(drivers) == 2:
            ratio = [lo / li for lo, li in zip(maxes["loop"], maxes["live"])]
            print(f"loop / live maximum, per round: {spread(ratio, fmt='.3f')}", flush=True)

        for label, rate_of in (("20 kpps", lambda m: 20_000), ("1 Mpps", lambda m: 1_000_000),
                               ("50 % of max", lambda m: round(statistics.median(maxes[m]) * 0.5)),
                               ("90 % of max", lambda m: round(statistics.median(maxes[m]) * 0.9))):
            errs: dict[str, list[float]] = {m: [] for m in drivers}
            for _ in range(rounds):
                for m in rng.sample(drivers, len(drivers)):
                    rate = rate_of(m)
                    r, _ = xdpgen(m, gen, pcap, "--rate", rate, "--count", max(1000, round(rate * duration)))
                    errs[m].append(achieved_rate(r)[0] / rate - 1)
                    time.sleep(0.2)
            for m in drivers:
                print(f"  paced {label:11} {m:4} ({rate_of(m) / 1e6:.3f} Mpps): achieved/requested - 1 = "
                      f"{spread(errs[m], 100, '+.2f')} %", flush=True)
        print("Not covered: another machine kind or kernel, frames other than 64 B, a peer that forwards "
              "instead of dropping (the testbed's switch), states of the host longer than this run.")


if __name__ == "__main__":
    main()
