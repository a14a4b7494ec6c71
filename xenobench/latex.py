"""LaTeX tables (booktabs) of the run report's headline numbers and of published vs reproduced,
for a paper or a thesis: `report.tex` beside report.md (xenobench.report), `xenobench compare
RESDIR --latex OUT.tex`. Fragments to \\input; the document needs \\usepackage{booktabs}."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import DataError

PREAMBLE = "% needs \\usepackage{booktabs}"
# LaTeX's special characters, then the few non-ASCII signs the report's text uses
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
            "µ": r"\textmu{}", "→": r"$\rightarrow$", "−": r"$-$", "≤": r"$\leq$", "≥": r"$\geq$",
            "±": r"$\pm$", "×": r"$\times$", "–": "--", "—": "---", "·": r"$\cdot$"}
_SPECIAL_RE = re.compile("|".join(re.escape(k) for k in _SPECIAL))
_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?( ?[%a-zA-Zµ/]+)?")
SOURCE_WIDTH = "5.5cm"  # a column of long text (a document's section, a file) wraps at this width


def escape(text) -> str:
    """A cell's text with LaTeX's special characters escaped ('' for None)."""
    return "" if text is None else _SPECIAL_RE.sub(lambda m: _SPECIAL[m.group(0)], str(text))


def _align(rows: list[list], i: int, wrap: set[int]) -> str:
    if i in wrap:
        return f"p{{{SOURCE_WIDTH}}}"
    cells = [str(r[i]) for r in rows if r[i] not in (None, "")]
    return "r" if cells and all(_NUMBER.fullmatch(c) for c in cells) else "l"


def tabular(header: list[str], rows: list[list], caption: str, label: str, wrap: tuple[int, ...] = ()) -> str:
    """One booktabs table (a float with caption and label): numeric columns right-aligned, the
    columns in `wrap` (indexes) wrapped at SOURCE_WIDTH."""
    cols = "".join(_align(rows, i, set(wrap)) for i in range(len(header)))
    line = lambda cells: " & ".join(escape(c) for c in cells) + r" \\"  # noqa: E731
    return "\n".join([r"\begin{table}[htbp]", r"\centering", rf"\caption{{{escape(caption)}}}",
                      rf"\label{{{label}}}", rf"\begin{{tabular}}{{{cols}}}", r"\toprule", line(header),
                      r"\midrule", *(line(r) for r in rows), r"\bottomrule", r"\end{tabular}", r"\end{table}", ""])


HEADLINE_HEADER = ["quantity", "value", "spread", "trials"]  # spread: the trials' min-max, a ratio's CI
COMPARE_HEADER = ["metric", "published", "reproduced", "unit", "deviation", "ok", "source"]


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
    return tabular(COMPARE_HEADER, compare_cells(rows), caption, label, wrap=(6,))


def headline_table(rows: list[list], caption: str, label: str = "tab:headline") -> str:
    return tabular(HEADLINE_HEADER, rows, caption, label)


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
