"""Connectivity probe for `xenobench testbed check`.

send: one raw Ethernet/IPv4/UDP frame with an explicit destination MAC (so it can address a
      backend directly while carrying the VIP as destination IP), via an AF_PACKET socket.
send --ipip-to REAL: the same datagram inside an outer IPv4 header to REAL (IPIP, RFC 2003),
      as an encapsulating LB (Katran) sends it, addressed to --dst-mac, the L3 gateway's.
recv: wait for a UDP datagram to BIND:PORT carrying the expected payload on IFACE; prints `listening
      on IFACE` once its socket is bound, then `received ...`; one still inside IPIP (the interface
      does not decapsulate) is named so and exits 4. It reads IPv4 packets off the interface with an
      AF_PACKET socket (packet(7): a packet socket gets every frame of its protocol as the driver
      hands it up, before IP routing), not with a UDP socket bound to the address: a datagram to the
      VIP reaches a UDP socket only if the VIP is configured on the host (ip(7): bind() of a
      non-local address is EADDRNOTAVAIL, and IP_FREEBIND/IP_TRANSPARENT only allow the bind, the
      kernel still does not deliver locally a packet for an address it does not own), and a backend
      behind an XDP LB needs no VIP (the XDP responder answers in the driver).
"""

import argparse
import ipaddress
import socket
import struct
import sys
import time

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xenobench.agents.udpcheck")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--iface", required=True)
    s.add_argument("--src-mac", required=True)
    s.add_argument("--dst-mac", required=True)
    s.add_argument("--src-ip", required=True)
    s.add_argument("--dst-ip", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--sport", type=int, default=40000, help="the UDP source port")
    s.add_argument("--payload", required=True)
    s.add_argument("--count", type=int, default=1, help="send the frame this many times")
    s.add_argument("--ipip-to", help="encapsulate in IPIP to this outer destination (a real's address)")
    s.add_argument("--outer-src", default="172.16.0.1",
                   help="outer source address with --ipip-to (Katran's IPIP_V4_PREFIX 172.16.0.0/16)")
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True, help="destination address to match (need not be configured here)")
    r.add_argument("--iface", required=True, help="interface to read from")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--expect", required=True)
    r.add_argument("--timeout", type=float, default=5)
    a = ap.parse_args(argv)
    if a.cmd == "send":
        inner = IP(src=a.src_ip, dst=a.dst_ip) / UDP(sport=a.sport, dport=a.port) / a.payload.encode()
        if a.ipip_to:  # RFC 2003: protocol 4, the inner packet unchanged
            inner = IP(src=a.outer_src, dst=a.ipip_to, proto=4) / inner
        frame = bytes(Ether(src=a.src_mac, dst=a.dst_mac) / inner)
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sk:
            sk.bind((a.iface, 0))
            for _ in range(a.count):
                sk.send(frame)
        print(f"sent {a.count} x {len(frame)} bytes")
        return 0
    want = ipaddress.IPv4Address(a.bind).packed
    eth_p_ip = 0x0800
    with socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(eth_p_ip)) as sk:
        sk.bind((a.iface, eth_p_ip))
        print(f"listening on {a.iface}", flush=True)  # the sender waits for this line
        deadline = time.monotonic() + a.timeout
        while (left := deadline - time.monotonic()) > 0:
            sk.settimeout(left)
            try:
                pkt = sk.recv(65535)
            except socket.timeout:
                break
            got = _udp_to(pkt, want, a.port)
            if got is not None and got[1].decode(errors="replace") == a.expect:
                print(f"received {len(got[1])} bytes from {got[0]}", flush=True)
                return 0
            if len(pkt) >= 20 and pkt[0] >> 4 == 4 and pkt[9] == 4:  # IPIP: look inside
                ihl = (pkt[0] & 0x0F) * 4
                got = _udp_to(pkt[ihl:], want, a.port)
                if got is not None and got[1].decode(errors="replace") == a.expect:
                    print(f"still encapsulated: IPIP from {socket.inet_ntoa(pkt[12:16])} to "
                          f"{socket.inet_ntoa(pkt[16:20])} arrived, not decapsulated on {a.iface}", flush=True)
                    return 4
    print("timeout: nothing received", flush=True)
    return 1


def _udp_to(pkt: bytes, dst: bytes, port: int) -> tuple[str, bytes] | None:
    """(source "ip:port", payload) of an IPv4/UDP packet to dst:port (unfragmented), else None."""
    if len(pkt) < 28 or pkt[0] >> 4 != 4 or pkt[9] != 17 or pkt[16:20] != dst:
        return None
    ihl = (pkt[0] & 0x0F) * 4
    sport, dport, length = struct.unpack("!HHH", pkt[ihl:ihl + 6])
    if dport != port:
        return None
    return f"{socket.inet_ntoa(pkt[12:16])}:{sport}", pkt[ihl + 8:ihl + length]


if __name__ == "__main__":
    sys.exit(main())
