"""TRex STL profiles → frames → trafgen configuration.

A profile (trex_profiles/*.py) is loaded by the TRex client library in a child process
(stl_loader.py) and comes back as STLStream JSON: packet bytes plus field-engine instructions.
compile_frames() runs the field engine in Python over one full stream cycle and returns the exact
frames, in the order the generator sends them; to_trafgen() writes them as a trafgen
configuration (one packet per frame, round robin: the cycle repeats exactly).

Field-engine semantics implemented (TRex STLVmFlowVar docs): op inc/dec over [min, max] with step,
first value init_value, wrapping to min (inc) / max (dec); value_list stepping through the list
(dec: backwards from the end); write_flow_var (big/little endian, add_value);
write_mask_flow_var; fix_checksum_ipv4; fix_checksum_hw (IPv4 header + UDP/TCP checksum); the
field-engine cache (vm "cache": N frames computed once and replayed).
Random variables and next_var chains are refused (no exact cycle to compile).

What the TRex server refuses, the compiler refuses too, naming the stream and the field (the
server's checks, trex-core src/stx/stl/: trex_stl_stream.h TrexStreamRate::set_rate "Rate value
should be positive."; trex_stl_rpc_cmds.cpp check_value_list, step > list size; trex_stl_port.cpp
calculate_effective_factor, a profile whose rate sums to 0; trex_stl_stream_vm.cpp, every write
and checksum fix that reaches past the packet). NaN and infinite rates cannot even be sent: the
client writes them as NaN/Infinity, which is not JSON (RFC 8259) and the server's parser refuses.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from math import gcd, isfinite, lcm
from pathlib import Path

from .. import REPO_ROOT
from ..errors import TrafficError  # noqa: F401  (profiles raise it; importers may take it from here)

PROFILE_DIR = REPO_ROOT / "trex_profiles"
MAX_CYCLE_FRAMES = 65536        # frames in one compiled cycle (trafgen keeps each in memory)
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
                       f"{', '.join(str(c) for c in cands)}); profiles: "
                       f"{', '.join(sorted(f.stem for f in PROFILE_DIR.glob('*.py') if not f.stem.startswith('xb_')))}")


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
    return path, res["streams"]


# --- checksums ------------------------------------------------------------------------------
def csum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def fix_ipv4(buf: bytearray, off: int) -> None:
    ihl = (buf[off] & 0x0F) * 4
    buf[off + 10:off + 12] = b"\0\0"
    buf[off + 10:off + 12] = struct.pack("!H", csum16(bytes(buf[off:off + ihl])))


def fix_l4(buf: bytearray, l3: int, l4: int, proto_csum_off: int) -> None:
    total = struct.unpack_from("!H", buf, l3 + 2)[0]
    ihl = (buf[l3] & 0x0F) * 4
    l4len = total - ihl
    seg = bytearray(buf[l4:l4 + l4len])
    seg[proto_csum_off:proto_csum_off + 2] = b"\0\0"
    pseudo = bytes(buf[l3 + 12:l3 + 20]) + struct.pack("!BBH", 0, buf[l3 + 9], l4len)
    c = csum16(pseudo + bytes(seg))
    if c == 0 and buf[l3 + 9] == 17:
        c = 0xFFFF  # UDP: 0 means "no checksum"
    buf[l4 + proto_csum_off:l4 + proto_csum_off + 2] = struct.pack("!H", c)


def _uint(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


# --- field engine -----------------------------------------------------------------------------
class _Var:
    """A flow variable's values over one cycle, checked as the TRex server checks them
    (trex-core src/stx/stl/trex_stl_rpc_cmds.cpp parse_vm_instr_flow_var, check_min_max,
    check_value_list: size 1, 2, 4 or 8; step > 0; min <= init <= max; every value within the size)."""

    def __init__(self, ins: dict, where: str):
        self.name, self.size = ins["name"], ins["size"]
        if ins.get("next_var"):
            raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} uses next_var, "
                               "which the trafgen compiler does not support")
        if ins["op"] not in ("inc", "dec"):
            raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has op {ins['op']!r}; "
                               "only inc and dec have an exact cycle to compile")
        if self.size not in (1, 2, 4, 8):
            raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has size {self.size!r}; "
                               "TRex takes 1, 2, 4 or 8 bytes")
        self.op, self.step = ins["op"], ins.get("step", 1)
        if not _uint(self.step) or self.step == 0:
            raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has step {self.step!r}; "
                               "TRex takes a whole number > 0")
        top = (1 << (8 * self.size)) - 1
        self.values = ins.get("value_list")
        if self.values is not None:
            seq = list(self.values)
            if not seq:  # TRex: check_value_list refuses a step larger than the list
                raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has an empty value_list; "
                                   "give it at least one value")
            if self.step != 1:  # TRex steps through a list by `step` (inc_mod_list); this compiler by 1
                raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} steps its value_list "
                                   f"by {self.step}; the trafgen compiler takes step 1 only")
            bad = next((x for x in seq if not _uint(x) or x > top), None)
            if bad is not None:
                raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} lists value {bad!r}, "
                                   f"not a whole number in 0..{top} ({self.size} bytes)")
            self.seq = seq if self.op == "inc" else seq[::-1]
        else:
            lo, hi, v = ins["min_value"], ins["max_value"], ins["init_value"]
            for key, x in (("min_value", lo), ("max_value", hi), ("init_value", v)):
                if not _uint(x) or x > top:
                    raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has {key} {x!r}, "
                                       f"not a whole number in 0..{top} ({self.size} bytes)")
            if not lo <= v <= hi:
                raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} needs min_value <= "
                                   f"init_value <= max_value, has {lo} <= {v} <= {hi}")
            seq, start = [], v
            while True:
                seq.append(v)
                if len(seq) > MAX_CYCLE_FRAMES:
                    raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} cycles over "
                                       f"more than {MAX_CYCLE_FRAMES} values")
                if self.op == "inc":
                    v = v + self.step if v + self.step <= hi else lo
                else:
                    v = v - self.step if v - self.step >= lo else hi
                if v == start:
                    break
            self.seq = seq

    def value(self, n: int) -> int:
        return self.seq[n % len(self.seq)]


def _check_reach(ops: list[dict], vars_: dict, size: int, base: bytes, where: str) -> None:
    """Every write and checksum fix stays inside the packet, as the TRex server checks when it
    compiles a stream's field engine (trex-core src/stx/stl/trex_stl_stream_vm.cpp,
    StreamVm::build_program: "packet write with packet_offset ... bigger than packet size", "fix
    ipv4 command offset ... is too high relative to packet size", "fix hw command offsets ...")."""
    def past(what: str, first: int, end: int) -> TrafficError:
        return TrafficError(f"Failed to compile {where}: {what} at pkt_offset {first} reaches byte {end - 1}, "
                            f"past the {size}-byte packet")
    for o in ops:
        t = o["type"]
        if t in ("write_flow_var", "write_mask_flow_var"):
            if o["name"] not in vars_:
                raise TrafficError(f"Failed to compile {where}: {t} names flow variable {o['name']!r}, which the "
                                   f"stream does not define (it has {', '.join(map(repr, vars_)) or 'none'})")
            off = o["pkt_offset"]
            if t == "write_flow_var":
                width = vars_[o["name"]].size
            else:
                width = o["pkt_cast_size"]
                if width not in (1, 2, 4):
                    raise TrafficError(f"Failed to compile {where}: write_mask_flow_var of {o['name']!r} has "
                                       f"pkt_cast_size {width}; TRex takes 1, 2 or 4")
            if off < 0 or off + width > size:
                raise past(f"{t} of {o['name']!r} ({width} B)", off, off + width)
        elif t == "fix_checksum_ipv4":
            off = o["pkt_offset"]
            if off < 0 or off + IPV4_HEADER > size:
                raise past("fix_checksum_ipv4 (a 20-byte IPv4 header)", off, off + IPV4_HEADER)
            ihl = (base[off] & 0x0F) * 4
            if off + max(ihl, IPV4_HEADER) > size:
                raise past(f"fix_checksum_ipv4 (the packet's {ihl}-byte IPv4 header)", off, off + ihl)
        elif t == "fix_checksum_hw":
            l2, l3 = o["l2_len"], o["l3_len"]
            if l2 < 14:
                raise TrafficError(f"Failed to compile {where}: fix_checksum_hw has l2_len {l2}; TRex takes 14 or more")
            end = l2 + max(l3, IPV4_HEADER) + L4_HEADER.get(o["l4_type"], 0)
            if end > size:
                raise past(f"fix_checksum_hw (l2_len {l2}, l3_len {l3}, l4_type {o['l4_type']})", l2, end)


