"""A test module's profile loads in one TRex loader process instead of one each.

profiles.load_streams runs a child process per (profile, tunables) it has not loaded yet (the TRex
client must not enter the harness process: xenobench/traffic/stl_loader.py), and keeps what it
loaded for the rest of the process (and, where profiles has a disk cache, on disk for the next
process). A module that loads dozens of profiles pays the child's start (the interpreter, the TRex
client's imports) dozens of times; preload() asks the loader's batch mode (`stl_loader --batch`,
the same STLProfile.load per job) for all the loads not kept yet, at once, and keeps the streams
where load_streams keeps them, under the key load_streams computes. Loads the loader refuses are
not kept: the test that expects the refusal still meets it through load_streams' own child process.
"""

import json
import subprocess
import sys

from xenobench import REPO_ROOT
from xenobench.traffic import fill_tunables, profiles


def preload(jobs) -> int:
    """jobs: (profile, tunables, cfg) triples, as compile_frames(profile, tunables) (cfg None) or
    compile_for(cfg, profile, tunables) and run_traffic on a testbed of cfg load them. Returns how
    many loads the batch kept."""
    disk_key = getattr(profiles, "_disk_key", None)   # the loads kept across processes, if profiles keeps them
    todo: dict[str, list] = {}
    names: dict[str, str] = {}
    for profile, tunables, cfg in jobs:
        path = profiles.resolve_profile(profile)
        filled = fill_tunables(cfg, profile, tunables) if cfg is not None else tunables
        argv = profiles.tunables_argv(filled)
        key = profiles._key(path, argv)
        if key in profiles._cache or key in todo:
            continue
        if disk_key is not None:
            names[key] = disk_key(path, key)
            kept = profiles._disk_read(names[key])
            if kept is not None:
                profiles._cache[key] = kept
                continue
        todo[key] = [key, str(path), argv, {}]
    if not todo:
        return 0
    p = subprocess.run([sys.executable, "-m", "xenobench.traffic.stl_loader", "--batch"],
                       input=json.dumps(list(todo.values())), capture_output=True, text=True, timeout=300,
                       cwd=REPO_ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    kept = 0
    for key, res in json.loads(p.stdout.strip().splitlines()[-1]).items():
        if res["ok"] and res["streams"]:
            profiles._cache[key] = res["streams"]
            if disk_key is not None:
                profiles._disk_write(names[key], res["streams"])
            kept += 1
    return kept
