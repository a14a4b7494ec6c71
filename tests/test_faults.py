"""Faults: what the harness and the data path do when something breaks underneath them.

- The eBPF LB's tx_error counter: a redirect the program can see failing (no egress port in the
  devmap) is counted there and not as forwarded (BPF_PROG_TEST_RUN, frames from test_ebpf_lb).
- `kill -9` of `xenobench experiment run` in the middle of a trial on the namespace testbed, then
  `xenobench testbed down` and a rerun: nothing of the killed run is left (namespaces, processes,
  XDP programs, pinned objects), no completed trial is redone, no trial is half-written.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xenobench.agents.bpf import map_update
from xenobench.agents.ebpf_lb import OBJ, read_stats

from .conftest import needs_root
from .test_ebpf_lb import frame, prog, two  # noqa: F401  (prog: the fixture)

pytestmark = [needs_root]


# --- the eBPF LB's redirect failure ------------------------------------------------------------------
@pytest.mark.skipif(not OBJ.exists(), reason="ebpf_baseline not built (make -C ebpf_baseline)")
def test_redirect_without_egress_port_counts_tx_error_not_forwarded(prog):  # noqa: F811
    configure, run, pindir = prog
    bfile = configure(two(), egress="redirect")  # the devmap's slot stays empty
    v, out = run(frame())
    assert v == "XDP_ABORTED" and out == frame()  # nothing rewritten, nothing sent
    st = read_stats(pindir, bfile, "test")
    assert (st["tx_error"], [b["packets"] for b in st["backends"]]) == (1, [0, 0])
    map_update(pindir / "maps" / "egress", struct.pack("<I", 0), struct.pack("<I", 1))  # lo: a port exists
    v, out = run(frame())
    assert v == "XDP_REDIRECT" and out[:6] == bytes.fromhex("02000000" "0a00")
    st = read_stats(pindir, bfile, "test")
    assert (st["tx_error"], [b["packets"] for b in st["backends"]]) == (1, [1, 0])


# --- kill -9 of the harness in the middle of a trial ---------------------------------------------------
EXPERIMENT, POINT = "pps", "lb-ebpf_payload-22"


def _prefix() -> str:
    """A prefix of its own, derived from the session's: `testbed down` here must never take the
    session's testbed (tests/conftest.py) with it."""
    return os.environ.get("XENOBENCH_NS_PREFIX", "xbt-").rstrip("-")[:4] + "k-"


def _xb(cfg: Path, *args, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "XENOBENCH_NS_PREFIX": _prefix()}
    return subprocess.run([sys.executable, "-m", "xenobench.cli", "--config", str(cfg), *args], env=env,
                          capture_output=True, text=True, timeout=kw.get("timeout", 180))


def _leftovers(prefix: str, marker: str) -> dict:
    """Everything of the prefix that could outlive a run: namespaces, processes (found by the
    namespace, pin directory or results directory in their command line), bpffs pins, XDP programs
    on links of the root namespace whose name carries the prefix."""
    ns = sorted(n for n in os.listdir("/var/run/netns") if n.startswith(prefix)) if os.path.isdir("/var/run/netns") else []
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(pid) != os.getpid() and (f"/netns/{prefix}" in cmd or f"/sys/fs/bpf/{prefix}" in cmd or marker in cmd):
            procs.append(f"{pid}: {cmd[:120]}")
    pins = sorted(p.name for p in Path("/sys/fs/bpf").glob(f"{prefix}*")) if Path("/sys/fs/bpf").is_dir() else []
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True).stdout or "[]")
    xdp = sorted(li["ifname"] for li in links if li["ifname"].startswith(prefix) and "xdp" in li)
    return {"namespaces": ns, "processes": procs, "pins": pins, "xdp": xdp}


