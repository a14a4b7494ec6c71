"""RTT from a client-side capture: pair every DNS probe the client sent with the frame that came
back, and summarise the round-trip times. One reader and one pairing rule for every source: the
live prober's tcpdump capture, the thesis's pcaps, pcapng, and `tcpdump -e` text output (the
thesis's RTT-under-load figure, Fig. 7.7, was made from such text). The format is detected by
content, not by the file name.

Direction comes from the client's MAC: frames it sends are queries, frames sent to it are answers
(a real reply, QR=1, or the thesis reflector's unchanged query, QR=0). The client is the station in
most DNS frames (or is given). Frames that are not IPv4/UDP DNS to or from the service port (STP,
LLDP, ARP, DHCP, ...) are skipped and counted.

Pairing rule (the one rule; docs/results.md repeats it):
- Frames are taken in timestamp order (file order among equal timestamps), so an RTT is never
  negative: an answer stamped before its query finds nothing to pair with.
- The flow key of a query is its DNS id, its question and the server endpoint it was sent to
  (address and port). An answer has the flow key of the query it answers: same id, the question
  where the answer shows one (tcpdump prints an answer's question only with -vv), and the server
  endpoint it comes from (a reflected query: goes to). The client endpoint is not part of the key,
  because with direct server return the answer may go to another client address or port; where
  the answer does go back to a query's source (the mirrored 5-tuple), such queries are preferred.
- An answer pairs with the earliest still-awaited query of its flow key sent within the timeout
  before it (config dns.prober.timeout_s, default 1 s). A query is awaited from when it is sent
  until it is answered, its timeout passes, or an identical query (same key and same client
  endpoint) is sent: identical queries cannot be told apart, so a client that repeats a query has
  given up the previous one. This is what keeps byte-identical probes (the thesis sent the same
  query every 214 ms) in step when a reply is lost: without it every later reply would pair with
  the query before its own.
- A query that is never paired is lost. An RTT is therefore in [0, timeout].

Timestamps are integer nanoseconds from the file to the RTT (pcapng resolutions are converted with
integer arithmetic); `rtts_us` is the same data divided by 1000.

Median: a microsecond capture quantises every RTT to whole microseconds, and the sample median of
such data jumps in 1 µs steps (the thesis captures give exactly 23 and 18 µs). `median_us` is
therefore the interpolated (grouped) median, which treats each value v as the bin
[v − r/2, v + r/2) of the timestamp resolution r and interpolates inside the median's bin; for
nanosecond captures it equals the sample median to within 1 ns. `median_raw_us` is the sample
median. On the thesis captures: 23.15 − 18.01 = 5.14 µs (sample medians: 23 − 18 = 5 µs; the
paper states 23.1 − 17.9 = 5.2 µs).

Reader: classic pcap (micro- and nanosecond, either byte order) and pcapng (enhanced and obsolete
packet blocks, per-interface if_tsresol and if_tsoffset, several sections) are read by the code
below, not by dpkt: on the thesis captures dpkt's reader takes 3-4 times as long
(scripts/bench_ingest_plot.py prints both), and its pcapng reader returns float seconds and uses
the first interface's resolution for all. The tests check this reader against dpkt's.
"""

from __future__ import annotations

import datetime
import functools
import re
import struct
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

import dns.exception
import dns.message
import numpy as np

from .errors import DataError

PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1000), b"\xa1\xb2\xc3\xd4": (">", 1000),
              b"\x4d\x3c\xb2\xa1": ("<", 1), b"\xa1\xb2\x3c\x4d": (">", 1)}  # ns per unit
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
LINKTYPE_ETHERNET = 1
NS = 1_000_000_000

# plausibility gates (flags, not refusals: the numbers are kept and the flag says why to doubt them)
LOST_FLAG_FRACTION = 0.05   # more than 5 % of the probes unanswered
RTT_FLAG_OF_TIMEOUT = 0.5   # an RTT above half the timeout: the timeout no longer separates probes
SPACING_FLAG_OF_RTT = 2.0   # identical queries closer than 2x the largest RTT: pairing is ambiguous


@functools.cache
def default_timeout_s() -> float:
    """The prober's timeout default, from its one place: the schema (dns.prober.timeout_s)."""
    import yaml

    from .config import SCHEMA_DIR
    schema = yaml.safe_load((SCHEMA_DIR / "dns.schema.yaml").read_text())
    return float(schema["properties"]["prober"]["properties"]["timeout_s"]["default"])


