"""The benchmark scripts (scripts/bench_*.py) are not run by the suite (they take minutes and print
figures), but each must still import against the current code, explain itself with --help and
refuse a bad argument by name (scripts/benchargs.py) before touching the machine."""

import subprocess
import sys

import pytest

from xenobench import REPO_ROOT
from xenobench.lb import KINDS as LB_KINDS

SCRIPTS = sorted((REPO_ROOT / "scripts").glob("bench_*.py"))


def _run(script, *argv):
    return subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT)


def test_every_benchmark_script_is_listed():
    assert len(SCRIPTS) >= 9


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_and_a_bad_first_argument(script):
    r = _run(script, "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: {script.name} [-h]")
    assert "Benchmark" in r.stdout  # the docstring is the description
    r = _run(script, "no-such-value")
    if script.name == "bench_search.py":  # LB: a name, checked against the LBs
        assert (r.returncode, r.stderr.strip()) == (
            1, f"Failed to run the benchmark: LB 'no-such-value' is not one of {', '.join(LB_KINDS)}")
    else:
        assert r.returncode == 2, (r.stdout, r.stderr)
        last = r.stderr.splitlines()[-1]
        assert last.startswith(f"{script.name}: error: argument "), r.stderr
        assert "'no-such-value' is not " in last
