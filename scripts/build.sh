#!/usr/bin/env bash
# Build every C part of the tree: each top-level folder with a Makefile owns its build (its BPF
# objects, XenoFlow on the DOCA Flow emulation, the generator). No list to keep: a new folder with a
# Makefile (a new XDP load balancer) is built, and the LB kinds name the folders they need
# (xenobench.lb.LBS, bpf_dir), which tests/test_lb_seam.py checks against what this builds.
set -euo pipefail
cd "$(dirname "$0")/.."
for mk in */Makefile; do
    make -s -C "$(dirname "$mk")"
done
echo "build: ok"
