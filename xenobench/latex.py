"""LaTeX tables (booktabs) of the run report's headline numbers and of published vs reproduced,
for a paper or a thesis: `report.tex` beside report.md (xenobench.report), `xenobench compare
RESDIR --latex OUT.tex`. Fragments to \\input; the document needs \\usepackage{booktabs,tabularx}.

Width: every table is a tabularx as wide as the line it is set in (\\linewidth: a column of a
two-column document, the text of a one-column one). Its long-text columns (a quantity, a metric, a
source) are X columns that wrap, breaking also after '_', and take what the others leave; every
other column keeps its natural width. Tables of more than WIDE columns are table* floats, across
both columns of a two-column document (in a one-column document table* is table): the report's
tables all are, their numbers with their intervals leave a column's wrapped text no room
(tests/test_latex.py compiles them in both layouts where pdflatex is installed). Set \\small
with narrower column gaps, so the natural columns leave the wrapped ones room. Not scaled: a
scaled table's text and rules come out at sizes no other text of the document has. pandas'
Styler.to_latex writes `tabular` only, whose columns cannot take the rest of a line; hence the
few lines here.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import DataError

PREAMBLE = "% needs \\usepackage{booktabs,tabularx}"
# LaTeX's special characters, then the few non-ASCII signs the report's text uses
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
            "µ": r"\textmu{}", "→": r"$\rightarrow$", "−": r"$-$", "≤": r"$\leq$", "≥": r"$\geq$",
            "±": r"$\pm$", "×": r"$\times$", "–": "--", "—": "---", "·": r"$\cdot$"}
_SPECIAL_RE = re.compile("|".join(re.escape(k) for k in _SPECIAL))
_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?( ?[%a-zA-Zµ/]+)?")
WIDE = 3  # a table of more columns is a table*: across both columns of a two-column document
GAP = "4pt"  # \tabcolsep (LaTeX's default 6pt): half the gap between two columns


def escape(text) -> str:
    """A cell's text with LaTeX's special characters escaped ('' for None)."""
    return "" if text is None else _SPECIAL_RE.sub(lambda m: _SPECIAL[m.group(0)], str(text))


def _align(rows: list[list], i: int, hsize: float | None) -> str:
    """A column's specifier: a wrapped X column `hsize` times the X columns' mean width, else r for
    numbers, l for text."""
    if hsize is not None:
        return rf">{{\raggedright\arraybackslash\hsize={hsize:.2f}\hsize}}X"
    cells = [str(r[i]) for r in rows if r[i] not in (None, "")]
    return "r" if cells and all(_NUMBER.fullmatch(c) for c in cells) else "l"


def tabular(header: list[str], rows: list[list], caption: str, label: str, wrap: dict[int, float]) -> str:
    """One booktabs table (a float with caption and label) as wide as the line: the columns in
    `wrap` (index -> its share of the room the others leave) wrap, the others keep their natural
    width, numeric ones right-aligned; a table* where more than WIDE columns."""
    if not wrap:
        raise ValueError("a table needs a column to wrap: it is as wide as the line only through one")
    hsize = {i: w * len(wrap) / sum(wrap.values()) for i, w in wrap.items()}  # tabularx: they sum to len(wrap)
    cols = "".join(_align(rows, i, hsize.get(i)) for i in range(len(header)))
    env = "table*" if len(header) > WIDE else "table"

    def line(cells):  # a wrapped cell may break after '_' (a metric's name)
        return " & ".join(escape(c).replace(r"\_", r"\_\allowbreak{}") if i in wrap else escape(c)
                          for i, c in enumerate(cells)) + r" \\"
    return "\n".join([rf"\begin{{{env}}}[htbp]", r"\centering", r"\small", rf"\setlength{{\tabcolsep}}{{{GAP}}}",
                      rf"\caption{{{escape(caption)}}}", rf"\label{{{label}}}",
                      rf"\begin{{tabularx}}{{\linewidth}}{{{cols}}}", r"\toprule", line(header), r"\midrule",
                      *(line(r) for r in rows), r"\bottomrule", r"\end{tabularx}", rf"\end{{{env}}}", ""])


HEADLINE_HEADER = ["quantity", "value", "spread", "trials"]  # spread: the trials' min-max, a ratio's CI
COMPARE_HEADER = ["metric", "published", "reproduced", "unit", "deviation", "ok", "source"]
# the columns that wrap (the words of a quantity or a verdict, a metric's name, a value with its
# interval, a document's section), and the share of the room each takes
HEADLINE_WRAP = {0: 1.4, 1: 0.6}
COMPARE_WRAP = {0: 0.9, 2: 0.9, 6: 1.2}


def compare_cells(rows: list[dict]) -> list[list]:
    """`xenobench compare` rows as table cells (a paired row's CI and verdict beside its value)."""
    out = []
    for r in rows:
        rep = f"{r['reproduced']:g}" if isinstance(r["reproduced"], (int, float)) else str(r["reproduced"])
        if "ci" in r:
            rep += f" [{r['ci'][0]:g}, {r['ci'][1]:g}]"
        ok = ("yes" if r["ok"] else "no") if r.get("gating", True) else ("(yes)" if r["ok"] else "(no)")
        dev = f"{r['deviation_pct']:+.2f} %" if isinstance(r["reproduced"], (int, float)) else "—"
        out.append([r["metric"], f"{r['published']:g}", rep, r["unit"], dev, ok, r["source"]])
    return out


def compare_table(rows: list[dict], caption: str, label: str = "tab:published-vs-reproduced") -> str:
    return tabular(COMPARE_HEADER, compare_cells(rows), caption, label, wrap=COMPARE_WRAP)


def headline_table(rows: list[list], caption: str, label: str = "tab:headline") -> str:
    return tabular(HEADLINE_HEADER, rows, caption, label, wrap=HEADLINE_WRAP)


def write(out: str | Path, tables: list[str], title: str) -> Path:
    """The tables into one .tex fragment, with a comment saying what it is and what it needs."""
    out = Path(out)
    text = "\n".join([f"% {title}", PREAMBLE, "", *tables])
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    except OSError as e:
        raise DataError(f"Failed to write the LaTeX tables {out}: {e.strerror or e}") from None
    return out
