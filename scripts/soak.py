#!/usr/bin/env python3
"""Soak: the CI-sized study (`snakemake --cores 1 all`, config/ci.yaml) RUNS times back to back on
this machine, each into an empty results tree of its own, and between runs what the machine holds.

Each run gets its own testbed name (soak<HHMMSS>-<n>, a config that `extends:` CONFIG and sets only
testbed.name), so its trials land in results/<name>/ and its figures in figures/<name>/, never in
results/ci/ of another run; the plan does not depend on the name. After each run (and once before
the first) the script waits SETTLE seconds (the kernel frees network namespaces and BPF objects
asynchronously) and prints:

- the plan: points and repetitions per experiment as the run recorded them (result.json per
  trial), identical in every run, else which points differ;
- system-wide counts: open file handles (/proc/sys/fs/file-nr), MemAvailable, Slab and its
  unreclaimable part (/proc/meminfo), BPF programs and maps (bpftool), processes, mounts;
- what the prefix ($XENOBENCH_NS_PREFIX, default xbk-) still holds: processes (its variable in
  their environment, or its namespaces or pins in their command line or net namespace), pins
  under /sys/fs/bpf/<prefix>*, namespaces, mounts, links in the root namespace, its topology record.
  Each must be exactly 0 after a run;
- the growth verdict between consecutive runs. The machine is shared: other users start and stop
  processes, BPF programs and namespaces while the soak runs, so a system-wide count is compared
  with the noise measured before the first run (SAMPLES reads 1 s apart, their max - min): a count
  grew when it rose by more than 3 times that spread and by more than a floor (FLOORS: the least
  growth a leak of the study would cause, e.g. one process or one pinned program per run). The
  first run is the reference (it builds the C parts, loads modules, fills caches); a count that
  grows after every later run is a leak, one that grows once is noise.

Exit status 0 when every run succeeded, nothing of the prefix was left and nothing grew.
Usage (root): XENOBENCH_NS_PREFIX=xbk- .venv/bin/python scripts/soak.py [RUNS] [CONFIG] [--keep]"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbk-")

import benchargs  # noqa: E402  (scripts/benchargs.py)

PREFIX = os.environ["XENOBENCH_NS_PREFIX"]
SETTLE_S, SAMPLES = 10.0, 5
MIB = 1024
# system-wide counts: (key, label, unit, floor of a growth that counts, sign: +1 a rise is growth,
# -1 a fall is (MemAvailable)). Floors: the least a leak of the study would add per run.
SYSTEM = [
    ("file_handles", "open file handles", "", 32, +1),       # one leaked process holds >= 3 + its libraries
    ("mem_available_kib", "MemAvailable", "KiB", 64 * MIB, -1),  # one leaked agent: a Python with numpy, ~40 MiB
    ("slab_kib", "Slab", "KiB", 16 * MIB, +1),               # dentries/inodes of the run's files come and go
    ("sunreclaim_kib", "Slab unreclaimable", "KiB", 2 * MIB, +1),  # a leaked netns keeps ~1 MiB of it
    ("bpf_progs", "BPF programs", "", None, +1),   # all: others' testbeds load and unload theirs
    ("bpf_maps", "BPF maps", "", None, +1),
    ("bpf_progs_free", "BPF progs, not others'", "", 1, +1),  # minus another prefix's (bpf_held_by_others)
    ("bpf_maps_free", "BPF maps, not others'", "", 1, +1),
    ("processes", "processes", "", 2, +1),
    ("mounts", "mounts, not others'", "", 1, +1),  # minus other prefixes' /run/netns/<prefix>* mounts
]
# what the prefix holds: exactly 0 after every run
OWN = ["processes", "pins", "namespaces", "mounts", "links", "record"]


def args_():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", metavar="RUNS", nargs="?", type=benchargs.positive_int, default=3,
                    help="studies back to back (default: 3)")
    ap.add_argument("config", metavar="CONFIG", nargs="?", type=benchargs.existing_file,
                    default=Path("config/ci.yaml"), help="the study's config (default: config/ci.yaml)")
    ap.add_argument("--keep", action="store_true", help="keep each run's results/<name>/ and figures/<name>/ "
                    "(default: removed once its plan and counts are taken)")
    return ap.parse_args()


def say(msg: str) -> None:
    print(msg, flush=True)


# --- what the machine holds --------------------------------------------------------------------
def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _prefix_processes(markers: list[str]) -> list[str]:
    """Processes of the prefix: its XENOBENCH_NS_PREFIX in their environment (everything the harness
    starts inherits it), or one of its namespaces or pins, or a soak run's config, in their command
    line, or a net namespace of one of its namespaces. This script and its ancestors excepted."""
    env_mark = f"XENOBENCH_NS_PREFIX={PREFIX}".encode()
    ns_inodes = set()
    for n in _prefix_namespaces():
        try:
            ns_inodes.add(os.stat(f"/run/netns/{n}").st_ino)
        except OSError:
            pass
    skip, out = _ancestors(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in skip:
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            net = os.stat(f"/proc/{pid}/ns/net").st_ino
        except OSError:
            continue
        if (env_mark in env or net in ns_inodes or any(m in cmd for m in markers)) and cmd:
            out.append(f"{pid}: {cmd[:140]}")
    return out


def _prefix_namespaces() -> list[str]:
    d = Path("/run/netns")
    return sorted(p.name for p in d.iterdir() if p.name.startswith(PREFIX)) if d.is_dir() else []


def _bpftool_list(what: str) -> list[dict]:
    p = subprocess.run(["bpftool", "-j", what, "list"], capture_output=True, text=True)
    return json.loads(p.stdout or "[]") if p.returncode == 0 else []


def _bpftool_count(what: str) -> int:
    return len(_bpftool_list(what))


def _prefix_of(name: str) -> str:
    m = re.match(r"^([a-z][a-z0-9]*-)", name)
    return m.group(1) if m else ""


def _other_netns_mount(point: str) -> bool:
    name = point.rsplit("/", 1)[-1]
    return point.startswith("/run/netns/") and not name.startswith(PREFIX) and bool(_prefix_of(name))


def bpf_held_by_others() -> tuple[set[int], set[int]]:
    """(program ids, map ids) another prefix's testbed holds: XDP programs attached in its
    namespaces, objects pinned under /sys/fs/bpf/<its prefix>*, fds of processes whose
    XENOBENCH_NS_PREFIX is another, and the maps of those programs. Unattributed objects count as
    this soak's (the conservative side)."""
    progs, maps = set(), set()
    for ns in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else []):
        if ns.startswith(PREFIX) or not _prefix_of(ns):
            continue
        out = subprocess.run(["ip", "-n", ns, "-j", "-d", "link", "show"], capture_output=True, text=True).stdout
        for li in json.loads(out or "[]"):
            x = li.get("xdp") or {}
            progs |= {p["id"] for p in [x.get("prog")] + [a.get("prog") for a in x.get("attached", [])] if p}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            who = next((e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"XENOBENCH_NS_PREFIX=")), PREFIX)
            if who == PREFIX:
                continue
            for fd in os.listdir(f"/proc/{pid}/fdinfo"):
                t = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
                for kind, ids in (("prog_id", progs), ("map_id", maps)):
                    m = re.search(rf"^{kind}:\s+(\d+)", t, re.M)
                    if m:
                        ids.add(int(m.group(1)))
        except OSError:
            continue
    for top in Path("/sys/fs/bpf").glob("*"):
        if top.name.startswith(PREFIX) or not _prefix_of(top.name):
            continue
        for f in [top, *top.rglob("*")]:
            if f.is_dir():
                continue
            for kind, ids in (("prog", progs), ("map", maps)):
                r = subprocess.run(["bpftool", "-j", kind, "show", "pinned", str(f)], capture_output=True, text=True)
                if r.returncode == 0:
                    ids.add(json.loads(r.stdout)["id"])
    p = subprocess.run(["bpftool", "-j", "prog", "list"], capture_output=True, text=True)
    for prog in json.loads(p.stdout or "[]"):
        if prog["id"] in progs:
            maps |= set(prog.get("map_ids", []))
    return progs, maps


