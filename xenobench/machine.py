"""What the machine did to a trial: CPU steal time, the CPUs' frequency, and the other load on the
trial's CPUs. The one owner of these facts; xenobench.trials records them per attempt in every
trial's metadata.json (`machine`) and flags an attempt whose steal exceeds
`experiments.max_steal_share` (then retried like any invalid attempt); the run report names such
trials (xenobench.report).

How it is measured: one snapshot before and one after the procedure, of every host that runs the
trial's CPUs (the load generator's and the LB's node, named by the first node read on it; on the
namespace testbed both are this machine), each taken by one shell command (SNAPSHOT_SCRIPT) through
the node's transport:
- /proc/stat's per-CPU times (USER_HZ ticks): steal (time the hypervisor gave this vCPU to someone
  else), busy (user, nice, system, irq, softirq), idle (idle, iowait);
- every task's /proc/<pid>/task/<tid>/stat: utime + stime, and `processor`, the CPU it last ran on.
  A task's ticks over the trial are charged to that CPU (a task that migrated is charged to where it
  ended: an approximation, stated); packet tasks (PACKET_TASKS: generators, NAPI threads,
  ksoftirqd: the trial's own, or another testbed's on a shared machine, which the names do not
  tell apart; the heaviest are listed) are told from the rest, the "other load" (the harness's
  own Python among it);
- the CPUs' frequency: cpufreq's scaling_cur_freq where the kernel exposes it, else "unavailable"
  (a VM without cpufreq, like this one). /proc/cpuinfo's "cpu MHz" is kept beside it, labelled: in
  a VM it is the host's nominal clock, not what the vCPU ran at;
- the kernel's page allocations per second (/proc/vmstat's pgalloc_*, per host): far higher where
  xdpgen's frame pages are not recycled, which slows the DUT (xenobench.measure.rank).

The trial's CPUs are those the testbed placed (cpu_placement: the generator's, the DUT's, the
switch hops'); a testbed that places nothing (hardware) has every CPU of those hosts counted.
"""

from __future__ import annotations

import re
import subprocess

from .errors import NodeError

# the commands of one snapshot; each part after a '#<name>' line (parse_snapshot)
SNAPSHOT_SCRIPT = r"""
echo '#boot'; cat /proc/sys/kernel/random/boot_id
echo '#hz'; getconf CLK_TCK
echo '#stat'; grep '^cpu[0-9]' /proc/stat
echo '#freq'; for f in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq; do [ -r "$f" ] && echo "$f $(cat "$f")"; done
echo '#cpuinfo'; grep -E '^(processor|cpu MHz)' /proc/cpuinfo
echo '#vmstat'; grep '^pgalloc_' /proc/vmstat
echo '#tasks'; cat /proc/[0-9]*/task/[0-9]*/stat 2>/dev/null
echo '#end'
"""

# packet tasks: the generators (xdpgen, trafgen, TRex's), the NAPI kthreads, softirq threads
PACKET_TASKS = re.compile(r"^(xdpgen|trafgen|_t-rex-64|t-rex-64|napi/.*|ksoftirqd/\d+)$")
TOP_TASKS = 5  # tasks named per host and kind (the heaviest)
UNAVAILABLE = "unavailable"


