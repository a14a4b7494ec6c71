"""What a person reads while a study runs: each valid trial's value (the kind's headline), the
study's trials done and time left, and the machine-readable `testbed check --json` and
`deploy --json`."""

import json
import os
import time

import pytest
from click.testing import CliRunner

from xenobench import measure
from xenobench.cli import main
from xenobench.cli.experiment_cmd import StudyProgress
from xenobench.config import DEFAULT_CONFIG, load_config
from xenobench.experiments import plan
from xenobench.layout import ResultsTree
from xenobench.trials import _headline

# (kind, a valid trial's outputs, the line's value)
HEADLINES = [
    ("rate", {"rx_pps": 1234567.0, "loss_pct": 0.125}, "rx 1.235 Mpps, loss 0.12 %"),
    ("rate", {"rx_pps": 2e6, "loss_pct": None}, "rx 2.000 Mpps"),
    ("latency", {"probe": {"median_us": 45.25}}, "RTT median 45.2 us"),
    ("latency", {"probe": {"median_us": 50.0}, "background_pps": 250000.0}, "RTT median 50.0 us under 250 kpps"),
    ("latency", {"paired": True, "blocks": [{"lb": "none", "probe": {"median_us": 40.0}},
                                            {"lb": "xenoflow", "probe": {"median_us": 45.0}},
                                            {"lb": "none", "probe": {"median_us": 42.0}},
                                            {"lb": "xenoflow", "probe": {"median_us": 47.0}}]},
     "RTT median none 41.0, xenoflow 46.0 us"),
    ("search", {"n_trials": 12, "goals": [{"name": "NDR", "lower_bound_pps": 1.5e6},
                                          {"name": "PDR", "lower_bound_pps": 1.75e6}]},
     "NDR 1.500 Mpps, PDR 1.750 Mpps (12 search trials)"),
    ("search", {"n_trials": 3, "goals": [{"name": "NDR", "lower_bound_pps": None}]}, "no bound found (3 search trials)"),
    ("update", {"cycles": [{"remove": {"control_s": 0.002}, "add": {"control_s": 0.001}, "loss_pct": 0.5},
                           {"remove": {"control_s": 0.004}, "add": {"control_s": 0.003}, "loss_pct": 1.5}]},
     "remove 3.00 ms, add 2.00 ms, loss 1.00 % over 2 cycle(s)"),
    ("rank", {"ranking": [{"lb": "xenoflow", "vs": "wire", "median": 0.9712, "ci_low": 0.95, "ci_high": 0.99}]},
     "xenoflow/wire 0.971 [0.950, 0.990]"),
]


@pytest.mark.parametrize("kind,outputs,line", HEADLINES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(HEADLINES)])
def test_every_kind_says_its_value(kind, outputs, line):
    assert measure.KINDS[kind].headline(outputs) == line
    assert _headline(measure.KINDS[kind].headline, outputs) == f": {line}"


def test_outputs_without_the_value_give_a_plain_line():
    """An attempt whose outputs lack what its kind reads (an error recorded instead) adds nothing."""
    for kind, m in measure.KINDS.items():
        assert _headline(m.headline, {"error": "x"}) == "", kind
    assert _headline(None, {"rx_pps": 1.0}) == ""


def test_study_progress_counts_trials_and_time_left(tmp_path):
    cfg = load_config(DEFAULT_CONFIG.parent / "ci.yaml")
    trials = plan(cfg)
    tree = ResultsTree(tmp_path, cfg.name)
    study = StudyProgress(cfg, tmp_path)
    assert study.line() == f"[study] 0/{len(trials)} trials done, {len(trials)} to go (time left: after the first trial)"
    done = [t for t in trials if t.experiment == "pps"][:2]
    now = time.time()
    for t, seconds in zip(done, (4.0, 6.0)):  # wall time: params.json written at the start, result.json at the end
        d = tree.trial(t.experiment, t.point, t.repetition)
        d.path.mkdir(parents=True)
        d.params.write_text("{}")
        d.result.write_text("{}")
        os.utime(d.params, (now - seconds, now - seconds))
        os.utime(d.result, (now, now))
    left = len(trials) - 2
    eta = 5.0 * left  # the other experiments count the mean of all: 5 s
    m, s = divmod(round(eta), 60)
    assert study.line() == (f"[study] 2/{len(trials)} trials done, {left} to go: about {m} min {s:02d} s left at the "
                            "mean trial time so far (pps 5.0 s)")


class _Checked:
    def check(self):
        return [("client reaches fips2", True, "rtt 0.2 ms"), ("VIP frames reach fips3", False, "timeout")]


def test_testbed_check_json(monkeypatch):
    monkeypatch.setattr("xenobench.cli.Context.testbed", lambda self, root=True: _Checked())
    r = CliRunner().invoke(main, ["--config", str(DEFAULT_CONFIG), "testbed", "check", "--json"])
    assert r.exit_code == 1
    assert json.loads(r.stdout) == [{"check": "client reaches fips2", "ok": True, "detail": "rtt 0.2 ms"},
                                    {"check": "VIP frames reach fips3", "ok": False, "detail": "timeout"}]
