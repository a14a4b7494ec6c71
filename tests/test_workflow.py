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
    # 2 update + their 2 capacity points, 3 repetitions
    assert re.search(r"^experiment_point\s+101$", p.stdout, re.M), p.stdout
    assert "config/fips.yaml): 101 measurement points, 303 trials" in p.stderr
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
