"""`snakemake --cores 1 all` end to end on the CI-sized study (config/ci.yaml: the namespace
testbed with every measurement, fewer points): every figure, the tidy CSVs, the report, nothing
left behind, a second run does nothing; and an interrupted run leaves a clean machine and resumes
from the completed trials. Runs under its own namespace prefix (<the suite's prefix>w-, xbtw- by default) so it never touches the
session testbed of the other tests."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import needs_root
from xenobench.compare import agreement
from xenobench.experiments import order, points, repetitions
from xenobench.config import load_config
from xenobench.plots import drawn_by
from xenobench.results import read_tidy

ROOT = Path(__file__).resolve().parent.parent
CFG = "config/ci.yaml"
# a prefix of its own beside the session testbed's (conftest: XENOBENCH_NS_PREFIX, default xbt-), so two
# suites side by side (each with its own XENOBENCH_NS_PREFIX) never share one
PREFIX = os.environ.get("XENOBENCH_NS_PREFIX", "xbt-").rstrip("-")[:4] + "w-"
ENV = {**os.environ, "XENOBENCH_NS_PREFIX": PREFIX}
FIGS = list(drawn_by())  # every figure a definition lists (the workflow's figures rule draws each)
pytestmark = [needs_root, pytest.mark.slow, pytest.mark.e2e]


def snakemake(*args, timeout=1200):
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args, "--configfile", CFG],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def failed_logs(stderr: str) -> str:
    """The end of each log Snakemake names for a failed job (what the job itself printed, which
    Snakemake's own output leaves out), then the end of Snakemake's output."""
    out = []
    for log in dict.fromkeys(re.findall(r"log: (\S+) \(check log file", stderr)):
        f = ROOT / log
        out.append(f"--- {log}:\n" + (f.read_text(errors="replace")[-2500:] if f.exists() else "(missing)"))
    return "\n".join(out + ["--- snakemake:", stderr[-3000:]])


def leftovers() -> list[str]:
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out = [l.split()[0] for l in ns.splitlines() if l.startswith(PREFIX)]
    out += [str(p) for p in Path("/sys/fs/bpf").glob(f"{PREFIX}*")]
    ps = subprocess.run(["pgrep", "-af", f"{PREFIX}|xenobench --config {CFG}"], capture_output=True, text=True).stdout
    out += [l for l in ps.splitlines() if "pytest" not in l and "pgrep" not in l]
    return out


@pytest.fixture(scope="module")
def clean_ci():
    for d in ("results/ci", "figures/ci"):
        shutil.rmtree(ROOT / d, ignore_errors=True)
    yield
    subprocess.run([sys.executable, "-m", "xenobench", "--config", CFG, "testbed", "down"], cwd=ROOT, env=ENV,
                   capture_output=True)


def test_interrupted_run_is_clean_and_resumes(clean_ci):
    """SIGINT (Ctrl-C: the whole process group) in the middle of a point with 2 repetitions."""
    target = "results/ci/trials/rtt/server-xdp/point.json"  # the paired design: every LB per repetition
    rep1 = ROOT / "results/ci/trials/rtt/server-xdp/rep-1/result.json"
    # Ctrl-C as on a terminal: SIGINT's default disposition in the run (a suite started in the
    # background by a non-interactive shell inherits SIGINT ignored, and Python keeps it ignored)
    p = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", target, "--configfile", CFG],
                         cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not rep1.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.1)
    assert rep1.exists(), p.communicate()[0][-3000:]
    os.killpg(p.pid, signal.SIGINT)
    out = p.communicate(timeout=120)[0]
    assert p.returncode != 0, out[-2000:]
    assert not (ROOT / target).exists()
    assert leftovers() == [], out[-2000:]
    before = rep1.stat().st_mtime_ns
    r = snakemake(target)
    assert r.returncode == 0, failed_logs(r.stderr)
    assert rep1.stat().st_mtime_ns == before            # the completed repetition was not re-run
    assert json.loads((ROOT / target).read_text())["repetitions"][0]["repetition"] == 1
    assert leftovers() == []


def test_full_ci_run(clean_ci):
    t0 = time.monotonic()
    r = snakemake("all")
    took = time.monotonic() - t0
    assert r.returncode == 0, failed_logs(r.stderr)
    print(f"snakemake --cores 1 all (config/ci.yaml): {took:.0f} s")
    assert re.search(r"measurement points, \d+ trials", r.stderr)
    assert re.search(r"\[pps\] payload=22 rep 1 attempt 1: ", r.stderr)  # per-trial progress
    for n in FIGS:
        for ext in ("png", "pdf"):
            assert (ROOT / f"figures/ci/{n}.{ext}").stat().st_size > 1000, n
    cfg = load_config(ROOT / CFG)
    results = {e: [json.loads(f.read_text()) for f in (ROOT / "results/ci/trials" / e).glob("*/rep-*/result.json")]
               for e in order()}
    for e in order():
        assert len(results[e]) == len(points(cfg, e)) * repetitions(cfg, e), e
    valid = {e: sum(r["valid"] for r in results[e]) for e in order()}
    n_invalid = sum(len(results[e]) - valid[e] for e in order())
    inv = (ROOT / "results/ci/invalid.csv").read_text().splitlines()
    assert len(inv) == 1 + n_invalid
    # pps in the paired design (config/local.yaml's): per valid repetition every LB's absolute rate, and
    # per point each LB but the reference against it
    pps = read_tidy(ROOT / "results/ci", "pps")
    pl = cfg.section("experiments")["pps"]["lbs"]
    assert len(pps[pps.metric == "rx_pps"]) == valid["pps"] * len(pl)
    assert set(pps[pps.metric == "rate_vs_wire_median"].lb) == set(pl) - {"wire"}
    # loss in the same design at each offered rate: every LB's loss per valid repetition, and the
    # LB's delivered rate against the wire's per point with a valid repetition
    loss = read_tidy(ROOT / "results/ci", "loss")
    ll = cfg.section("experiments")["loss"]["lbs"]
    assert len(loss[loss.metric == "loss_pct"]) == valid["loss"] * len(ll)
    assert loss[loss.metric == "rate_vs_wire_median"].point.nunique() == len(
        {json.dumps(r["point"], sort_keys=True) for r in results["loss"] if r["valid"]})
    # compare and rank measure the same ratios: the run's tables are compared with each other
    # (xenobench.compare.agreement; tests/test_compare_shapes.py checks agreeing and contradicting tables)
    found = agreement(ROOT / "results/ci")
    print("\n".join(f"{f.check}: {f.ok}: {f.text}" for f in found))
    if valid["compare"] and valid["rank"]:
        assert any(f.check.startswith("compare_vs_rank/xenoflow/wire") for f in found), found
    # the LB's NAPI: a pinned thread for rates, inline for RTTs (recorded in every trial's metadata)
    for e, mode in (("pps", "threaded"), ("compare", "threaded"), ("rtt", "inline"), ("rtt_load", "inline")):
        for f in (ROOT / "results/ci/trials" / e).glob("*/rep-*/metadata.json"):
            assert json.loads(f.read_text())["cpu_placement"]["dut_napi"]["mode"] == mode, f
    cmp_ = read_tidy(ROOT / "results/ci", "compare")
    assert len(cmp_[cmp_.metric == "max_pps"]) == valid["compare"] * len(cfg.section("experiments")["compare"]["lbs"])
    summ = read_tidy(ROOT / "results/ci", "rtt_summary")
    med = summ[summ.metric == "rtt_median_us"]
    # one summary per LB and repetition: the paired rtt trials hold every LB of config/ci.yaml's rtt.lbs
    # rtt_load's capacity trials (capacity_from self) are rows of rtt_capacity, never of the RTT tables
    n_cap = sum(r["valid"] for r in results["rtt_load"] if r["point"]["level"] == "max")
    assert len(med) == valid["rtt"] * len(cfg.section("experiments")["rtt"]["lbs"]) + valid["rtt_load"] - n_cap
    assert len(read_tidy(ROOT / "results/ci", "rtt_capacity")) == n_cap > 0
    # update: every valid trial's cycles and bursts, one burst per change rate (0 the reference)
    assert valid["update"] > 0, "\n".join(inv)  # why every update trial was invalid
    ub = read_tidy(ROOT / "results/ci", "update_burst")
    u = cfg.section("experiments")["update"]
    assert len(ub[ub.metric == "rx_pps"]) == valid["update"] * len(set(u["change_rates"]) | {0})
    upd = read_tidy(ROOT / "results/ci", "update")
    assert len(upd[upd.metric == "remove_control_ms"]) == valid["update"] * u["cycles"]
    # rank: a row per block of every valid repetition (rounds x LBs), the ranking over them
    rk = cfg.section("experiments")["rank"]
    assert valid["rank"] > 0, "\n".join(inv)  # why every rank trial was invalid
    rb = read_tidy(ROOT / "results/ci", "rate_blocks")
    # every block a valid repetition ran is a row, those of the rounds the machine rule left out too (a
    # repetition runs until it keeps `rounds`); the kept ones are `rounds` a repetition
    ran = sum(r["outputs"]["rounds_run"] for r in results["rank"] if r["valid"])
    assert len(rb[rb.metric == "block_rx_pps"]) == ran * len(rk["lbs"])
    kept = rb[rb.metric == "block_round_kept"]
    assert kept.value.sum() == valid["rank"] * rk["rounds"] * len(rk["lbs"])
    samples = read_tidy(ROOT / "results/ci", "rtt_samples")
    n = summ[summ.metric == "n"]
    assert len(samples) == n.value.sum()
    report = (ROOT / "results/ci/report.md").read_text()
    for n in FIGS:
        assert f"figures/ci/{n}.png" in report
    assert f"({sum(valid.values())} valid, {n_invalid} invalid)" in report
    assert "## Agreement of this run's tables" in report
    assert leftovers() == []
    again = snakemake("all", "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]
