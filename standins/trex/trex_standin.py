#!/usr/bin/env python3
"""A TRex-compatible server (stand-in for TRex v3.04 in interactive STL mode), for testbeds without
TRex: it speaks TRex's RPC so the unmodified STLClient drives it, and puts the streams on the wire
for real with xdpgen (loadgen/), split over its cores exactly as TRex splits them.

Standalone: imports nothing of the xenobench harness (it plays the operator's TRex install); needs
Python >= 3.10, pyzmq and PyYAML. Facts (limits, wording, algorithms) come from trex-core v3.04,
cited per function as `file: Class::method`; no TRex code is copied. See README.md next to it.

    t-rex-64 -i -c 14 --cfg /etc/trex_cfg.yaml [--xdpgen PATH] [--workdir DIR]

What TRex does and the stand-in reproduces:
- RPC: JSON-RPC 2.0 on a ZeroMQ REP socket (zmq_rpc_port), compressed requests answered
  compressed; async events fetched with get_async_events after a trigger on the PUB socket
  (zmq_pub_port). Errors carry TRex's codes, messages and specific_err wording.
- Streams: add_stream parsed as TrexRpcCmdAddStream (types, ranges, choices, padding of ranges).
- start_traffic: the multiplier as TrexStatelessProfile::calculate_effective_factor, then each
  continuous stream is split over the port's cores as TrexStreamsCompiler::compile_stream_on_all_cores
  and TrexVmSplitter::split do it: rate / n per core, core i first at phase i, the flow variables
  advanced i steps and stepping n (StreamVmInstructionFlowMan::update), the field-engine cache
  divided cache / n per core with the leftover to the first cores, at least 1 each
  (TrexVmSplitter::split), each core replaying its own cache (TrexStatelessDpCore::replay_vm_into_cache).
  The cores' frames interleave round robin (core i starts i inter-packet gaps after core 0 and
  each sends every n gaps: m_mc_phase_pre_sec), and that one sequence is what xdpgen sends.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from math import gcd
from pathlib import Path

VERSION = "v3.04"
API_NAME, API_MAJOR, API_MINOR = "STL", 5, 1            # trex_stl.cpp: API_VER_MAJOR / API_VER_MINOR
MULT_TYPES = ("raw", "bps", "bpsl1", "pps", "percentage")  # trex_stl_port.cpp: TrexPortMultiplier::g_types
RATE_TYPES = ("pps", "bps_L1", "bps_L2", "percentage")     # trex_stl_rpc_cmds.cpp: parse_rate
VM_TYPES = ("fix_checksum_hw", "fix_checksum_ipv4", "fix_checksum_icmpv6", "flow_var", "write_flow_var",
            "tuple_flow_var", "trim_pkt_size", "write_mask_flow_var", "flow_var_rand_limit")  # parse_vm
MAX_CACHE_SPLIT = 10000          # trex_stl_vm_splitter.cpp: TrexVmSplitter::split
MIN_PKT_SIZE, MAX_PKT_SIZE = 14, 9 * 1024 + 22   # common/captureFile.h
MAX_STREAMS = 20000              # trex_stl_port.h: TrexStatelessProfile::MAX_STREAMS
MAX_CYCLE = 65536                # xdpgen: most frames in one cycle (loadgen/README.md)
ZIP_MAGIC = 0xABE85CEA           # rpc-server/trex_rpc_zip.cpp: magic + uncompressed length, big endian
L4_TYPE_UDP, L4_TYPE_TCP, L4_TYPE_IP = 11, 13, 17   # trex_stl_packet_builder_scapy.py: CTRexVmInsFixHwCs
# publisher/trex_publisher.h: TrexPublisher event types
EV_PORT_STARTED, EV_PORT_STOPPED, EV_PORT_FINISHED_TX, EV_PORT_ACQUIRED, EV_PORT_RELEASED = 0, 1, 4, 5, 6
EV_PORT_ERROR = 7
EV_PROFILE_STARTED, EV_PROFILE_STOPPED, EV_PROFILE_FINISHED_TX, EV_PROFILE_ERROR = 10, 11, 14, 17
XSTATS = ["rx_good_packets", "tx_good_packets", "rx_good_bytes", "tx_good_bytes", "rx_missed_errors",
          "rx_errors", "tx_errors", "tx_queue_full"]
STANDIN = "trex stand-in"        # prefix of refusals that are the stand-in's, not TRex's


# ================================================================================================
# JSON with value offsets (jsoncpp's getOffsetStart appears in TRex's type errors)
# ================================================================================================
class JObj(dict):
    """A JSON object that remembers where each member's value starts in the request text."""
    offs: dict


class JArr(list):
    offs: list


_WS = re.compile(r"[ \t\n\r]*")
_NUM = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def parse_json(text: str):
    """json.loads with offsets: objects are JObj, arrays JArr (their .offs hold the value starts)."""
    val, end = _value(text, _WS.match(text, 0).end())
    end = _WS.match(text, end).end()
    if end != len(text):
        raise ValueError(f"extra data at offset {end}")
    return val


def _value(s: str, i: int):
    c = s[i:i + 1]
    if c == "{":
        obj, obj.offs = JObj(), {}
        i = _WS.match(s, i + 1).end()
        if s[i:i + 1] == "}":
            return obj, i + 1
        while True:
            if s[i:i + 1] != '"':
                raise ValueError(f"expected a member name at offset {i}")
            key, i = json.decoder.scanstring(s, i + 1)
            i = _WS.match(s, i).end()
            if s[i:i + 1] != ":":
                raise ValueError(f"expected ':' at offset {i}")
            i = _WS.match(s, i + 1).end()
            obj.offs[key] = i
            obj[key], i = _value(s, i)
            i = _WS.match(s, i).end()
            if s[i:i + 1] == "}":
                return obj, i + 1
            if s[i:i + 1] != ",":
                raise ValueError(f"expected ',' or '}}' at offset {i}")
            i = _WS.match(s, i + 1).end()
    if c == "[":
        arr, arr.offs = JArr(), []
        i = _WS.match(s, i + 1).end()
        if s[i:i + 1] == "]":
            return arr, i + 1
        while True:
            arr.offs.append(i)
            v, i = _value(s, i)
            arr.append(v)
            i = _WS.match(s, i).end()
            if s[i:i + 1] == "]":
                return arr, i + 1
            if s[i:i + 1] != ",":
                raise ValueError(f"expected ',' or ']' at offset {i}")
            i = _WS.match(s, i + 1).end()
    if c == '"':
        return json.decoder.scanstring(s, i + 1)
    for word, v in (("true", True), ("false", False), ("null", None)):
        if s.startswith(word, i):
            return v, i + len(word)
    m = _NUM.match(s, i)
    if not m or m.end() == i:
        raise ValueError(f"unexpected character at offset {i}")
    text = m.group(0)
    return (float(text) if m.group(1) or m.group(2) else int(text)), m.end()


# ================================================================================================
# RPC parameter parsing with TRex's wording (rpc-server/trex_rpc_cmd.cpp, trex_rpc_cmd_api.h)
# ================================================================================================
class RpcError(Exception):
    """kind: parse (-32602 Bad parameters for method), execute (-32000 Failed To Execute Method),
    internal (-32603 Internal Server Error): TrexRpcCommand::generate_*_err and
    rpc-server/trex_rpc_jsonrpc_v2_parser.cpp: JsonRpcMethod::_execute."""
    CODES = {"parse": (-32602, "Bad parameters for method"), "execute": (-32000, "Failed To Execute Method"),
             "internal": (-32603, "Internal Server Error")}

    def __init__(self, kind: str, msg: str):
        super().__init__(msg)
        self.kind = kind


def parse_err(msg):
    return RpcError("parse", msg)


def exec_err(msg):
    return RpcError("execute", msg)


def _jtype(v) -> str:
    """trex_rpc_cmd.cpp: TrexRpcCommand::json_type_to_name (jsoncpp parses non-negative integers
    up to INT64_MAX as int, larger ones as uint)."""
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int" if v < 2 ** 63 else "uint"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


def _integral(v, lo, hi) -> bool:
    """jsoncpp's isUInt64 / isInt: an integer, or an integral double, within [lo, hi]."""
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return lo <= v <= hi
    if isinstance(v, float):
        return lo <= v <= hi and v == int(v)
    return False


_TYPE_NAMES = {"byte": "byte", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool",
               "int": "int", "double": "double", "udouble": "unsigned double", "object": "object",
               "string": "string", "array": "array"}
_UMAX = {"byte": 0xFF, "uint16": 0xFFFF, "uint32": 0xFFFFFFFF}


def _offset(parent, key) -> int:
    offs = getattr(parent, "offs", None)
    try:
        return offs[key] if offs is not None else 0
    except (KeyError, IndexError):
        return 0


