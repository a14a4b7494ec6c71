"""Load balancers under test, driven alike by experiments and by `xenobench lb ...`.

Each implementation module (`ebpf`, `xenoflow`, and `wire`, the no-op reference: p0 → p1) provides `make(testbed) -> LoadBalancer`.
"""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from .base import LoadBalancer

KINDS = ("ebpf", "xenoflow", "wire")


def get_lb(kind: str, testbed) -> LoadBalancer:
    if kind not in KINDS:
        raise ConfigError(f"Failed to select load balancer: unknown kind {kind!r} (known: {', '.join(KINDS)})")
    return importlib.import_module(f"{__name__}.{kind}").make(testbed)
