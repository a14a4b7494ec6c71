"""The rank kind: the interleaved rate procedure (experiments/rank.yaml): rates a reviewer can rank.

Measuring each LB in a trial of its own, minutes apart, lets the machine's drift decide the ranking
on a shared 2-core VM (two runs of the same study flipped wire and eBPF). Here one repetition
measures every LB of the list in short alternating blocks, as the paired RTT design does for latency
(xenobench.latency), the generator running unpaced throughout (or, where the point or section sets
`rate_pps` above 0, paced at that rate throughout: the loss experiment's paired design, where a
block's rate is what the LB delivered of the same offered rate the reference got):

1. every LB of `lbs` is started "loaded, not attached" (LoadBalancer.start(attach=False): program
   pinned, maps filled, stats loop running); Katran once per repetition (its start fills a
   65537-slot ring), as every other;
2. rounds of every LB once in a shuffled order (latency.block_order, seed + repetition, recorded),
   until `rounds` of them are kept by the machine rule (below), at most `max_rounds`; before a
   block its LB's program replaces the port's program atomically
   (xenobench.xdpswitch: never detached between blocks, the veth never goes down); `settle_s` after
   the swap are discarded, then the block's window of `block_s`;
3. a block's rate is the slope of the backends' summed rx counter (xenobench.sampler.RateSampler,
   the sampler offered_load uses, running through the repetition) over the window's samples;
4. its bookkeeping (`bookkeeping`): an LB's counters are read just before its program is switched
   in and just after it is switched out, so (a) an LB must not forward while another LB's program
   is attached (its count unchanged between its blocks, exactly), (b) what it forwarded while
   attached must cover the backends' rx over its window, and (c) the LBs together forwarded what
   the backends received over the repetition: a block where the wrong program forwarded makes the
   trial invalid, naming the block;
5. per round the ratio of every LB's rate to the reference's (the wire: same backends, same split,
   xenobench.lb.wire) and per LB pair; medians with bootstrap 95 % CIs (xenobench.rateblocks: the
   repetitions resampled, then their rounds) are computed by the aggregation over the point's
   valid repetitions, and per repetition in the trial's outputs (`ranking`).

Beside each block's rate, its rx per second of CPU time of the LB port's pinned NAPI thread
(`dut_cpu_reader`; the namespace testbed's threaded NAPI): on a 2-core machine other tasks (the
harness among them) take turns on the DUT's CPU and the generator is starved now and then, at
sub-second scales, so the plain rate measures the CPU share a block got as much as the LB
(scripts/bench_rank.py prints both intervals over independent runs). Both are ranked (outputs `ranking`, `ranking_per_dut_cpu`; tidy `rate_vs_*`,
`rate_per_cpu_vs_*`).

For the repetition the DUT NAPI thread runs at experiments.rank.dut_rt_priority (default 0: normal
scheduling) instead of the testbed's SCHED_FIFO (testbed.cpus.dut_rt_priority), restored after it:
under the unpaced load a SCHED_FIFO thread is stopped by the kernel's RT bandwidth limit for the
rest of each second, a share of whichever block it falls in (scripts/bench_napi_priority.py). The
other experiments keep SCHED_FIFO: at a partial load a thread at normal priority is held off by any
task on its CPU, its ring overflows and frames are lost. The scheduling
read back is in the outputs (`dut_napi_scheduling`).

Rounds the testbed disturbed are left out of every ranking (`rounds_left_out`; their blocks stay in
the outputs with `round_kept` false) and made up: each round is judged as it ends, and the
repetition runs on until it has kept `rounds`. The placement's and the allocator's figures do not
depend on the LBs' rates, so stopping at a count of kept rounds does not bias the ratios; the
received share does, and leaves a round out only where a block's rate was the generator's, which
is no LB's maximum. A repetition that reaches
`max_rounds` with fewer kept is invalid (`rounds_kept`) and retried. Each block records, during its
settle and window:
- `cpu_pair_rtt_ns`: the round trip of one cache line between the generator's CPU and the DUT's
  (loadgen/cpu_rtt, a program kept on the LB node; the fastest of 20 bursts of 100). The namespace
  testbed hands every frame from one vCPU to the other, and now and then (changing within seconds:
  scripts/bench_placement.py) the host runs the two vCPUs on cores that share no cache: the round trip is then several times longer,
  a frame costs the DUT more CPU time, and an LB's ratio to the wire falls while the LBs' ratios to
  each other hold (docs/vm-noise.md; scripts/bench_rank.py prints the figures). Above
  experiments.max_cpu_pair_rtt_ns the round is left out (the machine rule, xenobench.machine.RULES);
- `page_allocs_per_frame`: page allocations on the generator's node per frame the backends received
  (/proc/vmstat's pgalloc_*, a kept reader), less those the generator's frames cost by design
  (Generator.describe: xdpgen's loop clones each frame it sends). xdpgen's frames are pages of the kernel's test-run
  page pool, recycled through a ring the kernel sizes by the run's batch: at the kernel's default
  batch of 64 it overflows at full load and costs the DUT rate; xdpgen runs batches of 256 when
  unpaced. Above experiments.max_page_allocs_per_frame the round is left out;
- `offered_pps`, `received_share` (unpaced only): what the generator offered on its port over the
  window (OfferedReader: the loadgen interface's own counters) and the share of it the backends
  received. A block measures the LB's maximum only while the generator offers more than the LB
  forwards. Near 1 the generator set the block's rate: where it offered less than HELD_DOWN of its
  median rate in the repetition, whatever took its CPU held it down (`held_down_share`, judged:
  above experiments.max_received_share the round is left out); at its own rate it is the
  generator's ceiling (`generator_bound`: kept, as the LB forwarded all it got, and the report
  labels the rate generator-bound).
None of these happens on the thesis testbed (TRex's DPDK pools; the generator and the LB on separate hosts),
where no round is left out.

Valid only with every LB process alive through the repetition (xenobench.actors.Watch), the
generator alive and every block present. A testbed where an LB of the list cannot be switched this
way (XenoFlow in a BlueField's eSwitch: LoadBalancer.no_pin) is refused by name before anything runs.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from .. import machine, rateblocks
from ..counters import parse_proc_net_dev
from ..errors import ConfigError, DataError, NodeError, XenobenchError
from ..latency import block_order
from ..lb import get_lb, stop_all
from ..machine import page_allocs
from ..results import GENERATOR_BOUND_SHARE, row
from ..sampler import KeptFile, RateSampler
from ..traffic import generator_summary, start_traffic
from ..trials import TrialContext, Validity
from ..xdpswitch import XdpSwitch
from .common import DRAIN_S, backend_ifaces, payload_tunables, watch_generator, watch_lb, within_skew

KIND = "rank"
TABLES = ()  # its definitions' own (tidy.tables)
#: what this kind needs of every LB of its list (xenobench.experiments.check_lbs)
LB_NEED = ("be started loaded and not attached", "no_pin", lambda lb: lb.no_pin)



def check_switchable(testbed, lbs: list[str], where: str = "experiments.rank.lbs") -> dict:
    """The drivers of `lbs`; refuses (ConfigError naming the LB and why) an LB that cannot be
    started loaded, not attached, and a list without its reference."""
    drivers = {k: get_lb(k, testbed) for k in lbs}
    bad = [f"{k} ({d.no_pin})" for k, d in drivers.items() if d.no_pin]
    if bad:
        raise ConfigError(f"Failed to plan the interleaved rate design on testbed {testbed.cfg.name}: {where} in "
                          f"{testbed.cfg.path} lists LBs whose program cannot be switched on the LB's port: "
                          f"{'; '.join(bad)} (leave them out of the list, or the experiment out of this config)")
    return drivers


def check_section(cfg, experiment: str, ex: dict) -> None:
    """When the plan is made (xenobench.experiments.plan; `ex`: the experiment's config section):
    its reference is one of its LBs."""
    lbs, ref = list(ex["lbs"]), ex["reference"]
    if ref not in lbs:
        raise ConfigError(f"Failed to plan experiment {experiment}: experiments.{experiment}.reference {ref!r} is "
                          f"not in its lbs {lbs} in {cfg.path} (add it to the list, or name one of the list)")


def precheck(testbed, experiment: str, ex: dict) -> None:
    """Before a point's set-up (xenobench.procedures.run_point; `ex`: the experiment's config
    section): the list holds its reference and is switchable."""
    check_section(testbed.cfg, experiment, ex)
    check_switchable(testbed, list(ex["lbs"]), f"experiments.{experiment}.lbs")


def check_paired_section(cfg, experiment: str, ex: dict) -> None:
    """check_section for a kind that runs this design where its section says `paired` (rate, search)."""
    if ex.get("paired"):
        check_section(cfg, experiment, ex)


def precheck_paired(testbed, experiment: str, ex: dict) -> None:
    """precheck for a kind that runs this design where its section says `paired` (rate, search)."""
    if ex.get("paired"):
        precheck(testbed, experiment, ex)


def port_switch(testbed) -> XdpSwitch:
    """The switcher of the LB node's ingress port (xenobench.xdpswitch), nothing attached by it yet."""
    lbn = testbed.cfg.role("lb")
    return XdpSwitch(testbed.node(lbn.name), (lbn.lb_port("ingress") or lbn.iface()).name)


