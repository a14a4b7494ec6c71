"""The TRex stand-in (standins/trex/) on a real wire: started with TRex's command line
(`t-rex-64 -i -c N --cfg FILE`) in a network namespace whose veth gen0 leads to a sink namespace,
driven by the unmodified STLClient of lbr-trex-client 3.4.0 (tests/trex_standin_client.py, in the
same namespace), its frames sent by xdpgen and captured with tcpdump on the far side.

The expected wire sequence is derived here from trex-core v3.04's rules, independently of the
stand-in's code: a continuous stream on n cores runs on every core at rate / n, core i starting
i inter-packet gaps after core 0 (TrexStreamsCompiler::compile_stream_on_all_cores), so the wire
takes the cores round robin; core i's flow variable starts i steps on and steps n
(StreamVmInstructionFlowMan::update); the field-engine cache is divided cache // n per core, the
leftover to the first cores, at least 1 each (TrexVmSplitter::split), and each core replays its
own cached frames. With one core nothing is split (compile_stream_on_single_core).
"""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

from xenobench import REPO_ROOT
from xenobench.traffic.profiles import load_streams, read_pcap
from xenobench.traffic.trex import DAEMON_FLAGS, server_argv
from xenobench.traffic.trial import TrialSpec
from xenobench.traffic.xdpgen import BINARY

from .conftest import needs_root
from .trex_server_double import TrexServerDouble
from .xdp_sink import xdp_sink_pair

LAUNCHER = REPO_ROOT / "standins" / "trex" / "t-rex-64"
CLIENT = Path(__file__).with_name("trex_standin_client.py")
PROFILE = str(REPO_ROOT / "trex_profiles" / "background_split.py")
SYNC, ASYNC = 4501, 4500          # TRex's defaults; the namespace is private
RATE, DURATION = 20_000, 0.5
SRC_OFF = 14 + 12                 # IPv4 source address in the frame


@pytest.fixture(scope="module")
def wire(local_cfg):
    """Namespaces <prefix>xg-gen (gen0, loopback up: the RPC ports) and <prefix>xg-sink (sink0, GRO
    on: it takes XDP frames into its stack, where tcpdump sees them)."""
    if not BINARY.is_file():
        subprocess.run(["make", "-s", "-C", str(REPO_ROOT / "loadgen")], check=True)
    with xdp_sink_pair(local_cfg.prefix, drop=False) as (gen, sink):
        subprocess.run(["ip", "-n", gen, "link", "set", "lo", "up"], check=True)
        for ns in (gen, sink):  # no IPv6 chatter (DAD, router and MLD reports): sink0 sees test frames only
            subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                            "net.ipv6.conf.default.disable_ipv6=1"], check=True)
        yield gen, sink


@pytest.mark.parametrize("args, want", [
    (["-i", "-c", "14"], ["-i", "-c", "14", "--iom", "0", "--no-key"]),
    (["-i", "--no-key", "--iom", "0"], ["-i", "--no-key", "--iom", "0"]),  # given: not twice
])
def test_server_line_carries_the_daemons_flags_once(args, want):
    argv = server_argv({"trex": {"daemon": {"path": "/opt/trex/v3.04", "args": args}}})
    assert argv[-len(want):] == want and argv[4] == "/opt/trex/v3.04"


def test_standin_accepts_the_daemons_flags_as_trex_does(tmp_path):
    """t-rex-64 -i --iom 0 --no-key parses (argparse refused --no-key before: exit 2, "unrecognized
    arguments"); with a config file that does not exist it stops at the config, naming it."""
    daemon = [x for flag in DAEMON_FLAGS for x in flag]
    missing = tmp_path / "none.yaml"
    p = subprocess.run([str(LAUNCHER), "-i", *daemon, "--cfg", str(missing)], capture_output=True, text=True,
                       env={**os.environ, "TREX_STANDIN_PYTHON": sys.executable}, timeout=60)
    assert p.returncode == 2 and "unrecognized arguments" not in p.stderr and str(missing) in p.stderr, p.stderr
    bad = subprocess.run([str(LAUNCHER), "-i", "--iom", "7", "--cfg", str(missing)], capture_output=True, text=True,
                         env={**os.environ, "TREX_STANDIN_PYTHON": sys.executable}, timeout=60)
    assert bad.returncode == 2 and "--iom: invalid choice: 7" in bad.stderr, bad.stderr


