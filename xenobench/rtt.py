"""RTT measurement on the testbed: probe() runs the prober (xenobench.agents.prober) on the client
node with a tcpdump capture beside it, so every RTT has a second, independent measurement
(xenobench.pcap_rtt), and compares the two per query.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from . import pcap_rtt
from .actors import Watch, tagged
from .agents.prober import read_records
from .backends import load_backends
from . import dns as dns_service
from .errors import ConfigError, DataError, NodeError
from .lb import NONE, get_lb, kinds
from .lb.base import Flow


def compare_with_pcap(records: list[dict], capture: str | Path | pcap_rtt.RttResult, *, client_mac: str,
                     sport: int, port: int = 53) -> dict:
    """Per-query agreement of the prober's records with a capture of the same run: the capture's
    probe and answer of each query, paired by the one pairing rule (xenobench.pcap_rtt) and found
    by DNS id and the prober's source port, against the record's send/receive timestamps. Offsets
    are record − capture, µs (both CLOCK_REALTIME)."""
    res = capture if isinstance(capture, pcap_rtt.RttResult) else pcap_rtt.analyze_pcap(capture, client_mac, port)
    sent, answered = {}, {}
    for dns_id, client_port, q_ns, a_ns in res.pair_stamps:
        if client_port == sport and dns_id not in sent:
            sent[dns_id], answered[dns_id] = q_ns, a_ns
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

    def med(v):
        return round(float(np.median(v)), 3) if v else None

    return {"matched": len(diff), "rtt_diff_median_us": round(float(np.median(d)), 3),
            "rtt_diff_p99_abs_us": round(float(np.percentile(np.abs(d), 99)), 3),
            "rtt_diff_max_abs_us": round(float(np.abs(d).max()), 3),
            "tx_offset_median_us": med(tx), "rx_offset_median_us": med(rx)}


# --- the harness face: probe() on the testbed -----------------------------------------------------
def choose_source(cfg, backend_name: str) -> str:
    """A client address whose class the backends file maps to the DNS backend."""
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


PROBER_TAG = "rtt-prober"
WATCH_S = 0.2  # how often the actors are checked while the prober runs


def _summary(text: str) -> dict | None:
    """The prober's summary: the last line of its output, a JSON object."""
    try:
        d = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return d if isinstance(d, dict) else None


def _run_prober(node, argv: list[str], timeout_s: float, watch: Watch) -> dict:
    """Run the prober on `node` to its end and return its summary, watched as the trial's actor
    "prober" (xenobench.actors) beside the others; when one is gone the prober is stopped at once
    (its queries would measure nothing) and NodeError names what is gone."""
    log = node.log_path(PROBER_TAG)
    offset = len(node.read_text(log))
    node.start(PROBER_TAG, argv, log=log)
    watch.add("prober", "prober", tagged(node, PROBER_TAG),
              finished=lambda: _summary(node.read_text(log)[offset:]) is not None)
    deadline = time.monotonic() + timeout_s
    try:
        while node.running(PROBER_TAG) and not watch.check() and time.monotonic() < deadline:
            time.sleep(WATCH_S)
    finally:
        watch.release("prober")
        node.stop(PROBER_TAG)
    text = node.read_text(log)[offset:]
    gone = watch.gone()
    if gone:
        last = text.strip().splitlines()[-1:]
        raise NodeError(f"Failed to probe from {node.name}: stopped early: {'; '.join(gone)}"
                        + (f" (the prober's last output: {last[0][:200]})" if last else ""))
    summary = _summary(text)
    if summary is None:
        late = f"no end within {timeout_s:g} s; " if time.monotonic() >= deadline else ""
        raise NodeError(f"Failed to read the prober's summary on {node.name}: {late}output {text[-300:]!r}")
    return summary


#: the longest the capture is given to hand over its last frames after the prober ends: the packet
#: ring hands tcpdump (not in immediate mode) a block at the latest 1 s after the block's first frame
CAPTURE_FLUSH_S = 1.3


