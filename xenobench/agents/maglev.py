"""Katran's consistent-hash ring and flow hash, as its control plane and data plane compute them,
so the Katran agent fills `ch_rings` the way Katran does and tests can name the real a flow goes to.

Facts from facebookincubator/katran at 19f08fec82fb7b5fb14d935a80057bdc0897c8de (this is our own
code; nothing of Katran's is copied):
- katran/lib/KatranLb.cpp (modifyRealsForVip, increaseRefCountForReal): a real's number is the
  first free one of 1..maxReals-1 (0 is never a real: an empty ring slot reads 0), handed out in
  the order the reals are added; its endpoint hash is `folly::IPAddress::hash()` of its address.
- folly/IPAddressV4.h (hash): fnv32_buf of the 4 address bytes (network order) combined with
  AF_INET by hash_combine, i.e. hash_128_to_64(std::hash(AF_INET), std::hash(fnv)) (folly/hash/Hash.h;
  std::hash of an integer is the integer). folly's fnv32_buf is fnv32_buf_BROKEN (folly/hash/FnvHash.h):
  each byte is XORed in as a *signed* char, so bytes >= 0x80 are sign-extended.
- katran/lib/Vip.cpp (getEndpoints): endpoints with weight 0 are skipped, the rest sorted by hash.
- katran/lib/MaglevBase.cpp (genMaglevPermutation): offset = MurmurHash3_x64_64(hash, 42, seed 0)
  % ring_size; skip = MurmurHash3_x64_64(hash, 2718281828, seed 2307) % (ring_size - 1) + 1.
- katran/lib/MurmurHash3.cpp: MurmurHash3_x64_64(A, B, seed) is MurmurHash3_x64_128's first
  64-bit half over the 16 bytes A, B (one block, length 16).
- katran/lib/MaglevHash.cpp (Katran's default, HashFunction::Maglev): endpoints take turns in
  sorted order; in its first turn an endpoint fills `weight` slots along its permutation, in
  every later turn one (weights only add to the first round); a single endpoint fills the whole
  ring; ring size 65537 (katran/lib/CHHelpers.h kDefaultChRingSize; RING_SIZE in balancer_consts.h).
- katran/lib/bpf/balancer.bpf.c (get_packet_hash, get_packet_dst): an IPv4 flow's slot is
  jhash_2words(saddr, ports, CH_RINGS_SIZE) % RING_SIZE, ports = the source and destination port
  as the two big-endian u16 of one u32 (read in host order); ch_rings key = vip_num * RING_SIZE + slot.
  jhash_2words: katran/lib/linux_includes/jhash.h (the Linux kernel's jhash).
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from collections import Counter

RING_SIZE = 65537            # katran/lib/bpf/balancer_consts.h RING_SIZE
MAX_VIPS = 512               # balancer_consts.h MAX_VIPS
CH_RINGS_SIZE = MAX_VIPS * RING_SIZE
INIT_JHASH_SEED = CH_RINGS_SIZE   # balancer_consts.h
AF_INET = 2
M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
_SEED_OFFSET, _SEED_SKIP = 0, 2307          # MaglevBase.cpp kHashSeed0, kHashSeed1
_B_OFFSET, _B_SKIP = 42, 2718281828         # MaglevBase.cpp kHashSeed2, kHashSeed3


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    return k ^ (k >> 33)


def murmur3_x64_64(a: int, b: int, seed: int) -> int:
    """MurmurHash3_x64_128 of the 16 bytes (a, b as little-endian u64), first half."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed & M32
    k1 = (_rotl64((a * c1) & M64, 31) * c2) & M64
    h1 = (_rotl64(h1 ^ k1, 27) + h2) & M64
    h1 = (h1 * 5 + 0x52DCE729) & M64
    k2 = (_rotl64((b * c2) & M64, 33) * c1) & M64
    h2 = (_rotl64(h2 ^ k2, 31) + h1) & M64
    h2 = (h2 * 5 + 0x38495AB5) & M64
    h1 ^= 16
    h2 ^= 16
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    h1, h2 = _fmix64(h1), _fmix64(h2)
    return (h1 + h2) & M64


def _hash_128_to_64(upper: int, lower: int) -> int:
    """folly::hash::hash_128_to_64 (CityHash's Hash128to64)."""
    mul = 0x9DDFEA08EB382D69
    a = ((lower ^ upper) * mul) & M64
    a ^= a >> 47
    b = ((upper ^ a) * mul) & M64
    b ^= b >> 47
    return (b * mul) & M64


def _fnv32_broken(data: bytes) -> int:
    h = 2166136261
    for c in data:
        h = (h + (h << 1) + (h << 4) + (h << 7) + (h << 8) + (h << 24)) & M32
        h ^= (c - 256) & M32 if c >= 0x80 else c   # XORed as a signed char
    return h


