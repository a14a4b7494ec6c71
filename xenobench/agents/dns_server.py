"""The Python DNS server (as in the thesis): authoritative for one zone, A records only, on the
service address. Run on the DNS backend node as
`python -m xenobench.agents.dns_server --bind VIP --port 53 --zone example.com. --record probe=198.18.0.53`.

Answers (RFC 1035 rcodes), decided by respond(), which is pure and tested on wire bytes:
- fewer than 12 bytes (no header) or QR already set (an answer): dropped and counted, never
  answered, so two servers never loop;
- a header but the rest does not parse (truncated question, compression-pointer loops, a qdcount
  larger than the message, trailing garbage, non-DNS bytes): FORMERR, header only, same id;
- opcode other than QUERY: NOTIMP; qdcount != 1: FORMERR;
- a name outside the zone or class other than IN: REFUSED;
- a name in the zone without records: NXDOMAIN; with records but another type: NOERROR, no answer;
- otherwise NOERROR, AA, the A record.
Prints one JSON line when listening and one with the counts on SIGTERM/SIGINT (and every
--stats-interval seconds if > 0), then exits 0.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import select
import signal
import socket
import struct
import sys
import time
from collections import Counter

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from . import argtypes

HEADER = 12


def formerr(wire: bytes) -> bytes:
    """A FORMERR answer to an unparseable message: its id and opcode, QR set, no sections."""
    qid, flags = struct.unpack_from("!HH", wire)
    flags = 0x8000 | (flags & 0x7900) | dns.rcode.FORMERR  # QR, opcode and RD kept
    return struct.pack("!HHHHHH", qid, flags, 0, 0, 0, 0)


def respond(wire: bytes, zone: dns.name.Name, records: dict[dns.name.Name, list[str]],
            ttl: int) -> tuple[bytes | None, str]:
    """(answer bytes or None to drop, outcome label for the counters)."""
    if len(wire) < HEADER:
        return None, "dropped_short"
    if wire[2] & 0x80:
        return None, "dropped_response"
    try:
        q = dns.message.from_wire(wire)
    except (dns.exception.DNSException, ValueError, IndexError, struct.error):
        return formerr(wire), "formerr"
    if q.opcode() != dns.opcode.QUERY:
        r = dns.message.make_response(q)
        r.set_rcode(dns.rcode.NOTIMP)
        r.question = []
        return r.to_wire(), "notimp"
    if len(q.question) != 1:
        return formerr(wire), "formerr"
    qr = q.question[0]
    r = dns.message.make_response(q)
    r.flags &= ~dns.flags.RA
    if qr.rdclass != dns.rdataclass.IN or not qr.name.is_subdomain(zone):
        r.set_rcode(dns.rcode.REFUSED)
        return r.to_wire(), "refused"
    r.flags |= dns.flags.AA
    addrs = records.get(qr.name)
    if addrs is None:
        r.set_rcode(dns.rcode.NXDOMAIN)
        return r.to_wire(), "nxdomain"
    if qr.rdtype in (dns.rdatatype.A, dns.rdatatype.ANY):
        r.answer.append(dns.rrset.from_text_list(qr.name, ttl, "IN", "A", addrs))
        return r.to_wire(), "answered"
    return r.to_wire(), "nodata"


def parse_records(zone: dns.name.Name, items: list[str]) -> dict[dns.name.Name, list[str]]:
    """name=address items (relative to the zone, '@' the apex) → {absolute name: [addresses]}."""
    out: dict[dns.name.Name, list[str]] = {}
    for item in items:
        name, sep, addr = item.partition("=")
        if not sep:
            raise ValueError(f"Failed to parse record {item!r}: expected name=address")
        try:
            ipaddress.IPv4Address(addr)
        except ValueError:
            raise ValueError(f"Failed to parse record {item!r}: {addr!r} is not an IPv4 address") from None
        try:
            n = zone if name == "@" else dns.name.from_text(name, origin=zone)
        except dns.exception.DNSException as e:  # an empty or too long label, a name over 255 octets
            raise ValueError(f"Failed to parse record {item!r}: {name!r} is not a domain name ({e})") from None
        if not n.is_subdomain(zone):
            raise ValueError(f"Failed to parse record {item!r}: {n} is outside the zone {zone}")
        out.setdefault(n, []).append(addr)
    return out


def serve(a) -> int:
    zone = dns.name.from_text(a.zone)
    try:
        records = parse_records(zone, a.record)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind((a.bind, a.port))
    except OSError as e:
        print(f"Failed to bind the DNS server to {a.bind}:{a.port}: {e.strerror}", file=sys.stderr)
        return 3
    counts: Counter = Counter()
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    print(json.dumps({"event": "listening", "bind": a.bind, "port": a.port, "zone": str(zone),
                      "records": {str(k): v for k, v in records.items()}}), flush=True)
    next_stats = time.monotonic() + a.stats_interval if a.stats_interval > 0 else float("inf")
    while not stop:
        try:
            ready, _, _ = select.select([sock], [], [], 0.2)
        except InterruptedError:
            continue
        if ready:
            try:
                wire, peer = sock.recvfrom(65535)
            except OSError:
                counts["recv_errors"] += 1
                continue
            counts["received"] += 1
            try:
                out, outcome = respond(wire, zone, records, a.ttl)
            except Exception as e:  # noqa: BLE001 - a query must never stop the server
                out, outcome = None, "internal_errors"
                print(json.dumps({"event": "error", "peer": f"{peer[0]}:{peer[1]}", "error": repr(e)}),
                      flush=True)
            counts[outcome] += 1
            if out is not None:
                try:
                    sock.sendto(out, peer)
                except OSError:
                    counts["send_errors"] += 1
        if time.monotonic() >= next_stats:
            next_stats += a.stats_interval
            print(json.dumps({"time": time.time(), **counts}), flush=True)
    sock.close()
    print(json.dumps({"event": "stopped", **counts}), flush=True)
    return 0


TTL = argtypes.bounded_int(0, 2**31 - 1)  # RFC 2181 sec. 8


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xenobench.agents.dns_server", description="authoritative A-only DNS server")
    ap.add_argument("--bind", type=argtypes.ipv4, required=True, help="address to listen on (the service VIP)")
    ap.add_argument("--port", type=argtypes.port, default=53)
    ap.add_argument("--zone", type=argtypes.dns_name, required=True)
    ap.add_argument("--record", action="append", default=[], help="name=IPv4 (repeatable; '@' is the apex)")
    ap.add_argument("--ttl", type=TTL, default=300, help="seconds (RFC 2181: 0 to 2^31-1)")
    ap.add_argument("--stats-interval", type=argtypes.non_negative_float, default=0,
                    help="seconds between count lines (0: only at exit)")
    return serve(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
