"""The `xenobench` command. main() only sets up the context and dispatches; every command group
lives in its own module (one per concern) and is registered from COMMAND_MODULES."""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from .. import REPO_ROOT
from ..errors import ConfigError, TestbedError, XenobenchError

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

    def testbed(self, root: bool = True):
        """The configured testbed; `root`: the command changes it (a namespace testbed then needs root)."""
        from ..testbed import get_testbed
        if root:
            require_root(self.config, _command())
        return get_testbed(self.config)


ROOT_REASON = "needs root (network namespaces, XDP): run as root or with sudo"


def needs_root(cfg) -> bool:
    """A testbed built on this machine is changed only by root (Config.builds_on_this_machine)."""
    return cfg.builds_on_this_machine


def require_root(cfg, what: str) -> None:
    """One line instead of a PermissionError deep in the testbed: `Failed to <what>: needs root ...`."""
    if needs_root(cfg) and os.geteuid() != 0:
        raise TestbedError(f"Failed to {what} on testbed {cfg.name}: {ROOT_REASON}")


def _command() -> str:
    """'run `xenobench testbed up`' for the command being invoked."""
    ctx, names = click.get_current_context(silent=True), []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name)
        ctx = ctx.parent
    return f"run `xenobench {' '.join(names)}`"


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
    if not (REPO_ROOT / "config" / "schema").is_dir():
        raise ConfigError(f"Failed to start xenobench: {REPO_ROOT / 'config'} is missing: the package runs from its "
                          "source checkout (configs, schemas, experiments, BPF sources): install it with "
                          "`pip install -e .` in a clone")
    ctx.obj = Context(config_path)


for _name in COMMAND_MODULES:
    _mod = importlib.import_module(f"{__name__}.{_name}")
    for _cmd in getattr(_mod, "COMMANDS", ()):
        main.add_command(_cmd)
