"""The BPF filesystem at /sys/fs/bpf, where testbeds and tests pin programs and maps.

System mounts are left as found: whoever mounts it records the mount's id (ensure_bpffs) and
unmounts only that mount, and only when nothing but the kernel's own iterators is pinned there
(unmount_bpffs_if_unused); a bpffs mounted before, or mounted again by someone else since, stays.
"""

from __future__ import annotations

import ctypes
import struct
import subprocess
from pathlib import Path

from ..errors import TestbedError

BPFFS = Path("/sys/fs/bpf")
BPF_PRELOAD = {"maps.debug", "progs.debug"}  # iterators the kernel puts into every bpffs mount


_libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
STATX_MNT_ID, STATX_MNT_ID_UNIQUE = 0x1000, 0x4000  # linux/stat.h; the unique id since Linux 6.8
STX_MNT_ID_OFFSET = 0x90  # struct statx: __u64 stx_mnt_id


def _unique_mount_id(path: Path) -> int | None:
    """statx(2)'s 64-bit mount id of the mount `path` is on, never reused while the system runs
    (mountinfo's ids are: a mount made after ours was unmounted often gets the same one). None on
    a kernel without STATX_MNT_ID_UNIQUE."""
    buf = ctypes.create_string_buffer(256)  # sizeof(struct statx)
    if _libc.statx(AT_FDCWD, str(path).encode(), 0, STATX_MNT_ID | STATX_MNT_ID_UNIQUE, buf) != 0:
        return None
    if not struct.unpack_from("<I", buf, 0)[0] & STATX_MNT_ID_UNIQUE:
        return None
    return struct.unpack_from("<Q", buf, STX_MNT_ID_OFFSET)[0]


def bpffs_mount_id() -> int | None:
    """The identity of the bpf mount on top of /sys/fs/bpf in this mount namespace, None when
    there is none: the unique mount id where the kernel has one, else mountinfo's (field 1; later
    lines are mounted later, so the last one at the path is the one seen there)."""
    found = None
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields, _, rest = line.partition(" - ")
        f = fields.split()
        if len(f) > 4 and f[4] == str(BPFFS):
            found = int(f[0]) if rest.split()[:1] == ["bpf"] else None
    if found is None:
        return None
    return _unique_mount_id(BPFFS) or found


def ensure_bpffs() -> int | None:
    """Mount the BPF filesystem at /sys/fs/bpf if it is not; the new mount's id if this call
    mounted it (pass it to unmount_bpffs_if_unused), None if it was mounted already."""
    if bpffs_mount_id() is not None:
        return None
    p = subprocess.run(["mount", "-t", "bpf", "bpf", str(BPFFS)], capture_output=True, text=True)
    if p.returncode != 0:
        raise TestbedError(f"Failed to mount the BPF filesystem at {BPFFS}: {p.stderr.strip()}")
    return bpffs_mount_id()


def unmount_bpffs_if_unused(mounted: int | None) -> bool:
    """Undo ensure_bpffs(): unmount /sys/fs/bpf if it is still the mount `mounted` (ensure_bpffs's
    result) and nothing but the kernel's own iterators is pinned there. True if it unmounted."""
    if mounted is None or bpffs_mount_id() != mounted:
        return False
    if [p for p in BPFFS.iterdir() if p.name not in BPF_PRELOAD]:
        return False
    return subprocess.run(["umount", str(BPFFS)], capture_output=True).returncode == 0
