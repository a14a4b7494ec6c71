"""Captures read as streams: a file, a FIFO or a file still being written, plain or compressed,
read front to back in chunks (never whole, never seeked, no size assumed), so memory stays
bounded whatever the capture's size. Used by xenobench.pcap_rtt, which adds the DNS and the
pairing.

- Compression is detected by content (the first bytes), not by the file name, and undone as a
  stream by the well-kept libraries: gzip, xz and bzip2 by the standard library, zstd by
  `zstandard`, the LZ4 frame format by `lz4.frame`. Nested compression (a .gz of a .zst) is undone
  layer by layer, up to MAX_LAYERS.
- The format is decided by the first bytes after that: classic pcap (micro- or nanosecond, either
  byte order) or pcapng; anything else is handed back with its first TEXT_PROBE bytes for the
  caller's text check and refused there, so /dev/zero is refused after 4 kB, not read to the end.
- Link types: Ethernet (any stack of 802.1Q / 802.1ad / 0x9100 VLAN tags), Linux cooked v1 and v2
  (`tcpdump -i any`: SLL 113, SLL2 276), raw IP (101, and 228/229 for IPv4/IPv6 only), BSD
  loopback (NULL 0: a 4-byte address family in the capturing host's byte order; LOOP 108: the same
  in network byte order; tcpdump.org's LINKTYPE_NULL/LINKTYPE_LOOP). datagram() returns the UDP or
  TCP datagram of a frame with the stations that sent and received it, or a short text naming what
  the frame is instead (counted for the summary).
- Datagrams is datagram() with the state a capture needs across frames: IPv4 and IPv6 fragments
  are reassembled (RFC 791, RFC 8200 section 4.5) and the datagram is handed on with the frame
  that completes it (as Wireshark does); of a loopback packet that a Linux cooked capture holds
  twice (outgoing and to us), the second copy is dropped.
- Every field is checked for whether it can exist: a record longer than MAX_PACKET, a block longer
  than MAX_BLOCK, a sub-second field of a second or more, an if_tsresol whose units per second do
  not fit 64 bits (10^-v with v > 19, 2^-v with v > 63, the limits rusticata's pcap-parser
  `build_ts_resolution` uses) are refused naming the packet or block and its byte.

The record loops here are own code, not dpkt's reader: on the same file they take about a third
of dpkt's time (scripts/bench_pcap_stream.py prints both), and dpkt's pcapng reader gives float
seconds and the first interface's resolution for every packet. tests/test_pcap_rtt.py checks
frames and stamps against dpkt's.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import zlib
from pathlib import Path

from .errors import DataError

NS = 1_000_000_000
CHUNK = 1 << 20             # bytes read at a time
TEXT_PROBE = 4096           # bytes a text check may look at
MAX_PACKET = 262_144        # libpcap's and Wireshark's largest snapshot length (MAXIMUM_SNAPLEN)
MAX_BLOCK = 16 << 20        # a pcapng block above this is corrupt (Wireshark's limit is ~ 16 MB too)
MAX_LAYERS = 4              # compression layers undone
TS_LIMIT = 1 << 63          # timestamps are integer ns in 64 bits (numpy int64): years 1678-2262

PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1000), b"\xa1\xb2\xc3\xd4": (">", 1000),
              b"\x4d\x3c\xb2\xa1": ("<", 1), b"\xa1\xb2\x3c\x4d": (">", 1)}  # byte order, ns per unit
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"

LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_SLL, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_SLL2 = 1, 101, 113, 228, 229, 276
LINKTYPE_NULL, LINKTYPE_LOOP = 0, 108
LINK_TYPES = {LINKTYPE_ETHERNET: "Ethernet", LINKTYPE_RAW: "raw IP", LINKTYPE_SLL: "Linux cooked v1",
              LINKTYPE_IPV4: "raw IPv4", LINKTYPE_IPV6: "raw IPv6", LINKTYPE_SLL2: "Linux cooked v2",
              LINKTYPE_NULL: "BSD loopback", LINKTYPE_LOOP: "OpenBSD loopback"}
SUPPORTED = ", ".join(f"{v} ({k})" for k, v in LINK_TYPES.items())

HOST = "this host"  # the station of a Linux cooked capture that took it (packet type: to us / outgoing)
LOOPBACK_STATION = "loopback"  # sender and receiver of a packet on a Linux cooked capture's lo
# address family values of the BSD loopback header: AF_INET, and AF_INET6 as the BSDs, Linux and
# Darwin number it (24 NetBSD/OpenBSD/..., 28 FreeBSD, 30 Darwin, 10 Linux)
_AF_ETYPE = {2: 0x0800, 24: 0x86DD, 28: 0x86DD, 30: 0x86DD, 10: 0x86DD}
_SLL_TO = {1: "broadcast", 2: "multicast", 3: "another host"}
ARPHRD_LOOPBACK = 772
VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)

# what a frame is when it is not a UDP/TCP datagram (keys of the summary's "skipped" counts)
NOT_IP, FRAGMENT, OTHER_PROTO, SHORT, LOOPBACK = ("not IP", "IP fragment", "other IP protocol",
                                                  "truncated headers", "loopback copy")


def _zstd(f):
    import zstandard
    return zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)


def _lz4(f):
    import lz4.frame
    return lz4.frame.LZ4FrameFile(f, mode="rb")


def _is_zstd_skippable(head: bytes) -> bool:
    return len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"


COMPRESSIONS = (  # (magic, name, stream opener)
    (b"\x1f\x8b", "gzip", lambda f: gzip.GzipFile(fileobj=f, mode="rb")),
    (b"\xfd7zXZ\x00", "xz", lambda f: lzma.LZMAFile(f)),
    (b"\x28\xb5\x2f\xfd", "zstd", _zstd),
    (b"\x04\x22\x4d\x18", "lz4", _lz4),
    (b"BZh", "bzip2", lambda f: bz2.BZ2File(f)),
)


def _decompress_errors() -> tuple:
    errs = [OSError, EOFError, zlib.error, lzma.LZMAError, RuntimeError, ValueError]
    try:
        import zstandard
        errs.append(zstandard.ZstdError)
    except ImportError:  # pragma: no cover - a dependency; reported when a zstd capture is opened
        pass
    return tuple(errs)


class _Prefixed(io.RawIOBase):
    """The bytes already read to detect the format, then the rest of the stream."""

    def __init__(self, head: bytes, f):
        self.head, self.f = head, f

    def readable(self):
        return True

    def readinto(self, b):
        if self.head:
            n = min(len(b), len(self.head))
            b[:n], self.head = self.head[:n], self.head[n:]
            return n
        data = self.f.read(len(b))
        b[:len(data)] = data
        return len(data)


class Capture:
    """One capture, opened as a stream. fmt: "pcap", "pcapng" or None (then `head` holds the first
    TEXT_PROBE bytes and lines() reads it as text); compression: the layers undone, outermost
    first. frames() yields (index, ts_ns, link type, frame bytes) of every packet record with a
    timestamp; indexes count every packet record (0-based, Wireshark's frame number minus one)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.compression: list[str] = []
        self.link_types: set[int] = set()
        self.resolution_ns = 1000   # of the coarsest interface with packets (ns per timestamp unit)
        self.per_s = 10 ** 6        # timestamp units per second of the packet frames() yielded last
        self.unsupported: dict[int, int] = {}   # link type -> packets skipped
        try:
            self._f = self._raw = open(self.path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        except OSError as e:
            raise DataError(f"Failed to read capture {self.path}: {e.strerror}") from None
        try:
            head = self._read(8)
            while len(self.compression) < MAX_LAYERS:
                if head.startswith(b"\x02\x21\x4c\x18"):
                    self._fail("LZ4 legacy format (lz4 -l); recompress it in the LZ4 frame format (lz4 without -l)")
                kind = next(((name, opener) for magic, name, opener in COMPRESSIONS if head.startswith(magic)),
                            ("zstd", _zstd) if _is_zstd_skippable(head) else None)
                if kind is None:
                    break
                self.compression.append(kind[0])
                self._f = kind[1](_Prefixed(head, self._f))
                head = self._read(8)
            if not head:
                self._fail(f"the {self.compression[-1]} stream holds no data" if self.compression else
                           "the file is empty")
            if head[:4] == PCAPNG_SHB:
                self.fmt = "pcapng"
            elif head[:4] in PCAP_MAGIC:
                self.fmt = "pcap"
            else:
                self.fmt = None
                head += self._read(TEXT_PROBE - len(head))
            self.head = head
        except BaseException:
            self.close()
            raise

    @property
    def what(self) -> str:
        """e.g. "pcapng (zstd)"."""
        return (self.fmt or "text") + (f" ({' in '.join(reversed(self.compression))})" if self.compression else "")

    def close(self):
        for f in (self._f, self._raw):  # a decompressor does not close the file it reads
            try:
                f.close()
            except Exception:  # noqa: BLE001 - closing a broken stream must not hide the error that broke it
                pass

    def _fail(self, reason: str):
        raise DataError(f"Failed to read capture {self.path}: {reason}")

    def _read(self, n: int) -> bytes:
        """Up to n bytes: fewer only at the end of the stream (a FIFO's short reads are joined)."""
        out = b""
        try:
            while len(out) < n:
                got = self._f.read(n - len(out))
                if not got:
                    break
                out += got
        except _decompress_errors() as e:
            layer = f"the {self.compression[-1]} stream" if self.compression else "the file"
            reason = "ends early (truncated file)" if isinstance(e, EOFError) else (
                getattr(e, "strerror", None) or str(e) or type(e).__name__)
            self._fail(f"{layer} cannot be read: {reason}")
        return out

    # --- text ------------------------------------------------------------------------------
    def lines(self, max_line: int = 65536):
        """(0-based line number, line without its end) of a text capture, decoded as UTF-8."""
        f = io.BufferedReader(_Prefixed(self.head, _Reader(self)), CHUNK)
        pos = 0
        try:
            for idx in range(1 << 62):
                raw = f.readline(max_line + 1)
                if not raw:
                    return
                if len(raw) > max_line and not raw.endswith(b"\n"):
                    self._fail(f"line {idx + 1} is longer than {max_line} bytes: not tcpdump output")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    self._fail(f"byte {pos + e.start} is not UTF-8 (line {idx + 1})")
                pos += len(raw)
                yield idx, line.rstrip("\r\n")
        finally:
            self.close()

    # --- pcap and pcapng -------------------------------------------------------------------
    def frames(self):
        try:
            yield from (self._ng() if self.fmt == "pcapng" else self._pcap())
        finally:
            self.close()

    def _check_link(self, linktype: int, where: str) -> bool:
        if linktype in LINK_TYPES:
            self.link_types.add(linktype)
            return True
        if self.fmt == "pcap":
            self._fail(f"link type {linktype} {where} is not one of {SUPPORTED}")
        return False

    def _pcap(self):
        buf = self.head + self._read(24 - len(self.head))
        if len(buf) < 24:
            self._fail(f"truncated file header ({len(buf)} of 24 bytes)")
        endian, unit = PCAP_MAGIC[buf[:4]]
        self.resolution_ns, self.per_s = unit, NS // unit
        # the link type is the field's low 16 bits, the rest FCS information (libpcap's LT_LINKTYPE)
        linktype = struct.unpack_from(endian + "I", buf, 20)[0] & 0xFFFF
        self._check_link(linktype, "(file header)")
        frac_max = NS // unit
        rec = struct.Struct(endian + "IIII").unpack_from
        read, fail = self._read, self._fail
        buf, off, pos, idx = buf[24:], 0, 24, 0   # pos: byte of buf[0] in the stream
        while True:
            if len(buf) - off < 16:
                buf, pos, off = buf[off:] + read(CHUNK), pos + off, 0
                if len(buf) < 16:
                    if buf:
                        fail(f"truncated record header at byte {pos} (packet {idx})")
                    return
            sec, frac, caplen, _ = rec(buf, off)
            if caplen > MAX_PACKET:
                fail(f"packet {idx} at byte {pos + off} announces {caplen} bytes, more than {MAX_PACKET}: "
                     "a corrupt record")
            if frac >= frac_max:
                fail(f"packet {idx} at byte {pos + off}: sub-second field {frac} is not below {frac_max}")
            end = off + 16 + caplen
            if end > len(buf):
                buf, pos, off = buf[off:] + read(max(CHUNK, end - off)), pos + off, 0
                end = 16 + caplen
                if end > len(buf):
                    fail(f"truncated packet {idx} at byte {pos + 16} ({caplen} bytes announced, "
                         f"{len(buf) - 16} present)")
            yield idx, sec * NS + frac * unit, linktype, buf[off + 16:end]
            off = end
            idx += 1

    def _ng(self):
        # blocks: type, total length, body, total length; the section header's byte-order magic
        # sets the byte order of its section; interface descriptions carry the link type, the
        # timestamp resolution (if_tsresol, default 10^-6 s) and offset (if_tsoffset, seconds)
        pending, pos, idx, e = self.head, 0, 0, "<"
        ifaces: list[tuple[int, int, int]] = []  # (link type, units per second, offset s)
        resolutions: set[int] = set()
        while True:
            head = pending + self._read(12 - len(pending))
            pending = b""
            if not head:
                break
            if len(head) < 12:
                self._fail(f"truncated block header at byte {pos} (packet {idx})")
            if head[:4] == PCAPNG_SHB:
                e = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}.get(head[8:12])
                if e is None:
                    self._fail(f"bad pcapng byte-order magic {head[8:12].hex()} at byte {pos}")
                ifaces = []
            btype, blen = struct.unpack_from(e + "II", head)
            if blen < 12 or blen % 4 or blen > MAX_BLOCK:
                self._fail(f"block at byte {pos} announces {blen} bytes (packet {idx}): not a multiple of 4 "
                           f"from 12 to {MAX_BLOCK}")
            rest = self._read(blen - 12)
            if len(rest) < blen - 12:
                self._fail(f"truncated block at byte {pos} (packet {idx}: {blen} bytes announced, "
                           f"{12 + len(rest)} present)")
            body = head[8:] + rest[:-4]
            need = {1: 8, 6: 20, 2: 20}.get(btype, 0)  # fixed fields before options / packet data
            if len(body) < need:
                self._fail(f"block of type {btype} at byte {pos} is {len(body)} bytes, its fixed fields {need}")
            if btype == 1:  # interface description
                ifaces.append(self._idb(body, e, pos))
            elif btype in (6, 2):  # enhanced packet; obsolete packet block
                if btype == 6:
                    iface, hi, lo, caplen = struct.unpack_from(e + "IIII", body, 0)
                else:
                    iface, _, hi, lo, caplen = struct.unpack_from(e + "HHIII", body, 0)
                if iface >= len(ifaces):
                    self._fail(f"packet {idx} at byte {pos} names interface {iface}, {len(ifaces)} described")
                if 20 + caplen > len(body):
                    self._fail(f"truncated packet {idx} at byte {pos}")
                linktype, per_s, tsoff = ifaces[iface]
                if self._check_link(linktype, f"(interface {iface})"):
                    resolutions.add(per_s)
                    self.per_s = per_s
                    ts = tsoff * NS + (((hi << 32) | lo) * NS + per_s // 2) // per_s
                    if not -TS_LIMIT <= ts < TS_LIMIT:
                        self._fail(f"packet {idx} at byte {pos}: timestamp {ts // NS} s (if_tsoffset {tsoff} s) is "
                                   "beyond what 64-bit nanoseconds hold (years 1678-2262)")
                    yield idx, ts, linktype, body[20:20 + caplen]
                else:
                    self.unsupported[linktype] = self.unsupported.get(linktype, 0) + 1
                idx += 1
            elif btype == 3:  # simple packet block: no timestamp, useless for RTT
                idx += 1
            pos += blen
        if resolutions:
            self.resolution_ns = NS / min(resolutions)
        if not resolutions and idx:
            types = ", ".join(str(t) for t in sorted(self.unsupported)) or "none with a timestamp"
            self._fail(f"no packet on an interface of a supported link type (found {types}; supported: {SUPPORTED})")

    def _idb(self, body: bytes, e: str, pos: int) -> tuple[int, int, int]:
        linktype = struct.unpack_from(e + "H", body, 0)[0]
        per_s, tsoff, o = 10 ** 6, 0, 8
        while o + 4 <= len(body):
            code, olen = struct.unpack_from(e + "HH", body, o)
            if code == 0:
                break
            if o + 4 + olen > len(body):
                self._fail(f"option {code} of the interface block at byte {pos} runs past the block")
            if code == 9 and olen >= 1:  # if_tsresol: 10^-v s, or 2^-v s with the high bit set
                v = body[o + 4]
                base, exp = (2, v & 0x7F) if v & 0x80 else (10, v)
                if base ** exp >= 1 << 64:
                    self._fail(f"interface block at byte {pos}: if_tsresol {v:#04x} is {base}^-{exp} s, finer than "
                               "a 64-bit timestamp can count (at most 10^-19 or 2^-63 s)")
                per_s = base ** exp
            elif code == 14 and olen == 8:  # if_tsoffset
                tsoff = struct.unpack_from(e + "q", body, o + 4)[0]
            o += 4 + (olen + 3) // 4 * 4
        return linktype, per_s, tsoff


class _Reader:
    """Capture._read as a file's read(), for io.BufferedReader."""

    def __init__(self, cap: Capture):
        self.read = cap._read


def _link(linktype: int, b: bytes):
    """(src station, dst station, ethertype, offset of the layer-3 header, loopback packet type)
    of a frame, or a text naming what it is (SHORT, NOT_IP). Stations: MAC bytes, HOST /
    LOOPBACK_STATION / another text (cooked), or None (raw IP and BSD loopback: the addresses are
    the stations). The loopback packet type is a cooked frame's on lo (0 to us, 4 outgoing), else
    None."""
    n = len(b)
    if linktype == LINKTYPE_ETHERNET:
        if n < 14:
            return SHORT
        return b[6:12], b[0:6], b[12] << 8 | b[13], 14, None
    if linktype == LINKTYPE_SLL or linktype == LINKTYPE_SLL2:
        if linktype == LINKTYPE_SLL:  # packet type, ARPHRD type, address length, 8 address bytes, protocol
            if n < 16:
                return SHORT
            ptype, hatype, alen, etype, l3 = b[1], b[2] << 8 | b[3], b[5], b[14] << 8 | b[15], 16
            addr = b[6:6 + min(alen, 8)]
        else:  # protocol, reserved, interface index, ARPHRD type, packet type, address length, 8 address bytes
            if n < 20:
                return SHORT
            etype, hatype, ptype, alen, l3 = b[0] << 8 | b[1], b[8] << 8 | b[9], b[10], b[11], 20
            addr = b[12:12 + min(alen, 8)]
        if hatype == ARPHRD_LOOPBACK:  # lo: one host both ways; the packet type tells the two copies apart
            return LOOPBACK_STATION, LOOPBACK_STATION, etype, l3, ptype
        if ptype == 4:      # outgoing: sent by the capturing host
            return HOST, "", etype, l3, None
        if ptype == 0:      # to us
            return addr, HOST, etype, l3, None
        return addr, _SLL_TO.get(ptype, f"packet type {ptype}"), etype, l3, None
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6):
        if not n:
            return SHORT
        etype = {4: 0x0800, 6: 0x86DD}.get(b[0] >> 4, 0)
        if linktype != LINKTYPE_RAW and etype != (0x0800 if linktype == LINKTYPE_IPV4 else 0x86DD):
            return NOT_IP
        return None, None, etype, 0, None
    if linktype == LINKTYPE_NULL or linktype == LINKTYPE_LOOP:
        if n < 4:
            return SHORT
        be = b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3]
        # NULL: the capturing host's byte order, unknown here; an address family is below 256, so
        # the order whose value is small is the one (LOOP: network order always)
        af = be if linktype == LINKTYPE_LOOP or be < 256 else b[3] << 24 | b[2] << 16 | b[1] << 8 | b[0]
        etype = _AF_ETYPE.get(af, 0)
        if not etype:
            return NOT_IP
        return None, None, etype, 4, None
    return NOT_IP


