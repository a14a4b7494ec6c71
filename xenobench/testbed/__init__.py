"""The testbed: its nodes, and what `testbed up` and `down` do, by kind (`testbed.kind`):

- `namespaces` (namespaces.py): the thesis topology built in network namespaces on this machine
  (topology.py), the switch's XDP fast path and the backends' sink (switch.py), the LB's CPU
  placement (napi.py);
- `hosts` (hosts.py): machines and a switch that exist already, only checked.

The kind says what is built; how each node is reached is its transport (xenobench.nodes), a
separate key. bpffs.py mounts /sys/fs/bpf for whoever pins there and unmounts only its own mount.
"""

from __future__ import annotations

from ..config import Config
from .base import Testbed
from .bpffs import BPF_PRELOAD, BPFFS, bpffs_mount_id, ensure_bpffs, unmount_bpffs_if_unused
from .hosts import HostsTestbed
from .namespaces import NamespaceTestbed
from .napi import DUT_MODES, NAPI_LOCK, NapiPlacement
from .switch import (FASTPATH_OBJ, FASTPATH_PROG, SINK_OBJ, SINK_PREFIX, SINK_PROG, SINK_STATS, SW_STATS,
                     BackendSink, SwitchFastpath)
from .topology import RECORDS, NamespaceTopology

KINDS: dict[str, type[Testbed]] = {"namespaces": NamespaceTestbed, "hosts": HostsTestbed}
"""Testbed class of each kind (the schema's enum of testbed.kind)."""

__all__ = ["BPFFS", "BPF_PRELOAD", "BackendSink", "DUT_MODES", "FASTPATH_OBJ", "FASTPATH_PROG", "HostsTestbed",
           "KINDS", "NAPI_LOCK", "NamespaceTestbed", "NamespaceTopology", "NapiPlacement", "RECORDS", "SINK_OBJ",
           "SINK_PREFIX", "SINK_PROG", "SINK_STATS", "SW_STATS", "SwitchFastpath", "Testbed", "bpffs_mount_id",
           "ensure_bpffs", "get_testbed", "unmount_bpffs_if_unused"]


def get_testbed(cfg: Config) -> Testbed:
    return KINDS[cfg.testbed_kind](cfg)