def check_field(parent, key, ftype):
    """TrexRpcCommand::check_field_type (+ check_field_type_common); key: a member name or an
    array index. Returns the value."""
    if isinstance(key, int):
        if not isinstance(parent, list):
            raise parse_err("parent field is missing")
        v = parent[key] if key < len(parent) else None
        name = f"array element: {key + 1} "
    else:
        if parent is None:
            raise parse_err(f"field '{key}' is missing")
        if not isinstance(parent, dict):
            raise parse_err(f"parent field '{key}' is missing")
        v = parent.get(key)
        name = key
    if v is None:
        raise parse_err(f"field '{name}' value is null")
    ok, spec = True, f"is '{_jtype(v)}', expecting '{_TYPE_NAMES[ftype]}'"
    if ftype in _UMAX:
        if not _integral(v, 0, 2 ** 64 - 1):
            ok = False
        elif v > _UMAX[ftype]:
            ok, spec = False, f"has size bigger than {ftype if ftype != 'byte' else 'uint8'}."
    elif ftype == "uint64":
        ok = _integral(v, 0, 2 ** 64 - 1)
    elif ftype == "bool":
        ok = isinstance(v, bool)
    elif ftype == "int":
        ok = _integral(v, -2 ** 31, 2 ** 31 - 1)
    elif ftype in ("double", "udouble"):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        if ok and ftype == "udouble" and v < 0:
            ok, spec = False, "has negative value."
    elif ftype == "object":
        ok = isinstance(v, dict)
    elif ftype == "string":
        ok = isinstance(v, str)
    elif ftype == "array":
        ok = isinstance(v, list)
    if not ok:
        raise parse_err(f"error at offset: {_offset(parent, key)} - '{name}' {spec}")
    return v


_MISSING = object()


def get(parent, key, ftype, default=_MISSING):
    """parse_<type>(parent, key[, default]): a missing member takes the default when one is given."""
    if default is not _MISSING and (not isinstance(parent, dict) or parent.get(key) is None):
        return default
    v = check_field(parent, key, ftype)
    if ftype in _UMAX or ftype in ("uint64", "int"):
        return int(v)
    if ftype in ("double", "udouble"):
        return float(v)
    return v


def choice(parent, key, choices):
    """TrexRpcCommand::parse_choice."""
    v = parent.get(key) if isinstance(parent, dict) else None
    if v is None:
        raise parse_err(f"field '{key}' is missing")
    for c in choices:
        if type(v) is type(c) and v == c:
            return c
    raise parse_err(f"field '{key}' can only be one of [" + " ,".join(f"'{c}'" for c in choices) + "]")


# ================================================================================================
# The field engine (trex_stl_stream_vm.h / .cpp), per core
# ================================================================================================
class FlowVar:
    """StreamVmInstructionFlowMan: inc/dec over [min, max] or over a value_list (index arithmetic),
    or random. Values as the data path produces them: the first frame carries init, each frame
    steps once (set_bss_init_value stores peek_prev(), the DP op steps before the write; a list
    op writes list[index] and then steps the index)."""

    def __init__(self, name, size, op, step, split, init=0, lo=0, hi=0, values=None):
        self.name, self.size, self.op, self.split = name, size, op, split
        self.values = values
        if values is not None:
            self.lo, self.hi = 0, len(values) - 1
            self.init = 0 if op == "inc" else len(values) - 1
        else:
            self.lo, self.hi, self.init = lo, hi, init
        rng = self.range()
        self.step, self.wa = step % rng, step // rng   # step overflow by modulo, wrap count kept

    def range(self) -> int:
        return self.hi - self.lo + 1

    def clone(self) -> "FlowVar":
        c = object.__new__(FlowVar)
        c.__dict__.update(self.__dict__)
        return c

    def need_split(self) -> bool:
        return self.split and self.op != "random"      # StreamVmInstructionFlowMan::need_split

    def peek_next(self, skip: int) -> int:
        """StreamVmInstructionFlowMan::peek (forward, no carry): init moved skip steps, wrapping."""
        if self.op == "random":
            return self.init
        rng = self.range()
        d = (self.step * skip) % rng
        off = self.init - self.lo
        return self.lo + ((off + d) % rng if self.op == "inc" else (off - d) % rng)

    def update(self, phase: int, n: int) -> None:
        """StreamVmInstructionFlowMan::update: core `phase` of n starts `phase` steps on, steps n."""
        self.init = self.peek_next(phase)
        full = (self.wa * self.range() + self.step) * n
        self.step, self.wa = full % self.range(), full // self.range()

    def period(self) -> int:
        """Frames until the value sequence repeats (inc_mod / inc_mod_list with this step)."""
        if self.op == "random":
            return 0
        return self.range() // gcd(self.range(), self.step) if self.step else 1

    def value(self, k: int, rand: "Rand | None" = None) -> int:
        """The value written into frame k (k = 0 is the first frame of this core)."""
        if self.op == "random":
            return self._random(rand)
        rng = self.range()
        off = self.init - self.lo
        d = (k * self.step) % rng
        pos = self.lo + ((off + d) % rng if self.op == "inc" else (off - d) % rng)
        return self.values[pos] if self.values is not None else pos

    def _random(self, rand: "Rand") -> int:
        """StreamDPOpFlowVar{8,16,32,64}Step::run_rand: a list index from rand16; a range from
        rand16 (1, 2 bytes), rand32 (4) or rand64 (8; the whole 64-bit range takes it raw)."""
        if self.values is not None:
            return self.values[rand.r16() % len(self.values)]
        rng = self.range()
        if self.size <= 2:
            return self.lo + rand.r16() % rng
        if self.size == 4:
            return self.lo + rand.r32() % rng
        r = rand.r64()
        return r if rng == 2 ** 64 else self.lo + r % rng


class Rand:
    """trex_stl_stream_vm.h: fastrand (214013 * seed + 2531011, bits 16..30) and vm_rand32/64
    (high half drawn first); the per-core seed as CGenNodeStateless::generate_random_seed:
    (stream random_seed, or a time-based one) * (thread_id + 1) * 514229, 32 bits."""

    def __init__(self, seed: int, thread_id: int):
        self.s = (seed * ((thread_id + 1) * 514229)) & 0xFFFFFFFF

    def r16(self) -> int:
        self.s = (214013 * self.s + 2531011) & 0xFFFFFFFF
        return (self.s >> 16) & 0x7FFF

    def r32(self) -> int:
        hi = self.r16()
        return ((hi << 16) + self.r16()) & 0xFFFFFFFF

    def r64(self) -> int:
        hi = self.r32()
        return ((hi << 32) + self.r32()) & 0xFFFFFFFFFFFFFFFF


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
    """TCP/UDP checksum over the IPv4 pseudo header (what the NIC's offload, or TRex's software
    fallback, puts in the frame for fix_checksum_hw)."""
    ihl = (buf[l3] & 0x0F) * 4
    l4len = struct.unpack_from("!H", buf, l3 + 2)[0] - ihl
    seg = bytearray(buf[l4:l4 + l4len])
    seg[csum_off:csum_off + 2] = b"\0\0"
    c = csum16(bytes(buf[l3 + 12:l3 + 20]) + struct.pack("!BBH", 0, buf[l3 + 9], l4len) + bytes(seg))
    if c == 0 and buf[l3 + 9] == 17:
        c = 0xFFFF
    buf[l4 + csum_off:l4 + csum_off + 2] = struct.pack("!H", c)


@dataclass
class Stream:
    """One stream as add_stream parsed it."""
    sid: int
    json: dict
    mode: str
    rate_type: str
    rate_value: float
    enabled: bool
    self_start: bool
    flags: int
    core_id: int                  # -1: not pinned
    random_seed: int
    pkt: bytes                    # padded to 60 B as TrexRpcCmdAddStream::_run does
    vm: list                      # instructions: ("var", FlowVar) / ("write", ...) / ...
    cache: int
    flow_stats: bool

    def pkt_size(self) -> float:
        return len(self.pkt) + 4  # TrexStreamRate::get_pkt_size: + Ethernet FCS


@dataclass
class CoreStream:
    """A stream's share on one core (TrexStreamsCompiler::compile_stream_on_all_cores)."""
    stream: Stream
    core: int
    vm: list
    cache: int
    weight: float                 # the core's pps share


def compile_vm(s: Stream) -> None:
    """The checks StreamVm::compile makes (trex_stl_stream_vm.cpp, StreamVm::err wording)."""
    names, vars_ = set(), {}
    for ins_id, ins in enumerate(s.vm):
        if ins[0] == "var":
            v = ins[1]
            if v.name in names:
                raise exec_err(f"*** error: instruction id '{ins_id}' flow variable name {v.name} already exists")
            names.add(v.name)
            vars_[v.name] = v
    for ins_id, ins in enumerate(s.vm):
        kind = ins[0]
        if kind in ("write", "write_mask"):
            name, off = ins[1], ins[2]
            if name not in vars_:
                raise exec_err(f"*** error: instruction id '{ins_id}' packet write with no valid flow variable "
                               f"name '{name}'")
            size = vars_[name].size if kind == "write" else ins[3]
            if off + size > len(s.pkt):
                raise exec_err(f"*** error: instruction id '{ins_id}' packet write with packet_offset   "
                               f"{off + size}   bigger than packet size   {len(s.pkt)}")
            if kind == "write_mask" and vars_[name].size == 8:
                raise exec_err(f"{STANDIN}: write_mask_flow_var of the 8-byte variable {name!r}: TRex reads "
                               "1, 2 or 4 bytes (StreamDPOpPktWrMask::wr)")
        elif kind == "fix_ipv4":
            if ins[1] + 20 > len(s.pkt):
                raise exec_err(f"*** error: instruction id '{ins_id}' fix ipv4 command offset  {ins[1]}  is too "
                               f"high relative to packet size  {len(s.pkt)}")
        elif kind == "fix_hw":
            l2, l3, l4t = ins[1], ins[2], ins[3]
            if l2 < 14:
                raise exec_err(f"*** error: instruction id '{ins_id}' fix hw offset l2 {l2}  is lower than 14 ")
            if l3 < 20:
                raise exec_err(f"*** error: instruction id '{ins_id}' fix hw offset l3 {l3}  is lower than 20 ")
            hdr = 8 if l4t == L4_TYPE_UDP else 20 if l4t == L4_TYPE_TCP else 0
            if l2 + l3 + hdr > len(s.pkt):
                raise exec_err(f"*** error: instruction id '{ins_id}' fix hw command offsets  {l2 + l3 + hdr}  is too "
                               f"high relative to packet size  {len(s.pkt)}")
            if s.pkt[l2] >> 4 != 4:
                raise exec_err(f"{STANDIN}: fix_checksum_hw on a non-IPv4 packet (offset {l2}) is not implemented")


