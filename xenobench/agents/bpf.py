"""BPF plumbing shared by every XDP agent (the eBPF LB's and the XDP DNS responder's
controllers): bpftool for loading, pinning and map access, and the controller life cycle.

Why bpftool and not a loader per program: bpftool (libbpf inside) is the reference tool for
loading, pinning, map updates and BPF_PROG_TEST_RUN; driving it keeps each program's
configuration in one Python place next to its parser (the backends file, the DNS zone), and the
pinned maps let `stats` read counters from another process, on the node, over any transport.

The life cycle (`run_controller`): refuse an interface that already has an XDP program, load and
pin, fill the maps, attach (native unless generic), print one JSON line when attached and one per
interval, and on SIGINT/SIGTERM detach, read the final counts, unpin and print them.

"Loaded, not attached" (attach=False; the LB agents' --no-attach): the same life cycle without the attach; the "started" line
reports `"attached": false` and the pinned program's path (`prog_pin`), which someone else attaches
(the interleaved rate design's switcher, xenobench.xdpswitch, swaps several such programs on one
port). Another program on the interface is then no reason to refuse, and at exit the controller
detaches only its own program, if it is still attached, before it unpins.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from ..errors import XenobenchError


def _hex(b: bytes) -> list[str]:
    return [f"{x:02x}" for x in b]


def bpftool(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["bpftool", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        said = (p.stderr.strip() or p.stdout.strip()).splitlines()
        # one line (a caller may show only an agent's last line): libbpf's lines, then bpftool's verdict
        raise XenobenchError(f"Failed to run `bpftool {' '.join(args)}`: {'; '.join(x.strip() for x in said[-4:])}")
    return p


def bpftool_stdout(*args: str) -> str:
    return bpftool(*args).stdout


def map_update(pin: Path, key: bytes, value: bytes) -> None:
    bpftool("map", "update", "pinned", str(pin), "key", "hex", *_hex(key), "value", "hex", *_hex(value))


def map_update_batch(updates: list[tuple[Path, bytes, bytes]]) -> None:
    """Several map updates, in order, by one bpftool process (`bpftool batch file -`: a runtime
    change of an LB costs one process spawn, not one per entry); stops at the first that fails."""
    if not updates:
        return
    cmds = "".join(f"map update pinned {pin} key hex {' '.join(_hex(k))} value hex {' '.join(_hex(v))}\n"
                   for pin, k, v in updates)
    p = subprocess.run(["bpftool", "batch", "file", "-"], input=cmds, capture_output=True, text=True)
    if p.returncode != 0:
        raise XenobenchError(f"Failed to update maps by `bpftool batch`: {(p.stderr or p.stdout).strip()[-500:]}")


BPF_FS_MAGIC = 0xCAFE4A11  # linux/magic.h
BPFFS_FIX = "mount -t bpf bpf /sys/fs/bpf"
FS_NAMES = {0x62656572: "sysfs", 0x01021994: "tmpfs", 0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs",
            0x794C7630: "overlayfs"}  # linux/magic.h, what /sys/fs/bpf is found on instead
_libc = ctypes.CDLL(None, use_errno=True)


def fs_type(path: Path) -> tuple[Path, int | None]:
    """(the nearest existing directory of `path`, the magic number of its file system: statfs(2)
    f_type, the first field of struct statfs; None if statfs failed)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if _libc.statfs(str(p).encode(), buf) != 0:
        return p, None
    return p, struct.unpack_from("=q" if ctypes.sizeof(ctypes.c_long) == 8 else "=i", buf, 0)[0] & 0xFFFFFFFF


def require_bpffs(pindir: Path) -> None:
    """Refuse to pin under a directory that is not on a BPF file system (a node whose
    /sys/fs/bpf was never mounted: the directory exists on sysfs, where nothing can be created)."""
    where, magic = fs_type(pindir)
    if magic != BPF_FS_MAGIC:
        what = (f"{FS_NAMES.get(magic, 'file system type')} 0x{magic:x}" if magic is not None
                else "no file system statfs could read")
        raise XenobenchError(f"Failed to pin under {pindir}: {where} is not a BPF file system ({what}); "
                             f"mount one there: `{BPFFS_FIX}`")


