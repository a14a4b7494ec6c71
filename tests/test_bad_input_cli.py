"""Bad input through the command line: each case is a file or option a user could give by mistake,
run through `xenobench` (click's CliRunner, in process), with the one line the user must see and
the exit code (2: configuration, 1: data). Before these checks most of them ended in a traceback
(UnicodeDecodeError, RecursionError, MemoryError, ValueError/OverflowError, NotADirectoryError,
AttributeError) or, worse, in exit 0 with nothing done (a misspelled section or experiment)."""

from __future__ import annotations

import re
import struct

import pytest
import yaml
from click.testing import CliRunner

from xenobench.cli import main
from xenobench.config import DEFAULT_CONFIG
from xenobench.errors import DataError
from xenobench.experiments import order

LOCAL = DEFAULT_CONFIG.read_text()
TIDY_HEADER = ("testbed,experiment,point,lb,server,payload_bytes,frame_bytes,offered_pps,measured_pps,repetition,split,"
               "background_pps,metric,value,unit,source\n")


def config_with(tmp_path, text: str | bytes, name="bad.yaml"):
    f = tmp_path / name
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    return f


def local_with(tmp_path, old: str, new: str):
    assert old in LOCAL, old
    return config_with(tmp_path, LOCAL.replace(old, new, 1))


def doc_with(tmp_path, keys: list, value):
    """config/local.yaml with one value replaced (YAML writes nan and inf as .nan and .inf)."""
    doc = yaml.safe_load(LOCAL)
    d = doc
    for k in keys[:-1]:
        d = d[k]
    d[keys[-1]] = value
    return config_with(tmp_path, yaml.safe_dump(doc))


def deep(n: int) -> str:
    return "a: " + "[" * n + "]" * n + "\n"


def alias_bomb() -> str:
    # "billion laughs": 9 levels of 10 aliases each = 10^9 values from a few hundred bytes
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


# (id, make(tmp_path) -> argv, exit code, expected stderr line as a regex; {f} is the file)
def _cfg(make):
    return lambda t: (lambda f: (["--config", str(f), "config", "check"], f))(make(t))


def _plan(make, *extra):
    return lambda t: (lambda f: (["--config", str(f), "experiment", "plan", *extra], f))(make(t))