@contextmanager
def standin(gen, tmp_path, cores):
    """The stand-in as an operator starts TRex: t-rex-64 -i -c N --cfg FILE; stopped with SIGTERM."""
    cfg = tmp_path / f"trex_cfg_{cores}.yaml"
    cfg.write_text("- port_limit: 2\n  version: 2\n  interfaces: [gen0, dummy]\n"
                   f"  zmq_rpc_port: {SYNC}\n  zmq_pub_port: {ASYNC}\n"
                   "  port_info:\n    - {dest_mac: '02:00:00:00:05:00', src_mac: '02:00:00:00:04:00'}\n    - {}\n")
    env = {**os.environ, "TREX_STANDIN_PYTHON": sys.executable}
    daemon = [x for flag in DAEMON_FLAGS for x in flag]  # as TRex's daemon starts it
    p = subprocess.Popen(["ip", "netns", "exec", gen, str(LAUNCHER), "-i", "-c", str(cores), "--cfg", str(cfg),
                          *daemon, "--xdpgen", str(BINARY)], stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stderr.readline()   # printed once the RPC sockets are bound
        assert f"{cores} cores per dual port, RPC {SYNC}" in line, line + p.stderr.read()
        yield p
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            rest = p.stderr.read()
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
        assert p.returncode == 0, rest
    left = subprocess.run(["pgrep", "-f", f"{BINARY} --dev gen0"], capture_output=True, text=True).stdout
    assert not left.strip(), f"xdpgen left running: {left}"


def scenario(gen, steps):
    job = json.dumps({"sync_port": SYNC, "async_port": ASYNC, "steps": steps})
    p = subprocess.run(["ip", "netns", "exec", gen, sys.executable, str(CLIENT)], input=job, capture_output=True,
                       text=True, timeout=180, cwd=REPO_ROOT)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])   # the client may print its warnings first
    assert len(out) == len(steps), out
    return out


def rx_packets(sink) -> int:
    return int(subprocess.run(["ip", "netns", "exec", sink, "cat", "/sys/class/net/sink0/statistics/rx_packets"],
                              capture_output=True, text=True, check=True).stdout)


@contextmanager
def capture(sink, path):
    """tcpdump on sink0 (every frame; the wire fixture turns IPv6 off, so no chatter arrives after the
    trial and sink0's counter and the capture see the same frames). On exit it waits until the capture holds every frame sink0
    received meanwhile (libpcap hands over a ring block when it is full or its timeout passes),
    then stops; info gets 'arrived' (sink0's rx_packets delta) and 'dropped' (the kernel's count)."""
    before = rx_packets(sink)
    p = subprocess.Popen(["ip", "netns", "exec", sink, "tcpdump", "-i", "sink0", "-Q", "in", "-n", "-U", "-s", "0",
                          "-w", str(path)], stderr=subprocess.PIPE, text=True)
    assert "listening on" in p.stderr.readline()
    info = {}
    try:
        yield info
    finally:
        info["arrived"] = rx_packets(sink) - before
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(read_pcap(path)) < info["arrived"]:
            time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        err = p.communicate(timeout=30)[1]
        info["dropped"] = next(int(line.split()[0]) for line in err.splitlines() if "dropped by kernel" in line)


def trex_wire(values, cache, cores, count):
    """The first `count` values of the variable on the wire (see the module docstring)."""
    if cores == 1:
        caches = [cache]
    else:
        per, left = divmod(cache, cores)
        if per < 1:
            per, left = 1, 0
        caches = [per + (1 if i < left else 0) for i in range(cores)]
    out = []
    for j in range(count):
        i, k = j % cores, j // cores
        if caches[i]:
            k %= caches[i]
        out.append(values[(i + k * cores) % len(values)])
    return out


def wire_period(cache, cores):
    """Frames after which the wire sequence repeats (cached streams): cores x lcm of the caches."""
    from math import lcm
    if cores == 1:
        return cache
    per, left = divmod(cache, cores)
    caches = {1} if per < 1 else {per, per + 1} if left else {per}
    return cores * lcm(*caches)


