"""RTT from a capture: pair every DNS query with the frame that answered it, and summarise the
round-trip times. One reader and one pairing rule for every source: the
live prober's tcpdump capture, the thesis's pcaps, pcapng, and `tcpdump -e` text output (the
thesis's RTT-under-load figure, Fig. 7.7, was made from such text). The format is detected by
content, not by the file name.

Direction comes from the DNS header and the addresses, never from the link layer: a message with
QR=0 is a query, sent by the client from its address and port to the server's; QR=1 is an answer,
from the server endpoint to the client endpoint. So a capture on Linux `lo` (both MACs zero), a
cooked capture, a BSD loopback capture, one that starts with an answer, several clients, and a
resolver in the middle (server to its clients, client to its upstream) all pair, each query in
its own conversation. The one exception is the thesis's reflector, which returns the probe itself
(QR=0, same addresses and ports, only the MACs rewritten): a query whose link-layer sender is not
the sender of the identical query before it, and whose receiver is that sender, is that query
coming back, i.e. its answer (and such a frame stamped before the probe itself is counted as an
answer that paired with nothing, not as a query). This needs stations that tell sender from receiver (distinct,
non-zero MACs, or a cooked capture's packet type); on a loopback it cannot be told from a
retransmission and is a query. A client is named by its station where the stations tell (a MAC,
"this host" of a cooked capture) and by its address otherwise; `client` (--client, a MAC or an
address) keeps only that client's queries. A DNS message dnspython refuses (a forward compression
pointer, say) whose header is plausible (opcode QUERY, NOTIFY or UPDATE, one question) is paired by
its id and QR with any question, and counted by the reason (summary: dns_refused); other bytes on
the port are not DNS. Frames that are not UDP DNS (IPv4 or IPv6) to or
from the service port (STP, LLDP, ARP, DHCP, TCP, the second copy of a loopback packet in a
cooked capture, ...) are skipped and counted by kind; IP fragments are reassembled
(xenobench.capture.Datagrams) and the datagram is taken at the frame that completes it. When no
DNS frame is left, the refusal says what was found and how to ask for it (--port); when nothing
pairs, it names the clients and the answers seen.

Pairing rule (the one rule; docs/results.md repeats it):
- Frames are taken in timestamp order (file order among equal timestamps), so an RTT is never
  negative: an answer stamped before (or at) its query's instant finds nothing to pair with. The
  capture is read as a stream, so the order is restored within REORDER_WINDOW_NS (0.1 s) of
  capture time; a frame stamped earlier than that before one already paired is paired where it
  comes and counted ("late").
- The flow key of a query is its DNS id, its question and the server endpoint it was sent to
  (address and port). An answer has the flow key of the query it answers: same id, the question
  where the answer shows one (tcpdump prints an answer's question only with -vv; compared without
  regard to case), and the server endpoint it comes from (a reflected query: goes to). An answer
  pairs with a query whose client endpoint it goes back to (the mirrored 5-tuple, the conversation
  Wireshark's DNS dissector pairs in); failing that, with direct server return, with a query of
  the station it is sent to (another client address or port of the same host), where the stations
  tell sender from receiver.
- An answer pairs with the earliest still-awaited query of its flow key sent within the timeout
  before it (config dns.prober.timeout_s, default 1 s). A query is awaited from when it is sent
  until it is answered, its timeout passes, or an identical query (same key and same client
  endpoint) is sent: identical queries cannot be told apart, so a client that repeats a query has
  given up the previous one. This is what keeps byte-identical probes (the thesis sent the same
  query every 214 ms) in step when a reply is lost: without it every later reply would pair with
  the query before its own.
- A query that is never paired is lost. An RTT is therefore in (0, timeout]: an RTT of 0 cannot
  exist, and such answers are counted ("simultaneous") and named in the flags.

Timestamps are integer nanoseconds from the file to the RTT (pcapng resolutions are converted with
integer arithmetic); `rtts_us` is the same data divided by 1000.

Where this differs from Wireshark's pairing (tshark 4.0's dns.response_to and dns.time, as
observed): a second query of the same id in a conversation whose first is still unanswered, within
Wireshark's dns.retransmission_timer (default 5 s), is to Wireshark a retransmission of the first,
whatever its question: the answer is measured from the first copy (here from the last identical
one), and an answer to a second question of that id is not paired (here it is); Wireshark has no
timeout (an answer 3 s late pairs there, not here with the 1 s default); it gives an answer at its
query's instant dns.time 0 (not paired here); and it takes the reflector's returned probe for a
retransmission, not an answer, so it pairs none of the thesis captures.

Median: a microsecond capture quantises every RTT to whole microseconds, and the sample median of
such data jumps in 1 µs steps (the thesis captures give exactly 23 and 18 µs). `median_us` is
therefore the interpolated (grouped) median, which treats each value v as the bin
[v − r/2, v + r/2) of the timestamp resolution r and interpolates inside the median's bin; for
nanosecond captures it is within 1 ns of the sample median when the count is odd (an even count:
of the lower of the two middle values, where the sample median takes their mean). `median_raw_us`
is the sample median. On the thesis captures: 23.15 − 18.01 = 5.14 µs (sample medians: 23 − 18 = 5 µs; the
paper states 23.1 − 17.9 = 5.2 µs).

Reader: xenobench.capture reads the file as a stream (compressed or not, a FIFO or a growing
file; memory does not grow with the capture, only with the pairs and the queries still awaited:
scripts/bench_pcap_stream.py); the tcpdump text is read line by line here.
"""

