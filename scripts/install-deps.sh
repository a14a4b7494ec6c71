#!/usr/bin/env bash
# Install everything xenobench needs on a fresh Debian 12 machine (as root):
# system packages from apt, then the Python environment in ./.venv.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
    iproute2 ethtool kmod iputils-ping procps psmisc
    clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev gcc-multilib pkg-config
    meson ninja-build libcmocka-dev libyaml-dev
    netsniff-ng tcpdump
    bind9 bind9-utils bind9-dnsutils
    openssh-server openssh-client
    openvswitch-switch
    python3-venv
    # report.tex compiled by its test (tables within the page in one and two columns)
    texlive-latex-base texlive-latex-recommended
    # the rehearsal lab (standins/rehearsal): sudo on the DPU node, and what the nodes' system
    # python3 runs (the TRex stand-in: zmq, yaml; the agents: numpy, dnspython, scapy)
    sudo python3-zmq python3-yaml python3-numpy python3-dnspython python3-scapy
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "install-deps: apt packages missing: ${missing[*]}"
    if [[ $(id -u) -ne 0 ]]; then
        echo "install-deps: Failed to install apt packages: not root" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Debian starts named, sshd and Open vSwitch on install; the testbed runs its own instances in
# namespaces (tests/test_ovs.py: a userspace OVS with a private run directory).
for svc in named ssh openvswitch-switch ovs-vswitchd ovsdb-server; do
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
done
# without systemd the package's init script may have started the system-wide OVS (pidfiles in
# /var/run/openvswitch, never the tests' private run directories)
if [[ -f /var/run/openvswitch/ovsdb-server.pid ]]; then
    /usr/share/openvswitch/scripts/ovs-ctl stop >/dev/null 2>&1 || true
fi

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.xenobench-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
    .venv/bin/pip install -q --upgrade pip
    # editable: xenobench runs from this checkout (a wheel, `pip install .`, is refused with the reason)
    .venv/bin/pip install -q -e '.[test]'
    touch "$stamp"
fi
echo "install-deps: ok (. .venv/bin/activate puts snakemake and xenobench on PATH)"
