"""One error type per layer. Messages follow `Failed to <verb> <object>: <reason>` and name the
offending file, key path and value, so the CLI can print them as they are."""


class XenobenchError(Exception):
    """Base of every error the harness raises on purpose; the CLI prints it and exits non-zero."""

    exit_code = 1
    #: a fault no retry can change (a config, a missing file, what the kernel refuses): the attempt
    #: of a trial that raises it stops its point at once instead of being retried (xenobench.trials)
    deterministic = False


class ConfigError(XenobenchError):
    """A configuration or input file is malformed (exit code 2)."""

    exit_code = 2
    deterministic = True


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


class GeneratorRefused(TrafficError):
    """The kernel refused the traffic generator (its XDP program, driver or a permission): the same
    on every attempt."""

    deterministic = True


class ProgramRejected(NodeError):
    """The kernel rejected a BPF program (the verifier, an attach): the same on every attempt."""

    deterministic = True


class PointStopped(XenobenchError):
    """A point stopped at a deterministic fault of one of its trials (xenobench.trials), with the
    fault's exit code; its point.json is not written, so the next run measures it again."""

    deterministic = True

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class RunFailed(XenobenchError):
    """A run measured nothing worth its figures: a planned experiment without a valid trial, or one
    cause invalidating most trials (xenobench.closing)."""
