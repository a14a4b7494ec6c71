"""TRex's stateless data plane, in Python: what a TRex port sends for a profile's streams.

The semantics are TRex's, as its server (trex-core v3.04, src/stx/stl/) implements them; the
code here is this project's own:

- Rates (trex_stl_stream.h, TrexStreamRate): pps as given; bps_L2 → pps = bps_L2 / (8 x size);
  bps_L1 → bps_L2 = bps_L1 x size / (size + 20); percentage → bps_L1 = percentage / 100 x the
  port's line rate; size = the stream's expected length + 4 (FCS). A field engine that changes the
  length (trim_pkt_size) gives the expected length of its variable: the mean of a value list, the
  middle of an inc/dec range, and for random TRex's average of its generator over the range.
- Scheduling (trex_stl_stream_node.h, trex_stl_dp_core.cpp): every self-starting stream's first
  frame at isg; then one frame every 1/pps; a single burst is a multi-burst of one; after a burst's
  last frame the next burst follows ibg later; after a stream's last burst the stream named by
  `next` starts, isg after that last frame; action_count counts the starts a loop makes back to an
  inactive stream. Frames at equal times leave in the order the streams were added.
- Field engine (trex_stl_stream_vm.h/.cpp): flow_var inc/dec over [min, max] by step (a range
  that is no whole number of steps padded as the server pads it: inc raises max, dec lowers min)
  wrapping as TRex wraps ("restart consumes also 1"), the first frame at init_value; value_list
  stepped by index; random from TRex's generator (a 15-bit linear congruential generator, seeded
  per stream by random_seed x 514229); flow_var_rand_limit (repeatable random: its own seed,
  restarted every `limit` values); tuple_flow_var (IP inner, port outer, limit_flows restarting
  both); next_var (a variable steps only when the one pointing to it wraps, or for repeatable
  random restarts); write_flow_var, write_mask_flow_var, trim_pkt_size, fix_checksum_ipv4,
  fix_checksum_hw (the checksums as the NIC's offload puts them on the wire: IPv4 header and
  UDP/TCP in full), fix_checksum_icmpv6; the vm cache (N frames computed once, replayed).
- Split to cores (trex_stl_streams_compiler.cpp, trex_stl_vm_splitter.cpp): on N DP cores a
  stream runs at pps / N on each, core i starting i frame gaps later; a burst's frames shared out
  (the remainder to the first cores, the others waiting it out); each variable with split_to_cores
  starts i steps further and steps N times as far, a repeatable random's seed and limit split as
  TRex splits them, a tuple's IP as the outer variable; each core's random generator seeded by its
  index; latency streams and streams pinned to a core stay on one core.
- The port fills what the profile leaves: source and destination MAC unless the stream's flags say
  the packet's own (STLStream sets them when the scapy packet names its MACs), as update_mac_addr
  does before the field engine runs.
- Flow statistics (trex_stl_fs.cpp, flow_stat_parser.cpp): a "stats" stream's IPv4 id (IPv6:
  flow label) becomes the reserved id of its hardware counter, and the TOS (traffic class) gets
  bit 0x01; a "latency" stream's id becomes 0xffff, the same bit, and its last 16 bytes the latency
  header (magic 0xAB, flow sequence, hardware id, sequence number, timestamp), written over the end
  of the packet as TRex's driver writes it (the frame keeps its length). A stream without flow
  statistics whose IPv4 id falls in the reserved range has it moved out (id & 0xefff).
"""

from __future__ import annotations

import base64
import heapq
import struct
from dataclasses import dataclass, field
from fractions import Fraction
from math import gcd, lcm

from ..errors import TrafficError

MIN_FRAME = 60                      # Ethernet minimum without FCS: shorter frames are padded
FCS = 4
L1_OVERHEAD = 20                    # preamble, SFD, inter-frame gap
MAX_FLOW_STATS = 1023               # trex_defs.h (hardware counters of "stats" rules)
IP_ID_RESERVE_BASE = 0xFFFF - MAX_FLOW_STATS   # trex_stl_fs.h; TRex's simulator (and i350) use 0xff00
LATENCY_IP_ID = 0xFFFF              # FLOW_STAT_PAYLOAD_IP_ID
LATENCY_MAGIC = 0xAB
LATENCY_TRAILER = 16


@dataclass(frozen=True)
class Port:
    """The sending port: its MAC, the MAC it sends to (TRex: the resolved next hop), line rate."""
    src_mac: bytes
    dst_mac: bytes
    line_bps: float
    ip_id_base: int = IP_ID_RESERVE_BASE


def mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise TrafficError(f"Failed to read MAC address {mac!r}: expected six hex pairs like 02:00:00:00:05:00")
    return bytes(int(p, 16) for p in parts)


# --- TRex's random generator ---------------------------------------------------------------
class Rand:
    """TRex's fastrand: a linear congruential generator returning 15 bits (vm_rand16); vm_rand32
    and vm_rand64 concatenate draws."""

    def __init__(self, seed: int):
        self.s = seed & 0xFFFFFFFF

    def r16(self) -> int:
        self.s = (214013 * self.s + 2531011) & 0xFFFFFFFF
        return (self.s >> 16) & 0x7FFF

    def r32(self) -> int:
        return ((self.r16() << 16) + self.r16()) & 0xFFFFFFFF

    def r64(self) -> int:
        return ((self.r32() << 32) + self.r32()) & 0xFFFFFFFFFFFFFFFF


def rand_average(rng: int) -> float:
    """The mean of min + (r % (rng + 1)) over TRex's 15-bit generator (CFastRandUtil's average)."""
    n = rng + 1
    full, rest = divmod(0x8000, n)
    return (full * n * (n - 1) / 2 + rest * (rest - 1) / 2) / 0x8000


def inc_mod(lo: int, hi: int, v: int, step: int) -> tuple[int, bool]:
    left = hi - v
    return (v + step, False) if step <= left else (lo + (step - left - 1), True)


