"""`xenobench counters NODE IFACE...`."""

import json

import click


@click.command("counters")
@click.argument("node")
@click.argument("ifaces", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Full snapshot (raw text, parsed, view) as JSON.")
@click.pass_obj
def counters(obj, node, ifaces, as_json):
    """One counter snapshot of IFACEs on NODE: raw ethtool -S and sysfs, plus the driver view."""
    from ..counters import snapshot_many
    snap = snapshot_many(obj.testbed().node(node), list(ifaces))
    if as_json:
        click.echo(json.dumps(snap, indent=1))
        return
    for i, s in snap.items():
        click.echo(f"{node}:{i} ({s['driver']})")
        for k, v in s["view"].items():
            click.echo(f"  {k:24} {v}")


COMMANDS = [counters]