@dataclass
class Frame:
    index: int          # 0-based position in the capture (packet record, or line of a text file)
    ts_ns: int
    src_mac: str
    dst_mac: str
    saddr: str
    daddr: str
    sport: int
    dport: int
    dns_id: int
    qr: bool
    qname: str          # "" where the record does not show the question


@dataclass
class RttResult:
    path: str
    client_mac: str
    rtts_us: np.ndarray
    lost: int
    pairs: list[tuple[int, int]] = field(default_factory=list)  # (query index, answer index)
    skipped_frames: int = 0
    resolution_us: float = 1.0  # timestamp resolution of the capture
    dns_frames: int = 0         # DNS frames seen (probes, answers and unrelated DNS)
    # added with the single pairing rule; defaults keep older constructors working
    rtts_ns: np.ndarray | None = None  # the same RTTs in integer ns
    queries: int = 0            # queries the client sent
    unmatched: int = 0          # answers to the client with no awaited query
    superseded: int = 0         # lost queries given up because an identical one was sent
    out_of_order: int = 0       # frames stamped earlier than the frame before them in the file
    timeout_ns: int = NS
    fmt: str = "pcap"           # pcap | pcapng | tcpdump-text
    min_identical_spacing_ns: int | None = None  # closest two identical queries
    pair_stamps: list[tuple[int, int, int, int]] = field(default_factory=list)  # per pair: DNS id, client
    #   port, query and answer ts_ns (e.g. to match the prober's own records to the capture)

    def __post_init__(self):
        if self.rtts_ns is None:
            self.rtts_ns = np.round(np.asarray(self.rtts_us) * 1000).astype(np.int64)

    @property
    def n(self) -> int:
        return len(self.rtts_us)

    # statistics are taken on the integer ns and converted once at the end
    def pct(self, q: float) -> float:
        return float(np.percentile(self.rtts_ns, q)) / 1000

    @property
    def median_us(self) -> float:
        return grouped_median(self.rtts_ns, self.resolution_us * 1000) / 1000

    @property
    def median_raw_us(self) -> float:
        return float(np.median(self.rtts_ns)) / 1000

    @property
    def mean_us(self) -> float:
        return float(np.mean(self.rtts_ns)) / 1000

    @property
    def std_us(self) -> float:
        return float(np.std(self.rtts_ns, ddof=1)) / 1000 if self.n > 1 else 0.0

    @property
    def p99_us(self) -> float:
        return self.pct(99)

    PERCENTILES = (1, 5, 25, 50, 75, 90, 95, 99)

    @property
    def percentiles_us(self) -> dict[int, float]:
        return {q: self.pct(q) for q in self.PERCENTILES}

    @property
    def probe_range(self) -> tuple[int, int] | None:
        """Packet indexes (0-based) of the first and last answered probe."""
        return (min(p for p, _ in self.pairs), max(p for p, _ in self.pairs)) if self.pairs else None

    @property
    def answer_range(self) -> tuple[int, int] | None:
        return (min(a for _, a in self.pairs), max(a for _, a in self.pairs)) if self.pairs else None

    @property
    def lost_fraction(self) -> float:
        return self.lost / (self.n + self.lost) if self.n + self.lost else 0.0

    def flags(self) -> list[str]:
        """Plausibility gates: one sentence per reason to doubt this capture's numbers."""
        out = []
        if self.lost_fraction > LOST_FLAG_FRACTION:
            out.append(f"lost {self.lost} of {self.n + self.lost} probes ({100 * self.lost_fraction:.1f} % > "
                       f"{100 * LOST_FLAG_FRACTION:g} %)")
        top = int(self.rtts_ns.max()) if self.n else 0
        if top > RTT_FLAG_OF_TIMEOUT * self.timeout_ns:
            out.append(f"RTT up to {top / 1e6:.3f} ms, more than {RTT_FLAG_OF_TIMEOUT:g} x the timeout "
                       f"({self.timeout_ns / 1e6:g} ms)")
        if self.min_identical_spacing_ns is not None and top * SPACING_FLAG_OF_RTT > self.min_identical_spacing_ns:
            out.append(f"identical queries {self.min_identical_spacing_ns / 1e3:.3f} µs apart, less than "
                       f"{SPACING_FLAG_OF_RTT:g} x the largest RTT ({top / 1e3:.3f} µs): an answer may belong to "
                       "an earlier query")
        if self.unmatched:
            out.append(f"{self.unmatched} answers with no awaited query (stamped before their query, after "
                       "the timeout, or duplicated)")
        if self.out_of_order:
            out.append(f"{self.out_of_order} frames stamped earlier than the frame before them (paired in "
                       "time order)")
        return out

    def refusal(self) -> str | None:
        """Why these RTTs cannot be used at all, or None: when identical queries follow each other
        faster than the typical (median) RTT, an answer cannot be told from the next query's."""
        med = float(np.median(self.rtts_ns)) if self.n else 0.0
        if self.min_identical_spacing_ns is not None and med * SPACING_FLAG_OF_RTT > self.min_identical_spacing_ns:
            return (f"identical queries {self.min_identical_spacing_ns / 1e3:.3f} µs apart, less than "
                    f"{SPACING_FLAG_OF_RTT:g} x the median RTT ({med / 1e3:.3f} µs): answers cannot be told apart "
                    "(give every probe its own DNS id)")
        return None

    def summary(self) -> dict:
        """Flat dict for JSON and the tidy rtt_summary rows (keys ending in _us are µs)."""
        out = {"n": self.n, "lost": self.lost, "median_us": round(self.median_us, 3),
               "median_raw_us": round(self.median_raw_us, 3), "resolution_us": self.resolution_us,
               "mean_us": round(self.mean_us, 3), "std_us": round(self.std_us, 3),
               "min_us": round(float(self.rtts_us.min()), 3), "max_us": round(float(self.rtts_us.max()), 3)}
        out |= {f"p{q}_us": round(v, 3) for q, v in self.percentiles_us.items()}
        out |= {"client_mac": self.client_mac, "dns_frames": self.dns_frames,
                "skipped_frames": self.skipped_frames,
                "first_packet": min(self.probe_range[0], self.answer_range[0]),
                "last_packet": max(self.probe_range[1], self.answer_range[1]),
                "format": self.fmt, "timeout_s": self.timeout_ns / NS, "queries": self.queries,
                "lost_fraction": round(self.lost_fraction, 6), "unmatched_answers": self.unmatched,
                "superseded": self.superseded, "out_of_order": self.out_of_order, "flags": self.flags(),
                "refused": self.refusal()}
        return out