def sources(path):
    """The IPv4 source of every UDP frame captured, in order."""
    return [int.from_bytes(f[SRC_OFF:SRC_OFF + 4], "big") for f in read_pcap(path)
            if f[12:14] == b"\x08\x00" and f[23] == 17]


def trial(gen, sink, tmp_path, tunables, cores, tag):
    cap = tmp_path / f"{tag}.pcap"
    with capture(sink, cap) as info:
        out = scenario(gen, [{"op": "connect"}, {"op": "load", "profile": PROFILE, "tunables": tunables},
                             {"op": "start", "mult": f"{RATE}pps", "duration": DURATION}, {"op": "wait"},
                             {"op": "stats"}])
    assert all("ok" in o for o in out), out
    got = sources(cap)
    assert info["dropped"] == 0 and len(read_pcap(cap)) == info["arrived"], (info, len(got))
    return out[1]["ok"], out[4]["ok"], got


SPLITS = {}   # cores, cache -> measured DNS share, printed at the end


@needs_root
@pytest.mark.parametrize("cores,cache_cycles", [(1, 1), (8, 1), (14, 1), (14, 14)],
                         ids=["1-core", "8-cores", "14-cores", "14-cores-cache-14-cycles"])
def test_standin_sends_trexs_per_core_split_on_the_wire(wire, tmp_path, cores, cache_cycles):
    """background_split 70/30 (a 10-frame cycle): with one core 70/30 in every cycle; split over n
    cores with the cache of one cycle, each core replays its own 1-2 cached frames: 75/25 on 8 cores,
    71.4/28.6 on 14 (defect 5); with a cache of n cycles 70/30 again. Frame for frame as derived
    above; the client's tx counters are the frames that arrived."""
    gen, sink = wire
    _, (stream,) = load_streams("background_split", ["--split", "70/30"])
    values = stream["vm"]["instructions"][0]["value_list"]
    cycle = len(values)
    tun = ["--split", "70/30", "--cache-size", str(cycle * cache_cycles)]
    with standin(gen, tmp_path, cores):
        caches, stats, got = trial(gen, sink, tmp_path, tun, cores, f"c{cores}")
    cache = caches[0]
    assert cache == cycle * cache_cycles
    n = len(got)
    want = trex_wire(values, cache, cores, n)
    first_bad = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), None)
    assert first_bad is None, f"frame {first_bad}: source {got[first_bad]:#x}, TRex sends {want[first_bad]:#x}"
    # tx counters = what arrived (veth: every frame the device took reached the sink)
    assert stats["opackets"] == n and stats["queue_full"] == 0 and stats["oerrors"] == 0, (n, stats)
    assert stats["xstats"]["tx_good_packets"] == n
    # the split in every whole period of the wire sequence, from the class weights of one cycle
    period = wire_period(cache, cores)
    assert n >= 2 * period, n
    weights = Counter(v & 1 for v in values)
    expect = Counter(v & 1 for v in trex_wire(values, cache, cores, period))
    if cores == 1 or cache_cycles == cores:
        assert expect[0] * cycle == weights[0] * period   # the profile's split exactly
    for s in range(0, n - period + 1, period):
        assert Counter(v & 1 for v in got[s:s + period]) == expect, f"frames {s}..{s + period - 1}"
    share = expect[0] / period
    SPLITS[(cores, cache)] = share
    print(f"\n{cores} cores, cache {cache}: DNS share {share:.4f} in every {period} frames "
          f"(measured over {n} frames: {Counter(v & 1 for v in got)[0] / n:.4f})")
    if (cores, cache_cycles) == (14, 1):
        assert (expect[0], period) == (10, 14)       # 71.4 / 28.6
    if (cores, cache_cycles) == (8, 1):
        assert (expect[0], period) == (12, 16)       # 75 / 25


