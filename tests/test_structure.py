"""The package's import structure: no circle among xenobench's modules (imports inside functions
included: a deferred import that only dodges a circle is still one), and nothing that analyses
results (figures, report, comparisons) reaches what measures (the procedures, the trial runner,
the traffic and LB drivers), so analysis runs on any machine that holds a results tree.

The graph is built from the source with `ast`: an import of a.b.c also runs the packages a and
a.b, so it counts as an import of each of them that is not a package of the importer itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from xenobench import REPO_ROOT

PKG = REPO_ROOT / "xenobench"

#: analysis: reads tidy CSVs and trial directories only
ANALYSIS = ("xenobench.plots", "xenobench.report", "xenobench.compare", "xenobench.diff", "xenobench.latex")
#: measurement: drives a testbed
MEASURING = ("xenobench.measure", "xenobench.procedures", "xenobench.trials", "xenobench.traffic",
             "xenobench.testbed", "xenobench.lb.base", "xenobench.rtt")


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(REPO_ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines under `if TYPE_CHECKING:` (never executed)."""
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and getattr(n.test, "id", getattr(n.test, "attr", None)) == "TYPE_CHECKING":
            for b in n.body:
                out.update(range(b.lineno, (b.end_lineno or b.lineno) + 1))
    return out


def _resolve(importer: str, node: ast.AST) -> list[str]:
    """The xenobench modules an import statement runs (most specific first)."""
    pkg = importer if _is_package(importer) else importer.rpartition(".")[0]
    targets = []
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = pkg.split(".")
            base = base[: len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]
    out = []
    for t in targets:
        if not t.startswith("xenobench"):
            continue
        while t and t not in MODULES:  # a name inside a module: the module
            t = t.rpartition(".")[0]
        parts = t.split(".")
        for i in range(len(parts), 0, -1):  # the module, then each package that runs before it
            m = ".".join(parts[:i])
            if m in MODULES and not (importer == m or importer.startswith(m + ".")) and m != "xenobench":
                out.append(m)
    return out


def import_graph() -> dict[str, dict[str, int]]:
    """{module: {imported module: line}} over every import statement of the package."""
    graph: dict[str, dict[str, int]] = {}
    for name, f in MODULES.items():
        tree = ast.parse(f.read_text(), str(f))
        skip = _type_checking_lines(tree)
        edges = graph.setdefault(name, {})
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno not in skip:
                for m in _resolve(name, n):
                    edges.setdefault(m, n.lineno)
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def reachable(graph: dict[str, dict[str, int]], start: str) -> dict[str, str]:
    """Every module `start` runs, each with the module that imports it on the way."""
    seen = {start: ""}
    todo = [start]
    while todo:
        v = todo.pop()
        for w in graph.get(v, {}):
            if w not in seen:
                seen[w] = v
                todo.append(w)
    return seen


def _path(seen: dict[str, str], end: str) -> str:
    out = [end]
    while seen[out[-1]]:
        out.append(seen[out[-1]])
    return " -> ".join(reversed(out))


def test_no_import_circle():
    graph = import_graph()
    found = circles(graph)
    lines = []
    for c in found:
        for a in c:
            lines += [f"  {a} -> {b} ({MODULES[a].relative_to(REPO_ROOT)}:{ln})"
                      for b, ln in sorted(graph[a].items()) if b in c]
    assert not found, "import circles in xenobench/:\n" + "\n".join(
        f"circle {i}: {', '.join(c)}" for i, c in enumerate(found, 1)) + "\n" + "\n".join(lines)


@pytest.mark.parametrize("module", ANALYSIS)
def test_analysis_never_reaches_measurement(module):
    seen = reachable(import_graph(), module)
    bad = sorted(m for m in seen if any(m == x or m.startswith(x + ".") for x in MEASURING))
    assert not bad, f"{module} reaches what measures: " + "; ".join(_path(seen, m) for m in bad)


def test_the_detector_finds_a_circle_through_a_deferred_import(tmp_path):
    """The check itself: a function-level import closing a loop is a circle."""
    g = {"a": {"b": 1}, "b": {"c": 3}, "c": {"a": 9}, "d": {"a": 1}}
    assert circles(g) == [["a", "b", "c"]]
    src = "def f():\n    from .b import x\n"
    tree = ast.parse(src)
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert imports and imports[0].lineno == 2  # ast.walk sees inside functions
