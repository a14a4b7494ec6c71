"""Nodes and transports: one interface to run commands, background processes and file transfers
on a testbed node (base.Node), one file per transport: `netns` (netns.NetnsNode, a local network
namespace) and `ssh` (ssh.SshNode, paramiko; known_hosts.KnownHosts checks host keys).

Commands are argv lists, never shell strings: over SSH they are joined with shlex.join, so an
argument with spaces, quotes or ';' arrives unchanged. Background processes are recorded on disk
(state_dir/processes/<node>.<tag>.json) so a later invocation, or teardown after a crash, can stop
them. A node's transport is `nodes.<name>.transport` (default `testbed.transport`); which testbed
builds and tears the nodes down is another matter, `testbed.kind` (xenobench.testbed).
"""

from __future__ import annotations

from ..config import Config, NodeConfig
from .base import CommandResult, Node, ProcessHandle, _starttime, _stat_starttime
from .known_hosts import KnownHosts, host_key_policy
from .netns import NETNS_RUN_DIR, NetnsNode, socket_in_netns
from .ssh import SshNode

TRANSPORTS: dict[str, type[Node]] = {"netns": NetnsNode, "ssh": SshNode}
"""Node class of each transport (the schema's enum of nodes.<name>.transport)."""

__all__ = ["CommandResult", "KnownHosts", "NETNS_RUN_DIR", "NetnsNode", "Node", "ProcessHandle", "SshNode",
           "TRANSPORTS", "_starttime", "_stat_starttime", "host_key_policy", "make_node", "socket_in_netns"]


def make_node(cfg: Config, ncfg: NodeConfig) -> Node:
    return TRANSPORTS[ncfg.transport](cfg, ncfg)
