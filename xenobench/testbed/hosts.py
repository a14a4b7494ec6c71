"""Kind `hosts` (config/fips.yaml, the thesis testbed): machines and a switch that exist already,
reached over each node's transport (ssh there); `up` only proves every node answers and has its
configured interfaces, `down` stops what the harness started."""

from __future__ import annotations

import json
import time

from ..errors import TestbedError
from ..shipping import deployed_mismatch
from .base import Testbed


class HostsTestbed(Testbed):
    kind = "hosts"
    #: for an encapsulating LB (Katran): "l3_gateway" is the site's router (katran.gateway_mac; the
    #: switch in L3 mode routes the outer destination to each real), nothing to set up here, proven by
    #: `testbed check` (check_ipip); "ipip_decap" is Katran's decap in front of each backend's XDP
    #: program over SSH (xenobench.fabric.BackendDecap)
    services = ("l3_gateway", "ipip_decap")

    def provide(self, needs: tuple[str, ...], lb_kind: str) -> None:
        super().provide(needs, lb_kind)
        if "ipip_decap" in needs:
            from ..fabric import BackendDecap
            d = BackendDecap(self)
            try:
                d.up()
            except BaseException:
                d.down()
                raise

    def withdraw(self, needs: tuple[str, ...], lb_kind: str) -> None:
        if "ipip_decap" in needs:
            from ..fabric import BackendDecap
            BackendDecap(self).down()

    def up(self) -> dict:
        t0 = time.monotonic()
        for n in self.nodes():
            r = n.run(["ip", "-j", "link", "show"], timeout=30)
            names = {l["ifname"] for l in json.loads(r.stdout or "[]")}
            missing = [i.name for i in n.ncfg.interfaces if i.name not in names]
            if missing:
                raise TestbedError(f"Failed to find interface(s) {', '.join(missing)} on node {n.name} "
                                   f"(nodes.{n.name}.interfaces in {self.cfg.path})")
            # agents run from what `deploy` placed: a node rebuilt or purged since says so here, not
            # as a Python ModuleNotFoundError of the first agent started there
            why = deployed_mismatch(self.cfg, n)
            if why:
                raise TestbedError(f"Failed to find this checkout's agents on node {n.name}: {why} (run `xenobench "
                                   f"--config {self.cfg.path} deploy`; the workflow runs it once "
                                   f"results/{self.cfg.name}/deploy.txt is gone, which `testbed down --purge` removes)")
        return {"kind": self.kind, "changed": False, "seconds": round(time.monotonic() - t0, 2)}
