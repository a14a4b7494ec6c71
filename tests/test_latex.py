"""LaTeX (booktabs) tables: the exact text of a small headline table and of a published-vs-
reproduced table with a paired row, escaping, and `xenobench compare --latex` on the fixtures."""

from pathlib import Path

from click.testing import CliRunner

from xenobench import latex
from xenobench.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "results" / "small"


def test_headline_table_text():
    rows = [["rx rate, xenoflow, 22 B payload", "96.9000 Mpps", "96.8000–97.0000", 2],
            ["RTT median (rtt), none, server reflector", "11.1 µs", "—", 1],
            ["loss at 50000 kpps requested", "-0.100 %", "—", 1]]
    assert latex.headline_table(rows, "Headline numbers of testbed fx", "tab:headline-fx") == "\n".join([
        r"\begin{table}[htbp]",
        r"\centering",
        r"\caption{Headline numbers of testbed fx}",
        r"\label{tab:headline-fx}",
        r"\begin{tabular}{lrlr}",
        r"\toprule",
        r"quantity & value & spread & trials \\",
        r"\midrule",
        r"rx rate, xenoflow, 22 B payload & 96.9000 Mpps & 96.8000--97.0000 & 2 \\",
        r"RTT median (rtt), none, server reflector & 11.1 \textmu{}s & --- & 1 \\",
        r"loss at 50000 kpps requested & -0.100 \% & --- & 1 \\",
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
        ""])


def test_compare_table_text_with_a_paired_row_and_an_informational_one():
    rows = [{"metric": "rtt_added_xenoflow_us (paired)", "published": 5.2, "reproduced": 5.143, "unit": "us",
             "deviation_pct": -1.1, "ok": True, "gating": True, "source": "paper: Sec. 5.4 / Fig. 7 (text)",
             "ci": [4.9, 5.4], "verdict": "higher than none"},
            {"metric": "cv_max_pct", "published": 0.08, "reproduced": 1.6594, "unit": "%", "deviation_pct": 1974.24,
             "ok": False, "gating": False, "source": "paper: Sec. 5.1 (text)"}]
    text = latex.compare_table(rows, "Published vs reproduced", "tab:pvr")
    assert text.splitlines()[4:10] == [
        r"\begin{tabular}{lrllrlp{5.5cm}}",
        r"\toprule",
        r"metric & published & reproduced & unit & deviation & ok & source \\",
        r"\midrule",
        r"rtt\_added\_xenoflow\_us (paired) & 5.2 & 5.143 [4.9, 5.4] & us & -1.10 \% & yes & paper: Sec. 5.4 / Fig. 7 (text) \\",
        r"cv\_max\_pct & 0.08 & 1.6594 & \% & +1974.24 \% & (no) & paper: Sec. 5.1 (text) \\"]


def test_escape_covers_latex_specials():
    assert latex.escape(r"a_b & 5 % $x$ #1 {y} ~ ^ \ → ≤") == (
        r"a\_b \& 5 \% \$x\$ \#1 \{y\} \textasciitilde{} \textasciicircum{} \textbackslash{} $\rightarrow$ $\leq$")


def test_compare_latex_option_writes_the_table(tmp_path):
    out = tmp_path / "pvr.tex"
    r = CliRunner().invoke(main, ["compare", str(FIXTURES), "--latex", str(out)])
    assert r.exit_code in (0, 1), r.output  # 1: a gating row beyond tolerance; the table is written either way
    text = out.read_text()
    assert text.startswith(f"% xenobench compare {FIXTURES} --tolerance 5\n% needs \\usepackage{{booktabs}}\n")
    assert r"\label{tab:published-vs-reproduced-small}" in text
    assert r"pps\_small\_payload\_mpps & 96.7 & 96.95 & Mpps & +0.26 \% & yes & paper: Sec. 5.2 / Fig. 4 (text) \\" in text
    assert text.count(r"\toprule") == 1 and text.rstrip().endswith(r"\end{table}")


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