def start_unattached(ctx: TrialContext, drivers: dict, started: list[str]) -> None:
    """Step 1 (module docstring): every LB of `drivers` started loaded, not attached, in order, and
    watched as an actor of the trial; `started` gets each as it starts, for stop_unattached."""
    for k, d in drivers.items():
        d.start(attach=False)
        started.append(k)
        watch_lb(ctx, d)


def stop_unattached(ctx: TrialContext, drivers: dict, started: list[str], sw: XdpSwitch) -> None:
    """The port without a program again and every LB start_unattached started stopped and no longer
    watched; errors suppressed (it runs in a finally, after whatever failed)."""
    with contextlib.suppress(XenobenchError):
        sw.detach()
    for k in started:
        ctx.watch.release(f"lb_{k}")
        with contextlib.suppress(XenobenchError):
            drivers[k].stop()


def window_rate(samples, t0: float, t1: float) -> tuple[float | None, int]:
    """(rate, samples used): the least-squares slope of a counter's (time, value) samples within
    [t0, t1], per second; None with fewer than 2 (lengthen block_s or shorten the sampler's
    interval; on a loaded machine the sampler's thread is now and then held up for a few intervals)."""
    s = np.array([(t, v) for t, v in samples if t0 <= t <= t1], dtype=float)
    if len(s) < 2:
        return None, len(s)
    return float(np.polyfit(s[:, 0] - s[0, 0], s[:, 1], 1)[0]), len(s)