REFUSALS = [
    # (id, cores, steps after connect + load, step whose error we check, the server's wording)
    ("cache-above-10000", 14, ["--cache-size", "10010"],
     [{"op": "start", "mult": "1000pps", "duration": 0.2}], "Cache is too big try to reduce it "),
    ("zero-mult", 14, [], [{"op": "start", "mult": "0pps", "duration": 0.2}], "multiplier can't be zero"),
    ("mult-above-line-rate", 14, [], [{"op": "start", "mult": "200%", "duration": 0.2, "force": False}],
     "Expected L1 B/W: '20 Gbps' exceeds port line rate: '10 Gbps'"),
    ("mult-type", 14, [], [{"op": "rpc", "method": "start_traffic", "owned": True,
                            "params": {"port_id": 0, "mul": {"type": "kpps", "value": 1, "op": "abs"},
                                       "duration": 1.0, "force": True}}],
     "field 'type' can only be one of ['raw' ,'bps' ,'bpsl1' ,'pps' ,'percentage']"),
    ("mult-op", 14, [], [{"op": "rpc", "method": "start_traffic", "owned": True,
                          "params": {"port_id": 0, "mul": {"type": "pps", "value": 1, "op": "add"},
                                     "duration": 1.0, "force": True}}],
     "start message can only specify absolute speed rate"),
    ("port-taken", 14, [], [{"op": "connect", "client": "b", "user": "bob"}, {"op": "acquire", "client": "b"}],
     "port is already taken by 'a'"),
    ("not-owner", 14, [], [{"op": "connect", "client": "b", "user": "bob"},
                           {"op": "rpc", "client": "b", "method": "stop_traffic",
                            "params": {"port_id": 0, "handler": "0badc0de"}}],
     "port is not owned by you or your current executing session"),
]


