"""Shared fixtures. Tests that need root (namespaces, XDP) skip with a reason when not root.

The namespace prefix defaults to `xbt-` so the tests never touch a testbed a user brought up with
the default `xb-`; set XENOBENCH_NS_PREFIX to run several suites side by side on one machine.
"""

import os

import pytest

os.environ.setdefault("XENOBENCH_NS_PREFIX", "xbt-")

from xenobench.config import load_config  # noqa: E402
from xenobench.testbed import get_testbed  # noqa: E402

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: network namespaces, XDP, bpftool")


@pytest.fixture(scope="session")
def local_cfg():
    return load_config()


@pytest.fixture(scope="session")
def testbed(local_cfg):
    """The embedded namespace testbed, up for the whole session, torn down at the end."""
    if not IS_ROOT:
        pytest.skip("needs root: network namespaces")
    tb = get_testbed(local_cfg)
    tb.up()
    yield tb
    tb.down()