def counter_at(samples, t: float) -> float:
    """A counter's value at time t, linearly between its samples."""
    s = np.asarray(samples, dtype=float)
    return float(np.interp(t, s[:, 0], s[:, 1]))


def bookkeeping(v: Validity, blocks: list[dict], initial: dict[str, int], final: dict[str, int],
                rx_total: int, tol_pct: float) -> None:
    """The checks of step 4 (module docstring). `blocks`: each with block, lb, fwd_in (its LB's
    forwarded count read just before its swap-in), fwd_out (just after its swap-out), rx_window
    (the backends' rx over its window, which lies inside its attachment); `initial`/`final`: every
    LB's count before the first attach and after the last detach; rx_total: the backends' rx
    between those two reads.
    - block_<i>_others_idle (exact): the block's LB forwarded nothing since its last block;
    - block_<i>_forwarded_by_<lb>: it forwarded at least (1 - tol) x what the backends received in
      its window (the window is inside its attachment; the sampler's timestamps lag its reads by
      tens of ms on a loaded machine, so the attachment's own edges are not compared);
    - lbs_account_for_rx: every frame the backends received was forwarded by one of the LBs
      (received <= forwarded within the counters' tolerance), and the LBs forwarded at most
      (1 + tol) x that (frames an LB redirected may be dropped on the way: the switch's ring)."""
    last = dict(initial)             # each LB's count when it was last detached (or never attached)
    since = {k: 0 for k in initial}  # ... after which block (0: before the first)
    tol = tol_pct / 100
    for b in blocks:
        k, i = b["lb"], b["block"]
        rose = b["fwd_in"] - last[k]
        v.require(f"block_{i}_others_idle", rose == 0,
                  f"block {i} ({k}): {k} forwarded {rose} frames while not attached "
                  f"(after block {since[k]}, before block {i}): another LB's program was not the one attached")
        fwd, rx = b["fwd_out"] - b["fwd_in"], b["rx_window"]
        v.require(f"block_{i}_forwarded_by_{k}", fwd >= rx * (1 - tol) - 10,
                  f"block {i} ({k}): {k} forwarded {fwd} frames while attached, the backends received {rx:.0f} "
                  f"in its window alone (tolerance {tol_pct:g} %): the LB switched in did not do the forwarding")
        last[k], since[k] = b["fwd_out"], i
    for k, n in final.items():
        rose = n - last[k]
        v.require(f"{k}_idle_after_last_block", rose == 0,
                  f"{k} forwarded {rose} frames after its last block ({since[k]}), while not attached")
    fwd_total = sum(final[k] - initial[k] for k in final)
    v.require("lbs_account_for_rx", within_skew(rx_total, fwd_total) and fwd_total <= rx_total * (1 + tol) + 10,
              f"the LBs forwarded {fwd_total} frames, the backends received {rx_total} (tolerance {tol_pct:g} %)")


class DutCpuReader(KeptFile):
    """The CPU time (ns) one NAPI thread has used, its /proc/<pid>/schedstat read through a program
    kept on the node (sampler.KeptFile, as the sampler reads counters): two reads a block, no process
    started per read. Callable: None once the thread is gone; close() ends the program."""

    def __init__(self, node, pid: str):
        super().__init__(node, f"/proc/{pid}/schedstat")

    def __call__(self) -> int | None:
        try:
            f = self.read().split()
        except NodeError:
            return None  # the thread is gone: the block keeps no per-CPU rate
        return int(f[0]) if f else None


def dut_cpu_reader(testbed) -> DutCpuReader | None:
    """A reader of the CPU time (ns) the LB port's pinned NAPI thread has used
    (NamespaceTestbed.napi.placed_threads: threaded NAPI, testbed.cpus.dut), None where there is no such
    thread (a hardware testbed, NAPI inline). A block's rx per second of that thread's CPU time is its
    rate with the thread's CPU share divided out: on a shared 2-core machine other tasks take turns on
    that CPU and the generator on the other CPU is starved now and then, both at sub-second scales
    (module docstring of scripts/bench_rank.py)."""
    napi = getattr(testbed, "napi", None)  # NamespaceTestbed's NapiPlacement: the threads it pinned
    pids = list(((napi.placed_threads() if napi is not None else None) or {}).get("dut") or {})
    if len(pids) != 1:
        return None
    return DutCpuReader(testbed.node(testbed.cfg.role("lb").name), pids[0])