def datagram(linktype: int, b: bytes, state: Datagrams | None = None):
    """(proto, sport, dport, src station, dst station, IP version, saddr, daddr, UDP payload) of
    a UDP (17) or TCP (6) packet in frame b; stations are MAC bytes (Ethernet, and the sender of
    a cooked frame), HOST, LOOPBACK_STATION or another text (cooked), or None (raw IP, BSD
    loopback: the addresses are the stations); addresses are packed bytes; the payload is b"" for
    TCP. Anything else: a text naming what the frame is (NOT_IP, FRAGMENT, OTHER_PROTO, SHORT,
    LOOPBACK). Without `state` a fragment is FRAGMENT; with it (Datagrams) fragments are
    reassembled and the datagram comes with the fragment that completes it."""
    link = _link(linktype, b)
    if isinstance(link, str):
        return link
    src, dst, etype, l3, lo_ptype = link
    n = len(b)
    for _ in range(8):  # VLAN tags (QinQ and deeper)
        if etype not in VLAN_TPIDS:
            break
        if n < l3 + 4:
            return SHORT
        etype, l3 = b[l3 + 2] << 8 | b[l3 + 3], l3 + 4
    if lo_ptype is not None and state is not None and state.loopback_copy(lo_ptype, b[l3:]):
        return LOOPBACK
    buf = b
    if etype == 0x0800:
        if n < l3 + 20:
            return SHORT
        ihl = (b[l3] & 0x0F) * 4
        if b[l3] >> 4 != 4 or ihl < 20 or n < l3 + ihl:
            return SHORT
        proto, ver, saddr, daddr, l4 = b[l3 + 9], 4, b[l3 + 12:l3 + 16], b[l3 + 16:l3 + 20], l3 + ihl
        frag = b[l3 + 6] << 8 | b[l3 + 7]
        if frag & 0x3FFF:  # more fragments, or an offset
            if state is None:
                return FRAGMENT
            total = b[l3 + 2] << 8 | b[l3 + 3]
            end = l3 + total if ihl <= total <= n - l3 else n  # without the link layer's padding
            whole = state.fragment((4, saddr, daddr, proto, b[l3 + 4:l3 + 6]), (frag & 0x1FFF) * 8,
                                   bool(frag & 0x2000), b[l4:end], proto)
            if whole is None:
                return FRAGMENT
            buf, l4, n = whole[1], 0, len(whole[1])
    elif etype == 0x86DD:
        if n < l3 + 40 or b[l3] >> 4 != 6:
            return SHORT
        proto, ver, saddr, daddr, l4 = b[l3 + 6], 6, b[l3 + 8:l3 + 24], b[l3 + 24:l3 + 40], l3 + 40
        plen = b[l3 + 4] << 8 | b[l3 + 5]
        end = l3 + 40 + plen if 0 < plen <= n - l3 - 40 else n
        for _ in range(16):  # hop-by-hop, routing, fragment, destination options, AH
            if proto not in (0, 43, 44, 60, 51):
                break
            if n < l4 + 8:
                return SHORT
            if proto == 44:
                off_m = buf[l4 + 2] << 8 | buf[l4 + 3]
                if off_m & 0xFFF9 and buf is b:  # an offset or more fragments (RFC 8200 4.5)
                    if state is None:
                        return FRAGMENT
                    whole = state.fragment((6, saddr, daddr, buf[l4 + 4:l4 + 8]), off_m & 0xFFF8, bool(off_m & 1),
                                           buf[l4 + 8:end], buf[l4])
                    if whole is None:
                        return FRAGMENT
                    proto, buf, l4 = whole[0], whole[1], 0
                    n = len(buf)
                    continue
                proto, l4 = buf[l4], l4 + 8
            else:
                proto, l4 = buf[l4], l4 + ((buf[l4 + 1] + 2) * 4 if proto == 51 else (buf[l4 + 1] + 1) * 8)
    else:
        return NOT_IP
    if proto != 17 and proto != 6:
        return OTHER_PROTO
    if n < l4 + (8 if proto == 17 else 20):
        return SHORT
    sport, dport = buf[l4] << 8 | buf[l4 + 1], buf[l4 + 2] << 8 | buf[l4 + 3]
    payload = b""
    if proto == 17:
        ulen = buf[l4 + 4] << 8 | buf[l4 + 5]
        payload = buf[l4 + 8:l4 + max(ulen, 8)]
    return proto, sport, dport, src, dst, ver, saddr, daddr, payload


