"""The package's layers: node-side agents import nothing of the harness, drivers never ask which
transport they have, and every path of the results tree comes from xenobench.layout."""

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import xenobench.agents
from xenobench import REPO_ROOT
from xenobench.layout import ResultsTree, point_id

PKG = REPO_ROOT / "xenobench"
AGENTS = sorted(m.name for m in pkgutil.iter_modules(xenobench.agents.__path__))
# what a node must not need: the config schema machinery, analysis and plotting, the harness
FORBIDDEN = ("jsonschema", "pandas", "matplotlib", "snakemake", "paramiko", "click")
ALLOWED_HARNESS = ("xenobench", "xenobench.errors", "xenobench.backends")


def test_agents_import_no_harness_code():
    assert {"prober", "dns_server", "dns_xdp", "ebpf_lb", "bpf", "udpcheck", "net"} <= set(AGENTS)
    code = ("import importlib, json, sys\n"
            f"for m in {AGENTS!r}: importlib.import_module('xenobench.agents.' + m)\n"
            "print(json.dumps(sorted(sys.modules)))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                       check=True, cwd=REPO_ROOT).stdout)
    harness = [m for m in loaded if m.startswith("xenobench") and not m.startswith("xenobench.agents")
               and m not in ALLOWED_HARNESS]
    assert harness == [], f"agents pull in harness modules: {harness}"
    heavy = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert heavy == [], f"agents pull in {heavy}"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_agents_are_never_importers_of_drivers():
    for f in sorted((PKG / "agents").glob("*.py")):
        bad = [i for i in _imports(f) if i.startswith("..") and i not in ("..", "..errors", "..backends")]
        assert bad == [], f"{f.name} imports {bad}"


def test_drivers_do_not_ask_for_the_transport():
    """Above xenobench.nodes (the testbed included) nothing checks isinstance(node, SshNode/NetnsNode)
    or the transport name."""
    offenders = []
    for f in sorted(PKG.rglob("*.py")):
        if f.name == "config.py" or {"agents", "nodes"} & set(f.relative_to(PKG).parts):
            continue
        text = f.read_text()
        for needle in ("isinstance(node, SshNode)", "SshNode)", "NetnsNode)", "transport ==", "._default_log"):
            if needle in text:
                offenders.append(f"{f.relative_to(REPO_ROOT)}: {needle}")
    assert offenders == []


def test_results_tree_paths():
    t = ResultsTree(Path("results"), "local")
    pt = {"level_pps": 0, "split": "70/30"}
    assert point_id(pt) == "level_pps-0_split-70-30"
    assert str(t.point_summary("rtt_load", pt)) == "results/local/trials/rtt_load/level_pps-0_split-70-30/point.json"
    trial = t.trial("rtt_load", pt, 2)
    assert str(trial.result) == "results/local/trials/rtt_load/level_pps-0_split-70-30/rep-2/result.json"
    assert str(trial.attempt(3).probe_records).endswith("rep-2/attempt-3/probes.jsonl")
    assert ResultsTree.of(Path("results/local")) == t