def snapshot(markers: list[str]) -> dict:
    mem = dict(re.findall(r"^(\w+):\s+(\d+)", Path("/proc/meminfo").read_text(), re.M))
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    pins = sorted(str(p) for p in Path("/sys/fs/bpf").glob(f"{PREFIX}*")) if Path("/sys/fs/bpf").is_dir() else []
    record = Path(f"/run/xenobench/{PREFIX}topology.json")
    others = bpf_held_by_others()
    all_progs = {p["id"] for p in _bpftool_list("prog")}
    all_maps = {m["id"] for m in _bpftool_list("map")}
    return {
        "bpf_progs_free": len(all_progs - others[0]),
        "bpf_maps_free": len(all_maps - others[1]),
        "file_handles": int(Path("/proc/sys/fs/file-nr").read_text().split()[0]),
        "mem_available_kib": int(mem["MemAvailable"]),
        "slab_kib": int(mem["Slab"]),
        "sunreclaim_kib": int(mem["SUnreclaim"]),
        "bpf_progs": _bpftool_count("prog"),
        "bpf_maps": _bpftool_count("map"),
        "processes": sum(1 for p in os.listdir("/proc") if p.isdigit()),
        "mounts": sum(1 for m in mounts if not _other_netns_mount(m.split()[4])),
        "own": {
            "processes": _prefix_processes(markers),
            "pins": pins,
            "namespaces": _prefix_namespaces(),
            "mounts": [m.split(" - ")[0].split()[4] for m in mounts
                       if f"/netns/{PREFIX}" in m or f"/bpf/{PREFIX}" in m],
            "links": sorted(n for n in os.listdir("/sys/class/net") if n.startswith(PREFIX)),
            "record": [str(record)] if record.exists() else [],
        },
    }


