"""Background load whose classes follow an exact split between the DNS backend's classes and the
other backend's classes (class = IPv4 source & (2^k − 1), k = class-bits).

split: "single" (all to the DNS backend), "worst" (all to the other backend), "X/Y" (X:Y between
DNS and other classes, e.g. 50/50, 70/30, 7/3; each side spread evenly over its classes), or
"w0:w1:…" with exactly 2^k weights (any distribution over the classes).
dns-classes: comma-separated classes of the DNS backend (the harness derives them from the
backends file). hosts: distinct source addresses per class.

The stream cycles through one list of source addresses (a TRex value_list) built by smooth weighted
round robin, so every cycle of sum(weights) frames holds exactly weights[c] frames of class c, and
a whole stream cycle (that × hosts frames) too. Source of the n-th frame of class c:
src-ip-base + ((n mod hosts) << k) + c.
"""

import ipaddress
from functools import reduce
from math import gcd

import xb_common as xb

# the testbed tunables this profile takes from the harness (xb_common.parser; the rest are the user's)
TESTBED_TUNABLES = ("vip", "dport", "dst_mac", "src_mac", "src_ip_base", "cores", "class_bits", "dns_classes")


def class_weights(split, k, dns):
    """Per-class integer weights (reduced by their gcd) for a split string; ValueError if bad."""
    n = 1 << k
    s = split.strip().lower()
    if ":" in s:
        try:
            w = [int(x) for x in s.split(":")]
        except ValueError:
            raise ValueError(f"{split!r}: weights must be integers like 1:2:3:4")
        if len(w) != n:
            raise ValueError(f"{split!r} has {len(w)} weights, class-bits {k} needs {n}")
    else:
        if s == "single":
            x, y = 1, 0
        elif s == "worst":
            x, y = 0, 1
        else:
            parts = s.split("/")
            try:
                x, y = (int(parts[0]), int(parts[1])) if len(parts) == 2 else (None, None)
            except ValueError:
                x = y = None
            if x is None:
                raise ValueError(f"{split!r} is not single, worst, X/Y (like 70/30) or w0:w1:... weights")
        bad = [c for c in dns if not 0 <= c < n]
        if bad:
            raise ValueError(f"DNS class {bad[0]} is outside 0..{n - 1} (class-bits {k})")
        other = [c for c in range(n) if c not in dns]
        if x and not dns:
            raise ValueError(f"{split!r} sends load to the DNS backend but dns-classes is empty")
        if y and not other:
            raise ValueError(f"{split!r} sends load to the other backend but every class is a DNS class")
        w = [x * len(other) if c in dns else y * len(dns) for c in range(n)]
    if any(v < 0 for v in w) or not any(w):
        raise ValueError(f"{split!r}: weights must be non-negative and not all zero")
    g = reduce(gcd, [v for v in w if v])
    return [v // g for v in w]


def class_sequence(weights):
    """One split cycle: smooth weighted round robin (ties → lower class), deterministic."""
    total = sum(weights)
    cur = [0] * len(weights)
    seq = []
    for _ in range(total):
        for c, w in enumerate(weights):
            cur[c] += w
        c = max(range(len(weights)), key=lambda i: (cur[i], -i))
        cur[c] -= total
        seq.append(c)
    return seq


class BackgroundSplit:
    def get_streams(self, direction=0, port_id=0, tunables=(), **kwargs):
        p = xb.parser("background_split", __doc__.split("\n\n")[0])
        p.add_argument("--split", default="50/50", help="single | worst | X/Y | w0:w1:...")
        p.add_argument("--class-bits", "--class_bits", dest="class_bits",
                       type=xb.int_range(1, 8, "class bits k, 2^k classes"), default=1)
        p.add_argument("--dns-classes", "--dns_classes", dest="dns_classes", default="0",
                       help="comma-separated classes of the DNS backend, e.g. 0 or 0,2")
        p.add_argument("--hosts", type=xb.int_range(1, xb.MAX_CYCLE, "source addresses per class"), default=1)
        a = xb.parse(p, tunables)
        k = a.class_bits
        try:
            dns = sorted({int(c) for c in a.dns_classes.split(",") if c.strip()})
        except ValueError:
            p.error(f"argument --dns-classes: {a.dns_classes!r} is not a comma-separated list of integers")
        try:
            weights = class_weights(a.split, k, dns)
        except ValueError as e:
            p.error(f"argument --split: {e}")
        base = int(ipaddress.IPv4Address(a.src_ip_base))
        if base & ((1 << k) - 1):
            p.error(f"argument --src-ip-base: {a.src_ip_base} has class bits set (its low {k} bits must be 0)")
        seq = class_sequence(weights)
        if len(seq) * a.hosts > xb.MAX_CYCLE:
            p.error(f"argument --hosts: a cycle of {len(seq)} x {a.hosts} frames exceeds {xb.MAX_CYCLE}")
        if base + (a.hosts << k) - 1 > 0xFFFFFFFF:
            p.error(f"argument --hosts: {a.hosts} hosts per class from {a.src_ip_base} run past 255.255.255.255")
        seen = [0] * (1 << k)
        values = []
        for _ in range(a.hosts):
            for c in seq:
                values.append(base + ((seen[c] % a.hosts) << k) + c)
                seen[c] += 1
        return [xb.source_stream(a, xb.flow_var_list("src", values), xb.cache_size(p, a, len(values)))]


def register():
    return BackgroundSplit()
