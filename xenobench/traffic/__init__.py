"""Traffic: TRex STL profiles (trex_profiles/) sent by trafgen on the namespace testbed or by a
TRex server on the thesis testbed; the config's `traffic.generator` chooses.

    res = run_traffic(testbed, "udp_payload", {"payload": 22, "flows": 256}, rate_pps=50_000, duration_s=2)
    h = start_traffic(testbed, "background_split", {"split": "70/30"}, 50_000)   # background
    res = h.stop()

Both return a TrialResult (trial.py: a dict with the keys every generator fills, judged by the
contract's one validity rule trial.judge; it records the generator, the filled tunables and the
trial spec). rate_pps 0: as fast as the generator can (the rate ratio is then not checked). The
generators are a registry (GENERATORS: name → trial.Generator, from each generator's module); the
config's traffic.generator picks one. The harness fills the tunables that describe the testbed — vip, dport, dst-mac
(the LB's ingress port), src-mac (the loadgen's port), src-ip-base (traffic.src_ip_base), class-bits
and dns-classes from the backends file — unless the caller gives them, and only into a profile that
declares them (fill_tunables); any other STL profile gets the caller's tunables only, as in TRex.
"""

from __future__ import annotations

import difflib

from ..backends import load_backends
from ..errors import NodeError
from ..sampler import CounterReader
from ..errors import TrafficError  # noqa: F401  (the traffic layer's error type, importable from here)
from . import trafgen, trex, xdpgen
from .profiles import (Compiled, compile_frames, port_for, declared_tunables, resolve_profile,  # noqa: F401
                       to_trafgen, tunables_argv, write_pcap)
from .trial import Generator, TrialResult, TrialSpec, judge  # noqa: F401

# the generators, by their config name (config/schema/traffic.schema.yaml traffic.generator enum)
GENERATORS: dict[str, Generator] = {g.name: g for g in (trafgen.GENERATOR, trex.GENERATOR, xdpgen.GENERATOR)}


def traffic_config(cfg) -> dict:
    return dict(cfg.section("traffic"))  # defaults from config/schema/traffic.schema.yaml


def dns_classes(cfg, class_bits: int | None) -> tuple[int, list[int]]:
    """(k, classes of the DNS backend in a 2^k table) from the backends file; k defaults to the
    file's. A profile k larger than the LB's is fine (class c belongs where c & lb_mask goes)."""
    if cfg.service.backends is None:
        raise TrafficError(f"Failed to derive the DNS classes: service.backends is not set in {cfg.path}")
    bs = load_backends(cfg.service.backends)
    dns_node = cfg.role("dns_backend").name
    lb_classes = set(bs.classes_of(dns_node))
    k = bs.class_bits if class_bits is None else int(class_bits)
    if k < bs.class_bits:
        raise TrafficError(f"Failed to derive the DNS classes: class_bits {k} is below the load balancer's "
                           f"{bs.class_bits} (from {cfg.service.backends}); the split could not be exact")
    return k, [c for c in range(1 << k) if (c & bs.mask) in lb_classes]


def fill_tunables(cfg, profile, tunables: dict | None) -> dict:
    """The caller's tunables plus the testbed's, for a profile that declares them (caller wins).

    As TRex runs a profile: the user's tunables go to every profile, each key as given (`-t pg_id=7`
    → `--pg_id 7`); the testbed's (vip, dport, dst_mac, src_mac, src_ip_base, class_bits and
    dns_classes from the backends file) only to a profile that names them in its TESTBED_TUNABLES
    (profiles.declared_tunables: ours do), so a user's profile with its own argparse gets no
    option it does not know. A caller's `dst-mac` overrides the testbed's `dst_mac`."""
    declared = declared_tunables(profile)
    t = {}
    for k, v in (tunables or {}).items():
        k = str(k)
        t[k.replace("-", "_") if k.replace("-", "_") in declared else k] = v
    if not declared:
        return t
    lg = cfg.role("loadgen").iface()
    tc = traffic_config(cfg)
    base = {"vip": cfg.service.vip, "dport": cfg.service.port, "dst_mac": cfg.lb_mac}
    if lg.mac:
        base["src_mac"] = lg.mac
    if tc.get("src_ip_base"):
        base["src_ip_base"] = tc["src_ip_base"]
    if "dns_classes" in declared and "dns_classes" not in t:
        k, classes = dns_classes(cfg, t.get("class_bits"))
        base["class_bits"] = k
        base["dns_classes"] = ",".join(map(str, classes))
    return {**{k: v for k, v in base.items() if k in declared}, **t}


def compile_for(testbed_or_cfg, profile, tunables: dict | None) -> Compiled:
    cfg = getattr(testbed_or_cfg, "cfg", testbed_or_cfg)
    # for the testbed's port, as TRex fills a profile's default MACs from its port (port_for)
    return compile_frames(profile, fill_tunables(cfg, profile, tunables), port_for(cfg))


class TrafficHandle:
    """A running trial; stop() ends it (if still running) and returns its TrialResult."""

    def __init__(self, run):
        self._run = run

    def stop(self) -> TrialResult:
        return self._run.stop()

    def wait(self) -> TrialResult:
        return self._run.wait()

    def actor(self) -> tuple | None:
        """The running generator as an actor of the trial (xenobench.actors): (key, what, liveness,
        finished), None for one that cannot be watched (trafgen; a TRex server the harness did not
        start). xdpgen: its process, done once it printed its result; TRex: the server's process."""
        f = getattr(self._run, "actor", None)
        return f() if f is not None else None


