"""TRex STL profiles → frames → what a local generator sends (trafgen configuration, xdpgen pcap).

A profile (trex_profiles/*.py, or any TRex STL profile) is loaded by the TRex client library in a
child process (stl_loader.py) and comes back as STLStream JSON: packet bytes, mode and rate, field
engine, flow statistics. compile_frames() runs TRex's data plane over it (stl_sim.py: the
semantics of the TRex server, trex-core v3.04 src/stx/stl/) for a port (its MACs where the profile
leaves scapy's defaults, its line rate for % rates) and returns one cycle in TRex's send order:
continuous streams over the least common period of their rates and field engines (each stream's
share of the cycle is its share of TRex's rates), a profile of bursts whole, with each frame's
send time at the profile's own rates. to_trafgen() writes the cycle as a trafgen configuration
(one packet per frame, round robin: the cycle repeats exactly).

What TRex refuses, the compiler refuses too, naming the stream and the field (the server's checks,
trex-core src/stx/stl/: trex_stl_stream.h TrexStreamRate::set_rate "Rate value should be
positive."; trex_stl_rpc_cmds.cpp check_value_list, handle_range_padding; trex_stl_port.cpp
calculate_effective_factor, a profile whose rate sums to 0; trex_stl_stream_vm.cpp, every write
and checksum fix that reaches past the packet). NaN and infinite rates cannot even be sent: the
client writes them as NaN/Infinity, which is not JSON (RFC 8259) and the server's parser refuses.
What one local generator cannot do as TRex does it is refused with the numbers (check_local), and
a cycle larger than MAX_CYCLE_FRAMES frames or MAX_CYCLE_BYTES bytes is refused with its size.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .. import REPO_ROOT
from ..errors import TrafficError  # noqa: F401  (profiles raise it; importers may take it from here)
from .stl_sim import (FieldEngine, Port, compile_cycle, csum16, fix_ipv4, fix_l4, mac_bytes,  # noqa: F401
                      stream_cycle, stream_pps)

SIM_PORT = Port(bytes.fromhex("181818181818"), bytes.fromhex("101010101010"), 10e9, 0xFF00)

PROFILE_DIR = REPO_ROOT / "trex_profiles"
MAX_CYCLE_FRAMES = 1 << 22      # frames in one compiled cycle (the generator keeps each in memory)
MAX_CYCLE_BYTES = 1 << 30       # and their bytes
HEADERS = 42                    # Ethernet + IPv4 + UDP without FCS
FCS = 4
IPV4_HEADER = 20                # the shortest IPv4 header (trex_stl_stream_vm.cpp IPV4_HDR_LEN)
L4_HEADER = {11: 8, 13: 20}     # fix_checksum_hw l4_type → header bytes: UDP, TCP (17: IP only, none)


@dataclass
class Compiled:
    """One profile with its tunables, compiled: the frames of one full cycle, in send order."""
    profile: Path
    tunables: dict
    argv: list[str]
    frames: list[bytes]
    streams: list[dict] = field(repr=False, default_factory=list)
    times: list[float] = field(repr=False, default_factory=list)   # send offsets at the profile's rates
    period_s: float = 0.0          # one cycle at the profile's own rates
    finite: bool = False           # bursts only: TRex sends the cycle once

    @property
    def cycle(self) -> int:
        return len(self.frames)


def resolve_profile(profile: str | Path) -> Path:
    """A name ("udp_payload"), a path relative to the repo root or the cwd, or an absolute path."""
    p = Path(profile)
    cands = [p] if p.is_absolute() else [Path.cwd() / p, REPO_ROOT / p]
    if p.suffix != ".py" and len(p.parts) == 1:
        cands.append(PROFILE_DIR / f"{p.name}.py")
    for c in cands:
        if c.is_file():
            return c.resolve()
    raise TrafficError(f"Failed to load profile {profile}: no such file (looked in "
                       f"{', '.join(str(c) for c in cands)}); profiles: {', '.join(profile_names())}")


def profile_names() -> list[str]:
    """The profiles of trex_profiles/ by name, sorted (xb_*.py are their shared helpers)."""
    return sorted(f.stem for f in PROFILE_DIR.glob("*.py") if not f.stem.startswith("xb_"))


def tunables_argv(tunables: dict | None) -> list[str]:
    """{"class_bits": 2, "split": "70/30", "verbose": True} → ["--class_bits", "2", "--split", "70/30",
    "--verbose"]: each key as given, as TRex turns its `-t key=value` into a profile's argv
    (trex/utils/parsing_opts.py: convert_old_tunables_to_new_tunables, `--{key}`), so a profile's
    own `--pg_id` is reached; True is a bare flag (argparse store_true), None and False are left out."""
    argv: list[str] = []
    for k, v in (tunables or {}).items():
        if v is None or v is False:
            continue
        argv += [f"--{k}"] if v is True else [f"--{k}", str(v)]
    return argv


# The module-level name by which a profile declares the testbed tunables it takes (ours:
# trex_profiles/*.py). A profile without it is run as TRex runs it: with the user's tunables only.
DECLARATION = "TESTBED_TUNABLES"


def declared_tunables(profile: str | Path) -> frozenset[str]:
    """The testbed tunables a profile declares: a module-level `TESTBED_TUNABLES = ("vip", ...)`,
    a literal tuple or list of names, read from the source without running it (importing a profile
    imports the TRex client, which replaces the harness's scapy and PyYAML: stl_loader.py). A
    profile that does not declare it, or cannot be parsed, declares none (its loader then says why
    it cannot be loaded)."""
    path = resolve_profile(profile)
    if path.suffix != ".py":
        return frozenset()
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return frozenset()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == DECLARATION for t in targets):
            try:
                names = ast.literal_eval(node.value)
            except ValueError:
                names = None
            if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
                raise TrafficError(f"Failed to read profile {path}: {DECLARATION} (line {node.lineno}) must be a "
                                   "literal tuple of tunable names, like (\"vip\", \"dport\")")
            return frozenset(names)
    return frozenset()


_cache: dict[str, list[dict]] = {}      # load key → stream JSON
#: the loader's answers kept across processes (every measurement point is a process of its own, and
#: a load starts the TRex client's interpreter: ~1 s or more): one JSON file per load, named by the
#: load's key, the profile directory's every file, the loader and the client's version
DISK_CACHE = REPO_ROOT / ".xenobench" / "cache" / "stl-profiles"


def _disk_key(path: Path, key: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        client = version("lbr_trex_client")
    except PackageNotFoundError:
        client = None
    loader = Path(__file__).with_name("stl_loader.py")
    return hashlib.sha256(json.dumps([key, client, loader.stat().st_mtime_ns, sys.version,
                                      [(f.name, f.stat().st_mtime_ns) for f in sorted(path.parent.iterdir())
                                       if f.is_file()]]).encode()).hexdigest()


def _disk_read(name: str) -> list[dict] | None:
    try:
        streams = json.loads((DISK_CACHE / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    return streams if isinstance(streams, list) and streams else None


def _disk_write(name: str, streams: list[dict]) -> None:
    """Written whole or not at all (a temporary file renamed): processes load at once."""
    try:
        DISK_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = DISK_CACHE / f".{name}.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps(streams))
            tmp.replace(DISK_CACHE / f"{name}.json")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError:
        pass  # a cache that cannot be written only costs the next process its load
_compiled: dict[str, "Compiled"] = {}   # load key → compiled frames (the last 16)


def _key(path: Path, argv: list[str]) -> str:
    """Profile file, its helpers' and its tunables' identity (a changed file is reloaded)."""
    return hashlib.sha256(json.dumps([str(path), path.stat().st_mtime_ns, argv,
                                      [(f.name, f.stat().st_mtime_ns) for f in sorted(path.parent.glob("xb_*.py"))]
                                      ]).encode()).hexdigest()


def load_streams(profile: str | Path, tunables: dict | list | None = None) -> tuple[Path, list[dict]]:
    """Load a profile through STLProfile.load_py (in a child process) → STLStream JSON list.
    tunables: a dict, or an argv list as TRex passes it (["--payload", "22"])."""
    path = resolve_profile(profile)
    argv = [str(a) for a in tunables] if isinstance(tunables, (list, tuple)) else tunables_argv(tunables)
    key = _key(path, argv)
    if key in _cache:
        return path, _cache[key]
    disk = _disk_key(path, key)
    kept = _disk_read(disk)
    if kept is not None:
        _cache[key] = kept
        return path, kept
    try:
        p = subprocess.run([sys.executable, "-m", "xenobench.traffic.stl_loader", str(path), *argv],
                           capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        raise TrafficError(f"Failed to load profile {path}: the TRex loader timed out after 120 s") from None
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise TrafficError(f"Failed to load profile {path}: the TRex loader failed: "
                           f"{(p.stderr.strip().splitlines() or ['no output'])[-1]}") from None
    if not res["ok"]:
        raise TrafficError(f"Failed to load profile {path} with tunables {' '.join(argv) or '(none)'}: {res['error']}")
    if not res["streams"]:
        raise TrafficError(f"Failed to load profile {path}: it yields no streams")
    _cache[key] = res["streams"]
    _disk_write(disk, res["streams"])
    return path, res["streams"]


# --- compile: TRex's data plane (stl_sim.py) over one cycle ----------------------------------
def default_port() -> Port:
    """The port a profile is compiled for without a testbed: TRex's simulator's (its MACs
    10:10:10:10:10:10 ← 18:18:18:18:18:18, 10 Gb/s, reserved IP ids from 0xff00), so a compiled
    profile reads as TRex's own simulator writes it."""
    return SIM_PORT


def port_for(cfg) -> Port:
    """The namespace testbed's port as TRex would fill it: the loadgen interface's MAC as the
    source, the LB's ingress MAC as the destination (TRex: the resolved next hop), the line rate
    traffic.line_rate_bps (default 10 Gb/s, TRex's simulator's)."""
    lg = cfg.role("loadgen").iface()
    line = (cfg.section("traffic") or {}).get("line_rate_bps") or SIM_PORT.line_bps
    return Port(mac_bytes(lg.mac) if lg.mac else SIM_PORT.src_mac, mac_bytes(cfg.lb_mac), float(line))


def compile_stream(stream: dict, where: str, port: Port | None = None) -> list[bytes]:
    """One stream's frames over one cycle of its field engine (TRex's order), no flow statistics."""
    eng = FieldEngine(stream, where, port)
    stream_pps(stream, eng.expected_len(), port or SIM_PORT, where)
    return stream_cycle(eng, MAX_CYCLE_FRAMES, where)


def compile_streams(streams: list[dict], where: str, port: Port | None = None) -> list[bytes]:
    """The frames of one cycle of a profile's streams (STLStream JSON), in TRex's send order
    (stl_sim.compile_cycle). `where` names the profile in errors."""
    return compile_cycle(streams, where, port or SIM_PORT, MAX_CYCLE_FRAMES, MAX_CYCLE_BYTES).frames


def compile_frames(profile: str | Path, tunables: dict | None = None, port: Port | None = None) -> Compiled:
    """Load and compile a profile for a port (default_port(): TRex's simulator's; port_for(cfg):
    the testbed's): the frames of one full cycle in TRex's send order (stl_sim.compile_cycle)."""
    path = resolve_profile(profile)
    port = port or SIM_PORT
    key = _key(path, tunables_argv(tunables)) + repr(port)
    if key in _compiled:
        hit = _compiled[key]
        return Compiled(hit.profile, dict(tunables or {}), list(hit.argv), hit.frames, hit.streams, hit.times,
                        hit.period_s, hit.finite)
    path, streams = load_streams(profile, tunables)
    cyc = compile_cycle(streams, f"profile {path}", port, MAX_CYCLE_FRAMES, MAX_CYCLE_BYTES)
    c = Compiled(path, dict(tunables or {}), tunables_argv(tunables), cyc.frames, streams, cyc.times,
                 cyc.period_s, cyc.finite)
    if len(_compiled) >= 16:
        _compiled.pop(next(iter(_compiled)))
    _compiled[key] = c
    return c


def check_local(generator: str, c: Compiled, spec) -> None:
    """What a local generator (xdpgen, trafgen: one rate, the cycle repeated) cannot do as TRex
    does it, refused naming the numbers: a profile of bursts is sent once by TRex, so a trial of
    more frames than its bursts hold; bursts whose frames are not evenly spaced (an isg or ibg gap
    beside the streams' own frame gaps, or several streams' bursts at once), which one rate cannot
    repeat. Continuous profiles are sent in TRex's order at the trial's rate."""
    if not c.finite:
        return
    n = len(c.frames)
    want = spec.count if spec.count is not None else (
        math.ceil(spec.rate_pps * spec.duration_s) if spec.duration_s is not None and spec.rate_pps > 0 else None)
    if want is None or want > n:
        asked = f"{want} frames" if want is not None else "frames until stopped"
        raise TrafficError(f"Failed to start {generator}: profile {c.profile.name} is bursts of {n} frames in all, "
                           f"which TRex sends once; the trial asks for {asked} (give count={n} or fewer)")
    gaps = sorted({round(b - a, 9) for a, b in zip(c.times, c.times[1:])})
    if len(gaps) > 1:
        raise TrafficError(f"Failed to start {generator}: profile {c.profile.name}'s bursts are not evenly spaced "
                           f"(frames {gaps[0] * 1e6:g} µs to {gaps[-1] * 1e6:g} µs apart at TRex's rates); "
                           f"{generator} sends at one rate, so run it with TRex (traffic.generator: trex)")


def frames_plan(generator: str, profile, tunables: dict | None, spec, port: Port | None = None) -> dict:
    """The dry run of a generator that sends the compiled frames (trafgen, xdpgen)."""
    c = compile_frames(profile, tunables, port)
    check_local(generator, c, spec)
    return {"generator": generator, "requested_pps": spec.rate_pps, "duration_s": spec.duration_s,
            "count": spec.count, "spec": spec.to_dict(), "profile": str(c.profile), "tunables": c.argv,
            "frames_per_cycle": c.cycle, "frame_len": len(c.frames[0])}


# --- outputs ----------------------------------------------------------------------------------
def _trafgen_bytes(frame: bytes) -> str:
    """Bytes as trafgen tokens; runs of 8 or more equal bytes as fill(byte, n)."""
    out, i = [], 0
    while i < len(frame):
        j = i
        while j < len(frame) and frame[j] == frame[i]:
            j += 1
        if j - i >= 8:
            out.append(f"fill(0x{frame[i]:02x}, {j - i})")
        else:
            out.extend(f"0x{b:02x}" for b in frame[i:j])
        i = j
    return ", ".join(out)


def to_trafgen(c: Compiled) -> str:
    """trafgen configuration: one packet per frame of the cycle; trafgen sends them round robin,
    so the emitted sequence is the cycle repeated (with one CPU)."""
    head = (f"/* xenobench traffic compile: profile {c.profile.name}, tunables "
            f"{' '.join(c.argv) or '(none)'}; {c.cycle} frames = one stream cycle, sent round robin; "
            f"frame {len(c.frames[0])} B without FCS */\n")
    return head + "".join(f"{{ {_trafgen_bytes(f)} }}\n" for f in c.frames)


def write_pcap(frames, path: str | Path, times=None) -> None:
    """Classic pcap (microsecond timestamps, Ethernet); timestamps 0 unless `times` (seconds)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            us = round(times[i] * 1e6) if times else 0
            f.write(struct.pack("<IIII", us // 1_000_000, us % 1_000_000, len(fr), len(fr)))
            f.write(fr)


def read_pcap(path: str | Path) -> list[bytes]:
    """Frames of a classic pcap file (either byte order, µs or ns timestamps)."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        raise TrafficError(f"Failed to read pcap {path}: {len(data)} bytes, shorter than a pcap header")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        raise TrafficError(f"Failed to read pcap {path}: magic {magic.hex()} is not a classic pcap file")
    out, off = [], 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack_from(e + "IIII", data, off)
        off += 16
        out.append(data[off:off + incl])
        off += incl
    return out
