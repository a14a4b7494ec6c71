"""`xenobench deploy`: ship the node-side agents, BPF objects and XenoFlow's source to an SSH
testbed's nodes and print one readiness table (xenobench.deploy)."""

import json

import click


@click.command("deploy")
@click.option("--check-only", is_flag=True, help="Only check the nodes; copy nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="One object: shipped (what went where) and rows (node, role, check, status, detail, fix).")
@click.pass_obj
def deploy_cmd(obj, check_only, as_json):
    """Ship to each node what its role needs, from this machine, then check every node:
    one table of node, role, check, ready/MISSING and the command that fixes it.
    Exit status 1 if anything is missing."""
    from ..deploy import check_node, deploy, describe, table
    tb = obj.testbed(root=False)  # over SSH: nothing on this machine changes
    if check_only:
        shipped, rows = [], [r for n in tb.nodes() for r in check_node(obj.config, n)]
    else:
        shipped, rows = deploy(tb)
    if as_json:
        click.echo(json.dumps({"shipped": shipped, "rows": [
            {"node": r.node, "role": r.role, "check": r.check,
             "status": ("CHECK" if r.caution else "ready") if r.ready else "MISSING", "detail": r.detail, "fix": r.fix}
            for r in rows]}, default=str))
    for line in [] if as_json else describe(shipped):
        click.echo(line)
    if not as_json:
        click.echo(table(rows))
    for n in tb.nodes():
        n.close()
    if not all(r.ready for r in rows):
        raise SystemExit(1)


COMMANDS = [deploy_cmd]