def dec_mod(lo: int, hi: int, v: int, step: int) -> tuple[int, bool]:
    left = v - lo
    return (v - step, False) if step <= left else (hi - (step - left - 1), True)


# --- field engine ----------------------------------------------------------------------------
class _FlowVar:
    """flow_var: inc/dec over a range or a value list, or random."""

    def __init__(self, ins: dict, where: str):
        self.name, self.size, self.op = ins["name"], ins["size"], ins["op"]
        if self.size not in (1, 2, 4, 8):
            raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has size {self.size!r}; "
                               "TRex takes 1, 2, 4 or 8 bytes")
        if self.op not in ("inc", "dec", "random"):
            raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has op {self.op!r}; "
                               "TRex takes inc, dec or random")
        top = (1 << (8 * self.size)) - 1
        self.top = top
        step = ins.get("step", 1)
        if not _uint(step) or step == 0:
            raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has step {step!r}; "
                               "TRex takes a whole number > 0")
        self.next_var = ins.get("next_var") or None
        self.list = ins.get("value_list")
        if self.list is not None:
            seq = list(self.list)
            if not seq:
                raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has an empty value_list; "
                                   "give it at least one value")
            if step > len(seq):  # trex_stl_rpc_cmds.cpp check_value_list
                raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} steps {step} through a "
                                   f"value_list of {len(seq)}; TRex takes a step no larger than the list")
            bad = next((x for x in seq if not _uint(x) or x > top), None)
            if bad is not None:
                raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} lists value {bad!r}, "
                                   f"not a whole number in 0..{top} ({self.size} bytes)")
            self.full_step = step
            self.step = step % len(seq)
            self.index = 0 if self.op == "inc" else len(seq) - 1
            self.lo, self.hi = min(seq), max(seq)
            self.value = seq[self.index]
            return
        lo, hi, init = ins["min_value"], ins["max_value"], ins["init_value"]
        for key, x in (("min_value", lo), ("max_value", hi), ("init_value", init)):
            if not _uint(x) or x > top:
                raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} has {key} {x!r}, "
                                   f"not a whole number in 0..{top} ({self.size} bytes)")
        if not lo <= init <= hi:
            raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r} needs min_value <= "
                               f"init_value <= max_value, has {lo} <= {init} <= {hi}")
        if self.op != "random":
            pad = (hi - lo + 1) % step  # the server pads the range to whole steps (handle_range_padding)
            if pad:
                if self.op == "inc":
                    hi += step - pad
                else:
                    lo -= step - pad
                if hi > top or lo < 0:
                    raise TrafficError(f"Failed to compile {where}: flow variable {self.name!r}: could not pad "
                                       f"range to be a true cycle - '(max_value - min_value + 1) % step' should be "
                                       "zero (TRex's message)")
        self.lo, self.hi = lo, hi
        self.full_step = step
        self.step = step % (hi - lo + 1)
        # the state before the first frame: one step back from init_value (set_bss_init_value)
        if self.op == "inc":
            self.value = dec_mod(lo, hi, init, self.step)[0]
        elif self.op == "dec":
            self.value = inc_mod(lo, hi, init, self.step)[0]
        else:
            self.value = init

    def split(self, phase: int, mul: int) -> None:
        """This variable on DP core `phase` of `mul` (StreamVmInstructionFlowMan::update): it
        starts `phase` steps further and steps `mul` times as far."""
        if self.op == "random":
            return
        if self.list is not None:
            n = len(self.list)
            adv = (self.step * phase) % n
            self.index = (self.index + adv) % n if self.op == "inc" else (self.index - adv) % n
            self.step = (self.step * mul) % n
            self.value = self.list[self.index]
            return
        rng = self.hi - self.lo + 1
        first = (inc_mod if self.op == "inc" else dec_mod)(self.lo, self.hi, self.value, self.step)[0]
        adv = (self.step * phase) % rng
        first = (inc_mod if self.op == "inc" else dec_mod)(self.lo, self.hi, first, adv)[0]
        self.step = (self.full_step * mul) % rng
        self.value = (dec_mod if self.op == "inc" else inc_mod)(self.lo, self.hi, first, self.step)[0]

    def run(self, rnd: Rand, chained: bool) -> bool:
        """Advance one frame; True when the variables this one points to (next_var) run too."""
        if self.list is not None:
            n = len(self.list)
            if self.op == "random":
                self.value = self.list[rnd.r16() % n]
                return True
            if self.op == "inc":
                go = not (chained and self.index >= self.step)
                self.value = self.list[self.index]
                self.index = (self.index + self.step) % n
            else:
                go = not (chained and self.index + self.step < n)
                self.value = self.list[self.index]
                nxt = self.index - self.step
                self.index = nxt if nxt >= 0 else n + nxt
            return go
        if self.op == "inc":
            go = not (chained and self.hi - self.value >= self.step)
            self.value = inc_mod(self.lo, self.hi, self.value, self.step)[0]
            return go
        if self.op == "dec":
            go = not (chained and self.value - self.lo >= self.step)
            self.value = dec_mod(self.lo, self.hi, self.value, self.step)[0]
            return go
        rng = self.hi - self.lo
        if self.size <= 2:
            self.value = self.lo + rnd.r16() % (rng + 1)
        elif self.size == 4:
            self.value = self.lo + rnd.r32() % (rng + 1)
        else:
            self.value = rnd.r64() if rng == (1 << 64) - 1 else self.lo + rnd.r64() % (rng + 1)
        return True

    def period(self) -> int | None:
        """Frames until this variable's state repeats (None: random, it does not)."""
        if self.op == "random":
            return None
        n = len(self.list) if self.list is not None else self.hi - self.lo + 1
        return n // gcd(n, self.step) if self.step else 1

    def expected_len(self) -> float:
        if self.list is not None:
            return sum(self.list) / len(self.list)
        if self.op == "random":
            return self.lo + rand_average(self.hi - self.lo)
        return (self.lo + self.hi) / 2


