"""One error type per layer. Messages follow `Failed to <verb> <object>: <reason>` and name the
offending file, key path and value, so the CLI can print them as they are."""


class XenobenchError(Exception):
    """Base of every error the harness raises on purpose; the CLI prints it and exits non-zero."""

    exit_code = 1


class ConfigError(XenobenchError):
    """A configuration or input file is malformed (exit code 2)."""

    exit_code = 2


class BackendsError(ConfigError):
    """A backends file (backends.json / YAML) is malformed."""


class NodeError(XenobenchError):
    """A command, process or file transfer on a node failed."""


class TestbedError(XenobenchError):
    """Bringing the testbed up, down or checking it failed."""

    __test__ = False  # not a pytest class


class TrafficError(XenobenchError):
    """A traffic profile, its tunables, the generator or a traffic trial failed."""


class DataError(XenobenchError):
    """A measurement or input data file (counter series, pcap, CSV) is malformed or empty."""