def generator_of(cfg) -> Generator:
    """The generator the config's traffic.generator names."""
    g = traffic_config(cfg)["generator"]
    if g not in GENERATORS:
        near = difflib.get_close_matches(str(g), GENERATORS, n=1)
        raise TrafficError(f"Failed to select the traffic generator: traffic.generator {g!r} in {cfg.path} "
                           f"is not one of {', '.join(GENERATORS)}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    return GENERATORS[g]


#: the generator's smoke test in `testbed check`: frames of the udp_payload profile sent to a
#: backend's MAC, paced, which its receive counter must see
SMOKE_FRAMES = 200
SMOKE_PPS = 20_000.0


def generator_summary(testbed) -> dict:
    """The configured generator and how it sends on this testbed (Generator.describe): every trial's
    metadata and the report's header name it. A generator that cannot say is named only; one whose
    answer failed says why (error)."""
    gen = generator_of(testbed.cfg)
    out = {"name": gen.name}
    if gen.describe is not None:
        try:
            out.update(gen.describe(testbed))
        except (TrafficError, NodeError) as e:
            out["error"] = str(e)
    return out


def check_generator(testbed) -> list[tuple[str, bool, str]]:
    """`testbed check`'s rows for the configured generator: what it says of itself without sending
    (Generator.check), then, for a local generator, that it sends (smoke_generator). A generator
    that cannot send fails here, before the study's first trial. TRex's server starts after the check
    (rule trex_server): `traffic server start` runs the smoke test once it answers."""
    gen = generator_of(testbed.cfg)
    rows = list(gen.check(testbed)) if gen.check is not None else []
    if not all(ok for _, ok, _ in rows) or not gen.counts:
        return rows
    return [*rows, smoke_generator(testbed)]


def smoke_generator(testbed) -> tuple[str, bool, str]:
    """The generator sends: frames of the udp_payload profile to the first backend's MAC through the
    testbed's switch, SMOKE_FRAMES of them (a local generator's count; TRex's for their duration at
    SMOKE_PPS), all of which the backend's receive counter must count. (description, ok, detail)."""
    gen = generator_of(testbed.cfg)
    b = testbed.cfg.backend_nodes()[0]
    lg = testbed.cfg.role("loadgen")
    desc = (f"{gen.name} sends {'' if gen.counts else 'about '}{SMOKE_FRAMES} frames from {lg.name}:{lg.iface().name} "
            f"to {b.name}'s MAC {b.iface().mac}, {b.name} receives them")
    tun = {"payload": 22, "flows": 16, "dst_mac": b.iface().mac}
    reader = None
    try:
        reader = CounterReader(testbed.node(b.name), b.iface().name)
        rx0 = reader.read()
        res = (run_traffic(testbed, "udp_payload", tun, SMOKE_PPS, count=SMOKE_FRAMES) if gen.counts else
               run_traffic(testbed, "udp_payload", tun, SMOKE_PPS, duration_s=SMOKE_FRAMES / SMOKE_PPS))
        rx = reader.read() - rx0
    except (TrafficError, NodeError) as e:
        return desc, False, str(e)
    finally:
        if reader is not None:
            reader.close()
    tx = int(res.get("tx_packets") or 0)
    ok = tx > 0 and rx >= tx and (tx == SMOKE_FRAMES or not gen.counts)
    detail = f"sent {tx}, received {rx}" + (f" ({res.get('driver')} driver)" if res.get("driver") else "")
    if not ok:
        detail += (f"; {res.get('reason') or 'frames lost between the generator and the backend'}: check that "
                   f"{lg.name}:{lg.iface().name} is up and is the port the generator sends from, and the generator's "
                   "log under the testbed's state directory")
    return desc, ok, detail


def start_traffic(testbed, profile, tunables: dict | None, rate_pps: float, duration_s: float | None = None,
                  count: int | None = None, **opts) -> TrafficHandle:
    """Start a trial in the background and return at once; h.stop() → the TrialResult."""
    gen = generator_of(testbed.cfg)
    spec = TrialSpec.of(rate_pps, duration_s, count, counts=gen.counts)
    tun = fill_tunables(testbed.cfg, profile, tunables)
    return TrafficHandle(gen.start(testbed, profile, tun, spec, **opts))


def run_traffic(testbed, profile, tunables: dict | None, rate_pps: float, duration_s: float | None = None,
                count: int | None = None, **opts) -> TrialResult:
    """Run one trial to completion (blocking) and return its TrialResult."""
    gen = generator_of(testbed.cfg)
    spec = TrialSpec.of(rate_pps, duration_s, count, counts=gen.counts, blocking=True)
    tun = fill_tunables(testbed.cfg, profile, tunables)
    run = gen.start(testbed, profile, tun, spec, **opts)
    try:
        return run.wait()
    except BaseException:  # an error or ^C while waiting: the generator must not outlive the trial
        try:
            run.stop()
        except NodeError:
            pass
        raise
