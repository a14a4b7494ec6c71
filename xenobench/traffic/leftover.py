"""What a harness killed mid-trial (SIGKILL: no `finally` runs) may have left of a local generator
on the loadgen node: its process, still sending into every later trial and holding its tag (every
later start fails "already running"). Each generator module names its own (Generator.leftover);
`Testbed.restore_state` puts them all back at a point's set-up, whichever generator the config
names now. Only this testbed's are looked for, never another prefix's."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

logger = logging.getLogger(__name__)


#: (tag, node, pid) of the generator runs this harness process started and has not collected: any
#: other process of the tag or the binary in this testbed is a leftover (stop_leftover)
_OURS: set[tuple[str, str, int]] = set()


def own(node, tag: str, pid: int) -> None:
    _OURS.add((tag, node.name, pid))


def disown(node, tag: str, pid: int) -> None:
    _OURS.discard((tag, node.name, pid))


def _exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def stop_leftover(node, tag: str, binary: str | Path, wait_s: float = 5.0) -> list[str]:
    """Stop a generator (process tag `tag`, program `binary`) of this testbed that no run of this
    harness process owns. Only this testbed's own are looked for, so concurrent testbeds of other
    prefixes are never touched: the process record of the tag (under this config's and prefix's
    state directory) and, on a namespace node, the processes inside this prefix's namespace of the
    node that run `binary`. Returns what was stopped, one line each."""
    out = []
    h = node.handle(tag)
    if h is not None and node.running(tag) and (tag, node.name, h.pid) not in _OURS:
        node.stop(tag, timeout=wait_s)
        out.append(f"{tag} pid {h.pid} on {node.name} (recorded, `{' '.join(h.argv[:3])} ...`)")
    if getattr(node, "netns", None) and node.is_local:
        exe = str(Path(binary).resolve())
        ours = {pid for t, n, pid in _OURS if n == node.name and t == tag}
        stray = [pid for pid in node.pids() if _exe(pid) == exe and pid not in ours and _pgid(pid) not in ours]
        for pid in stray:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + wait_s
        while any(_exe(pid) == exe for pid in stray) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in stray:
            if _exe(pid) == exe:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            out.append(f"{tag} pid {pid} in namespace {node.netns}")
    for line in out:
        logger.warning("%s: stopped a leftover generator: %s", node.name, line)
    return out