def split_stream(s: Stream, n: int) -> list[CoreStream]:
    """TrexStreamsCompiler::compile_stream and TrexVmSplitter::split for one continuous stream on a
    port served by n cores."""
    if n == 1 or s.core_id >= 0 or s.flow_stats:
        # compile_stream_on_single_core (is_splitable: not pinned, not sequenced); the splitter
        # (and its cache limit) is not involved
        compile_vm(s)
        return [CoreStream(s, max(0, s.core_id), [_clone_ins(i) for i in s.vm], s.cache, 1.0)]
    caches = [0] * n
    if s.vm:   # TrexVmSplitter::split: "nothing to do if no VM"
        if s.cache > MAX_CACHE_SPLIT:
            raise exec_err("Cache is too big try to reduce it ")
        if s.cache > 0:
            per, left = s.cache // n, s.cache % n
            if per < 1:
                per, left = 1, 0
            caches = [per + (1 if i < left else 0) for i in range(n)]
    compile_vm(s)
    split = any(i[0] == "var" and i[1].need_split() for i in s.vm)
    out = []
    for core in range(n):
        vm = [_clone_ins(i) for i in s.vm]
        if split:   # split_internal: every splittable variable gets phase `core` and step x n
            for i in vm:
                if i[0] == "var" and i[1].need_split():
                    i[1].update(core, n)
        out.append(CoreStream(s, core, vm, caches[core], 1.0 / n))
    return out


def _clone_ins(ins):
    return (ins[0], ins[1].clone(), *ins[2:]) if ins[0] == "var" else ins


def core_period(cs: CoreStream) -> int:
    """Frames after which this core's sequence repeats; 0: never (random without a cache)."""
    if cs.cache:
        return cs.cache
    p = 1
    for i in cs.vm:
        if i[0] == "var":
            q = i[1].period()
            if q == 0:
                return 0
            p = p * q // gcd(p, q)
    return p


def core_frames(cs: CoreStream, count: int, port: "PortCfg", thread_id: int, seed: int) -> list[bytes]:
    """The first `count` frames one core sends of its stream: the field engine run per frame, or
    the core's cache of `cache` frames replayed (TrexStatelessDpCore::replay_vm_into_cache)."""
    base = bytearray(cs.stream.pkt)
    _mac_override(cs.stream, base, port)
    rand = Rand(cs.stream.random_seed or seed, thread_id)
    made = []
    todo = min(count, cs.cache) if cs.cache else count
    for k in range(todo):
        buf = bytearray(base)
        vals = {}
        for ins in cs.vm:
            kind = ins[0]
            if kind == "var":
                vals[ins[1].name] = (ins[1], ins[1].value(k, rand))
            elif kind == "write":
                var, val = vals[ins[1]]
                off, add, big = ins[2], ins[3], ins[4]
                val = (val + add) % (1 << (8 * var.size))
                buf[off:off + var.size] = val.to_bytes(var.size, "big" if big else "little")
            elif kind == "write_mask":   # StreamDPOpPktWrMask::wr
                var, val = vals[ins[1]]
                off, cast, mask, shift, add, big = ins[2:8]
                val = (val + add) & 0xFFFFFFFF
                val = (val << shift if shift > 0 else val >> -shift) & 0xFFFFFFFF
                order = "big" if big else "little"
                old = int.from_bytes(buf[off:off + cast], order)
                new = ((old & ~mask) | (val & mask)) & ((1 << (8 * cast)) - 1)
                buf[off:off + cast] = new.to_bytes(cast, order)
            elif kind == "fix_ipv4":
                fix_ipv4(buf, ins[1])
            elif kind == "fix_hw":
                l2, l3, l4t = ins[1], ins[2], ins[3]
                fix_ipv4(buf, l2)
                if l4t == L4_TYPE_UDP:
                    fix_l4(buf, l2, l2 + l3, 6)
                elif l4t == L4_TYPE_TCP:
                    fix_l4(buf, l2, l2 + l3, 16)
        made.append(bytes(buf))
    if cs.cache:
        made = [made[k % len(made)] for k in range(count)]
    return made


def _mac_override(s: Stream, buf: bytearray, port: "PortCfg") -> None:
    """TrexStatelessDpCore::update_mac_addr: flags bit 0 = source MAC from the packet, bits 1-2 =
    destination MAC mode (0 from the config file, 1 from the packet, 2 resolved: the config's)."""
    src_pkt, dst_mode = bool(s.flags & 1), (s.flags >> 1) & 3
    if dst_mode != 1 and port.dest_mac:
        buf[0:6] = port.dest_mac
    if not src_pkt and port.src_mac:
        buf[6:12] = port.src_mac


