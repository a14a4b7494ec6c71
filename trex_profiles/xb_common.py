"""Helpers shared by the xenobench TRex STL profiles in this folder.

Stock TRex (`start -f trex_profiles/udp_payload.py`, STLProfile.load_py) puts the profile's folder
on sys.path while it loads a profile, so the profiles import this module by its bare name. Nothing
here imports xenobench: the profiles must stay loadable by a stock TRex client.

Frames follow the thesis: Ethernet (destination = the LB's ingress port) / IPv4 (to the service
address, valid header checksum) / UDP (to port 53) / payload. frame = payload + 42 B, plus 4 B FCS
on the wire; below 18 B payload the NIC pads to 60 B (+ FCS), veth does not pad.
"""

import argparse
import ipaddress
import re
from math import lcm

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from trex.stl.api import (STLPktBuilder, STLScVmRaw, STLStream, STLTXCont, STLVmFixChecksumHw, STLVmFlowVar,
                          STLVmWrFlowVar, CTRexVmInsFixHwCs)

HEADERS = 42          # Ethernet 14 + IPv4 20 + UDP 8 bytes, FCS not included
MIN_PAYLOAD = 2       # the thesis's smallest payload
MAX_PAYLOAD = 1472    # 1500 B MTU - 28 B of IPv4 and UDP headers
MAX_CYCLE = 65535     # TRex's limit on a flow variable's value_list
MAX_CACHE = 65535     # STLScVmRaw cache_size is a uint16_t
MAX_SPLIT_CACHE = 10000  # the server refuses a larger cache for a stream it splits over cores
                         # (trex-core src/stx/stl/trex_stl_vm_splitter.cpp: TrexVmSplitter::split)
MAX_CORES = 255       # the server counts data-path cores in a uint8_t (TrexStreamsCompiler::compile)
PAYLOAD_BYTE = b"x"   # payload filler (0x78)
_MAC = re.compile(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$")


def int_range(lo, hi, what):
    def conv(s):
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r} is not an integer ({what})")
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is outside {lo}..{hi} ({what})")
        return v
    return conv


def ipv4(s):
    try:
        return str(ipaddress.IPv4Address(s))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not an IPv4 address")


def mac(s):
    if not _MAC.match(s):
        raise argparse.ArgumentTypeError(f"{s!r} is not a MAC address (six hex octets like 02:00:00:00:05:00)")
    return s.lower()


