"""A fault no retry can change stops its point at the first occurrence (xenobench.trials): every
error type of xenobench.errors raised inside an attempt, judged by its own `deterministic`; the
attempt is recorded, no result.json is written, the point's later repetitions are not run, and the
same call after the fix resumes. No testbed: run_trial on a config alone, the machine rule off."""

import json

import pytest

from xenobench import errors
from xenobench.config import load_config
from xenobench.layout import ResultsTree
from xenobench.procedures import repeat
from xenobench.search import TurnError
from xenobench.trials import Validity, run_trial

#: every error type the harness raises on purpose, from its owner's module
ERROR_TYPES = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.XenobenchError)]
#: what a deterministic fault of each kind says (the raisers' shape: the fault and its fix)
MESSAGES = {
    errors.ConfigError: "Failed to run pps lb=ebpf payload=22: experiments.pps.duration_s is not set in config/ci.yaml",
    errors.BackendsError: "Failed to load backends config/gone.json: No such file or directory",
    errors.GeneratorRefused: "Failed to attach xdpgen: Operation not permitted; fix: traffic.xdpgen.driver: auto",
    errors.ProgramRejected: "Failed to load ebpf_baseline/lb.bpf.o: the verifier rejected it (R1 invalid mem access)",
}


class ConfigOnly:
    """What run_trial reads of a testbed when no interface is measured: its config."""

    def __init__(self, cfg):
        self.cfg = cfg


@pytest.fixture(scope="module")
def testbed():
    return ConfigOnly(load_config("config/ci.yaml"))


def _run(testbed, trial, procedure, lines, repetition=1):
    return run_trial(testbed, "pps", {"x": 1}, repetition, trial, procedure, ifaces=[], max_attempts=3, settle_s=0,
                     cooldown_s=0, progress=lines.append, judge_machine=False)


def _raises(e):
    calls = []

    def procedure(ctx):
        calls.append(ctx.attempt.path.name)
        raise e
    return procedure, calls


def test_the_fault_table_covers_the_deterministic_types():
    assert {c for c in ERROR_TYPES if c.deterministic} == {*MESSAGES, errors.PointStopped}


@pytest.mark.parametrize("cls", ERROR_TYPES, ids=[c.__name__ for c in ERROR_TYPES])
def test_a_deterministic_fault_is_one_attempt_and_one_line_a_flaky_one_is_retried(testbed, tmp_path, cls):
    msg = MESSAGES.get(cls, f"Failed to do something: a {cls.__name__}")
    trial = ResultsTree(tmp_path, "ci").trial("pps", {"x": 1}, 1)
    procedure, calls = _raises(cls(msg))
    lines = []
    if not cls.deterministic:
        res = _run(testbed, trial, procedure, lines)
        assert calls == ["attempt-1", "attempt-2", "attempt-3"] and res["valid"] is False
        assert [a["reasons"] for a in res["attempts"]] == [[f"procedure_completed: {msg}"]] * 3
        return
    with pytest.raises(errors.PointStopped) as e:
        _run(testbed, trial, procedure, lines)
    assert calls == ["attempt-1"] and lines == []  # the error is the one line
    if cls is errors.PointStopped:  # a nested trial's stop (a search's) is passed on as it is
        assert str(e.value) == msg
    else:
        assert str(e.value) == (f"{msg} (pps x=1 rep 1: not retried, no attempt changes it (recorded in "
                                f"{trial.attempt(1).path}); fixed, the same command measures the point again, "
                                "its completed repetitions kept)")
    assert e.value.exit_code == cls.exit_code and "\n" not in str(e.value)
    assert not trial.complete and sorted(p.name for p in trial.path.glob("attempt-*")) == ["attempt-1"]
    v = json.loads(trial.attempt(1).validity.read_text())
    assert (v["valid"], v["reasons"]) == (False, [f"procedure_completed: {msg}"])
    assert json.loads(trial.attempt(1).outputs.read_text())["deterministic"] is True


def test_a_deterministic_fault_inside_a_search_turn_stops_the_point(testbed, tmp_path):
    """The paired search runs its trials in threads and raises TurnError with what a trial raised:
    the fault behind it decides."""
    inner = errors.BackendsError(MESSAGES[errors.BackendsError])
    trial = ResultsTree(tmp_path, "ci").trial("pps", {"x": 1}, 1)
    procedure, calls = _raises(TurnError("ebpf", 3, inner, ["wire"]))
    with pytest.raises(errors.PointStopped) as e:
        _run(testbed, trial, procedure, [])
    assert calls == ["attempt-1"] and str(e.value).startswith(f"{inner} (pps x=1 rep 1: not retried")
    flaky, calls = _raises(TurnError("ebpf", 3, errors.TrafficError("Failed to start xdpgen: not sending"), []))
    assert _run(testbed, ResultsTree(tmp_path, "ci").trial("pps", {"x": 1}, 2), flaky, [])["valid"] is False
    assert len(calls) == 3


def test_the_point_stops_and_the_same_call_resumes_after_the_fix(testbed, tmp_path):
    """Repetition 2 meets the missing backends file: repetition 3 is not run; once the file is
    there, repetition 1 is kept, 2 measured anew (its stopped attempt gone), 3 measured."""
    tree = ResultsTree(tmp_path, "ci")
    point = {"x": 1}
    missing = tmp_path / "backends.json"
    ran = []

    def procedure(ctx):
        ran.append((ctx.repetition, ctx.attempt.path.name))
        if ctx.repetition == 2 and not missing.exists():
            raise errors.BackendsError(f"Failed to load backends {missing}: No such file or directory")
        return {"rx": 1}, Validity()

    def run(r, metadata):
        run_trial(testbed, "pps", point, r, tree.trial("pps", point, r), procedure, ifaces=[], max_attempts=3,
                  settle_s=0, cooldown_s=0, progress=lambda m: None, judge_machine=False, metadata=metadata)

    def fresh(r):
        return not tree.trial("pps", point, r).complete

    with pytest.raises(errors.PointStopped):
        repeat(tree, "pps", point, 3, 3, fresh, run)
    assert ran == [(1, "attempt-1"), (2, "attempt-1")]
    assert tree.trial("pps", point, 1).complete and not tree.trial("pps", point, 2).complete
    assert not tree.trial("pps", point, 3).path.exists()
    done = tree.trial("pps", point, 1).result.read_bytes()
    missing.write_text("{}")
    assert repeat(tree, "pps", point, 3, 3, fresh, run) == (3, None)
    assert ran[2:] == [(2, "attempt-1"), (3, "attempt-1")]
    assert tree.trial("pps", point, 1).result.read_bytes() == done
    assert [a["attempt"] for a in tree.trial("pps", point, 2).read_result()["attempts"]] == [1]