def compile_stream(stream: dict, where: str) -> list[bytes]:
    """Frames of one full cycle of one stream's field engine."""
    base = base64.b64decode(stream["packet"]["binary"])
    ins = (stream.get("vm") or {}).get("instructions", [])
    vars_: dict[str, _Var] = {}
    ops = []
    for i in ins:
        t = i["type"]
        if t == "flow_var":
            vars_[i["name"]] = _Var(i, where)
        elif t in ("write_flow_var", "write_mask_flow_var", "fix_checksum_ipv4", "fix_checksum_hw"):
            ops.append(i)
        else:
            raise TrafficError(f"Failed to compile {where}: field-engine instruction {t!r} is not "
                               "supported by the trafgen compiler")
    _check_reach(ops, vars_, len(base), base, where)
    cycle = 1
    for v in vars_.values():
        cycle = lcm(cycle, len(v.seq))
    if cycle > MAX_CYCLE_FRAMES:
        raise TrafficError(f"Failed to compile {where}: a stream cycle of {cycle} frames exceeds {MAX_CYCLE_FRAMES}")
    frames = []
    for n in range(cycle):
        buf = bytearray(base)
        for o in ops:
            t = o["type"]
            if t == "write_flow_var":
                v = vars_[o["name"]]
                val = (v.value(n) + o.get("add_value", 0)) % (1 << (8 * v.size))
                buf[o["pkt_offset"]:o["pkt_offset"] + v.size] = val.to_bytes(
                    v.size, "big" if o.get("is_big_endian", True) else "little")
            elif t == "write_mask_flow_var":
                v = vars_[o["name"]]
                sz, off = o["pkt_cast_size"], o["pkt_offset"]
                order = "big" if o.get("is_big_endian", True) else "little"
                val = v.value(n) + o.get("add_value", 0)
                sh = o.get("shift", 0)
                val = val << sh if sh >= 0 else val >> -sh
                old = int.from_bytes(buf[off:off + sz], order)
                new = (old & ~o["mask"]) | (val & o["mask"])
                buf[off:off + sz] = (new % (1 << (8 * sz))).to_bytes(sz, order)
            elif t == "fix_checksum_ipv4":
                fix_ipv4(buf, o["pkt_offset"])
            else:  # fix_checksum_hw
                l3 = o["l2_len"]
                l4 = l3 + o["l3_len"]
                fix_ipv4(buf, l3)
                if o["l4_type"] == 11:       # UDP
                    fix_l4(buf, l3, l4, 6)
                elif o["l4_type"] == 13:     # TCP
                    fix_l4(buf, l3, l4, 16)
        frames.append(bytes(buf))
    cache = (stream.get("vm") or {}).get("cache") or 0
    if cache and cache % cycle:
        # TRex computes `cache` frames once and replays them (STLScVmRaw cache_size); a whole
        # number of cycles replays the cycle itself, anything else is its own, shorter sequence
        frames = [frames[n % cycle] for n in range(cache)]
    return frames


