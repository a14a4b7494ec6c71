"""Send raw DNS payloads over UDP and print what comes back, one JSON line per payload:
`python -m xenobench.agents.dns_ask --src A --dst VIP --port 53 HEX...` (run on the client node; the
tests use it for real and for malformed queries). Each line: {"sent": hex, "reply": hex or null}.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xenobench.agents.dns_ask")
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--timeout", type=float, default=0.5, help="seconds to wait for each reply")
    ap.add_argument("payloads", nargs="+", help="hex-encoded UDP payloads")
    a = ap.parse_args(argv)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.src, 0))
    s.settimeout(a.timeout)
    for h in a.payloads:
        try:
            payload = bytes.fromhex(h)
        except ValueError:
            print(f"Failed to parse payload {h!r}: not hex", file=sys.stderr)
            return 2
        s.sendto(payload, (a.dst, a.port))
        try:
            reply, peer = s.recvfrom(65535)
            out = {"sent": h, "reply": reply.hex(), "from": f"{peer[0]}:{peer[1]}"}
        except socket.timeout:
            out = {"sent": h, "reply": None}
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
