"""CPU placement of the namespace topology (docs/testbed.md): for rate measurements the LB's
ingress port runs threaded NAPI pinned to `testbed.cpus.dut`, so the LB (and everything it
forwards) runs on one CPU and the generator (traffic.xdpgen.cpu) on another; for latency
measurements it runs inline. The switch hops named by testbed.cpus.hops follow the DUT's mode.
With the NAPI inline, the harness itself and everything it starts (prober, capture, servers) keep
off the generator's CPU (harness_cpus): a paced background through an inline path leaves that CPU
little to spare, and a prober or capture started there held the generator up beyond its catch-up
bucket (`scripts/bench_rtt_load_cpus.py`).
The threads made are recorded in the topology's record, so they are told apart from the same-named
threads of other testbeds and read back into every trial's metadata.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

from ..errors import TestbedError
from .topology import NamespaceTopology

NAPI_LOCK = Path("/run/lock/xenobench-napi.lock")  # napi/<dev>-<id> kthreads are global
DUT_MODES = ("threaded", "inline")  # NapiPlacement.place_dut


def napi_threads(dev: str) -> dict[int, str]:
    """napi/<dev>-<id> kthreads (their names cut at 15 characters, as the kernel stores them)."""
    prefix = f"napi/{dev}-"[:15]
    p = subprocess.run(["ps", "-e", "-o", "pid=,comm="], capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        pid, _, comm = line.strip().partition(" ")
        if comm.strip().startswith(prefix):
            out[int(pid)] = comm.strip()
    return out


def set_threaded(ns: str, dev: str, on: bool) -> None:
    # `ip netns exec` (not nsenter) remounts /sys, so /sys/class/net is the namespace's
    p = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", f"echo {int(on)} > /sys/class/net/{dev}/threaded"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise TestbedError(f"Failed to {'enable' if on else 'disable'} threaded NAPI on {ns}:{dev}: "
                           f"{p.stderr.strip()}")


def set_priority(pid: int, prio: int, what: str) -> None:
    """SCHED_FIFO `prio` for thread `pid`, or normal scheduling for 0; refused naming `what`."""
    argv = ["chrt", "-f", "-p", str(prio), str(pid)] if prio else ["chrt", "-o", "-p", "0", str(pid)]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise TestbedError(f"Failed to set {'SCHED_FIFO ' + str(prio) if prio else 'normal scheduling'} on {what}: "
                           f"{p.stderr.strip() or 'chrt exited with status ' + str(p.returncode)}")


def scheduling(pid) -> str | None:
    """A thread's policy and priority as `chrt -p` reports them ("SCHED_FIFO 50"), None if gone."""
    p = subprocess.run(["chrt", "-p", str(pid)], capture_output=True, text=True)
    return " ".join(l.rsplit(":", 1)[-1].strip() for l in p.stdout.splitlines()) or None


