"""LaTeX (booktabs) tables: the exact text of a small headline table and of a published-vs-
reproduced table with a paired row, escaping, and `xenobench compare --latex` on the fixtures."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from xenobench import latex
from xenobench.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "results" / "small"


X = r">{\raggedright\arraybackslash\hsize=%s\hsize}X"  # a wrapped column, its share of the X columns' room


def test_headline_table_text():
    rows = [["rx rate, xenoflow, 22 B payload", "96.9000 Mpps", "96.8000–97.0000", 2],
            ["RTT median (rtt_load), none, server reflector", "11.1 µs", "—", 1],
            ["loss at 50000 kpps requested", "-0.100 %", "—", 1]]
    assert latex.headline_table(rows, "Headline numbers of testbed fx", "tab:headline-fx") == "\n".join([
        r"\begin{table*}[htbp]",
        r"\centering",
        r"\small",
        r"\setlength{\tabcolsep}{4pt}",
        r"\caption{Headline numbers of testbed fx}",
        r"\label{tab:headline-fx}",
        r"\begin{tabularx}{\linewidth}{" + X % "1.40" + X % "0.60" + "lr}",
        r"\toprule",
        r"quantity & value & spread & trials \\",
        r"\midrule",
        r"rx rate, xenoflow, 22 B payload & 96.9000 Mpps & 96.8000--97.0000 & 2 \\",
        r"RTT median (rtt\_\allowbreak{}load), none, server reflector & 11.1 \textmu{}s & --- & 1 \\",
        r"loss at 50000 kpps requested & -0.100 \% & --- & 1 \\",
        r"\bottomrule",
        r"\end{tabularx}",
        r"\end{table*}",
        ""])


def test_compare_table_text_with_a_paired_row_and_an_informational_one():
    rows = [{"metric": "rtt_added_xenoflow_us (paired)", "published": 5.2, "reproduced": 5.143, "unit": "us",
             "deviation_pct": -1.1, "ok": True, "gating": True, "source": "paper: Sec. 5.4 / Fig. 7 (text)",
             "ci": [4.9, 5.4], "verdict": "higher than none"},
            {"metric": "cv_max_pct", "published": 0.08, "reproduced": 1.6594, "unit": "%", "deviation_pct": 1974.24,
             "ok": False, "gating": False, "source": "paper: Sec. 5.1 (text)"}]
    text = latex.compare_table(rows, "Published vs reproduced", "tab:pvr")
    assert text.splitlines()[0] == r"\begin{table*}[htbp]" and text.splitlines()[-1] == r"\end{table*}"
    assert text.splitlines()[6:12] == [
        r"\begin{tabularx}{\linewidth}{" + X % "0.90" + "r" + X % "0.90" + "lr" + "l" + X % "1.20" + "}",
        r"\toprule",
        r"metric & published & reproduced & unit & deviation & ok & source \\",
        r"\midrule",
        r"rtt\_\allowbreak{}added\_\allowbreak{}xenoflow\_\allowbreak{}us (paired) & 5.2 & 5.143 [4.9, 5.4] & us & "
        r"-1.10 \% & yes & paper: Sec. 5.4 / Fig. 7 (text) \\",
        r"cv\_\allowbreak{}max\_\allowbreak{}pct & 0.08 & 1.6594 & \% & +1974.24 \% & (no) & paper: Sec. 5.1 (text) \\"]


def test_escape_covers_latex_specials():
    assert latex.escape(r"a_b & 5 % $x$ #1 {y} ~ ^ \ → ≤") == (
        r"a\_b \& 5 \% \$x\$ \#1 \{y\} \textasciitilde{} \textasciicircum{} \textbackslash{} $\rightarrow$ $\leq$")


def test_compare_latex_option_writes_the_table(tmp_path):
    out = tmp_path / "pvr.tex"
    r = CliRunner().invoke(main, ["compare", str(FIXTURES), "--latex", str(out)])
    assert r.exit_code in (0, 1), r.output  # 1: a gating row beyond tolerance; the table is written either way
    text = out.read_text()
    assert text.startswith(f"% xenobench compare {FIXTURES} --tolerance 5\n% needs \\usepackage{{booktabs,tabularx}}\n")
    assert r"\label{tab:published-vs-reproduced-small}" in text
    assert (r"pps\_\allowbreak{}small\_\allowbreak{}payload\_\allowbreak{}mpps & 96.7 & 96.95 & Mpps & +0.26 \% & "
            r"yes & paper: Sec. 5.2 / Fig. 4 (text) \\") in text
    assert text.count(r"\toprule") == 1 and text.rstrip().endswith(r"\end{table*}")


def test_the_report_writes_its_tables_beside_report_md(tmp_path):
    import shutil

    from xenobench.report import write_report
    res = tmp_path / "fx"
    shutil.copytree(FIXTURES, res)  # tidy CSVs, no trials
    md = write_report(res, tmp_path / "fig")
    tex = (res / "report.tex").read_text()
    assert md == res / "report.md" and tex.startswith("% xenobench run report, testbed fx: the tables of report.md\n")
    assert tex.count(r"\toprule") == 2  # the headline numbers; published vs measured on this testbed
    assert r"\label{tab:headline-fx}" in tex and r"\label{tab:published-vs-reproduced-fx}" in tex
    assert r"RTT median (rtt), xenoflow, server reflector & 16.2 \textmu{}s & --- & 1 \\" in tex.splitlines()
    assert r"NDR (0 \% loss), xenoflow, 64 B frame & 95.5000 Mpps & 95.0000--96.0000 & 3 \\" in tex


FLOAT = re.compile(r"\\begin\{(table\*?)\}\[htbp\]\n(.*?)\\end\{\1\}", re.S)


def floats(tex: str) -> list[tuple[str, str, int]]:
    """Every float of a .tex fragment: (its environment, the tabularx's column spec, its columns)."""
    out = []
    for env, body in FLOAT.findall(tex):
        spec = re.search(r"\\begin\{tabularx\}\{\\linewidth\}\{(.*)\}\n\\toprule\n(.*) \\\\\n", body)
        assert spec and body.count(r"\begin{tabularx}") == 1 and r"\begin{tabular}" not in body, body
        out.append((env, spec.group(1), spec.group(2).count(" & ") + 1))
    return out


def test_every_report_table_is_as_wide_as_its_line(tmp_path):
    """The run report's tables (the headline, the thesis's and this testbed's published vs
    reproduced): each a tabularx of the line's width with wrapped columns whose shares sum as
    tabularx needs; table* exactly where more than latex.WIDE columns."""
    import shutil

    from xenobench.report import write_report
    res = tmp_path / "fx"
    shutil.copytree(FIXTURES, res)
    thesis = [{"metric": "rtt_added_xenoflow_us", "published": 5.2, "reproduced": 5.1, "unit": "us",
               "deviation_pct": -1.9, "ok": True, "source": "paper: Sec. 5.4 / Fig. 7 (text)"}]
    (tmp_path / "compare.json").write_text(json.dumps(thesis))
    write_report(res, tmp_path / "fig", thesis_compare=tmp_path / "compare.json")
    tex = (res / "report.tex").read_text()
    found = floats(tex)
    assert [(env, n) for env, _, n in found] == [("table*", 4), ("table*", 7), ("table*", 7)]
    assert len(found) == tex.count(r"\begin{tabularx}") == tex.count(r"\toprule")
    for env, spec, n in found:
        assert (env == "table*") == (n > latex.WIDE)
        shares = [float(s) for s in re.findall(r"\\hsize=([\d.]+)\\hsize\}X", spec)]
        assert shares and sum(shares) == pytest.approx(len(shares), abs=0.02), spec


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no pdflatex on this machine")
@pytest.mark.parametrize("layout", ["onecolumn", "twocolumn"])
def test_report_tables_fit_the_page_when_compiled(tmp_path, layout):
    """report.tex \\input into an article, one and two columns: pdflatex reports no box wider than
    its line and no X column too narrow."""
    from xenobench.report import write_report
    res = tmp_path / "fx"
    shutil.copytree(FIXTURES, res)
    write_report(res, tmp_path / "fig")
    doc = tmp_path / "doc.tex"
    doc.write_text(f"\\documentclass[{layout}]{{article}}\n\\usepackage{{booktabs,tabularx}}\n"
                   f"\\begin{{document}}\n\\input{{{res / 'report.tex'}}}\n\\end{{document}}\n")
    p = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                       capture_output=True, text=True, errors="replace", timeout=120)
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert p.returncode == 0, log[-2000:]
    assert "Overfull \\hbox" not in log and "X Columns too narrow" not in log, log[-4000:]
