"""python -m standins.rehearsal up|down|status|hw-offload --config config/rehearsal.yaml [--sudo-rule]
[--hw-offload on|off]"""

from __future__ import annotations

import argparse
import json
import os
import sys

from xenobench.errors import XenobenchError

from .lab import Lab


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m standins.rehearsal",
                                 description="The rehearsal lab: the thesis testbed's nodes as namespaces "
                                             "reached over SSH (standins/rehearsal/README.md).")
    ap.add_argument("command", choices=["up", "down", "status", "sudo-rule", "install-xenoflow",
                                               "leftovers", "hw-offload"])
    ap.add_argument("--config", default="config/rehearsal.yaml")
    ap.add_argument("--sudo-rule", action="store_true",
                    help="install the DPU login's sudoers rule that `xenobench deploy` prints (as the operator)")
    ap.add_argument("--eswitch-mode", default="switchdev", choices=["switchdev", "legacy"],
                    help="what the DPU's devlink stand-in reports for the PFs (default: a DPU-mode BlueField's)")
    ap.add_argument("--hw-offload", default="on", choices=["on", "off"],
                    help="the DPU's OVS other_config:hw-offload (up: the lab's start; hw-offload: set it now); on "
                         "(default, a correctly configured BlueField): the bridges' port pairs on the eSwitch stand-in; "
                         "off: through OVS's userspace datapath, the Arm cores' path")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("rehearsal: Failed to run the lab: it needs root (namespaces, mounts, sshd)", file=sys.stderr)
        return 1
    try:
        lab = Lab(a.config, sudo_rule=a.sudo_rule, eswitch_mode=a.eswitch_mode, hw_offload=a.hw_offload == "on")
        if a.command == "up":
            out = lab.up()
        elif a.command == "down":
            out = lab.down()
        elif a.command == "sudo-rule":
            out = {"installed": lab.install_sudo_rule()}
        elif a.command == "hw-offload":
            lab.set_hw_offload(a.hw_offload == "on")
            out = {"hw_offload": a.hw_offload}
        elif a.command == "install-xenoflow":
            out = {"installed": lab.install_xenoflow()}
        elif a.command == "leftovers":
            left = lab.leftovers()
            for x in left:
                print(f"rehearsal: left on a node: {x}", file=sys.stderr)
            print(json.dumps({"leftovers": left}, indent=1))
            return 1 if left else 0
        else:
            out = lab.status()
    except XenobenchError as e:
        print(f"rehearsal: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
