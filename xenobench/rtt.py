"""The RTT prober: DNS queries from the client at a set rate, kernel timestamps on send and
receive, one raw record per query; and probe(), which runs it on the testbed's client node with
a tcpdump capture beside it, so every RTT has a second, independent measurement (pcap_rtt).

Timestamps (the prober process, `python -m xenobench.rtt run ...`): SO_TIMESTAMPING with
software TX and RX timestamps and OPT_ID, so every transmit timestamp comes back on the error
queue tagged with the send's sequence number. TX is stamped in the driver (skb_tx_timestamp,
veth and mlx5 do), RX when the frame enters the stack. Hardware timestamps are requested too and
used when both sides of a query have one (the NIC must have timestamping enabled, --enable-hw
does that with SIOCSHWTSTAMP). Each record says which it used: "hardware", "kernel", or "user"
(a side without a kernel timestamp falls back to CLOCK_REALTIME read around sendto/recvmsg).
The user-space clock is recorded for every query as well, so the prober's own overhead is
user RTT − kernel RTT.

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

SO_TIMESTAMPING = 37  # SO_TIMESTAMPING_OLD; the control message has the same number
SCM_TIMESTAMPING = SO_TIMESTAMPING
TS_TX_HARDWARE, TS_TX_SOFTWARE, TS_RX_HARDWARE, TS_RX_SOFTWARE = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TS_SOFTWARE, TS_RAW_HARDWARE, TS_OPT_ID, TS_OPT_TSONLY = 1 << 4, 1 << 6, 1 << 7, 1 << 11
IP_RECVERR = 11
SO_EE_ORIGIN_TIMESTAMPING = 4
SIOCSHWTSTAMP = 0x89B0
HWTSTAMP_TX_ON, HWTSTAMP_FILTER_ALL = 1, 1
STATUSES = ("ok", "timeout", "late", "bad_answer")


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
                 rate: float, timeout: float, iface: str | None = None, enable_hw: bool = False):
        import dns.message
        import dns.name
        self.src, self.dst, self.port, self.count, self.rate, self.timeout = src, dst, port, count, rate, timeout
        self.qname = dns.name.from_text(qname)
        self.expect = expect or None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((src, 0))
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
                                 "user_rtt_ns": None, "rcode": None, "_tx": (0, 0), "_rx": (0, 0)})
        self.by_id: dict[int, int] = {}
        self.mismatched = 0
        self.send_errors = 0

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

    def _drain_replies(self, now_user) -> None:
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
            t_user = time.clock_gettime_ns(time.CLOCK_REALTIME)
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
            r["_rx"], r["user_recv_ns"], r["rcode"] = rx, t_user, m.rcode()
            late = t_user - r["user_send_ns"] > self.timeout * 1e9
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
        t0 = time.monotonic_ns() + 5_000_000
        sent, last_deadline = 0, 0
        while True:
            now = time.monotonic_ns()
            if sent < self.count and now >= t0 + sent * period_ns:
                r = self.records[sent]
                self.by_id[r["id"]] = sent
                r["user_send_ns"] = time.clock_gettime_ns(time.CLOCK_REALTIME)
                try:
                    self.sock.sendto(self.wires[sent], (self.dst, self.port))
                except OSError as e:
                    self.send_errors += 1
                    r["status"] = f"send_error: {e.strerror}"
                sent += 1
                last_deadline = time.monotonic_ns() + int(self.timeout * 1e9)
                continue
            if sent >= self.count and (not self.by_id or now >= last_deadline):
                break
            wait_ns = (t0 + sent * period_ns - now) if sent < self.count else (last_deadline - now)
            try:
                select.select([self.sock], [], [], max(0, wait_ns) / 1e9)
            except InterruptedError:
                pass
            self._drain_errqueue()
            self._drain_replies(now)
        time.sleep(0.01)
        self._drain_errqueue()
        self.sock.close()
        return self._finish()

    def _finish(self) -> list[dict]:
        out = []
        for r in self.records:
            (tx_sw, tx_hw), (rx_sw, rx_hw) = r.pop("_tx"), r.pop("_rx")
            if r["user_recv_ns"] is not None:
                r["user_rtt_ns"] = r["user_recv_ns"] - r["user_send_ns"]
                if tx_hw and rx_hw:
                    r["send_ns"], r["recv_ns"], r["ts"] = tx_hw, rx_hw, "hardware"
                elif tx_sw and rx_sw:
                    r["send_ns"], r["recv_ns"], r["ts"] = tx_sw, rx_sw, "kernel"
                else:
                    r["send_ns"] = tx_sw or r["user_send_ns"]
                    r["recv_ns"] = rx_sw or r["user_recv_ns"]
                    r["ts"] = "user"
                r["rtt_ns"] = r["recv_ns"] - r["send_ns"]
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


def write_records(records: list[dict], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    tmp.replace(path)


def read_records(path: str | os.PathLike) -> list[dict]:
    from .errors import DataError
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


def compare_with_pcap(records: list[dict], pcap: str | os.PathLike, *, client_mac: str, sport: int,
                     port: int = 53) -> dict:
    """Per-query agreement of the prober's records with a capture of the same run: the capture's
    probe and answer of each query (by DNS id and the prober's source port) against the record's
    send/receive timestamps. Offsets are record − capture, µs (both CLOCK_REALTIME)."""
    from .pcap_rtt import parse_dns_frame, read_pcap
    sent, answered = {}, {}
    for idx, ts, b in read_pcap(pcap):
        f = parse_dns_frame(idx, ts, b, port)
        if f is None:
            continue
        if f.src_mac == client_mac and f.sport == sport:
            sent.setdefault(f.dns_id, ts)
        elif f.dst_mac == client_mac and f.dport == sport:
            answered.setdefault(f.dns_id, ts)
    tx, rx, diff = [], [], []
    for r in records:
        if r["status"] != "ok" or r["id"] not in sent or r["id"] not in answered:
            continue
        t_tx, t_rx = sent[r["id"]], answered[r["id"]]
        if r["ts"] != "hardware":  # a NIC clock is not the capture's clock: only RTTs compare
            tx.append((r["send_ns"] - t_tx) / 1000)
            rx.append((r["recv_ns"] - t_rx) / 1000)
        diff.append((r["rtt_ns"] - (t_rx - t_tx)) / 1000)
    if not diff:
        return {"matched": 0}
    d = np.array(diff)
    med = (lambda v: round(float(np.median(v)), 3) if v else None)
    return {"matched": len(diff), "rtt_diff_median_us": round(float(np.median(d)), 3),
            "rtt_diff_p99_abs_us": round(float(np.percentile(np.abs(d), 99)), 3),
            "rtt_diff_max_abs_us": round(float(np.abs(d).max()), 3),
            "tx_offset_median_us": med(tx), "rx_offset_median_us": med(rx)}


# --- the harness face: probe() on the testbed -----------------------------------------------------
def choose_source(cfg, backend_name: str) -> str:
    """A client address whose class the backends file maps to the DNS backend."""
    from .backends import load_backends
    from .errors import ConfigError
    ci = cfg.role("client").iface()
    addrs = [str(a.ip) for a in (ci.ip, *ci.extra_ips) if a is not None]
    if cfg.service.backends is None:
        return addrs[0]
    bs = load_backends(cfg.service.backends)
    for a in addrs:
        if bs.backend_for_source(a).name == backend_name:
            return a
    classes = bs.classes_of(backend_name)
    raise ConfigError(f"Failed to choose a probe source address: none of {', '.join(addrs)} "
                      f"(nodes.{cfg.role('client').name}.interfaces[0].ip/extra_ips in {cfg.path}) falls in "
                      f"{backend_name}'s classes {classes} of {cfg.service.backends}; add an extra_ips entry "
                      f"whose last {bs.class_bits} bits are one of them")


def probe(testbed, *, count: int, rate_qps: float, out: Path, via: str = "lb", capture: bool = True,
          expect: str | None = "config", enable_hw: bool | None = None) -> dict:
    """Send `count` queries at `rate_qps` from the client node to the VIP, via the LB (dst MAC =
    cfg.lb_mac) or directly to the DNS backend (via="direct"); raw records to `out` (JSONL), a
    pcap beside it (capture=True) analysed with pcap_rtt. expect: the A record a correct answer
    holds ("config": the config's qname record; None: any reply counts, e.g. a reflector).
    enable_hw: turn on the NIC's hardware timestamping first (None: dns.prober.hardware_timestamps)."""
    from .dns import settings
    from .errors import ConfigError, DataError, NodeError
    from .nodes import SshNode
    from .pcap_rtt import analyze_pcap

    if count < 1 or rate_qps <= 0:
        raise ConfigError(f"Failed to probe: count must be >= 1 and rate > 0 (got count={count}, rate={rate_qps})")
    cfg, s = testbed.cfg, settings(testbed.cfg)
    if via == "lb":
        mac = cfg.lb_mac
    elif via == "direct":
        mac = cfg.role("dns_backend").iface().mac
    else:
        raise ConfigError(f"Failed to probe: via must be 'lb' or 'direct', got {via!r}")
    from .dns import KINDS, TAGS
    dnode = testbed.node(cfg.role("dns_backend").name)
    running = next((k for k in KINDS if dnode.running(TAGS[k])), None)
    if expect == "config":  # a reflector's answer holds no record
        expect = None if running == "xdp" and s.xdp_mode == "reflect" else s.answer
    if enable_hw is None:
        enable_hw = s.hardware_timestamps
    out = Path(out)
    if out.suffix == ".pcap":
        raise ConfigError(f"Failed to probe: out {out} ends in .pcap, the name the capture beside it takes; "
                          "use .jsonl for the raw records")
    cn = cfg.role("client")
    ci = cn.iface()
    node = testbed.node(cn.name)
    src = choose_source(cfg, cfg.role("dns_backend").name)
    remote = isinstance(node, SshNode)
    rdir = f"{node.remote_dir}/rtt" if remote else str(out.parent)
    r_out = f"{rdir}/{out.name}" if remote else str(out)
    pcap_local = out.with_suffix(".pcap")
    r_pcap = f"{rdir}/{pcap_local.name}" if remote else str(pcap_local)
    node.run(["mkdir", "-p", rdir])
    out.parent.mkdir(parents=True, exist_ok=True)
    node.run(["ip", "neigh", "replace", s.vip, "lladdr", mac, "dev", ci.name, "nud", "permanent"])
    tag = "rtt-tcpdump"
    try:
        if capture:
            node.run(["rm", "-f", r_pcap])
            # not --immediate-mode: waking tcpdump for every frame put ~5-10 µs into the very TX
            # path being measured (and into the prober-vs-pcap difference) on the namespace
            # testbed; the packet ring hands over a block at the latest 1 s after its last frame
            log = f"{node.remote_dir}/logs/{cn.name}.{tag}.log" if remote else node._default_log(tag)
            offset = len(node.read_text(log))
            h = node.start(tag, ["tcpdump", "-i", ci.name, "-w", r_pcap, "-U", "-n", "-Z", "root",
                                 "--time-stamp-precision=nano", "-s", "512",
                                 f"udp and host {s.vip} and port {s.port}"], log=log)
            deadline = time.monotonic() + 10
            while "listening on" not in node.read_text(h.log)[offset:]:
                if not node.running(tag) or time.monotonic() > deadline:
                    node.stop(tag)
                    raise NodeError(f"Failed to start tcpdump on {cn.name}:{ci.name}: "
                                    f"{node.read_text(h.log)[offset:].strip() or 'not listening within 10 s'}")
                time.sleep(0.05)
        argv = node.python_argv("xenobench.rtt", "run", "--iface", ci.name, "--src", src, "--dst", s.vip,
                                "--port", str(s.port), "--qname", s.qname, "--expect", expect or "",
                                "--count", str(count), "--rate", str(rate_qps), "--timeout", str(s.timeout_s),
                                "--out", r_out, *(["--enable-hw"] if enable_hw else []))
        res = node.run(argv, timeout=count / rate_qps + s.timeout_s + 60)
    finally:
        if capture:
            time.sleep(1.3)  # the ring hands tcpdump its last block within 1 s
            node.stop(tag)
        node.run(["ip", "neigh", "del", s.vip, "dev", ci.name], check=False)
    try:
        summary = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise NodeError(f"Failed to read the prober's summary on {cn.name}: {res.stdout[-300:]!r}") from None
    if remote:
        node.get(r_out, out)
    summary |= {"server": running, "via": via, "src": src, "dst_mac": mac, "raw": str(out), "pcap_file": None, "pcap": None,
                "pcap_median_diff_us": None, "tolerance_us": s.tolerance_us}
    if capture:
        if remote:
            node.get(r_pcap, pcap_local)
        summary["pcap_file"] = str(pcap_local)
        try:
            p = analyze_pcap(pcap_local, ci.mac, s.port).summary()
        except DataError as e:
            summary["pcap_error"] = str(e)
        else:
            summary["pcap"] = p
            summary["per_query"] = compare_with_pcap(read_records(out), pcap_local, client_mac=ci.mac,
                                                     sport=summary["sport"], port=s.port)
            if summary["median_us"] is not None:
                summary["pcap_median_diff_us"] = round(summary["median_us"] - p["median_us"], 3)
                summary["pcap_agrees"] = abs(summary["pcap_median_diff_us"]) <= s.tolerance_us
    return summary


# --- the prober process -------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xenobench.rtt", description="DNS RTT prober (runs on the client)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="send queries, write raw records (JSONL), print a JSON summary")
    r.add_argument("--iface", help="the client interface (for --enable-hw)")
    r.add_argument("--src", required=True, help="source address (chosen for the DNS backend's class)")
    r.add_argument("--dst", required=True, help="the service VIP")
    r.add_argument("--port", type=int, default=53)
    r.add_argument("--qname", required=True)
    r.add_argument("--expect", default="", help="the address a correct answer holds ('' : any reply)")
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--rate", type=float, required=True, help="queries per second")
    r.add_argument("--timeout", type=float, default=1.0, help="seconds before a query counts as lost")
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
                   rate=a.rate, timeout=a.timeout, iface=a.iface, enable_hw=a.enable_hw)
    except OSError as e:
        print(f"Failed to open the prober's socket on {a.src}: {e.strerror}", file=sys.stderr)
        return 3
    records = p.run()
    write_records(records, a.out)
    s = summarize(records, mismatched=p.mismatched, send_errors=p.send_errors)
    s |= {"sport": p.sport, "src": a.src, "hw_enable_error": p.hw_note}
    print(json.dumps(s), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