def address_hash(address: str) -> int:
    """folly::IPAddress(address).hash() for an IPv4 address: a real's endpoint hash."""
    raw = ipaddress.IPv4Address(address).packed
    return _hash_128_to_64(AF_INET, _fnv32_broken(raw))


def permutation(endpoint_hash: int, ring_size: int = RING_SIZE) -> tuple[int, int]:
    """(offset, skip) of an endpoint (MaglevBase::genMaglevPermutation)."""
    offset = murmur3_x64_64(endpoint_hash, _B_OFFSET, _SEED_OFFSET) % ring_size
    skip = murmur3_x64_64(endpoint_hash, _B_SKIP, _SEED_SKIP) % (ring_size - 1) + 1
    return offset, skip


def ring(endpoints: list[tuple[int, int, int]], ring_size: int = RING_SIZE) -> list[int]:
    """Katran's Maglev ring (MaglevHash::generateHashRing) over (num, weight, hash) endpoints:
    slot -> real number. Weight-0 endpoints are left out and the rest sorted by hash first, as
    Vip::getEndpoints does before it calls the ring."""
    eps = sorted((e for e in endpoints if e[1] > 0), key=lambda e: e[2])
    if not eps:
        return [-1] * ring_size
    if len(eps) == 1:
        return [eps[0][0]] * ring_size
    result = [-1] * ring_size
    perms = [permutation(h, ring_size) for _, _, h in eps]
    nxt = [0] * len(eps)
    weights = [w for _, w, _ in eps]
    runs = 0
    while True:
        for i, (num, _, _) in enumerate(eps):
            offset, skip = perms[i]
            for _ in range(weights[i]):
                cur = (offset + nxt[i] * skip) % ring_size
                while result[cur] >= 0:
                    nxt[i] += 1
                    cur = (offset + nxt[i] * skip) % ring_size
                result[cur] = num
                nxt[i] += 1
                runs += 1
                if runs == ring_size:
                    return result
            weights[i] = 1


def reals_ring(reals: list[tuple[str, int]], ring_size: int = RING_SIZE) -> tuple[list[int], list[int]]:
    """For reals (address, weight) added to one VIP in this order: (their real numbers, the ring).
    The ring of the same reals is computed once per process (a 65537-slot ring takes ~0.15 s in
    Python, and the RTT prober asks for it at every probe to choose its flow); callers get copies."""
    nums, r = _reals_ring(tuple((str(a), int(w)) for a, w in reals), ring_size)
    return list(nums), list(r)


@functools.lru_cache(maxsize=8)
def _reals_ring(reals: tuple[tuple[str, int], ...], ring_size: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    nums = list(range(1, len(reals) + 1))
    return tuple(nums), tuple(ring([(n, w, address_hash(a)) for n, (a, w) in zip(nums, reals)], ring_size))


def shares(r: list[int]) -> dict[int, float]:
    """Each real number's share of the ring's slots."""
    return {n: c / len(r) for n, c in Counter(r).items()}


def _rol32(w: int, s: int) -> int:
    return ((w << s) | (w >> (32 - s))) & M32


def jhash_2words(a: int, b: int, initval: int) -> int:
    """jhash_2words of katran/lib/linux_includes/jhash.h (the kernel's jhash)."""
    a = (a + initval + 0xDEADBEEF + 8) & M32
    b = (b + initval + 0xDEADBEEF + 8) & M32
    c = (initval + 0xDEADBEEF + 8) & M32
    c ^= b
    c = (c - _rol32(b, 14)) & M32
    a ^= c
    a = (a - _rol32(c, 11)) & M32
    b ^= a
    b = (b - _rol32(a, 25)) & M32
    c ^= b
    c = (c - _rol32(b, 16)) & M32
    a ^= c
    a = (a - _rol32(c, 4)) & M32
    b ^= a
    b = (b - _rol32(a, 14)) & M32
    c ^= b
    c = (c - _rol32(b, 24)) & M32
    return c


def flow_slot(src: str, sport: int, dport: int, ring_size: int = RING_SIZE) -> int:
    """The ring slot balancer.bpf.c picks for an IPv4 TCP/UDP flow to a VIP with its port set
    (struct flow_key's be32 saddr and be16 ports read as host-order u32, on a little-endian CPU)."""
    saddr = int.from_bytes(ipaddress.IPv4Address(src).packed, "little")
    ports = int.from_bytes(struct.pack("!HH", sport, dport), "little")
    return jhash_2words(saddr, ports, INIT_JHASH_SEED) % ring_size