def sample(markers: list[str]) -> dict:
    """SAMPLES snapshots 1 s apart: the median of each system-wide count, its spread (max - min),
    and what the prefix holds in the last one."""
    snaps = []
    for i in range(SAMPLES):
        if i:
            time.sleep(1.0)
        snaps.append(snapshot(markers))
    out = {k: int(statistics.median(s[k] for s in snaps)) for k, *_ in SYSTEM}
    out["spread"] = {k: max(s[k] for s in snaps) - min(s[k] for s in snaps) for k, *_ in SYSTEM}
    out["own"] = snaps[-1]["own"]
    return out


# --- one run -------------------------------------------------------------------------------------
PROGRESS = re.compile(r"^\[\w+\] .* rep \d+ attempt \d+: |^xenobench: testbed |steps \(\d+%\) done|^Error|"
                      r"^Failed|Exception")


def run_study(n: int, cfg: Path, name: str, logdir: Path) -> tuple[int, float, str]:
    """`snakemake --cores 1 all` on cfg; progress lines to stdout, everything to a log. (exit
    status, seconds, the planned line)."""
    log = logdir / f"{name}.log"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "all", "--configfile", str(cfg)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0, planned = time.monotonic(), ""
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            f.write(line)
            if line.startswith("xenobench: testbed ") and "measurement points" in line:
                planned = line.split(": ", 2)[-1].strip()
            if PROGRESS.search(line):
                say(f"  run {n} {time.monotonic() - t0:6.0f} s  {line.rstrip()[:150]}")
        rc = p.wait()
    return rc, time.monotonic() - t0, planned


def recorded_plan(results: Path) -> dict:
    """{experiment/point: (repetitions, valid)} from the trials the run wrote."""
    plan: dict[str, list[int]] = {}
    for f in sorted(results.glob("trials/*/*/rep-*/result.json")):
        key = f"{f.parts[-4]}/{f.parts[-3]}"
        reps, valid = plan.setdefault(key, [0, 0])
        try:
            ok = json.loads(f.read_text()).get("valid") is True
        except (OSError, ValueError):
            ok = False
        plan[key] = [reps + 1, valid + ok]
    return {k: tuple(v) for k, v in plan.items()}


def plan_line(plan: dict) -> str:
    per_exp: dict[str, int] = {}
    for k in plan:
        per_exp[k.split("/")[0]] = per_exp.get(k.split("/")[0], 0) + 1
    trials = sum(r for r, _ in plan.values())
    valid = sum(v for _, v in plan.values())
    return (f"{len(plan)} points, {trials} trials ({valid} valid, {trials - valid} invalid); "
            + ", ".join(f"{e} {n}" for e, n in per_exp.items()))


def plan_diff(ref: dict, plan: dict) -> list[str]:
    out = []
    for k in sorted(set(ref) | set(plan)):
        a, b = ref.get(k, (0, 0))[0], plan.get(k, (0, 0))[0]
        if a != b:
            out.append(f"{k}: {a} repetitions in run 1, {b} here")
    return out


# --- verdicts --------------------------------------------------------------------------------------
def fmt(key: str, v: int) -> str:
    return f"{v / MIB:.1f} MiB" if key.endswith("_kib") else str(v)


def tolerance(key: str, floor: int, base: dict) -> int:
    return max(floor, 3 * base["spread"][key])


def print_counts(title: str, s: dict, prev: dict | None, base: dict) -> dict[str, bool]:
    """The counts, their change since prev, and per count whether it grew beyond its tolerance."""
    say(f"  {title}")
    grew = {}
    for key, label, _, floor, sign in SYSTEM:
        line = f"    {label:<22} {fmt(key, s[key]):>10}"
        if prev is not None and floor is None:
            line += f"   {'+' if s[key] >= prev[key] else '-'}{fmt(key, abs(s[key] - prev[key])):>10} since the run before"
        elif prev is not None:
            d = s[key] - prev[key]
            tol = tolerance(key, floor, base)
            grew[key] = sign * d > tol
            line += (f"   {'+' if d >= 0 else '-'}{fmt(key, abs(d)):>10} since the run before  "
                     f"(tolerance {fmt(key, tol)})  {'GREW' if grew[key] else 'ok'}")
        say(line)
    for k in OWN:
        items = s["own"][k]
        say(f"    {PREFIX} {k:<16} {len(items):>5}" + (f"   LEFT: {'; '.join(items[:6])}" if items else ""))
    return grew