def parse_snapshot(text: str) -> dict:
    """SNAPSHOT_SCRIPT's output as {hz, cpus: {n: [user, nice, system, idle, iowait, irq, softirq,
    steal]}, freq_khz: {n: kHz}, cpuinfo_mhz: {n: MHz}, page_allocs: pgalloc_* summed (None without
    any), tasks: {tid: (comm, start, ticks, cpu)}}."""
    part, out = None, {"hz": 100, "cpus": {}, "freq_khz": {}, "cpuinfo_mhz": {}, "page_allocs": None, "tasks": {}}
    vmstat: list[str] = []
    proc = None
    for line in text.splitlines():
        if line.startswith("#"):
            part = line[1:].strip()
            continue
        if part == "boot":
            out["boot_id"] = line.strip()
        elif part == "hz" and line.strip().isdigit():
            out["hz"] = int(line)
        elif part == "stat":
            f = line.split()
            out["cpus"][int(f[0][3:])] = [int(x) for x in (f[1:9] + ["0"] * 8)[:8]]
        elif part == "freq":
            m = re.search(r"/cpu(\d+)/cpufreq/scaling_cur_freq (\d+)$", line)
            if m:
                out["freq_khz"][int(m.group(1))] = int(m.group(2))
        elif part == "cpuinfo":
            k, _, v = line.partition(":")
            if k.strip() == "processor":
                proc = int(v)
            elif proc is not None:
                out["cpuinfo_mhz"][proc] = float(v)
        elif part == "vmstat":
            vmstat.append(line)
        elif part == "tasks":
            tid, _, rest = line.partition(" (")
            comm, _, fields = rest.rpartition(") ")
            f = fields.split()
            if not tid.isdigit() or len(f) < 37:
                continue
            # stat(5): fields 14/15 utime/stime, 22 starttime, 39 processor (f[0] is field 3)
            out["tasks"][int(tid)] = (comm, int(f[19]), int(f[11]) + int(f[12]), int(f[36]))
    out["page_allocs"] = page_allocs("\n".join(vmstat))
    return out


def page_allocs(vmstat: str) -> int | None:
    """The sum of /proc/vmstat's pgalloc_<zone> counters; None without any."""
    got = [int(f[1]) for f in (line.split() for line in vmstat.splitlines())
           if len(f) == 2 and f[0].startswith("pgalloc_") and f[1].isdigit()]
    return sum(got) if got else None


def snapshot(testbed) -> dict:
    """One snapshot per host running the trial's CPUs: the loadgen's and the LB's node, read
    through each node's transport, and kept once per machine (its boot id: the namespace testbed's
    nodes are all this machine). A node that cannot be read is recorded with its error."""
    node_of = getattr(testbed, "node", None)
    snaps: dict[str, dict] = {}
    seen: dict[str, str] = {}
    for role in ("loadgen", "lb"):
        try:
            name = testbed.cfg.role(role).name
        except Exception:  # a config without the role (a test's reduced one): nothing to read there
            continue
        if node_of is None or name in seen.values():
            continue
        try:
            r = node_of(name).run(["sh", "-c", SNAPSHOT_SCRIPT], check=False, timeout=15)
            snap = parse_snapshot(r.stdout)
            if not snap["cpus"]:
                raise NodeError(f"Failed to read /proc/stat on {name}: {(r.stderr or '').strip()[:200] or 'no cpu lines'}")
        except (NodeError, OSError, subprocess.SubprocessError) as e:
            snaps[name] = {"error": str(e)}
            continue
        boot = snap.pop("boot_id", None) or name
        if boot in seen:  # the same machine as a node read before
            continue
        seen[boot] = name
        snaps[name] = snap
    return snaps


def trial_cpus(placement: dict | None) -> list[int] | None:
    """The CPUs the testbed placed the trial on (cpu_placement); None: every CPU counts."""
    if not placement:
        return None
    cpus = {placement.get("generator_cpu"), placement.get("dut_cpu")}
    cpus |= {h.get("cpu") for h in (placement.get("hop_napi") or {}).values()}
    return sorted(c for c in cpus if isinstance(c, int))


