"""An independent pairing of DNS probes and answers with dpkt (a maintained reader and decoder
that xenobench does not use): dpkt reads the records and decodes Ethernet (VLAN, QinQ), Linux
cooked v1/v2 and raw IP, IPv4 and IPv6, UDP and DNS; queries wait in a FIFO per (id, question,
server endpoint); an answer to the client takes the earliest that is more than 0 and at most
1 s before it. Simpler than xenobench.pcap_rtt's rule (no superseding of identical queries, no
preference for the mirrored 5-tuple), so it agrees on captures without repeated identical
queries. tests/test_pcap_rtt.py checks the fixture table and the thesis captures against it;
scripts/bench_pcap_stream.py times it against `xenobench rtt pcap`."""

from __future__ import annotations

from decimal import Decimal

import dpkt

CLIENT_MAC = "02:00:00:00:01:00"
CLIENT_IPS = (b"\xc6\x12\x00\x10", bytes.fromhex("20010db8" + "0" * 22 + "16"))  # 198.18.0.16, 2001:db8::16


def _ns(ts, unit_ns: int) -> int:
    """dpkt's stamp (Decimal seconds of nanosecond pcap, float seconds otherwise) in ns, float
    stamps rounded to the capture's unit (floats of 1.7e9 s are ~0.2 µs apart)."""
    if isinstance(ts, Decimal):
        return int(ts * 10 ** 9)
    return round(ts * 1e9 / unit_ns) * unit_ns


def dpkt_rtts(fileobj, client_mac: str = CLIENT_MAC, unit_ns: int = 1, *, client_ips=CLIENT_IPS,
              in_order: bool = False) -> list[int]:
    """RTTs in ns, in the order of the answers. in_order: the capture is in time order already
    (records are then paired as they are read instead of sorted in memory first)."""
    rd = dpkt.pcap.UniversalReader(fileobj)
    lt = rd.datalink()
    recs = ((_ns(ts, unit_ns), buf) for ts, buf in rd)
    if not in_order:
        recs = sorted(recs, key=lambda r: r[0])
    mac = bytes.fromhex(client_mac.replace(":", ""))
    waiting, rtts = {}, []
    for ts, buf in recs:
        if lt == 1:
            eth = dpkt.ethernet.Ethernet(buf)
            l3, out, to_client = eth.data, eth.src == mac, eth.dst == mac
        elif lt == 113:
            sll = dpkt.sll.SLL(buf)
            if sll.hrd == 772:
                continue
            l3, out, to_client = sll.data, sll.type == 4, sll.type == 0
        elif lt == 276:
            s2 = dpkt.sll2.SLL2(buf)
            l3, out, to_client = s2.data, s2.type == 4, s2.type == 0
        else:
            l3 = dpkt.ip6.IP6(buf) if buf[0] >> 4 == 6 else dpkt.ip.IP(buf)
            out, to_client = l3.src in client_ips, l3.dst in client_ips
        if not isinstance(l3, (dpkt.ip.IP, dpkt.ip6.IP6)) or not isinstance(l3.data, dpkt.udp.UDP):
            continue
        if isinstance(l3, dpkt.ip.IP) and (l3.mf or l3.offset):
            continue
        udp = l3.data
        if 53 not in (udp.sport, udp.dport):
            continue
        d = dpkt.dns.DNS(udp.data)
        q = d.qd[0].name if d.qd else ""
        if out:
            waiting.setdefault((d.id, q, l3.dst, udp.dport), []).append(ts)
        elif to_client:
            key = (d.id, q, l3.src, udp.sport) if d.qr else (d.id, q, l3.dst, udp.dport)
            queue = waiting.get(key, [])
            while queue and ts - queue[0] > 10 ** 9:
                queue.pop(0)  # timed out
            cands = [t for t in queue if 0 < ts - t]
            if cands:
                queue.remove(cands[0])
                rtts.append(ts - cands[0])
    return rtts
