"""Faults: what the harness and the data path do when something breaks underneath them.

- The eBPF LB's tx_error counter: a redirect the program can see failing (no egress port in the
  devmap) is counted there and not as forwarded (BPF_PROG_TEST_RUN, frames from test_ebpf_lb).
- `kill -9` of an actor in the middle of a trial (the LB: XenoFlow-emu, the eBPF LB's agent; the DNS
  server: the XDP responder's controller, the Python server; the prober; the generator, xdpgen): the trial is invalid with
  a reason naming the actor, and stops early (frames sent, blocks run).
- The results disk fills mid-trial (a 1 MiB tmpfs): one error naming the file and the fix, nothing
  half-written, the trial whole on the rerun.
- `kill -9` of `xenobench experiment run` in the middle of a trial on the namespace testbed, then
  `xenobench testbed down` and a rerun: nothing of the killed run is left (namespaces, processes,
  XDP programs, pinned objects), no completed trial is redone, no trial is half-written (a whole
  run: `make test-e2e`, with the same kill -9 of Snakemake below).
"""

from __future__ import annotations

import json
import os
import re
import signal
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xenobench.agents.bpf import map_update
from xenobench.agents.ebpf_lb import OBJ, read_stats
from xenobench.lb import KINDS as LB_KINDS, get_lb
from xenobench.traffic.xdpgen import TAG as XDPGEN_TAG

from .conftest import needs_root
from .test_ebpf_lb import frame, prog, two  # noqa: F401  (prog: the fixture)

pytestmark = [needs_root]


