"""Katran (facebookincubator/katran), a third-party component: where its checkout is, and its BPF
programs built from it with Katran's own compiler flags.

The harness never carries Katran's code: it locates a checkout (`katran.checkout` in the config,
default ../shared/katran relative to this repository; XENOBENCH_KATRAN_DIR overrides both, e.g.
for a second work tree of the repository) and builds from it, outside the checkout and outside git,
into .xenobench/build/katran/<key>/, key = a digest of every source file the build reads, the flags
and the compiler versions: a changed source or compiler gives a new build, an unchanged one is
reused (content, not timestamps). Only the newest build is kept.

Built (Katran's katran/lib/Makefile-bpf and katran/decap/Makefile-bpf give the flags):
- balancer.bpf.o: katran/lib/bpf/balancer.bpf.c, program `balancer_ingress`, the load balancer;
- decap_chain.bpf.o: switch/katran_decap_chain.bpf.c, our wrapper that compiles Katran's
  katran/decap/bpf/decap.bpf.c unchanged as a function and runs it in front of a backend's own
  XDP program (xenobench.fabric), with the same flags.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import REPO_ROOT
from .errors import XenobenchError

TESTED_COMMIT = "19f08fec82fb7b5fb14d935a80057bdc0897c8de"
ENV = "XENOBENCH_KATRAN_DIR"
DEFAULT_CHECKOUT = "../shared/katran"
BUILD_ROOT = REPO_ROOT / ".xenobench" / "build" / "katran"
DECAP_CHAIN_SRC = REPO_ROOT / "switch" / "katran_decap_chain.bpf.c"
BALANCER_SRC = "katran/lib/bpf/balancer.bpf.c"
DECAP_SRC = "katran/decap/bpf/decap.bpf.c"
#: the directories of the checkout the two programs include from (their digest keys the build)
SOURCE_DIRS = ("katran/lib/bpf", "katran/lib/linux_includes", "katran/decap/bpf")
#: Katran's flags (katran/lib/Makefile-bpf: $(DEBUGBPF) -D__KERNEL__ -Wno-... -O2 -emit-llvm -c -g, | llc)
CFLAGS = ("-DDEBUG", "-D__KERNEL__", "-Wno-unused-value", "-Wno-pointer-sign",
          "-Wno-compare-distinct-pointer-types", "-O2", "-emit-llvm", "-c", "-g")
LLCFLAGS = ("-march=bpf", "-filetype=obj")
BALANCER_PROG = "balancer_ingress"
DECAP_CHAIN_PROG = "xb_decap_chain"


class KatranError(XenobenchError):
    pass


@dataclass(frozen=True)
class KatranBuild:
    checkout: Path
    dir: Path

    @property
    def balancer(self) -> Path:
        return self.dir / "balancer.bpf.o"

    @property
    def decap_chain(self) -> Path:
        return self.dir / "decap_chain.bpf.o"


def locate(cfg=None) -> Path:
    """The Katran checkout: $XENOBENCH_KATRAN_DIR, else katran.checkout of the config (relative to
    this repository), else ../shared/katran; refused by name when it holds no Katran sources."""
    env = os.environ.get(ENV)
    if env:
        path, where = Path(env), f"${ENV}"
    else:
        raw = (cfg.section("katran").get("checkout") if cfg is not None else None) or DEFAULT_CHECKOUT
        path = Path(raw) if Path(raw).is_absolute() else REPO_ROOT / raw
        where = (f"katran.checkout of {cfg.path}, default {DEFAULT_CHECKOUT}" if cfg is not None
                 else f"the default {DEFAULT_CHECKOUT}")
    path = path.resolve()
    missing = [s for s in (BALANCER_SRC, DECAP_SRC) if not (path / s).is_file()]
    if missing:
        raise KatranError(
            f"Failed to locate a Katran checkout: {path} (from {where}, relative to {REPO_ROOT}) has no "
            f"{' or '.join(missing)}; clone https://github.com/facebookincubator/katran (tested with commit "
            f"{TESTED_COMMIT}) and set katran.checkout in the config or ${ENV} to its directory")
    return path


def _tool_version(tool: str) -> str:
    try:
        p = subprocess.run([tool, "--version"], capture_output=True, text=True)
    except FileNotFoundError:
        raise KatranError(f"Failed to build Katran: {tool} is not installed (apt-get install clang llvm)") from None
    return p.stdout.strip()


def _key(checkout: Path, clang: str, llc: str) -> str:
    h = hashlib.sha256()
    for part in (*CFLAGS, *LLCFLAGS, _tool_version(clang), _tool_version(llc)):
        h.update(part.encode() + b"\0")
    files = sorted(p for d in SOURCE_DIRS for p in (checkout / d).rglob("*") if p.is_file())
    for p in files:
        h.update(str(p.relative_to(checkout)).encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(DECAP_CHAIN_SRC.read_bytes())
    return h.hexdigest()[:16]


def _compile(src: Path, out: Path, include: Path, clang: str, llc: str) -> None:
    cc = subprocess.run([clang, f"-I{include}", *CFLAGS, str(src), "-o", "-"], capture_output=True)
    if cc.returncode != 0:
        raise KatranError(f"Failed to build {src} with Katran's flags: {cc.stderr.decode(errors='replace').strip()}")
    lc = subprocess.run([llc, *LLCFLAGS, "-o", str(out)], input=cc.stdout, capture_output=True)
    if lc.returncode != 0:
        raise KatranError(f"Failed to build {src} (llc): {lc.stderr.decode(errors='replace').strip()}")


def planned(cfg=None, *, clang: str = "clang", llc: str = "llc") -> KatranBuild:
    """Where build() puts (or finds) the objects of the located checkout, without building."""
    checkout = locate(cfg)
    return KatranBuild(checkout, BUILD_ROOT / _key(checkout, clang, llc))


def build(cfg=None, *, clang: str = "clang", llc: str = "llc") -> KatranBuild:
    """Build (or reuse) Katran's balancer and the decap chain from the located checkout."""
    b = planned(cfg, clang=clang, llc=llc)
    checkout, out, key = b.checkout, b.dir, b.dir.name
    if b.balancer.is_file() and b.decap_chain.is_file():
        return b
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=BUILD_ROOT))
    try:
        _compile(checkout / BALANCER_SRC, tmp / b.balancer.name, checkout, clang, llc)
        _compile(DECAP_CHAIN_SRC, tmp / b.decap_chain.name, checkout, clang, llc)
        try:
            os.rename(tmp, out)  # atomic: a concurrent build of the same key wins, ours is dropped
        except OSError:
            if not (b.balancer.is_file() and b.decap_chain.is_file()):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in BUILD_ROOT.iterdir():  # only the newest build is kept
        if old.is_dir() and old.name != key and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)
    return b