def _wait_captured(node, pcap: str, frames: int, limit_s: float) -> None:
    """Wait until the capture `pcap` on `node` holds `frames` complete records (tcpdump reads the
    file it is still writing), at most limit_s: the ring's last block arrives any time within its
    timeout, and stopping tcpdump before it would lose the last frames. A capture that misses
    frames (the kernel dropped them) waits the whole limit; the analysis then finds them missing."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        r = node.run(["tcpdump", "-r", pcap, "-n", "-q"], check=False)
        if r.stdout.count("\n") >= frames:
            return
        time.sleep(0.05)


#: source ports probe_flow tries from dns.prober.source_port up (a hash LB sends a given port to a
#: given backend with p ~ its share, so 4096 ports leave a miss only to a backend of no weight)
MAX_PORT_TRIES = 4096


def probe_flow(cfg, backend_name: str, lbs=()) -> dict:
    """The probes' one flow: a client address and a source port (from dns.prober.source_port up)
    that every LB of `lbs` (drivers) sends to backend_name, each by its own rule
    (LoadBalancer.backend_of: a class, a hash, a ring), so that one flow reaches the same backend
    through every LB and the paired comparison sends the same frames through each. Addresses in the
    client's order, the first port that fits all. {"src", "sport", "through": the kinds asked}."""
    s = dns_service.settings(cfg)
    if cfg.service.backends is None or not lbs:
        return {"src": choose_source(cfg, backend_name), "sport": s.source_port, "through": []}
    ci = cfg.role("client").iface()
    addrs = [str(a.ip) for a in (ci.ip, *ci.extra_ips) if a is not None]
    sets = []
    for lb in lbs:
        if lb.no_route:
            raise ConfigError(f"Failed to choose the probes' flow: LB {lb.kind!r} cannot say which backend a flow "
                              f"reaches ({lb.no_route})")
        sets.append((lb, load_backends(lb.backends_file(None), lb.weights)))
    last = min(65535, s.source_port + MAX_PORT_TRIES - 1)
    hits = {lb.kind: 0 for lb in lbs}
    for sport in range(s.source_port, last + 1):
        for a in addrs:
            flow = Flow(a, sport, s.vip, s.port)
            ok = [lb.backend_of(flow, bs) == backend_name for lb, bs in sets]
            for (lb, _), hit in zip(sets, ok):
                hits[lb.kind] += hit
            if all(ok):
                return {"src": a, "sport": sport, "through": [lb.kind for lb in lbs]}
    never = [k for k, n in hits.items() if not n]
    why = (f"{', '.join(never)} sends none of them to {backend_name}" if never else
           f"each reaches it with some, never all at once ({', '.join(f'{k}: {n}' for k, n in hits.items())} flows)")
    raise ConfigError(f"Failed to choose the probes' flow: no flow from {', '.join(addrs)} (nodes."
                      f"{cfg.role('client').name}.interfaces[0].ip/extra_ips) with a source port from {s.source_port} "
                      f"(dns.prober.source_port in {cfg.path}) to {last} reaches {backend_name} through every LB of "
                      f"{', '.join(hits)}: {why}; give {backend_name} a weight or classes in {cfg.service.backends}, "
                      "or the client another address (extra_ips)")


def running_lbs(testbed) -> list[str]:
    """The LB kinds running on the testbed's LB node."""
    return [k for k in kinds() if get_lb(k, testbed).running()]


def _flow_lbs(testbed, through, via: str) -> list:
    """The drivers of the LBs the probes' flow must reach the DNS backend through: `through`'s
    kinds, or (None) the LBs running on the LB node when the probes go via the LB."""
    if through is None:
        through = running_lbs(testbed) if via == "lb" else ()
    return [get_lb(k, testbed) for k in dict.fromkeys(through) if k != NONE]