def test_kill_9_mid_trial_then_down_and_rerun(tmp_path):
    prefix = _prefix()
    cfg = tmp_path / "fault.yaml"
    ci = Path(__file__).resolve().parents[1] / "config" / "ci.yaml"
    cfg.write_text(f"extends: {ci}\ntestbed: {{name: fault}}\n"
                   "experiments:\n  repetitions: 2\n  max_attempts: 1\n  settle_s: 0.2\n  cooldown_s: 0.2\n"
                   "  pps: {lbs: [ebpf], payloads: [22], rate_pps: 0, duration_s: 2}\n")
    results = tmp_path / "results"
    marker = str(results)
    assert _leftovers(prefix, marker) == {"namespaces": [], "processes": [], "pins": [], "xdp": []}
    point = results / "fault" / "trials" / EXPERIMENT / POINT
    argv = [sys.executable, "-m", "xenobench.cli", "--config", str(cfg), "experiment", "run", EXPERIMENT, POINT,
            "--results", str(results)]
    env = {**os.environ, "XENOBENCH_NS_PREFIX": prefix}
    try:
        harness = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        mid = point / "rep-2" / "attempt-1" / "counters_before.json"
        while not mid.exists() and harness.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mid.exists(), harness.communicate()[1][-2000:] if harness.poll() is not None else "no second trial"
        time.sleep(0.7)  # inside the 2 s of load: generator and LB running, the trial half-done
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait()
        first = point / "rep-1" / "result.json"
        assert first.exists() and not (point / "rep-2" / "result.json").exists()
        done_at, done = first.stat().st_mtime_ns, first.read_bytes()
        left = _leftovers(prefix, marker)
        assert left["namespaces"] and left["processes"], left  # the kill left the run's pieces behind

        p = _xb(cfg, "testbed", "down")
        assert p.returncode == 0, p.stderr
        assert _leftovers(prefix, marker) == {"namespaces": [], "processes": [], "pins": [], "xdp": []}

        p = _xb(cfg, "experiment", "run", EXPERIMENT, POINT, "--results", str(results))
        assert p.returncode == 0, p.stderr[-2000:]
        assert (first.stat().st_mtime_ns, first.read_bytes()) == (done_at, done)  # not redone
        summary = json.loads(p.stdout.strip().splitlines()[-1])
        assert [r["repetition"] for r in summary["repetitions"]] == [1, 2]
        for rep in ("rep-1", "rep-2"):
            res = json.loads((point / rep / "result.json").read_text())
            attempts = sorted(d.name for d in (point / rep).glob("attempt-*"))
            assert attempts == [f"attempt-{a['attempt']}" for a in res["attempts"]], (rep, attempts)
            for a in attempts:  # every attempt on disk is a whole one
                assert {f.name for f in (point / rep / a).iterdir()} >= {"counters_before.json", "counters_after.json",
                                                                        "outputs.json", "validity.json"}
        assert not [str(f) for f in point.rglob("*.tmp")]
    finally:
        _xb(cfg, "testbed", "down")
    assert _leftovers(prefix, marker) == {"namespaces": [], "processes": [], "pins": [], "xdp": []}


KILLED_AT_ATTEMPT_2 = """
import os, signal, sys
from pathlib import Path
from xenobench.config import load_config
from xenobench.layout import TrialDir
from xenobench.testbed import get_testbed
from xenobench.trials import Validity, run_trial

def procedure(ctx):
    (ctx.attempt.path / "probes.jsonl").write_text("{}\\n")  # a file only this attempt writes
    if ctx.attempt.path.name == "attempt-2":
        os.kill(os.getpid(), signal.SIGKILL)  # the harness dies mid-attempt
    v = Validity()
    v.require("offered", False, "first attempt short")
    return {}, v

run_trial(get_testbed(load_config(sys.argv[1])), "pps", {"lb": "ebpf"}, 1, TrialDir(Path(sys.argv[2])), procedure,
          ifaces=[], max_attempts=3, settle_s=0, cooldown_s=0, progress=lambda m: None)
"""


def test_a_rerun_does_not_keep_the_attempts_of_a_killed_run(tmp_path):
    """A run killed in its second attempt left attempt-1 (invalid) and half of attempt-2; the rerun
    of the trial starts over, so the trial directory holds only the attempts its result.json
    lists, never the killed run's pieces beside them."""
    from xenobench.config import load_config
    from xenobench.layout import TrialDir
    from xenobench.testbed import get_testbed
    from xenobench.trials import Validity, run_trial

    cfg = tmp_path / "fault.yaml"
    cfg.write_text(f"extends: {Path(__file__).resolve().parents[1] / 'config' / 'ci.yaml'}\ntestbed: {{name: fault}}\n")
    trial = TrialDir(tmp_path / "rep-1")
    p = subprocess.run([sys.executable, "-c", KILLED_AT_ATTEMPT_2, str(cfg), str(trial.path)],
                       env={**os.environ, "XENOBENCH_NS_PREFIX": _prefix()}, capture_output=True, text=True)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert sorted(d.name for d in trial.path.glob("attempt-*")) == ["attempt-1", "attempt-2"]
    assert not trial.complete

    def valid(ctx):
        return {"rx": 1}, Validity()

    os.environ["XENOBENCH_NS_PREFIX"], old = _prefix(), os.environ.get("XENOBENCH_NS_PREFIX")
    try:
        tb = get_testbed(load_config(cfg))
    finally:
        os.environ["XENOBENCH_NS_PREFIX"] = old if old is not None else "xbt-"
    res = run_trial(tb, "pps", {"lb": "ebpf"}, 1, trial, valid, ifaces=[], max_attempts=3, settle_s=0,
                    cooldown_s=0, progress=lambda m: None)
    assert [a["attempt"] for a in res["attempts"]] == [1] and res["valid"]
    assert sorted(d.name for d in trial.path.glob("attempt-*")) == ["attempt-1"]
    assert sorted(f.name for f in trial.attempt(1).path.iterdir()) == [
        "counters_after.json", "counters_before.json", "outputs.json", "validity.json"]  # no stale probes.jsonl