def build_cycle(cores: list[CoreStream], port: "PortCfg", pair: int, n: int, seed: int) -> list[bytes]:
    """The wire sequence of a port: each stream's cores round robin (core i's k-th frame is the
    stream's frame i + k*n), the streams interleaved by smooth weighted round robin in proportion
    to their rates; one whole cycle, or MAX_CYCLE frames when a random variable has no cache."""
    by_stream: dict[int, list[CoreStream]] = {}
    for cs in cores:
        by_stream.setdefault(cs.stream.sid, []).append(cs)
    seqs, rates = [], []
    for sid, css in by_stream.items():
        css.sort(key=lambda c: c.core)
        periods = [core_period(c) for c in css]
        if 0 in periods:
            per_core = max(1, MAX_CYCLE // len(css))
        else:
            per_core = 1
            for p in periods:
                per_core = per_core * p // gcd(per_core, p)
        length = per_core * len(css)
        if length > MAX_CYCLE:
            raise exec_err(f"{STANDIN}: stream {sid} on {len(css)} cores repeats after {length} frames, more "
                           f"than xdpgen's {MAX_CYCLE} (choose a field-engine cache that divides evenly)")
        per = [core_frames(c, per_core, port, pair * n + c.core, seed) for c in css]
        seqs.append([per[j % len(css)][j // len(css)] for j in range(length)])
        rates.append(css[0].stream.rate_pps)
    if len(seqs) == 1:
        return seqs[0]
    return _interleave(seqs, rates)


def _interleave(seqs: list[list[bytes]], rates: list[float]) -> list[bytes]:
    from fractions import Fraction
    w = [Fraction(r).limit_denominator(1000) for r in rates]
    den = 1
    for x in w:
        den = den * x.denominator // gcd(den, x.denominator)
    wi = [int(x * den) for x in w]
    g = 0
    for x in wi:
        g = gcd(g, x)
    wi = [x // g for x in wi]
    total = sum(wi)
    rounds = 1
    for s, x in zip(seqs, wi):
        r = len(s) // gcd(len(s), x)
        rounds = rounds * r // gcd(rounds, r)
    if rounds * total > MAX_CYCLE:
        raise exec_err(f"{STANDIN}: interleaving {len(seqs)} streams needs {rounds * total} frames, more than "
                       f"xdpgen's {MAX_CYCLE}")
    cur, idx, out = [0] * len(wi), [0] * len(wi), []
    for _ in range(rounds * total):
        for j, x in enumerate(wi):
            cur[j] += x
        j = max(range(len(wi)), key=lambda i: (cur[i], -i))
        cur[j] -= total
        out.append(seqs[j][idx[j] % len(seqs[j])])
        idx[j] += 1
    return out


# ================================================================================================
# Configuration (the parts of /etc/trex_cfg.yaml and t-rex-64's options the stand-in uses)
# ================================================================================================
@dataclass
class PortCfg:
    iface: str | None             # None: TRex's "dummy" interface (a port that sends nothing)
    src_mac: bytes | None = None
    dest_mac: bytes | None = None
    speed_bps: float | None = None   # None: the interface's link speed


@dataclass
class Config:
    ports: list[PortCfg]
    cores: int = 1
    rpc_port: int = 4501
    pub_port: int = 4500
    bind: str = "*"
    version: str = VERSION
    xdpgen: str = ""
    workdir: str = ""
    hostname: str = field(default_factory=socket.gethostname)


class ConfigError(Exception):
    pass


def _mac(text, where) -> bytes:
    m = re.fullmatch(r"([0-9A-Fa-f]{2})([:-][0-9A-Fa-f]{2}){5}", str(text).strip())
    if not m:
        raise ConfigError(f"Failed to read {where}: {text!r} is not a MAC address (like 02:00:00:00:05:00)")
    return bytes(int(x, 16) for x in re.split(r"[:-]", str(text).strip()))


def load_config(path: str, cores: int | None) -> Config:
    """A TRex platform config (a YAML list of one mapping): interfaces (names, or "dummy"),
    port_info (src_mac / dest_mac per port), c (cores per dual port), zmq_rpc_port, zmq_pub_port;
    -c on the command line wins over c. Other keys are TRex's own and ignored here."""
    import yaml
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"Failed to read the TRex config {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"Failed to read the TRex config {path}: not YAML ({e})") from None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict):
        raise ConfigError(f"Failed to read the TRex config {path}: expected a list holding one mapping "
                          "(- port_limit: 2 ... interfaces: [...])")
    ifs = data.get("interfaces")
    if not isinstance(ifs, list) or not ifs or not all(isinstance(i, str) for i in ifs):
        raise ConfigError(f"Failed to read the TRex config {path}: key 'interfaces' must be a list of interface "
                          f"names (or \"dummy\"), got {ifs!r}")
    if len(ifs) % 2:
        raise ConfigError(f"Failed to read the TRex config {path}: 'interfaces' has {len(ifs)} entries; TRex uses "
                          "ports in pairs (add \"dummy\" for an unused one)")
    limit = data.get("port_limit", len(ifs))
    if not isinstance(limit, int) or limit < 1 or limit > len(ifs):
        raise ConfigError(f"Failed to read the TRex config {path}: port_limit {limit!r} must be 1..{len(ifs)}")
    info = data.get("port_info") or []
    if not isinstance(info, list):
        raise ConfigError(f"Failed to read the TRex config {path}: key 'port_info' must be a list")
    ports = []
    for i, name in enumerate(ifs[:limit]):
        pi = info[i] if i < len(info) and isinstance(info[i], dict) else {}
        where = f"the TRex config {path}: port_info[{i}]"
        ports.append(PortCfg(None if name == "dummy" else name,
                             _mac(pi["src_mac"], where + ".src_mac") if pi.get("src_mac") else None,
                             _mac(pi["dest_mac"], where + ".dest_mac") if pi.get("dest_mac") else None))
    c = cores if cores is not None else data.get("c", 1)
    if not isinstance(c, int) or c < 1:
        raise ConfigError(f"Failed to read the TRex config {path}: c {c!r} must be an integer >= 1")
    cfg = Config(ports=ports, cores=c)
    for key, attr in (("zmq_rpc_port", "rpc_port"), ("zmq_pub_port", "pub_port")):
        if key in data:
            v = data[key]
            if not isinstance(v, int) or not 1 <= v <= 65535:
                raise ConfigError(f"Failed to read the TRex config {path}: {key} {v!r} must be a port number")
            setattr(cfg, attr, v)
    return cfg


# ================================================================================================
# Transmission
# ================================================================================================
@dataclass
class TxPlan:
    port_id: int
    iface: str | None
    pps: float
    duration: float               # <= 0: until stopped
    frame_len: int
    cycle: callable               # () -> list[bytes]: built only by a transmitter that sends


@dataclass
class TxResult:
    opackets: int = 0             # frames the device took
    obytes: int = 0
    queue_full: int = 0
    oerrors: int = 0
    raw: dict = field(default_factory=dict)
    error: str = ""


class XdpgenTx:
    """Sends a port's cycle with xdpgen on the port's interface (in this network namespace).

    Counters (TRex: port stats from the NIC, global queue_full from CCoreEthIF::send_burst):
    opackets = xdpgen's xdp_xmit (frames the device's ring took; xdpgen's own frame count when the
    driver has no such counter); queue_full = xdp_xmit_errors, the frames the ring refused because
    it was full. TRex, in its default retry mode, counts one queue_full per 1 µs retry while the ring
    is full and then sends the frame; xdpgen does not retry: the refused frame is lost and not in
    opackets (as TRex's --queue-drop mode, which counts m_tx_drop instead). oerrors = frames xdpgen
    redirected that the device neither took nor refused as full (e.g. a veth peer without NAPI)."""

    def __init__(self, binary: str, workdir: str, log=None):
        self.binary, self.workdir, self.log = binary, workdir, log or (lambda m: None)
        self.p = None
        self.result: TxResult | None = None
        self._done = threading.Event()

    def start(self, plan: TxPlan, on_done) -> None:
        if plan.iface is None:
            raise exec_err(f"{STANDIN}: port {plan.port_id} is a dummy interface in the config; it cannot send")
        if not os.access(self.binary, os.X_OK):
            raise exec_err(f"{STANDIN}: Failed to start xdpgen: {self.binary} is not an executable "
                           "(build loadgen/ or pass --xdpgen PATH)")
        frames = plan.cycle()
        pcap = Path(self.workdir) / f"port{plan.port_id}.pcap"
        write_pcap(frames, pcap)
        argv = [self.binary, "--dev", plan.iface, "--pcap", str(pcap), "--rate", repr(float(plan.pps))]
        if plan.duration > 0:
            argv += ["--duration", repr(float(plan.duration))]
        self.log(f"port {plan.port_id}: {len(frames)}-frame cycle, {' '.join(argv)}")
        self.base = xdp_xmit_counters(plan.iface)
        self.iface, self.frame_len, self.plan = plan.iface, plan.frame_len, plan
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err_lines: list[str] = []
        started = threading.Event()

        def read_err():
            for line in self.p.stderr:
                self.err_lines.append(line.rstrip())
                # TRex's start_traffic answers once its data path was told to start, which sends at
                # once; xdpgen's first frame leaves tens of ms after its "sending" line (the test
                # run's RCU grace periods): answering at "sending" put that silence inside the
                # harness's window of an open-ended run (xenobench.traffic.trex.live_rate)
                if "xdpgen: first frame sent" in line:
                    started.set()
            started.set()

        def wait():
            out = self.p.stdout.read()
            self.p.wait()
            self.result = self._result(out)
            self._done.set()
            on_done(self.result)

        threading.Thread(target=read_err, daemon=True).start()
        started.wait(2.0)   # an early failure (no such device, BPF) is the start's error
        if self.p.poll() is not None and self.p.returncode != 0:
            self.p.stdout.read()
            self.p.wait()
            time.sleep(0.05)
            msg = next((m for m in reversed(self.err_lines) if "Failed to" in m), "; ".join(self.err_lines[-2:]))
            raise exec_err(f"{STANDIN}: {msg or f'xdpgen exited with status {self.p.returncode}'} "
                           f"(xdpgen on {plan.iface})")
        threading.Thread(target=wait, daemon=True).start()

    def _result(self, out: str) -> TxResult:
        res = None
        for line in reversed(out.strip().splitlines()):
            if line.startswith("{"):
                try:
                    res = json.loads(line)
                    break
                except ValueError:
                    pass
        if res is None:
            return TxResult(error=f"xdpgen on {self.iface} exited with status {self.p.returncode}: "
                                  f"{'; '.join(self.err_lines[-3:])}")
        frames = int(res["frames"])
        taken = res.get("xdp_xmit")
        full = int(res.get("xdp_xmit_errors") or 0)
        op = int(taken) if taken is not None else frames
        return TxResult(opackets=op, obytes=op * self.frame_len, queue_full=full,
                        oerrors=max(0, frames - op - full), raw=res)

    def live(self) -> int:
        """Frames the device took so far (its xdp_xmit counter), for statistics during a run."""
        now = xdp_xmit_counters(self.iface)
        return max(0, now[0] - self.base[0]) if now and self.base else 0

    def stop(self) -> TxResult:
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        self._done.wait(30)
        return self.result or TxResult(error="xdpgen did not report")


def xdp_xmit_counters(iface: str):
    """(sum of tx_queue_N_xdp_xmit, sum of ..._errors) from ethtool -S, or None."""
    try:
        out = subprocess.run(["ethtool", "-S", iface], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    ok = err = 0
    seen = False
    for line in out.splitlines():
        k, _, v = line.strip().partition(":")
        if re.fullmatch(r"tx_queue_\d+_xdp_xmit", k):
            ok += int(v)
            seen = True
        elif re.fullmatch(r"tx_queue_\d+_xdp_xmit_errors", k):
            err += int(v)
    return (ok, err) if seen else None


def write_pcap(frames, path) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for fr in frames:
            f.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)))
            f.write(fr)


# ================================================================================================
# The server
# ================================================================================================
STATES = ("IDLE", "STREAMS", "TX")


@dataclass
class Profile:
    streams: dict = field(default_factory=dict)    # stream id -> Stream
    state: str = "IDLE"
    tx: object = None
    mult: float = 1.0


@dataclass
class Port:
    pid: int
    cfg: PortCfg
    owner: str = ""
    session: int = 0
    handler: str = ""
    profiles: dict = field(default_factory=dict)   # profile id -> Profile
    opackets: int = 0
    obytes: int = 0
    oerrors: int = 0
    service: bool = False

    def state(self) -> str:
        states = [p.state for p in self.profiles.values()]
        return "TX" if "TX" in states else "STREAMS" if "STREAMS" in states else "IDLE"


class TrexStandin:
    """The RPC server. transmitter: a factory () -> object with start(plan, on_done)/stop()/live();
    default xdpgen. Use as a context manager (serves in a thread) or call serve_forever()."""

    def __init__(self, cfg: Config, transmitter=None, log=None):
        self.cfg = cfg
        self.ports = {i: Port(i, pc) for i, pc in enumerate(cfg.ports)}
        self.log = log or (lambda m: None)
        self._own_workdir = not cfg.workdir
        self.workdir = cfg.workdir or tempfile.mkdtemp(prefix="trex-standin-")
        self.transmitter = transmitter or (lambda: XdpgenTx(cfg.xdpgen, self.workdir, self.log))
        self.api_h = "%08x" % random.getrandbits(32)
        self.queues: dict[int, list] = {}   # session id -> events not yet fetched
        self.seqs: dict[int, int] = {}      # session id -> next sequence number (the client checks them)
        self.queue_full_total = 0
        self.lock = threading.RLock()
        self.calls: list[tuple[str, dict]] | None = None   # a list: every call is recorded (tests)
        self._stop = threading.Event()
        self._trigger = False
        self.t0 = time.time()
        self.seed = int(time.time())

    # --- sockets -------------------------------------------------------------------------------
    def open(self, rpc_port: int | None = None, pub_port: int | None = None, bind: str | None = None):
        import zmq
        self.zmq = zmq
        self.ctx = zmq.Context()
        self.rep = self.ctx.socket(zmq.REP)
        self.pub = self.ctx.socket(zmq.PUB)
        addr = f"tcp://{bind or self.cfg.bind}"
        rpc = self.cfg.rpc_port if rpc_port is None else rpc_port
        pub = self.cfg.pub_port if pub_port is None else pub_port
        try:
            self.sync_port = self.rep.bind_to_random_port(addr) if rpc == 0 else (self.rep.bind(f"{addr}:{rpc}"), rpc)[1]
            self.async_port = self.pub.bind_to_random_port(addr) if pub == 0 else (self.pub.bind(f"{addr}:{pub}"), pub)[1]
        except zmq.ZMQError as e:
            self.close()
            raise ConfigError(f"Failed to bind the RPC sockets on {addr} ports {rpc}/{pub}: {e}") from None
        self.rep.setsockopt(zmq.RCVTIMEO, 100)
        return self

    def close(self):
        for p in self.ports.values():
            for prof in p.profiles.values():
                if prof.tx is not None:
                    try:
                        prof.tx.stop()
                    except Exception:   # noqa: BLE001  closing anyway
                        pass
        for s in ("rep", "pub"):
            if hasattr(self, s):
                getattr(self, s).close(0)
        if hasattr(self, "ctx"):
            self.ctx.term()
        if self._own_workdir:
            import shutil
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        if not hasattr(self, "rep"):
            self.open(0, 0, "127.0.0.1")
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join(5)
        self.close()

    def shutdown(self):
        self._stop.set()

    def serve_forever(self):
        last = 0.0
        while not self._stop.is_set():
            try:
                raw = self.rep.recv()
            except self.zmq.Again:
                raw = None
            if raw is not None:
                self.rep.send(self.handle(raw))
            now = time.monotonic()
            if self._trigger or now - last >= 0.5:   # TRex publishes every 0.5 s and on events
                self._trigger = False
                last = now
                self.pub.send(b"{}")

    # --- JSON-RPC framing (rpc-server/trex_rpc_jsonrpc_v2_parser.cpp, trex_rpc_zip.cpp) ------------
    def handle(self, raw: bytes) -> bytes:
        zipped = len(raw) >= 8 and struct.unpack(">I", raw[:4])[0] == ZIP_MAGIC
        if zipped:
            raw = zlib.decompress(raw[8:])
        try:
            req = parse_json(raw.decode())
        except (ValueError, UnicodeDecodeError):
            req = None
            out = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Bad JSON Format"}}
        if req is not None:
            out = [self._one(r) for r in req] if isinstance(req, list) else self._one(req)
        data = json.dumps(out).encode()
        if zipped:
            data = struct.pack(">II", ZIP_MAGIC, len(data)) + zlib.compress(data)
        return data

    def _one(self, req) -> dict:
        mid = req.get("id") if isinstance(req, dict) else None
        if mid is None:
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Missing 'id' field"}}
        if req.get("jsonrpc") != "2.0":
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32600, "message": "Invalid JSONRPC Version"}}
        method = req.get("method")
        if not method or not isinstance(method, str):
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32600, "message": "Missing Method Name"}}
        params = req.get("params")
        if self.calls is not None:
            self.calls.append((method, dict(params) if isinstance(params, dict) else {}))
        spec = COMMANDS.get(method)
        if spec is None:
            return {"jsonrpc": "2.0", "id": mid,
                    "error": {"code": -32601, "message": f"Method {method} not registered"}}
        needs_api, owned = spec
        try:
            with self.lock:
                if needs_api and get(params, "api_h", "string") != self.api_h:
                    raise exec_err(f"API verification failed - API handler provided mismatch for class: '{API_NAME}'")
                if owned:
                    self._verify_owner(params)
                if not isinstance(params, dict):
                    raise exec_err("JSON-RPC2 params should be object in TRex case ")
                res = getattr(self, "rpc_" + method)(params)
        except RpcError as e:
            code, msg = RpcError.CODES[e.kind]
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": msg, "specific_err": str(e)}}
        return {"jsonrpc": "2.0", "id": mid, "result": res}

    # --- helpers -------------------------------------------------------------------------------
    def _port(self, params) -> Port:
        pid = get(params, "port_id", "byte")
        if pid not in self.ports:    # TrexRpcCommand::validate_port_id
            raise exec_err("invalid port id - should be:" + "".join(f" {p}" for p in self.ports))
        return self.ports[pid]

    def _verify_owner(self, params):
        """TrexRpcCommand::verify_ownership."""
        handler = get(params, "handler", "string")
        port = self._port(params)
        if not port.owner:
            raise exec_err("please acquire the port before modifying port state")
        if handler != port.handler:
            raise exec_err("port is not owned by you or your current executing session")

    @staticmethod
    def _profile_id(params, default="_") -> str:
        v = params.get("profile_id")
        return default if v is None else str(v)

    def _event(self, ev_type: int, data: dict, name: str = "trex-event"):
        for q in self.queues.values():
            q.append({"name": name, "type": ev_type, "data": data})
        self._trigger = True

    def port_speed_bps(self, port: Port) -> float:
        """The link speed (TrexPlatformApi: from the driver); 0 when the kernel does not know it."""
        if port.cfg.speed_bps is not None:
            return port.cfg.speed_bps
        if port.cfg.iface is None:
            return 0.0
        try:
            mbps = int(Path(f"/sys/class/net/{port.cfg.iface}/speed").read_text())
        except (OSError, ValueError):
            return 0.0
        return mbps * 1e6 if mbps > 0 else 0.0

    def _mac_of(self, port: Port) -> str:
        if port.cfg.src_mac:
            return ":".join(f"{b:02x}" for b in port.cfg.src_mac)
        if port.cfg.iface:
            try:
                return Path(f"/sys/class/net/{port.cfg.iface}/address").read_text().strip()
            except OSError:
                pass
        return "00:00:00:00:00:00"

    # --- general -------------------------------------------------------------------------------
    def rpc_api_sync_v2(self, params):
        name = get(params, "name", "string")
        major, minor = get(params, "major", "int"), get(params, "minor", "int")
        if name != API_NAME:   # TrexRpcAPIVersion::verify
            raise exec_err(f"RPC configuration mismatch - server RPC configuration: '{API_NAME}', client RPC "
                           f"configuration: '{name}'")
        if major != API_MAJOR or minor > API_MINOR:
            why = ("RPC version mismatch: a newer client version is required" if major < API_MAJOR else
                   "Version mismatch: your client version is too new to be supported by the server")
            raise exec_err(f"{why}\n(API type '{API_NAME}':  - server: 'v{API_MAJOR}.{API_MINOR}', "
                           f"client: 'v{major}.{minor}')")
        return {"api_h": self.api_h}

    def rpc_get_version(self, params):
        return {"version": self.cfg.version, "build_date": "Jan  1 2024", "build_time": "00:00:00",
                "built_by": STANDIN, "mode": "STL"}

    def rpc_ping(self, params):
        return {}

    def rpc_get_system_info(self, params):
        n = self.cfg.cores
        ports = []
        for i, p in self.ports.items():
            ports.append({"index": i, "driver": "net_af_xdp" if p.cfg.iface else "net_null",
                          "pci_addr": p.cfg.iface or "dummy", "numa": 0, "hw_mac": self._mac_of(p),
                          "stack": "legacy", "description": f"{STANDIN} ({p.cfg.iface or 'dummy'})",
                          "rx": {"caps": [], "counters": 0}, "is_fc_supported": False,
                          "is_led_supported": False, "is_link_supported": False, "is_prom_supported": False,
                          "is_vxlan_supported": False, "is_virtual": True,
                          "supp_speeds": [int(self.port_speed_bps(p) / 1e6)],
                          "cores": list(range((i // 2) * n, (i // 2) * n + n))})
        pairs = max(1, len(self.ports) // 2)
        return {"hostname": self.cfg.hostname, "uptime": f"{int(time.time() - self.t0)} s",
                "dp_core_count": n * pairs, "dp_core_count_per_port": n, "core_type": STANDIN,
                "is_multiqueue_mode": False, "advanced_per_stream_stats": False, "port_count": len(self.ports),
                "ports": ports}

    def rpc_get_supported_cmds(self, params):
        return sorted(COMMANDS)

    def rpc_publish_now(self, params):
        key = get(params, "key", "uint32")
        baseline = get(params, "baseline", "bool")
        for q in self.queues.values():
            q.append({"name": "trex-barrier", "type": key, "data": {}, "baseline": baseline})
        self._trigger = True
        return {}

    def rpc_get_async_events(self, params):
        session = get(params, "session_id", "uint32")
        q = self.queues.setdefault(session, [])
        out = []
        for e in q:
            seq = self.seqs.get(session, 0)
            out.append({**e, "seq": seq})
            self.seqs[session] = seq + 1
        q.clear()
        return {"data": out}

    def rpc_get_global_stats(self, params):
        tx = sum(p.opackets + self._live(p) for p in self.ports.values())
        txb = sum(p.obytes for p in self.ports.values())
        return {"m_cpu_util": 0.0, "m_cpu_util_raw": 0.0, "m_bw_per_core": 0.0, "m_rx_cpu_util": 0.0,
                "m_rx_core_pps": 0.0, "m_platform_factor": 1.0, "m_tx_bps": 0.0, "m_rx_bps": 0.0,
                "m_tx_pps": 0.0, "m_rx_pps": 0.0, "m_total_tx_pkts": tx, "m_total_rx_pkts": 0,
                "m_total_tx_bytes": txb, "m_total_rx_bytes": 0, "m_tx_expected_cps": 0.0,
                "m_tx_expected_pps": 0.0, "m_tx_expected_bps": 0.0, "m_total_alloc_error": 0,
                "m_total_queue_full": self.queue_full_total, "m_total_queue_drop": 0,
                "m_rx_drop_bps": 0.0, "m_active_flows": 0, "m_open_flows": 0, "m_total_nat_time_out": 0,
                "m_total_nat_no_fid": 0, "m_total_nat_active": 0, "m_total_nat_open": 0,
                "m_total_nat_learn_error": 0, "m_socket_util": 0.0, "m_total_clients": 0,
                "m_total_servers": 0, "m_active_sockets": 0}

    def rpc_get_utilization(self, params):
        return {"cpu": [[0] * 20 for _ in range(self.cfg.cores)], "mbuf_stats": {}}

    def rpc_get_active_pgids(self, params):
        return {"ids": {"latency": [], "flow_stats": []}}

    def rpc_get_pgid_stats(self, params):
        if params.get("pgids"):
            raise exec_err(f"{STANDIN}: no flow statistics (pgids must be empty)")
        return {"ver_id": {}, "flow_stats": {}, "latency": {}}

    def rpc_get_tpg_status(self, params):
        return {"enabled": False}

    def rpc_capture(self, params):
        cmd = get(params, "command", "string")
        if cmd != "status":
            raise exec_err(f"{STANDIN}: capture command {cmd!r} is not implemented")
        return []

    # --- ports -----------------------------------------------------------------------------------
    def _live(self, port: Port) -> int:
        n = 0
        for prof in port.profiles.values():
            if prof.tx is not None and hasattr(prof.tx, "live"):
                n += prof.tx.live()
        return n

    def rpc_get_port_status(self, params):
        p = self._port(params)
        prof = self._profile_id(params, "")
        mac = self._mac_of(p)
        dst = ":".join(f"{b:02x}" for b in p.cfg.dest_mac) if p.cfg.dest_mac else "00:00:00:00:00:00"
        out = {"owner": p.owner, "state": p.state(), "service": p.service, "service_filtered": False,
               "profile_count": len(p.profiles),
               "max_stream_id": max((sid for pr in p.profiles.values() for sid in pr.streams), default=0),
               "attr": {"promiscuous": {"enabled": False}, "multicast": {"enabled": False},
                        "link": {"up": True}, "speed": int(self.port_speed_bps(p) / 1e9), "fc": {"mode": 0},
                        "vxlan_fs": None,
                        "layer_cfg": {"ether": {"src": mac, "dst": dst, "state": "configured"},
                                      "ipv4": {"state": "none"}, "ipv6": {"enabled": False}},
                        "vlan": {"tags": []}, "rx_filter_mode": "hw", "src_mac": mac, "dest": dst,
                        "tpg": {"enabled": False}},
               "rx_info": {"grat_arp": {"is_active": False}, "queue": {"is_active": False},
                           "capture": {"is_active": False}, "latency": {"is_active": False},
                           "capwap_proxy": {"is_active": False}}}
        if prof:
            if prof == "*":
                out["state_profile"] = {k: v.state for k, v in p.profiles.items()}
            elif prof in p.profiles:
                out["state_profile"] = {prof: p.profiles[prof].state}
            else:
                out["state_profile"] = {}
        return out

    def rpc_get_port_xstats_names(self, params):
        self._port(params)
        return {"xstats_names": XSTATS}

    def rpc_get_port_xstats_values(self, params):
        p = self._port(params)
        op = p.opackets + self._live(p)
        vals = {"tx_good_packets": op, "tx_good_bytes": p.obytes, "tx_errors": p.oerrors,
                "tx_queue_full": self.queue_full_total}
        return {"xstats_values": [vals.get(n, 0) for n in XSTATS]}

    def rpc_get_port_stats(self, params):
        p = self._port(params)
        return {"opackets": p.opackets + self._live(p), "ipackets": 0, "obytes": p.obytes, "ibytes": 0,
                "oerrors": p.oerrors, "ierrors": 0, "m_total_tx_bps": 0.0, "m_total_tx_pps": 0.0,
                "m_total_rx_bps": 0.0, "m_total_rx_pps": 0.0, "m_cpu_util": 0.0, "m_line_util": 0.0}

    def rpc_get_owner(self, params):
        return {"owner": self._port(params).owner}

    def rpc_acquire(self, params):
        """TrexRpcCmdAcquire, TrexPort::acquire."""
        p = self._port(params)
        user = get(params, "user", "string")
        force = get(params, "force", "bool")
        session = get(params, "session_id", "uint32")
        used_force = bool(p.owner) and force
        if not p.owner or force:
            p.owner, p.session, p.handler = user, session, "%08x" % random.getrandbits(32)
        elif p.owner != user:
            raise exec_err(f"port is already taken by '{p.owner}'")
        elif p.session != session:
            raise exec_err(f"port is already owned by another session of '{user}'")
        self.queues.setdefault(session, [])
        self._event(EV_PORT_ACQUIRED, {"port_id": p.pid, "who": user, "session_id": session, "force": used_force})
        return p.handler

    def rpc_release(self, params):
        p = self._port(params)
        data = {"port_id": p.pid, "who": p.owner, "session_id": p.session}
        p.owner, p.session, p.handler = "", 0, ""
        self._event(EV_PORT_RELEASED, data)
        return {}

    def rpc_service(self, params):
        p = self._port(params)
        p.service = get(params, "enabled", "bool")
        return {}

    def rpc_set_port_attr(self, params):
        self._port(params)
        get(params, "attr", "object")
        return {}

    def rpc_set_rx_feature(self, params):
        self._port(params)
        choice(params, "type", ("queue", "server", "capwap_proxy"))
        return {}

    def rpc_remove_rx_filters(self, params):
        p = self._port(params)
        prof = p.profiles.get(self._profile_id(params))
        if prof is not None:
            self._verify_state(prof, ("STREAMS",), "remove_rx_filters", self._profile_id(params))
        return {}

    def rpc_get_profile_list(self, params):
        return list(self._port(params).profiles)

    def rpc_get_stream_list(self, params):
        p = self._port(params)
        prof = p.profiles.get(self._profile_id(params))
        return [] if prof is None else sorted(prof.streams)

    def rpc_get_all_streams(self, params):
        p = self._port(params)
        pid = self._profile_id(params)
        profs = p.profiles if pid == "*" else {k: v for k, v in p.profiles.items() if k == pid}
        if pid == "*":
            return {"profiles": {k: {str(s): st.json for s, st in v.streams.items()} for k, v in profs.items()
                                 if v.streams}}
        prof = profs.get(pid)
        return {"streams": {str(s): st.json for s, st in prof.streams.items()} if prof else {}}

    @staticmethod
    def _verify_state(prof: Profile, allowed, cmd: str, pid: str):
        """TrexStatelessProfile::verify_profile_state."""
        if prof.state not in allowed:
            raise exec_err(f"command '{cmd}' cannot be executed on current state: '{prof.state}' on "
                           f"profile_id({pid}).")

    def rpc_remove_all_streams(self, params):
        p = self._port(params)
        pid = self._profile_id(params)
        ids = list(p.profiles) if pid == "*" else [pid]
        for i in ids:
            prof = p.profiles.get(i)
            if prof is None:
                continue
            self._verify_state(prof, ("IDLE", "STREAMS"), "remove_and_delete_all_streams", i)
            del p.profiles[i]
        return {}

    def rpc_remove_stream(self, params):
        p = self._port(params)
        pid = self._profile_id(params)
        sid = get(params, "stream_id", "uint32")
        prof = p.profiles.get(pid)
        if prof is None or sid not in prof.streams:
            raise exec_err(f"stream {sid} does not exists")
        self._verify_state(prof, ("STREAMS",), "remove_stream", pid)
        del prof.streams[sid]
        if not prof.streams:
            del p.profiles[pid]
        return {}

    # --- add_stream (trex_stl_rpc_cmds.cpp: TrexRpcCmdAddStream) ---------------------------------
    def rpc_add_stream(self, params):
        p = self._port(params)
        pid = self._profile_id(params)
        sid = get(params, "stream_id", "uint32")
        sec = get(params, "stream", "object")
        mode = get(sec, "mode", "object")
        mtype = get(mode, "type", "string")
        if mtype in ("single_burst", "multi_burst"):
            raise exec_err(f"{STANDIN}: stream mode '{mtype}' is not implemented (continuous streams only)")
        if mtype != "continuous":
            raise parse_err(f"bad stream type provided: '{mtype}'")
        rate = get(mode, "rate", "object")
        rate_value = get(rate, "value", "udouble")
        rate_type = choice(rate, "type", RATE_TYPES)
        enabled = get(sec, "enabled", "bool")
        self_start = get(sec, "self_start", "bool")
        get(sec, "start_paused", "bool", False)
        flags = get(sec, "flags", "int")
        get(sec, "action_count", "uint32")
        random_seed = get(sec, "random_seed", "uint32", 0)
        get(sec, "isg", "udouble")
        next_id = get(sec, "next_stream_id", "int")
        core_id = get(sec, "core_id", "int", -1)
        if core_id >= 0 and core_id >= self.cfg.cores:
            raise exec_err("There is only one core, hence core ID must be 0." if self.cfg.cores == 1 else
                           f"Core ID is: {core_id}. It must be an integer between 0 and {self.cfg.cores - 1} "
                           "(inclusive).")
        pkt_obj = get(sec, "packet", "object")
        try:
            binary = base64.b64decode(get(pkt_obj, "binary", "string"), validate=False)
        except (ValueError, TypeError):
            binary = b""
        if not MIN_PKT_SIZE <= len(binary) <= MAX_PKT_SIZE:
            raise exec_err(f"Bad packet size provided: {len(binary)}. Should be between {MIN_PKT_SIZE} and {MAX_PKT_SIZE}")
        pkt = binary + bytes(max(0, 60 - len(binary)))
        get(pkt_obj, "meta", "string")
        vm_obj = get(sec, "vm", "object")
        vm = self._parse_vm(vm_obj)
        cache = get(vm_obj, "cache", "uint16", 0)
        rx = get(sec, "flow_stats", "object")
        fs = get(rx, "enabled", "bool")
        if fs:
            raise parse_err("RX stats is not supported on this interface")
        if not self_start or next_id >= 0:
            raise exec_err(f"{STANDIN}: stream {sid}: streams that do not self-start or chain to a next stream "
                           "are not implemented")
        prof = p.profiles.get(pid)
        if prof is not None and sid in prof.streams:
            raise exec_err(f"stream {sid} already exists in profile_id({pid})")
        if prof is not None:
            self._verify_state(prof, ("IDLE", "STREAMS"), "add_stream", pid)
            if len(prof.streams) >= MAX_STREAMS:
                raise exec_err(f"Reached limit of {MAX_STREAMS} streams at the port.")
        s = Stream(sid, sec, mtype, rate_type, rate_value, enabled, self_start, flags, core_id, random_seed,
                   pkt, vm, cache, fs)
        if prof is None:
            prof = p.profiles[pid] = Profile()
        prof.streams[sid] = s
        prof.state = "STREAMS"
        return {}

    def _parse_vm(self, vm_obj) -> list:
        insts = get(vm_obj, "instructions", "array")
        out = []
        for i in range(len(insts)):
            ins = check_field(insts, i, "object")
            t = choice(ins, "type", VM_TYPES)
            if t == "fix_checksum_ipv4":
                out.append(("fix_ipv4", get(ins, "pkt_offset", "uint16")))
            elif t == "fix_checksum_hw":
                out.append(("fix_hw", get(ins, "l2_len", "uint16"), get(ins, "l3_len", "uint16"),
                            get(ins, "l4_type", "uint16")))
            elif t == "flow_var":
                out.append(("var", self._parse_flow_var(ins)))
            elif t == "write_flow_var":
                out.append(("write", get(ins, "name", "string"), get(ins, "pkt_offset", "uint16"),
                            get(ins, "add_value", "int"), get(ins, "is_big_endian", "bool")))
            elif t == "write_mask_flow_var":
                w = ("write_mask", get(ins, "name", "string"), get(ins, "pkt_offset", "uint16"),
                     get(ins, "pkt_cast_size", "uint16"), get(ins, "mask", "uint32"), get(ins, "shift", "int"),
                     get(ins, "add_value", "int"), get(ins, "is_big_endian", "bool"))
                if w[3] not in (1, 2, 4):
                    raise exec_err(f"{STANDIN}: write_mask_flow_var pkt_cast_size {w[3]} (TRex: 1, 2 or 4)")
                out.append(w)
            else:   # fix_checksum_icmpv6, tuple_flow_var, trim_pkt_size, flow_var_rand_limit
                raise exec_err(f"{STANDIN}: field-engine instruction '{t}' is not implemented (implemented: "
                               "flow_var inc/dec/random, write_flow_var, write_mask_flow_var, fix_checksum_ipv4, "
                               "fix_checksum_hw" + ("; xdpgen sends frames of one length" if t == "trim_pkt_size"
                                                    else "") + ")")
        return out

    @staticmethod
    def _parse_flow_var(ins) -> FlowVar:
        """TrexRpcCmdAddStream::parse_vm_instr_flow_var, check_min_max, check_value_list,
        handle_range_padding."""
        name = get(ins, "name", "string")
        nxt = get(ins, "next_var", "string", "")
        size = choice(ins, "size", (1, 2, 4, 8))
        op = choice(ins, "op", ("inc", "dec", "random"))
        arr = get(ins, "value_list", "array", None)
        step = get(ins, "step", "uint64")
        split = get(ins, "split_to_cores", "bool", True)
        if nxt:
            raise exec_err(f"{STANDIN}: flow variable '{name}' chains to next_var '{nxt}' (not implemented)")
        limit = (1 << (8 * size)) - 1
        if arr is None:
            init = get(ins, "init_value", "uint64")
            lo = get(ins, "min_value", "uint64")
            hi = get(ins, "max_value", "uint64")
            if step == 0:
                raise parse_err("VM: step cannot be 0")
            if hi < lo:
                raise parse_err(f"VM: requested flow var max value: '{hi}' is smaller than min value: {lo}")
            if init < lo or init > hi:
                raise parse_err(f"VM: requested flow var init value: '{init}' should be in range from min value "
                                f"'{lo}' to max value '{hi}'")
            if size < 8 and (init > limit or lo > limit or hi > limit or step > limit):
                raise parse_err(f"VM: requested value is bigger than {limit}")
            pad = (hi - lo + 1) % step
            if pad:
                step_pad = step - pad
                if op == "inc":
                    if 2 ** 64 - 1 - hi < step_pad:
                        raise parse_err("VM: could not pad range to be a true cycle - '(max_value - min_value + 1) "
                                        "% step' should be zero")
                    hi += step_pad
                elif op == "dec":
                    if lo < step_pad:
                        raise parse_err("VM: could not pad range to be a true cycle - '(max_value - min_value + 1) "
                                        "% step' should be zero")
                    lo -= step_pad
            return FlowVar(name, size, op, step, split, init=init, lo=lo, hi=hi)
        values = []
        for j in range(len(arr)):
            v = arr[j]
            values.append(int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else 0)
        if step == 0:
            raise parse_err("VM: step cannot be 0")
        if step > len(values):
            raise parse_err("VM: step cannot be bigger than list size")
        if len(values) > 0xFFFF:
            raise parse_err("VM: value_list size is bigger than 65535")
        if size < 8 and any(v > limit for v in values):
            raise parse_err(f"VM: requested value is bigger than {limit}")
        return FlowVar(name, size, op, step, split, values=values)

    # --- traffic -------------------------------------------------------------------------------
    def _base_rates(self, p: Port, prof: Profile, streams: list[Stream]):
        """Each stream's pps at multiplier 1 (TrexStreamRate: bps and percentage through the packet
        size + FCS, and 20 B of preamble and gap at L1)."""
        speed = self.port_speed_bps(p)
        for s in streams:
            size = s.pkt_size()
            if s.rate_type == "pps":
                s.rate_pps = s.rate_value
            elif s.rate_type == "bps_L2":
                s.rate_pps = s.rate_value / (8 * size)
            elif s.rate_type == "bps_L1":
                s.rate_pps = s.rate_value * (size / (size + 20.0)) / (8 * size)
            else:
                s.rate_pps = (s.rate_value / 100.0) * speed * (size / (size + 20.0)) / (8 * size)

    def rpc_start_traffic(self, params):
        """TrexRpcCmdStartTraffic::_run and TrexStatelessProfile::start_traffic."""
        p = self._port(params)
        pid = self._profile_id(params)
        duration = get(params, "duration", "double")
        force = get(params, "force", "bool")
        mask = get(params, "core_mask", "uint64", 2 ** 64 - 1)
        get(params, "start_at_ts", "double", 0)
        if mask & ((1 << self.cfg.cores) - 1) == 0:
            raise parse_err(f"core_mask: '0x{mask:x}' for {self.cfg.cores} cores generates an empty set")
        if mask & ((1 << self.cfg.cores) - 1) != (1 << self.cfg.cores) - 1:
            raise exec_err(f"{STANDIN}: a core_mask that leaves cores out is not implemented")
        mul = get(params, "mul", "object")
        mtype = choice(mul, "type", MULT_TYPES)
        op = get(mul, "op", "string")
        value = get(mul, "value", "udouble")
        if value == 0:
            raise parse_err("multiplier can't be zero")
        if op != "abs":
            raise parse_err("start message can only specify absolute speed rate")
        prof = p.profiles.get(pid)
        if prof is None:
            raise exec_err(f"profile {pid} does not exist")   # TrexStatelessPort::valide_profile
        self._verify_state(prof, ("STREAMS",), "start", pid)
        if any(pr.state == "TX" for pr in p.profiles.values()):
            raise exec_err(f"{STANDIN}: port {p.pid} already transmits a profile; one at a time per port")
        streams = [s for s in prof.streams.values() if s.enabled]
        if not streams:
            raise exec_err("no streams attached to port")   # (TRex: the graph of an empty profile)
        self._base_rates(p, prof, streams)
        speed = self.port_speed_bps(p)
        max_pps = sum(s.rate_pps for s in streams)
        max_l1 = sum(s.rate_pps * (s.pkt_size() + 20) * 8 for s in streams)
        max_l2 = sum(s.rate_pps * s.pkt_size() * 8 for s in streams)
        # calculate_effective_factor_internal
        if mtype == "raw":
            factor = value
        elif mtype == "bps":
            factor = value / max_l2
        elif mtype == "bpsl1":
            factor = value / max_l1
        elif mtype == "pps":
            factor = value / max_pps
        else:
            factor = ((value / 100.0) * speed) / max_l1 if max_l1 else 0.0
        expected_l1 = max_l1 * factor
        if expected_l1 <= 0:
            raise exec_err("Effective bandwidth is zero, this means that your dpdk driver does not know the link "
                           f"throughput (virtual), please use absolute bandwidth  {_num(expected_l1)}")
        if factor <= 0:
            raise exec_err(f"Factor must be positive, got: {_num(factor)}")
        if not force:
            if speed <= 0 or expected_l1 / speed > 1.0001:
                raise exec_err(f"Expected L1 B/W: '{_num(expected_l1 / 1e9)} Gbps' exceeds port line rate: "
                               f"'{_num(speed / 1e9)} Gbps'")
            factor = min(factor, speed / max_l1)
        # compile: every stream over the port's cores (TrexStreamsCompiler::compile)
        n = self.cfg.cores
        cores = []
        for s in streams:
            s.rate_pps_eff = s.rate_pps * factor
            cores += split_stream(s, n)
        lens = {len(s.pkt) for s in streams}
        if len(lens) > 1:
            raise exec_err(f"{STANDIN}: the streams of port {p.pid} have frames of {sorted(lens)} B; xdpgen sends "
                           "frames of one length")
        pps = sum(s.rate_pps_eff for s in streams)
        seed = self.seed
        plan = TxPlan(p.pid, p.cfg.iface, pps, duration, lens.pop(),
                      lambda: build_cycle(cores, p.cfg, p.pid // 2, n, seed))
        tx = self.transmitter()
        prof.tx, prof.mult, prof.state = tx, factor, "TX"
        try:
            tx.start(plan, lambda res: self._tx_done(p, pid, prof, tx, res))
        except RpcError:
            prof.tx, prof.state = None, "STREAMS"
            raise
        self._event(EV_PROFILE_STARTED, {"port_id": p.pid, "profile_id": pid})
        self._event(EV_PORT_STARTED, {"port_id": p.pid})
        return {"multiplier": factor, "ts": time.time()}

    def _account(self, p: Port, res: TxResult):
        r = res.raw
        if r:  # xdpgen's own account, for an operator reading the stand-in's log (TRex has no such line)
            self.log(f"port {p.pid}: xdpgen sent {r.get('frames')} frames in {r.get('elapsed_s')} s, "
                     f"{r.get('achieved_pps')} pps, tokens lost {r.get('tokens_lost')}")
        p.opackets += res.opackets
        p.obytes += res.obytes
        p.oerrors += res.oerrors
        self.queue_full_total += res.queue_full

    def _tx_done(self, p: Port, pid: str, prof: Profile, tx, res: TxResult):
        """A transmission ended by itself (its duration): TRex's AsyncProfileStopEvent."""
        with self.lock:
            if prof.tx is not tx:
                return   # stopped meanwhile: stop_traffic accounted for it
            self._account(p, res)
            prof.tx, prof.state = None, "STREAMS"
            if res.error:
                self.log(f"port {p.pid}: {res.error}")
                self._event(EV_PROFILE_ERROR, {"port_id": p.pid, "profile_id": pid, "error": res.error})
            self._event(EV_PROFILE_FINISHED_TX, {"port_id": p.pid, "profile_id": pid})
            self._event(EV_PORT_FINISHED_TX, {"port_id": p.pid})

    def rpc_stop_traffic(self, params):
        p = self._port(params)
        pid = self._profile_id(params)
        ids = list(p.profiles) if pid == "*" else [pid]
        for i in ids:
            prof = p.profiles.get(i)
            if prof is None or prof.tx is None:
                continue
            tx, prof.tx = prof.tx, None
            res = tx.stop()
            self._account(p, res)
            prof.state = "STREAMS"
            self._event(EV_PROFILE_STOPPED, {"port_id": p.pid, "profile_id": i})
            self._event(EV_PORT_STOPPED, {"port_id": p.pid})
        return {}


def _num(x: float) -> str:
    """A double as C++'s default ostream prints it (6 significant digits)."""
    return f"{x:.6g}"


# method -> (needs api handler, needs ownership): TREX_RPC_CMD / _NOAPI / _OWNED
COMMANDS = {
    "api_sync_v2": (False, False), "get_version": (False, False), "ping": (False, False),
    "get_system_info": (True, False), "get_supported_cmds": (True, False), "publish_now": (True, False),
    "get_async_events": (True, False), "get_global_stats": (True, False), "get_utilization": (True, False),
    "get_port_status": (True, False), "get_port_stats": (True, False), "get_port_xstats_names": (True, False),
    "get_port_xstats_values": (True, False), "get_owner": (True, False), "set_port_attr": (True, True),
    "set_rx_feature": (True, True), "capture": (True, False), "get_active_pgids": (True, False),
    "get_pgid_stats": (True, False), "get_tpg_status": (True, False), "acquire": (True, False),
    "release": (True, True), "service": (True, True), "get_profile_list": (True, False),
    "get_stream_list": (True, False), "get_all_streams": (True, False), "add_stream": (True, True),
    "remove_stream": (True, True), "remove_all_streams": (True, True), "start_traffic": (True, True),
    "stop_traffic": (True, True), "remove_rx_filters": (True, True),
}


# ================================================================================================
# t-rex-64's command line (the parts the harness uses)
# ================================================================================================
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="t-rex-64", description=f"{STANDIN}: TRex {VERSION} interactive STL server "
                                 "that sends with xdpgen (see README.md)")
    ap.add_argument("-i", dest="interactive", action="store_true", help="interactive mode (required)")
    ap.add_argument("-c", dest="cores", type=int, default=None, help="data-path cores per dual port")
    ap.add_argument("--cfg", default="/etc/trex_cfg.yaml", help="platform config (default /etc/trex_cfg.yaml)")
    ap.add_argument("--xdpgen", default=os.environ.get("TREX_STANDIN_XDPGEN", ""),
                    help="the xdpgen binary (default: $TREX_STANDIN_XDPGEN, ./xdpgen next to this file, "
                         "or loadgen/build/xdpgen of the checkout holding it)")
    ap.add_argument("--workdir", default="", help="where the per-port pcaps go (default: a temporary directory)")
    # TRex's own flags that its daemon always passes (trex-core v3.04 trex_server.py generate_run_cmd:
    # `--iom 0 ... --no-key`): accepted as TRex accepts them. The stand-in never reads the keyboard
    # and prints no periodic screen, so both change nothing here.
    ap.add_argument("--no-key", dest="no_key", action="store_true", help="do not read the keyboard (daemon mode)")
    ap.add_argument("--iom", type=int, choices=(0, 1), default=1,
                    help="periodic stats screen: 0 off, 1 on (TRex's default)")
    a = ap.parse_args(argv)
    if not a.interactive:
        print(f"{STANDIN}: Failed to start: only the interactive mode is implemented (give -i)", file=sys.stderr)
        return 2
    if a.cores is not None and a.cores < 1:
        print(f"{STANDIN}: Failed to parse -c {a.cores}: the core count must be >= 1", file=sys.stderr)
        return 2
    try:
        cfg = load_config(a.cfg, a.cores)
    except ConfigError as e:
        print(f"{STANDIN}: {e}", file=sys.stderr)
        return 2
    here = Path(__file__).resolve().parent
    cfg.xdpgen = a.xdpgen or next((str(c) for c in (here / "xdpgen", here.parent.parent / "loadgen/build/xdpgen")
                                   if c.is_file()), str(here / "xdpgen"))
    cfg.workdir = a.workdir

    def log(msg):
        print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)

    srv = TrexStandin(cfg, log=log)
    try:
        srv.open()
    except ConfigError as e:
        print(f"{STANDIN}: {e}", file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, lambda *_: srv.shutdown())
    signal.signal(signal.SIGINT, lambda *_: srv.shutdown())
    log(f"{STANDIN} {VERSION}: {len(cfg.ports)} ports "
        f"({', '.join(p.iface or 'dummy' for p in cfg.ports)}), {cfg.cores} cores per dual port, "
        f"RPC {cfg.rpc_port}, async {cfg.pub_port}, xdpgen {cfg.xdpgen}")
    try:
        srv.serve_forever()
    finally:
        srv.close()
        log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