class _RandLimit:
    """flow_var_rand_limit (STLVmFlowVarRepeatableRandom): its own generator from its seed,
    restarted after `limit` values."""

    def __init__(self, ins: dict, where: str):
        self.name, self.size = ins["name"], ins["size"]
        if self.size not in (1, 2, 4, 8):
            raise TrafficError(f"Failed to compile {where}: repeatable random {self.name!r} has size {self.size!r}; "
                               "TRex takes 1, 2, 4 or 8 bytes")
        self.lo, self.hi, self.limit = ins["min_value"], ins["max_value"], ins["limit"]
        self.seed = ins["seed"] & 0xFFFFFFFF
        self.next_var = ins.get("next_var") or None
        self.rnd, self.cnt, self.value = Rand(self.seed), 0, 0

    def split(self, phase: int, mul: int) -> None:
        self.seed = (self.seed * (((phase + 1) * 514229) & 0xFFFFFFFF)) & 0xFFFFFFFF
        self.limit = split_limit(self.limit, phase, mul)
        self.rnd = Rand(self.seed)

    def run(self, rnd: Rand, chained: bool) -> bool:
        if self.cnt == self.limit:
            self.rnd, self.cnt = Rand(self.seed), 0
        go = not (chained and self.cnt != 0)
        rng = self.hi - self.lo
        if self.size <= 2:
            self.value = self.lo + self.rnd.r16() % (rng + 1)
        elif self.size == 4:
            self.value = self.lo + self.rnd.r32() % (rng + 1)
        else:
            self.value = self.rnd.r64() if rng == (1 << 64) - 1 else self.lo + self.rnd.r64() % (rng + 1)
        self.cnt += 1
        return go

    def period(self) -> int:
        return max(self.limit, 1)

    def expected_len(self) -> float:
        return self.lo + rand_average(self.hi - self.lo)


def split_limit(limit: int, phase: int, mul: int) -> int:
    """A flow limit's share on DP core `phase` of `mul` (utl_split_limit: the first core takes the
    remainder, every core at least 1)."""
    n = limit // mul + (limit % mul if phase == 0 else 0)
    return max(n, 1)


