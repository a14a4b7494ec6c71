"""What `xenobench deploy` leaves on the nodes (the role's content-addressed artefact), whether a node
holds this checkout's, and its removal (`testbed down --purge`): below both deploy and the testbed,
so that the testbed needs nothing of deploy (xenobench.deploy ships, xenobench.testbed checks and
tears down; both import this)."""

from __future__ import annotations

import gzip
import io
import logging
import tarfile
from pathlib import Path

from . import REPO_ROOT, dpu
from .dpu import content_hash
from .errors import NodeError
from .lb import BUILTIN
from .nodes.base import sudo_argv

log = logging.getLogger(__name__)

#: the harness modules the agents import (tests/test_layout.py: agents import no other harness code)
AGENT_MODULES = ("xenobench/__init__.py", "xenobench/errors.py", "xenobench/backends.py", "xenobench/agents")

#: BPF objects each role's agents load (globs under REPO_ROOT; scripts/build.sh builds them): the LB
#: node's are every built-in LB kind's own (xenobench.lb.BUILTIN bpf_objects; an out-of-tree LB's
#: package is installed on the node by its operator)
ROLE_OBJECTS: dict[str, tuple[str, ...]] = {
    "lb": tuple(p for k in BUILTIN for p in k.bpf_objects),
    "dns_backend": ("dns_server/build/*.bpf.o",),
}


# --- the artefact ---------------------------------------------------------------------------
def artefact_files(role: str) -> list[str]:
    """Paths (relative to REPO_ROOT) of what a node with this role gets, sorted."""
    out: set[str] = set()
    for m in AGENT_MODULES:
        p = REPO_ROOT / m
        out |= {str(f.relative_to(REPO_ROOT)) for f in p.rglob("*.py")} if p.is_dir() else {m}
    for pattern in ROLE_OBJECTS.get(role, ()):
        found = sorted(REPO_ROOT.glob(pattern))
        if not found:
            raise NodeError(f"Failed to build the deploy artefact for role {role}: no {pattern} under "
                            f"{REPO_ROOT} (run `scripts/build.sh`)")
        out |= {str(f.relative_to(REPO_ROOT)) for f in found}
    return sorted(out)


def build_artefact(role: str, out_dir: Path) -> tuple[str, Path]:
    """(hash, path of <hash>.tar.gz) for a role; byte-identical for identical content."""
    files = artefact_files(role)
    digest = content_hash(REPO_ROOT, files)
    out = out_dir / f"{digest}.tar.gz"
    if not out.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tf:
            for f in files:
                data = (REPO_ROOT / f).read_bytes()
                ti = tarfile.TarInfo(f)
                ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
                tf.addfile(ti, io.BytesIO(data))
        tmp = out.with_suffix(".part")
        try:
            tmp.write_bytes(buf.getvalue())
            tmp.replace(out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return digest, out


def deployed_mismatch(cfg, node) -> str | None:
    """Why `node` does not run this checkout's agents (nothing deployed, or another artefact than
    this checkout's), or None when it does or shares this machine's tree. One command on the node."""
    if node.deploy_dir is None:
        return None
    want, _ = build_artefact(node.ncfg.role, cfg.state_dir / "deploy")
    r = node.run(["sh", "-c", 'cd -- "$1" 2>/dev/null && [ -f current/.complete ] && readlink current',
                  "sh", node.deploy_dir], check=False)
    have = r.stdout.strip() if r.ok else ""
    if have == want:
        return None
    return ("nothing of xenobench is deployed there" if not have else
            f"it holds artefact {have}, this checkout's is {want}")




def remove_xenoflow_rules(cfg, node) -> list[str]:
    """Delete the OVS flow rules XenoFlow's start adds (xenoflow.ovs, DOCA mode), whatever state
    XenoFlow is in: a rule left steers the host port's traffic past the LB for good. Idempotent
    (`del-flows --strict` of a missing rule succeeds). The commands that failed, as text."""
    sec = cfg.section("xenoflow") or {}
    if sec.get("mode") != "doca":
        return []
    failed = []
    for argv in dpu.ovs_commands(cfg).get("del", []):
        argv = sudo_argv(argv) if sec.get("sudo") else argv
        r = node.run(argv, check=False)
        if not r.ok:
            err = (r.stderr or r.stdout).strip().splitlines()
            failed.append(f"Failed to remove the OVS rule on {node.name}: `{' '.join(argv)}` exited with status "
                          f"{r.returncode}: {err[-1] if err else 'no output'}")
    return failed


def purge(testbed) -> list[str]:
    """Remove what deploy placed on the SSH nodes, and XenoFlow's OVS rules on the DPU; the nodes
    purged. A node that cannot be reached is logged and skipped."""
    cfg = testbed.cfg
    sec = cfg.section("xenoflow") or {}
    out = []
    for n in testbed.nodes():
        if n.deploy_dir is None:
            continue
        try:
            if n.remove_deployed():
                out.append(n.name)
            if n.ncfg.role == "dpu" and sec:
                for why in remove_xenoflow_rules(cfg, n):
                    log.warning("%s", why)
                src, build = sec.get("remote_src"), sec.get("build_dir")
                if src:
                    home = n.run(["pwd"]).stdout.strip()
                    # the build directory and the backends file too (with the copies an update keeps
                    # beside it: lb.base signal_update), and their parent once empty
                    n.run(["sh", "-c", 'rm -rf -- "$1" "$1.tar.gz" "$3" "$3.prev" "$3.next" ${2:+"$2"}; for d in "$1" ${2:+"$2"}; do '
                           'p=$(dirname -- "$d"); [ "$p" = . ] || rmdir -- "$p" 2>/dev/null; done; true',
                           "sh", src, build or "", dpu.backends_path(cfg, home)], check=False)
        except NodeError as e:
            log.warning("%s", e)
            continue
    return out
