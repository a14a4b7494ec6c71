"""`xenobench deploy`: ship the node-side agents, BPF objects and XenoFlow's source to an SSH
testbed's nodes and print one readiness table (xenobench.deploy)."""

import click


@click.command("deploy")
@click.option("--check-only", is_flag=True, help="Only check the nodes; copy nothing.")
@click.pass_obj
def deploy_cmd(obj, check_only):
    """Ship to each node what its role needs, from this machine, then check every node:
    one table of node, role, check, ready/MISSING and the command that fixes it.
    Exit status 1 if anything is missing."""
    from ..deploy import check_node, deploy, describe, table
    tb = obj.testbed()
    if check_only:
        shipped, rows = [], [r for n in tb.nodes() for r in check_node(obj.config, n)]
    else:
        shipped, rows = deploy(tb)
    for line in describe(shipped):
        click.echo(line)
    click.echo(table(rows))
    for n in tb.nodes():
        n.close()
    if not all(r.ready for r in rows):
        raise SystemExit(1)


COMMANDS = [deploy_cmd]