CONFIG_CASES = [
    ("config-not-utf8", _cfg(lambda t: config_with(t, LOCAL.encode().replace(b"name: local", b"name: loc\xffal"))), 2,
     r"Failed to load config {f}: not UTF-8: byte 0xff at offset \d+"),
    ("config-latin1", _cfg(lambda t: config_with(t, "testbed: {name: caf\u00e9}\n".encode("latin-1"))), 2,
     r"Failed to load config {f}: not UTF-8: byte 0xe9 at offset 19"),
    ("config-recursion", _cfg(lambda t: config_with(t, deep(500))), 2,
     r"Failed to load config {f}: nested more than 32 levels deep"),
    ("config-deep-json", _cfg(lambda t: config_with(t, '{"testbed": ' + "[" * 40 + "]" * 40 + "}")), 2,
     r"Failed to load config {f}: testbed(\[0\]){{31}}: nested more than 32 levels deep"),
    ("config-dev-zero", lambda t: (["--config", "/dev/zero", "config", "check"], "/dev/zero"), 2,
     r"Failed to load config /dev/zero: larger than 1048576 bytes \(is it a configuration file\?\)"),
    ("config-huge-file", _cfg(lambda t: config_with(t, LOCAL + "#" * (2 << 20) + "\n")), 2,
     r"Failed to load config {f}: larger than 1048576 bytes"),
    ("config-alias-bomb", _cfg(lambda t: config_with(t, alias_bomb())), 2,
     r"Failed to load config {f}: more than 100000 values \(YAML aliases expanding\?\)"),
    ("config-int-key", _cfg(lambda t: config_with(t, LOCAL + "1: x\n")), 2,
     r"Failed to load config {f}: \(top level\): key 1 is not a string \(quote it\)"),
    ("config-section-typo", _cfg(lambda t: local_with(t, "\nexperiments:", "\nexperimnts:")), 2,
     r"Failed to load config {f}: experimnts: unknown section \(known: testbed, service, nodes, .*experiments.*\); "
     r"did you mean 'experiments'\?"),
    # a misspelled key below a section: its path, the keys known there and the nearest
    ("config-nested-typo", _cfg(lambda t: doc_with(t, ["experiments", "pps", "rate_ppz"], 0)), 2,
     r"Failed to load config {f}: experiments.pps.rate_ppz: unknown key \(known here: [^)]*\brate_pps\b[^)]*\); "
     r"did you mean 'rate_pps'\?$"),
    ("config-shared-knob-typo", _cfg(lambda t: doc_with(t, ["experiments", "setle_s"], 1)), 2,
     r"Failed to load config {f}: experiments.setle_s: unknown key \(known here: [^)]*\); did you mean 'settle_s'\?$"),
    ("config-node-key-typo", _cfg(lambda t: doc_with(t, ["nodes", "fips1", "rol"], "client")), 2,
     r"Failed to load config {f}: nodes.fips1.rol: unknown key \(known here: [^)]*\); did you mean 'role'\?$"),
    ("config-key-unlike-any", _cfg(lambda t: doc_with(t, ["testbed", "colour"], "blue")), 2,
     r"Failed to load config {f}: testbed.colour: unknown key \(known here: [^)]*\)$"),
    ("config-port-float", _cfg(lambda t: local_with(t, "port: 53", "port: 53.0")), 2,
     r"Failed to load config {f}: service.port: 53.0 is not of type 'integer'"),
    ("config-repetitions-float", _cfg(lambda t: doc_with(t, ["experiments", "repetitions"], 2.0)), 2,
     r"Failed to load config {f}: experiments.repetitions: 2.0 is not of type 'integer'"),
    ("config-rate-nan", _cfg(lambda t: doc_with(t, ["experiments", "settle_s"], float("nan"))), 2,
     r"Failed to load config {f}: experiments.settle_s: nan is not a finite number"),
    ("config-timeout-inf", _cfg(lambda t: doc_with(t, ["dns", "prober", "timeout_s"], float("inf"))), 2,
     r"Failed to load config {f}: dns.prober.timeout_s: inf is not a finite number"),
    ("config-zone-space", _cfg(lambda t: local_with(t, "zone: example.com.", "zone: 'exa mple.com.'")), 2,
     r"Failed to load config {f}: service.zone: 'exa mple.com.' is not a DNS name \(labels of letters, digits, "
     r"'-' and '_', 1-63 characters each, 255 in all\)"),
    ("config-zone-empty-label", _cfg(lambda t: local_with(t, "zone: example.com.", "zone: example..com.")), 2,
     r"Failed to load config {f}: service.zone: 'example..com.' is not a DNS name"),
    ("config-zone-long-label", _cfg(lambda t: local_with(t, "zone: example.com.", f"zone: {'x' * 64}.com.")), 2,
     r"Failed to load config {f}: service.zone: 'x{{64}}.com.' is not a DNS name"),
    ("config-zone-too-long", _cfg(lambda t: local_with(t, "zone: example.com.", "zone: " + "abcdefg." * 32)), 2,
     r"Failed to load config {f}: service.zone: '(abcdefg.){{32}}' is not a DNS name"),
    ("config-zone-hyphen", _cfg(lambda t: local_with(t, "zone: example.com.", "zone: -example.com.")), 2,
     r"Failed to load config {f}: service.zone: '-example.com.' is not a DNS name"),
    ("config-record-name", _cfg(lambda t: doc_with(t, ["dns", "records"], {"probe": "198.18.0.53", "a b": "198.18.0.54"})), 2,
     r"Failed to load config {f}: dns.records.a b: 'a b' is not a DNS name"),
    ("config-qname", _cfg(lambda t: doc_with(t, ["dns", "qname"], "pro/be")), 2,
     r"Failed to load config {f}: dns.qname: 'pro/be' is not a DNS name"),
    ("plan-rates-nan", _plan(lambda t: doc_with(t, ["experiments", "loss", "rates_pps"], [1000, float("nan")])),
     2, r"Failed to load config {f}: experiments.loss.rates_pps\[1\]: nan is not a finite number"),
    ("plan-rates-inf", _plan(lambda t: doc_with(t, ["experiments", "loss", "rates_pps"], [float("inf")])),
     2, r"Failed to load config {f}: experiments.loss.rates_pps\[0\]: inf is not a finite number"),
    ("plan-only-typo", lambda t: (["--config", str(DEFAULT_CONFIG), "experiment", "plan", "--only", "pps",
                                   "--only", "los"], None), 2,
     r"Failed to plan experiment 'los': unknown \(known: " + re.escape(", ".join(order())) + r"\)"),
]


