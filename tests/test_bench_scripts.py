"""The benchmark scripts (scripts/bench_*.py) are not run by the suite (they take minutes and print
figures), but each must still import against the current code, explain itself with --help and
refuse a bad argument by name (scripts/benchargs.py) before touching the machine."""

import contextlib
import io
import runpy
import sys
from types import SimpleNamespace

import pytest

from xenobench import REPO_ROOT
from xenobench.lb import kinds as lb_kinds

SCRIPTS = sorted((REPO_ROOT / "scripts").glob("bench_*.py"))


def _run(script, *argv):
    """`python SCRIPT ARGV...` in this process (its imports are the suite's, already loaded; a child
    interpreter per call cost seconds): sys.argv and sys.path[0] as the interpreter sets them for a
    script, its output captured; SystemExit's code read as the interpreter reads it (None: 0, a
    message: printed to stderr, 1). The script only gets as far as its argument parser."""
    out, err = io.StringIO(), io.StringIO()
    argv0, path0 = sys.argv, list(sys.path)
    sys.argv, sys.path[:0] = [str(script), *argv], [str(script.parent)]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv, sys.path[:] = argv0, path0
    if isinstance(code, str):
        err.write(code + "\n")
        code = 1
    return SimpleNamespace(returncode=code or 0, stdout=out.getvalue(), stderr=err.getvalue())


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
            1, f"Failed to run the benchmark: LB 'no-such-value' is not one of {', '.join(lb_kinds())}")
    else:
        assert r.returncode == 2, (r.stdout, r.stderr)
        last = r.stderr.splitlines()[-1]
        assert last.startswith(f"{script.name}: error: argument "), r.stderr
        assert "'no-such-value' is not " in last