class PageAllocReader(KeptFile):
    """The page allocations of a node's kernel so far (/proc/vmstat's pgalloc_* summed over the
    zones), read through a program kept on the node (sampler.KeptFile). Callable: None when the file
    cannot be read or holds no pgalloc_ line; close() ends the program."""

    def __init__(self, node):
        super().__init__(node, "/proc/vmstat")

    def __call__(self) -> int | None:
        try:
            text = self.read().decode(errors="replace")
        except NodeError:
            return None
        return page_allocs(text)


class OfferedReader(KeptFile):
    """The frames the generator has offered so far on its port: the loadgen interface's tx_packets
    plus tx_drop of /proc/net/dev (a veth counts there the frames its peer's ring took, and refused:
    xdpgen's tx_queue_N_xdp_xmit and _errors), read through a program kept on the node
    (sampler.KeptFile). Callable: (time.monotonic() at the read's middle, frames), None when it
    cannot be read (a generator the kernel does not see: TRex's DPDK)."""

    def __init__(self, node, iface: str):
        super().__init__(node, "/proc/net/dev")
        self.iface = iface

    def __call__(self) -> tuple[float, int] | None:
        t0 = time.monotonic()
        try:
            text = self.read().decode(errors="replace")
            n = parse_proc_net_dev(text, self.iface, "tx_packets") + parse_proc_net_dev(text, self.iface, "tx_drop")
        except (NodeError, DataError):
            return None
        return (t0 + time.monotonic()) / 2, n


def offered_reader(testbed) -> OfferedReader:
    """The reader of what the generator offers on the loadgen node's port (OfferedReader)."""
    lg = testbed.cfg.role("loadgen")
    return OfferedReader(testbed.node(lg.name), lg.iface().name)


#: the machine rule's figures each block records (Rule.per_block: its settle's cache-line round trip,
#: its window's page allocations per frame and, unpaced, the share of the offered frames received),
#: judged per round, not per repetition: a repetition keeps its undisturbed rounds
ROUND_FIGURES = tuple((r.figure, r.unit) for r in machine.RULES if r.per_block)


def rounds_left_out(blocks: list[dict], limits: dict[str, float | None]) -> tuple[set[int], dict[int, dict[str, float]]]:
    """(kept, left out): the rounds whose every block the machine rule (xenobench.machine.RULES;
    `limits`: experiments key -> limit, None: not judged) finds undisturbed, and the others with the
    largest value of each figure over its limit. A block without a figure (no prober, no frames)
    leaves its round in."""
    worst: dict[int, dict[str, float]] = {}
    for b in blocks:
        w = worst.setdefault(int(b["round"]), {})
        for f, v in machine.over(b, limits).items():
            w[f] = max(w.get(f, v), v)
    out = {r: w for r, w in worst.items() if w}
    return set(worst) - set(out), out


def left_out_reason(left: dict[int, dict[str, float]], kept: int, rounds: int, run: int, limits: dict) -> str:
    """The validity reason of a repetition that ran its `run` rounds (max_rounds) and kept fewer than
    `rounds`: the rounds left out, per figure."""
    worst: dict[str, float] = {}
    count: dict[str, int] = {}
    for w in left.values():
        for f, v in w.items():
            worst[f] = max(worst.get(f, v), v)
            count[f] = count.get(f, 0) + 1
    return (f"{kept} of the {rounds} rounds wanted kept in {run} rounds run (max_rounds); {len(left)} left out "
            f"({machine.explain(worst, limits, count)}): the machine's state, not the LBs' (xenobench.machine.RULES)")


def max_rounds(ex: dict) -> int:
    """The most rounds a repetition runs to keep `rounds` (the section's max_rounds; null: 3 x rounds)."""
    return int(ex.get("max_rounds") or 3 * int(ex["rounds"]))


#: a block's generator was held down where it offered less than this share of its median rate over
#: the repetition's blocks so far: whatever took its CPU, not the LB, then set what the backends got
HELD_DOWN = 0.9


def block_figures(b: dict, samples, typical_offered: float | None = None) -> None:
    """A completed block's rate over its window (`window_rate`), the backends' rx in it and the
    figures derived from that: rx per DUT CPU-second, page allocations per frame beyond those the
    generator's frames cost by design (machine rule); unpaced, the share of what the generator
    offered that the backends received, judged by the machine rule only where the generator was held
    down (`typical_offered`: its median offered rate in the repetition; HELD_DOWN), and otherwise,
    at GENERATOR_BOUND_SHARE or above, the block's rate is the generator's own: generator-bound
    (kept; the report says so), not disturbed."""
    b["rate_pps"], b["samples"] = window_rate(samples, *b["window"])
    b["rx_window"] = (counter_at(samples, b["window"][1]) - counter_at(samples, b["window"][0])) if samples else 0.0
    b["rx_per_dut_cpu_s"] = b["rx_window"] / b["dut_cpu_s"] if b.get("dut_cpu_s") else None
    b["page_allocs_per_frame"] = (round((b["page_allocs"] - b.get("generator_pages", 0.0)) / b["rx_window"], 5)
                                  if b.get("page_allocs") is not None and b["rx_window"] > 0 else None)
    # counts over the same window (the backends' rx interpolated at its ends, the generator's frames read
    # at them), not the rx slope over the offered rate: a slope over a 0.2 s window of jittered samples
    # came out up to a quarter above what was offered
    offered = b.get("offered_frames") or ((b.get("offered_pps") or 0) * (b["window"][1] - b["window"][0]))
    share = round(b["rx_window"] / offered, 4) if b.get("offered_pps") and offered > 0 else None
    b["typical_offered_pps"] = typical_offered
    held = share is not None and bool(typical_offered) and b["offered_pps"] < HELD_DOWN * typical_offered
    b["received_share"] = share
    b["held_down_share"] = share if held else None
    b["generator_bound"] = share is not None and not held and share >= GENERATOR_BOUND_SHARE


