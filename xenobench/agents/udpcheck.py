"""Connectivity probe for `xenobench testbed check`.

send: one raw Ethernet/IPv4/UDP frame with an explicit destination MAC (so it can address a
      backend directly while carrying the VIP as destination IP), via an AF_PACKET socket.
recv: wait for a UDP datagram carrying the expected payload on BIND:PORT; prints `received ...`.
"""

import argparse
import socket
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
    s.add_argument("--payload", required=True)
    s.add_argument("--count", type=int, default=1, help="send the frame this many times")
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--expect", required=True)
    r.add_argument("--timeout", type=float, default=5)
    a = ap.parse_args(argv)
    if a.cmd == "send":
        frame = bytes(Ether(src=a.src_mac, dst=a.dst_mac) / IP(src=a.src_ip, dst=a.dst_ip)
                      / UDP(sport=40000, dport=a.port) / a.payload.encode())
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sk:
            sk.bind((a.iface, 0))
            for _ in range(a.count):
                sk.send(frame)
        print(f"sent {a.count} x {len(frame)} bytes")
        return 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sk:
        sk.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sk.bind((a.bind, a.port))
        deadline = time.monotonic() + a.timeout
        while (left := deadline - time.monotonic()) > 0:
            sk.settimeout(left)
            try:
                data, peer = sk.recvfrom(2048)
            except socket.timeout:
                break
            if data.decode(errors="replace") == a.expect:
                print(f"received {len(data)} bytes from {peer[0]}:{peer[1]}", flush=True)
                return 0
    print("timeout: nothing received", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