from __future__ import annotations

import datetime
import functools
import heapq
import re
import socket
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import dns.exception
import dns.message
import numpy as np

from .capture import HOST, LINK_TYPES, LINKTYPE_ETHERNET, NS, TS_LIMIT, Capture, Datagrams, datagram
from .errors import DataError

NAMES_KEPT = 10_000               # distinct clients and answer destinations counted by name (then "others")
ZERO_MAC = "00:00:00:00:00:00"
REORDER_WINDOW_NS = 100_000_000   # frames are put in time order within 0.1 s of capture time

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


@dataclass(slots=True)
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
    compression: str = ""       # layers undone, outermost first ("gzip", "zstd", ...)
    link_types: str = ""        # of the packets read ("Ethernet", "Linux cooked v2", ...)
    skipped_kinds: dict = field(default_factory=dict)  # skipped frames by kind ("IP fragment": 3, ...)
    simultaneous: int = 0       # answers stamped at their query's instant (an RTT of 0 cannot exist)
    late: int = 0               # frames stamped more than REORDER_WINDOW_NS before one already paired
    ranges: tuple | None = None  # first and last query index, first and last answer index of the pairs
    clients: dict = field(default_factory=dict)  # client (station or address) -> [queries, answered]
    answers: int = 0            # answers seen (QR=1, and returned probes)
    dns_refused: dict = field(default_factory=dict)  # DNS messages dnspython refuses, by reason (paired by header)
    reassembled: int = 0        # IP datagrams reassembled from fragments

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
        if self.ranges:
            return self.ranges[0], self.ranges[1]
        return (min(p for p, _ in self.pairs), max(p for p, _ in self.pairs)) if self.pairs else None

    @property
    def answer_range(self) -> tuple[int, int] | None:
        if self.ranges:
            return self.ranges[2], self.ranges[3]
        return (min(a for _, a in self.pairs), max(a for _, a in self.pairs)) if self.pairs else None

    @property
    def ip_fragments(self) -> int:
        return self.skipped_kinds.get("IP fragment", 0)

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
        if self.simultaneous:
            out.append(f"{self.simultaneous} answers stamped at the same instant as their query, not paired (an "
                       f"RTT of 0 cannot exist; the capture's resolution is {self.resolution_us:g} µs)")
        if self.late:
            out.append(f"{self.late} frames stamped more than {REORDER_WINDOW_NS / 1e6:g} ms before a frame already "
                       "paired (paired in file order)")
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

    CLIENTS_SHOWN = 20

    def clients_summary(self) -> dict:
        """Queries and answered queries per client, the CLIENTS_SHOWN with most queries by name and
        the rest summed as "N others"."""
        top = sorted(self.clients.items(), key=lambda kv: -kv[1][0])
        out = {k: {"queries": q, "answered": a} for k, (q, a) in top[:self.CLIENTS_SHOWN]}
        rest = top[self.CLIENTS_SHOWN:]
        if rest:
            out[f"{len(rest)} others"] = {"queries": sum(v[0] for _, v in rest), "answered": sum(v[1] for _, v in rest)}
        return out

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
                "superseded": self.superseded, "out_of_order": self.out_of_order,
                "simultaneous_answers": self.simultaneous, "late_frames": self.late,
                "compression": self.compression, "link_types": self.link_types,
                "ip_fragments": self.ip_fragments, "ip_reassembled": self.reassembled, "skipped": self.skipped_kinds,
                "clients": self.clients_summary(),
                "answers": self.answers, "dns_refused": self.dns_refused,
                "flags": self.flags(), "refused": self.refusal()}
        return out


def grouped_median(values: np.ndarray, width: float) -> float:
    """Median of data quantised to `width`: interpolated inside the bin that holds the middle."""
    v = np.round(np.asarray(values) / width) * width
    u, counts = np.unique(v, return_counts=True)
    half = len(v) / 2
    below = np.concatenate(([0], np.cumsum(counts)[:-1]))
    i = int(np.searchsorted(np.cumsum(counts), half))
    return float(u[i] - width / 2 + width * (half - below[i]) / counts[i])


