"""What `xenobench deploy` leaves on the nodes, and its removal (`testbed down --purge`): below
both deploy and the testbed, so that `testbed down` needs nothing of deploy (xenobench.deploy
ships, xenobench.testbed tears down; both import this)."""

from __future__ import annotations

import logging

from . import dpu
from .errors import NodeError
from .nodes.base import sudo_argv

log = logging.getLogger(__name__)


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