def probe(testbed, *, count: int, rate_qps: float, out: Path, via: str = "lb", capture: bool = True,
          expect: str | None = "config", enable_hw: bool | None = None, watch: Watch | None = None,
          through=None) -> dict:
    """Send `count` queries at `rate_qps` from the client node to the VIP, via the LB (dst MAC =
    cfg.lb_mac) or directly to the DNS backend (via="direct"); raw records to `out` (JSONL), a
    pcap beside it (capture=True) analysed with pcap_rtt. expect: the A record a correct answer
    holds ("config": the config's qname record; None: any reply counts, e.g. a reflector).
    enable_hw: turn on the NIC's hardware timestamping first (None: dns.prober.hardware_timestamps).
    watch: the trial's actors (xenobench.actors), checked while the prober runs; it is one of them.
    through: the LB kinds whose every one must send the probes' flow to the DNS backend (probe_flow;
    an experiment passes all it compares, so each gets the same frames); None: those running."""
    if count < 1 or rate_qps <= 0:
        raise ConfigError(f"Failed to probe: count must be >= 1 and rate > 0 (got count={count}, rate={rate_qps})")
    cfg, s = testbed.cfg, dns_service.settings(testbed.cfg)
    if via == "lb":
        mac = cfg.lb_mac
    elif via == "direct":
        mac = cfg.role("dns_backend").iface().mac
    else:
        raise ConfigError(f"Failed to probe: via must be 'lb' or 'direct', got {via!r}")
    dnode = testbed.node(cfg.role("dns_backend").name)
    running = next((k for k in dns_service.KINDS if dnode.running(dns_service.TAGS[k])), None)
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
    flow = probe_flow(cfg, cfg.role("dns_backend").name, _flow_lbs(testbed, through, via))
    src = flow["src"]
    pcap_local = out.with_suffix(".pcap")
    # where the node writes them (a remote node: in its work dir, fetched afterwards)
    r_out = node.output_path(out, f"rtt/{out.name}")
    r_pcap = node.output_path(pcap_local, f"rtt/{pcap_local.name}")
    node.run(["mkdir", "-p", str(Path(r_out).parent)])
    out.parent.mkdir(parents=True, exist_ok=True)
    node.run(["ip", "neigh", "replace", s.vip, "lladdr", mac, "dev", ci.name, "nud", "permanent"])
    tag = "rtt-tcpdump"
    summary = None
    try:
        if capture:
            node.run(["rm", "-f", r_pcap])
            # not --immediate-mode: waking tcpdump for every frame put ~5-10 µs into the very TX
            # path being measured (and into the prober-vs-pcap difference) on the namespace
            # testbed; the packet ring hands over a block at the latest 1 s after its last frame
            log = node.log_path(tag)
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
        argv = node.python_argv("xenobench.agents.prober", "run", "--iface", ci.name, "--src", src,
                                "--sport", str(flow["sport"]), "--dst", s.vip,
                                "--port", str(s.port), "--qname", s.qname, "--expect", expect or "",
                                "--count", str(count), "--rate", str(rate_qps), "--timeout", str(s.timeout_s),
                                "--out", r_out, *(["--enable-hw"] if enable_hw else []))
        summary = _run_prober(node, argv, count / rate_qps + s.timeout_s + 60, watch or Watch())
    finally:
        if capture:
            if summary is not None:  # what the prober exchanged: every query, every answer it took
                _wait_captured(node, r_pcap, summary["sent"] + summary["n"], CAPTURE_FLUSH_S)
            node.stop(tag)
        node.run(["ip", "neigh", "del", s.vip, "dev", ci.name], check=False)
    node.collect(r_out, out)
    summary |= {"server": running, "via": via, "src": src, "flow_through": flow["through"], "dst_mac": mac,
                "raw": str(out), "pcap_file": None, "pcap": None,
                "pcap_median_diff_us": None, "tolerance_us": s.tolerance_us}
    if capture:
        node.collect(r_pcap, pcap_local)
        summary["pcap_file"] = str(pcap_local)
        try:
            res = pcap_rtt.analyze_pcap(pcap_local, ci.mac, s.port, timeout_s=s.timeout_s)
        except DataError as e:
            summary["pcap_error"] = str(e)
        else:
            p = res.summary()
            summary["pcap"] = p
            summary["per_query"] = compare_with_pcap(read_records(out), res, client_mac=ci.mac,
                                                     sport=summary["sport"])
            if summary["median_us"] is not None and p.get("median_us") is not None:
                summary["pcap_median_diff_us"] = round(summary["median_us"] - p["median_us"], 3)
                summary["pcap_agrees"] = abs(summary["pcap_median_diff_us"]) <= s.tolerance_us
    return summary


