"""The run's header (report.md, report.html and `snakemake --report`'s description), the figure
captions Snakemake renders from report/*.rst, and report.md as HTML, on a hand-made results tree.
The whole `snakemake --report` of a run is exercised by the CI-sized study (tests/test_workflow_run.py
builds the tree it reads)."""

import hashlib
import json
import re
from pathlib import Path

import pytest
from docutils.core import publish_parts
from jinja2 import Environment

from xenobench.plots import THESIS_FIGURES, drawn_by
from xenobench.report import RunSummary, markdown_html, run_header, write_report

ROOT = Path(__file__).resolve().parent.parent
# how snakemake.report (9.x) renders a caption: Jinja with these settings, then docutils to HTML
JINJA = Environment(trim_blocks=True, lstrip_blocks=True)

# (experiment, point id, repetition, valid, reasons): the hand-made trials
TRIALS = [
    ("pps", "lb-xenoflow_payload-22", 1, True, []),
    ("pps", "lb-xenoflow_payload-22", 2, True, []),
    ("pps", "lb-ebpf_payload-22", 1, False, ["generator_ok: <trafgen> exited 1"]),
    ("rtt", "server-xdp", 1, True, []),
]
T0 = 1795840000.0  # 2026-11-28 04:26:40 UTC


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def run(tmp_path):
    """results/xtest with TRIALS, each recording commit, config, host and start time; the config
    extends config/ci.yaml."""
    cfg = tmp_path / "mine.yaml"
    cfg.write_text(f"extends: {ROOT}/config/ci.yaml\ntestbed: {{name: xtest}}\n")
    resdir = tmp_path / "results" / "xtest"
    for i, (exp, pid, rep, valid, reasons) in enumerate(TRIALS):
        d = resdir / "trials" / exp / pid / f"rep-{rep}"
        (d / "attempt-1").mkdir(parents=True)
        (d / "attempt-1" / "outputs.json").write_text(json.dumps({"seconds": 1.5}))
        (d / "metadata.json").write_text(json.dumps({
            "git_commit": "abc123def456", "config": str(cfg), "config_hash": sha(cfg)[:16],
            "harness_host": "benchhost", "harness_kernel": "6.1.0-test", "time": T0 + 60 * i}))
        (d / "result.json").write_text(json.dumps({
            "experiment": exp, "point": {}, "repetition": rep, "testbed": "xtest", "valid": valid,
            "attempts": [{"attempt": 1, "valid": valid, "checks": {}, "reasons": reasons}], "chosen_attempt": 1,
            "outputs": {}}))
    return resdir, cfg


def test_header_names_commit_dates_config_chain_machine_and_validity(run):
    resdir, cfg = run
    h = dict(run_header(resdir))  # no config given: the one the trials recorded
    assert h["commit"].startswith("abc123def456")
    assert h["date"].startswith("trials 2026-11-28 04:26 UTC to 2026-11-28 04:29 UTC; report ")
    chain = [cfg, ROOT / "config/ci.yaml", ROOT / "config/local.yaml"]
    assert h["config"] == "; ".join(f"{p} (sha256 {sha(p)})" for p in chain)
    assert h["config the trials recorded"] == f"{cfg} (sha256 {sha(cfg)[:16]}...)"
    assert h["testbed"].startswith("xtest (namespaces; fips1: client, ")
    assert h["machine"].startswith("benchhost (Linux 6.1.0-test); report written on ")
    assert h["trials"] == "4: 3 valid, 1 invalid (pps 2 valid, 1 invalid; rtt 1 valid, 0 invalid)"


def render(template: str, summary: RunSummary, **kw) -> str:
    """report/<template>.rst as `snakemake --report` shows it (HTML body); docutils' warnings kept in it."""
    class Snakemake:
        config = {"xenobench_report": summary, "testbed": {"name": summary.resdir.name}}
    text = JINJA.from_string((ROOT / "report" / f"{template}.rst").read_text()).render(snakemake=Snakemake, **kw)
    return publish_parts(text, writer="html", settings_overrides={"report_level": 1})["html_body"]


@pytest.mark.parametrize("figure", list(drawn_by()))
def test_figure_caption_names_its_experiments_and_their_trials(run, figure):
    resdir, _ = run
    html = render("figure", RunSummary(resdir), figure=figure)
    assert "system-message" not in html, html
    for e in drawn_by()[figure]:
        valid = sum(1 for x, *_, v, _ in TRIALS if x == e and v)
        invalid = sum(1 for x, *_, v, _ in TRIALS if x == e and not v)
        assert f"<em>{e}</em>" in html and f"{valid} valid and {invalid} invalid trials in this run" in html


@pytest.mark.parametrize("figure", THESIS_FIGURES)
def test_thesis_figure_caption_renders(run, figure):
    html = render("thesis_figure", RunSummary(run[0]), figure=figure)
    assert "system-message" not in html and "from the thesis's own raw measurements" in html


def test_workflow_description_carries_the_header(run):
    resdir, cfg = run
    summary = RunSummary(resdir, cfg)
    html = render("workflow", summary)
    assert "system-message" not in html, html
    for key, _ in summary.header:
        assert f"<td>{key}</td>" in html
    assert sha(cfg) in html and "abc123def456" in html and "never a BlueField-3" in html


def test_report_md_and_its_html_hold_the_same_tables(run, tmp_path):
    resdir, cfg = run
    md = write_report(resdir, tmp_path / "figures", config=cfg)
    text, page = md.read_text(), md.with_suffix(".html").read_text()
    tables = len(re.findall(r"^\|(---\|)+$", text, re.M))
    assert tables >= 3 and page.count("<table>") == tables
    assert "| trials/pps/lb-ebpf_payload-22/rep-1 | 1 | generator_ok: <trafgen> exited 1 |" in text
    assert "<td>generator_ok: &lt;trafgen&gt; exited 1</td>" in page  # text escaped, never markup
    assert f"<td>config</td><td>{cfg} (sha256 {sha(cfg)});" in page


def test_markdown_subset():
    page = markdown_html("# T\n\nsome `code` and **bold** <x>\n\n- a\n- b\n\n| h1 | h2 |\n|---|---|\n| 1 | 2 |\n", "t")
    assert ("<h1>T</h1>\n<p>some <code>code</code> and <strong>bold</strong> &lt;x&gt;</p>\n<ul>\n<li>a</li>\n"
            "<li>b</li>\n</ul>\n<table><thead><tr><th>h1</th><th>h2</th></tr></thead><tbody>\n"
            "<tr><td>1</td><td>2</td></tr>\n</tbody></table>") in page