class NapiPlacement:
    """Where the LB's packet processing, and the switch hops', run."""

    def __init__(self, topo: NamespaceTopology):
        self.topo = topo
        self.cfg = topo.cfg

    def _lb_ingress(self) -> tuple[str, str]:
        lb = self.cfg.role("lb")
        return self.topo.ns(lb.name), (lb.lb_port("ingress") or lb.iface()).name

    def placements(self) -> list[tuple[str, str, str, int, str]]:
        """(what, namespace, device, CPU, config key) of every NAPI that runs as a pinned thread
        for rates: the LB's ingress port, and the switch hops testbed.cpus.hops names."""
        cpus = self.cfg.section("testbed")["cpus"]
        ns, dev = self._lb_ingress()
        out = [("dut", ns, dev, cpus["dut"], "testbed.cpus.dut")]
        hops = cpus.get("hops") or {}
        lb = self.cfg.role("lb")
        ports = {"from_generator": self.cfg.role("loadgen"), "from_lb": lb}
        for what, cpu in sorted(hops.items()):
            n = ports[what]
            i = (lb.lb_port("egress") or lb.iface()) if n is lb else n.iface()
            out.append((what, self.topo.switch_ns, self.topo.switch_port(n.name, i.name), cpu,
                        f"testbed.cpus.hops.{what}"))
        return out

    def placed_threads(self) -> dict[str, dict[str, str]]:
        """The pinned NAPI threads this testbed made, {what: {pid: comm}}, from its record."""
        return self.topo.record().get("napi_threads") or {}

    def place_dut(self, mode: str) -> None:
        """How the LB ingress port's NAPI (and the switch hops of testbed.cpus.hops) run from now on
        (idempotent):
        - "threaded": each as a kthread pinned to its CPU at SCHED_FIFO, so the LB's XDP program
          and every hop after it run on a CPU of their own, away from the generator's (rates);
        - "inline": in softirq on the CPU that handed the frame over, as a NIC's interrupt runs it
          (latency: a sleeping kthread's wake-up on another vCPU adds 5-30 µs to every RTT), with the
          harness off the generator's CPU (place_harness)."""
        if mode not in DUT_MODES:
            raise TestbedError(f"Failed to place the LB's NAPI: mode {mode!r} is not one of {', '.join(DUT_MODES)}")
        placements = self.placements()
        for _, _, dev, cpu, key in placements:  # all checked before anything changes
            if cpu >= (os.cpu_count() or 1):
                who = "the LB's NAPI" if key == "testbed.cpus.dut" else f"the NAPI of switch port {dev}"
                raise TestbedError(f"Failed to pin {who}: {key}: CPU {cpu} does not exist "
                                   f"(this machine has {os.cpu_count()}; {self.cfg.path})")
        off = self.cfg.section("testbed")["cpus"]["harness_off_generator"]
        place_harness(mode, self.generator_cpu() if off else None)  # the harness's own process: no record
        placed = self.placed_threads()
        if self.topo.record().get("dut_napi") == mode and (mode == "inline" or (
                set(placed) == {p[0] for p in placements}
                and all(placed[what] and set(placed[what]) <= set(map(str, napi_threads(dev)))
                        for what, _, dev, _, _ in placements))):
            self.restore()  # the record says so; the threads' scheduling is read back, not trusted
            return
        for _, ns, dev, _, _ in placements:
            set_threaded(ns, dev, False)
        self.topo.write_record(napi_threads={}, dut_napi="inline")
        if mode == "threaded":
            placed = {}
            for what, ns, dev, cpu, _ in placements:
                placed[what] = self._place_napi(ns, dev, cpu)
                self.topo.write_record(napi_threads=placed)
            self.topo.write_record(dut_napi="threaded")

    def generator_cpu(self) -> int | None:
        """The CPU the generator pins itself to (traffic.xdpgen.cpu; None: not pinned)."""
        cpu = (self.cfg.section("traffic").get("xdpgen") or {}).get("cpu")
        return cpu if isinstance(cpu, int) else None

    def _place_napi(self, ns: str, dev: str, cpu: int) -> dict[str, str]:
        """Threaded NAPI on a veth, its kthread pinned to `cpu` (checked by place_dut) at
        testbed.cpus.dut_rt_priority;
        returns {pid: comm} of the threads made. The kthreads are named napi/<dev>-<napi id> in
        every namespace alike, so the ones made here are told apart by a before/after look under a
        lock."""
        NAPI_LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(NAPI_LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            before = napi_threads(dev)
            set_threaded(ns, dev, True)
            new = {pid: c for pid, c in napi_threads(dev).items() if pid not in before}
        if not new:
            raise TestbedError(f"Failed to find the NAPI thread of {ns}:{dev} after enabling threaded NAPI")
        prio = self.cfg.section("testbed")["cpus"]["dut_rt_priority"]
        for pid in new:
            p = subprocess.run(["taskset", "-pc", str(cpu), str(pid)], capture_output=True, text=True)
            if p.returncode != 0:
                raise TestbedError(f"Failed to pin NAPI thread {pid} of {ns}:{dev} to CPU {cpu}: {p.stderr.strip()}")
            # SCHED_FIFO like the kernel's IRQ threads: NAPI in softirq preempts every task, and a
            # threaded NAPI at normal priority would share the CPU with whatever else runs there
            if prio:
                set_priority(pid, prio, f"NAPI thread {pid} of {ns}:{dev} (testbed.cpus.dut_rt_priority)")
        return {str(pid): c for pid, c in new.items()}

    def restore(self) -> list[str]:
        """Read back each placed NAPI thread's scheduling and CPU and reset what differs from the
        config (testbed.cpus.dut_rt_priority, the CPU of placements()): a harness killed inside a
        change of them (xenobench.measure.rank runs the DUT's thread at other priorities and puts it
        back in a `finally` that a SIGKILL never reaches) leaves the record saying "threaded" over a
        thread at the wrong priority. Returns what was reset, one line each ([]: all as configured)."""
        prio = int(self.cfg.section("testbed")["cpus"]["dut_rt_priority"])
        want = f"SCHED_FIFO {prio}" if prio else "SCHED_OTHER 0"
        placed = self.placed_threads()
        fixed = []
        for what, ns, dev, cpu, _ in self.placements():
            for pid, comm in (placed.get(what) or {}).items():
                have = scheduling(pid)
                if have is None:  # gone: place_dut makes it again
                    continue
                if have != want:
                    set_priority(int(pid), prio, f"NAPI thread {pid} ({comm}) of {ns}:{dev} "
                                                 "(testbed.cpus.dut_rt_priority)")
                    fixed.append(f"{comm} (pid {pid}) of {ns}:{dev}: scheduling {have} -> {scheduling(pid)}")
                p = subprocess.run(["taskset", "-pc", pid], capture_output=True, text=True)
                cpus = p.stdout.rsplit(":", 1)[-1].strip() if p.returncode == 0 else None
                if cpus is not None and cpus != str(cpu):
                    q = subprocess.run(["taskset", "-pc", str(cpu), pid], capture_output=True, text=True)
                    if q.returncode != 0:
                        raise TestbedError(f"Failed to pin NAPI thread {pid} of {ns}:{dev} to CPU {cpu}: "
                                           f"{q.stderr.strip()}")
                    fixed.append(f"{comm} (pid {pid}) of {ns}:{dev}: CPUs {cpus} -> {cpu}")
        return fixed

    def dut_priority(self, prio: int) -> dict[str, str]:
        """Run the LB port's placed NAPI thread at SCHED_FIFO `prio` (0: normal scheduling) from
        now on; returns {comm: scheduling} read back. The testbed's own priority is
        testbed.cpus.dut_rt_priority (restore it with that)."""
        out = {}
        for pid, comm in (self.placed_threads().get("dut") or {}).items():
            set_priority(int(pid), prio, f"the LB port's NAPI thread {pid} ({comm})")
            out[comm] = scheduling(pid)
        return out

    def read_back(self) -> dict:
        """What runs where, read back from the kernel (recorded in every trial's host metadata)."""
        placed = self.placed_threads()
        mode = self.topo.record().get("dut_napi")

        def read(what: str, ns: str, dev: str) -> dict:
            threads, sched = {}, {}
            for pid, comm in (placed.get(what) or {}).items():
                p = subprocess.run(["taskset", "-pc", pid], capture_output=True, text=True)
                threads[comm] = p.stdout.rsplit(":", 1)[-1].strip() if p.returncode == 0 else None
                sched[comm] = scheduling(pid)
            return {"node": ns, "dev": dev, "mode": mode, "threads": threads, "scheduling": sched}

        placements = self.placements()
        (_, ns, dev, _, _), hops = placements[0], placements[1:]
        tb = self.cfg.section("testbed")
        gen = self.generator_cpu()
        out = {"cpus_online": os.cpu_count(), "generator_cpu": gen, "dut_cpu": tb["cpus"]["dut"],
               "harness_cpus": sorted(os.sched_getaffinity(0)),
               "dut_napi": read("dut", ns, dev), "switch_fastpath": bool(tb["switch_fastpath"])}
        if hops:
            out["hop_napi"] = {what: {"cpu": cpu, **read(what, hns, hdev)} for what, hns, hdev, cpu, _ in hops}
        return out


#: the harness's CPUs before place_harness first narrowed them (None: never narrowed)
_HARNESS_CPUS: set[int] | None = None


def harness_cpus(mode: str, generator_cpu: int | None, allowed: set[int]) -> set[int]:
    """The CPUs the harness keeps to, of those it was started with (`allowed`):
    - the DUT's NAPI "inline" (latency): every one but the generator's, where one is left. The
      generator's CPU then does its sending and the path's softirq work and nothing else of ours.
    - "threaded" (rates): all of them. The DUT's CPU then runs its NAPI thread at SCHED_FIFO, which
      would starve a harness kept there (its samplers read every few ms) while the DUT is saturated."""
    if mode != "inline" or generator_cpu is None or allowed <= {generator_cpu}:
        return set(allowed)
    return allowed - {generator_cpu}


def place_harness(mode: str, generator_cpu: int | None) -> list[int]:
    """Pin every thread of this process (and so what it starts from now on) to harness_cpus;
    returns the CPUs. The mask it was started with is kept, and "threaded" restores it."""
    global _HARNESS_CPUS
    if _HARNESS_CPUS is None:
        _HARNESS_CPUS = set(os.sched_getaffinity(0))
    cpus = harness_cpus(mode, generator_cpu, _HARNESS_CPUS)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (ProcessLookupError, PermissionError):  # a thread that ended meanwhile; not ours to move
            pass
    return sorted(cpus)
