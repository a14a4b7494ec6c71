"""The workflow plans for both testbeds without touching anything (snakemake -n)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def dry_run(*args):
    return subprocess.run([*SNAKEMAKE, "-n", "--forceall", "all", *args], cwd=ROOT, capture_output=True, text=True)


def test_dry_run_default_config_plans_the_testbed_check():
    p = dry_run()
    assert p.returncode == 0, p.stderr
    assert "testbed_check" in p.stdout and "results/local/testbed_check.txt" in p.stdout


def test_dry_run_thesis_testbed_uses_only_its_own_config():
    p = dry_run("--configfile", "config/fips.yaml")
    assert p.returncode == 0, p.stderr
    assert "results/fips/testbed_check.txt" in p.stdout and "results/local" not in p.stdout
    # the thesis plan with XenoFlow and eBPF (Katran listed, left out without its L3 hop: config/fips.yaml
    # sets no gateway_mac): 44 pps + 11 loss + 6 ndr_pdr + 1 rtt (paired) + 33 rtt_load (6 levels x 4
    # splits + no background + a capacity point per LB and split, capacity_from self) + 2 compare +
    # 2 update + their 2 capacity points + 15 distribution (3 LBs x 5 populations), 3 repetitions
    assert re.search(r"^experiment_point\s+116$", p.stdout, re.M), p.stdout
    assert "config/fips.yaml): 116 measurement points, 348 trials" in p.stderr
    assert "results/fips/trials/pps/lb-ebpf_payload-1024/point.json" in p.stdout
    assert "results/fips/report.md" in p.stdout


def test_bad_config_stops_the_workflow_with_the_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "config/local.yaml").read_text().replace('"02:00:00:00:03:00"', '"02:00:00:00:03"'))
    p = dry_run("--configfile", str(bad))
    assert p.returncode != 0
    assert "nodes.fips3.interfaces[0].mac: '02:00:00:00:03' is not a MAC address" in p.stdout + p.stderr


def test_dry_run_plans_the_html_report_item():
    p = dry_run("--configfile", "config/ci.yaml")
    assert p.returncode == 0, p.stderr
    assert "results/ci/report.md" in p.stdout and "results/ci/report.html" in p.stdout


# a typo in what the user wrote, however it reaches Snakemake: (arguments, files to write, the one line)
TYPO_CASES = [
    (["--configfile", "config/ci.yaml", "--config", "experiments={pps: {rate_ppz: 1}}"], {},
     r"xenobench: Failed to load config --config: experiments\.pps\.rate_ppz: unknown key \(known here: [^)]*\); "
     r"did you mean 'rate_pps'\?"),
    (["--configfile", "config/ci.yaml", "{tmp}/second.yaml"], {"second.yaml": "experiments:\n  rtt: {probs: 3}\n"},
     r"xenobench: Failed to load config {tmp}/second\.yaml: experiments\.rtt\.probs: unknown key \(known here: "
     r"[^)]*\); did you mean 'probes'\?"),
    (["--configfile", "{tmp}/mine.yaml", "--config", "experiments={repetitions: 1}"],
     {"mine.yaml": f"extends: {ROOT}/config/ci.yaml\nexperiments:\n  setle_s: 1\n"},
     r"xenobench: Failed to load config {tmp}/mine\.yaml: experiments\.setle_s: unknown key \(known here: [^)]*\); "
     r"did you mean 'settle_s'\?"),
]


@pytest.mark.parametrize("args,files,expect", TYPO_CASES, ids=["--config", "second --configfile", "first file"])
def test_config_typo_names_what_the_user_wrote(tmp_path, args, files, expect):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    p = dry_run(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert p.returncode != 0
    lines = [x for x in (p.stdout + p.stderr).splitlines() if "Failed to" in x]
    assert len(lines) == 1 and re.fullmatch(expect.replace("{tmp}", re.escape(str(tmp_path))), lines[0]), lines
    assert ".xenobench/config" not in p.stdout + p.stderr and "Traceback" not in p.stderr


# --- how a run ends (rules/common.smk: closing_summary, interrupt_in_one_line) -----------------------
def _throwaway(tmp_path, body: str) -> Path:
    """A workflow of its own in tmp_path: `body`'s hooks around one job that waits for `go`."""
    (tmp_path / "Snakefile").write_text(
        "import subprocess, sys\nfrom pathlib import Path\n\n"
        "rule all:\n    input: 'done.txt'\n\n"
        "rule job:\n    output: 'done.txt'\n"
        "    shell: 'touch started; while [ ! -e go ]; do sleep 0.05; done; touch {output}'\n\n" + body)
    return tmp_path


def test_a_sys_exit_in_onsuccess_is_snakemakes_exit_status_its_locks_released(tmp_path):
    """What closing_summary relies on: the summary's own exit status ends Snakemake's, its line last."""
    from tests.test_closing import PPS, write_trial
    from xenobench.layout import ResultsTree
    tree = ResultsTree(tmp_path / "results", "ci")
    write_trial(tree, "pps", PPS, 1, ["generator_ok: refused"])
    d = _throwaway(tmp_path, "onsuccess:\n"
                   f"    r = subprocess.run([sys.executable, '-m', 'xenobench', '--config', '{ROOT}/config/ci.yaml', "
                   f"'experiment', 'summary', '{tree.dir}', '--check'])\n"
                   "    if r.returncode:\n        sys.exit(r.returncode)\n")
    (d / "go").touch()
    p = subprocess.run([*SNAKEMAKE, "--cores", "1", "all"], cwd=d, capture_output=True, text=True)
    assert p.returncode == 1, p.stderr[-2000:]
    assert p.stderr.splitlines()[-1].startswith(f"xenobench: Failed to measure the study of {tree.dir}: experiment pps "
                                                "has no valid trial (1 invalid); experiment loss has no valid trial")
    assert not list((d / ".snakemake" / "locks").glob("*")), "the run left its locks"


def test_an_interrupted_run_says_one_line_and_its_onerror_runs(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while a job runs: the
    last line is the one saying the same command resumes; Snakemake's account is in the log."""
    import os
    import signal
    import time
    d = _throwaway(tmp_path, "onstart:\n"
                   "    from xenobench.closing import quiet_interrupt\n"
                   "    quiet_interrupt(Path('logs/interrupted.log'), 'xenobench: interrupted: the one line')\n\n"
                   "onerror:\n    Path('onerror-ran').touch()\n")
    p = subprocess.Popen([*SNAKEMAKE, "--cores", "1", "all"], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not (d / "started").exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 1
    assert out.splitlines()[-1] == "xenobench: interrupted: the one line", out[-2000:]
    for said in ("Terminating processes on user request", "Error in rule job", "WorkflowError"):
        assert said not in out and said in (d / "logs" / "interrupted.log").read_text(), said
    assert (d / "onerror-ran").exists() and not (d / "done.txt").exists()
