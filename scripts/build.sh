#!/usr/bin/env bash
# Build every C part that exists in the tree (each part owns its own Makefile/meson project).
set -euo pipefail
cd "$(dirname "$0")/.."
for d in ebpf_baseline dns_server lb loadgen switch; do
    if [[ -f $d/Makefile ]]; then
        make -s -C "$d"
    fi
done
echo "build: ok"
