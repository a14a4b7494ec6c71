#!/usr/bin/env python3
"""Faults over SSH on the rehearsal lab, each as an operator meets it mid-trial.

usage: scripts/faults_rehearsal.py [CONFIG] [--only NAME ...] [--list]

CONFIG (default config/rehearsal-ci.yaml) is the rehearsal config whose lab is built
(`python -m standins.rehearsal up`, prefix: XENOBENCH_NS_PREFIX or the config's); the lab is taken
down at the end, also on failure. Per fault: one point of two repetitions (one attempt each, so the
faulted trial stays in the record) runs while the fault hits repetition 1 mid-trial; then the same
point is run again from a new harness (a fresh testbed object, new connections), as a user's re-run
after a run that stopped; then `testbed down`, and the lab's `leftovers` against what was there
before the faults (the deployed artefact). It prints a table: fault, repetition 1's validity and
the reasons naming the fault, whether the run resumed (repetition 1 kept, not re-run; every
repetition complete), and what was left on the nodes. Exit status 1 if any row fails.
Takes about 3 minutes on 2 CPUs; needs root and `make build`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from xenobench.config import load_config  # noqa: E402
from xenobench.errors import XenobenchError  # noqa: E402
from xenobench.layout import ResultsTree  # noqa: E402

#: what each scenario runs: a short pps point (TRex stand-in at a rate this machine reaches) or an
#: RTT point (the XDP DNS responder on fips2, probes direct: no LB in the way; the Python server
#: binds the VIP, which no backend holds on the thesis testbed and the lab)
SIZES = {"repetitions": 2, "max_attempts": 1, "settle_s": 0.2, "cooldown_s": 0.2,
         "pps": {"rate_pps": 50000, "duration_s": 3},
         "rtt": {"lbs": ["none"], "servers": ["xdp"], "paired": True, "blocks": 2, "block_probes": 400,
                 "rate_qps": 200, "probes": 800}}
FAULT_AT_S = 0.8  # after the load (xdpgen on fips4) or the probes (the prober on fips1) started


def _kill(lab, node: str, handle) -> str:
    if handle is None:
        raise RuntimeError(f"nothing to kill on {node}: the actor is not running")
    lab.in_node(node, "kill", "-9", str(handle.pid))
    return f"kill -9 {handle.pid} on {node}"


def _lb(tb, kind):
    from xenobench.lb import get_lb
    return get_lb(kind, tb).process()


def _trex(tb):
    from xenobench.traffic.trex import SERVER_TAG
    return tb.node_for_role("loadgen").handle(SERVER_TAG)


def _dns(tb):
    from xenobench.dns import server_process
    return server_process(tb, "xdp")


def _kill_program(lab, node: str, needle: str) -> str:
    """kill -9 of the program itself (XenoFlow under sudo: the program, not sudo, crashes)."""
    pids = lab.pids(node, needle)
    if not pids:
        raise RuntimeError(f"no process with {needle!r} on {node}")
    lab.in_node(node, "kill", "-9", *map(str, pids))
    return f"kill -9 {' '.join(map(str, pids))} ({needle}) on {node}"


# name, experiment, point, the fault (lab, testbed) -> what was done
SCENARIOS = [
    ("ssh drops: fips5-dpu (XenoFlow's node)", "pps", {"lb": "xenoflow", "payload": 22},
     lambda lab, tb: f"sshd sessions {lab.drop_ssh('fips5-dpu')} killed"),
    ("sshd restarts: fips5 (eBPF LB's node)", "pps", {"lb": "ebpf", "payload": 22},
     lambda lab, tb: f"sshd restarted as pid {lab.restart_sshd('fips5')}"),
    ("host reboot: fips2 (DNS backend)", "rtt", {"server": "xdp"},
     lambda lab, tb: lab.reboot("fips2") or "namespace deleted and made again"),
    ("TRex server dies: fips4", "pps", {"lb": "xenoflow", "payload": 22},
     lambda lab, tb: _kill(lab, "fips4", _trex(tb))),
    ("DNS server dies: fips2 (XDP responder's controller)", "rtt", {"server": "xdp"},
     lambda lab, tb: _kill(lab, "fips2", _dns(tb))),
    ("LB dies: XenoFlow on fips5-dpu", "pps", {"lb": "xenoflow", "payload": 22},
     lambda lab, tb: _kill_program(lab, "fips5-dpu", "libexec/xenobench/xenoflow")),
    ("LB dies: eBPF controller on fips5", "pps", {"lb": "ebpf", "payload": 22},
     lambda lab, tb: _kill(lab, "fips5", _lb(tb, "ebpf"))),
]
#: what a killed third-party program leaves of its own (not the harness's): removed as an operator
#: would after the row, and shown apart from the leftovers (tests/test_rehearsal.py does the same)
DEBRIS = {"TRex server dies: fips4": r"fips4: file /tmp/trex-standin-\w+"}  # the stand-in's temporary directory
#: reasons that name a fault (the rest: what the fault did to the measurement, e.g. the rate)
FAULT_CHECKS = ("_alive", "ssh_", "procedure_completed", "blocks_completed")


def sized(config: Path):
    cfg = load_config(config)
    ex = cfg.raw["experiments"]
    for k, v in SIZES.items():
        ex[k] = {**ex[k], **v} if isinstance(v, dict) else v
    return cfg


def scenario(lab, config: Path, name, experiment, point, fault, results: Path, baseline: set, say) -> dict:
    from xenobench.procedures import run_point
    from xenobench.testbed import get_testbed
    from xenobench.traffic.trex import start_server

    tb = get_testbed(sized(config))
    start_server(tb, tb.cfg.section("traffic"))
    tree = ResultsTree(results, tb.cfg.name)
    rep1 = tree.trial(experiment, point, 1)
    done: dict = {}

    flowing = (("fips4", "xdpgen") if experiment == "pps" else ("fips1", "xenobench.agents.prober"))

    def inject():
        mark = rep1.attempt(1).counters_before
        deadline = time.monotonic() + 180
        while not (mark.exists() and lab.pids(*flowing)) and time.monotonic() < deadline and "run" not in done:
            time.sleep(0.05)
        if not mark.exists() or "run" in done:
            done["fault"] = "never injected: the trial did not start"
            return
        time.sleep(FAULT_AT_S)
        try:
            done["fault"] = fault(lab, tb)
        except Exception as e:  # noqa: BLE001  shown in the table
            done["fault"] = f"injection failed: {e}"
    t = threading.Thread(target=inject)
    t.start()
    try:
        run_point(tb, experiment, point, results_root=results, progress=lambda m: say(f"  {m}"))
        first = "completed"
    except XenobenchError as e:
        first = f"stopped: {e}"
    finally:
        done["run"] = True
        t.join()
    say(f"  fault: {done.get('fault')}; first run {first}")
    res1 = rep1.read_result() if rep1.complete else None
    stamp = rep1.result.stat().st_mtime_ns if rep1.complete else None
    # the user's re-run: a new harness
    tb2 = get_testbed(sized(config))
    try:
        run_point(tb2, experiment, point, results_root=results, progress=lambda m: say(f"  resume: {m}"))
        again = "ok"
    except XenobenchError as e:
        again = f"failed: {e}"
    kept = rep1.complete and stamp is not None and rep1.result.stat().st_mtime_ns == stamp
    complete = all(tree.trial(experiment, point, r).complete for r in (1, 2))
    tb2.down()
    tb.down()
    left = [x for x in lab.leftovers() if x not in baseline]
    debris = [x for x in left if name in DEBRIS and re.fullmatch(DEBRIS[name], x)]
    for x in debris:  # "<node>: file <path>"
        node, _, path = x.partition(": file ")
        lab.in_node(node, "rm", "-rf", "--", path)
    left = [x for x in left if x not in debris]
    reasons = [r for a in (res1 or {}).get("attempts", []) for r in a["reasons"]
               if r.split(":")[0].endswith(FAULT_CHECKS) or r.split(":")[0].startswith(FAULT_CHECKS)]
    row = {"fault": name, "injected": done.get("fault"), "first_run": first,
           "valid": None if res1 is None else res1["valid"], "reasons": reasons,
           "resumed": again == "ok" and kept and complete,
           "resume": (f"{again}; rep 1 {'kept' if kept else 'RE-RUN or missing'}; "
                      f"{'all complete' if complete else 'INCOMPLETE'}"),
           "leftovers": left, "debris": debris}
    row["ok"] = (res1 is not None and res1["valid"] is False and bool(reasons) and row["resumed"] and not left)
    return row


def table(rows: list[dict]) -> str:
    out = ["| fault | rep 1 valid | reason naming the fault | first run | resumed | leftovers |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        reasons = "<br>".join(x.replace("|", "/") for x in r["reasons"]) or "-"
        out.append(f"| {r['fault']} ({r['injected']}) | {r['valid']} | {reasons} | "
                   f"{r['first_run'][:120].replace('|', '/')} | {'yes' if r['resumed'] else 'NO'}: {r['resume']} | "
                   f"{', '.join(r['leftovers']) or 'none'}"
                   + (f" (the killed program's own, removed as an operator would: {', '.join(r['debris'])})"
                      if r["debris"] else "") + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("config", nargs="?", default=str(REPO / "config" / "rehearsal-ci.yaml"))
    ap.add_argument("--only", action="append", default=[], help="a fault whose name contains this (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the faults and exit")
    a = ap.parse_args(argv)
    todo = [s for s in SCENARIOS if not a.only or any(o.lower() in s[0].lower() for o in a.only)]
    if a.list:
        print("\n".join(s[0] for s in SCENARIOS))
        return 0
    if os.geteuid() != 0:
        print("faults_rehearsal: Failed to run: it needs root (the lab's namespaces and sshds)", file=sys.stderr)
        return 1
    from standins.rehearsal.lab import Lab
    from xenobench.deploy import deploy
    from xenobench.testbed import get_testbed

    def say(m):
        print(m, flush=True)
    config = Path(a.config).resolve()
    lab = Lab(config, sudo_rule=True)
    results = Path(tempfile.mkdtemp(prefix="faults-rehearsal-"))
    rows = []
    t0 = time.monotonic()
    try:
        say(f"lab up ({lab.prefix}*), deploy")
        lab.up()
        tb = get_testbed(load_config(config))
        deploy(tb)
        lab.install_xenoflow()  # the operator's root-owned install of the build (xenobench.dpu)
        tb.down()
        baseline = set(lab.leftovers())  # the deployed artefact (removed by `testbed down --purge` at the end)
        for name, exp, point, fault in todo:
            say(f"[{len(rows) + 1}/{len(todo)}] {name}: {exp} {point}")
            row = scenario(lab, config, name, exp, point, fault, results / f"s{len(rows) + 1}", baseline, say)
            say(f"  -> valid {row['valid']}; {'; '.join(row['reasons']) or 'no reason names the fault'}; "
                f"resumed: {row['resume']}; leftovers: {row['leftovers'] or 'none'}")
            rows.append(row)
        get_testbed(load_config(config)).down(purge=True)
        final = lab.leftovers()
    finally:
        lab.down()
        shutil.rmtree(results, ignore_errors=True)
    print()
    print(table(rows))
    print(f"\nafter `testbed down --purge`: {', '.join(final) or 'nothing'} left on the nodes; "
          f"{time.monotonic() - t0:.0f} s")
    return 0 if all(r["ok"] for r in rows) and not final else 1


if __name__ == "__main__":
    sys.exit(main())
