"""Writes lb/tests/hash_vectors.txt, the fixture table of the emulated hash pipe's hash
(lb/emu/bpf/emu_hash.h), read by lb/tests/test_hash.c (the C function, doca_flow_pipe_calc_hash and
the XDP datapath) and tests/test_xenoflow_hash.py (the harness's backend_of).

    python3 lb/tests/hash_vectors.py > lb/tests/hash_vectors.txt

The values come from Python's zlib, not from the code under test: zlib.crc32(data, v) runs the
reflected IEEE CRC-32 from ~v and inverts its result, so with v = 0xffffffff and the result
inverted again it is the CRC with initial value 0 and no final XOR that mlx5dr_crc32_calc computes
(DPDK drivers/net/mlx5/hws/mlx5dr_crc32.c). The tag is struct emu_key (lb/emu/bpf/emu_common.h)
with only the hashed fields and the selectors set: l3_type 1 (IPv4) always, l4_type 2 (UDP) when a
port is hashed (XenoFlow's hash pipe, lb/src/hash.c)."""

import ipaddress
import zlib

FIELDS = ("src_ip", "dst_ip", "proto", "src_port", "dst_port")

# (fields, nr_entries, src, sport, dst, dport, description); proto is UDP (17) throughout
ROWS = [
    ("src_ip,src_port", 2, "198.19.0.8", 40000, "198.18.0.100", 53, "XenoFlow's default, 2 entries"),
    ("src_ip,src_port", 2, "198.19.0.8", 40001, "198.18.0.100", 53, "the next source port"),
    ("src_ip,src_port", 2, "198.19.0.9", 40000, "198.18.0.100", 53, "the next source address"),
    ("src_ip,src_port", 256, "198.19.0.8", 40000, "198.18.0.100", 53, "256 entries: XF_MAX_SLOTS"),
    ("src_ip,src_port", 256, "10.1.2.3", 1024, "198.18.0.100", 53, "another client"),
    ("src_ip,src_port", 4096, "192.168.1.1", 53000, "198.18.0.100", 53, "4096 entries: the emulation's most"),
    ("src_ip,src_port", 3, "198.19.0.8", 40000, "198.18.0.100", 53, "3 entries, 4 indices: index 3 has none, a miss"),
    ("src_ip,src_port", 3, "198.19.0.8", 40002, "198.18.0.100", 53, "3 entries, 4 indices: an index with an entry"),
    ("5-tuple", 256, "198.19.0.8", 40000, "198.18.0.100", 53, "the 5-tuple"),
    ("5-tuple", 4096, "172.16.5.4", 33333, "198.18.0.100", 5353, "the 5-tuple, 4096 entries"),
    ("src_ip", 4, "198.19.0.9", 40000, "198.18.0.100", 53, "the source address alone"),
    ("src_ip", 4096, "0.0.0.0", 0, "198.18.0.100", 53, "an all-zero address: the tag is the selector byte"),
    ("dst_port", 16, "198.19.0.8", 40000, "198.18.0.100", 53, "the destination port alone"),
    ("src_ip,dst_ip,proto", 64, "198.19.0.10", 40000, "198.18.0.100", 53, "addresses and protocol"),
]


def names(fields: str) -> set[str]:
    return set(FIELDS) if fields == "5-tuple" else set(fields.split(","))


def tag(fields: str, src: str, sport: int, dst: str, dport: int, proto: int = 17) -> bytes:
    f = names(fields)
    t = bytearray(32)
    t[14] = 1  # l3_type: IPv4
    if f & {"src_port", "dst_port"}:
        t[15] = 2  # l4_type: UDP
    if "src_ip" in f:
        t[16:20] = ipaddress.IPv4Address(src).packed
    if "dst_ip" in f:
        t[20:24] = ipaddress.IPv4Address(dst).packed
    if "proto" in f:
        t[24] = proto
    if "src_port" in f:
        t[26:28] = sport.to_bytes(2, "big")
    if "dst_port" in f:
        t[28:30] = dport.to_bytes(2, "big")
    return bytes(t)


def main() -> None:
    print("# The emulated hash pipe's index for flows (lb/emu/bpf/emu_hash.h), from Python's zlib (how: the\n"
          "# docstring of lb/tests/hash_vectors.py).\n"
          "# Regenerate: python3 lb/tests/hash_vectors.py > lb/tests/hash_vectors.txt")
    print("# fields nr_entries src_ip sport dst_ip dport proto crc32 hash index description")
    print("# (index: the hash masked to nr_entries rounded up to a power of 2; one at or above nr_entries has no")
    print("# entry: the frame misses)")
    for fields, n, src, sport, dst, dport, what in ROWS:
        crc = zlib.crc32(tag(fields, src, sport, dst, dport), 0xFFFFFFFF) ^ 0xFFFFFFFF
        h = int.from_bytes(crc.to_bytes(4, "little"), "big")
        idx = h & ((1 << (n - 1).bit_length()) - 1)
        print(f"{fields} {n} {src} {sport} {dst} {dport} 17 0x{crc:08x} 0x{h:08x} {idx} {what}")


if __name__ == "__main__":
    main()