def load_pinned(obj: Path, pindir: Path, build_hint: str) -> None:
    """Load every program of an object and pin programs (pindir/progs) and maps (pindir/maps)."""
    if not obj.exists():
        raise XenobenchError(f"Failed to load {obj}: not built (run `{build_hint}`)")
    require_bpffs(pindir)
    if pindir.exists():
        shutil.rmtree(pindir)
    (pindir / "maps").mkdir(parents=True)
    bpftool("prog", "loadall", str(obj), str(pindir / "progs"), "type", "xdp", "pinmaps", str(pindir / "maps"))


def percpu_sum(pin: Path, fmt: str, run: Callable[..., str] = bpftool_stdout) -> dict[int, tuple]:
    """Per-CPU array → {key: summed tuple} (bpftool JSON dump; `run` executes bpftool where the
    maps are pinned: here, or on a node through a transport)."""
    dump = json.loads(run("map", "dump", "pinned", str(pin), "-j") or "[]")
    return {struct.unpack("<I", bytes(int(x, 16) for x in ent["key"]))[0]: _cpu_sum(ent, fmt) for ent in dump}


def _cpu_sum(entry: dict, fmt: str) -> tuple | None:
    """One per-CPU entry of bpftool's JSON ({"values": [{"cpu", "value": [hex bytes]}]}) summed over the CPUs."""
    size = struct.calcsize(fmt)
    tot = None
    for v in entry["values"]:
        t = struct.unpack(fmt, bytes(int(x, 16) for x in v["value"])[:size])
        tot = t if tot is None else tuple(a + b for a, b in zip(tot, t))
    return tot


def percpu_lookup(pin: Path, keys, fmt: str, run: Callable[..., str] = bpftool_stdout) -> dict[int, tuple]:
    """Per-CPU array entries `keys` → {key: summed tuple}, one `map lookup` each. For a large array
    of which a few entries count (Katran's reals_stats: 4096 entries, 2 of them a testbed's) a dump
    and its parse cost ~0.1 s of CPU, which an agent reading its stats every interval takes from
    the CPUs a trial measures."""
    return {key: _cpu_sum(json.loads(run("map", "lookup", "pinned", str(pin), "key", *map(str, struct.pack("<I", key)),
                                         "-j")), fmt)
            for key in keys}


def counters(pin: Path, names: tuple[str, ...], run: Callable[..., str] = bpftool_stdout) -> dict[str, int]:
    """A per-CPU array of u64 counters indexed by an enum, as {name: total}."""
    st = percpu_sum(pin, "<Q", run)
    return {name: st.get(i, (0,))[0] for i, name in enumerate(names)}


def ip_link(dev: str) -> dict | None:
    """`ip -j link show dev DEV`'s entry, None if there is no such device."""
    p = subprocess.run(["ip", "-j", "link", "show", "dev", dev], capture_output=True, text=True)
    links = json.loads(p.stdout or "[]") if p.returncode == 0 else []
    return links[0] if links else None


def attached_prog(dev: str) -> int | None:
    link = ip_link(dev)
    xdp = link.get("xdp") if link else None
    return xdp.get("prog", {}).get("id") if xdp else None


def pinned_prog_id(pin: Path) -> int | None:
    """The id of the program pinned at `pin`, None if there is none."""
    p = bpftool("-j", "prog", "show", "pinned", str(pin), check=False)
    try:
        return json.loads(p.stdout).get("id") if p.returncode == 0 else None
    except ValueError:
        return None