def main() -> int:
    a = args_()
    if os.geteuid() != 0:
        sys.exit("soak: Failed to start: needs root (it builds the namespace testbed)")
    if shutil.which("bpftool") is None:
        sys.exit("soak: Failed to start: bpftool not found (apt install bpftool)")
    base_cfg = a.config.resolve()
    stamp = time.strftime("%H%M%S")
    work = ROOT / ".xenobench" / "soak" / stamp
    work.mkdir(parents=True, exist_ok=True)
    names = [f"soak{stamp}-{n}" for n in range(1, a.runs + 1)]
    for name in names:
        for d in (ROOT / "results" / name, ROOT / "figures" / name):
            if d.exists():
                sys.exit(f"soak: Failed to start: {d} exists (another soak's? remove it)")
    markers = [str(work), f"/netns/{PREFIX}", f"/sys/fs/bpf/{PREFIX}"]
    say(f"soak: {a.runs} x `snakemake --cores 1 all` on {a.config} (testbeds {names[0]}..{names[-1]}, "
        f"prefix {PREFIX}); logs in {work}")
    base = sample(markers)
    say(f"before run 1 (noise: max - min of {SAMPLES} reads 1 s apart; tolerance = max(floor, 3 x noise)):")
    for key, label, _, floor, _ in SYSTEM:
        say(f"    {label:<20} {fmt(key, base[key]):>12}   noise {fmt(key, base['spread'][key])}, " +
            (f"tolerance {fmt(key, tolerance(key, floor, base))}" if floor is not None else
             "shown, not judged (the line below is)"))
    if any(base["own"].values()):
        say(f"  the prefix {PREFIX} already holds something: " + json.dumps(base["own"]))
        return 1

    ok, plans, prev, growth, own_clean = True, [], None, [], True
    for n, name in enumerate(names, 1):
        cfg = work / f"{name}.yaml"
        cfg.write_text(f"extends: {base_cfg}\ntestbed: {{name: {name}}}\n")
        say(f"run {n}/{a.runs}: testbed {name}, results/{name}/, figures/{name}/")
        rc, took, planned = run_study(n, cfg, name, work)
        time.sleep(SETTLE_S)
        s = sample(markers)
        plan = recorded_plan(ROOT / "results" / name)
        plans.append(plan)
        say(f"after run {n}: exit {rc} in {took:.0f} s; planned {planned or '(no plan line: see the log)'}")
        say(f"  recorded: {plan_line(plan)}")
        diff = plan_diff(plans[0], plan) if n > 1 else []
        say("  plan: " + ("identical to run 1" if n > 1 and not diff else "the reference" if n == 1 else
                          "DIFFERS from run 1: " + "; ".join(diff)))
        grew = print_counts(f"counts after run {n}", s, prev, base)
        if n > 1:
            growth.append(grew)
        own_clean &= not any(s["own"].values())
        ok &= rc == 0 and not diff and bool(plan)
        prev = s
        down = subprocess.run([sys.executable, "-m", "xenobench", "--config", str(cfg), "testbed", "down",
                               "--purge"], cwd=ROOT, capture_output=True, text=True)
        if down.returncode != 0:
            say(f"  testbed down --purge: exit {down.returncode}: {down.stderr.strip()[-300:]}")
            ok = False
        if rc != 0:
            say(f"  the run failed: its results/{name}/ and figures/{name}/ are kept; the log: {work / name}.log")
        elif not a.keep:
            for d in (ROOT / "results" / name, ROOT / "figures" / name):
                shutil.rmtree(d, ignore_errors=True)

    say("verdict (a count grows when it rose beyond its tolerance after every run but the first):")
    grows = []
    for key, label, _, floor, _ in SYSTEM:
        if floor is None:
            continue
        flags = [g[key] for g in growth]
        verdict = ("no growth" if not any(flags) else "GROWS" if all(flags) else
                   f"rose beyond tolerance after {sum(flags)} of {len(flags)} runs, not after every one: noise")
        if flags and all(flags):
            grows.append(label)
        say(f"    {label:<20} {verdict}" + ("" if growth else " (one run: nothing to compare)"))
    say(f"    {PREFIX} processes, pins, namespaces, mounts, links, record after every run: "
        + ("0" if own_clean else "NOT 0 (above)"))
    say(f"    plans: {'identical' if all(not plan_diff(plans[0], p) for p in plans) else 'DIFFER (above)'}")
    say(f"    runs: {'every one exited 0' if ok else 'NOT every one exited 0 (above)'}")
    return 0 if ok and own_clean and not grows else 1


if __name__ == "__main__":
    sys.exit(main())
