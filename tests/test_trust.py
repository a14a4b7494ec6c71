"""Trust in every trial: an impossible value, a malformed, duplicated or stale trial
never becomes a number in a figure, and each is refused by name (file, row or key, value, rule)
through the command line a user runs: `xenobench experiment aggregate`, `experiment report`,
`plot`, `compare`."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner

from xenobench.cli import main
from xenobench.errors import DataError
from xenobench.results import COLUMNS, read_tidy, row, write_tidy

from .test_aggregate_report import _probes, _trial

PPS = ("pps", "lb-xenoflow_payload-22", {"lb": "xenoflow", "payload": 22})
RTT = ("rtt", "lb-none_server-xdp", {"lb": "none", "server": "xdp"})


def pps_trial(r, rep=1, **outputs):
    exp, pid, pt = PPS
    o = {"payload": 22, "rx_pps": 190000.0, "rx_cv_pct": 0.5, "requested_pps": 0,
         "generator": {"achieved_pps": 190010.0, "valid": True}, **outputs}
    return _trial(r, exp, pid, rep, pt, o)


def loss_trial(r, loss):
    return _trial(r, "loss", "lb-xenoflow_rate_pps-50000", 1, {"lb": "xenoflow", "rate_pps": 50000},
                  {"payload": 22, "rx_pps": 49000.0, "loss_pct": loss, "requested_pps": 50000,
                   "generator": {"achieved_pps": 50000.0, "valid": True}})


def rtt_trial(r, records: list[str] | None = None, rtts=(20000, 21000)):
    exp, pid, pt = RTT
    d = _trial(r, exp, pid, 1, pt, {"server": "xdp", "probe": {"n": len(rtts), "lost": 0}})
    _probes(d, list(rtts))
    if records is not None:
        (d / "attempt-1" / "probes.jsonl").write_text("".join(x + "\n" for x in records))
    return d


def edit_result(d, change):
    f = d / "result.json"
    res = json.loads(f.read_text())
    res = change(res)
    f.write_text(res if isinstance(res, str) else json.dumps(res))
    return f


def run(argv):
    r = CliRunner().invoke(main, argv)
    assert r.exception is None or isinstance(r.exception, SystemExit), f"traceback:\n{r.output}"
    return r


def one_line(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and lines, r.stderr
    return lines[-1]


# --- item 3: impossible values (one rule per metric, results.METRICS) ----------------------------------
# (id, make the trial tree under r, expected error after "xenobench: ")
IMPOSSIBLE = [
    ("loss-150", lambda r: loss_trial(r, 150.0),
     r"Failed to check rows of trial {r}/trials/loss/lb-xenoflow_rate_pps-50000/rep-1/result.json: row from "
     r"trials/loss/lb-xenoflow_rate_pps-50000/rep-1: metric loss_pct: value 150 is out of range: must be >= -10 "
     r"and <= 100"),
    ("loss-minus-40", lambda r: loss_trial(r, -40.0), r".*metric loss_pct: value -40 is out of range: must be >= -10"),
    ("rx-negative", lambda r: pps_trial(r, rx_pps=-5e6),
     r"Failed to check rows of trial {r}/trials/pps/lb-xenoflow_payload-22/rep-1/result.json: row from "
     r"trials/pps/lb-xenoflow_payload-22/rep-1: column measured_pps: -5e\+06 is out of range \(must be >= 0"),
    ("rx-1e15", lambda r: pps_trial(r, rx_pps=1e15, generator={"achieved_pps": 2e15}),
     r".*column offered_pps: 2e\+15 is out of range \(must be >= 0 and <= 1e\+12\)"),
    ("rx-3x-offered", lambda r: pps_trial(r, rx_pps=570000.0),
     r".*column measured_pps: 570000 is out of range \(must be >= 0 and <= 1e\+12 and <= offered_pps x 1.5 \+ 10\)"),
    ("rtt-negative", lambda r: rtt_trial(r, rtts=(20000, -5000)),
     r".*row from trials/rtt/lb-none_server-xdp/rep-1/attempt-1/probes.jsonl:1: metric rtt_us: value -5 is out "
     r"of range: must be > 0 and < 6e\+07"),
    ("rtt-1e27", lambda r: rtt_trial(r, rtts=(20000, 10**30)),
     r".*probes.jsonl:1: metric rtt_us: value 1e\+27 is out of range: must be > 0 and < 6e\+07"),
    ("valid-string", lambda r: edit_result(pps_trial(r), lambda x: {**x, "valid": "false"}),
     r"Failed to read trial result {r}/trials/pps/lb-xenoflow_payload-22/rep-1/result.json: valid: \"false\" is "
     r"not true or false \(a JSON boolean\)"),
]


@pytest.mark.parametrize("name,make,expect", IMPOSSIBLE, ids=[c[0] for c in IMPOSSIBLE])
def test_aggregate_refuses_impossible_values(tmp_path, name, make, expect):
    r = tmp_path / "local"
    make(r)
    res = run(["experiment", "aggregate", str(r)])
    assert res.exit_code == DataError.exit_code, res.output
    assert re.fullmatch("xenobench: " + expect.format(r=re.escape(str(r))) + ".*", one_line(res)), one_line(res)
    assert not list(r.glob("*.csv")), "nothing written from a refused tree"


# the rows below are written without the update experiments' optional column (a file from before it,
# read with it empty: results.OPTIONAL)
TIDY = ",".join(c for c in COLUMNS if c != "changes_per_s") + "\n"


@pytest.mark.parametrize("line,expect", [
    ("t,pps,lb-xenoflow_payload-22,xenoflow,,,22,64,1000,1000,1,,,loss_pct,150,%,f", "line 2: metric loss_pct: value 150 is out of range: "
                                                           "must be >= -10 and <= 100"),
    ("t,pps,lb-xenoflow_payload-22,xenoflow,,,22,64,1000,3000,1,,,rx_pps,3000,packets/s,f", "line 2: column measured_pps: 3000 is out of range "
                                                                 r"\(must be >= 0 and <= 1e\+12 and <= offered_pps"),
    ("t,pps,lb-xenoflow_payload-22,xenoflow,,,22,64,1000,,1,,,rx_pps,3000,packets/s,f", "line 2: metric rx_pps: value 3000 is out of range "
                                                             r"\(offered_pps 1000\): must be"),
    ("t,pps,lb-xenoflow_payload-22,xenoflow,,,22,64,,,1,,,rx_pps,-1,packets/s,f", "line 2: metric rx_pps: value -1 is out of range"),
    ("t,pps,lb-xenoflow_payload-22,xenoflow,,,22,64,,,0,,,rx_pps,1,packets/s,f", r"line 2: column repetition: 0 is out of range \(must be >= 1\)"),
])
def test_read_tidy_refuses_impossible_values_plot_and_compare_too(tmp_path, line, expect):
    """read_tidy is what plot, report, compare and the notebooks read through."""
    kind = "loss" if "loss_pct" in line else "pps"
    f = tmp_path / f"{kind}.csv"
    f.write_text(TIDY + line + "\n")
    with pytest.raises(DataError, match=f"Failed to read tidy results {re.escape(str(f))}: {expect}"):
        read_tidy(tmp_path, kind)
    r = run(["compare", str(tmp_path)])
    assert r.exit_code == 1 and f"Failed to read tidy results {f}: " in one_line(r), r.output
    r = run(["plot", str(tmp_path), "--out", str(tmp_path / "fig")])
    assert r.exit_code == 1 and f"skipped (Failed to read tidy results {f}: line 2: " in r.stderr, r.output


def test_write_tidy_refuses_an_impossible_value_and_writes_nothing(tmp_path):
    bad = row(testbed="t", experiment="rtt", point="server-xdp", lb="x", metric="rtt_median_us", value=-3.0,
              unit="us", source="s")
    with pytest.raises(DataError, match=r"line 2: metric rtt_median_us: value -3 is out of range: must be > 0"):
        write_tidy("rtt_summary", [bad], tmp_path)
    assert not (tmp_path / "rtt_summary.csv").exists()
    ok = [row(testbed="t", experiment="rtt", point="p", lb="x", metric="rtt_vs_none_median_us", value=-3.0, unit="us", source="s"),
          row(testbed="t", experiment="rtt", point="p", lb="x", metric="loss_pct", value=-0.2, unit="%", source="s")]  # a difference; skew
    write_tidy("rtt_paired", ok, tmp_path)


# --- item 6: malformed result trees end in one line, never a traceback --------------------------------
def _result(change):
    return lambda r: edit_result(pps_trial(r), change)


def _deep(r):
    return edit_result(pps_trial(r), lambda x: "[" * 10**5 + "]" * 10**5)


def _file(r, rel, text):
    f = r / rel
    f.write_text(text)


REP1 = "trials/pps/lb-xenoflow_payload-22/rep-1"
RTT1 = "trials/rtt/lb-none_server-xdp/rep-1"
# (id, make(r), commands, expected line; {r}: the results dir)
MALFORMED = [
    ("result-list", _result(lambda x: []), "both",
     f"Failed to read trial result {{r}}/{REP1}/result.json: \\(top level\\): \\[\\] is not an object"),
    ("result-null", _result(lambda x: None), "both",
     f"Failed to read trial result {{r}}/{REP1}/result.json: \\(top level\\): null is not an object"),
    ("result-empty", _result(lambda x: {}), "both",
     f"Failed to read trial result {{r}}/{REP1}/result.json: experiment: missing"),
    ("no-attempts", _result(lambda x: {k: v for k, v in x.items() if k != "attempts"}), "both",
     f"Failed to read trial result {{r}}/{REP1}/result.json: attempts: missing"),
    ("no-outputs", _result(lambda x: {k: v for k, v in x.items() if k != "outputs"}), "both",
     f"Failed to read trial result {{r}}/{REP1}/result.json: outputs: missing"),
    ("no-rx-pps", _result(lambda x: {**x, "outputs": {k: v for k, v in x["outputs"].items() if k != "rx_pps"}}),
     "aggregate", f"Failed to aggregate trial {{r}}/{REP1}/result.json: 'rx_pps' is missing"),
    ("repetition-one", _result(lambda x: {**x, "repetition": "one"}), "both",
     f"Failed to read trial result {{r}}/{REP1}/result.json: repetition: \"one\" is not an integer >= 1"),
    ("deep-nesting", _deep, "both",
     f"Failed to read trial result {{r}}/{REP1}/result.json: nested too deeply to be a record"),
    ("rtt-ns-abc", lambda r: rtt_trial(r, ['{"rtt_ns": "abc", "status": "ok"}']), "aggregate",
     f"Failed to read probe records {{r}}/{RTT1}/attempt-1/probes.jsonl: line 1: rtt_ns: 'abc' is not a whole "
     "number of nanoseconds"),
    ("rtt-ns-nan", lambda r: rtt_trial(r, ['{"rtt_ns": 5, "status": "ok"}', '{"rtt_ns": NaN, "status": "ok"}']),
     "aggregate", f"Failed to read probe records {{r}}/{RTT1}/attempt-1/probes.jsonl: line 2: rtt_ns: nan is not "
     "a whole number of nanoseconds"),
    ("probe-line-not-object", lambda r: rtt_trial(r, ['{"rtt_ns": 5}', "[1, 2]"]), "aggregate",
     f"Failed to read probe records {{r}}/{RTT1}/attempt-1/probes.jsonl: line 2: '\\[1, 2\\]' is not a record "
     "\\(a JSON object\\)"),
    ("outputs-truncated", lambda r: _file(r, f"{REP1}/attempt-1/outputs.json", '{"seconds": 2.'), "report",
     f"Failed to read attempt outputs {{r}}/{REP1}/attempt-1/outputs.json: Expecting ',' delimiter"),
]


@pytest.mark.parametrize("name,make,which,expect", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_tree_gives_one_line(tmp_path, name, make, which, expect):
    r = tmp_path / "local"
    if name == "outputs-truncated":
        pps_trial(r)
    make(r)
    for cmd in (("aggregate", "report") if which == "both" else (which,)):
        argv = ["experiment", cmd, str(r)] + (["--figures", str(tmp_path / "fig")] if cmd == "report" else [])
        res = run(argv)
        assert res.exit_code == DataError.exit_code, (cmd, res.output)
        line = one_line(res)
        assert re.match("xenobench: " + expect.format(r=re.escape(str(r))), line), f"{cmd}: {line}"


def test_aggregate_missing_directory_and_report_out_under_a_file(tmp_path):
    res = run(["experiment", "aggregate", str(tmp_path / "nope")])
    assert res.exit_code == 1
    assert one_line(res) == (f"xenobench: Failed to read results {tmp_path / 'nope'}: no such directory (run the "
                             "experiments first, or give results/<testbed>)")
    r = tmp_path / "local"
    pps_trial(r)
    (tmp_path / "afile").write_text("x")
    res = run(["experiment", "report", str(r), "--figures", str(tmp_path / "fig"),
               "--out", str(tmp_path / "afile" / "report.md")])
    assert res.exit_code == 1
    assert one_line(res) == f"xenobench: Failed to write the report {tmp_path / 'afile' / 'report.md'}: Not a directory"


# --- item 4: trial directories named strictly; never counted twice ------------------------------------
def test_copied_or_linked_trial_is_refused_by_name(tmp_path):
    import shutil
    r = tmp_path / "local"
    d = pps_trial(r)
    pps_trial(r, rep=2)
    assert run(["experiment", "aggregate", str(r)]).exit_code == 0
    assert len(read_tidy(r, "pps").query("metric == 'rx_pps'")) == 2
    shutil.copytree(d, d.parent / "rep-1-copy")
    res = run(["experiment", "aggregate", str(r)])
    assert res.exit_code == 1
    assert one_line(res) == (f"xenobench: Failed to read trial {d.parent / 'rep-1-copy'}: not a trial directory "
                             "(rep-<n>, n = 1, 2, ...): move it out of the results tree or rename it")
    shutil.rmtree(d.parent / "rep-1-copy")
    (d.parent / "rep-7").symlink_to("rep-1")
    res = run(["experiment", "aggregate", str(r)])
    assert one_line(res) == (f"xenobench: Failed to read trial {d.parent / 'rep-7'}: a symlink (to rep-1); a trial "
                             "directory is a real directory, or it would be counted twice: remove the link")
    (d.parent / "rep-7").unlink()
    shutil.copytree(d, d.parent / "rep-3")  # a copy under a good name: its repetition says 1
    res = run(["experiment", "aggregate", str(r)])
    assert res.exit_code == 1
    assert one_line(res) == (f"xenobench: Failed to read trial result {d.parent / 'rep-3' / 'result.json'}: "
                             "repetition: 1 is not rep-3's (a copied or moved trial?)")


# --- item 2: a trial is reused only when it was recorded for the same point -------------------------
def _cfg(tmp_path, change=None, name="c.yaml"):
    import yaml

    from xenobench.config import DEFAULT_CONFIG, load_config
    doc = yaml.safe_load(DEFAULT_CONFIG.read_text())
    if change:
        change(doc)
    f = tmp_path / name
    f.write_text(yaml.safe_dump(doc))
    return load_config(f)


def _recorded(tmp_path, cfg, point=PPS[2]):
    """A complete trial as run_trial leaves it, recorded under cfg."""
    from xenobench.layout import ResultsTree
    from xenobench.trials import trial_params
    t = ResultsTree(tmp_path / "results", cfg.name).trial("pps", point, 1)
    t.path.mkdir(parents=True)
    params = trial_params(cfg, "pps", point, 1)
    t.params.write_text(json.dumps(params))
    t.write_result({**params, "valid": True, "attempts": [{"attempt": 1, "reasons": []}], "chosen_attempt": 1,
                    "outputs": {}})
    return t


@pytest.mark.parametrize("change,differs", [
    (lambda d: d["experiments"]["pps"].update(duration_s=5), "experiments.pps.duration_s: 2 -> 5"),
    (lambda d: d["experiments"]["pps"].update(lbs=["xenoflow"]), 'experiments.pps.lbs: ["wire", "xenoflow", "ebpf"]'
                                                                  ' -> ["xenoflow"]'),
    (lambda d: d["experiments"].update(settle_s=7), "experiments.settle_s: "),
    (lambda d: d["service"].update(port=5353), "service.port: 53 -> 5353"),
])
def test_trial_recorded_for_another_point_is_set_aside_and_rerun(tmp_path, change, differs):
    from xenobench.trials import reusable, trial_params
    t = _recorded(tmp_path, _cfg(tmp_path))
    new = _cfg(tmp_path, change, "new.yaml")
    lines = []
    assert not reusable(t, trial_params(new, "pps", PPS[2], 1), lines.append)
    assert not t.path.exists(), "a stale trial is not kept where it would be counted"
    [stale] = (t.path.parent / "stale").iterdir()
    assert stale.name.startswith("rep-1-") and (stale / "result.json").is_file()  # moved, never deleted
    [line] = lines
    assert line.startswith(f"{t.path} was recorded for another point (") and differs in line, line
    assert line.endswith(f"): moved to {stale}, running it again"), line


def test_trial_recorded_for_the_same_point_is_reused(tmp_path):
    from xenobench.trials import reusable, trial_params
    cfg = _cfg(tmp_path)
    t = _recorded(tmp_path, cfg)
    # the same point: another experiment's section, the repetition count, the file's comments differ
    same = _cfg(tmp_path, lambda d: (d["experiments"]["loss"].update(rates_pps=[1000]),
                                     d["experiments"].update(repetitions=9),
                                     d["experiments"]["pps"].update(repetitions=4)), "same.yaml")
    assert reusable(t, trial_params(same, "pps", PPS[2], 1), lambda m: pytest.fail(m))
    assert reusable(t, trial_params(cfg, "pps", PPS[2], 1), lambda m: pytest.fail(m))
    # a trial from before params recorded the point configuration: run again, the old one kept aside
    p = json.loads(t.params.read_text())
    del p["point_config"]
    t.params.write_text(json.dumps(p))
    lines = []
    assert not reusable(t, trial_params(cfg, "pps", PPS[2], 1), lines.append)
    assert "point_config: \"(unset)\" -> {" in lines[0]


# --- item 5: --config keys and several --configfile's are merged and validated, never dropped --------
def _plan(*args):
    from .test_workflow import dry_run
    p = dry_run(*args)
    return p.returncode, p.stdout + p.stderr


def test_snakemake_config_keys_are_merged_and_validated(tmp_path):
    code, out = _plan("--config", 'experiments={"repetitions": 1}')
    m = re.search(r"(\d+) measurement points, (\d+) trials", out)
    assert code == 0 and m, out
    from xenobench.config import load_config
    from xenobench.experiments import order, points
    cfg = load_config("config/local.yaml")  # 1 trial per point, but where an experiment sets its own count
    own = {e: (cfg.section("experiments").get(e) or {}).get("repetitions") or 1 for e in order()}
    assert int(m.group(2)) == sum(len(points(cfg, e)) * own[e] for e in order()), out
    code, out = _plan("--config", 'experimnts={"repetitions": 1}')
    assert code != 0 and "experimnts: unknown section" in out and "did you mean 'experiments'" in out, out
    code, out = _plan("--config", 'experiments={"repetitionz": 1}')
    assert code != 0 and "repetitionz" in out, out


def test_several_configfiles_merge_in_order(tmp_path):
    two = tmp_path / "two.yaml"
    two.write_text("experiments: {repetitions: 2}\n")
    five = tmp_path / "five.yaml"
    five.write_text("experiments: {repetitions: 5, settle_s: 0.5}\n")
    from xenobench.config import load_config
    from xenobench.experiments import order, points
    ci = load_config("config/ci.yaml")

    def trials(out, study):  # points x the study's count, but where an experiment sets its own
        m = re.search(r"measurement points, (\d+) trials", out)
        assert m, out
        return int(m.group(1)) == sum(len(points(ci, e)) * ((ci.section("experiments").get(e) or {}).get(
            "repetitions") or study) for e in order())
    code, out = _plan("--configfile", "config/ci.yaml", str(five), str(two))
    assert code == 0 and "xenobench: testbed ci " in out and trials(out, 2), out
    code, out = _plan("--configfile", "config/ci.yaml", str(two), "--config", 'experiments={"repetitions": 4}')
    assert code == 0 and trials(out, 4) and not trials(out, 2), out
    # the flag repeated: Snakemake keeps the last file only, so it is refused rather than half-read
    code, out = _plan("--configfile", "config/ci.yaml", "--configfile", str(two))
    assert code != 0 and "--configfile given more than once" in out, out


# --- item 7 (part): --results under a regular file is refused before the testbed goes up --------------
def test_results_under_a_file_refused_before_the_testbed(tmp_path, monkeypatch):
    from xenobench import cli
    monkeypatch.setattr(cli.Context, "testbed", lambda self: pytest.fail("the testbed was brought up"))
    (tmp_path / "afile").write_text("x")
    res = run(["experiment", "run", "pps", "payload-22", "--results", str(tmp_path / "afile" / "r")])
    assert res.exit_code == 1
    assert one_line(res) == (f"xenobench: Failed to use results directory {tmp_path / 'afile' / 'r'}: "
                             f"{tmp_path / 'afile'} is not a directory (give --results a directory)")


# --- item 1: an actor that died, was restarted or could not be checked fails the trial by name ---------
def test_watch_names_each_way_an_actor_is_gone():
    """xenobench.actors.Watch on liveness methods whose answers the test sets (a clock that ticks
    1 s a read): alive throughout, killed, restarted under the same tag, its node not answering,
    not running at the start, and the prober that ends by itself (done, or without its summary)."""
    from xenobench.actors import Watch
    from xenobench.errors import NodeError
    from xenobench.nodes.base import ProcessHandle
    from xenobench.trials import Validity

    t = iter(range(100))
    w = Watch(clock=lambda: float(next(t)))
    h = {k: ProcessHandle("n1", k, pid, [], "", starttime_ticks=7) for k, pid in
         (("ok", 10), ("killed", 11), ("restarted", 12), ("unreachable", 13), ("done", 14), ("crashed", 15))}
    now = dict(h) | {"late": None}
    summary = {"done": True, "crashed": False}

    def live(k):
        def f():
            if now[k] == "raise":
                raise NodeError("Failed to run `cat /proc/13/stat` on n1: ssh: connection refused")
            return now[k]
        return f

    for k in now:
        w.add(k, f"actor {k}", live(k), finished=(lambda k=k: summary[k]) if k in summary else None)
    assert w.check() == ["actor late was not running at the start: not seen alive in this attempt, found gone at 7.00 s"]
    now |= {"killed": None, "restarted": ProcessHandle("n1", "restarted", 99, [], "", starttime_ticks=3),
            "unreachable": "raise", "done": None, "crashed": None}
    v = Validity()
    rec = w.judge(v)
    assert v.checks == {"ok_alive": True, "killed_alive": False, "restarted_alive": False, "unreachable_alive": False,
                        "done_alive": True, "crashed_alive": False, "late_alive": False}
    assert v.reasons == [
        "killed_alive: actor killed (pid 11 on n1) died: last seen alive 9.00 s into the attempt, found gone at 15.00 s",
        "restarted_alive: actor restarted (pid 12 on n1) was restarted (now pid 99): last seen alive 10.00 s into "
        "the attempt, found gone at 16.00 s",
        "unreachable_alive: actor unreachable (pid 13 on n1) could not be checked (Failed to run `cat /proc/13/stat` "
        "on n1: ssh: connection refused): last seen alive 11.00 s into the attempt, found gone at 17.00 s",
        "crashed_alive: actor crashed (pid 15 on n1) died: last seen alive 13.00 s into the attempt, found gone at "
        "18.00 s",
        "late_alive: actor late was not running at the start: not seen alive in this attempt, found gone at 7.00 s"]
    assert rec["killed"] == {"what": "actor killed", "node": "n1", "pid": 11, "alive": False, "how": "died",
                             "last_seen_alive_s": 9.0, "found_gone_s": 15.0}
    assert rec["done"]["alive"] is True and rec["ok"]["last_seen_alive_s"] == 14.0


# --- least privilege on the DPU (xenobench.dpu) ----------------------------------------------------
def _fips_rule_commands():
    from xenobench.config import load_config
    from xenobench.deploy import dpu_sudo_commands
    return dpu_sudo_commands(load_config("config/fips.yaml"), home="/home/ubuntu")


def test_dpu_rule_names_root_owned_programs_with_exact_arguments():
    """No shell, no wildcard, no program under the login's home, no bare program (any arguments)."""
    from xenobench import dpu
    cmds = _fips_rule_commands()
    progs = {c[0] for c in cmds}
    assert progs == {dpu.OVS_VSCTL, dpu.OVS_OFCTL, dpu.DEVLINK, dpu.TEE, dpu.MOUNT, dpu.HELPER}
    assert all(len(c) > 1 for c in cmds)
    rule = dpu.sudoers_rule("ubuntu", cmds)
    assert "/bin/sh" not in rule and "*" not in rule.replace("\\*", "") and "/home/ubuntu/" not in rule.split(
        " -b ")[0]
    assert f"{dpu.HELPER} signal INT, {dpu.HELPER} signal TERM, {dpu.HELPER} signal KILL" in rule
    assert "/usr/bin/tee /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages" in rule
    assert "/usr/bin/mount -t hugetlbfs -o pagesize\\=2048K nodev /dev/hugepages" in rule
    assert "/usr/sbin/devlink dev eswitch show pci/0000\\:03\\:00.0" in rule


