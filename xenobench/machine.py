"""What the machine did to a trial, and the one rule that judges it (RULES): CPU steal time, the
other load on the trial's CPUs, the placement of the generator's and the DUT's vCPUs (a cache line's
round trip between them), the generator's page allocations per frame, in an unpaced block of an
interleaved design the share of what the generator itself sent that the backends received (near 1,
the generator's own rate, not the LB, set the block's rate), and in an unpaced trial the spread of
its rate over the quarters of its steady span (the procedure measures it: MEASURED; nothing but the
machine changes within such a trial); the CPUs' frequency is recorded beside them. xenobench.trials
records the figures per attempt in every trial's metadata.json (`machine`) and judges every attempt
of every kind by RULES once (`machine_undisturbed`: an attempt over a limit is retried like any
invalid attempt, after waiting for the placement to come back: wait_calm); the interleaved designs
(xenobench.measure.rank) judge each round's blocks by the same RULES and limits. The run report
counts and names the trials it judged disturbed (xenobench.report). docs/vm-noise.md is the method.

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

import json
import re
import subprocess
import time
from dataclasses import dataclass

from . import REPO_ROOT
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


def cpu_times(line: str) -> tuple[int, list[int]] | None:
    """One /proc/stat per-CPU line (proc(5): cpuN user nice system idle iowait irq softirq steal ...)
    as (N, its first eight columns, missing ones 0); None for any other line (the aggregate `cpu`)."""
    f = line.split()
    if not f or not f[0].startswith("cpu") or not f[0][3:].isdigit():
        return None
    return int(f[0][3:]), [int(x) for x in (f[1:9] + ["0"] * 8)[:8]]


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
        elif part == "stat" and (cpu := cpu_times(line)) is not None:
            out["cpus"][cpu[0]] = cpu[1]
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


#: the shortest span whose shares are judged: over a few ticks (USER_HZ, 100 a second) one tick of
#: steal is tens of per cent, a share that says nothing of the trial
MIN_JUDGED_S = 0.5


@dataclass(frozen=True)
class Rule:
    """One figure of the machine's state, the experiments key of its limit (None: not judged), what a
    value over the limit means, whether each block of an interleaved design records it, so that
    its rounds are judged one by one (xenobench.measure.rank), and whether the trial's procedure
    measures it itself and hands it over (MEASURED_KEY) instead of the snapshots."""
    figure: str
    key: str
    what: str
    unit: str
    per_block: bool = False
    by_procedure: bool = False


#: the one rule: every attempt (xenobench.trials.run_trial) and every round of an interleaved design
#: (xenobench.measure.rank) is disturbed where one of its figures is over its limit
RULES = (
    Rule("steal_share", "max_steal_share",
         "a trial CPU's time the hypervisor gave to someone else (steal share)", "share"),
    Rule("other_load_share", "max_other_load_share",
         "a trial CPU's time taken by tasks other than the packet path's (other load share)", "share"),
    Rule("cpu_pair_rtt_ns", "max_cpu_pair_rtt_ns",
         "the generator's and the DUT's vCPUs on cores without a shared cache (cache-line round trip, ns)", "ns",
         per_block=True),
    Rule("page_allocs_per_frame", "max_page_allocs_per_frame",
         "the generator's frames through the page allocator (page allocations per frame)", "pages/frame",
         per_block=True),
    Rule("held_down_share", "max_received_share",
         "the generator, held down below its own rate in the repetition, not the LB, set an unpaced block's rate "
         "(share of the frames the generator offered that the backends received)", "share", per_block=True),
    Rule("unpaced_cv_pct", "max_unpaced_cv_pct",
         "an unpaced trial's rate moved within it, nothing but the machine changing (CV of the rates of its steady "
         "span's quarters, %)", "%", by_procedure=True),
)

#: where a procedure hands the rule the figures it measures itself (its outputs' key: figure -> value);
#: only those of MEASURED are taken, so that no procedure overrides a figure of the snapshots
MEASURED_KEY = "machine_figures"
MEASURED = frozenset(r.figure for r in RULES if r.by_procedure)


#: the validity checks that judge the machine's state, not the trial: an attempt as a whole
#: (xenobench.trials), an interleaved design's rounds one by one (fewer than `rounds` kept in max_rounds:
#: xenobench.measure.rank). An attempt failing only these is the machine's (experiments.machine_retries)
UNDISTURBED, ROUNDS_KEPT = "machine_undisturbed", "rounds_kept"
CHECKS = frozenset({UNDISTURBED, ROUNDS_KEPT})


def limits(cfg) -> dict[str, float | None]:
    """Every rule's limit from the config (experiments.<key>; None: not judged)."""
    ex = cfg.section("experiments")
    return {r.key: (None if ex.get(r.key) is None else float(ex[r.key])) for r in RULES}


def over(figures: dict, lim: dict) -> dict[str, float]:
    """The figures of `figures` (figure -> value) over their limit (`lim`: key -> limit); a figure
    not measured (None) or not judged (limit None) is never over."""
    out = {}
    for r in RULES:
        v, cap = figures.get(r.figure), lim.get(r.key)
        if v is not None and cap is not None and float(v) > cap:
            out[r.figure] = round(float(v), 4)
    return out


def explain(worst: dict[str, float], lim: dict, count: dict[str, int] | None = None) -> str:
    """'<what> up to <v> > experiments.<key> <limit>' for each figure over its limit (`count`: how
    many rounds or attempts each was over in, where more than one is summed up)."""
    parts = []
    for r in RULES:
        if r.figure in worst:
            n = f"{count[r.figure]} with " if count and r.figure in count else ""
            parts.append(f"{n}{r.what} up to {worst[r.figure]:g} > experiments.{r.key} {lim[r.key]:g}")
    return "; ".join(parts)


