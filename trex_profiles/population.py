"""UDP frames to the service from a client population that stands for a real one, each frame one
flow (source address, source port) of the population, for measuring how evenly a load balancer
spreads it (experiments/distribution.yaml).

population:
  uniform  `clients` flows, source addresses drawn at random from src-ip-base + [0, span), source
           ports at random from 1024..65535 (seeded: the same flows every run), one frame each
  slash24  one /24: src-ip-base + 0 ... + clients - 1 (256 at most; src-ip-base /24-aligned), one
           flow each (source port `sport`), one frame each
  nat      `clients` clients behind NAT whose addresses share their low 4 bits (src-ip-base + 4,
           + 20, + 36, ...: one class for 1..4 class bits), each with `ports` source ports drawn at
           random (seeded), one frame per flow, the clients in turn
  zipf     `clients` clients at random addresses of the span (seeded), one source port each (seeded),
           client i (1-based) sending round(top / i^s) frames of every cycle (top = 4 x clients^s,
           s = zipf-s): a Zipf-weighted population, weights as repeated frames
  evenodd  the thesis's even/odd split: src-ip-base and src-ip-base + 1, source port `sport`,
           alternating

The stream cycles through one list of (source address, source port) pairs: two TRex value_list
flow variables of the same length, stepped together, so frame j of every cycle carries pair j
(exact, on any number of TRex cores). A zipf client's frames are spread over the cycle (stride
order: its k-th frame at (k + 1/2) / weight of the cycle). A cycle holds at most 65535 frames.
No field-engine cache unless cache-size is given: a population is sent at a moderate rate, and
each TRex core then runs the field engine over its own part of the cycle.

Tunables (TRex: -t "--population zipf --clients 128"): population, clients, ports, zipf-s, span,
seed, payload, vip, dport, sport, dst-mac, src-mac, src-ip-base, cache-size, cores.
"""

import argparse
import ipaddress
import random

import xb_common as xb
from trex.stl.api import STLPktBuilder, STLScVmRaw, STLStream, STLTXCont, STLVmFixChecksumHw, STLVmWrFlowVar, \
    CTRexVmInsFixHwCs, STLVmFlowVar

# the testbed tunables this profile takes from the harness (xb_common.parser; the rest are the user's)
TESTBED_TUNABLES = ("vip", "dport", "dst_mac", "src_mac", "src_ip_base", "cores")

POPULATIONS = ("uniform", "slash24", "nat", "zipf", "evenodd")
#: each population's default number of clients (uniform: flows)
CLIENTS = {"uniform": 4096, "slash24": 256, "nat": 3, "zipf": 256, "evenodd": 2}
NAT_STRIDE = 16       # nat clients src-ip-base + 4 + 16 i: their low 4 bits are equal (0100)
NAT_OFFSET = 4
LOW_PORT = 1024       # the ports a client draws from: 1024..65535
ZIPF_FLOOR = 4        # the smallest zipf weight (the last client's frames per cycle)


def _ports(rng, n):
    return rng.sample(range(LOW_PORT, 65536), n)


def _uniform(a, base, rng):
    if a.clients > a.span * (65536 - LOW_PORT):
        raise ValueError(f"{a.clients} flows do not fit {a.span} addresses x {65536 - LOW_PORT} ports")
    seen, flows = set(), []
    while len(flows) < a.clients:
        f = (base + rng.randrange(a.span), rng.randrange(LOW_PORT, 65536))
        if f not in seen:
            seen.add(f)
            flows.append(f)
    return flows


def _slash24(a, base, rng):
    if base & 0xFF:
        raise ValueError(f"src-ip-base {ipaddress.IPv4Address(base)} is not the first address of a /24")
    if a.clients > 256:
        raise ValueError(f"{a.clients} clients do not fit one /24 (256 addresses)")
    return [(base + i, a.sport) for i in range(a.clients)]


def _nat(a, base, rng):
    ports = [_ports(rng, a.ports) for _ in range(a.clients)]
    return [(base + NAT_OFFSET + NAT_STRIDE * c, ports[c][j]) for j in range(a.ports) for c in range(a.clients)]


def zipf_weights(n, s):
    """Frames per cycle of clients 1..n: round(top / i^s), top = ZIPF_FLOOR x n^s."""
    top = ZIPF_FLOOR * n ** s
    return [max(1, round(top / i ** s)) for i in range(1, n + 1)]