@pytest.mark.parametrize("value", ["ubuntu'; touch /tmp/xh-pwned; '", "$(touch /tmp/xh-pwned)", "a`id`b"])
def test_sudoers_fix_quotes_every_value_for_the_shell(tmp_path, value):
    """The fix the operator pastes runs nothing of a config value: the rule reaches tee intact."""
    import subprocess

    from xenobench import dpu
    fix = dpu.sudoers_fix(value, [["/usr/bin/ovs-vsctl", "br-exists", value.replace(" ", "_")]])
    printf = fix.split(" > ")[0].split(" && ", 1)[1]  # the printf that writes the rule, run as is
    out = subprocess.run(["sh", "-c", printf], capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert out.startswith(value + " ALL=(root) NOPASSWD: /usr/bin/ovs-vsctl br-exists ")
    assert not list(tmp_path.iterdir())


#: (the rule's user, whether visudo accepts it): the printed fix installs only what visudo accepted
SUDOERS_FIX_CASES = [("ubuntu", True), ("ubuntu ALL=(root", False)]


@pytest.mark.skipif(not os.path.exists("/usr/sbin/visudo"), reason="needs sudo's visudo")
@pytest.mark.parametrize("user,accepted", SUDOERS_FIX_CASES)
def test_the_printed_sudoers_fix_checks_the_rule_before_it_installs_it(tmp_path, user, accepted):
    """The fix as printed, run with `sudo` a stand-in that runs its command here and the sudoers file
    moved under tmp_path: a rule visudo refuses is never installed (it would break every sudo on the
    node), an accepted one is installed 0440; no temporary file is left either way."""
    import stat
    import subprocess

    from xenobench import dpu
    bindir, target, tmpdir = tmp_path / "bin", tmp_path / "sudoers.d" / "xenobench", tmp_path / "tmp"
    bindir.mkdir(), target.parent.mkdir(), tmpdir.mkdir()
    (bindir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    (bindir / "sudo").chmod(0o755)
    fix = dpu.sudoers_fix(user, [["/usr/bin/ovs-vsctl", "br-exists", "br0"]]).replace(dpu.SUDOERS_FILE, str(target))
    env = {**os.environ, "PATH": f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": str(tmpdir)}
    p = subprocess.run(["sh", "-c", fix], capture_output=True, text=True, env=env)
    assert (p.returncode == 0) is accepted, (p.returncode, p.stderr)
    assert target.exists() is accepted, p.stderr
    if accepted:
        assert stat.S_IMODE(target.stat().st_mode) == 0o440 and target.read_text().startswith(f"{user} ALL=(root)")
    assert not list(tmpdir.iterdir())


def test_sudoers_rule_refuses_an_argument_it_cannot_match_exactly():
    from xenobench import dpu
    with pytest.raises(ValueError, match="holds white space"):
        dpu.sudoers_rule("ubuntu", [["/usr/bin/ovs-vsctl", "br-exists", "my bridge"]])


def _helper(tmp_path):
    """lb/dpu's helper with its root paths moved under tmp_path (the logic as installed)."""
    from xenobench import REPO_ROOT, dpu
    binary = tmp_path / "xenoflow"
    binary.write_bytes(open("/bin/sleep", "rb").read())
    binary.chmod(0o755)
    text = (REPO_ROOT / dpu.HELPER_SOURCE).read_text()
    text = text.replace(f"BINARY={dpu.BINARY}", f"BINARY={binary}").replace(
        f"PIDFILE={dpu.PIDFILE}", f"PIDFILE={tmp_path / 'pid'}")
    h = tmp_path / "helper"
    h.write_text(text)
    h.chmod(0o755)
    return h, binary


def test_dpu_helper_signals_only_the_recorded_xenoflow(tmp_path):
    import subprocess
    import time
    h, binary = _helper(tmp_path)
    p = subprocess.Popen([str(h), "start", "30"])
    try:
        for _ in range(100):
            if (tmp_path / "pid").exists() and (tmp_path / "pid").read_text().strip():
                break
            time.sleep(0.02)
        assert int((tmp_path / "pid").read_text()) == p.pid  # the helper became the program: one pid
        bad = subprocess.run([str(h), "signal", "STOP"], capture_output=True, text=True)
        assert bad.returncode == 2 and "is not one of INT TERM KILL USR1 HUP" in bad.stderr
        ok = subprocess.run([str(h), "signal", "TERM"], capture_output=True, text=True)
        assert ok.returncode == 0, ok.stderr
        assert p.wait(timeout=5) == -15
        # the pid is no longer XenoFlow: nothing is signalled, the stale pidfile goes
        (tmp_path / "pid").write_text(f"{os.getpid()}\n")
        gone = subprocess.run([str(h), "signal", "KILL"], capture_output=True, text=True)
        assert gone.returncode == 2 and f"pid {os.getpid()} is not {binary}" in gone.stderr
        assert not (tmp_path / "pid").exists()
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(not os.path.exists("/usr/sbin/visudo"), reason="needs sudo's visudo")
def test_dpu_rule_as_printed_is_accepted_by_visudo(tmp_path):
    """The printed rule, escaped as sudoers(5) wants it, is one valid line for /etc/sudoers.d."""
    import subprocess

    from xenobench import dpu
    f = tmp_path / "xenobench"
    f.write_text(dpu.sudoers_rule("ubuntu", _fips_rule_commands()) + "\n")
    r = subprocess.run(["/usr/sbin/visudo", "-cf", str(f)], capture_output=True, text=True)
    assert r.returncode == 0 and "parsed OK" in r.stdout, r.stdout + r.stderr


# `sudo -n -l` as a login with the rule and a password entry sees it (sudo 1.9.13, Debian 12; made
# with a user xbtest and /etc/sudoers.d/zz-xbtest holding the two lines of the first row's comment)
SUDO_LISTING = """Matching Defaults entries for xbtest on vm:
    env_reset, mail_badpass,
    secure_path=/usr/local/sbin\\:/usr/local/bin\\:/usr/sbin\\:/usr/bin\\:/sbin\\:/bin,
    use_pty

User xbtest may run the following commands on vm:
    (root) NOPASSWD: /usr/bin/mount -t hugetlbfs -o pagesize\\=2048K nodev
        /dev/hugepages, /usr/bin/ovs-vsctl br-exists br0
    (ALL : ALL) /usr/bin/id
"""
HEAD = "User u may run the following commands on h:\n"
#: (listing, the commands it allows as root without a password)
NOPASSWD_LISTINGS = [
    # xbtest ALL=(root) NOPASSWD: <mount ...>, /usr/bin/ovs-vsctl br-exists br0 / xbtest ALL=(ALL:ALL) /usr/bin/id
    (SUDO_LISTING, {"/usr/bin/mount -t hugetlbfs -o pagesize\\=2048K nodev /dev/hugepages",
                    "/usr/bin/ovs-vsctl br-exists br0"}),
    (HEAD + "    (ALL : ALL) ALL\n", set()),  # a stock BFB's group sudo: every command, with a password
    (HEAD + "    (ALL) NOPASSWD: ALL\n", {"ALL"}),
    (HEAD + "    (nobody) NOPASSWD: /bin/true\n", set()),  # not as root
    (HEAD + "    (root) SETENV: NOPASSWD: /bin/a, /bin/b\\, c\n", {"/bin/a", "/bin/b\\, c"}),
    (HEAD + "    (root) PASSWD: /bin/a\n", set()),
    ("", set()),
]


@pytest.mark.parametrize("listing,allowed", NOPASSWD_LISTINGS)
def test_the_rule_check_reads_what_sudo_allows_without_a_password(listing, allowed):
    """deploy's sudo row reads the policy's listing: a command counts only in a NOPASSWD entry as
    root (`sudo -n -l COMMAND` says yes through a password entry too, so a stale rule read "ready")."""
    from xenobench import dpu
    assert dpu.nopasswd_commands(listing) == allowed
