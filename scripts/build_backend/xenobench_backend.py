"""The build backend of pyproject.toml: setuptools' own, but a wheel (`pip install .`, not editable)
is refused with the reason. xenobench runs from its source checkout: the package finds config/,
experiments/, their schemas, profiles/ and the C and BPF sources it builds and ships to the nodes
beside itself (xenobench.REPO_ROOT), none of which a wheel carries. `pip install -e .` (what
`make deps` runs) builds the editable install as setuptools does."""

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 (every hook setuptools defines)

REASON = ("Failed to build a xenobench wheel: xenobench runs from its source checkout (config/, experiments/, "
          "schemas, profiles/ and the C and BPF sources beside the package, xenobench.REPO_ROOT); a wheel would "
          "carry the package alone. Install it editable from a clone instead: pip install -e '.[test]' "
          "(what `make deps` runs)")


def get_requires_for_build_wheel(config_settings=None):
    raise SystemExit(REASON)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    raise SystemExit(REASON)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise SystemExit(REASON)


# the editable hooks, named so that a reader sees which ones go on to setuptools
build_editable = _setuptools.build_editable
get_requires_for_build_editable = _setuptools.get_requires_for_build_editable
prepare_metadata_for_build_editable = _setuptools.prepare_metadata_for_build_editable