def host_load(before: dict, after: dict, cpus: list[int] | None) -> dict:
    """What happened on one host between two snapshots, for the CPUs `cpus` (None: all)."""
    if "error" in before or "error" in after:
        return {"error": before.get("error") or after.get("error")}
    hz = after["hz"] or 100
    cpus = sorted(after["cpus"]) if cpus is None else [c for c in cpus if c in after["cpus"]]
    per_cpu, ticks = {}, {}
    for c in cpus:
        d = [a - b for a, b in zip(after["cpus"][c], before["cpus"].get(c, after["cpus"][c]))]
        user, nice, system, idle, iowait, irq, softirq, steal = d
        total = max(sum(d), 1)
        ticks[c] = total
        per_cpu[c] = {"steal_share": round(steal / total, 4), "busy_share": round((user + nice + system + irq + softirq) / total, 4),
                      "idle_share": round((idle + iowait) / total, 4), "softirq_share": round(softirq / total, 4),
                      "packet_tasks_share": 0.0, "other_share": 0.0,
                      "freq_mhz": round(after["freq_khz"][c] / 1000, 1) if c in after["freq_khz"] else UNAVAILABLE,
                      "cpuinfo_mhz": after["cpuinfo_mhz"].get(c)}
    named: dict[str, list] = {"packet_tasks_share": [], "other_share": []}
    for tid, (comm, start, t1, cpu) in after["tasks"].items():
        if cpu not in per_cpu:
            continue
        old = before["tasks"].get(tid)
        used = t1 - old[2] if old and old[1] == start else t1  # a new task: all its ticks are the trial's span
        if used <= 0:
            continue
        key = "packet_tasks_share" if PACKET_TASKS.match(comm) else "other_share"
        per_cpu[cpu][key] = round(per_cpu[cpu][key] + used / ticks[cpu], 4)
        named[key].append({"comm": comm, "tid": tid, "cpu": cpu, "seconds": round(used / hz, 3)})
    top = {k: sorted(v, key=lambda o: -o["seconds"])[:TOP_TASKS] for k, v in named.items()}
    seconds = max(ticks.values(), default=0) / hz
    pa0, pa1 = before.get("page_allocs"), after.get("page_allocs")
    allocs = round((pa1 - pa0) / seconds) if pa0 is not None and pa1 is not None and pa1 >= pa0 and seconds > 0 else None
    return {"seconds": round(seconds, 3), "page_allocs_per_s": allocs, "cpus": {str(c): v for c, v in per_cpu.items()},
            "packet_tasks": top["packet_tasks_share"], "other_tasks": top["other_share"]}


#: the shortest span whose steal share is judged: over a few ticks (USER_HZ, 100 a second) one tick of
#: steal is tens of per cent, a share that says nothing of the trial
MIN_JUDGED_S = 0.5


def record(before: dict, after: dict, placement: dict | None, max_steal_share: float) -> dict:
    """metadata.json's `machine` entry of one attempt: per host the load of the trial's CPUs, the
    largest steal share among them, and whether it exceeds max_steal_share (flagged; a span shorter
    than MIN_JUDGED_S is recorded, not judged)."""
    cpus = trial_cpus(placement)
    per_host = {h: host_load(before.get(h, {"error": "no snapshot before"}), a, cpus) for h, a in after.items()}
    steals = [v["steal_share"] for h in per_host.values() if "cpus" in h for v in h["cpus"].values()]
    worst = max(steals, default=None)
    judged = any(h.get("seconds", 0) >= MIN_JUDGED_S for h in per_host.values())
    return {"trial_cpus": cpus, "hosts": per_host, "steal_share_max": worst, "max_steal_share": max_steal_share,
            "judged": judged, "flagged": judged and worst is not None and worst > max_steal_share}


def steal_reason(rec: dict) -> str:
    """The validity reason of a flagged attempt, naming the CPU and the configured share."""
    host, cpu, share = max(((h, c, v["steal_share"]) for h, hl in rec["hosts"].items() if "cpus" in hl
                            for c, v in hl["cpus"].items()), key=lambda x: x[2])
    return (f"CPU {cpu} of {host} lost {100 * share:.1f} % of the trial to steal time (> experiments.max_steal_share "
            f"{100 * rec['max_steal_share']:g} %): the hypervisor ran something else there")