def _cmdlines():
    """(pid, command line) of every process still there when read."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            yield pid, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue


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
    procs = [f"{pid}: {cmd[:120]}" for pid, cmd in _cmdlines()
             if int(pid) != os.getpid() and (f"/netns/{prefix}" in cmd or f"/sys/fs/bpf/{prefix}" in cmd or marker in cmd)]
    pins = sorted(p.name for p in Path("/sys/fs/bpf").glob(f"{prefix}*")) if Path("/sys/fs/bpf").is_dir() else []
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True).stdout or "[]")
    xdp = sorted(li["ifname"] for li in links if li["ifname"].startswith(prefix) and "xdp" in li)
    return {"namespaces": ns, "processes": procs, "pins": pins, "xdp": xdp}


@pytest.mark.e2e  # a whole run through the CLI: its own testbed up, two trials, down, the run again
def test_kill_9_mid_trial_then_down_and_rerun(tmp_path):
    prefix = _prefix()
    cfg = tmp_path / "fault.yaml"
    ci = Path(__file__).resolve().parents[1] / "config" / "ci.yaml"
    cfg.write_text(f"extends: {ci}\ntestbed: {{name: fault}}\n"
                   "experiments:\n  repetitions: 2\n  max_attempts: 1\n  settle_s: 0.2\n  cooldown_s: 0.2\n"
                   "  pps: {lbs: [ebpf], payloads: [22], paired: false, rate_pps: 0, duration_s: 2}\n")
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


# --- an actor dies mid-trial --------------------------------------------------
def _lb_pid(kind):
    def pid(tb):
        h = get_lb(kind, tb).process()
        return h.pid if h else None
    return pid


def _dns_pid(kind):
    def pid(tb):
        from xenobench.dns import server_process
        h = server_process(tb, kind)
        return h.pid if h else None
    return pid


def _xdpgen_pid(tb):
    h = tb.node(tb.cfg.role("loadgen").name).handle(XDPGEN_TAG)
    return h.pid if h else None


def _prober_pid(tb):
    from xenobench.actors import tagged
    from xenobench.rtt import PROBER_TAG
    h = tagged(tb.node(tb.cfg.role("client").name), PROBER_TAG)()
    return h.pid if h else None


# a rate, so that the generator is asked for a count of frames (rate x duration) the test can compare with
PPS_4S = {"lbs": ["xenoflow", "ebpf"], "payloads": [22], "paired": False, "rate_pps": 200000, "duration_s": 4}
PAIRED_6 = {"lbs": ["none", "ebpf"], "paired": True, "blocks": 3, "block_probes": 200, "rate_qps": 500, "seed": 1,
            "bootstrap": 100}
# (case, experiment, its section, point, victim's pid, when to kill: "sending" (1 s after the generator
#  started) or a path of attempt-1 that exists, the actor's key and how reasons name it)
ACTOR_FAULTS = [
    ("xenoflow", "pps", PPS_4S, {"lb": "xenoflow", "payload": 22}, _lb_pid("xenoflow"), "sending",
     "lb_xenoflow", "load balancer xenoflow"),
    ("ebpf_agent", "pps", PPS_4S, {"lb": "ebpf", "payload": 22}, _lb_pid("ebpf"), "sending",
     "lb_ebpf", "load balancer ebpf"),
    # Katran's agent (its own BPF, ../shared/katran): the program and its maps stay pinned when it dies
    ("katran_agent", "pps", {**PPS_4S, "lbs": ["katran"]}, {"lb": "katran", "payload": 22}, _lb_pid("katran"),
     "sending", "lb_katran", "load balancer katran"),
    # the XDP responder's program answers on after its controller died: only the liveness check sees it
    ("dns_server_xdp", "rtt", PAIRED_6, {"server": "xdp"}, _dns_pid("xdp"), "block-2-*", "dns_server_xdp",
     "DNS server xdp"),
    # the Python server's death loses every later query: named, not "N of M probes lost"
    ("dns_server_python", "rtt", PAIRED_6, {"server": "python"}, _dns_pid("python"), "block-2-*",
     "dns_server_python", "DNS server python"),
    # bind9 (named): the server of the thesis's RTT measurements
    ("dns_server_bind9", "rtt", PAIRED_6, {"server": "bind9"}, _dns_pid("bind9"), "block-2-*",
     "dns_server_bind9", "DNS server bind9"),
    ("prober", "rtt", PAIRED_6, {"server": "xdp"}, _prober_pid, "block-2-*", "prober", "prober"),
    # the generator: named, and the rest of the 4 s not waited for (the generator as an actor)
    ("xdpgen", "pps", PPS_4S, {"lb": "ebpf", "payload": 22}, _xdpgen_pid, "sending", "generator_xdpgen",
     "generator xdpgen"),
]


@pytest.mark.parametrize("case,experiment,section,point,victim,when,key,what", ACTOR_FAULTS,
                         ids=[c[0] for c in ACTOR_FAULTS])
def test_actor_killed_mid_trial_makes_it_invalid_by_name_and_stops_it(testbed, tmp_path, monkeypatch, case,
                                                                     experiment, section, point, victim, when, key,
                                                                     what):
    """kill -9 of an actor in the middle of a trial: the trial is invalid, the reason names the actor,
    its pid and node and when it was last seen alive, and the trial stops early (fewer samples or
    blocks than planned) instead of measuring nothing to the end."""
    import threading

    from xenobench.layout import ResultsTree
    from xenobench.procedures import run_point
    from xenobench.progcost import xdp_prog_id
    ex = testbed.cfg.raw["experiments"]
    monkeypatch.setitem(ex, experiment, {**ex[experiment], **section})
    for k, v in (("repetitions", 1), ("max_attempts", 1), ("settle_s", 0.1), ("cooldown_s", 0.1)):
        monkeypatch.setitem(ex, k, v)
    assert testbed.cfg.section("traffic")["generator"] == "xdpgen"
    trial = ResultsTree(tmp_path, testbed.cfg.name).trial(experiment, point, 1)
    att = trial.attempt(1).path
    loadgen = testbed.node(testbed.cfg.role("loadgen").name)
    killed: list[int] = []

    def killer():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready = loadgen.running(XDPGEN_TAG) if when == "sending" else any(att.glob(when))
            pid = victim(testbed) if ready else None
            if pid:
                if when == "sending":
                    time.sleep(1.0)  # inside the 4 s of load
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.02)

    t = threading.Thread(target=killer)
    t.start()
    try:
        run_point(testbed, experiment, point, results_root=tmp_path, progress=lambda *_: None)
    finally:
        t.join()
    assert killed, "the victim never ran"
    res = trial.read_result()
    o = res["outputs"]
    [a] = res["attempts"]
    assert res["valid"] is False and a["checks"][f"{key}_alive"] is False
    [reason] = [r for r in a["reasons"] if r.startswith(f"{key}_alive: ")]
    node = o["actors"][key]["node"]
    assert re.fullmatch(rf"{key}_alive: {what} \(pid {killed[0]} on {node}\) died: last seen alive "
                        r"\d+\.\d\d s into the attempt, found gone at \d+\.\d\d s", reason), reason
    rec = o["actors"][key]
    assert (rec["alive"], rec["pid"], rec["how"]) == (False, killed[0], "died")
    assert 0 <= rec["last_seen_alive_s"] <= rec["found_gone_s"]
    if experiment == "pps":  # stopped early: the generator sent part of the 4 s of frames only
        count = o["generator"]["spec"]["count"]
        assert count == 800000 and o["tx_packets"] < 0.75 * count, (o["tx_packets"], count)
        assert o["stopped_early"].startswith(what)
    else:  # the blocks after the death were not run
        assert len(o["blocks"]) <= 2 and len(o["order"]) == 6, o["blocks"]
        assert o["stopped_early"] and what in o["stopped_early"]
        assert not a["checks"]["blocks_completed"]
    # nothing of the dead actor is left on the testbed for the next trial
    lb_node = testbed.node(testbed.cfg.role("lb").name)
    assert xdp_prog_id(lb_node, "p0") is None
    assert not any(get_lb(k, testbed).running() for k in LB_KINDS)
    assert not [d for d in ("ebpf", "katran", "dns-xdp") if (Path(testbed.bpffs_dir) / d).exists()]  # no pins left


# --- the results disk fills mid-trial ------------------------------------------------
def test_full_results_disk_mid_trial_is_one_error_and_nothing_half_written(tmp_path):
    """The results directory on a 1 MiB tmpfs that another writer fills while the trial runs: the
    trial ends in one error naming the file and the fix, leaves no 0-byte record and no .tmp file
    and no result.json; with room again the same call runs the trial whole."""
    from xenobench.config import load_config
    from xenobench.errors import DataError
    from xenobench.layout import TrialDir
    from xenobench.testbed import get_testbed
    from xenobench.trials import Validity, run_trial

    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    try:
        filler = disk / "other-writer.bin"

        def fills_the_disk(ctx):
            with open(filler, "wb") as f:  # another process takes every free block
                with pytest.raises(OSError, match="No space left on device"):
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
            return {"rx": 1}, Validity()

        cfg = tmp_path / "fault.yaml"
        cfg.write_text(f"extends: {Path(__file__).resolve().parents[1] / 'config' / 'ci.yaml'}\n"
                       "testbed: {name: fault}\n")
        os.environ["XENOBENCH_NS_PREFIX"], old = _prefix(), os.environ.get("XENOBENCH_NS_PREFIX")
        try:
            tb = get_testbed(load_config(cfg))
        finally:
            os.environ["XENOBENCH_NS_PREFIX"] = old if old is not None else "xbt-"
        trial = TrialDir(disk / "rep-1")
        kw = dict(ifaces=[], max_attempts=1, settle_s=0, cooldown_s=0, progress=lambda m: None)
        with pytest.raises(DataError) as e:
            run_trial(tb, "pps", {"lb": "ebpf"}, 1, trial, fills_the_disk, **kw)
        after = trial.attempt(1).counters_after
        # the first record written after the disk filled (metadata.json: what the machine did meanwhile)
        assert str(e.value) == (f"Failed to write {trial.metadata}: No space left on device (free space on its file "
                                "system, or give --results a directory on another one, and run the same command "
                                "again (the trial is re-run))")
        assert json.loads(trial.metadata.read_text())["config"] == str(cfg)  # the whole earlier version kept
        assert not after.exists() and not trial.complete
        assert not list(disk.rglob("*.tmp"))
        assert all(f.stat().st_size > 0 for f in trial.path.rglob("*.json"))  # no 0-byte record

        filler.unlink()
        res = run_trial(tb, "pps", {"lb": "ebpf"}, 1, trial, lambda ctx: ({"rx": 1}, Validity()), **kw)
        assert res["valid"] and trial.complete and json.loads(after.read_text()) == {}
    finally:
        subprocess.run(["umount", str(disk)], check=True)


ENOSPC_TEXT = "No space left on device"
RAW = f"[Errno 28] {ENOSPC_TEXT}"  # a writer whose caller names the file (a node's agent, the state directory)


def _write_json_atomic(d, monkeypatch):
    from xenobench.layout import write_json_atomic
    (d / "attempt-1").mkdir()
    write_json_atomic(d / "attempt-1" / "outputs.json", {"rx": 1}, indent=1)


def _probe_records(d, monkeypatch):
    """The prober's records, streamed a line a record, into the paired design's block directory."""
    from xenobench.agents.prober import write_records
    write_records([{"seq": i, "status": "ok", "rtt_ns": 1000 + i} for i in range(5000)],
                  d / "attempt-1" / "block-1-ebpf" / "probes.jsonl")


def _tidy_rows(d, monkeypatch):
    from xenobench.results import write_rows
    write_rows(d / "rtt.csv", ["lb", "median_us"], [{"lb": "ebpf", "median_us": 10.5}] * 2000, "tidy results")


def _artefact(d, monkeypatch):
    from xenobench.shipping import build_artefact
    build_artefact("client", d / "deploy")


def _profile_cache(d, monkeypatch):
    from xenobench.traffic import profiles
    monkeypatch.setattr(profiles, "DISK_CACHE", d / "stl-profiles")
    profiles._disk_write("udp_1pkt", [{"stream": i, "frame": "00" * 64} for i in range(2000)])


def _trafgen_config(d, monkeypatch):
    from types import SimpleNamespace
    from xenobench.traffic import trafgen
    monkeypatch.setattr(trafgen, "to_trafgen", lambda c: "{ 0x00, }\n" * 20000)
    trafgen.write_config(SimpleNamespace(cfg=SimpleNamespace(state_dir=d)), SimpleNamespace(profile=Path("udp.py")))


def _xdpgen_frames(d, monkeypatch):
    from types import SimpleNamespace
    from xenobench.traffic.xdpgen import write_frames
    write_frames(SimpleNamespace(cfg=SimpleNamespace(state_dir=d)),
                 SimpleNamespace(profile=Path("udp.py"), frames=[bytes(64 + i % 1400) for i in range(200)]))


def _topology_record(d, monkeypatch):
    from types import SimpleNamespace
    from xenobench.testbed.topology import NamespaceTopology
    NamespaceTopology.write_record(SimpleNamespace(record_file=d / "xb-topology.json", record=dict),
                                   nodes=[f"n{i}" for i in range(5000)])


def _canonical_backends(d, monkeypatch):
    from xenobench.backends import write_canonical
    write_canonical(Path(__file__).resolve().parents[1] / "config" / "backends.json", d / "canon")


#: (writer, its error on a full disk: a function of the case's directory; None: it raises none)
ATOMIC_WRITERS = [
    (_write_json_atomic, lambda d: f"Failed to write {d / 'attempt-1' / 'outputs.json'}: {ENOSPC_TEXT} (free space "
                                   "on its file system, or give --results a directory on another one, and run the "
                                   "same command again (the trial is re-run))"),
    (_probe_records, lambda d: RAW),
    (_tidy_rows, lambda d: f"Failed to write tidy results {d / 'rtt.csv'}: {ENOSPC_TEXT}"),
    (_artefact, lambda d: RAW),
    (_profile_cache, lambda d: None),  # a cache that cannot be written costs the next process its load only
    (_trafgen_config, lambda d: RAW),
    (_xdpgen_frames, lambda d: RAW),
    (_topology_record, lambda d: RAW),
    (_canonical_backends, lambda d: RAW),
]


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory):
    """A 256 KiB tmpfs with every block taken: any write there fails with ENOSPC (directories and
    empty files can still be made)."""
    d = tmp_path_factory.mktemp("full")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(d)], check=True)
    try:
        with open(d / ".filler", "wb", buffering=0) as f, pytest.raises(OSError, match=ENOSPC_TEXT):
            while True:
                f.write(b"\0" * 4096)
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=True)


@pytest.mark.parametrize("how", ["write", "rename", "interrupt"])
@pytest.mark.parametrize("writer, error", ATOMIC_WRITERS, ids=[w.__name__.strip("_") for w, _ in ATOMIC_WRITERS])
def test_every_atomic_writer_leaves_no_temporary_file_on_a_full_disk(full_disk, tmp_path, monkeypatch, writer,
                                                                      error, how):
    """Each writer that writes a temporary file and renames it: the disk full while it writes (a
    real full tmpfs), the rename refused (os.replace raising ENOSPC) or an interrupt (Ctrl-C) at the
    rename leaves neither the file nor its temporary one, and its error is the one it always gave."""
    import errno

    d = (full_disk if how == "write" else tmp_path) / writer.__name__.strip("_")
    d.mkdir()
    if how != "write":
        real = os.replace

        def no_room(src, dst, *a, **kw):
            if str(src).startswith(str(d)):
                raise OSError(errno.ENOSPC, ENOSPC_TEXT) if how == "rename" else KeyboardInterrupt()
            return real(src, dst, *a, **kw)
        monkeypatch.setattr(os, "replace", no_room)
    try:
        writer(d, monkeypatch)
    except (Exception, KeyboardInterrupt) as e:  # the text is what is checked
        got = "KeyboardInterrupt" if isinstance(e, KeyboardInterrupt) else str(e)
    else:
        got = None
    finally:
        monkeypatch.undo()
    try:
        assert got == ("KeyboardInterrupt" if how == "interrupt" else error(d))
        assert [str(p.relative_to(d)) for p in d.rglob("*") if not p.is_dir()] == []  # no record, no temporary file
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- kill -9 of Snakemake mid-run -------------------------------------------------
def _jobs(marker: str) -> list[str]:
    out = [f"{pid}: {cmd[:160]}" for pid, cmd in _cmdlines() if marker in cmd and "experiment run" in cmd]
    return out


@pytest.mark.e2e
def test_kill_9_of_snakemake_then_the_same_command_resumes(tmp_path):
    """kill -9 of Snakemake (alone: its job is orphaned) in the second repetition of a point: the
    orphaned job notices and stops, leaving nothing running; the same command run again resumes
    (no stale lock, no incomplete-files refusal), keeps the completed repetition and re-runs the
    half-written one."""
    root = Path(__file__).resolve().parents[1]
    prefix = os.environ.get("XENOBENCH_NS_PREFIX", "xbt-").rstrip("-")[:4] + "s-"  # never the session's
    cfg = tmp_path / "snkill.yaml"
    cfg.write_text(f"extends: {root / 'config' / 'ci.yaml'}\ntestbed: {{name: snkill-{prefix.rstrip('-')}}}\n"
                   "experiments:\n  repetitions: 2\n  max_attempts: 1\n  settle_s: 0.2\n  cooldown_s: 0.2\n"
                   "  pps: {lbs: [ebpf], payloads: [22], paired: false, rate_pps: 0, duration_s: 3}\n")
    results = root / "results" / f"snkill-{prefix.rstrip('-')}"
    point = results / "trials" / "pps" / "lb-ebpf_payload-22"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", str((point / "point.json").relative_to(root)), "--configfile", str(cfg)]
    env = {**os.environ, "XENOBENCH_NS_PREFIX": prefix}
    shutil.rmtree(results, ignore_errors=True)
    try:
        sm = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        mid = point / "rep-2" / "attempt-1" / "counters_before.json"
        deadline = time.monotonic() + 300
        while not mid.exists() and sm.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mid.exists(), sm.communicate()[0][-3000:]
        assert _jobs(str(cfg)), "the job is not running"
        os.kill(sm.pid, signal.SIGKILL)  # Snakemake alone, as the OOM killer or a lost session would
        sm.communicate()
        deadline = time.monotonic() + 30
        while _jobs(str(cfg)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _jobs(str(cfg)) == []  # the orphaned job stopped by itself
        log = (results / "logs" / "pps" / "lb-ebpf_payload-22.log").read_text()
        assert "Snakemake (pid " in log and "is gone: stopping this job" in log, log[-2000:]
        first = point / "rep-1" / "result.json"
        assert first.exists() and not (point / "rep-2" / "result.json").exists()
        done = first.stat().st_mtime_ns

        again = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
        assert first.stat().st_mtime_ns == done  # the completed repetition kept
        summary = json.loads((point / "point.json").read_text())
        assert [r["repetition"] for r in summary["repetitions"]] == [1, 2]
        assert sorted(d.name for d in (point / "rep-2").glob("attempt-*")) == ["attempt-1"]
    finally:
        subprocess.run([sys.executable, "-m", "xenobench", "--config", str(cfg), "testbed", "down"], cwd=root,
                       env=env, capture_output=True)
        shutil.rmtree(results, ignore_errors=True)
    assert _leftovers(prefix, str(cfg)) == {"namespaces": [], "processes": [], "pins": [], "xdp": []}


# --- the results path checked before the testbed goes up -----------------------------
def test_results_path_without_room_is_refused_before_the_testbed_goes_up(tmp_path):
    """`testbed up` and `experiment run` with --results on a 4 MiB tmpfs: refused before anything is
    brought up, naming the path, the free bytes, the setting and the fix; with the setting lowered
    (experiments.min_free_mb) the same path passes the check; a regular file in the way is named."""
    from xenobench.config import load_config
    from xenobench.errors import DataError
    from xenobench.layout import check_results_root

    prefix = _prefix()
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:
        cfg = tmp_path / "small.yaml"
        ci = Path(__file__).resolve().parents[1] / "config" / "ci.yaml"
        cfg.write_text(f"extends: {ci}\ntestbed: {{name: small}}\n")
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        want = (f"xenobench: Failed to use results directory {disk}/results: its file system has {free} bytes free "
                f"({free / (1 << 20):.1f} MB), below experiments.min_free_mb = 256 MB (268435456 bytes); free space "
                "there, give --results a directory on another file system, or lower experiments.min_free_mb")
        for args in (["testbed", "up"], ["experiment", "run", "pps", "payload-22"]):
            p = _xb(cfg, *args, "--results", str(disk / "results"))
            assert (p.returncode, p.stderr.strip()) == (1, want), (args, p.stderr)
            assert "Traceback" not in p.stderr
            assert _leftovers(prefix, str(disk))["namespaces"] == []  # nothing was brought up
        assert not (disk / "results").exists()

        cfg.write_text(f"extends: {ci}\ntestbed: {{name: small}}\nexperiments: {{min_free_mb: 1}}\n")
        check_results_root(disk / "results", load_config(cfg).section("experiments")["min_free_mb"])  # room enough
        (disk / "results").write_text("a file where the directory goes")
        with pytest.raises(DataError) as e:
            check_results_root(disk / "results" / "fault", 1)
        assert str(e.value) == (f"Failed to use results directory {disk}/results/fault: {disk}/results is not a "
                                "directory (give --results a directory)")
    finally:
        subprocess.run(["umount", str(disk)], check=True)


# --- a fault no retry changes: the point stops at once ------------------------------------------------
def test_a_config_fault_inside_a_trial_stops_the_point_without_point_json(testbed, tmp_path, monkeypatch):
    """A setting the procedure needs is missing (experiments.pps.duration_s, taken out after the
    schema filled it in): the first attempt of the first repetition raises ConfigError, and
    run_point stops there with one line, exit code 2, the LB it started stopped, and no point.json
    (Snakemake's output: the next run measures the point again). The fault table of every error
    type: tests/test_point_stops.py."""
    from xenobench.errors import PointStopped
    from xenobench.layout import ResultsTree
    from xenobench.procedures import run_point
    ex = testbed.cfg.raw["experiments"]
    pps = {k: v for k, v in ex["pps"].items() if k != "duration_s"}
    monkeypatch.setitem(ex, "pps", {**pps, "paired": False, "lbs": ["ebpf"], "payloads": [22]})
    for k, v in (("repetitions", 2), ("max_attempts", 3), ("settle_s", 0), ("cooldown_s", 0)):
        monkeypatch.setitem(ex, k, v)
    point = {"lb": "ebpf", "payload": 22}
    tree = ResultsTree(tmp_path, testbed.cfg.name)
    lines = []
    with pytest.raises(PointStopped) as e:
        run_point(testbed, "pps", point, results_root=tmp_path, progress=lines.append)
    trial = tree.trial("pps", point, 1)
    assert str(e.value) == (
        f"Failed to run pps lb=ebpf payload=22: experiments.pps.duration_s is not set in {testbed.cfg.path} and no "
        f"variable of the point is named 'duration_s' (pps lb=ebpf payload=22 rep 1: not retried, no attempt changes "
        f"it (recorded in {trial.attempt(1).path}); fixed, the same command measures the point again, its completed "
        "repetitions kept)")
    assert e.value.exit_code == 2
    assert not [m for m in lines if "attempt" in m], lines  # no attempt line: the error is the line
    assert sorted(p.name for p in trial.path.glob("attempt-*")) == ["attempt-1"] and not trial.complete
    assert not tree.point_summary("pps", point).exists() and not tree.trial("pps", point, 2).path.exists()
    assert not any(get_lb(k, testbed).running() for k in LB_KINDS)