def figures(rec: dict) -> dict[str, float | None]:
    """The judged figures of one attempt's record (record): the largest steal and other-load share
    of the trial's CPUs (None over a span shorter than MIN_JUDGED_S: not judged), the largest
    cache-line round trip sampled."""
    hosts = [h for h in rec["hosts"].values() if "cpus" in h]
    judged = any(h.get("seconds", 0) >= MIN_JUDGED_S for h in hosts)
    shares = [v for h in hosts for v in h["cpus"].values()]
    pair = [x for x in rec.get("cpu_pair_rtt_ns") or () if x is not None]
    return {"steal_share": max((v["steal_share"] for v in shares), default=None) if judged else None,
            "other_load_share": max((v["other_share"] for v in shares), default=None) if judged else None,
            "cpu_pair_rtt_ns": max(pair) if pair else None}


def record(before: dict, after: dict, placement: dict | None, lim: dict, pair_rtt_ns: list | None = None,
           measured: dict | None = None) -> dict:
    """metadata.json's `machine` entry of one attempt: per host the load of the trial's CPUs, the
    cache-line round trips sampled (pair_rtt_ns), the judged figures (figures, and those the
    procedure measured itself: `measured`, of MEASURED) and those over their limits (`over`;
    `disturbed` where any)."""
    cpus = trial_cpus(placement)
    per_host = {h: host_load(before.get(h, {"error": "no snapshot before"}), a, cpus) for h, a in after.items()}
    rec = {"trial_cpus": cpus, "hosts": per_host, "cpu_pair_rtt_ns": list(pair_rtt_ns or []), "limits": lim}
    rec["figures"] = {**figures(rec), **{k: v for k, v in (measured or {}).items() if k in MEASURED}}
    rec["over"] = over(rec["figures"], lim)
    rec["disturbed"] = bool(rec["over"])
    return rec


def reason(rec: dict) -> str:
    """The validity reason of a disturbed attempt, naming the CPU and host where one is to blame."""
    parts = []
    for r in RULES:
        if r.figure not in rec["over"]:
            continue
        text = f"{r.what} {rec['over'][r.figure]:g} > experiments.{r.key} {rec['limits'][r.key]:g}"
        if r.figure in ("steal_share", "other_load_share"):
            field = "steal_share" if r.figure == "steal_share" else "other_share"
            host, cpu, share = max(((h, c, v[field]) for h, hl in rec["hosts"].items() if "cpus" in hl
                                    for c, v in hl["cpus"].items()), key=lambda x: x[2])
            text += f" (CPU {cpu} of {host}: {100 * share:.1f} %)"
        parts.append(text)
    return "; ".join(parts) + ": the machine's state, not the LB's"


class CpuPairRtt:
    """The cache-line round trip (ns) between two CPUs of a node, measured on request by
    loadgen/cpu_rtt kept running there (the Session protocol): ~1 ms of both CPUs a sample.
    Callable: the fastest burst's ns, None when the program is missing or fails (error says why;
    nothing is judged by it then); close() ends it."""

    def __init__(self, node, cpus: tuple[int, int]):
        self.node, self.cpus = node, cpus
        self._session = None
        self.error: str | None = None

    def __call__(self) -> float | None:
        if self.error:
            return None
        try:
            if self._session is None:
                self._session = self.node.session([str(CPU_RTT), *map(str, self.cpus)])
            return float(json.loads(self._session.request("20 100"))["min_ns"])
        except (NodeError, OSError, ValueError, KeyError) as e:
            self.error = str(e)
            return None

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


CPU_RTT = REPO_ROOT / "loadgen" / "build" / "cpu_rtt"


def cpu_pair_rtt(testbed) -> CpuPairRtt | None:
    """The prober of the generator's and the DUT's CPU on a testbed that runs both on one machine
    (the namespace testbed: its cpu placement names both), else None (separate hosts: the placement
    of one host's vCPUs does not enter a frame's cost)."""
    if getattr(testbed, "napi", None) is None:
        return None
    gen = (testbed.cfg.section("traffic").get("xdpgen") or {}).get("cpu")
    dut = testbed.cfg.section("testbed").get("cpus", {}).get("dut")
    node = testbed.node(testbed.cfg.role("lb").name)
    if not isinstance(gen, int) or not isinstance(dut, int) or gen == dut or not node.is_local:
        return None
    return CpuPairRtt(node, (gen, dut))


def wait_calm(probe: CpuPairRtt | None, limit: float | None, timeout_s: float, interval_s: float = 0.5,
              clock=time.monotonic, sleep=time.sleep) -> tuple[bool, float, list[float]]:
    """Before an attempt that follows a disturbed one: sample the cache-line round trip every
    interval_s until two samples in a row are at or below `limit`, for at most timeout_s. Returns
    (calm, seconds waited, samples); calm without a probe or a limit (nothing to wait for)."""
    if probe is None or limit is None or timeout_s <= 0:
        return True, 0.0, []
    t0, samples, good = clock(), [], 0
    while True:
        v = probe()
        if v is None:
            return True, round(clock() - t0, 3), samples
        samples.append(v)
        good = good + 1 if v <= limit else 0
        if good >= 2:
            return True, round(clock() - t0, 3), samples
        if clock() - t0 >= timeout_s:
            return False, round(clock() - t0, 3), samples
        sleep(interval_s)