def _samples_past(sampler: RateSampler, t: float, timeout_s: float = 0.5) -> list:
    """The sampler's samples once one lies past t (a window's end: its rx counted to the end)."""
    deadline = time.monotonic() + timeout_s
    while True:
        samples = list(sampler.samples)
        if (samples and samples[-1][0] > t) or time.monotonic() >= deadline:
            return samples
        time.sleep(0.005)


def interleaved_rates(ctx: TrialContext, lb=None) -> tuple[dict, Validity]:
    """One repetition of the interleaved rate design (module docstring)."""
    tb, cfg = ctx.testbed, ctx.testbed.cfg
    ex = {**ctx.section, **{k: v for k, v in ctx.point.items() if k in ctx.section}}  # a swept knob: the point's
    lbs, ref = list(ex["lbs"]), ex["reference"]
    drivers = check_switchable(tb, lbs, f"experiments.{ctx.experiment}.lbs")
    rounds, block_s, settle_s = int(ex["rounds"]), float(ex["block_s"]), float(ex["settle_s"])
    cap = max_rounds(ex)
    seed = int(ex["seed"]) + int(ctx.repetition)
    order = block_order(lbs, cap, seed)  # its first rounds' blocks run: until `rounds` are kept
    payload = int(ctx.knob("payload"))
    rate = float(ctx.knob("rate_pps", 0) or 0)  # 0: unpaced
    tun = payload_tunables(payload, int(ex["flows"]))
    sw = port_switch(tb)
    sampler = RateSampler(tb, backend_ifaces(cfg), float(ex["sample_interval_s"]))
    v = Validity()
    blocks: list[dict] = []
    out: dict = {"payload": payload, "requested_pps": rate, "lbs": lbs, "reference": ref, "order": order,
                 "order_seed": seed,
                 "rounds": rounds, "max_rounds": cap, "block_s": block_s, "settle_s": settle_s,
                 "bootstrap_seed": int(ex["seed"]), "bootstrap_resamples": int(ex["bootstrap"])}
    stop_all(tb)  # the port is the switcher's
    cpu = dut_cpu_reader(tb)
    allocs = PageAllocReader(tb.node(cfg.role("loadgen").name))  # the generator's page allocator state
    # what the generator itself offers: the pages its frames cost by design (any rate) and, unpaced, the
    # share of it the backends received
    offered = offered_reader(tb)
    limits = machine.limits(cfg)  # the machine rule judges every block (xenobench.machine.RULES)
    # the generator's and the DUT's CPU: a shared cache or not (the trial's prober, else one of its own)
    own_pair = ctx.pair_rtt is None and limits["max_cpu_pair_rtt_ns"] is not None
    pair = machine.cpu_pair_rtt(tb) if own_pair else ctx.pair_rtt
    napi = getattr(tb, "napi", None) if cpu is not None else None  # the placed DUT thread's scheduling
    kept_so_far = 0  # rounds the machine rule kept: the repetition stops at `rounds` of them
    started: list[str] = []
    h = gen = None
    stopped, sampling = None, False
    try:
        # experiments.<id>.dut_rt_priority for the repetition (module docstring); null: the testbed's
        if napi is not None and ex.get("dut_rt_priority") is not None:
            out["dut_napi_scheduling"] = napi.dut_priority(int(ex["dut_rt_priority"]))
        t0 = time.monotonic()
        start_unattached(ctx, drivers, started)
        out["start_s"] = round(time.monotonic() - t0, 3)
        pins = {k: drivers[k].prog_pin for k in lbs}
        initial = {k: drivers[k].forwarded() for k in lbs}
        rx0 = sampler.read_total()
        sw.attach(pins[order[0]])
        t_in = sum(sw.last) / 2
        fwd_in = initial[order[0]]
        design_pages = float(generator_summary(tb).get("pages_per_frame") or 0.0)
        out["generator_pages_per_frame"] = design_pages
        h = start_traffic(tb, ctx.plan.profile, tun, rate)
        gen_key = watch_generator(ctx, h)
        sampler.start()
        sampling = True
        for i, kind in enumerate(order, 1):
            if i > 1 and blocks[-1]["lb"] == kind:  # a round ends and the next begins with the same LB: no swap
                prev = blocks[-1]
                ta = time.monotonic()
                fwd_in = prev["fwd_out"] = drivers[kind].forwarded()  # attached: one read ends one, starts the other
                t_in = prev["t_out"] = (ta + time.monotonic()) / 2
            elif i > 1:
                prev = blocks[-1]
                fwd_in = drivers[kind].forwarded()  # not attached: constant
                sw.switch(pins[kind])
                t_in = sum(sw.last) / 2
                prev["t_out"] = t_in
                prev["fwd_out"] = drivers[prev["lb"]].forwarded()  # detached: constant from now on
            ts = time.monotonic()
            rtt = pair() if pair else None  # in the settle: ~1 ms of both CPUs
            time.sleep(max(0.0, settle_s - (time.monotonic() - ts)))
            a0 = allocs()
            g0 = offered() if offered else None
            c0 = cpu() if cpu else None
            w0 = time.monotonic()
            time.sleep(block_s)
            w1 = time.monotonic()
            c1 = cpu() if cpu else None
            g1 = offered() if offered else None
            a1 = allocs()
            blocks.append({"block": i, "round": (i - 1) // len(lbs) + 1, "lb": kind, "t_in": t_in, "fwd_in": fwd_in,
                           "window": [w0, w1],
                           "dut_cpu_s": (c1 - c0) / 1e9 if c0 is not None and c1 is not None else None,
                           "page_allocs": a1 - a0 if a0 is not None and a1 is not None else None,
                           # what the generator's frames cost the allocator by design (Generator.describe)
                           "generator_pages": design_pages * (g1[1] - g0[1]) if g0 and g1 else 0.0,
                           "offered_pps": ((g1[1] - g0[1]) / (g1[0] - g0[0])
                                           if not rate and g0 and g1 and g1[0] > g0[0] else None),
                           "offered_frames": (g1[1] - g0[1]) if not rate and g0 and g1 else None,
                           "cpu_pair_rtt_ns": rtt})
            if ctx.watch.check():
                stopped = f"after block {i} ({kind}): {'; '.join(ctx.watch.gone())}"
                break
            if i % len(lbs) == 0:  # a round complete: judged now, so that one the rule leaves out is made up
                samples = _samples_past(sampler, w1)
                last = blocks[-len(lbs):]
                offered_so_far = [x["offered_pps"] for x in blocks if x.get("offered_pps")]
                typical = float(np.median(offered_so_far)) if offered_so_far else None
                for b in last:
                    block_figures(b, samples, typical)
                kept_so_far += bool(rounds_left_out(last, limits)[0])
                if kept_so_far >= rounds:
                    break
        if gen_key:
            ctx.watch.release(gen_key)  # stopped on purpose now
        gen = h.stop()
        time.sleep(DRAIN_S)
        if blocks and "t_out" not in blocks[-1]:
            blocks[-1]["t_out"] = time.monotonic()
            blocks[-1]["fwd_out"] = drivers[blocks[-1]["lb"]].forwarded()
        sw.detach()
        final = {k: drivers[k].forwarded() for k in lbs}
        rx_total = sampler.read_total() - rx0
    except NodeError as e:
        if not ctx.watch.check():
            raise
        stopped = f"{e}"
        final = None
    finally:
        series = sampler.stop() if sampling else {"samples": [], "error": None}
        sampler.close()
        allocs.close()
        if offered is not None:
            offered.close()
        if pair is not None and own_pair:
            pair.close()
        if cpu is not None:
            cpu.close()
        if napi is not None:  # the testbed's own priority again
            with contextlib.suppress(XenobenchError):
                napi.dut_priority(int(cfg.section("testbed")["cpus"]["dut_rt_priority"]))
        with contextlib.suppress(XenobenchError):
            if h is not None and gen is None:
                gen = h.stop()
        stop_unattached(ctx, drivers, started, sw)
    samples = series["samples"]
    complete = [b for b in blocks if "fwd_out" in b]
    offered_all = [b["offered_pps"] for b in complete if b.get("offered_pps")]
    for b in complete:  # again, from the whole series; the generator's rate as its round was judged with
        block_figures(b, samples, b["typical_offered_pps"] if "typical_offered_pps" in b else
                      (float(np.median(offered_all)) if offered_all else None))
        v.require(f"block_{b['block']}_rate", b["rate_pps"] is not None,
                  f"block {b['block']} ({b['lb']}): {b['samples']} samples in its window (lengthen block_s "
                  "or shorten sample_interval_s)")
    kept, left = rounds_left_out(complete, limits)
    for b in complete:
        b["round_kept"] = int(b["round"]) in kept
    run = len(blocks) // len(lbs)
    out["order"] = order[:len(blocks)]  # the blocks run
    out["rounds_run"] = run
    if complete and stopped is None:
        v.require(machine.ROUNDS_KEPT, len(kept) >= rounds, left_out_reason(left, len(kept), rounds, run, limits))
    if pair is not None and limits["max_cpu_pair_rtt_ns"] is not None:  # judged, so it must be measured
        v.require("cpu_pair_rtt_measured", pair.error is None,
                  f"the cache-line round trip between CPUs {pair.cpus[0]} and {pair.cpus[1]} could not be measured "
                  f"({pair.error}): build {machine.CPU_RTT} (make build), or set experiments.max_cpu_pair_rtt_ns: null")
    if stopped is None and final is not None:
        bookkeeping(v, complete, initial, final, rx_total, float(ex["check_tolerance_pct"]))
    v.require("blocks_completed", stopped is None and len(complete) == len(blocks) and len(blocks) % len(lbs) == 0,
              f"{len(complete)} of {len(blocks)} blocks completed" + (f", stopped early {stopped}" if stopped else ""))
    gen = gen or {}
    v.require("generator_ok", bool(gen.get("valid")), gen.get("reason") or "the generator reported no result")
    v.require("sampler_ok", series["error"] is None, series["error"] or "")
    used = [b for b in complete if b["round_kept"]]
    rows = [(ctx.repetition, b["round"], b["lb"], b["rate_pps"]) for b in used if b["rate_pps"]]
    per_cpu = [(ctx.repetition, b["round"], b["lb"], b["rx_per_dut_cpu_s"]) for b in used if b.get("rx_per_dut_cpu_s")]
    out.update(machine_judged_per_round=[f for f, _ in ROUND_FIGURES],  # run_trial leaves these to the rounds
               blocks=complete, generator=gen, tunables=gen.get("tunables"), rx_series=series,
               swaps=sw.swaps, stopped_early=stopped, round_limits=limits,
               cpu_pair_rtt_error=pair.error if pair else "no generator and DUT CPU on one machine",
               rounds_kept=len(kept), rounds_left_out={str(r): w for r, w in sorted(left.items())},
               ranking=[ratio_record(r) for r in ranking(rows, lbs, ref, int(ex["bootstrap"]), int(ex["seed"]))],
               # the same ratios of rx per second of the DUT NAPI thread's CPU time (dut_cpu_reader)
               ranking_per_dut_cpu=[ratio_record(r) for r in ranking(per_cpu, lbs, ref, int(ex["bootstrap"]),
                                                                     int(ex["seed"]))])
    return out, v