def controller_parser(prog: str, description: str, interval_default: float) -> tuple[argparse.ArgumentParser,
                                                                                 argparse.ArgumentParser]:
    """The command line every XDP controller shares: `run` with --pin-dir, --interval, --generic;
    returns (parser, the run subparser) for the controller's own options."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="load, attach, print counters as JSON lines until SIGINT/SIGTERM")
    r.add_argument("--pin-dir", required=True, help="bpffs directory for the pinned programs and maps")
    r.add_argument("--interval", type=float, default=interval_default,
                   help="seconds between counter lines (0: only at exit)")
    r.add_argument("--generic", action="store_true", help="generic (skb) mode instead of native")
    return ap, r


def keep_lb_state(state_dir: str | Path, mode: str, backends: str | Path) -> None:
    """What `lb stats` of an LB controller reads once it runs: bpffs holds only BPF objects, so the
    mode and a copy of the backends file (its suffix kept: JSON or YAML) go to state_dir."""
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    (state / "mode").write_text(mode)
    for old in state.glob("backends.*"):
        old.unlink()
    shutil.copyfile(backends, state / ("backends" + Path(backends).suffix))


def run_controller(*, what: str, iface: str, pindir: Path, prog: str, generic: bool,
                   setup: Callable[[], dict], read_stats: Callable[[], dict], interval: float,
                   after_attach: Callable[[], None] | None = None,
                   on_update: Callable[[], dict] | None = None, attach: bool = True) -> int:
    """The controller life cycle (module docstring). `setup` validates, loads (load_pinned) and
    fills the maps and returns what the "started" line reports; exit codes: 2 bad input or load,
    3 interface busy, 4 attach failed. With `on_update`, SIGHUP applies a runtime change while the
    program stays attached (handle_update). attach=False: loaded, not attached (module docstring)."""
    pin = pindir / "progs" / prog
    if attach and (pid := attached_prog(iface)) is not None:
        print(f"Failed to start {what} on {iface}: an XDP program (id {pid}) is already attached; "
              "stop it first", file=sys.stderr)
        return 3
    try:
        info = setup()
    except (XenobenchError, ValueError) as e:
        shutil.rmtree(pindir, ignore_errors=True)
        print(str(e), file=sys.stderr)
        return 2
    mode = "xdpgeneric" if generic else "xdpdrv"
    ours = pinned_prog_id(pin)
    if attach:
        p = subprocess.run(["ip", "link", "set", "dev", iface, mode, "pinned", str(pin)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            shutil.rmtree(pindir, ignore_errors=True)
            print(f"Failed to attach {what} ({mode}) to {iface}: {p.stderr.strip()}", file=sys.stderr)
            return 4
    info = {**info, "attached": attach, "prog_pin": str(pin), "prog_id": ours}
    stop: list[int] = []

    def request_stop(*_):
        stop.append(1)

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        if after_attach:
            after_attach()
        print(json.dumps({"event": "started", **info}), flush=True)
        next_t = time.monotonic() + interval
        updates = 0
        if on_update:  # SIGHUP is taken synchronously: the loop wakes on it at once
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
        while not stop:
            if on_update is None:
                time.sleep(0.05)
            elif signal.sigtimedwait([signal.SIGHUP], 0.05) is not None:
                updates += 1
                handle_update(on_update, updates)
            if interval > 0 and time.monotonic() >= next_t:
                next_t += interval
                print(json.dumps({"time": time.time(), **read_stats()}), flush=True)
    finally:
        if attach or (ours is not None and attached_prog(iface) == ours):  # not attached: only our own
            subprocess.run(["ip", "link", "set", "dev", iface, mode, "off"], capture_output=True)
        try:
            final = read_stats()
        except XenobenchError:
            final = {}
        shutil.rmtree(pindir, ignore_errors=True)
        print(json.dumps({"event": "stopped", **final}), flush=True)
    return 0


def handle_update(on_update: Callable[[], dict], n: int) -> dict:
    """Apply one runtime change (SIGHUP) and print its outcome as one JSON line: {"event":
    "updated", "update": n, "t_received", "t_done" (CLOCK_MONOTONIC, s), "apply_s", ...what
    on_update reports} or {"event": "update_refused", "update": n, "error"}; a refused change
    leaves the running configuration as it was (on_update validates before it writes a map)."""
    t0 = time.monotonic()
    try:
        info = on_update()
    except (XenobenchError, ValueError, OSError) as e:
        out = {"event": "update_refused", "update": n, "t_received": t0, "error": str(e)}
    else:
        t1 = time.monotonic()
        out = {"event": "updated", "update": n, "t_received": t0, "t_done": t1, "apply_s": t1 - t0, **info}
    print(json.dumps(out), flush=True)
    return out
