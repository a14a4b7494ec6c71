"""Kind `hosts` (config/fips.yaml, the thesis testbed): machines and a switch that exist already,
reached over each node's transport (ssh there); `up` only proves every node answers and has its
configured interfaces, `down` stops what the harness started."""

from __future__ import annotations

import json
import time

from ..errors import TestbedError
from .base import Testbed


class HostsTestbed(Testbed):
    kind = "hosts"

    def up(self) -> dict:
        t0 = time.monotonic()
        for n in self.nodes():
            r = n.run(["ip", "-j", "link", "show"], timeout=30)
            names = {l["ifname"] for l in json.loads(r.stdout or "[]")}
            missing = [i.name for i in n.ncfg.interfaces if i.name not in names]
            if missing:
                raise TestbedError(f"Failed to find interface(s) {', '.join(missing)} on node {n.name} "
                                   f"(nodes.{n.name}.interfaces in {self.cfg.path})")
        return {"kind": self.kind, "changed": False, "seconds": round(time.monotonic() - t0, 2)}
