"""`xenobench config check`."""

import click


@click.group("config")
def config_group():
    """Inspect and validate testbed configurations."""


@config_group.command("check")
@click.pass_obj
def check(obj):
    """Validate the configuration and the study it plans; exit 0, or 2 with file, key path and bad
    value (the plan refused as `experiment run` and the workflow refuse it)."""
    from ..experiments import plan
    cfg = obj.config
    plan(cfg)
    roles = ", ".join(f"{n.name}={n.role}" for n in cfg.nodes.values())
    click.echo(f"{cfg.path}: ok (testbed {cfg.name}, kind {cfg.testbed_kind}, transport {cfg.transport}; {roles})")


COMMANDS = [config_group]
