"""The RTT prober, run on the client node: DNS queries at a set rate, kernel timestamps on send
and receive, one raw record per query (`python -m xenobench.agents.prober run ...`; the harness
side is xenobench.rtt.probe).

Timestamps: SO_TIMESTAMPING with
software TX and RX timestamps and OPT_ID, so every transmit timestamp comes back on the error
queue tagged with the send's sequence number. TX is stamped in the driver (skb_tx_timestamp,
veth and mlx5 do), RX when the frame enters the stack. Hardware timestamps are requested too and
used when both sides of a query have one (the NIC must have timestamping enabled, --enable-hw
does that with SIOCSHWTSTAMP). Each record says which it used: "hardware", "kernel", or "user"
(CLOCK_MONOTONIC read around sendto/recvmsg: a side without a kernel timestamp, or a query whose
send and answer straddle a step of the realtime clock). The user-space clock is recorded for every
query as well, so the prober's own overhead is user RTT − kernel RTT.

Clocks: an RTT is a difference on one clock that does not step. The kernel's software stamps are
CLOCK_REALTIME (as a capture's are), which an NTP step moves by whole seconds; CLOCK_MONOTONIC
is slewed with it but never stepped, so realtime − monotonic changes only at a step. The prober
samples that offset before every send, after every receive and at every wake-up; a change beyond
STEP_NS starts a new clock epoch. A query whose send and answer fall in one epoch takes its RTT
from its kernel stamps (their difference is the monotonic one); one whose send and answer straddle
a step takes it from its CLOCK_MONOTONIC user stamps (`clock_step` true), and the summary counts
them. Deadlines, lateness and pacing are monotonic. Hardware stamps are the NIC's clock (PHC) on
both sides and are used as they come. Every record keeps wall-clock stamps (send_ns, recv_ns,
user_send_ns, user_recv_ns: CLOCK_REALTIME, for comparison with a capture) beside its monotonic
ones (mono_send_ns, mono_recv_ns).

Matching: a reply is a query's when it comes from vip:port to the query's socket (5-tuple), has
QR set, the query's id and the same question; anything else is counted as mismatched. A reply
whose answer lacks the expected address is "bad_answer"; none within --timeout: "timeout".
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import ipaddress
import json
import os
import random
import select
import socket
import struct
import sys
import time
from pathlib import Path

import numpy as np

from . import argtypes

SO_TIMESTAMPING = 37  # SO_TIMESTAMPING_OLD; the control message has the same number
SCM_TIMESTAMPING = SO_TIMESTAMPING
TS_TX_HARDWARE, TS_TX_SOFTWARE, TS_RX_HARDWARE, TS_RX_SOFTWARE = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TS_SOFTWARE, TS_RAW_HARDWARE, TS_OPT_ID, TS_OPT_TSONLY = 1 << 4, 1 << 6, 1 << 7, 1 << 11
IP_RECVERR = 11
SO_EE_ORIGIN_TIMESTAMPING = 4
SIOCSHWTSTAMP = 0x89B0
HWTSTAMP_TX_ON, HWTSTAMP_FILTER_ALL = 1, 1
STATUSES = ("ok", "timeout", "late", "bad_answer")
#: a change of CLOCK_REALTIME − CLOCK_MONOTONIC beyond this (ns) is a step of the realtime clock
#: (a slew moves both clocks alike; the offset is read to within OFFSET_READ_NS)
STEP_NS = 20_000
OFFSET_READ_NS = 5_000


class Clocks:
    """The two system clocks the prober reads (a test passes its own, e.g. one that steps)."""

    def mono_ns(self) -> int:
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    def real_ns(self) -> int:
        return time.clock_gettime_ns(time.CLOCK_REALTIME)


def _timespecs(data: bytes) -> tuple[int, int]:
    """struct scm_timestamping (3 × struct timespec) → (software ns, raw hardware ns); 0 = none."""
    sec0, nsec0, _, _, sec2, nsec2 = struct.unpack_from("qqqqqq", data)
    return sec0 * 1_000_000_000 + nsec0, sec2 * 1_000_000_000 + nsec2


def enable_hw_timestamps(sock: socket.socket, iface: str) -> str | None:
    """SIOCSHWTSTAMP (TX on, RX all) on the interface; None if it worked, else the reason."""
    cfg = ctypes.create_string_buffer(struct.pack("iii", 0, HWTSTAMP_TX_ON, HWTSTAMP_FILTER_ALL))
    ifr = struct.pack("16sP", iface.encode(), ctypes.addressof(cfg)) + b"\0" * 16
    try:
        fcntl.ioctl(sock.fileno(), SIOCSHWTSTAMP, ifr)
    except OSError as e:
        return e.strerror
    return None


class Prober:
    def __init__(self, *, src: str, dst: str, port: int, qname: str, expect: str | None, count: int,
                 rate: float, timeout: float, iface: str | None = None, enable_hw: bool = False, sport: int = 0,
                 clocks: Clocks | None = None):
        import dns.message
        import dns.name
        self.src, self.dst, self.port, self.count, self.rate, self.timeout = src, dst, port, count, rate, timeout
        self.clocks = clocks or Clocks()
        self.offset: int | None = None   # CLOCK_REALTIME − CLOCK_MONOTONIC of the current epoch
        self.epoch = 0                   # realtime steps seen so far
        self.qname = dns.name.from_text(qname)
        self.expect = expect or None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # a fixed source port keeps every probe one flow: a load balancer that hashes the 5-tuple
        # (Katran) sends them all to one backend, the one the harness chose the port for
        self.sock.bind((src, sport))
        self.sport = self.sock.getsockname()[1]
        self.hw_note = None
        if enable_hw and iface:
            self.hw_note = enable_hw_timestamps(self.sock, iface)
        flags = (TS_TX_SOFTWARE | TS_RX_SOFTWARE | TS_SOFTWARE | TS_TX_HARDWARE | TS_RX_HARDWARE
                 | TS_RAW_HARDWARE | TS_OPT_ID | TS_OPT_TSONLY)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
        self.sock.setblocking(False)
        base = random.getrandbits(16)
        self.records = []
        self.wires = []
        for i in range(count):
            q = dns.message.make_query(self.qname, "A")
            q.id = (base + i) & 0xFFFF
            self.wires.append(q.to_wire())
            self.records.append({"i": i, "id": q.id, "send_ns": None, "recv_ns": None, "rtt_ns": None,
                                 "status": "timeout", "ts": None, "user_send_ns": None, "user_recv_ns": None,
                                 "user_rtt_ns": None, "mono_send_ns": None, "mono_recv_ns": None,
                                 "clock_step": False, "rcode": None, "_tx": (0, 0), "_rx": (0, 0),
                                 "_epochs": (None, None)})
        self.by_id: dict[int, int] = {}
        self.mismatched = 0
        self.send_errors = 0

    # --- the clocks -------------------------------------------------------------------------
    def _now(self) -> int:
        """CLOCK_MONOTONIC now, with the realtime offset sampled beside it: a change beyond
        STEP_NS starts a new epoch. The offset is realtime read before monotonic, so a wall stamp
        (monotonic + offset) never comes after the kernel's stamp of the same moment."""
        c = self.clocks
        for _ in range(3):  # a read pair held apart (preempted) is read again
            m0 = c.mono_ns()
            r = c.real_ns()
            m1 = c.mono_ns()
            if m1 - m0 <= OFFSET_READ_NS:
                break
        off = r - m1
        if self.offset is None:
            self.offset = off
        elif abs(off - self.offset) > STEP_NS:
            self.offset, self.epoch = off, self.epoch + 1
        return m1

    # --- receive paths ---------------------------------------------------------------------
    def _drain_errqueue(self) -> None:
        while True:
            try:
                _, anc, _, _ = self.sock.recvmsg(64, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            ts, key = None, None
            for level, typ, data in anc:
                if level == socket.SOL_SOCKET and typ == SCM_TIMESTAMPING and len(data) >= 48:
                    ts = _timespecs(data)
                elif level == socket.SOL_IP and typ == IP_RECVERR and len(data) >= 16:
                    _, origin, _, _, _, _, ee_data = struct.unpack_from("IBBBBII", data)
                    if origin == SO_EE_ORIGIN_TIMESTAMPING:
                        key = ee_data
            if ts is not None and key is not None and key < len(self.records):
                # software and hardware stamps of one send may come as two messages: merge them
                sw, hw = self.records[key]["_tx"]
                self.records[key]["_tx"] = (ts[0] or sw, ts[1] or hw)

    def _drain_replies(self) -> None:
        import dns.exception
        import dns.message
        while True:
            try:
                wire, anc, _, addr = self.sock.recvmsg(4096, 512, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.mismatched += 1
                continue
            t_mono = self._now()
            rx = (0, 0)
            for level, typ, data in anc:
                if level == socket.SOL_SOCKET and typ == SCM_TIMESTAMPING and len(data) >= 48:
                    rx = _timespecs(data)
            try:
                m = dns.message.from_wire(wire)
            except (dns.exception.DNSException, ValueError, IndexError, struct.error):
                self.mismatched += 1
                continue
            idx = self.by_id.get(m.id)
            if (idx is None or addr != (self.dst, self.port) or not (m.flags & 0x8000) or len(m.question) != 1
                    or m.question[0].name != self.qname):
                self.mismatched += 1
                continue
            r = self.records[idx]
            del self.by_id[m.id]
            r["_rx"], r["mono_recv_ns"], r["user_recv_ns"], r["rcode"] = rx, t_mono, t_mono + self.offset, m.rcode()
            r["_epochs"] = (r["_epochs"][0], self.epoch)
            late = t_mono - r["mono_send_ns"] > self.timeout * 1e9
            if late:
                r["status"] = "late"
            elif self.expect is not None and not self._has_answer(m):
                r["status"] = "bad_answer"
            else:
                r["status"] = "ok"

    def _has_answer(self, m) -> bool:
        for rrset in m.answer:
            if rrset.name == self.qname and rrset.rdtype == 1 and any(rd.address == self.expect for rd in rrset):
                return m.rcode() == 0
        return False

    # --- the run -------------------------------------------------------------------------------
    def run(self) -> list[dict]:
        period_ns = int(1e9 / self.rate)
        t0 = self._now() + 5_000_000
        sent, last_deadline = 0, 0
        while True:
            now = self._now()
            if sent < self.count and now >= t0 + sent * period_ns:
                r = self.records[sent]
                self.by_id[r["id"]] = sent
                r["mono_send_ns"] = self._now()
                r["user_send_ns"], r["_epochs"] = r["mono_send_ns"] + self.offset, (self.epoch, None)
                try:
                    self.sock.sendto(self.wires[sent], (self.dst, self.port))
                except OSError as e:
                    self.send_errors += 1
                    r["status"] = f"send_error: {e.strerror}"
                sent += 1
                last_deadline = self._now() + int(self.timeout * 1e9)
                continue
            if sent >= self.count and (not self.by_id or now >= last_deadline):
                break
            wait_ns = (t0 + sent * period_ns - now) if sent < self.count else (last_deadline - now)
            try:
                select.select([self.sock], [], [], max(0, wait_ns) / 1e9)
            except InterruptedError:
                pass
            self._now()  # a step while waiting is seen here, not only at the next send
            self._drain_errqueue()
            self._drain_replies()
        time.sleep(0.01)
        self._drain_errqueue()
        self.sock.close()
        return self._finish()

    def _finish(self) -> list[dict]:
        out = []
        for r in self.records:
            (tx_sw, tx_hw), (rx_sw, rx_hw) = r.pop("_tx"), r.pop("_rx")
            ep_send, ep_recv = r.pop("_epochs")
            if r["mono_recv_ns"] is not None:
                r["user_rtt_ns"] = r["mono_recv_ns"] - r["mono_send_ns"]
                r["clock_step"] = ep_send != ep_recv
                if tx_hw and rx_hw:
                    r["send_ns"], r["recv_ns"], r["ts"] = tx_hw, rx_hw, "hardware"
                    r["rtt_ns"] = rx_hw - tx_hw
                elif tx_sw and rx_sw and not r["clock_step"]:
                    # one epoch: the realtime stamps' difference is the monotonic one
                    r["send_ns"], r["recv_ns"], r["ts"] = tx_sw, rx_sw, "kernel"
                    r["rtt_ns"] = rx_sw - tx_sw
                else:
                    r["send_ns"], r["recv_ns"], r["ts"] = r["user_send_ns"], r["user_recv_ns"], "user"
                    r["rtt_ns"] = r["user_rtt_ns"]
            else:
                r["send_ns"] = tx_hw or tx_sw or r["user_send_ns"]
                r["ts"] = "hardware" if tx_hw else "kernel" if tx_sw else "user"
            out.append(r)
        return out


def summarize(records: list[dict], *, mismatched: int = 0, send_errors: int = 0) -> dict:
    """The prober's summary over its raw records (RTT statistics over status 'ok')."""
    ok = [r for r in records if r["status"] == "ok"]
    rtt = np.array([r["rtt_ns"] for r in ok], dtype=float) / 1000.0
    user = np.array([r["user_rtt_ns"] for r in ok], dtype=float) / 1000.0
    sources = [r["ts"] for r in ok]
    s = {"n": len(ok), "lost": sum(r["status"] in ("timeout", "late") for r in records),
         "mismatched": mismatched, "bad_answer": sum(r["status"] == "bad_answer" for r in records),
         "send_errors": send_errors, "sent": len(records),
         "clock_steps": sum(bool(r.get("clock_step")) for r in records),
         "timestamps": max(set(sources), key=sources.count) if sources else "user"}
    if len(ok):
        s |= {"median_us": round(float(np.median(rtt)), 3), "mean_us": round(float(rtt.mean()), 3),
              "std_us": round(float(rtt.std(ddof=1)), 3) if len(ok) > 1 else 0.0,
              "p99_us": round(float(np.percentile(rtt, 99)), 3),
              "min_us": round(float(rtt.min()), 3), "max_us": round(float(rtt.max()), 3),
              "user_median_us": round(float(np.median(user)), 3),
              "user_std_us": round(float(user.std(ddof=1)), 3) if len(ok) > 1 else 0.0,
              "overhead_median_us": round(float(np.median(user - rtt)), 3)}
    else:
        s |= {k: None for k in ("median_us", "mean_us", "std_us", "p99_us", "min_us", "max_us",
                                "user_median_us", "user_std_us", "overhead_median_us")}
    return s


def unanswered(s: dict) -> str | None:
    """For a run in which no probe got its answer (a summary of `summarize`): how many were lost
    and how, which points to the cause ('100 of 100 probes lost: 100 without an answer within the
    timeout'); None where one was answered (or none was sent)."""
    if s["n"] or not s["sent"]:
        return None
    how = [f"{v} {what}" for v, what in ((s["lost"], "without an answer within the timeout"),
                                         (s["bad_answer"], "answered without the expected address"),
                                         (s["send_errors"], "not sent (the socket refused them)")) if v]
    stray = f"; {s['mismatched']} replies matched no query" if s["mismatched"] else ""
    return f"{s['sent']} of {s['sent']} probes lost: {', '.join(how)}{stray}"


def write_records(records: list[dict], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:  # a full disk (or an interrupt) leaves no half-written probes.jsonl.tmp beside it
        with open(tmp, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_records(path: str | os.PathLike) -> list[dict]:
    from ..errors import DataError
    out = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise DataError(f"Failed to read probe records {path}: {e.strerror}") from None
    for n, line in enumerate(lines, 1):
        try:
            out.append(json.loads(line))
        except ValueError as e:
            raise DataError(f"Failed to read probe records {path}: line {n}: {e}") from None
    return out


# --- the prober process -------------------------------------------------------------------------
# a period of at least 1 ns and one that is a finite number of ns (1e9 / rate)
RATE = argtypes.checked(float, "a number", lambda v: 1e-6 <= v <= 1e9,
                        "must be a rate from 1e-6 to 1e9 queries per second")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xenobench.agents.prober", description="DNS RTT prober (runs on the client)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="send queries, write raw records (JSONL), print a JSON summary")
    r.add_argument("--iface", help="the client interface (for --enable-hw)")
    r.add_argument("--src", required=True, help="source address (chosen for the DNS backend's class)")
    r.add_argument("--sport", type=argtypes.bounded_int(0, 65535), default=0,
                   help="source port of every query (0: one the kernel picks); fixed, so that an LB hashing the "
                        "5-tuple sends every probe to the backend the harness chose it for")
    r.add_argument("--dst", required=True, help="the service VIP")
    r.add_argument("--port", type=argtypes.port, default=53)
    r.add_argument("--qname", type=argtypes.dns_name, required=True)
    r.add_argument("--expect", type=argtypes.ipv4_or_empty, default="",
                   help="the address a correct answer holds ('' : any reply)")
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--rate", type=RATE, required=True, help="queries per second")
    r.add_argument("--timeout", type=argtypes.positive_float, default=1.0, help="seconds before a query counts as lost")
    r.add_argument("--out", required=True, help="raw records, one JSON object per query")
    r.add_argument("--enable-hw", action="store_true", help="turn on NIC hardware timestamping (SIOCSHWTSTAMP)")
    a = ap.parse_args(argv)
    for what, v in (("--src", a.src), ("--dst", a.dst)):
        try:
            ipaddress.IPv4Address(v)
        except ValueError:
            print(f"Failed to parse {what}: {v!r} is not an IPv4 address", file=sys.stderr)
            return 2
    if a.count < 1 or a.rate <= 0 or a.timeout <= 0:
        print(f"Failed to start the prober: --count >= 1, --rate > 0, --timeout > 0 (got {a.count}, {a.rate}, "
              f"{a.timeout})", file=sys.stderr)
        return 2
    try:
        p = Prober(src=a.src, dst=a.dst, port=a.port, qname=a.qname, expect=a.expect, count=a.count,
                   rate=a.rate, timeout=a.timeout, iface=a.iface, enable_hw=a.enable_hw, sport=a.sport)
    except OSError as e:
        print(f"Failed to open the prober's socket on {a.src}:{a.sport}: {e.strerror}", file=sys.stderr)
        return 3
    records = p.run()
    write_records(records, a.out)
    s = summarize(records, mismatched=p.mismatched, send_errors=p.send_errors)
    s |= {"sport": p.sport, "src": a.src, "hw_enable_error": p.hw_note}
    print(json.dumps(s), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