# --- data: ingest, compare, plot ---------------------------------------------------------------------
def thesis_dir(t, files: dict[str, bytes | str]):
    d = t / "data"
    for rel, content in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return d


def _ingest(files, out=None):
    def make(t):
        d = thesis_dir(t, files)
        return ["ingest", "thesis", str(d), "--out", str(out(t) if out else t / "out")], d
    return make


def results_dir(t, kind: str, rows: list[str], name="res"):
    d = t / name
    d.mkdir(exist_ok=True)
    (d / f"{kind}.csv").write_text(TIDY_HEADER + "".join(r + "\n" for r in rows))
    return d


def _file_under(t):
    (t / "afile").write_text("x")
    return t / "afile" / "sub"


SERIES = "".join(f"{v}\n" for v in [0, 100, 100, 100, 100, 0])
PCAPNG_SHB = struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)

DATA_CASES = [
    ("ingest-series-not-utf8", _ingest({"pps/22b_1.txt": b"100\n\xff\xfe\n"}), 1,
     r"Failed to ingest thesis data {f}: no file could be used \(pps/22b_1.txt: Failed to read series "
     r"{f}/pps/22b_1.txt: 'utf-8' codec can't decode byte 0xff in position 4: invalid start byte\)"),
    ("ingest-series-1e30", _ingest({"pps/22b_1.txt": "5\n" + "1" + "0" * 30 + "\n"}), 1,
     r"Failed to ingest thesis data {f}: no file could be used \(pps/22b_1.txt: Failed to read series "
     r"{f}/pps/22b_1.txt: line 2: '10{{30}}' is out of range \(a packet count per second is at most 1e\+12\)\)"),
    ("ingest-series-negative", _ingest({"pps/22b_1.txt": "-5\n-7\n-9\n"}), 1,
     r"Failed to ingest thesis data {f}: no file could be used \(pps/22b_1.txt: Failed to read series "
     r"{f}/pps/22b_1.txt: value 1 is negative \(-5\): a packet count cannot be\)"),
    ("ingest-loss-negative", _ingest({"loss/tx_10m_1.txt": "-1\n-1\n", "loss/rx_10m_1.txt": "-1\n-1\n"}), 1,
     r"Failed to ingest thesis data {f}: no file could be used \(loss/rx_10m_1.txt: Failed to read series "
     r".*value 1 is negative \(-1\)"),
    ("ingest-manifest-not-utf8", _ingest({"manifest.yaml": b"lb: \xff\n", "pps/22b_1.txt": SERIES}), 1,
     r"Failed to read labels {f}/manifest.yaml: not UTF-8: byte 0xff at offset 4"),
    ("ingest-manifest-deep", _ingest({"manifest.yaml": deep(500), "pps/22b_1.txt": SERIES}), 1,
     r"Failed to read labels {f}/manifest.yaml: nested too deeply"),
    ("ingest-pcapng-short-block", _ingest({"rtt/baseline/rtt_x.pcapng": PCAPNG_SHB + struct.pack("<III", 1, 12, 12)}),
     1, r"Failed to ingest thesis data {f}: no file could be used \(rtt/baseline/rtt_x.pcapng: Failed to read capture "
        r"{f}/rtt/baseline/rtt_x.pcapng: block of type 1 at byte 28 is 4 bytes, its fixed fields 8\)"),
    ("ingest-out-under-file", _ingest({"pps/22b_1.txt": SERIES}, out=_file_under), 1,
     r"Failed to write tidy results .*/afile/sub/pps.csv: Not a directory"),
    ("compare-numeric-metric", lambda t: (lambda d: (["compare", str(d)], d))(results_dir(
        t, "pps", ["fx,pps,lb-xenoflow_payload-2,xenoflow,,2,44,,1,1,,,5,96900000,packets/s,fixture"])), 1,
     r"Failed to compare {f}: no tidy results that match a published number"),
    ("compare-inf-value", lambda t: (lambda d: (["compare", str(d)], d))(results_dir(
        t, "pps", ["fx,pps,lb-xenoflow_payload-2,xenoflow,,2,44,,1,1,,,rx_pps,96900000,packets/s,fixture",
                   "fx,pps,lb-xenoflow_payload-2,xenoflow,,2,44,,1,2,,,rx_pps,inf,packets/s,fixture"])), 1,
     r"Failed to read tidy results {f}/pps.csv: line 3: column value: 'inf' is not a finite number"),
    ("compare-tidy-not-utf8", lambda t: (lambda d: (["compare", str(d)], d))(
        (lambda d: ((d / "pps.csv").write_bytes(b"\xff\xfe" + TIDY_HEADER.encode()), d)[1])(
            results_dir(t, "pps", []))), 1,
     r"Failed to read tidy results {f}/pps.csv: 'utf-8' codec can't decode byte 0xff"),
    ("compare-tidy-device", lambda t: (lambda d: (["compare", str(d)], d))(
        (lambda d: ((d / "pps.csv").unlink(), (d / "pps.csv").symlink_to("/dev/zero"), d)[2])(
            results_dir(t, "pps", []))), 1,
     r"Failed to read tidy results {f}/pps.csv: not a regular file of at most 2147483648 bytes"),
    ("plot-out-under-file", lambda t: (["plot", str(results_dir(t, "pps", [])), "--out", str(_file_under(t))],
                                       None), 1,
     r"Failed to write figures .*/afile/sub: Not a directory"),
]


