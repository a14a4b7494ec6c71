"""The load balancer's own cost per frame on its forwarding path: the kernel's BPF run-time
statistics (`run_time_ns` / `run_cnt`) of the XDP program attached to the LB's ingress port,
over a phase of traffic.

Why next to the rate: on the namespace testbed every frame crosses three veth hops on the DUT's
CPU, and the LB's program is about 5 % of that CPU's time per frame (perf profile in
scripts/bench_lb_forwarding.py); the rates of wire, eBPF and XenoFlow-emu then differ by less than
this VM's round-to-round noise. The statistics time the program alone, on the live path, over
every frame of the phase, so they tell the LBs apart where their programs differ.

The statistics cost two clock reads per run of every BPF program on the machine, so the phase runs
after the rate's, never during it (xenobench.agents.bpf_stats holds them on for its length). The
time includes those reads, the same for every LB: compare LBs by difference, not by ratio. A
hardware LB (XenoFlow in the BlueField's eSwitch) has no program on the host to time; the result
says so instead of a number.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable

from .errors import NodeError

TAG = "bpf-stats"
READY = '"event": "started"'


def xdp_prog_id(node, iface: str) -> int | None:
    """The id of the XDP program attached to node:iface (any mode), None if there is none."""
    r = node.run(["ip", "-j", "link", "show", "dev", iface], check=False)
    try:
        links = json.loads(r.stdout or "[]") if r.ok else []
    except ValueError:
        return None
    xdp = links[0].get("xdp") if links else None
    if not xdp:
        return None
    prog = xdp.get("prog") or next((a.get("prog") for a in xdp.get("attached", []) if a.get("prog")), None)
    return prog.get("id") if prog else None


def pinned_prog_id(node, pin) -> int | None:
    """The id of the program pinned at `pin` on node (a bpffs path), None if there is none."""
    r = node.run(["bpftool", "-j", "prog", "show", "pinned", str(pin)], check=False)
    try:
        return json.loads(r.stdout).get("id") if r.ok else None
    except ValueError:
        return None


def remove_left_program(node, iface: str, pindir, prog: str) -> None:
    """What a controller agent that died (kill -9) leaves: its program `prog` pinned under pindir
    and attached to node:iface. Detaches it (only while the attached program is that one) and
    removes the pins."""
    ours = pinned_prog_id(node, f"{pindir}/progs/{prog}")
    if ours is not None and xdp_prog_id(node, iface) == ours:
        for mode in ("xdp", "xdpgeneric"):
            node.run(["ip", "link", "set", "dev", iface, mode, "off"], check=False)
    node.run(["rm", "-rf", str(pindir)], check=False)


def prog_run_stats(node, prog_id: int) -> dict:
    """{"id", "name", "run_cnt", "run_time_ns"} of one program (0 while statistics were never on)."""
    r = node.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)], check=False)
    try:
        d = json.loads(r.stdout) if r.ok else None
    except ValueError:
        d = None
    if not isinstance(d, dict) or "id" not in d:
        raise NodeError(f"Failed to read BPF program {prog_id} on {node.name}: "
                        f"{(r.stderr or r.stdout).strip() or 'no such program'}")
    return {"id": d["id"], "name": d.get("name", ""), "run_cnt": int(d.get("run_cnt", 0)),
            "run_time_ns": int(d.get("run_time_ns", 0))}


@contextlib.contextmanager
def run_time_stats(node):
    """BPF run-time statistics on for the body (xenobench.agents.bpf_stats on the node)."""
    node.start_until(TAG, node.python_argv("xenobench.agents.bpf_stats", "hold"), READY,
                     what="BPF run-time statistics (xenobench.agents.bpf_stats)")
    try:
        yield
    finally:
        node.stop(TAG)


def measure(testbed, phase: Callable[[], Any]) -> dict:
    """Run `phase` (traffic) with the statistics on; the LB ingress program's runs, time and
    ns per run over it, and what `phase` returned. {"skipped": reason} without a program."""
    lb = testbed.cfg.role("lb")
    iface = (lb.lb_port("ingress") or lb.iface()).name
    node = testbed.node(lb.name)
    pid = xdp_prog_id(node, iface)
    if pid is None:
        return {"skipped": f"no XDP program on {node.name}:{iface} to time (a hardware LB has none)"}
    with run_time_stats(node):
        before = prog_run_stats(node, pid)
        out = phase()
        after = prog_run_stats(node, pid)
    runs = after["run_cnt"] - before["run_cnt"]
    ns = after["run_time_ns"] - before["run_time_ns"]
    return {"iface": f"{node.name}:{iface}", "prog_id": pid, "prog_name": after["name"], "runs": runs,
            "run_time_ns": ns, "ns_per_run": ns / runs if runs > 0 else None, "phase": out}
