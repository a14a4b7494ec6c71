"""`xenobench lb start|stop|stats --lb KIND` (the kinds: xenobench.lb.LBS)."""

import json

import click

from ..lb import kinds

# not a click.Choice: the kinds a config declares (lbs:) are known only once it is loaded; an
# unknown name is refused by xenobench.lb.get_lb with the whole list
lb_option = click.option("--lb", "kind", required=True, metavar="KIND",
                         help=f"Which load balancer ({', '.join(kinds())}, or one the config's lbs: declares).")


@click.group("lb")
def lb_group():
    """Deploy, stop and read the counters of a load balancer on the testbed's LB node."""


@lb_group.command("start")
@lb_option
@click.option("--backends", type=click.Path(dir_okay=False), help="Backends file (default: service.backends).")
@click.option("--dry-run", is_flag=True, help="Print the exact command sequence, run nothing.")
@click.option("--generic", is_flag=True, help="eBPF only: attach in generic (skb) mode instead of native.")
@click.pass_obj
def start(obj, kind, backends, dry_run, generic):
    """Start the load balancer (refused if it is already running)."""
    from ..lb import get_lb
    opts = {"generic": True} if generic else {}
    res = get_lb(kind, obj.testbed()).start(backends, dry_run=dry_run, **opts)
    if dry_run:
        for c in res.get("commands", []):
            click.echo(c)
    else:
        click.echo(json.dumps(res))


@lb_group.command("stop")
@lb_option
@click.pass_obj
def stop(obj, kind):
    """Stop the load balancer and detach everything it set up."""
    from ..lb import get_lb
    was = get_lb(kind, obj.testbed()).stop()
    click.echo(f"{kind}: {'stopped' if was else 'was not running'}")


@lb_group.command("stats")
@lb_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def stats(obj, kind, as_json):
    """Per-backend packets and bytes, miss/non-IPv4/malformed counts, summed over CPUs."""
    from ..lb import get_lb
    st = get_lb(kind, obj.testbed()).stats()
    if as_json:
        click.echo(json.dumps(st))
        return
    click.echo(f"{kind} ({st.get('mode')}): miss {st.get('miss')} non_ipv4 {st.get('non_ipv4')} "
               f"malformed {st.get('malformed')}")
    for b in st.get("backends", []):
        click.echo(f"  {b['name']:10} {b['mac']}  {b['packets']:>12} pkts {b['bytes']:>14} bytes")


COMMANDS = [lb_group]