class Datagrams:
    """datagram() with state across the frames of one capture (module docstring). Memory is
    bounded: at most MAX_PENDING datagrams wait for fragments (the oldest is given up first) and
    LOOPBACK_MEMORY outgoing loopback packets are remembered."""

    MAX_PENDING = 4096
    LOOPBACK_MEMORY = 256

    def __init__(self):
        self.pending: dict[tuple, dict] = {}   # fragment key -> {offset: data}, "end", "proto"
        self.reassembled = 0                   # datagrams made whole
        self.given_up = 0                      # fragments of datagrams dropped unfinished (MAX_PENDING)
        self._lo_out: dict[bytes, int] = {}    # layer-3 bytes of outgoing loopback packets -> copies

    def __call__(self, linktype: int, b: bytes):
        return datagram(linktype, b, self)

    @property
    def incomplete(self) -> int:
        """Fragments of datagrams still unfinished (never completed, or dropped at MAX_PENDING)."""
        return self.given_up + sum(len(p["parts"]) for p in self.pending.values())

    def loopback_copy(self, ptype: int, l3: bytes) -> bool:
        """Whether a packet on a cooked capture's lo is the second copy of one already seen: the
        kernel may hand a capture on any both the outgoing copy (packet type 4) and the one
        received (0) of the same packet."""
        if ptype == 4:
            self._lo_out[l3] = self._lo_out.get(l3, 0) + 1
            if len(self._lo_out) > self.LOOPBACK_MEMORY:
                del self._lo_out[next(iter(self._lo_out))]
            return False
        left = self._lo_out.get(l3)
        if not left:
            return False
        if left == 1:
            del self._lo_out[l3]
        else:
            self._lo_out[l3] = left - 1
        return True

    def fragment(self, key: tuple, offset: int, more: bool, data: bytes, proto: int):
        """Add a fragment; (protocol, payload) of the whole datagram when this one completes it.
        Overlapping bytes are taken from the fragment with the lower offset."""
        p = self.pending.get(key)
        if p is None:
            if len(self.pending) >= self.MAX_PENDING:
                old = self.pending.pop(next(iter(self.pending)))
                self.given_up += len(old["parts"])
            p = self.pending[key] = {"parts": {}, "end": None, "proto": None}
        p["parts"].setdefault(offset, data)
        if offset == 0:
            p["proto"] = proto
        if not more:
            p["end"] = offset + len(data)
        end = p["end"]
        if end is None or p["proto"] is None:
            return None
        pos = 0
        for off in sorted(p["parts"]):
            if off > pos:
                return None
            pos = max(pos, off + len(p["parts"][off]))
        if pos < end:
            return None
        whole = bytearray(end)
        for off in sorted(p["parts"], reverse=True):
            chunk = p["parts"][off][:max(0, end - off)]
            whole[off:off + len(chunk)] = chunk
        del self.pending[key]
        self.reassembled += 1
        return p["proto"], bytes(whole)