def ranking(rows, lbs: list[str], ref: str, resamples: int, seed: int) -> list[rateblocks.RateRatio]:
    """Every LB against the reference (lb / ref), then every pair of the other LBs (first / second
    in the list's order): rateblocks' ratios with their bootstrap 95 % CIs."""
    rows = list(rows)
    out = [r for k in lbs if k != ref and (r := rateblocks.ratio(rows, k, ref, resamples, seed)) is not None]
    return out + rateblocks.ranking(rows, [k for k in lbs if k != ref], resamples, seed)


def ratio_record(r: rateblocks.RateRatio) -> dict:
    return {"lb": r.lb, "vs": r.reference, "median": r.median, "ci_low": r.ci_low, "ci_high": r.ci_high,
            "rounds": r.rounds, "repetitions": r.repetitions, "half_width_pct": r.half_width_pct, "verdict": r.verdict}


PROCEDURES = {"interleaved_rates": interleaved_rates}


def headline(o: dict) -> str:
    """A valid trial's value on the terminal: each LB's rate over the reference's, median over its rounds."""
    return "; ".join(f"{r['lb']}/{r['vs']} {r['median']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
                     for r in o["ranking"]) or "no ratio (too few rounds kept)"


# --- rows --------------------------------------------------------------------------------------------
def _block_rows(t) -> tuple[list[dict], dict]:
    """rate_blocks rows per block (source: the trial, block and round): its rate
    and, where recorded, its rx per second of the DUT NAPI thread's CPU time, the figures its round
    was judged by (xenobench.machine.RULES) and whether it was kept; returns them and, per measure
    ("rate", "rate_per_cpu"), (repetition, round, lb, value) per block of a kept round for the point's
    rate_ranking rows (a round the trial left out is in no ranking)."""
    o = t.outputs
    rep = t.repetition
    src = t.common["source"]
    common = {k: v for k, v in t.common.items() if k not in ("lb", "source")}
    common["payload_bytes"] = o["payload"]
    rows, blocks = [], {"rate": [], "rate_per_cpu": []}
    for b in o["blocks"]:
        if b.get("rate_pps") is None:
            continue
        where = dict(common, lb=b["lb"], measured_pps=b["rate_pps"], source=f"{src}:block-{b['block']}:round-{b['round']}")
        kept = b.get("round_kept", True)  # trials before the allocator check kept every round
        rows.append(row(**where, metric="block_rx_pps", value=float(b["rate_pps"]), unit="packets/s"))
        rows.append(row(**where, metric="block_round_kept", value=float(kept), unit="flag"))
        for field, unit in ROUND_FIGURES:
            if b.get(field) is not None:
                rows.append(row(**where, metric=f"block_{field}", value=float(b[field]), unit=unit))
        if b.get("received_share") is not None:  # recorded whether judged (held_down_share) or not
            rows.append(row(**where, metric="block_received_share", value=float(b["received_share"]), unit="share"))
            rows.append(row(**where, metric="block_generator_bound", value=float(bool(b.get("generator_bound"))),
                            unit="flag"))
        if kept:
            blocks["rate"].append((rep, int(b["round"]), b["lb"], float(b["rate_pps"])))
        if b.get("rx_per_dut_cpu_s"):  # the DUT NAPI thread's CPU share divided out (dut_cpu_reader)
            rows.append(row(**where, metric="block_rx_per_dut_cpu_s", value=float(b["rx_per_dut_cpu_s"]),
                            unit="packets/cpu-s"))
            if kept:
                blocks["rate_per_cpu"].append((rep, int(b["round"]), b["lb"], float(b["rx_per_dut_cpu_s"])))
    return rows, blocks


