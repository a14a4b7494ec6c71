"""The driver module of LB kind "xenoflow-hash": XenoFlow in hash mode (xenobench.lb.xenoflow's
XenoFlowHashLB, the same binary with -H). A module of its own because get_lb makes a kind's driver
with its module's make(testbed)."""

from __future__ import annotations

from .xenoflow import XenoFlowHashLB, unavailable  # noqa: F401  (XenoFlow's prerequisites are its own)


def make(testbed) -> XenoFlowHashLB:
    return XenoFlowHashLB(testbed)