def grouped_median(values: np.ndarray, width: float) -> float:
    """Median of data quantised to `width`: interpolated inside the bin that holds the middle."""
    v = np.round(np.asarray(values) / width) * width
    u, counts = np.unique(v, return_counts=True)
    half = len(v) / 2
    below = np.concatenate(([0], np.cumsum(counts)[:-1]))
    i = int(np.searchsorted(np.cumsum(counts), half))
    return float(u[i] - width / 2 + width * (half - below[i]) / counts[i])


def _mac(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def pcap_resolution_us(path: str | Path) -> float:
    """Timestamp resolution of a capture in µs (1 for microsecond pcap, 0.001 for nanosecond)."""
    return _Capture(path).resolution_us


def _units_to_ns(units: int, num: int, den: int) -> int:
    """units x num/den seconds in ns, rounded half up, in integers (no float on the way)."""
    return (units * num * NS + den // 2) // den


class _Capture:
    """A classic pcap or pcapng file read whole (captures here are a few MB); frames() yields
    (index, ts_ns, frame bytes) of its Ethernet frames. DataError names the file otherwise."""

    def __init__(self, path: str | Path, data: bytes | None = None):
        self.path = Path(path)
        if data is None:
            try:
                data = self.path.read_bytes()
            except OSError as e:
                raise DataError(f"Failed to read capture {self.path}: {e.strerror}") from None
        self.data = data
        if not self.data:
            self._fail("the file is empty")
        self.ng = self.data[:4] == PCAPNG_SHB
        if not self.ng and self.data[:4] not in PCAP_MAGIC:
            self._fail(f"not a pcap, pcapng or tcpdump -e text file (magic {self.data[:4].hex()})")
        if not self.ng and len(self.data) < 24:
            self._fail(f"truncated file header ({len(self.data)} of 24 bytes)")
        self.fmt = "pcapng" if self.ng else "pcap"
        self.resolution_us = 1.0
        if not self.ng:
            endian, unit_ns = PCAP_MAGIC[self.data[:4]]
            self.resolution_us = unit_ns / 1000
            linktype = struct.unpack(endian + "I", self.data[20:24])[0]
            if linktype != LINKTYPE_ETHERNET:
                self._fail(f"link type {linktype}, expected Ethernet (1); capture on the interface, "
                           "not on 'any'")

    def _fail(self, reason: str):
        raise DataError(f"Failed to read capture {self.path}: {reason}")

    def frames(self):
        return self._ng_frames() if self.ng else self._pcap_frames()

    def _pcap_frames(self):
        data, (endian, scale) = self.data, PCAP_MAGIC[self.data[:4]]
        rec = struct.Struct(endian + "IIII")
        off, idx = 24, 0
        while off < len(data):
            if off + 16 > len(data):
                self._fail(f"truncated record header at byte {off} (packet {idx})")
            sec, frac, caplen, _ = rec.unpack_from(data, off)
            off += 16
            if off + caplen > len(data):
                self._fail(f"truncated packet {idx} at byte {off} ({caplen} bytes announced, "
                           f"{len(data) - off} present)")
            yield idx, sec * NS + frac * scale, data[off:off + caplen]
            off += caplen
            idx += 1

    def _ng_frames(self):
        # blocks: type, total length, body, total length; the section header's byte-order magic
        # sets the endianness of its section; interface descriptions carry link type, timestamp
        # resolution (if_tsresol, default 10^-6 s) and offset (if_tsoffset, seconds)
        data, off, idx, e = self.data, 0, 0, "<"
        ifaces: list[tuple[int, int, int, int]] = []  # (link type, num, den: s per unit, offset s)
        resolutions = set()
        while off < len(data):
            if off + 12 > len(data):
                self._fail(f"truncated block header at byte {off} (packet {idx})")
            btype = struct.unpack_from("<I", data, off)[0]
            if btype == 0x0A0D0D0A:
                bom = data[off + 8:off + 12]
                e = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}.get(bom)
                if e is None:
                    self._fail(f"bad pcapng byte-order magic {bom.hex()} at byte {off}")
                ifaces = []
            btype, blen = struct.unpack_from(e + "II", data, off)
            if blen < 12 or blen % 4 or off + blen > len(data):
                self._fail(f"truncated block at byte {off} (packet {idx}: {blen} bytes announced, "
                           f"{len(data) - off} present)")
            body = data[off + 8:off + blen - 4]
            need = {1: 8, 6: 20, 2: 20}.get(btype, 0)  # fixed fields before options / packet data
            if len(body) < need:
                self._fail(f"block of type {btype} at byte {off} is {len(body)} bytes, its fixed fields {need}")
            if btype == 1:  # interface description
                linktype = struct.unpack_from(e + "H", body, 0)[0]
                num, den, tsoff = 1, 10 ** 6, 0
                o = 8
                while o + 4 <= len(body):
                    code, olen = struct.unpack_from(e + "HH", body, o)
                    if code == 0:
                        break
                    if o + 4 + olen > len(body):
                        self._fail(f"option {code} of the interface block at byte {off} runs past the block")
                    if code == 9 and olen >= 1:  # if_tsresol: 10^-v, or 2^-v with the high bit
                        v = body[o + 4]
                        den = 2 ** (v & 0x7F) if v & 0x80 else 10 ** v
                    elif code == 14 and olen == 8:  # if_tsoffset
                        tsoff = struct.unpack_from(e + "q", body, o + 4)[0]
                    o += 4 + (olen + 3) // 4 * 4
                ifaces.append((linktype, num, den, tsoff))
            elif btype in (6, 2):  # enhanced packet; obsolete packet block
                if btype == 6:
                    iface, hi, lo, caplen = struct.unpack_from(e + "IIII", body, 0)
                else:
                    iface, _, hi, lo, caplen = struct.unpack_from(e + "HHIII", body, 0)
                pkt_off = 20
                if iface >= len(ifaces):
                    self._fail(f"packet {idx} at byte {off} names interface {iface}, "
                               f"{len(ifaces)} described")
                if pkt_off + caplen > len(body):
                    self._fail(f"truncated packet {idx} at byte {off}")
                linktype, num, den, tsoff = ifaces[iface]
                if linktype == LINKTYPE_ETHERNET:
                    resolutions.add(num / den)
                    yield idx, tsoff * NS + _units_to_ns((hi << 32) | lo, num, den), body[pkt_off:pkt_off + caplen]
                idx += 1
            elif btype == 3:  # simple packet block: no timestamp, useless for RTT
                idx += 1
            off += blen
        if resolutions:
            self.resolution_us = max(resolutions) * 1e6
        elif idx:
            self._fail("no Ethernet interface in the capture; capture on the interface, not on 'any'")


def read_pcap(path: str | Path):
    """Yield (index, ts_ns, frame bytes) of a classic pcap or pcapng; DataError on malformed files.
    Indexes count every packet record (0-based), as Wireshark's frame numbers minus one."""
    yield from _Capture(path).frames()


@functools.lru_cache(maxsize=4096)
def _dns_fields(payload: bytes) -> tuple[int, bool, str] | None:
    """(id, QR, question) of a DNS message; cached because probes are often byte-identical (the
    thesis's are), and parsing is most of the analysis time."""
    try:
        msg = dns.message.from_wire(payload, question_only=True)
    except (dns.exception.DNSException, ValueError, IndexError):
        return None
    return msg.id, bool(msg.flags & 0x8000), msg.question[0].name.to_text() if msg.question else ""


def parse_dns_frame(idx: int, ts_ns: int, b: bytes, port: int = 53) -> Frame | None:
    """The DNS fields of an Ethernet/IPv4/UDP frame to or from `port`; None for anything else."""
    if len(b) < 14:
        return None
    etype, l3 = struct.unpack_from("!H", b, 12)[0], 14
    if etype == 0x8100 and len(b) >= 18:  # one VLAN tag
        etype, l3 = struct.unpack_from("!H", b, 16)[0], 18
    if etype != 0x0800 or len(b) < l3 + 20:
        return None
    ihl = (b[l3] & 0x0F) * 4
    if b[l3] >> 4 != 4 or ihl < 20 or b[l3 + 9] != 17 or len(b) < l3 + ihl + 8:
        return None
    saddr = ".".join(map(str, b[l3 + 12:l3 + 16]))
    daddr = ".".join(map(str, b[l3 + 16:l3 + 20]))
    l4 = l3 + ihl
    sport, dport, ulen = struct.unpack_from("!HHH", b, l4)
    if port not in (sport, dport):
        return None
    d = _dns_fields(bytes(b[l4 + 8:l4 + max(ulen, 8)]))
    if d is None:
        return None
    return Frame(idx, ts_ns, _mac(b[6:12]), _mac(b[0:6]), saddr, daddr, sport, dport, d[0], d[1], d[2])


# --- tcpdump -e text ------------------------------------------------------------------------------
# `tcpdump -e -n` lines, e.g.
#   15:18:56.494867 02:00:00:00:01:00 > 02:00:00:00:05:00, ethertype IPv4 (0x0800), length 73:
#     10.0.0.1.44444 > 10.0.0.45.53: 4660+ A? example.local. (31)          (one line in the file)
# Time: HH:MM:SS.frac (default), YYYY-MM-DD HH:MM:SS.frac (-tttt) or epoch seconds (-tt); 6 or 9
# digits (--time-stamp-precision=nano). With -v the IP header's fields come in parentheses and the
# addresses on the next, indented line. DNS (tcpdump's print-domain.c): a query is
# "id[flags] [..] TYPE? name.", an answer "id[flags] an/ns/ar ..." with "q: TYPE? name." only at -vv.
_TEXT_HEAD = re.compile(
    r"(?:(?P<date>\d{4}-\d{2}-\d{2}) (?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2})|(?P<h2>\d{1,2}):(?P<m2>\d{2}):"
    r"(?P<s2>\d{2})|(?P<epoch>\d{9,}))\.(?P<frac>\d{6}|\d{9}) "
    r"(?P<src>[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}) > (?P<dst>[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}), (?P<rest>.*)$")
_TEXT_IP = re.compile(r"ethertype IPv4 \(0x0800\), (?:length \d+: )?(?:\((?:[^()]|\([^()]*\))*\) )?(\d+\.\d+\.\d+\.\d+)\.(\w+) > "
                      r"(\d+\.\d+\.\d+\.\d+)\.(\w+): (.*)$")
_TEXT_ID = re.compile(r"(?:\[[^\]]*\]\s*)*(\d+)\b")  # after -v's "[udp sum ok]"
_TEXT_COUNTS = re.compile(r"\s\d+/\d+/\d+(?:\s|$)")
_TEXT_QUESTION = re.compile(r"(?:^|\s)(?:q: )?[A-Za-z][\w-]*\? (\S+)")
_PORT_NAMES = {"domain": 53}
_DAY_NS = 86400 * NS


def _is_text(data: bytes) -> bool:
    head = data[:4096].decode("utf-8", "replace")
    return any(_TEXT_HEAD.match(line) for line in head.splitlines()[:20])


def _text_frames(path: Path, data: bytes, port: int):
    """(frames, skipped lines, resolution_us) of tcpdump -e text. Times of day
    without a date cross midnight when a time is more than 12 h before the previous one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"Failed to read tcpdump text {path}: byte {e.start} is not UTF-8") from None
    frames, skipped, digits, day, prev = [], 0, set(), 0, None
    lines = text.splitlines()
    for idx, line in enumerate(lines):
        if not line.strip() or line[0].isspace():  # blank, or a continuation (-v, -X) line
            continue
        m = _TEXT_HEAD.match(line)
        if m is None:
            skipped += 1
            continue
        frac = m["frac"]
        digits.add(len(frac))
        sub = int(frac) * (1000 if len(frac) == 6 else 1)
        if m["epoch"]:
            ts = int(m["epoch"]) * NS + sub
        else:
            h, mi, s = (int(m["h"]), int(m["m"]), int(m["s"])) if m["date"] else \
                (int(m["h2"]), int(m["m2"]), int(m["s2"]))
            tod = ((h * 60 + mi) * 60 + s) * NS + sub
            if m["date"]:
                try:
                    d = datetime.date.fromisoformat(m["date"])
                except ValueError:
                    raise DataError(f"Failed to read tcpdump text {path}: line {idx + 1}: date "
                                    f"{m['date']!r} is not a date") from None
                ts = d.toordinal() * _DAY_NS + tod
            else:
                if prev is not None and tod + day * _DAY_NS < prev - _DAY_NS // 2:
                    day += 1  # past midnight: times of day carry no date
                ts = day * _DAY_NS + tod
        prev = ts
        ip = _TEXT_IP.search(m["rest"])
        if ip is None and idx + 1 < len(lines) and lines[idx + 1][:1].isspace():
            ip = _TEXT_IP.search(m["rest"] + " " + lines[idx + 1].strip())  # -v: addresses on the next line
        if ip is None:
            skipped += 1
            continue
        saddr, sp, daddr, dp, payload = ip.groups()
        sport, dport = (_PORT_NAMES.get(p, int(p) if p.isdigit() else -1) for p in (sp, dp))
        qid = _TEXT_ID.match(payload)
        if port not in (sport, dport) or qid is None:
            skipped += 1
            continue
        qr = _TEXT_COUNTS.search(payload) is not None
        q = _TEXT_QUESTION.search(payload)
        if not qr and q is None:
            skipped += 1
            continue
        frames.append(Frame(idx, ts, m["src"].lower(), m["dst"].lower(), saddr, daddr, sport, dport,
                            int(qid[1]), qr, q[1] if q else ""))
    res = 0.001 if digits == {9} else 1.0
    return frames, skipped, res


def detect_client(frames: list[Frame]) -> str:
    """The station in most DNS frames (as sender or receiver); ties go to the first sender."""
    c = Counter()
    for f in frames:
        c[f.src_mac] += 1
        c[f.dst_mac] += 1
    best = max(c.values())
    for f in frames:
        if c[f.src_mac] == best:
            return f.src_mac
    return next(m for m, v in c.items() if v == best)


def read_dns_frames(path: str | Path, port: int = 53) -> tuple[list[Frame], int, float, str]:
    """The DNS frames of a capture in any of the formats (detected by content): (frames in file
    order, skipped frames, timestamp resolution in µs, format)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DataError(f"Failed to read capture {path}: {e.strerror}") from None
    if data[:4] not in PCAP_MAGIC and data[:4] != PCAPNG_SHB and data and _is_text(data):
        frames, skipped, res = _text_frames(path, data, port)
        return frames, skipped, res, "tcpdump-text"
    cap = _Capture(path, data)
    frames, skipped = [], 0
    for idx, ts, b in cap.frames():
        f = parse_dns_frame(idx, ts, b, port)
        if f is None:
            skipped += 1
        else:
            frames.append(f)
    return frames, skipped, cap.resolution_us, cap.fmt


class _Query:
    __slots__ = ("frame", "done")

    def __init__(self, frame: Frame):
        self.frame, self.done = frame, False


def pair(frames: list[Frame], client: str, timeout_ns: int) -> dict:
    """The pairing rule (module docstring) on DNS frames in file order. Returns pairs (query index,
    answer index), pair_stamps, rtts_ns, queries, lost, superseded, unmatched, out_of_order,
    min_identical_spacing_ns."""
    out_of_order = sum(1 for a, b in zip(frames, frames[1:]) if b.ts_ns < a.ts_ns)
    by_flow: dict[tuple, deque[_Query]] = defaultdict(deque)   # (id, server addr, server port)
    last_identical: dict[tuple, _Query] = {}                   # full key -> latest query
    spacing = None
    pairs, stamps, rtts, queries, superseded, unmatched = [], [], [], 0, 0, 0
    for f in sorted(frames, key=lambda f: f.ts_ns):  # stable: file order among equal stamps
        if f.src_mac == client:
            queries += 1
            full = (f.dns_id, f.qname, f.saddr, f.sport, f.daddr, f.dport)
            prev = last_identical.get(full)
            if prev is not None:
                gap = f.ts_ns - prev.frame.ts_ns
                spacing = gap if spacing is None else min(spacing, gap)
                if not prev.done:
                    prev.done = True  # given up by the client: an identical query replaces it
                    superseded += 1
            q = _Query(f)
            last_identical[full] = q
            by_flow[(f.dns_id, f.daddr, f.dport)].append(q)
        elif f.dst_mac == client:
            # a reply comes from the server endpoint; a reflected query still goes to it
            server, client_ep = ((f.saddr, f.sport), (f.daddr, f.dport)) if f.qr else \
                ((f.daddr, f.dport), (f.saddr, f.sport))
            awaiting = by_flow.get((f.dns_id, *server))
            while awaiting and (awaiting[0].done or f.ts_ns - awaiting[0].frame.ts_ns > timeout_ns):
                awaiting.popleft()  # answered, given up, or timed out (lost)
            cands = [q for q in awaiting or () if not q.done
                     and (not f.qname or not q.frame.qname or q.frame.qname == f.qname)]
            if not cands:
                unmatched += 1
                continue
            mirrored = [q for q in cands if (q.frame.saddr, q.frame.sport) == client_ep]
            q = (mirrored or cands)[0]
            q.done = True
            pairs.append((q.frame.index, f.index))
            stamps.append((q.frame.dns_id, q.frame.sport, q.frame.ts_ns, f.ts_ns))
            rtts.append(f.ts_ns - q.frame.ts_ns)
    return {"pairs": pairs, "pair_stamps": stamps, "rtts_ns": np.array(rtts, dtype=np.int64), "queries": queries,
            "lost": queries - len(pairs), "superseded": superseded, "unmatched": unmatched,
            "out_of_order": out_of_order, "min_identical_spacing_ns": spacing}


def analyze_pcap(path: str | Path, client_mac: str | None = None, port: int = 53, *,
                 timeout_s: float | None = None) -> RttResult:
    """Pair probes with answers in a client-side capture (pcap, pcapng or tcpdump -e text) and
    return the RTTs. timeout_s: how long a query waits for its answer (default: the prober's,
    dns.prober.timeout_s)."""
    timeout_s = default_timeout_s() if timeout_s is None else float(timeout_s)
    if not timeout_s > 0 or timeout_s == float("inf"):
        raise DataError(f"Failed to analyze capture {path}: timeout {timeout_s} s, expected a finite "
                        "number > 0")
    frames, skipped, resolution_us, fmt = read_dns_frames(path, port)
    if not frames:
        raise DataError(f"Failed to analyze capture {path}: no DNS frames on UDP port {port}")
    client = client_mac.lower() if client_mac else detect_client(frames)
    timeout_ns = round(timeout_s * NS)
    p = pair(frames, client, timeout_ns)
    if not p["pairs"]:
        raise DataError(f"Failed to analyze capture {path}: no probe from {client} was answered "
                        f"({len(frames)} DNS frames)")
    return RttResult(str(path), client, p["rtts_ns"] / 1000.0, p["lost"], p["pairs"], skipped, resolution_us,
                     len(frames), rtts_ns=p["rtts_ns"], queries=p["queries"], unmatched=p["unmatched"],
                     superseded=p["superseded"], out_of_order=p["out_of_order"], timeout_ns=timeout_ns,
                     fmt=fmt, min_identical_spacing_ns=p["min_identical_spacing_ns"], pair_stamps=p["pair_stamps"])
