"""The `xenobench` command. main() only sets up the context and dispatches; every command group
lives in its own module (one per concern) and is registered from COMMAND_MODULES."""

from __future__ import annotations

import importlib
import logging
import sys

import click

from ..errors import XenobenchError

# module name → its click commands/groups are in the module's COMMANDS list
COMMAND_MODULES = (
    "config_cmd",    # config check
    "testbed_cmd",   # testbed up|down|status|check
    "deploy_cmd",    # deploy (SSH testbeds: ship agents, objects, XenoFlow source; readiness table)
    "counters_cmd",  # counters NODE IFACE...
    "lb_cmd",        # lb start|stop|stats  (ebpf, xenoflow)
    "traffic_cmd",   # traffic compile|run
    "dns_cmd",       # dns start|stop, rtt probe|pcap
    "results_cmd",   # ingest, compare, plot
    "diff_cmd",      # diff A B (two results trees)
    "experiment_cmd",  # experiment plan|run|aggregate|report
)


class Context:
    """Per-invocation state: the config is loaded on first use, so `--help` never needs one."""

    def __init__(self, config_path: str | None):
        self.config_path = config_path
        self._config = None

    @property
    def config(self):
        if self._config is None:
            from ..config import load_config
            self._config = load_config(self.config_path)
        return self._config

    def testbed(self):
        from ..testbed import get_testbed
        return get_testbed(self.config)


class _Group(click.Group):
    """Prints harness errors as one line and exits with the layer's exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except XenobenchError as e:
            click.echo(f"xenobench: {e}", err=True)
            sys.exit(e.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", type=click.Path(dir_okay=False), envvar="XENOBENCH_CONFIG",
              help="Testbed configuration (default: config/local.yaml, or $XENOBENCH_CONFIG).")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.version_option(package_name="xenobench")
@click.pass_context
def main(ctx, config_path, verbose):
    """Reproduce the XenoFlow measurements: testbed, load balancers, traffic, DNS RTT, results."""
    logging.basicConfig(level=logging.WARNING - 10 * min(verbose, 2),
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s", stream=sys.stderr)
    ctx.obj = Context(config_path)


for _name in COMMAND_MODULES:
    _mod = importlib.import_module(f"{__name__}.{_name}")
    for _cmd in getattr(_mod, "COMMANDS", ()):
        main.add_command(_cmd)