RANK_MEASURES = ("rate", "rate_per_cpu")  # rate_ranking's metric prefixes: <measure>_vs_<ref>_<part>


def rank_rows(blocks: list, lbs: list[str], reference: str, common: dict, resamples: int, seed: int,
              measure: str = "rate") -> list[dict]:
    """rate_ranking rows of one point (ranking over its valid repetitions' rounds):
    each LB against the reference, then every pair of the others; verdict +1 / -1 where the CI
    excludes 1 (faster / slower than the one it is compared with), 0 = not distinguishable.
    measure: "rate" (block_rx_pps) or "rate_per_cpu" (block_rx_per_dut_cpu_s)."""
    out = []
    for r in ranking(blocks, lbs, reference, resamples, seed):
        c = dict(common, lb=r.lb)
        sign = {"faster": 1, "slower": -1}.get(r.verdict, 0)
        pre = f"{measure}_vs_{r.reference}_"
        for m, v, u in (("median", r.median, "ratio"), ("ci_low", r.ci_low, "ratio"), ("ci_high", r.ci_high, "ratio"),
                        ("half_width_pct", r.half_width_pct, "%"), ("rounds", r.rounds, "count"),
                        ("repetitions", r.repetitions, "count"),
                        ("verdict", sign, "sign"), ("bootstrap_seed", seed, "seed"),
                        ("bootstrap_resamples", resamples, "count")):
            out.append(row(**c, metric=pre + m, value=float(v), unit=u))
    return out