@functools.lru_cache(maxsize=4096)
def _mac(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


@functools.lru_cache(maxsize=4096)
def _addr(packed: bytes) -> str:
    """An address's text, cached: a capture's stations are few, and one string each is kept."""
    return socket.inet_ntop(socket.AF_INET if len(packed) == 4 else socket.AF_INET6, packed)


def _station(s, addr: str) -> str:
    """A frame's sender or receiver as the pairing names it: a MAC, the capturing host of a cooked
    capture, or (raw IP) the address."""
    if s is None:
        return addr
    if isinstance(s, str):
        return s
    return _mac(s) if len(s) == 6 else s.hex()


def read_pcap(path: str | Path):
    """Yield (index, ts_ns, frame bytes) of a classic pcap or pcapng, plain or compressed, read as
    a stream; DataError on malformed files. Indexes count every packet record (0-based)."""
    cap = Capture(path)
    if cap.fmt is None:
        cap.close()
        raise DataError(f"Failed to read capture {cap.path}: not a pcap or pcapng file (magic {cap.head[:4].hex()})")
    for idx, ts, _link, b in cap.frames():
        yield idx, ts, b


@functools.lru_cache(maxsize=4096)
def _dns_fields(payload: bytes) -> tuple[int, bool, str] | None:
    """(id, QR, question) of a DNS message; cached because probes are often byte-identical (the
    thesis's are), and parsing is most of the analysis time."""
    try:
        msg = dns.message.from_wire(payload, question_only=True)
    except (dns.exception.DNSException, ValueError, IndexError):
        return None
    qr = bool(msg.flags & 0x8000)
    if not msg.question and not qr:
        return None  # a query without a question asks nothing (and zeros, a generator's filler, parse as one)
    return msg.id, qr, msg.question[0].name.to_text().lower() if msg.question else ""


def _plausible_header(payload: bytes) -> bool:
    """Whether bytes dnspython refuses still start with a DNS header worth pairing by: 12 bytes,
    opcode QUERY, NOTIFY or UPDATE, the reserved Z bit clear, exactly one question (RFC 1035 4.1.1,
    RFC 9619). Load generators' filler on port 53 (TRex's 'xxxx...', zeros) is not."""
    if len(payload) < 12:
        return False
    opcode, z, qdcount = payload[2] >> 3 & 0x0F, payload[3] & 0x40, payload[4] << 8 | payload[5]
    return opcode in (0, 4, 5) and not z and qdcount == 1


@functools.lru_cache(maxsize=256)
def _dns_refusal(payload: bytes) -> str:
    """Why dnspython refuses a message, in its own words (e.g. "BadPointer: A DNS compression
    pointer points forward instead of backward")."""
    try:
        dns.message.from_wire(payload, question_only=True)
    except (dns.exception.DNSException, ValueError, IndexError) as e:
        text = str(e).rstrip(".")
        return f"{type(e).__name__}: {text}" if text and text != type(e).__name__ else type(e).__name__
    return "accepted"


class Found:
    """What a capture held besides the DNS frames that were paired, for the summary and for the
    message when nothing could be paired: skipped frames by kind, UDP and TCP frames by port."""

    def __init__(self):
        self.kinds: Counter = Counter()
        self.udp_ports: Counter = Counter()   # UDP frames not on the service port, by their lower port
        self.dns_ports: Counter = Counter()   # ... of the first DNS_SAMPLE of them, those that parse as DNS
        self.tcp_service = 0                  # TCP frames to or from the service port (DNS over TCP)
        self.other = 0                        # UDP frames not on the service port
        self.refused: Counter = Counter()     # DNS messages dnspython refuses, by reason (paired by header)

    DNS_SAMPLE = 1000

    def other_udp(self, sport: int, dport: int, payload: bytes | None):
        self.other += 1
        low = sport if sport < dport else dport  # a client's port is the ephemeral, higher one
        self.udp_ports[low] += 1
        if payload is not None and self.other <= self.DNS_SAMPLE and _dns_fields(payload):
            self.dns_ports[low] += 1

    @property
    def skipped(self) -> int:
        return sum(self.kinds.values()) + self.other

    @property
    def by_kind(self) -> dict:
        return dict(self.kinds) | ({"UDP on another port": self.other} if self.other else {})

    def describe(self, port: int) -> str:
        parts = []
        if self.tcp_service:
            parts.append(f"{self.tcp_service} TCP frames on port {port} (DNS over TCP is not paired)")
        udp = self.other
        if self.dns_ports:
            top, n = self.dns_ports.most_common(1)[0]
            parts.append(f"{udp} UDP frames on other ports, DNS on port {top} ({n} of the first "
                         f"{min(udp, self.DNS_SAMPLE)}): ask for it with --port {top}")
        elif udp:
            top, n = self.udp_ports.most_common(1)[0]
            parts.append(f"{udp} UDP frames on other ports, none of the first {min(udp, self.DNS_SAMPLE)} DNS, most "
                         f"on port {top} ({n})")
        for kind, n in sorted(self.kinds.items()):
            if kind != "TCP":
                parts.append(f"{n} {kind}")
        if self.kinds.get("TCP", 0) > self.tcp_service:
            parts.append(f"{self.kinds['TCP'] - self.tcp_service} TCP frames on other ports")
        return "; ".join(parts) if parts else "no frames"


def parse_dns_frame(idx: int, ts_ns: int, b: bytes, port: int = 53, linktype: int = LINKTYPE_ETHERNET,
                    found: Found | None = None, state: Datagrams | None = None) -> Frame | None:
    """The DNS fields of a UDP frame (IPv4 or IPv6) to or from `port`; None for anything else
    (counted in `found` by kind). state: fragments reassembled and loopback copies dropped across
    the frames of one capture (xenobench.capture.Datagrams)."""
    d = datagram(linktype, b, state)
    if isinstance(d, str):
        if found is not None:
            found.kinds[d] += 1
        return None
    proto, sport, dport, src, dst, ver, saddr, daddr, payload = d
    if port != sport and port != dport or proto != 17:
        if found is not None:
            if proto == 6:
                found.kinds["TCP"] += 1
                found.tcp_service += port in (sport, dport)
            else:
                found.other_udp(sport, dport, payload)
        return None
    fields = _dns_fields(payload)
    if fields is None:
        if not _plausible_header(payload):
            if found is not None:
                found.kinds[f"UDP frames on port {port} that are not DNS"] += 1
            return None
        # a DNS header with one question whose rest dnspython refuses: id and QR pair it (with any
        # question), and the reason is counted
        fields = (payload[0] << 8 | payload[1], bool(payload[2] & 0x80), "")
        if found is not None:
            found.refused[_dns_refusal(payload)] += 1
    sa, da = _addr(saddr), _addr(daddr)
    return Frame(idx, ts_ns, _station(src, sa), _station(dst, da), sa, da, sport, dport, *fields)


# --- tcpdump -e text ------------------------------------------------------------------------------
# `tcpdump -e -n` lines, e.g.
#   15:18:56.494867 02:00:00:00:01:00 > 02:00:00:00:05:00, ethertype IPv4 (0x0800), length 73:
#     10.0.0.1.44444 > 10.0.0.45.53: 4660+ A? example.local. (31)          (one line in the file)
# Time: HH:MM:SS.frac (default), YYYY-MM-DD HH:MM:SS.frac (-tttt) or epoch seconds (-tt); 6 or 9
# digits (--time-stamp-precision=nano). With -v the IP header's fields come in parentheses and the
# addresses on the next, indented line. IPv6 (ethertype IPv6 (0x86dd)) prints addresses with
# colons, the port after the last dot. DNS (tcpdump's print-domain.c): a query is
# "id[flags] [..] TYPE? name.", an answer "id[flags] an/ns/ar ..." with "q: TYPE? name." only at -vv.
_TEXT_HEAD = re.compile(
    r"(?:(?P<date>\d{4}-\d{2}-\d{2}) (?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2})|(?P<h2>\d{1,2}):(?P<m2>\d{2}):"
    r"(?P<s2>\d{2})|(?P<epoch>\d{9,}))\.(?P<frac>\d{6}|\d{9}) "
    r"(?P<src>[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}) > (?P<dst>[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}), (?P<rest>.*)$")
_TEXT_IP = re.compile(r"ethertype IPv[46] \(0x(?:0800|86dd)\), (?:length \d+: )?(?:\((?:[^()]|\([^()]*\))*\) )?"
                      r"(\d+\.\d+\.\d+\.\d+|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*)\.(\w+) > "
                      r"(\d+\.\d+\.\d+\.\d+|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*)\.(\w+): (.*)$")
_TEXT_ID = re.compile(r"(?:\[[^\]]*\]\s*)*(\d+)\b")  # after -v's "[udp sum ok]"
_TEXT_COUNTS = re.compile(r"\s\d+/\d+/\d+(?:\s|$)")
_TEXT_QUESTION = re.compile(r"(?:^|\s)(?:q: )?[A-Za-z][\w-]*\? (\S+)")
_PORT_NAMES = {"domain": 53}
_DAY_NS = 86400 * NS
_EPOCH_DAY = datetime.date(1970, 1, 1).toordinal()  # dated text times count from the epoch (local time)


def _is_text(head: bytes) -> bool:
    text = head.decode("utf-8", "replace")
    return any(_TEXT_HEAD.match(line) for line in text.splitlines()[:20])


class _TextReader:
    """Frames of tcpdump -e text, read line by line. Times of day without a date cross midnight
    when a time is more than 12 h before the previous one. A time that is not within a day, a
    date that is not one, or a DNS id above 16 bits refuses the file naming the line."""

    def __init__(self, cap: Capture, port: int, found: Found):
        self.cap, self.port, self.found = cap, port, found
        self.digits: set[int] = set()
        self.day, self.prev = 0, None

    def _fail(self, idx: int, reason: str):
        raise DataError(f"Failed to read tcpdump text {self.cap.path}: line {idx + 1}: {reason}")

    def _time(self, idx: int, m) -> int:
        frac = m["frac"]
        self.digits.add(len(frac))
        sub = int(frac) * (1000 if len(frac) == 6 else 1)
        if m["epoch"]:
            ts = int(m["epoch"]) * NS + sub
            if ts >= TS_LIMIT:
                self._fail(idx, f"time {m['epoch']} s is after the year 2262 (64-bit nanoseconds)")
            return ts
        h, mi, s = (int(m["h"]), int(m["m"]), int(m["s"])) if m["date"] else (int(m["h2"]), int(m["m2"]), int(m["s2"]))
        if h > 23 or mi > 59 or s > 60:  # 60: a leap second
            self._fail(idx, f"time {h:02d}:{mi:02d}:{s:02d} is not a time of day")
        tod = ((h * 60 + mi) * 60 + s) * NS + sub
        if m["date"]:
            try:
                d = datetime.date.fromisoformat(m["date"])
            except ValueError:
                self._fail(idx, f"date {m['date']!r} is not a date")
            if not 1678 <= d.year <= 2261:
                self._fail(idx, f"date {m['date']!r} is outside the years 64-bit nanoseconds hold (1678-2261)")
            return (d.toordinal() - _EPOCH_DAY) * _DAY_NS + tod
        if self.prev is not None and tod + self.day * _DAY_NS < self.prev - _DAY_NS // 2:
            self.day += 1  # past midnight: times of day carry no date
        return self.day * _DAY_NS + tod

    def frames(self):
        pending = None  # (line index, ts, match) of a record whose addresses may be on the next line
        for idx, line in self.cap.lines():
            cont = line[:1].isspace()
            if pending is not None:
                f = self._frame(*pending, line.strip() if cont else None)
                pending = None
                if f is not None:
                    yield f
            if not line.strip() or cont:  # blank, or a continuation (-v, -X) line
                continue
            m = _TEXT_HEAD.match(line)
            if m is None:
                self.found.kinds["lines that are not tcpdump -e records"] += 1
                continue
            ts = self._time(idx, m)
            self.prev = ts
            pending = (idx, ts, m)
        if pending is not None:
            f = self._frame(*pending, None)
            if f is not None:
                yield f

    def _frame(self, idx: int, ts: int, m, cont: str | None) -> Frame | None:
        ip = _TEXT_IP.search(m["rest"])
        if ip is None and cont is not None:
            ip = _TEXT_IP.search(m["rest"] + " " + cont)  # -v: addresses on the next line
        if ip is None:
            self.found.kinds["not IP"] += 1
            return None
        saddr, sp, daddr, dp, payload = ip.groups()
        sport, dport = (_PORT_NAMES.get(p, int(p) if p.isdigit() else -1) for p in (sp, dp))
        if self.port not in (sport, dport):
            if sport >= 0 and dport >= 0:
                # tcpdump's own DNS decoding marks DNS on another port: an id, then + or * or a question
                dnsish = _TEXT_ID.match(payload) and (_TEXT_COUNTS.search(payload) or _TEXT_QUESTION.search(payload))
                self.found.other_udp(sport, dport, b"" if not dnsish else None)
                if dnsish and self.found.other <= Found.DNS_SAMPLE:
                    self.found.dns_ports[min(sport, dport)] += 1
            else:
                self.found.kinds["lines with a port name"] += 1
            return None
        if payload.startswith("Flags ["):
            self.found.kinds["TCP"] += 1
            self.found.tcp_service += 1
            return None
        qid = _TEXT_ID.match(payload)
        qr = _TEXT_COUNTS.search(payload) is not None
        q = _TEXT_QUESTION.search(payload)
        if qid is None or not qr and q is None:
            self.found.kinds[f"lines on port {self.port} that are not DNS"] += 1
            return None
        if int(qid[1]) > 0xFFFF:
            self._fail(idx, f"DNS id {qid[1]} is above 65535 (16 bits)")
        return Frame(idx, ts, m["src"].lower(), m["dst"].lower(), saddr, daddr, sport, dport, int(qid[1]), qr,
                     q[1].lower() if q else "")

    @property
    def resolution_us(self) -> float:
        return 0.001 if self.digits == {9} else 1.0


def stations_tell(f: Frame) -> bool:
    """Whether a frame's link layer tells its sender from its receiver: not on a loopback (both
    MACs zero, one station both ways, or raw IP from an address to itself)."""
    return f.src_mac != f.dst_mac and f.src_mac != ZERO_MAC


def client_of(f: Frame) -> str:
    """The name of a query's client: its station where the stations tell, else its address."""
    return f.src_mac if stations_tell(f) else f.saddr


def normalize_client(client: str) -> str:
    """A --client value as the frames name it: a MAC in lower case with colons, an IP address in
    its compressed text, or a station name of a cooked capture ("this host"); ValueError otherwise."""
    import ipaddress
    c = client.strip()
    if re.fullmatch(r"[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}|[0-9a-fA-F]{12}", c):
        hexd = re.sub(r"[:-]", "", c).lower()
        return ":".join(hexd[i:i + 2] for i in range(0, 12, 2))
    if c.lower() == HOST:
        return HOST
    try:
        return str(ipaddress.ip_address(c))
    except ValueError:
        raise ValueError(f"{client!r} is neither a MAC (02:00:00:00:01:00) nor an IP address (198.18.0.16, "
                         f"2001:db8::16) nor {HOST!r}") from None


class DnsFrames:
    """The DNS frames of a capture in any of the formats (detected by content, compressed or not),
    read as a stream: iterate for the frames in file order; afterwards `found`, `resolution_us`,
    `fmt`, `compression` and `link_types` describe the capture."""

    def __init__(self, path: str | Path, port: int = 53):
        self.path, self.port, self.found = Path(path), port, Found()
        self.datagrams = Datagrams()
        self.cap = Capture(self.path)
        self._text = None
        self._per_s: set[int] = set()
        if self.cap.fmt is None:
            if not _is_text(self.cap.head):
                self.cap.close()
                after = f" after {' and '.join(self.cap.compression)}" if self.cap.compression else ""
                raise DataError(f"Failed to read capture {self.path}: not a pcap, pcapng or tcpdump -e text file "
                                f"(magic {self.cap.head[:4].hex()}{after})")
            self._text = _TextReader(self.cap, port, self.found)
        self.fmt = self.cap.fmt or "tcpdump-text"

    def __iter__(self):
        if self._text is not None:
            yield from self._text.frames()
            return
        port, found, cap, per_s, state = self.port, self.found, self.cap, self._per_s, self.datagrams
        udp_ports = found.udp_ports
        for idx, ts, link, b in cap.frames():
            # fast path for the bulk of a capture under load: an untagged Ethernet IPv4 UDP frame
            # without IP options or fragmentation, on other ports (datagram() would say the same)
            if link == 1 and b[12:14] == b"\x08\x00" and b[14] == 0x45 and b[23] == 17 and len(b) >= 42 \
                    and not (b[20] & 0x3F or b[21]) and found.other >= Found.DNS_SAMPLE:
                sport, dport = b[34] << 8 | b[35], b[36] << 8 | b[37]
                if sport != port and dport != port:
                    found.other += 1
                    udp_ports[sport if sport < dport else dport] += 1
                    continue
            f = parse_dns_frame(idx, ts, b, port, link, found, state)
            if f is not None:
                per_s.add(cap.per_s)
                yield f
        for link, n in self.cap.unsupported.items():
            found.kinds[f"packets on link type {link}"] += n
        if state.incomplete:
            found.kinds["IP fragments of datagrams never completed"] += state.incomplete
            found.kinds["IP fragment"] -= state.incomplete
            if not found.kinds["IP fragment"]:
                del found.kinds["IP fragment"]

    @property
    def resolution_us(self) -> float:
        """Of the coarsest interface that carried DNS frames (of any, if none did)."""
        if self._text is not None:
            return self._text.resolution_us
        return NS / min(self._per_s) / 1000 if self._per_s else self.cap.resolution_ns / 1000

    @property
    def compression(self) -> str:
        return "+".join(self.cap.compression)

    @property
    def link_types(self) -> str:
        return "tcpdump -e text" if self._text is not None else \
            ", ".join(LINK_TYPES[t] for t in sorted(self.cap.link_types))


def read_dns_frames(path: str | Path, port: int = 53) -> tuple[list[Frame], int, float, str]:
    """(frames in file order, skipped frames, timestamp resolution in µs, format) of a capture;
    holds every DNS frame in memory: analyze_pcap streams instead."""
    d = DnsFrames(path, port)
    frames = list(d)
    return frames, d.found.skipped, d.resolution_us, d.fmt


class _Query:
    __slots__ = ("frame", "done")

    def __init__(self, frame: Frame):
        self.frame, self.done = frame, False


def _drop_settled(queue: list[_Query], now: int, timeout_ns: int):
    """Remove the leading queries that are answered, given up, or timed out (lost)."""
    k = 0
    while k < len(queue) and (queue[k].done or now - queue[k].frame.ts_ns > timeout_ns):
        k += 1
    if k:
        del queue[:k]


class Pairer:
    """The pairing rule (module docstring), fed frames in timestamp order one at a time; memory
    holds the queries still awaited (swept when more than SWEEP_AT are kept) and the results.
    client: keep only this client's queries (a name as client_of gives it, or an address).
    keep_pairs=False keeps only the RTTs and the first and last packet of the pairs."""

    SWEEP_AT = 8192  # awaited and identical-query records kept before a sweep (a few MB)

    def __init__(self, client: str | None, timeout_ns: int, keep_pairs: bool = True):
        self.client, self.timeout_ns, self.keep_pairs = client, timeout_ns, keep_pairs
        # (id, server addr, server port) -> awaited queries, oldest first (lists: most hold one query,
        # and a deque costs 600 bytes even empty)
        self.by_flow: dict[tuple, list[_Query]] = defaultdict(list)
        self.last_identical: dict[tuple, _Query] = {}                   # full key -> latest query
        self.spacing = None
        self.pairs, self.stamps = array("q"), array("q")
        self.rtts = array("q")
        self.ranges = [None, None, None, None]  # first and last query index, first and last answer index
        self.queries = self.superseded = self.unmatched = self.simultaneous = self.answers = 0
        self.clients: dict[str, list[int]] = {}     # client -> [queries, answered]
        self.answer_dests: Counter = Counter()      # where the answers that paired with nothing went
        self.other_clients: Counter = Counter()     # queries of clients other than the one given
        self._next_sweep = self.SWEEP_AT

    def _mine(self, name: str, addr: str) -> bool:
        return self.client is None or self.client == name or self.client == addr

    def add(self, f: Frame):
        full = (f.dns_id, f.qname, f.saddr, f.sport, f.daddr, f.dport)
        prev = self.last_identical.get(full) if not f.qr else None
        if prev is not None and stations_tell(prev.frame) and f.dst_mac == prev.frame.src_mac != f.src_mac:
            # the probe itself coming back to its sender (the thesis's reflector): its answer
            self._answer(f, (f.daddr, f.dport), (f.saddr, f.sport))
        elif not f.qr:
            self._query(f, full, prev)
        else:
            self._answer(f, (f.saddr, f.sport), (f.daddr, f.dport))

    def _query(self, f: Frame, full: tuple, prev: _Query | None):
        if prev is not None and not prev.done and stations_tell(f) and prev.frame.dst_mac == f.src_mac != prev.frame.src_mac:
            # the identical frame before was this probe coming back, stamped before the probe
            # itself: an answer with no query after all
            c = self.clients.get(client_of(prev.frame))
            if c is not None:
                c[0] -= 1
                if c == [0, 0]:
                    del self.clients[client_of(prev.frame)]
                self.queries -= 1
            prev.done = True
            self.answers += 1
            self.unmatched += 1
            prev = None
        name = client_of(f)
        if not self._mine(name, f.saddr):
            if len(self.other_clients) < NAMES_KEPT or name in self.other_clients:
                self.other_clients[name] += 1
            return
        self.queries += 1
        c = self.clients.get(name)
        if c is None:
            c = self.clients.setdefault(name if len(self.clients) < NAMES_KEPT else "others", [0, 0])
        c[0] += 1
        if prev is not None:
            gap = f.ts_ns - prev.frame.ts_ns
            self.spacing = gap if self.spacing is None else min(self.spacing, gap)
            if not prev.done:
                prev.done = True  # given up by the client: an identical query replaces it
                self.superseded += 1
        q = _Query(f)
        self.last_identical[full] = q
        self.by_flow[(f.dns_id, f.daddr, f.dport)].append(q)
        if len(self.last_identical) > self._next_sweep:
            self._sweep(f.ts_ns)

    def _answer(self, f: Frame, server: tuple, client_ep: tuple):
        to = f.dst_mac if stations_tell(f) else f.daddr
        self.answers += 1
        awaiting = self.by_flow.get((f.dns_id, *server))
        if awaiting:
            _drop_settled(awaiting, f.ts_ns, self.timeout_ns)
        cands = [q for q in awaiting or () if not q.done and (not f.qname or not q.frame.qname or q.frame.qname == f.qname)
                 and ((q.frame.saddr, q.frame.sport) == client_ep
                      or stations_tell(q.frame) and q.frame.src_mac == f.dst_mac)]
        if cands and all(q.frame.ts_ns >= f.ts_ns for q in cands):
            self.simultaneous += 1  # stamped with its query: an RTT of 0 cannot exist
            self.unmatched += 1
            return
        cands = [q for q in cands if q.frame.ts_ns < f.ts_ns]
        if not cands:
            if self._mine(to, f.daddr):
                self.unmatched += 1
                if len(self.answer_dests) < NAMES_KEPT or to in self.answer_dests:
                    self.answer_dests[to] += 1
            return
        # the conversation's own query first (the mirrored 5-tuple), then direct server return
        mirrored = [q for q in cands if (q.frame.saddr, q.frame.sport) == client_ep]
        q = (mirrored or cands)[0]
        q.done = True
        qf = q.frame
        self.rtts.append(f.ts_ns - qf.ts_ns)
        c = self.clients.get(client_of(qf)) or self.clients.get("others")
        c[1] += 1
        if self.keep_pairs:
            self.pairs.extend((qf.index, f.index))
            self.stamps.extend((qf.dns_id, qf.sport, qf.ts_ns, f.ts_ns))
        r = self.ranges
        if r[0] is None:
            r[:] = [qf.index, qf.index, f.index, f.index]
        else:
            r[:] = [min(r[0], qf.index), max(r[1], qf.index), min(r[2], f.index), max(r[3], f.index)]

    def _sweep(self, now: int):
        """Forget queries that can no longer be answered (answered, given up or timed out) and
        identical-query records older than twice the timeout: a spacing that large is never
        flagged (RTTs are at most the timeout)."""
        horizon = now - 2 * self.timeout_ns
        self.last_identical = {k: q for k, q in self.last_identical.items() if q.frame.ts_ns >= horizon}
        for key in list(self.by_flow):
            dq = self.by_flow[key]
            _drop_settled(dq, now, self.timeout_ns)
            if not dq:
                del self.by_flow[key]
        self._next_sweep = max(self.SWEEP_AT, 2 * len(self.last_identical))

    def result(self) -> dict:
        it = iter(self.pairs)
        st = iter(self.stamps)
        return {"pairs": list(zip(it, it)), "pair_stamps": list(zip(st, st, st, st)),
                "rtts_ns": np.frombuffer(self.rtts, dtype=np.int64).copy() if self.rtts else np.zeros(0, np.int64),
                "queries": self.queries, "lost": self.queries - len(self.rtts), "superseded": self.superseded,
                "unmatched": self.unmatched, "simultaneous": self.simultaneous,
                "min_identical_spacing_ns": self.spacing,
                "ranges": tuple(self.ranges) if self.ranges[0] is not None else None,
                "clients": dict(self.clients), "answers": self.answers, "answer_dests": self.answer_dests,
                "other_clients": self.other_clients}

    def client_name(self) -> str:
        """The client given, the one client seen, or the clients seen (most queries first)."""
        if self.client is not None:
            return self.client
        if len(self.clients) == 1:
            return next(iter(self.clients))
        top = sorted(self.clients.items(), key=lambda kv: -kv[1][0])
        more = f", {len(top) - 3} more" if len(top) > 3 else ""
        return f"{len(top)} clients: " + ", ".join(k for k, _ in top[:3]) + more


def pair(frames: list[Frame], client: str | None, timeout_ns: int) -> dict:
    """The pairing rule (module docstring) on DNS frames in file order. Returns pairs (query index,
    answer index), pair_stamps, rtts_ns, queries, lost, superseded, unmatched, simultaneous,
    out_of_order, min_identical_spacing_ns."""
    p = Pairer(client, timeout_ns)
    for f in sorted(frames, key=lambda f: f.ts_ns):  # stable: file order among equal stamps
        p.add(f)
    return p.result() | {"out_of_order": sum(1 for a, b in zip(frames, frames[1:]) if b.ts_ns < a.ts_ns)}


def _in_time_order(frames, window_ns: int, counts: dict):
    """Frames re-ordered by timestamp (file order among equal stamps) within window_ns: a frame is
    released once one stamped more than window_ns after it has been read. A frame stamped before
    one already released is passed on at once and counted ("late")."""
    heap: list = []
    newest = released = None
    prev = None
    for seq, f in enumerate(frames):
        if prev is not None and f.ts_ns < prev:
            counts["out_of_order"] += 1
        prev = f.ts_ns
        if released is not None and f.ts_ns < released:
            counts["late"] += 1
            yield f
            continue
        heapq.heappush(heap, (f.ts_ns, seq, f))
        newest = f.ts_ns if newest is None else max(newest, f.ts_ns)
        while heap and heap[0][0] < newest - window_ns:
            released = heap[0][0]
            yield heapq.heappop(heap)[2]
    while heap:
        yield heapq.heappop(heap)[2]


def analyze_pcap(path: str | Path, client: str | None = None, port: int = 53, *,
                 timeout_s: float | None = None, keep_pairs: bool = True, client_mac: str | None = None) -> RttResult:
    """Pair queries with answers in a capture (pcap, pcapng or tcpdump -e text, plain or
    compressed) read as a stream, and return the RTTs. client: keep only this client's queries (a
    MAC, an IP address or "this host"; default: every client's); client_mac is the same, by its
    older name. timeout_s: how long a query waits for its answer (default: the prober's,
    dns.prober.timeout_s). keep_pairs=False: no per-pair packet indexes and stamps (pairs,
    pair_stamps), for captures with millions of probes."""
    timeout_s = default_timeout_s() if timeout_s is None else float(timeout_s)
    if not timeout_s > 0 or timeout_s == float("inf"):
        raise DataError(f"Failed to analyze capture {path}: timeout {timeout_s} s, expected a finite "
                        "number > 0")
    if not 1 <= port <= 65535:
        raise DataError(f"Failed to analyze capture {path}: port {port} is not a port (1-65535)")
    given = client if client is not None else client_mac
    if given is not None:
        try:
            given = normalize_client(given)
        except ValueError as e:
            raise DataError(f"Failed to analyze capture {path}: client {e}") from None
    timeout_ns = round(timeout_s * NS)
    dnsf = DnsFrames(path, port)
    pairer = Pairer(given, timeout_ns, keep_pairs)
    counts = {"out_of_order": 0, "late": 0, "dns_frames": 0}

    def counted(it):
        for f in it:
            counts["dns_frames"] += 1
            yield f

    for f in _in_time_order(counted(dnsf), REORDER_WINDOW_NS, counts):
        pairer.add(f)
    if not counts["dns_frames"]:
        raise DataError(f"Failed to analyze capture {path}: no DNS frames on UDP port {port}; found: "
                        f"{dnsf.found.describe(port)}")
    p = pairer.result()
    who = pairer.client_name() if pairer.clients or given else "any client"
    if not len(p["rtts_ns"]):
        raise DataError(f"Failed to analyze capture {path}: no probe from {who} was answered "
                        f"({_held(counts['dns_frames'], p | {'timeout_s': timeout_s}, dnsf, given)})")
    return RttResult(str(path), who, p["rtts_ns"] / 1000.0, p["lost"], p["pairs"], dnsf.found.skipped,
                     dnsf.resolution_us, counts["dns_frames"], rtts_ns=p["rtts_ns"], queries=p["queries"],
                     unmatched=p["unmatched"], superseded=p["superseded"], out_of_order=counts["out_of_order"],
                     timeout_ns=timeout_ns, fmt=dnsf.fmt, min_identical_spacing_ns=p["min_identical_spacing_ns"],
                     pair_stamps=p["pair_stamps"], compression=dnsf.compression, link_types=dnsf.link_types,
                     skipped_kinds=dnsf.found.by_kind, simultaneous=p["simultaneous"], late=counts["late"],
                     ranges=p["ranges"], clients=p["clients"], answers=p["answers"],
                     dns_refused=dict(dnsf.found.refused), reassembled=dnsf.datagrams.reassembled)


def _n(k: int, one: str, many: str | None = None) -> str:
    return f"{k} {one if k == 1 else many or one + 's'}"


def _held(dns_frames: int, p: dict, dnsf: DnsFrames, given: str | None) -> str:
    """What a capture that paired nothing holds: its DNS frames, the clients and the answers seen."""
    parts = [f"{dns_frames} DNS frames: {_n(p['queries'], 'query', 'queries')}{f' from {given}' if given else ''}, "
             f"{_n(p['answers'], 'answer')}"]
    if p["simultaneous"]:
        parts.append(f"{p['simultaneous']} answers carry their query's timestamp (resolution {dnsf.resolution_us:g} µs)")
    top = sorted([(k, q) for k, (q, _) in p["clients"].items()] + list(p["other_clients"].items()),
                 key=lambda kv: -kv[1])
    if top:
        parts.append("clients seen: " + ", ".join(f"{k} ({_n(q, 'query', 'queries')})" for k, q in top[:3]) +
                     (f", {len(top) - 3} more" if len(top) > 3 else ""))
    dests = p["answer_dests"].most_common()
    if dests:
        parts.append(f"answers that paired with no query awaited within the {p['timeout_s']:g} s timeout, to: " +
                     ", ".join(f"{k} ({n})" for k, n in dests[:3]) +
                     (f", {len(dests) - 3} more" if len(dests) > 3 else ""))
    if given is None and not p["queries"]:
        parts.append("the capture starts after the queries, or holds only answers")
    elif given is not None and not p["queries"] and top:
        parts.append("name one of the clients seen with --client (a MAC or an address)")
    if dnsf.found.refused:
        parts.append("DNS messages dnspython refuses: " + ", ".join(f"{n} {r}" for r, n in dnsf.found.refused.items()))
    return "; ".join(parts)
