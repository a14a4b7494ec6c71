"""`xenobench dns start|stop --server python|bind9|xdp`, `xenobench rtt probe|pcap`."""

import json

import click

SERVERS = ("python", "bind9", "xdp")


@click.group("dns")
def dns_group():
    """Run a DNS server on the testbed's dns_backend node (answers on the service VIP)."""


def _server(obj, server):
    if server:
        return server
    from ..dns import settings
    return settings(obj.config).server


@dns_group.command("start")
@click.option("--server", type=click.Choice(SERVERS), help="Which server (default: dns.server in the config).")
@click.pass_obj
def dns_start(obj, server):
    """Start the server and wait until it listens (refused while another one runs)."""
    from ..dns import start_server
    res = start_server(obj.testbed(), _server(obj, server))
    click.echo(json.dumps(res))


@dns_group.command("stop")
@click.option("--server", type=click.Choice(SERVERS), help="Which server (default: dns.server in the config).")
@click.pass_obj
def dns_stop(obj, server):
    """Stop the server (the XDP responder is detached); prints its final counts."""
    from ..dns import last_counts, stop_server
    kind = _server(obj, server)
    was = stop_server(obj.testbed(), kind)
    counts = last_counts(obj.testbed(), kind) if was else {}
    click.echo(f"{kind}: {'stopped' if was else 'was not running'}" + (f" {json.dumps(counts)}" if counts else ""))


@click.group("rtt")
def rtt_group():
    """Measure and analyse DNS round-trip times."""


@rtt_group.command("probe")
@click.option("--count", type=click.IntRange(min=1), required=True, help="Number of queries.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), required=True, help="Queries per second.")
@click.option("--out", type=click.Path(dir_okay=False), default="rtt-probe.jsonl", show_default=True,
              help="Raw records (one JSON object per query); the capture goes beside it (.pcap).")
@click.option("--via", type=click.Choice(["lb", "direct"]), default="lb", show_default=True,
              help="lb: to the LB's ingress MAC; direct: to the DNS backend's MAC (no LB).")
@click.option("--no-capture", is_flag=True, help="No tcpdump capture (one measurement only).")
@click.option("--enable-hw/--no-enable-hw", default=None,
              help="Turn on NIC hardware timestamping (SIOCSHWTSTAMP) first (default: dns.prober.hardware_timestamps).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@click.pass_obj
def probe_cmd(obj, count, rate, out, via, no_capture, enable_hw, as_json):
    """Send DNS queries from the client node and measure their RTTs (kernel timestamps + pcap)."""
    from pathlib import Path

    from ..experiments import flow_lbs
    from ..rtt import probe, running_lbs
    tb = obj.testbed()
    # the study's flow (every LB its RTT experiments compare) and the LB running now
    through = (*flow_lbs(obj.config), *running_lbs(tb)) if via == "lb" else flow_lbs(obj.config)
    s = probe(tb, count=count, rate_qps=rate, out=Path(out), via=via, capture=not no_capture,
              enable_hw=enable_hw, through=through)
    if as_json:
        click.echo(json.dumps(s))
    else:
        _print_probe(s, via)
    _refuse_unanswered(obj.config, s, via)


def _print_probe(s: dict, via: str) -> None:
    click.echo(f"prober ({s['timestamps']} timestamps, via {via}): n={s['n']} lost={s['lost']} "
               f"mismatched={s['mismatched']}  median {s['median_us']} µs  mean {s['mean_us']}  std {s['std_us']}  "
               f"p99 {s['p99_us']}  (user-space clock: median {s['user_median_us']})")
    if s.get("pcap"):
        p = s["pcap"]
        click.echo(f"pcap   {s['pcap_file']}: n={p['n']} lost={p['lost']}  median {p['median_us']} µs  "
                   f"std {p['std_us']}  p99 {p['p99_us']}  (prober − pcap median: {s['pcap_median_diff_us']} µs)")
    elif s.get("pcap_error"):
        click.echo(f"pcap: {s['pcap_error']}")
    click.echo(f"raw records: {s['raw']}")


def _refuse_unanswered(cfg, s: dict, via: str) -> None:
    """A run in which no probe got its answer measured nothing: one line (exit 1) with how many
    were lost (xenobench.agents.prober.unanswered) and the likely causes, from what the summary saw."""
    from ..agents.prober import unanswered
    from ..errors import DataError
    lost = unanswered(s)
    if lost is None:
        return
    node = cfg.role("dns_backend").name
    causes = [f"no DNS server runs on {node} (`xenobench dns start`)"] if s.get("server") is None else []
    if s["lost"] and via == "lb":
        causes.append(f"the LB is not running or does not forward to {node} (`xenobench lb start`; "
                      "`--via direct` leaves it out)")
    elif s["lost"]:
        causes.append(f"the queries do not reach {node} (`xenobench testbed check`)")
    if s["bad_answer"]:
        causes.append(f"the server answers for another name or address (dns.qname, dns.records in {cfg.path})")
    if s["send_errors"]:
        causes.append("the client's interface is down or has no route to the VIP (`xenobench testbed check`)")
    raise DataError(f"Failed to measure an RTT: {lost}; likely: {'; or '.join(causes)}")


@rtt_group.command("pcap")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=False))
@click.option("--client", "--client-mac", "client",
              help="Keep only this client's queries: a MAC, an IP address or 'this host' (default: every client's).")
@click.option("--port", type=int, default=53, show_default=True, help="UDP port of the service.")
@click.option("--timeout", "timeout_s", type=float,
              help="Seconds a probe waits for its answer before it counts as lost (default: dns.prober.timeout_s).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def pcap(file, client, port, timeout_s, as_json):
    """Pair DNS queries with their answers in a capture (pcap, pcapng or tcpdump -e text; plain,
    gzip, xz, bzip2, zstd or lz4; a file or a FIFO, read as a stream) and summarise the RTTs;
    plausibility flags follow the summary."""
    from ..errors import ConfigError
    from ..pcap_rtt import analyze_pcap, normalize_client
    if client:
        try:
            client = normalize_client(client)
        except ValueError as e:
            raise ConfigError(f"Failed to use --client: {e}") from None
    s = analyze_pcap(file, client, port, timeout_s=timeout_s, keep_pairs=False).summary()
    if as_json:
        click.echo(json.dumps(s))
    else:
        click.echo(f"{file}: client {s['client_mac']}, n={s['n']} lost={s['lost']}  median {s['median_us']} µs "
                   f"(sample {s['median_raw_us']})  mean {s['mean_us']}  std {s['std_us']}  p99 {s['p99_us']}")
        for line in s["flags"] + ([f"refused: {s['refused']}"] if s["refused"] else []):
            click.echo(f"  flag: {line}")


COMMANDS = [dns_group, rtt_group]
