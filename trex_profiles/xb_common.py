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

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from trex.stl.api import (STLPktBuilder, STLScVmRaw, STLStream, STLTXCont, STLVmFixChecksumHw, STLVmFlowVar,
                          STLVmWrFlowVar, CTRexVmInsFixHwCs)

HEADERS = 42          # Ethernet 14 + IPv4 20 + UDP 8 bytes, FCS not included
MIN_PAYLOAD = 2       # the thesis's smallest payload
MAX_PAYLOAD = 1472    # 1500 B MTU - 28 B of IPv4 and UDP headers
MAX_CYCLE = 65535     # TRex's limit on a flow variable's value_list
MAX_CACHE = 65535     # STLScVmRaw cache_size is a uint16_t
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
    (config/fips.yaml); the harness always passes the values of the testbed in use."""
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
                        "replays them; default: one stream cycle; 0: no cache; else a multiple of the cycle")
    return p


def cache_size(p, a, cycle):
    """The field-engine cache for a stream of `cycle` distinct frames. The thesis's profile cached
    254 frames (STLScVmRaw(..., cache_size=254)) so TRex's cores replay prepared mbufs instead of
    running the field engine per frame, which is what reaches ~96 Mpps from one stream. A cache
    replays its first N frames, so N must be a whole number of cycles to keep the frame sequence
    (and every split) exact; the default is one cycle."""
    if a.cache_size is None:
        return cycle if cycle <= MAX_CACHE else 0
    if a.cache_size and a.cache_size % cycle:
        p.error(f"argument --cache-size: {a.cache_size} is not a multiple of the stream cycle of {cycle} "
                "frames (a cache replays its first N frames; the sequence would no longer be exact)")
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