def stride_order(weights):
    """Client indexes of one cycle, each weights[c] times, spread evenly: the k-th of client c at
    (k + 1/2) / weights[c] of the cycle (ties: the lower client first)."""
    at = sorted(((k + 0.5) / w, c) for c, w in enumerate(weights) for k in range(w))
    return [c for _, c in at]


def _zipf(a, base, rng):
    if a.clients > a.span:
        raise ValueError(f"{a.clients} clients do not fit {a.span} addresses")
    addrs = rng.sample(range(a.span), a.clients)
    ports = _ports(rng, a.clients)
    order = stride_order(zipf_weights(a.clients, a.zipf_s))
    return [(base + addrs[c], ports[c]) for c in order]


def _evenodd(a, base, rng):
    if a.clients != 2:
        raise ValueError(f"it has two clients (an even and an odd address), not {a.clients}")
    return [(base, a.sport), (base + 1, a.sport)]


BUILD = {"uniform": _uniform, "slash24": _slash24, "nat": _nat, "zipf": _zipf, "evenodd": _evenodd}


def population(a):
    """The (source address as an integer, source port) of every frame of one cycle; ValueError if
    the tunables make none."""
    base = int(ipaddress.IPv4Address(a.src_ip_base))
    flows = BUILD[a.population](a, base, random.Random(a.seed))
    if len(flows) > xb.MAX_CYCLE:
        raise ValueError(f"a cycle of {len(flows)} frames exceeds {xb.MAX_CYCLE} (TRex's value_list): "
                         "fewer clients or ports")
    top = max(src for src, _ in flows)
    if top > 0xFFFFFFFF:
        raise ValueError(f"{top - base + 1} addresses from {a.src_ip_base} run past 255.255.255.255")
    return flows


def _positive_float(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a number (the Zipf exponent)")
    if not 0 < v <= 4:
        raise argparse.ArgumentTypeError(f"{v:g} is outside (0, 4] (the Zipf exponent)")
    return v


def _parser():
    p = xb.parser("population", __doc__.split("\n\n")[0])
    p.add_argument("--population", choices=POPULATIONS, default="uniform")
    p.add_argument("--clients", type=xb.int_range(1, xb.MAX_CYCLE, "clients (uniform: flows)"), default=None,
                   help="clients (uniform: flows); default: " + ", ".join(f"{k} {v}" for k, v in CLIENTS.items()))
    p.add_argument("--ports", type=xb.int_range(1, 65536 - LOW_PORT, "source ports per nat client"), default=256)
    p.add_argument("--zipf-s", "--zipf_s", dest="zipf_s", type=_positive_float, default=1.0)
    p.add_argument("--span", type=xb.int_range(1, 1 << 16, "source addresses from src-ip-base (uniform, zipf)"),
                   default=1 << 16)
    p.add_argument("--seed", type=xb.int_range(0, 1 << 31, "seed of the random draws"), default=1)
    return p


class Population:
    def get_streams(self, direction=0, port_id=0, tunables=(), **kwargs):
        p = _parser()
        a = xb.parse(p, tunables)
        if a.clients is None:
            a.clients = CLIENTS[a.population]
        try:
            flows = population(a)
        except ValueError as e:
            p.error(f"argument --population {a.population}: {e}")
        srcs = xb.flow_var_list("src", [s for s, _ in flows])
        sports = STLVmFlowVar(name="sport", value_list=[s for _, s in flows], size=2, op="inc")
        vm = [srcs, sports, STLVmWrFlowVar(fv_name="src", pkt_offset="IP.src"),
              STLVmWrFlowVar(fv_name="sport", pkt_offset="UDP.sport"),
              STLVmFixChecksumHw(l3_offset="IP", l4_offset="UDP", l4_type=CTRexVmInsFixHwCs.L4_TYPE_UDP)]
        cache = 0 if a.cache_size is None else xb.cache_size(p, a, len(flows))
        return [STLStream(packet=STLPktBuilder(pkt=xb.base_packet(a), vm=STLScVmRaw(vm, cache_size=cache or None)),
                          mode=STLTXCont(pps=1))]


def register():
    return Population()