def stream_rate(stream: dict, where: str) -> Fraction:
    """A continuous stream's pps as an exact fraction; refused where TRex refuses it."""
    mode = stream.get("mode", {})
    rate = mode.get("rate", {})
    if mode.get("type") != "continuous" or rate.get("type") != "pps":
        raise TrafficError(f"Failed to compile {where}: mode {mode.get('type')!r} with rate {rate.get('type')!r}; "
                           "the trafgen compiler takes continuous streams with a pps rate")
    pps = rate.get("value")
    # TRex: TrexStreamRate::set_rate refuses a rate <= 0 (trex_stl_stream.h), enabled or not; NaN
    # and infinity are no JSON numbers, which the server's JSON-RPC parser refuses
    if isinstance(pps, bool) or not isinstance(pps, (int, float)) or not isfinite(pps) or pps <= 0:
        raise TrafficError(f"Failed to compile {where}: mode.rate pps {pps!r} is not a finite number > 0 "
                           "(TRex refuses it, enabled or not: give the stream a positive rate)")
    exact = Fraction(pps).limit_denominator(1000)
    if exact == 0:
        raise TrafficError(f"Failed to compile {where}: mode.rate pps {pps!r} is below the compiler's resolution "
                           "of 0.001 pps")
    return exact


def compile_streams(streams: list[dict], where: str) -> list[bytes]:
    """The frames of one full cycle of a profile's streams (STLStream JSON) in send order: the
    enabled, self-starting continuous streams interleaved by smooth weighted round robin in
    proportion to their pps. `where` names the profile in errors."""
    per = []
    for i, s in enumerate(streams):
        w = f"stream {i} of {where}"
        rate = stream_rate(s, w)
        if s.get("enabled", True) and s.get("self_start", True):
            per.append((rate, compile_stream(s, w)))
    if not per:  # TRex: the port's rate sums to 0, calculate_effective_factor refuses (trex_stl_port.cpp)
        raise TrafficError(f"Failed to compile {where}: none of its {len(streams)} streams is enabled and "
                           "self-starting, so there is nothing to send (set enabled=True, self_start=True on one)")
    if len(per) == 1:
        return per[0][1]
    den = lcm(*[r.denominator for r, _ in per])
    w = [int(r * den) for r, _ in per]
    g = gcd(*w)
    w = [x // g for x in w]
    total = sum(w)
    rounds = 1
    for (_, fr), wi in zip(per, w):
        rounds = lcm(rounds, len(fr) // gcd(len(fr), wi))
    if rounds * total > MAX_CYCLE_FRAMES:
        raise TrafficError(f"Failed to compile {where}: interleaving {len(per)} streams needs "
                           f"{rounds * total} frames, more than {MAX_CYCLE_FRAMES}")
    cur, idx, frames = [0] * len(w), [0] * len(w), []
    for _ in range(rounds * total):
        for j, wj in enumerate(w):
            cur[j] += wj
        j = max(range(len(w)), key=lambda i: (cur[i], -i))
        cur[j] -= total
        frames.append(per[j][1][idx[j] % len(per[j][1])])
        idx[j] += 1
    return frames


def compile_frames(profile: str | Path, tunables: dict | None = None) -> Compiled:
    """Load and compile a profile: the frames of one full cycle in send order (compile_streams)."""
    path = resolve_profile(profile)
    key = _key(path, tunables_argv(tunables))
    if key in _compiled:
        hit = _compiled[key]
        return Compiled(hit.profile, dict(tunables or {}), list(hit.argv), hit.frames, hit.streams)
    path, streams = load_streams(profile, tunables)
    frames = compile_streams(streams, f"profile {path}")
    c = Compiled(path, dict(tunables or {}), tunables_argv(tunables), frames, streams)
    if len(_compiled) >= 16:
        _compiled.pop(next(iter(_compiled)))
    _compiled[key] = c
    return c


def frames_plan(generator: str, profile, tunables: dict | None, spec) -> dict:
    """The dry run of a generator that sends the compiled frames (trafgen, xdpgen)."""
    c = compile_frames(profile, tunables)
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


def write_pcap(frames, path: str | Path) -> None:
    """Classic pcap (microsecond timestamps, Ethernet), timestamps 0."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for fr in frames:
            f.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)))
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
