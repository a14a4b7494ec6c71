"""`xenobench rtt pcap` (the DNS servers and the live prober join this module with issue 6)."""

import json

import click


@click.group("rtt")
def rtt_group():
    """Measure and analyse DNS round-trip times."""


@rtt_group.command("pcap")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--client-mac", help="The probing station (default: detected from the capture).")
@click.option("--port", type=int, default=53, show_default=True, help="UDP port of the service.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def pcap(file, client_mac, port, as_json):
    """Pair probes with answers in a client-side capture and summarise the RTTs."""
    from ..config import normalize_mac
    from ..errors import ConfigError
    from ..pcap_rtt import analyze_pcap
    if client_mac:
        try:
            client_mac = normalize_mac(client_mac)
        except ValueError as e:
            raise ConfigError(f"Failed to use --client-mac: {e}") from None
    s = analyze_pcap(file, client_mac, port).summary()
    if as_json:
        click.echo(json.dumps(s))
    else:
        click.echo(f"{file}: client {s['client_mac']}, n={s['n']} lost={s['lost']}  median {s['median_us']} µs "
                   f"(sample {s['median_raw_us']})  mean {s['mean_us']}  std {s['std_us']}  p99 {s['p99_us']}")


COMMANDS = [rtt_group]