@pytest.mark.parametrize("name,make,code,expect", CONFIG_CASES + DATA_CASES,
                         ids=[c[0] for c in CONFIG_CASES + DATA_CASES])
def test_bad_input_gives_one_line_and_exit_code(tmp_path, name, make, code, expect):
    argv, f = make(tmp_path)
    r = CliRunner().invoke(main, argv)
    assert r.exception is None or isinstance(r.exception, SystemExit), \
        f"{name}: traceback instead of an error line:\n{r.output}"
    assert r.exit_code == code, (name, r.exit_code, r.output)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    pattern = "xenobench: " + expect.format(f=re.escape(str(f)) if f else "")
    assert re.match(pattern, lines[0]), f"{name}:\n  got      {lines[0]}\n  expected {pattern}"


def test_plot_names_the_inf_value_per_figure(tmp_path, monkeypatch):
    """plot goes on with the other figures; the one that needs pps.csv says why it is skipped.
    With no figure left to draw, plot fails (a green workflow step with no figures would hide it)."""
    d = results_dir(tmp_path, "pps", ["fx,pps,lb-xenoflow_payload-2,xenoflow,,2,44,,1,1,,,rx_pps,inf,packets/s,fixture"])
    r = CliRunner().invoke(main, ["plot", str(d), "--out", str(tmp_path / "fig")])
    assert r.exit_code == DataError.exit_code and isinstance(r.exception, SystemExit), r.output
    err = r.stderr.splitlines()
    assert (f"pps_vs_payload: skipped (Failed to read tidy results {d}/pps.csv: line 2: column value: 'inf' is "
            "not a finite number)") in err
    assert err[-1] == (f"xenobench: Failed to plot {d}: no figure had the data it needs (reasons above; "
                       "--placeholders writes a figure stating each reason instead)")
    assert r.stdout == ""
    # with placeholders (the workflow's way) every figure states its reason and plot succeeds
    from .test_plots import _drawn_not_written
    _drawn_not_written(monkeypatch, written=("pps_vs_payload",))  # the one looked at
    r = CliRunner().invoke(main, ["plot", str(d), "--out", str(tmp_path / "fig"), "--placeholders"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "fig" / "pps_vs_payload.png").exists()


def test_plan_only_known_names_still_plan():
    r = CliRunner().invoke(main, ["--config", str(DEFAULT_CONFIG), "experiment", "plan", "--only", "loss"])
    assert r.exit_code == 0, r.output
    n = len(yaml.safe_load(LOCAL)["experiments"]["loss"]["rates_pps"])
    assert r.stdout.splitlines()[0].split() == ["loss", str(n), "points", "×", "3", "repetitions", "=",
                                                str(3 * n), "trials"]



def test_hugepages_mount_reaches_sh_as_one_word(tmp_path):
    """xenoflow.hugepages.mount goes into `sh -c` under sudo on the DPU: a path with a space and a
    ';' must stay one argument of mountpoint and mount, never a second command."""
    import shlex
    mnt = "/mnt/huge pages;touch /tmp/xenobench-pwned"
    f = config_with(tmp_path, f"extends: {DEFAULT_CONFIG.parent / 'fips.yaml'}\n"
                              f"xenoflow:\n  hugepages: {{count: 8, mount: '{mnt}'}}\n")
    r = CliRunner().invoke(main, ["--config", str(f), "lb", "start", "--lb", "xenoflow", "--dry-run"])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if "mountpoint" in x)
    # no shell on the DPU: mountpoint as the login, then mount through the sudo rule's exact command
    assert shlex.split(line) == ["mountpoint", "-q", mnt, "||", "sudo", "-n", "/usr/bin/mount", "-t", "hugetlbfs",
                                 "-o", "pagesize=2048K", "nodev", mnt]
    bad = config_with(tmp_path, f"extends: {DEFAULT_CONFIG.parent / 'fips.yaml'}\n"
                                "xenoflow:\n  hugepages: {count: 8, mount: 'dev/hugepages'}\n", "rel.yaml")
    r = CliRunner().invoke(main, ["--config", str(bad), "config", "check"])
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"xenobench: Failed to load config {bad}: xenoflow.hugepages.mount: 'dev/hugepages' "
                                "does not match '^/'")


