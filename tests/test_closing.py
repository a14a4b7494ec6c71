"""The closing summary (xenobench.closing) on fixture results trees: per planned experiment its valid
and invalid trials, the commonest causes; a run fails when a planned experiment has no valid trial
or one cause invalidated most of its trials; `xenobench experiment summary --check` says so in one
line and exits non-zero (the workflow's onsuccess: tests/test_workflow.py)."""

import pytest
from click.testing import CliRunner

from xenobench.cli import main
from xenobench.closing import closing, judge, summary_lines
from xenobench.config import load_config
from xenobench.experiments import order, points
from xenobench.layout import ResultsTree, point_id

SHORT = "rate_reached: achieved 10 of 100 pps"
LONG = "counters_read: " + "fips2:eth0 unreadable " * 10


def write_trial(tree: ResultsTree, experiment: str, point: dict, rep: int, reasons: list[str]) -> None:
    """A result.json as run_trial writes it: valid when `reasons` is empty."""
    t = tree.trial(experiment, point, rep)
    t.path.mkdir(parents=True)
    t.write_result({"experiment": experiment, "point": point, "repetition": rep, "valid": not reasons,
                    "attempts": [{"attempt": 1, "valid": not reasons, "checks": {}, "reasons": reasons}],
                    "chosen_attempt": 1, "outputs": {}})


PPS, RTT = {"payload": 22}, {"server": "xdp"}
PLANNED = [("pps", point_id(PPS)), ("rtt", point_id(RTT))]
# (case, trials: (experiment, point, rep, reasons), why the run fails)
CASES = [
    ("all valid", [("pps", PPS, 1, []), ("rtt", RTT, 1, [])], []),
    ("an experiment all invalid", [("pps", PPS, 1, []), ("pps", PPS, 2, []), ("pps", PPS, 3, []),
                                   ("rtt", RTT, 1, ["prober_alive: died"])],
     ["experiment rtt has no valid trial (1 invalid)"]),
    ("an experiment without a trial", [("pps", PPS, 1, [])], ["experiment rtt has no valid trial (0 invalid)"]),
    ("one cause on most trials", [("pps", PPS, r, [SHORT] if r < 4 else []) for r in (1, 2, 3, 4)]
     + [("rtt", RTT, 1, [])], [f"rate_reached invalidated 3 of 5 trials (e.g. {SHORT})"]),
    ("one cause on half the trials", [("pps", PPS, r, [SHORT] if r < 3 else []) for r in (1, 2, 3)]
     + [("rtt", RTT, 1, [])], []),
    ("most trials invalid, no cause on most", [("pps", PPS, 1, [SHORT]), ("pps", PPS, 2, ["lb_ebpf_alive: died"]),
                                               ("pps", PPS, 3, []), ("rtt", RTT, 1, [SHORT.replace("10", "12")]),
                                               ("rtt", RTT, 2, [])], []),
    ("an unplanned point's trials are not counted", [("pps", PPS, 1, []), ("rtt", RTT, 1, []),
                                                     *[("pps", {"payload": 64}, r, [SHORT]) for r in (1, 2, 3)]], []),
]


@pytest.mark.parametrize("case,trials,failed", CASES, ids=[c[0] for c in CASES])
def test_judge(tmp_path, case, trials, failed):
    tree = ResultsTree(tmp_path, "ci")
    for e, pt, rep, reasons in trials:
        write_trial(tree, e, pt, rep, reasons)
    assert judge(closing(tree.dir, PLANNED)) == failed


def test_the_summary_lines(tmp_path):
    tree = ResultsTree(tmp_path, "ci")
    for rep, reasons in ((1, [SHORT, LONG]), (2, [SHORT]), (3, [])):
        write_trial(tree, "pps", PPS, rep, reasons)
    c = closing(tree.dir, PLANNED)
    assert (c.counts, dict(c.causes), c.trials) == ({"pps": [1, 2], "rtt": [0, 0]},
                                                    {"rate_reached": 2, "counters_read": 1}, 3)
    assert summary_lines(c) == [
        f"xenobench: closing summary of {tree.dir}: 2 experiments planned, 3 trials (1 valid, 2 invalid)",
        "  pps     1 valid     2 invalid",
        "  rtt     0 valid     0 invalid",
        "  invalid trials by cause (results in invalid.csv, the report):",
        f"     2 rate_reached (e.g. {SHORT})",
        f"     1 counters_read (e.g. {' '.join(LONG.split())[:97]}...)",
    ]


def test_a_cause_counts_once_per_trial(tmp_path):
    """Two reasons of one check (a paired design's blocks) are one trial of that cause."""
    tree = ResultsTree(tmp_path, "ci")
    write_trial(tree, "pps", PPS, 1, ["lb_checks: block 1 short", "lb_checks: block 3 short"])
    write_trial(tree, "pps", PPS, 2, [])
    write_trial(tree, "rtt", RTT, 1, [])
    c = closing(tree.dir, PLANNED)
    assert (dict(c.causes), c.examples, judge(c)) == ({"lb_checks": 1}, {"lb_checks": "lb_checks: block 1 short"}, [])


def _ci_tree(tmp_path, invalid_experiment=None) -> ResultsTree:
    """A valid trial for every point config/ci.yaml plans (the owner's list), those of one
    experiment invalid."""
    cfg = load_config("config/ci.yaml")
    tree = ResultsTree(tmp_path, "ci")
    for e in order():
        for p in points(cfg, e):
            write_trial(tree, e, p, 1, [f"generator_ok: refused ({e})"] if e == invalid_experiment else [])
    return tree


def test_the_command_passes_a_run_that_measured(tmp_path):
    tree = _ci_tree(tmp_path)
    r = CliRunner().invoke(main, ["--config", "config/ci.yaml", "experiment", "summary", str(tree.dir), "--check"])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0].startswith(f"xenobench: closing summary of {tree.dir}: {len(order())} experiments")


def test_the_command_fails_a_run_that_measured_nothing_of_an_experiment(tmp_path):
    tree = _ci_tree(tmp_path, invalid_experiment="rtt")
    n = len(points(load_config("config/ci.yaml"), "rtt"))
    args = ["--config", "config/ci.yaml", "experiment", "summary", str(tree.dir)]
    assert CliRunner().invoke(main, args).exit_code == 0  # without --check: the summary only
    r = CliRunner().invoke(main, [*args, "--check"])
    assert r.exit_code == 1
    assert r.output.splitlines()[-1] == (
        f"xenobench: Failed to measure the study of {tree.dir}: experiment rtt has no valid trial ({n} invalid): fix "
        "what the causes above name, then `xenobench experiment retry-invalid` and run the study again (its valid "
        "trials kept)")
    assert f"  {n:4} generator_ok (e.g. generator_ok: refused (rtt))" in r.output.splitlines()
