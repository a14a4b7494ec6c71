"""Every notebook runs top to bottom through Jupyter's nbconvert (so it cannot rot); the template
for one's own run (my_results.ipynb) on a fixture tree of tidy CSVs and on the thesis's data."""

from pathlib import Path

import nbformat
import pytest
from nbconvert.preprocessors import CellExecutionError, ExecutePreprocessor

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TEMPLATE = ROOT / "notebooks" / "my_results.ipynb"


def execute(path: Path) -> nbformat.NotebookNode:
    """The notebook after `jupyter nbconvert --execute` (its preprocessor): every cell run in order."""
    nb = nbformat.read(path, as_version=4)
    ExecutePreprocessor(timeout=180, kernel_name="python3").preprocess(nb, {"metadata": {"path": str(path.parent)}})
    return nb


def text(nb) -> str:
    """Every text output of the executed notebook (streams, plain-text results)."""
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            out.append(o.get("text", "") + str((o.get("data") or {}).get("text/plain", "")))
    return "\n".join(out)


def no_errors(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]


# the template runs top to bottom in test_template_opens_a_results_tree (its default, results/local,
# exists only after a run), once per tree
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p != TEMPLATE],
                         ids=[p.stem for p in NOTEBOOKS if p != TEMPLATE])
def test_notebook_executes(path, monkeypatch):
    monkeypatch.delenv("XENOBENCH_RESULTS", raising=False)
    assert not no_errors(execute(path))


# (results tree, the LB and split asked for, what the template picks, what its RTT table shows)
TEMPLATE_CASES = [
    # tidy CSVs only: idle RTT samples of xenoflow and of the path without an LB; no trials, so no config
    ("tests/fixtures/results/small", {}, "LB xenoflow, split none measured: idle only",
     ["xenoflow, idle", "none, idle"]),
    # the thesis's data: XenoFlow under each level of the asked split's background, beside idle
    ("results/thesis", {"XENOBENCH_SPLIT": "50/50"}, "LB xenoflow, split 50/50",
     ["xenoflow, 50/50, 0 Mpps", "xenoflow, 50/50, 90 Mpps", "xenoflow, idle", "none, idle"]),
]


@pytest.mark.parametrize("tree,env,picked,curves", TEMPLATE_CASES, ids=["fixture", "thesis"])
def test_template_opens_a_results_tree(tree, env, picked, curves, monkeypatch):
    monkeypatch.setenv("XENOBENCH_RESULTS", tree)
    for k in ("XENOBENCH_LB", "XENOBENCH_SPLIT"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nb = execute(TEMPLATE)
    assert not no_errors(nb)
    out = text(nb)
    assert picked in out
    for c in curves:
        assert c in out
    assert "pps_small_payload_mpps" in out  # rates against the published reference


def test_template_refuses_a_missing_tree(monkeypatch, tmp_path):
    monkeypatch.setenv("XENOBENCH_RESULTS", str(tmp_path / "nothing"))
    with pytest.raises(CellExecutionError) as e:
        execute(TEMPLATE)
    assert f"Failed to open the results {tmp_path / 'nothing'}: no such directory" in str(e.value)