class _Tuple:
    """tuple_flow_var (STLVmTupleGen): the IP steps each frame, the port when the IP wraps;
    limit_flows restarts both at their first values. On DP core `phase` of `mul`, the IP starts
    `phase` further and steps by `mul`; the port follows the IP's wrap-arounds."""

    def __init__(self, ins: dict, where: str, phase: int = 0, mul: int = 1):
        self.name = ins["name"]
        lo, hi, plo, phi = ins["ip_min"], ins["ip_max"], ins["port_min"], ins["port_max"]
        if not (_uint(lo) and _uint(hi) and _uint(plo) and _uint(phi) and lo <= hi and plo <= phi):
            raise TrafficError(f"Failed to compile {where}: tuple {self.name!r} needs ip_min <= ip_max and "
                               f"port_min <= port_max, has {lo}..{hi}, {plo}..{phi}")
        self.ip_lo, self.ip_hi, self.p_lo, self.p_hi = lo, hi, plo, phi
        self.unlimited = bool(ins.get("flags", 0) & 1)
        ir, pr = hi - lo + 1, phi - plo + 1
        port_phase = (1 // ir) * phase + (phase * (1 % ir)) // ir
        self.ip_init = inc_mod(lo, hi, lo, ((1 % ir) * phase) % ir)[0]
        st = 1 * mul
        self.ip_step, ip_wa = st % ir, st // ir
        port_mul = ip_wa + self.ip_step // ir
        self.port_init = inc_mod(plo, phi, plo, ((1 % pr) * port_phase) % pr)[0]
        self.port_step = (1 * port_mul) % pr
        limit = ins.get("limit_flows", 0)
        self.limit = split_limit(limit, phase, mul) if limit else 0
        # the state before the first frame: one step back, the port borrowing if the IP wraps back
        self.ip, of = dec_mod(lo, hi, self.ip_init, self.ip_step % ir)
        self.port = dec_mod(plo, phi, self.port_init, (self.port_step + of) % pr)[0]
        self.flow = 0
        self.start = (self.ip, self.port, 0)

    def period(self) -> int:
        if self.limit and not self.unlimited:
            return self.limit
        ir, pr = self.ip_hi - self.ip_lo + 1, self.p_hi - self.p_lo + 1
        return ir * pr   # every (IP, port) pair once (an upper bound where the steps share factors)

    def run(self, rnd: Rand, chained: bool) -> bool:
        if self.unlimited:
            self.ip += 1
            if self.ip > self.ip_hi:
                self.ip = self.ip_lo
                self.port = (self.port + 1) & 0xFFFF or 1025
            return True
        self.ip, of = inc_mod(self.ip_lo, self.ip_hi, self.ip, self.ip_step)
        self.port = inc_mod(self.p_lo, self.p_hi, self.port, self.port_step)[0]
        if of:
            self.port = inc_mod(self.p_lo, self.p_hi, self.port, 1 % (self.p_hi - self.p_lo + 1))[0]
        if self.limit:
            self.flow += 1
            if self.flow > self.limit:
                self.flow, self.ip, self.port = 1, self.ip_init, self.port_init
        return True


def _uint(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


# --- checksums -----------------------------------------------------------------------------
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


def fix_l4(buf: bytearray, l3: int, l4: int, csum_off: int) -> None:
    """UDP/TCP checksum over the IPv4 pseudo header (length from the IP header)."""
    total = struct.unpack_from("!H", buf, l3 + 2)[0]
    ihl = (buf[l3] & 0x0F) * 4
    l4len = max(0, min(total - ihl, len(buf) - l4))
    seg = bytearray(buf[l4:l4 + l4len])
    if len(seg) < csum_off + 2:
        return
    seg[csum_off:csum_off + 2] = b"\0\0"
    pseudo = bytes(buf[l3 + 12:l3 + 20]) + struct.pack("!BBH", 0, buf[l3 + 9], l4len)
    c = csum16(pseudo + bytes(seg))
    if c == 0 and buf[l3 + 9] == 17:
        c = 0xFFFF
    buf[l4 + csum_off:l4 + csum_off + 2] = struct.pack("!H", c)


def fix_icmpv6(buf: bytearray, l3: int, l4: int) -> None:
    plen = struct.unpack_from("!H", buf, l3 + 4)[0]
    seg = bytearray(buf[l4:l4 + plen])
    seg[2:4] = b"\0\0"
    pseudo = bytes(buf[l3 + 8:l3 + 40]) + struct.pack("!IxxxB", plen, 58)
    buf[l4 + 2:l4 + 4] = struct.pack("!H", csum16(pseudo + bytes(seg)))


L4_CSUM = {11: 6, 13: 16}    # fix_checksum_hw l4_type → checksum offset: UDP, TCP (17: IP only)


class FieldEngine:
    """One stream's packet and field-engine program; next() → the next frame's bytes."""

    def __init__(self, stream: dict, where: str, port: Port | None, seed: int = 0, core: int = 0,
                 cores: int = 1, split: bool = False):
        self.where = where
        base = bytearray(base64.b64decode(stream["packet"]["binary"]))
        flags = stream.get("flags", 0)
        if port is not None and len(base) >= 12:
            if not flags & 1:
                base[6:12] = port.src_mac
            if not (flags >> 1) & 3:
                base[0:6] = port.dst_mac
        self.base = bytes(base)
        vm = stream.get("vm") or {}
        self.ins = list(vm.get("instructions") or [])
        self.vars: dict[str, object] = {}
        self.ops: list[tuple] = []   # ("var", obj, chain_len) | (type, instruction)
        user_seed = stream.get("random_seed", 0) or seed
        # per stream and DP core: the user's seed spread by the thread's multiplier (generate_random_seed)
        self.rnd = Rand((user_seed * ((core + 1) * 514229)) & 0xFFFFFFFF)
        for i in self.ins:
            t = i["type"]
            parted = split and i.get("split_to_cores", True)
            if t == "flow_var":
                v = _FlowVar(i, where)
                if parted:
                    v.split(core, cores)
            elif t == "flow_var_rand_limit":
                v = _RandLimit(i, where)
                if parted:
                    v.split(core, cores)
            elif t == "tuple_flow_var":
                v = _Tuple(i, where, core, cores) if split else _Tuple(i, where)
            elif t in ("write_flow_var", "write_mask_flow_var", "fix_checksum_ipv4", "fix_checksum_hw",
                       "fix_checksum_icmpv6", "trim_pkt_size"):
                self.ops.append((t, i))
                continue
            else:
                raise TrafficError(f"Failed to compile {where}: field-engine instruction {t!r} is not one TRex's "
                                   "STL API documents")
            if t == "tuple_flow_var":
                self.vars[v.name + ".ip"] = v
                self.vars[v.name + ".port"] = v
            else:
                self.vars[v.name] = v
            self.ops.append(("var", v))
        self._check()
        self.cache = vm.get("cache") or 0
        if self.cache and split:   # the cache split like a variable, the leftover to the first cores
            per, left = divmod(self.cache, cores)
            self.cache = max(per, 1) + (1 if per >= 1 and core < left else 0)
        self._cached: list[bytes] | None = None
        self.n = 0

    def _width(self, name: str) -> int:
        v = self.vars[name]
        if isinstance(v, _Tuple):
            return 4 if name.endswith(".ip") else 2
        return v.size

    def _value(self, name: str) -> int:
        v = self.vars[name]
        if isinstance(v, _Tuple):
            return v.ip if name.endswith(".ip") else v.port
        return v.value

    def _check(self) -> None:
        size = len(self.base)

        def past(what: str, first: int, end: int) -> TrafficError:
            return TrafficError(f"Failed to compile {self.where}: {what} at pkt_offset {first} reaches byte "
                                f"{end - 1}, past the {size}-byte packet")
        names = [o[1].name for o in self.ops if o[0] == "var"]
        for o in self.ops:
            if o[0] == "var":
                v = o[1]
                nv = getattr(v, "next_var", None)
                if nv:
                    k = names.index(v.name)
                    if k + 1 >= len(names) or names[k + 1] != nv:
                        raise TrafficError(f"Failed to compile {self.where}: flow variable {v.name!r} names next_var "
                                           f"{nv!r}, which must be the variable defined right after it (TRex: "
                                           "\"Next instruction name does not match next_var\")")
                continue
            t, i = o
            if t in ("write_flow_var", "write_mask_flow_var", "trim_pkt_size"):
                if i["name"] not in self.vars:
                    raise TrafficError(f"Failed to compile {self.where}: {t} names flow variable {i['name']!r}, "
                                       f"which the stream does not define (it has "
                                       f"{', '.join(map(repr, self.vars)) or 'none'})")
            if t == "write_flow_var":
                w = self._width(i["name"])
                if i["pkt_offset"] < 0 or i["pkt_offset"] + w > size:
                    raise past(f"write_flow_var of {i['name']!r} ({w} B)", i["pkt_offset"], i["pkt_offset"] + w)
            elif t == "write_mask_flow_var":
                w = i["pkt_cast_size"]
                if w not in (1, 2, 4):
                    raise TrafficError(f"Failed to compile {self.where}: write_mask_flow_var of {i['name']!r} has "
                                       f"pkt_cast_size {w}; TRex takes 1, 2 or 4")
                if i["pkt_offset"] < 0 or i["pkt_offset"] + w > size:
                    raise past(f"write_mask_flow_var of {i['name']!r} ({w} B)", i["pkt_offset"],
                               i["pkt_offset"] + w)
            elif t == "fix_checksum_ipv4":
                off = i["pkt_offset"]
                if off < 0 or off + 20 > size:
                    raise past("fix_checksum_ipv4 (a 20-byte IPv4 header)", off, off + 20)
                ihl = (self.base[off] & 0x0F) * 4
                if off + max(ihl, 20) > size:
                    raise past(f"fix_checksum_ipv4 (the packet's {ihl}-byte IPv4 header)", off, off + ihl)
            elif t == "fix_checksum_hw":
                l2, l3 = i["l2_len"], i["l3_len"]
                if l2 < 14:
                    raise TrafficError(f"Failed to compile {self.where}: fix_checksum_hw has l2_len {l2}; TRex "
                                       "takes 14 or more")
                end = l2 + max(l3, 20) + {11: 8, 13: 20}.get(i["l4_type"], 0)
                if end > size:
                    raise past(f"fix_checksum_hw (l2_len {l2}, l3_len {l3}, l4_type {i['l4_type']})", l2, end)

    def state(self) -> tuple:
        """Everything the next frame depends on (a cycle ends where the state returns)."""
        out = [self.rnd.s]
        for o in self.ops:
            if o[0] != "var":
                continue
            v = o[1]
            if isinstance(v, _RandLimit):   # at its limit it restarts: the same as unstarted
                out.append((0, v.seed) if v.cnt in (0, v.limit) else (v.cnt, v.rnd.s, v.value))
            elif isinstance(v, _Tuple):
                out.append(("start",) if v.limit and v.flow in (0, v.limit) or (v.ip, v.port, v.flow) == v.start
                           else (v.ip, v.port, v.flow))
            elif v.list is not None:
                out.append(v.index)
            else:
                out.append(v.value)
        return tuple(out)

    def random(self) -> bool:
        """A variable drawn from the stream's generator: no cycle to find."""
        return any(o[0] == "var" and isinstance(o[1], _FlowVar) and o[1].op == "random" for o in self.ops)

    def expected_len(self) -> float:
        """TRex's expected length of the stream's frames (without FCS), for bps and % rates."""
        for t, i in ((o[0], o[1]) for o in self.ops):
            if t == "trim_pkt_size":
                return min(self.vars[i["name"]].expected_len(), len(self.base))
        return len(self.base)

    def varies(self) -> bool:
        return any(o[0] == "var" for o in self.ops)

    def _build(self) -> bytes:
        buf = bytearray(self.base)
        skip = 0
        for o in self.ops:
            if o[0] == "var":
                v = o[1]
                if skip:
                    skip -= 1
                    continue
                chained = bool(getattr(v, "next_var", None))
                go = v.run(self.rnd, chained)
                if chained and not go:
                    skip = self._chain_after(v)
                continue
            t, i = o
            if t == "write_flow_var":
                w = self._width(i["name"])
                val = (self._value(i["name"]) + i.get("add_value", 0)) % (1 << (8 * w))
                off = i["pkt_offset"]
                if off + w <= len(buf):
                    buf[off:off + w] = val.to_bytes(w, "big" if i.get("is_big_endian", True) else "little")
            elif t == "write_mask_flow_var":
                w, off = i["pkt_cast_size"], i["pkt_offset"]
                order = "big" if i.get("is_big_endian", True) else "little"
                val = self._value(i["name"]) + i.get("add_value", 0)
                sh = i.get("shift", 0)
                val = val << sh if sh >= 0 else val >> -sh
                old = int.from_bytes(buf[off:off + w], order)
                new = (old & ~i["mask"]) | (val & i["mask"])
                buf[off:off + w] = (new % (1 << (8 * w))).to_bytes(w, order)
            elif t == "trim_pkt_size":
                n = self._value(i["name"])
                if n < len(buf):
                    del buf[n:]
            elif t == "fix_checksum_ipv4":
                fix_ipv4(buf, i["pkt_offset"])
            elif t == "fix_checksum_hw":
                l3 = i["l2_len"]
                l4 = l3 + i["l3_len"]
                fix_ipv4(buf, l3)
                if i["l4_type"] in L4_CSUM:
                    fix_l4(buf, l3, l4, L4_CSUM[i["l4_type"]])
            elif t == "fix_checksum_icmpv6":
                fix_icmpv6(buf, i["l2_len"], i["l2_len"] + i["l3_len"])
        return bytes(buf)

    def _chain_after(self, v) -> int:
        """How many variables after v follow it by next_var (they are skipped this frame)."""
        vs = [o[1] for o in self.ops if o[0] == "var"]
        k, n = vs.index(v), 0
        while k < len(vs) and getattr(vs[k], "next_var", None):
            n += 1
            k += 1
        return n

    def next(self) -> bytes:
        if self.cache:
            if self._cached is None:
                self._cached = [self._build() for _ in range(self.cache)]
            f = self._cached[self.n % self.cache]
        else:
            f = self._build()
        self.n += 1
        return f


# --- rates -----------------------------------------------------------------------------------
def stream_pps(stream: dict, expected_len: float, port: Port | None, where: str) -> float:
    """The stream's frames per second as TRex computes it from its rate type."""
    rate = (stream.get("mode") or {}).get("rate") or {}
    kind, value = rate.get("type"), rate.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value in (float("inf"), float("-inf")) or value <= 0:
        raise TrafficError(f"Failed to compile {where}: mode.rate {kind} {value!r} is not a finite number > 0 "
                           "(TRex refuses it, enabled or not: give the stream a positive rate)")
    size = expected_len + FCS
    if kind == "pps":
        return float(value)
    if kind == "bps_L2":
        return value / (8 * size)
    if kind == "bps_L1":
        return value * (size / (size + L1_OVERHEAD)) / (8 * size)
    if kind == "percentage":
        if port is None or not port.line_bps:
            raise TrafficError(f"Failed to compile {where}: its rate is {value}% of the port's line rate, and "
                               "the port's line rate is not known (set traffic.line_rate_bps)")
        l1 = value / 100.0 * port.line_bps
        return l1 * (size / (size + L1_OVERHEAD)) / (8 * size)
    raise TrafficError(f"Failed to compile {where}: mode.rate type {kind!r} is not one TRex takes "
                       "(pps, bps_L1, bps_L2, percentage)")


# --- flow statistics -------------------------------------------------------------------------
def _l3_at(frame: bytes) -> tuple[int, int] | None:
    """(offset, 4 or 6) of the IP header after Ethernet and any 802.1Q/QinQ tags, or None."""
    off = 12
    while off + 2 <= len(frame):
        et = struct.unpack_from("!H", frame, off)[0]
        if et in (0x8100, 0x88A8, 0x9100):
            off += 4
            continue
        if et == 0x0800 and off + 2 + 20 <= len(frame):
            return off + 2, 4
        if et == 0x86DD and off + 2 + 40 <= len(frame):
            return off + 2, 6
        return None
    return None


def _update16(buf: bytearray, csum_at: int, old: int, new: int) -> None:
    """RFC 1624 incremental checksum update for one 16-bit word (a bad checksum stays bad, as
    TRex's flow-stat parser updates it)."""
    c = ~struct.unpack_from("!H", buf, csum_at)[0] & 0xFFFF
    c += (~old & 0xFFFF) + new
    while c >> 16:
        c = (c & 0xFFFF) + (c >> 16)
    struct.pack_into("!H", buf, csum_at, ~c & 0xFFFF)


def _mark(buf: bytearray, l3: tuple[int, int], ip_id: int) -> None:
    """TRex's flow-stat marks (CFlowStatParser set_ip_id, set_tos_to_cpu): the IPv4 id or the IPv6
    flow label, and the TOS / traffic class bit 0x01 ("to CPU")."""
    off, ver = l3
    if ver == 4:
        old_id = struct.unpack_from("!H", buf, off + 4)[0]
        _update16(buf, off + 10, old_id, ip_id & 0xFFFF)
        struct.pack_into("!H", buf, off + 4, ip_id & 0xFFFF)
        first = struct.unpack_from("!H", buf, off)[0]
        _update16(buf, off + 10, first, first | 0x01)
        buf[off + 1] |= 0x01
    else:
        w = struct.unpack_from("!I", buf, off)[0]
        w = (w & 0xFFF00000) | (ip_id & 0xFFFFF)
        w |= 0x01 << 20   # traffic class bit 0x01
        struct.pack_into("!I", buf, off, w)


@dataclass
class FlowStats:
    """What TRex does to a stream's frames for its flow statistics (hardware ids as TRex hands them
    out: in the order the streams come, per rule type)."""
    rule: str | None
    hw_id: int = 0
    seq: int = 0
    ip_id_base: int = IP_ID_RESERVE_BASE

    def apply(self, frame: bytes) -> bytes:
        l3 = _l3_at(frame)
        if self.rule is None:
            if l3 is not None and l3[1] == 4:   # an id in TRex's reserved range is moved out of it
                ip_id = struct.unpack_from("!H", frame, l3[0] + 4)[0]
                if ip_id >= self.ip_id_base:
                    b = bytearray(frame)
                    _update16(b, l3[0] + 10, ip_id, ip_id & 0xEFFF)
                    struct.pack_into("!H", b, l3[0] + 4, ip_id & 0xEFFF)
                    return bytes(b)
            return frame
        b = bytearray(frame)
        if self.rule == "stats":
            if l3 is not None:
                _mark(b, l3, self.ip_id_base + self.hw_id)
            return bytes(b)
        # latency (a payload rule): id 0xffff, and the frame's last 16 bytes become the latency
        # header (magic, flow sequence, hardware id, sequence number, the sender's timestamp: 0 here)
        # as TRex's driver writes it over the end of the packet (alloc_flow_stat_mbuf)
        if l3 is not None:
            _mark(b, l3, LATENCY_IP_ID)
        b[-LATENCY_TRAILER:] = struct.pack("<BBHIQ", LATENCY_MAGIC, 1, self.hw_id, self.seq & 0xFFFFFFFF, 0)
        self.seq += 1
        return bytes(b)


# --- the scheduler ---------------------------------------------------------------------------
@dataclass
class _Node:
    idx: int
    stream: dict
    engine: FieldEngine
    pps: float
    kind: str
    burst: int = 0
    bursts: int = 0
    refill: int = 0
    ibg: float = 0.0
    pre: float = 0.0     # the multi-core phases (TrexStreamsCompiler::compile_stream_on_all_cores)
    post: float = 0.0
    active: bool = False
    next: int | None = None
    actions: int = 0
    stats: FlowStats = field(default_factory=lambda: FlowStats(None))
    null: bool = False
    paused: bool = False

    @property
    def isg(self) -> float:
        return float(self.stream.get("isg", 0.0)) / 1e6


@dataclass
class Sent:
    t: float
    stream: int
    frame: bytes
    core: int = 0


def _ids(streams: list[dict]) -> dict:
    """name → index (STLSim: a stream's name, else its position)."""
    return {s.get("name", i): i for i, s in enumerate(streams)}


def _splittable(s: dict, cores: int) -> bool:
    """TrexStream::is_splitable: not a latency (sequenced) stream, not pinned to a core; a burst
    of at least one frame per core."""
    fs = s.get("flow_stats") or {}
    if fs.get("enabled") and fs.get("rule_type") in ("latency", "tpg") or s.get("core_id", -1) >= 0:
        return False
    mode = s.get("mode") or {}
    if mode.get("type") == "continuous":
        return True
    total = mode.get("total_pkts") if mode.get("type") == "single_burst" else mode.get("pkts_per_burst")
    return isinstance(total, int) and total >= cores


def build_nodes(streams: list[dict], where: str, port: Port | None, seed: int = 0, core: int = 0,
                cores: int = 1) -> list[_Node | None]:
    """The streams as DP core `core` of `cores` runs them (None: the stream runs on another core)."""
    names = _ids(streams)
    nodes: list[_Node | None] = []
    hw = ("stats", "latency")
    pg: dict[str, dict] = {}
    for i, s in enumerate(streams):
        w = f"stream {s.get('name', i)} of {where}"
        split = cores > 1 and _splittable(s, cores)
        fs = s.get("flow_stats") or {}
        rule = fs.get("rule_type", "stats") if fs.get("enabled") else None
        hw_id = 0
        if rule in hw:   # one hardware counter per packet group id, handed out in order (trex_stl_fs.cpp)
            ids = pg.setdefault(rule, {})
            hw_id = ids.setdefault(fs.get("stream_id"), len(ids))
        home = (s.get("core_id", -1) % cores) if s.get("core_id", -1) >= 0 else 0
        eng = FieldEngine(s, w, port, seed, core if split else home, cores, split)
        if not split and core != home:
            nodes.append(None)
            continue
        pps = stream_pps(s, eng.expected_len(), port, w)
        mode = s.get("mode") or {}
        kind = mode.get("type")
        n = _Node(i, s, eng, pps / cores if split else pps, kind)
        if kind == "continuous":
            pass
        elif kind in ("single_burst", "multi_burst"):
            total = int(mode["total_pkts"] if kind == "single_burst" else mode["pkts_per_burst"])
            n.bursts = 1 if kind == "single_burst" else int(mode["count"])
            n.ibg = float(mode.get("ibg", 0.0)) / 1e6 if kind == "multi_burst" else 0.0
            if split:
                per, rem = divmod(total, cores)
                base = 1.0 / pps
                if core < rem:
                    total = per + 1
                    n.post = base * (rem - core - 1)
                else:
                    total = per
                    n.post = base * (cores - 1 - core + rem)
            n.burst = n.refill = total
        else:
            raise TrafficError(f"Failed to compile {w}: mode {kind!r} is not one TRex takes "
                               "(continuous, single_burst, multi_burst)")
        if split:
            n.pre = core / pps
        nxt = s.get("next")
        if nxt is not None:
            if nxt not in names:
                raise TrafficError(f"Failed to compile {w}: its next stream {nxt!r} is not in the profile "
                                   "(TRex: stream dependency error)")
            n.next = names[nxt]
        n.actions = int(s.get("action_count", 0))
        if rule == "tpg":
            raise TrafficError(f"Failed to compile {w}: its flow_stats are a tagged packet group (tpg), which "
                               "TRex adds only to a port with TPG enabled (\"Trying to add a TPG stream but TPG "
                               "isn't enabled in this port.\"); the local generators have no TPG")
        if rule is not None:
            n.stats = FlowStats(rule, hw_id, ip_id_base=port.ip_id_base if port else IP_ID_RESERVE_BASE)
        n.null = bool(s.get("flags", 0) & 8)
        n.paused = bool(s.get("start_paused"))
        n.active = bool(s.get("self_start", True)) and bool(s.get("enabled", True))
        nodes.append(n)
    return nodes


def _emit(n: _Node) -> bytes:
    f = n.stats.apply(n.engine.next())
    if len(f) < MIN_FRAME:
        f = f + bytes(MIN_FRAME - len(f))
    return f


def _run_core(nodes: list[_Node | None], limit: int | None, duration: float | None, core: int) -> list[Sent]:
    heap: list[tuple[float, int, int]] = []
    order = 0
    for n in nodes:
        if n is not None and n.active:
            heapq.heappush(heap, (n.isg + n.pre, order, n.idx))
            order += 1
    out: list[Sent] = []
    while heap:
        if not any(n is not None and n.active and not n.paused and not n.null for n in nodes):
            break   # only paused or dummy streams left: nothing more leaves the port
        t, _, i = heapq.heappop(heap)
        if duration is not None and t > duration:
            break
        n = nodes[i]
        if not n.null and not n.paused:
            out.append(Sent(t, i, _emit(n), core))
            if limit is not None and len(out) >= limit:
                break
        ipg = 0.1 if n.paused else 1.0 / n.pps
        if n.kind == "continuous":
            heapq.heappush(heap, (t + ipg, order, i))
            order += 1
            continue
        n.burst -= 1
        if n.burst > 0:
            heapq.heappush(heap, (t + ipg, order, i))
            order += 1
            continue
        n.bursts -= 1
        if n.bursts > 0:
            n.burst = n.refill
            heapq.heappush(heap, (t + n.ibg + n.post + n.pre, order, i))
            order += 1
            continue
        n.active = False
        m = nodes[n.next] if n.next is not None else None
        if m is None or m.active:
            continue
        if n.actions > 0:
            n.actions -= 1
            if n.actions == 0:
                continue
        m.burst, m.active = m.refill, True
        mode = m.stream.get("mode") or {}
        m.bursts = int(mode.get("count", 1)) if m.kind == "multi_burst" else 1
        heapq.heappush(heap, (t + n.post + m.isg + m.pre, order, m.idx))
        order += 1
    return out


def simulate(streams: list[dict], where: str, port: Port | None, limit: int | None = None,
             duration: float | None = None, seed: int = 0, cores: int = 1) -> list[Sent]:
    """The frames a TRex port sends for these streams (multiplier 1) on `cores` DP cores, merged in
    time order as TRex's simulator merges its cores' captures (by microsecond, then core): up to
    `limit` frames (split among the cores as the simulator splits it) or until `duration` seconds,
    or until every stream has ended."""
    if limit is None and duration is None:
        raise TrafficError(f"Failed to simulate {where}: give a frame limit or a duration")
    out: list[Sent] = []
    for c in range(cores):
        nodes = build_nodes(streams, where, port, seed, c, cores)
        lim = None if limit is None else max(1, limit // cores) + (limit % cores if c == 0 else 0)
        out += _run_core(nodes, lim, duration, c)
    out.sort(key=lambda x: (int(x.t * 1e6 + 1e-6), x.core))
    return out


# --- one cycle, for a generator that repeats what it is given -------------------------------
# A stream with a random variable has no cycle (TRex draws forever); this many frames drawn from
# TRex's generator with the stream's seed stand for it, so its values keep TRex's distribution
# and the streams' shares stay exact.
RANDOM_SAMPLE = 16384


@dataclass
class Cycle:
    """What a generator repeats: the frames in send order, each frame's send offset within the
    cycle (seconds at the profile's own rates), the cycle's length in seconds, and whether the
    profile ends (bursts: sent once) or repeats (continuous)."""
    frames: list[bytes]
    times: list[float]
    period_s: float
    finite: bool
    per_stream: dict


def _frac(x: float) -> Fraction:
    return Fraction(x).limit_denominator(1_000_000)


def stream_cycle(eng: FieldEngine, max_frames: int, where: str) -> list[bytes]:
    """One stream's frames until its field engine's state repeats (a cache: the cached frames)."""
    if eng.cache:   # the cached frames, replayed; the shortest repeat of them is the cycle
        fr = [eng.next() for _ in range(eng.cache)]
        n = len(fr)
        return next(fr[:p] for p in range(1, n + 1) if n % p == 0 and fr == fr[:p] * (n // p))
    if not eng.varies():
        return [eng.next()]
    if eng.random():
        return [eng.next() for _ in range(RANDOM_SAMPLE)]
    vs = [o[1] for o in eng.ops if o[0] == "var"]
    chained = any(getattr(v, "next_var", None) for v in vs)
    bound = 1
    for v in vs:   # independent variables: the least common multiple; a chain: at most the product
        bound = bound * v.period() if chained else lcm(bound, v.period())
    if not chained:
        if bound > max_frames:
            raise TrafficError(f"Failed to compile {where}: its field engine repeats after {bound} frames, more "
                               f"than {max_frames} (the most one compiled cycle holds)")
        return [eng.next() for _ in range(bound)]
    start, frames = eng.state(), []
    while True:
        frames.append(eng.next())
        if eng.state() == start:
            return frames
        if len(frames) >= min(max_frames, bound):
            raise TrafficError(f"Failed to compile {where}: its field engine does not repeat within "
                               f"{max_frames} frames (the most one compiled cycle holds)")


def compile_cycle(streams: list[dict], where: str, port: Port | None, max_frames: int,
                  max_bytes: int) -> Cycle:
    """The frames a TRex port sends for a profile, as one cycle a local generator can repeat:
    continuous streams over the least common period of their rates and field engines, frames in
    TRex's time order (every stream starting at its isg); a profile of bursts whole, once."""
    nodes = [n for n in build_nodes(streams, where, port) if n is not None]
    active = [n for n in nodes if n.active]
    if not active:
        raise TrafficError(f"Failed to compile {where}: none of its {len(streams)} streams is enabled and "
                           "self-starting, so there is nothing to send (set enabled=True, self_start=True on one)")
    cont = [n for n in nodes if n.kind == "continuous" and not n.null and not n.paused]
    if not cont:   # bursts only: the profile ends; TRex's schedule, once
        out = simulate(streams, where, port, limit=max_frames + 1)
        if len(out) > max_frames:
            raise TrafficError(f"Failed to compile {where}: its bursts send more than {max_frames} frames "
                               "(the most one compiled cycle holds)")
        if not out:
            raise TrafficError(f"Failed to compile {where}: its streams send no frame (dummy or paused streams)")
        t0 = out[0].t
        per = {}
        for s in out:
            per[s.stream] = per.get(s.stream, 0) + 1
        return Cycle([s.frame for s in out], [s.t - t0 for s in out], out[-1].t - t0, True, per)
    finite = [n for n in nodes if n.kind != "continuous" and (n.active or n.next is not None)]
    if finite:
        n = finite[0]
        raise TrafficError(f"Failed to compile {where}: stream {n.stream.get('name', n.idx)} is a {n.kind} "
                           f"next to {len(cont)} continuous stream(s); a burst that happens once beside traffic "
                           "that repeats has no cycle for a local generator to repeat (send them as two profiles)")
    rates = [_frac(n.pps) for n in cont]
    if any(r == 0 for r in rates):
        raise TrafficError(f"Failed to compile {where}: a stream's rate is below 0.000001 pps")
    # the least common multiple of the streams' frame gaps 1/pps
    num, den = 1, 0
    for r in rates:
        gap = 1 / r
        num = lcm(num, gap.numerator)
        den = gcd(den, gap.denominator)
    period = Fraction(num, den)
    k = [int(r * period) for r in rates]
    cyc, total_bytes = [], 0
    for n in cont:
        fr = stream_cycle(n.engine, max_frames, f"stream {n.stream.get('name', n.idx)} of {where}")
        cyc.append(fr)
    rounds = 1
    for ki, fr in zip(k, cyc):
        rounds = lcm(rounds, len(fr) // gcd(len(fr), ki))
    total = rounds * sum(k)
    if total > max_frames:
        raise TrafficError(f"Failed to compile {where}: one cycle of its {len(cont)} continuous streams at their "
                           f"rates ({', '.join(f'{float(r):g}' for r in rates)} pps) is {total} frames, more than "
                           f"{max_frames} (the most one compiled cycle holds)")
    span = period * rounds
    events = []
    for j, (n, r, ki, fr) in enumerate(zip(cont, rates, k, cyc)):
        isg = _frac(float(n.stream.get("isg", 0.0)) / 1e6)
        for m in range(ki * rounds):
            events.append(((isg + m / r) % span, j, m))
    events.sort()
    frames, times, per = [], [], {}
    for t, j, m in events:
        n = cont[j]
        f = n.stats.apply(cyc[j][m % len(cyc[j])])
        if len(f) < MIN_FRAME:
            f += bytes(MIN_FRAME - len(f))
        total_bytes += len(f)
        if total_bytes > max_bytes:
            raise TrafficError(f"Failed to compile {where}: one cycle ({total} frames) holds more than "
                               f"{max_bytes // (1 << 20)} MiB of frames")
        frames.append(f)
        times.append(float(t))
        per[n.idx] = per.get(n.idx, 0) + 1
    return Cycle(frames, times, float(span), False, per)