@needs_root
@pytest.mark.parametrize("cores,tunables,steps,wording", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_standin_refusals_arrive_as_trexerror_with_the_servers_wording(wire, tmp_path, cores, tunables, steps,
                                                                       wording):
    gen, _ = wire
    with standin(gen, tmp_path, cores):
        out = scenario(gen, [{"op": "connect"},
                             {"op": "load", "profile": PROFILE, "tunables": ["--split", "70/30", *tunables]},
                             *steps])
    assert all("ok" in o for o in out[:-1]), out
    assert "error" in out[-1], out
    assert out[-1]["error"].endswith(wording), f"{out[-1]['error']!r} does not end with {wording!r}"


@needs_root
def test_standin_one_core_takes_a_cache_above_10000_and_force_acquire_takes_the_port(wire, tmp_path):
    """TRex checks the cache only when it splits a stream (TrexVmSplitter::split): on one core a cache
    of 10010 frames runs; a forced acquire takes a port from its owner (TrexPort::acquire)."""
    gen, _ = wire
    with standin(gen, tmp_path, 1):
        out = scenario(gen, [{"op": "connect"},
                             {"op": "load", "profile": PROFILE, "tunables": ["--split", "70/30", "--cache-size", "10010"]},
                             {"op": "start", "mult": "1000pps", "duration": 0.3}, {"op": "wait"}, {"op": "stats"},
                             {"op": "connect", "client": "b", "user": "bob"},
                             {"op": "acquire", "client": "b", "force": True},
                             {"op": "rpc", "client": "b", "method": "get_port_status", "params": {"port_id": 0}}])
    assert all("ok" in o for o in out), out
    assert out[1]["ok"] == [10010] and out[4]["ok"]["opackets"] > 0
    assert out[7]["ok"]["owner"] == "bob"


DRIVER_SPLITS = {}   # (cores, profile told) -> measured DNS share, printed at the end


@needs_root
# told=1 on one core is the 1-core case itself (the profile told the server's own count): not repeated
@pytest.mark.parametrize("cores,told", [(1, None), (8, None), (14, None), (8, 1), (14, 1)],
                         ids=["1-core", "8-cores", "14-cores", "8-cores-old-cache", "14-cores-old-cache"])
def test_harness_trex_driver_split_on_the_wire(wire, tmp_path, cores, told):
    """The harness's own TRex path (TrexDriver, the worker process, STLClient, background_split
    70/30) against the stand-in at 1, 8 and 14 cores, the frames counted by class where they
    arrive (sink0's rx counter = the capture). The driver asks the server for its cores
    (dp_core_count_per_port) and the profile caches lcm(cycle, cores) frames: 70/30 exactly in every
    period on every core count. told=1 is the driver before the fix (the
    profile caches one cycle, as if TRex had one core): 75.0 / 71.4 % to the DNS class on 8 / 14 cores.
    Frame for frame what TRex sends (trex_wire, derived above). The trial's validity (the achieved
    rate) is not asserted: on this shared machine xdpgen is at times descheduled."""
    gen, sink = wire
    tun = {"split": "70/30", **({"cores": told} if told else {})}
    code = ("import json; from xenobench.config import section_with_defaults; "
            "from xenobench.traffic.trex import TrexDriver; from xenobench.traffic.trial import TrialSpec; "
            "t = section_with_defaults('traffic', {'generator': 'trex', 'trex': {'server': '127.0.0.1', "
            f"'sync_port': {SYNC}, 'async_port': {ASYNC}, 'ports': [0], 'version': 'v3.04'}}}}); "
            f"print(json.dumps(TrexDriver(t).run('background_split', {tun!r}, "
            f"TrialSpec.of({RATE}, {DURATION}, counts=False, blocking=True))))")
    cap = tmp_path / "driver.pcap"
    with standin(gen, tmp_path, cores):
        with capture(sink, cap) as info:
            p = subprocess.run(["ip", "netns", "exec", gen, sys.executable, "-c", code], capture_output=True,
                               text=True, timeout=180, cwd=REPO_ROOT)
        assert p.returncode == 0, p.stderr
        res = json.loads(p.stdout.strip().splitlines()[-1])
        (got_streams,) = scenario(gen, [{"op": "connect"}, {"op": "rpc", "method": "get_all_streams",
                                                            "params": {"port_id": 0, "profile_id": "*"}}])[1:]
    got = sources(cap)
    assert info["dropped"] == 0 and len(read_pcap(cap)) == info["arrived"], (info, len(got))
    assert res["generator"] == "trex" and res["queue_full_count"] == 0, res
    assert res["tx_packets"] == len(got), (res["tx_packets"], len(got))
    assert res["server_cores"] == cores and res["tunables"]["cores"] == (told or cores)
    (stream,) = got_streams["ok"]["profiles"]["_"].values()
    values, cache = stream["vm"]["instructions"][0]["value_list"], stream["vm"]["cache"]
    assert len(values) == 10 and Counter(v & 1 for v in values) == {0: 7, 1: 3}
    assert cache == (10 if told else {1: 10, 8: 40, 14: 70}[cores])
    assert got == trex_wire(values, cache, cores, len(got))
    period = wire_period(cache, cores)
    whole = len(got) // period * period
    assert whole >= 2 * period, len(got)
    dns = [Counter(v & 1 for v in got[s:s + period])[0] for s in range(0, whole, period)]
    want = {(1, None): (10, 7), (8, None): (40, 28), (14, None): (70, 49),
            (8, 1): (16, 12), (14, 1): (14, 10)}[(cores, told)]
    assert (period, set(dns)) == (want[0], {want[1]}), (period, Counter(dns))
    share = sum(dns) / whole
    DRIVER_SPLITS[(cores, told)] = share
    print(f"\nharness TrexDriver, {cores} cores, profile told {told or cores} core(s), cache {cache}: DNS share "
          f"{share * 100:.1f} % in {whole} frames ({whole // period} periods of {period}; all {len(got)} frames "
          f"arrived: {Counter(v & 1 for v in got)[0] / len(got) * 100:.1f} %)")


# --- without a wire: the stand-in's compiler behind the test double (no root needed) --------------
def _tcfg(srv):
    from xenobench.config import section_with_defaults
    return section_with_defaults("traffic", {"generator": "trex", "trex": {
        "server": "127.0.0.1", "sync_port": srv.sync_port, "async_port": srv.async_port, "ports": [0],
        "version": "v3.04"}})


@pytest.mark.parametrize("cores,told,period,dns", [
    (1, None, 10, 7), (8, None, 40, 28), (14, None, 70, 49),     # the driver asks the server: exact
    (8, 1, 16, 12), (14, 1, 14, 10),                             # the one-cycle cache (before the fix)
])  # told=1 on one core is the 1-core case itself
def test_server_double_compiles_the_harness_trial_as_trex_over_its_cores(cores, told, period, dns):
    """The cycle the stand-in would send for the harness's 70/30 trial: one TRex period of
    cores x (largest per-core cache) frames, with the DNS class's share TRex gives it. The driver
    passes the server's dp_core_count_per_port as the profile's cores, and its cache of
    lcm(10, cores) frames splits evenly: 70/30 on every core count; told=1 (a profile caching one
    cycle) gives 75/25 on 8 cores and 71.4/28.6 on 14."""
    from xenobench.traffic.trex import TrexDriver
    tun = {"split": "70/30", **({"cores": told} if told else {})}
    with TrexServerDouble(ports=2, cores=cores) as srv:
        res = TrexDriver(_tcfg(srv)).run("background_split", tun, TrialSpec.of(2000, duration_s=0.2, counts=False))
        (plan,) = srv.plans
        frames = plan.cycle()
    assert res["valid"] and plan.pps == 2000 and res["server_cores"] == cores
    assert len(frames) == period
    assert Counter(f[SRC_OFF + 3] & 1 for f in frames)[0] == dns


@pytest.mark.parametrize("tun,msg", [
    # the server's own limit, reached by a profile that believes TRex has one core
    ({"cores": 1, "cache_size": 10010}, "Failed to start traffic on TRex server 127.0.0.1 ports [0]: Port 0 : *** "
                                        "Cache is too big try to reduce it"),
    # the profile, told the server's 14 cores, refuses first and says why
    ({"cache_size": 9990}, "argument --cache-size: 9990 is not a multiple of lcm(10, 14) = 70, the stream cycle "
                            "of 10 frames that 14 TRex cores divide evenly (each core replays its share of the cache; "
                            "the sequence and the split would no longer be exact)"),
    ({"cache_size": 10010}, "argument --cache-size: 10010 is more than the 10000 frames TRex takes "
                                              "for a stream it splits over 14 cores (TrexVmSplitter::split: \"Cache is "
                                              "too big\"); give a smaller multiple of 70 or 0"),
    ({"hosts": 1000}, "argument --cache-size: an exact split of the 10000-frame stream cycle over 14 TRex cores "
                      "needs a cache of lcm(10000, 14) = 70000 frames, more than the 10000 TRex takes for a stream it "
                      "splits; give --cache-size 0 (no cache: the cores run the field engine per frame, the split "
                      "stays exact) or a shorter cycle"),
], ids=["server-limit", "not-a-whole-split", "above-10000", "default-above-10000"])
def test_split_cache_above_10000_or_uneven_is_refused_through_the_harness(tun, msg):
    from xenobench.traffic import TrafficError
    from xenobench.traffic.trex import TrexDriver
    with TrexServerDouble(ports=2, cores=14) as srv:
        with pytest.raises(TrafficError) as e:
            TrexDriver(_tcfg(srv)).run("background_split", {"split": "70/30", **tun},
                                       TrialSpec.of(2000, duration_s=0.2, counts=False))
        # the profile's refusals come before anything is sent to the server
        assert ("add_stream" in srv.methods()) == msg.startswith("Failed to start"), srv.methods()
    assert str(e.value).endswith(msg), str(e.value)


def test_flow_var_range_padding_and_split_follow_trex():
    """A range whose size is not a multiple of the step is padded to a true cycle
    (TrexRpcCmdAddStream::handle_range_padding: 0..9 step 3 becomes 0..11), and split over two cores
    the round robin of the cores gives back the unsplit sequence."""
    from trex_standin import TrexStandin, split_stream
    ins = {"type": "flow_var", "name": "v", "size": 1, "op": "inc", "init_value": 1, "min_value": 0,
           "max_value": 9, "step": 3}
    var = TrexStandin._parse_flow_var(ins)
    assert (var.lo, var.hi) == (0, 11)
    assert [var.value(k) for k in range(5)] == [1, 4, 7, 10, 1]
    from trex_standin import Stream
    s = Stream(1, {}, "continuous", "pps", 1.0, True, True, 3, -1, 0, bytes(60), [("var", var)], 0, False)
    a, b = split_stream(s, 2)
    assert [a.vm[0][1].value(k) for k in range(3)] == [1, 7, 1] and [b.vm[0][1].value(k) for k in range(3)] == [4, 10, 4]