def parser(prog, description):
    """argparse parser with the tunables every profile shares. Defaults: the thesis testbed
    (config/fips.yaml). The harness passes the testbed's values only for the names a profile lists in
its module-level TESTBED_TUNABLES (a literal tuple: the harness reads it from the source,
xenobench.traffic.profiles.declared_tunables); `cores` comes from the TRex server."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--payload", type=int_range(MIN_PAYLOAD, MAX_PAYLOAD, "UDP payload bytes"), default=22,
                   help="UDP payload in bytes (frame = payload + 42 B without FCS)")
    p.add_argument("--vip", type=ipv4, default="10.3.10.45", help="service address (IPv4 destination)")
    p.add_argument("--dport", type=int_range(1, 65535, "UDP destination port"), default=53)
    p.add_argument("--sport", type=int_range(1, 65535, "UDP source port"), default=1024)
    p.add_argument("--dst-mac", "--dst_mac", dest="dst_mac", type=mac, default="c4:70:bd:a0:56:ac",
                   help="destination MAC: the load balancer's ingress port")
    p.add_argument("--src-mac", "--src_mac", dest="src_mac", type=mac, default="08:c0:eb:a5:61:26",
                   help="source MAC: the load generator's port")
    p.add_argument("--src-ip-base", "--src_ip_base", dest="src_ip_base", type=ipv4, default="16.0.0.0",
                   help="first source address; sources are src-ip-base + n")
    p.add_argument("--cache-size", "--cache_size", dest="cache_size",
                   type=int_range(0, MAX_CACHE, "field-engine cache entries"), default=None,
                   help="field-engine cache (STLScVmRaw cache_size): TRex computes this many frames once and "
                        "replays them; default: the fewest whole stream cycles the cores divide evenly; "
                        "0: no cache; else a multiple of that")
    p.add_argument("--cores", type=int_range(1, MAX_CORES, "TRex data-path cores per port"), default=1,
                   help="the TRex server's data-path cores per dual port (t-rex-64 -c; get_system_info "
                        "dp_core_count_per_port), over which it splits the stream and its cache")
    return p


def cache_size(p, a, cycle):
    """The field-engine cache for a stream of `cycle` distinct frames sent by a.cores TRex cores.

    The thesis's profile cached 254 frames (STLScVmRaw(..., cache_size=254)) so TRex's cores replay
    prepared mbufs instead of running the field engine per frame, which is what reaches ~96 Mpps
    from one stream. TRex splits a stream over its n cores (trex-core src/stx/stl/:
    trex_stl_streams_compiler.cpp TrexStreamsCompiler::compile_stream_on_all_cores, rate / n each,
    core i started i gaps later): core i starts i values on and steps n
    (trex_stl_stream_vm.h: StreamVmInstructionFlowMan::update), and the cache is divided
    cache // n per core, the leftover to the first cores, at least 1 each
    (trex_stl_vm_splitter.cpp: TrexVmSplitter::split); each core replays its own cached frames.
    So core i replays values i, i+n, ..., i+(c-1)n of the cycle and the wire, taking the cores in
    turn, carries the first n*c values of the cycle, over and over. That is whole cycles, the
    profile's split exactly, only if the cache is a multiple of n (every core the same c) and of
    the cycle: lcm(cycle, n) frames at least. One cycle on 14 cores leaves each core 1 frame of a
    10-frame 70/30 cycle: 71.4/28.6 on the wire (75/25 on 8 cores). Without a cache the cores
    run the field engine (phase i, step n) and the sequence is exact too, only slower.
    Default: lcm(cycle, cores) frames; refused where TRex would refuse it (> 10000 when split)."""
    n = a.cores
    whole = lcm(cycle, n)
    if a.cache_size == 0:
        return 0
    if a.cache_size is None:
        if n == 1:
            return cycle if cycle <= MAX_CACHE else 0
        if whole > MAX_SPLIT_CACHE:
            p.error(f"argument --cache-size: an exact split of the {cycle}-frame stream cycle over {n} TRex cores "
                    f"needs a cache of lcm({cycle}, {n}) = {whole} frames, more than the {MAX_SPLIT_CACHE} TRex takes "
                    "for a stream it splits; give --cache-size 0 (no cache: the cores run the field engine per "
                    "frame, the split stays exact) or a shorter cycle")
        return whole
    if a.cache_size % whole:
        why = (f"the stream cycle of {cycle} frames" if n == 1 else
               f"lcm({cycle}, {n}) = {whole}, the stream cycle of {cycle} frames that {n} TRex cores divide evenly")
        p.error(f"argument --cache-size: {a.cache_size} is not a multiple of {why} (each core replays its share "
                "of the cache; the sequence and the split would no longer be exact)")
    if n > 1 and a.cache_size > MAX_SPLIT_CACHE:
        p.error(f"argument --cache-size: {a.cache_size} is more than the {MAX_SPLIT_CACHE} frames TRex takes for a "
                f"stream it splits over {n} cores (TrexVmSplitter::split: \"Cache is too big\"); give a smaller "
                f"multiple of {whole} or 0")
    return a.cache_size


def parse(p, tunables):
    """Parse the tunables list TRex hands to get_streams (["--payload", "22", ...])."""
    return p.parse_args([str(t) for t in (tunables or [])])


def base_packet(a):
    return (Ether(dst=a.dst_mac, src=a.src_mac) /
            IP(src=a.src_ip_base, dst=a.vip, ttl=64, id=0) /
            UDP(sport=a.sport, dport=a.dport) / (PAYLOAD_BYTE * a.payload))


def source_stream(a, var, cache=0):
    """One continuous stream whose IPv4 source is the flow variable `var`; IPv4 and UDP checksums
    are fixed per frame (fix_checksum_hw: the NIC computes them, TRex falls back to software);
    `cache` > 0: the field engine's results are cached (see cache_size)."""
    vm = [var,
          STLVmWrFlowVar(fv_name=var.name, pkt_offset="IP.src"),
          STLVmFixChecksumHw(l3_offset="IP", l4_offset="UDP", l4_type=CTRexVmInsFixHwCs.L4_TYPE_UDP)]
    return STLStream(packet=STLPktBuilder(pkt=base_packet(a), vm=STLScVmRaw(vm, cache_size=cache or None)),
                     mode=STLTXCont(pps=1))


def flow_var_list(name, values):
    """A flow variable stepping through `values` in order (TRex: value_list, op inc)."""
    return STLVmFlowVar(name=name, value_list=values, size=4, op="inc")


def flow_var_range(name, lo, hi):
    return STLVmFlowVar(name=name, min_value=lo, max_value=hi, size=4, op="inc")
