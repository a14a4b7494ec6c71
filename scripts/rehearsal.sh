#!/usr/bin/env bash
# The rehearsal of the thesis testbed (docs/thesis-testbed.md): the lab up
# (standins/rehearsal), the fips plan by Snakemake over SSH, `testbed down --purge`, a check that
# nothing of the harness is left on any node, the lab down — on failure too.
#   scripts/rehearsal.sh [CONFIG]   (default config/rehearsal.yaml; make rehearsal / rehearsal-ci)
set -uo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-config/rehearsal.yaml}
PY=.venv/bin/python
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
lab() { "$PY" -m standins.rehearsal "$1" --config "$CONFIG" "${@:2}"; }
trap 'lab down > /dev/null' EXIT
t0=$(date +%s)
# the operator installs the sudoers rule `xenobench deploy` prints for the DPU login (--sudo-rule)
lab up --sudo-rule > /dev/null || exit 1
# day one as the operator: deploy ships and builds XenoFlow as the DPU login, and its table says
# to install the build root-owned (the program the rule names); the operator does, and deploys again
.venv/bin/xenobench --config "$CONFIG" deploy > /dev/null
lab install-xenoflow > /dev/null || exit 1
.venv/bin/snakemake --cores 1 all --configfile "$CONFIG"
rc=$?
.venv/bin/xenobench --config "$CONFIG" testbed down --purge || rc=1
lab leftovers > /dev/null || { echo "rehearsal: Failed to leave the nodes clean: see the lines above" >&2; rc=1; }
echo "rehearsal: $CONFIG: $(( $(date +%s) - t0 )) s, exit status $rc" >&2
exit $rc
