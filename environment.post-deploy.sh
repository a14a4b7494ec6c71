#!/bin/sh
# After environment.yml's conda environment is made (by hand or by `snakemake --use-conda`, which runs
# this in the workflow's directory with the environment active): xenobench and its packages from
# pyproject.toml, editable from this clone. Not in environment.yml's pip section: Snakemake creates
# the environment from a copy of that file elsewhere, where a relative `-e .` names no project.
set -eu
python -m pip install -e '.[test]'
