"""What lets the one command a user ran resume after Snakemake was killed (`kill -9`, the OOM
killer, a lost session), without knowing Snakemake's recovery flags:

- its job does not run on unsupervised: stop_when_orphaned (run_point) stops a job whose Snakemake
  is gone, unwinding as on Ctrl-C (the point's LB, server and load stopped; the unfinished trial,
  without result.json, is re-run on resume, xenobench.trials);
- the next run is not refused: clear_stale_locks (rules/common.smk) removes the locks a killed
  Snakemake left in .snakemake/locks when no Snakemake runs in the directory any more (what
  `snakemake --unlock` does), and profiles/default/config.yaml sets `rerun-incomplete`, so
  outputs of the killed job are made again instead of refused (IncompleteFilesException).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

ORPHAN_CHECK_S = 1.0
_guarded: list[int] = []


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a pid (/proc/<pid>/stat fields 4 and 22), None if there is none
    or it has exited (a zombie its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else (int(fields[1]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def _is_snakemake(pid: int) -> bool:
    """Whether a pid runs Snakemake (`snakemake ...`, `python -m snakemake ...`)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:3]
    except OSError:
        return False
    return any(a == b"snakemake" or a.endswith(b"/snakemake") for a in argv)


def supervisor(pid: int | None = None) -> tuple[int, int] | None:
    """The nearest ancestor of `pid` (default: this process) that is Snakemake, as (pid, start
    time); None when none is."""
    st = _stat(pid or os.getpid())
    while st is not None and st[0] > 1:
        ppid = st[0]
        st = _stat(ppid)
        if st is not None and _is_snakemake(ppid):
            return ppid, st[1]
    return None


def clear_stale_locks(workdir: Path, progress=print) -> bool:
    """Remove workdir/.snakemake/locks when no Snakemake but this one (and its ancestors) runs
    in workdir: the locks of a Snakemake that was killed. True if they were removed."""
    locks = Path(workdir) / ".snakemake" / "locks"
    if not locks.is_dir() or not any(locks.iterdir()):
        return False
    mine, st = {os.getpid()}, _stat(os.getpid())
    while st is not None and st[0] > 1:
        mine.add(st[0])
        st = _stat(st[0])
    here = Path(workdir).resolve()
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        if pid in mine or not _is_snakemake(pid):
            continue
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).resolve() == here:
                return False  # another Snakemake works here: its locks are live
        except OSError:
            continue
    for f in locks.iterdir():
        f.unlink(missing_ok=True)
    progress(f"xenobench: removed the locks of a Snakemake that was killed ({locks}); no other Snakemake "
             "runs here")
    return True


def stop_when_orphaned(progress=print) -> None:
    """Run by Snakemake, this process stops itself (SIGTERM: the harness unwinds as on Ctrl-C, the
    point's LB, server and load stopped, the unfinished trial left without result.json to be
    re-run) once Snakemake is gone: `kill -9` of Snakemake leaves its jobs running unsupervised.
    Nothing without a Snakemake ancestor; once per process."""
    sup = supervisor()
    if sup is None or _guarded:
        return
    _guarded.append(sup[0])

    def watch() -> None:
        while _stat(sup[0]) is not None and _stat(sup[0])[1] == sup[1]:
            time.sleep(ORPHAN_CHECK_S)
        os.kill(os.getpid(), signal.SIGTERM)  # first: the output Snakemake read may be gone with it
        try:
            progress(f"Snakemake (pid {sup[0]}) is gone: stopping this job (the unfinished trial is re-run "
                     "on resume)")
        except OSError:
            pass
    threading.Thread(target=watch, daemon=True, name="orphan-guard").start()