def rows(t) -> dict[str, list[dict]]:
    """A rank trial's per-block rows (`t`: xenobench.measure.TrialRecord)."""
    return {t.definition.tidy["tables"][0]: _block_rows(t)[0]}


def ranking_rows(records: list) -> list[dict]:
    """rate_ranking-style rows of one point over its valid repetitions (`records`: TrialRecord's in
    repetition order, each an interleaved repetition), per measure (RANK_MEASURES): the rows of
    rank's rate_ranking table, and of pps and compare in their paired design (xenobench.measure.rate)."""
    if not records:
        return []
    blocks_by: dict[str, list] = {}
    for t in records:
        for k, bl in _block_rows(t)[1].items():
            blocks_by.setdefault(k, []).extend(bl)
    first = records[0]
    o = first.outputs
    common = {k: v for k, v in first.common.items() if k not in ("lb", "repetition")}
    common.update(payload_bytes=o["payload"], source=str(first.trial.path.parent.relative_to(first.resdir)))
    return [r for m in RANK_MEASURES for r in rank_rows(blocks_by.get(m, []), o["lbs"], o["reference"], common,
                                                        int(o["bootstrap_resamples"]), int(o["bootstrap_seed"]), m)]


def point_rows(records: list) -> dict[str, list[dict]]:
    """rate_ranking rows of one point over its valid repetitions (ranking_rows)."""
    if not records:
        return {}
    return {records[0].definition.tidy["tables"][1]: ranking_rows(records)}


def per_lb(o: dict) -> dict[str, dict]:
    """Each LB's absolute rate in one interleaved repetition (outputs `o`): the median and the
    coefficient of variation of its kept blocks' rates, and their count (LBs without a kept block
    left out), and the share of them the generator at its own rate set (generator_bound_share; None
    paced). Paced at a rate (outputs requested_pps above 0): also that rate and the LB's loss
    against what the generator sent per second over the repetition (its achieved_pps); a median
    above it is no negative loss but the windows' spread: 0."""
    by: dict[str, list[float]] = {}
    bound: dict[str, list[bool]] = {}
    for b in o.get("blocks") or ():
        if b.get("rate_pps") is not None and b.get("round_kept", True):
            by.setdefault(b["lb"], []).append(float(b["rate_pps"]))
            if b.get("received_share") is not None:  # unpaced: whether the generator set the block's rate
                bound.setdefault(b["lb"], []).append(bool(b.get("generator_bound")))
    out = {}
    for k in o.get("lbs") or by:
        v = np.array(by.get(k) or [])
        if len(v):
            out[k] = {"rx_pps": float(np.median(v)), "blocks": int(len(v)),
                      "rx_cv_pct": float(100 * v.std(ddof=1) / v.mean()) if len(v) > 1 and v.mean() > 0 else None,
                      # the share of its kept blocks whose rate was the generator's own (block_figures)
                      "generator_bound_share": float(np.mean(bound[k])) if bound.get(k) else None}
    sent = float((o.get("generator") or {}).get("achieved_pps") or 0)
    if o.get("requested_pps") and sent > 0:
        for vals in out.values():
            vals.update(requested_pps=float(o["requested_pps"]), loss_pct=max(0.0, 100 * (1 - vals["rx_pps"] / sent)))
    return out