# every command that changes a namespace testbed, as a user who is not root: (arguments, the command named)
NOT_ROOT = [(["testbed", "up"], "testbed up"), (["testbed", "down"], "testbed down"),
            (["testbed", "check"], "testbed check"), (["lb", "start", "--lb", "ebpf"], "lb start"),
            (["dns", "start"], "dns start"), (["counters", "fips1", "eth0"], "counters"),
            (["experiment", "run", "pps", "payload-22"], "experiment run")]


@pytest.mark.parametrize("argv,command", NOT_ROOT, ids=[c for _, c in NOT_ROOT])
def test_not_root_is_one_line(argv, command, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    r = CliRunner().invoke(main, ["--config", str(DEFAULT_CONFIG), *argv])
    assert r.exit_code == 1 and r.stdout == "", (r.output, r.exception)
    assert r.stderr.splitlines() == [f"xenobench: Failed to run `xenobench {command}` on testbed local: "
                                     "needs root (network namespaces, XDP): run as root or with sudo"]


def test_not_root_reads_what_it_may(monkeypatch):
    """Planning needs no root, nor does a testbed reached only over SSH."""
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert CliRunner().invoke(main, ["--config", str(DEFAULT_CONFIG), "experiment", "plan"]).exit_code == 0
    from xenobench.cli import needs_root
    from xenobench.config import load_config
    assert needs_root(load_config(DEFAULT_CONFIG)) and not needs_root(load_config(DEFAULT_CONFIG.parent / "fips.yaml"))


#: plans the dry run used to accept and every run refused: (id, old, new in config/local.yaml, the line)
REFUSED_PLANS = [
    ("rank-reference-not-listed", "rank: {repetitions: 3, lbs: [wire, xenoflow, ebpf]",
     "rank: {repetitions: 3, lbs: [xenoflow, ebpf]",
     "Failed to plan experiment rank: experiments.rank.reference 'wire' is not in its lbs ['xenoflow', 'ebpf']"),
    ("pps-paired-without-wire", "  pps: {lbs: [wire, xenoflow, ebpf]", "  pps: {lbs: [xenoflow, ebpf]",
     "Failed to plan experiment pps: experiments.pps.reference 'wire' is not in its lbs ['xenoflow', 'ebpf']"),
]


@pytest.mark.parametrize("name,old,new,line", REFUSED_PLANS, ids=[r[0] for r in REFUSED_PLANS])
@pytest.mark.parametrize("command", [["config", "check"], ["experiment", "plan"], ["experiment", "plan", "--json"]])
def test_the_dry_run_refuses_what_the_run_refuses(tmp_path, name, old, new, line, command):
    """`config check` and `experiment plan` plan the study as the workflow and `experiment run` do
    (xenobench.experiments.plan: the kinds' section checks), so they refuse the same plans with the
    same line and exit 2."""
    f = local_with(tmp_path, old, new)
    r = CliRunner().invoke(main, ["--config", str(f), *command])
    assert r.exit_code == 2, r.output
    assert line in r.output and "Traceback" not in r.output, r.output
