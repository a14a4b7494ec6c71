"""The eBPF baseline's loader/controller and its LoadBalancer face.

Loader choice: Python driving bpftool, not a C libbpf loader. bpftool (libbpf inside) is the
reference tool for loading, pinning, map updates and BPF_PROG_TEST_RUN; driving it keeps one
implementation of the backends file (xenobench.backends) instead of a second one in C, and the
controller runs as `python -m xenobench.lb.ebpf run ...` inside the LB node's namespace, so the
devmap's ifindex resolves there.

The controller: validates the backends file, loads ebpf_baseline/build/lb.bpf.o with its maps
pinned under <bpffs>/ebpf/, fills config/slots/backends/egress, attaches in native mode (generic
only with --generic; the mode that ran is recorded), prints stats as JSON lines every interval,
and on SIGINT/SIGTERM detaches and unpins everything.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from .. import REPO_ROOT
from ..backends import load_backends
from ..config import mac_bytes
from ..errors import NodeError, XenobenchError
from ..nodes import SshNode
from .base import LoadBalancer

OBJ = REPO_ROOT / "ebpf_baseline" / "build" / "lb.bpf.o"
STATS_NAMES = ("miss", "non_ipv4", "non_service", "malformed", "tx_error")  # enum xb_stat order
POLICY = {"pass": 0, "drop": 1}
EGRESS = {"redirect": 0, "tx": 1}
TAG = "lb-ebpf"


def _hex(b: bytes) -> list[str]:
    return [f"{x:02x}" for x in b]


def bpftool(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["bpftool", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise XenobenchError(f"Failed to run `bpftool {' '.join(args)}`: {p.stderr.strip() or p.stdout.strip()}")
    return p


def map_update(pin: Path, key: bytes, value: bytes) -> None:
    bpftool("map", "update", "pinned", str(pin), "key", "hex", *_hex(key), "value", "hex", *_hex(value))


def config_bytes(vip: str, port: int, policy: str, egress: str, mask: int, src_mac: str) -> bytes:
    """struct xb_config (lb_common.h): 20 bytes."""
    return (ipaddress.IPv4Address(vip).packed + struct.pack("!H", port)
            + struct.pack("<BBI", POLICY[policy], EGRESS[egress], mask) + mac_bytes(src_mac) + b"\0\0")


def load(pindir: Path, obj: Path = OBJ) -> None:
    """Load both programs of the object and pin programs and maps under pindir."""
    if not obj.exists():
        raise XenobenchError(f"Failed to load {obj}: not built (run `make -C ebpf_baseline`)")
    if pindir.exists():
        shutil.rmtree(pindir)
    (pindir / "maps").mkdir(parents=True)
    bpftool("prog", "loadall", str(obj), str(pindir / "progs"), "type", "xdp", "pinmaps", str(pindir / "maps"))


def fill_maps(pindir: Path, backends_file, *, vip: str, port: int, policy: str, egress: str,
              src_mac: str, egress_ifindex: int | None) -> dict:
    bs = load_backends(backends_file)
    m = pindir / "maps"
    for i, b in enumerate(bs.backends):
        map_update(m / "backends", struct.pack("<I", i), mac_bytes(b.mac) + b"\x01\x00")
    for s, bi in enumerate(bs.slots):
        map_update(m / "slots", struct.pack("<I", s), struct.pack("<I", bi))
    map_update(m / "config", struct.pack("<I", 0), config_bytes(vip, port, policy, egress, bs.mask, src_mac))
    if egress_ifindex is not None:
        map_update(m / "egress", struct.pack("<I", 0), struct.pack("<I", egress_ifindex))
    return {"backends": [b.name for b in bs.backends], "class_bits": bs.class_bits, "slots": list(bs.slots)}


def _local_bpftool_stdout(*args: str) -> str:
    return bpftool(*args).stdout


def _percpu_sum(pin: Path, fmt: str, run=_local_bpftool_stdout) -> dict[int, tuple]:
    """Per-CPU array → {key: summed tuple} (bpftool JSON dump; `run` executes bpftool where the
    maps are pinned: here, or on the LB node)."""
    dump = json.loads(run("map", "dump", "pinned", str(pin), "-j") or "[]")
    size = struct.calcsize(fmt)
    out = {}
    for ent in dump:
        key = struct.unpack("<I", bytes(int(x, 16) for x in ent["key"]))[0]
        tot = None
        for v in ent["values"]:
            t = struct.unpack(fmt, bytes(int(x, 16) for x in v["value"])[:size])
            tot = t if tot is None else tuple(a + b for a, b in zip(tot, t))
        out[key] = tot
    return out


def read_stats(pindir: Path, backends_file, mode: str, run=_local_bpftool_stdout) -> dict:
    bs = load_backends(backends_file)
    m = pindir / "maps"
    per_be = _percpu_sum(m / "backend_stats", "<QQ", run)
    st = _percpu_sum(m / "stats", "<Q", run)
    out = {"backends": [{"name": b.name, "mac": b.mac, "packets": per_be.get(i, (0, 0))[0],
                         "bytes": per_be.get(i, (0, 0))[1]} for i, b in enumerate(bs.backends)]}
    for i, name in enumerate(STATS_NAMES):
        out[name] = st.get(i, (0,))[0]
    out["mode"] = mode
    return out


def _ip_json(*args) -> list:
    p = subprocess.run(["ip", "-j", *args], capture_output=True, text=True)
    return json.loads(p.stdout or "[]") if p.returncode == 0 else []


def attached_prog(dev: str) -> int | None:
    links = _ip_json("link", "show", "dev", dev)
    xdp = links[0].get("xdp") if links else None
    return xdp.get("prog", {}).get("id") if xdp else None


# --- the controller process ----------------------------------------------------------------------
def run(a) -> int:
    pindir = Path(a.pin_dir)
    if (pid := attached_prog(a.ingress)) is not None:
        print(f"Failed to start the eBPF LB on {a.ingress}: an XDP program (id {pid}) is already attached; "
              "stop it first (`xenobench lb stop --lb ebpf`)", file=sys.stderr)
        return 3
    ifindex = None
    if a.egress_mode == "redirect":
        links = _ip_json("link", "show", "dev", a.egress)
        if not links:
            print(f"Failed to find egress interface {a.egress}", file=sys.stderr)
            return 2
        ifindex = links[0]["ifindex"]
    try:
        load_backends(a.backends)  # validate before anything is loaded
        load(pindir)
        info = fill_maps(pindir, a.backends, vip=a.vip, port=a.port, policy=a.policy, egress=a.egress_mode,
                         src_mac=a.src_mac, egress_ifindex=ifindex)
    except XenobenchError as e:
        shutil.rmtree(pindir, ignore_errors=True)
        print(str(e), file=sys.stderr)
        return 2
    mode = "generic" if a.generic else "native"
    p = subprocess.run(["ip", "link", "set", "dev", a.ingress, "xdpgeneric" if a.generic else "xdpdrv",
                        "pinned", str(pindir / "progs" / "xb_lb")], capture_output=True, text=True)
    if p.returncode != 0:
        shutil.rmtree(pindir, ignore_errors=True)
        print(f"Failed to attach XDP ({mode}) to {a.ingress}: {p.stderr.strip()}", file=sys.stderr)
        return 4
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    state = Path(a.state_dir)
    try:
        # bpffs holds only BPF objects: the mode and the backends file `lb stats` needs go here
        state.mkdir(parents=True, exist_ok=True)
        (state / "mode").write_text(mode)
        for old in state.glob("backends.*"):
            old.unlink()
        shutil.copyfile(a.backends, state / ("backends" + Path(a.backends).suffix))
        print(json.dumps({"event": "started", "ingress": a.ingress, "mode": mode, **info}), flush=True)
        next_t = time.monotonic() + a.interval
        while not stop:
            time.sleep(0.05)
            if a.interval > 0 and time.monotonic() >= next_t:
                next_t += a.interval
                print(json.dumps({"time": time.time(), **read_stats(pindir, a.backends, mode)}), flush=True)
    finally:
        subprocess.run(["ip", "link", "set", "dev", a.ingress, "xdpgeneric" if a.generic else "xdpdrv", "off"],
                       capture_output=True)
        final = read_stats(pindir, a.backends, mode)
        shutil.rmtree(pindir, ignore_errors=True)
        print(json.dumps({"event": "stopped", **final}), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xenobench.lb.ebpf", description="eBPF baseline controller")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="load, attach, print stats as JSON lines until SIGINT/SIGTERM")
    r.add_argument("--backends", required=True)
    r.add_argument("--ingress", required=True)
    r.add_argument("--egress", help="egress port (redirect mode)")
    r.add_argument("--egress-mode", choices=sorted(EGRESS), default="redirect")
    r.add_argument("--src-mac", required=True, help="source MAC written into forwarded frames")
    r.add_argument("--vip", required=True)
    r.add_argument("--port", type=int, default=53)
    r.add_argument("--policy", choices=sorted(POLICY), default="pass", help="non-service frames")
    r.add_argument("--pin-dir", required=True)
    r.add_argument("--state-dir", required=True, help="where the mode and a copy of the backends file go")
    r.add_argument("--interval", type=float, default=1.0, help="seconds between stats lines")
    r.add_argument("--generic", action="store_true", help="generic (skb) mode instead of native")
    a = ap.parse_args(argv)
    return run(a)


# --- the harness face ---------------------------------------------------------------------------
class EbpfLB(LoadBalancer):
    kind = "ebpf"

    @property
    def pindir(self) -> Path:
        return self.testbed.bpffs_dir / "ebpf"

    @property
    def statedir(self) -> Path:
        """Where the controller keeps its mode and backends copy, on the LB node."""
        node = self.testbed.node(self.cfg.role("lb").name)
        return Path(node.remote_dir) / "ebpf" if isinstance(node, SshNode) else self.cfg.state_dir / "ebpf"

    def _ports(self):
        lb = self.cfg.role("lb")
        ing = lb.lb_port("ingress") or lb.iface()
        eg = lb.lb_port("egress")
        return lb, ing, eg

    def start(self, backends=None, *, dry_run=False, generic=False, **opts) -> dict:
        lb, ing, eg = self._ports()
        bfile = self.backends_file(backends)
        sec = self.cfg.section("ebpf")
        node = self.testbed.node(lb.name)
        remote_b = str(bfile)
        if isinstance(node, SshNode):  # the controller reads the file on the LB node
            remote_b = f"{node.remote_dir}/ebpf-backends{Path(bfile).suffix}"
        argv = node.python_argv(
            "xenobench.lb.ebpf", "run", "--backends", remote_b, "--ingress", ing.name,
            "--egress-mode", "redirect" if eg else "tx", *(["--egress", eg.name] if eg else []),
            "--src-mac", (eg or ing).mac, "--vip", self.cfg.service.vip, "--port", str(self.cfg.service.port),
            "--policy", sec.get("policy", "pass"), "--pin-dir", str(self.pindir),
            "--state-dir", str(self.statedir),
            "--interval", str(sec.get("stats_interval_s", 1.0)), *(["--generic"] if generic else []))
        if dry_run:
            return {"commands": [" ".join(argv)]}
        load_backends(bfile)  # a bad file fails here, before anything runs on the node
        if node.running(TAG):
            raise NodeError(f"Failed to start ebpf on {lb.name}:{ing.name}: already running; "
                            "`xenobench lb stop --lb ebpf` first")
        if remote_b != str(bfile):
            node.put(bfile, remote_b)
        log_path = (f"{node.remote_dir}/logs/{lb.name}.{TAG}.log" if isinstance(node, SshNode)
                    else str(self.cfg.state_dir / "logs" / f"{lb.name}.{TAG}.log"))
        offset = len(node.read_text(log_path))
        h = node.start(TAG, argv, log=log_path)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            logtext = node.read_text(h.log)[offset:]
            if '"event": "started"' in logtext:
                return {"lb": "ebpf", "node": lb.name, "pid": h.pid, "mode": "generic" if generic else "native",
                        "log": h.log}
            if not node.running(TAG):
                node.stop(TAG)
                raise NodeError(f"Failed to start ebpf on {lb.name}: {logtext.strip().splitlines()[-1] if logtext.strip() else 'exited'}")
            time.sleep(0.05)
        node.stop(TAG)
        raise NodeError(f"Failed to start ebpf on {lb.name}: no start within 10 s; log {h.log}")

    def stop(self) -> bool:
        lb, ing, _ = self._ports()
        return self.testbed.node(lb.name).stop(TAG, timeout=5)

    def running(self) -> bool:
        return self.testbed.node(self.cfg.role("lb").name).running(TAG)

    def stats(self) -> dict:
        """Read on the LB node (bpftool there), so it works over either transport."""
        node = self.testbed.node(self.cfg.role("lb").name)
        if not node.run(["test", "-d", str(self.pindir / "maps")], check=False).ok:
            raise NodeError(f"Failed to read ebpf stats on {node.name}: not running (no pinned maps under "
                            f"{self.pindir})")
        mode = node.read_text(str(self.statedir / "mode")).strip() or "native"
        # the backends file the running controller loaded (it keeps a copy in its state dir)
        names = node.run(["ls", str(self.statedir)], check=False).stdout.split()
        copy = next((n for n in names if n.startswith("backends.")), None)
        import tempfile
        local = Path(tempfile.mkdtemp()) / (copy or "backends.json")
        if copy:
            local.write_text(node.read_text(str(self.statedir / copy)))
        else:
            shutil.copyfile(self.backends_file(None), local)
        try:
            return read_stats(self.pindir, local, mode,
                              run=lambda *a: node.run(["bpftool", *a]).stdout)
        finally:
            shutil.rmtree(local.parent, ignore_errors=True)


def make(testbed) -> EbpfLB:
    return EbpfLB(testbed)


if __name__ == "__main__":
    sys.exit(main())
