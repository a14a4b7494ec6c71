"""TRex driver for the thesis testbed: the same profiles, sent by a TRex server through STLClient.

Trial: connect → check the server version against traffic.trex.version → read the server's
data-path cores (get_server_system_info: dp_core_count_per_port) → reset(ports) → load the profile
per port (STLProfile.load with the tunables, direction port % 2, as TRex's console; a profile that
declares the tunable `cores` gets the server's count, so its field-engine cache divides evenly over
the cores TRex splits the stream across: trex_profiles/xb_common.py cache_size) → add_streams →
clear_stats → start(mult="<N>pps" per port, or "100%" for rate 0, duration) → wait_on_traffic →
stop → get_stats/get_xstats per port → disconnect. plan() lists these calls without connecting (`traffic run --dry-run`). TRex
sends for a duration: the contract's TrialSpec turns a count into count / rate seconds
(GENERATOR.counts is False), and a trial is judged by the contract's one rule (trial.judge).

The multiplier is written in plain decimal: the client's decode_multiplier
(trex/utils/parsing_opts.py) accepts only digits with an optional decimal point before the unit, so "1.5e+07pps" (what
`:g` makes of 15 Mpps) is refused with TRexArgumentError('mult') before anything is sent. The
achieved rate is the sum of opackets over the ports / duration (a run stopped on request: their
growth between two get_stats inside it, live_rate); TRex's global queue_full is judged
against traffic.trex.queue_full_max_pct % of them (evaluate).

The STLClient class is injectable (client_factory) so the driver is tested against a test double.
Without one, the trial runs in a child process (trex_worker.py) with the real STLClient: importing
the TRex client evicts the harness's scapy and yaml from sys.modules.

Starting and stopping the TRex server (t-rex-64 -i, interactive mode) over SSH on the loadgen node
belongs to the deploy step: start_server()/stop_server(), path and arguments from the config.
"""

from __future__ import annotations

import logging
import time

from ..errors import TrafficError
from .profiles import declared_tunables, load_streams, resolve_profile, tunables_argv
from .trial import Generator, TrialResult, TrialSpec

logger = logging.getLogger(__name__)

SERVER_TAG = "trex-server"


# lbr-trex-client 3.4.0 imports `imp` (trex/stl/trex_stl_streams.py), removed in Python 3.12
SUPPORTED_PYTHON = (3, 12)


def _check_python() -> None:
    import sys
    if sys.version_info >= SUPPORTED_PYTHON:
        raise TrafficError(f"Failed to load the TRex client: Python {sys.version.split()[0]} ({sys.executable}) "
                           "is too new; lbr-trex-client 3.4.0 imports the module imp, removed in Python 3.12 "
                           "(use Python 3.10 or 3.11, see pyproject.toml)")


def pps_mult(rate_pps: float) -> str:
    """A rate as STLClient.start's mult: plain decimal pps (never exponent form), or "100%" for
    rate 0 (as fast as the ports go)."""
    if rate_pps <= 0:
        return "100%"
    text = f"{rate_pps:.3f}".rstrip("0").rstrip(".")
    if float(text) <= 0:
        raise TrafficError(f"Failed to start traffic on TRex: rate {rate_pps!r} pps per port rounds to 0 "
                           "at TRex's resolution (0.001 pps)")
    return f"{text}pps"


def _stl_client_class():
    _check_python()
    from .stl_loader import without_matplotlib
    with without_matplotlib():  # the client's bundled scapy imports pyplot only to offer plotting (~1 s)
        import lbr_trex_client  # noqa: F401  (puts trex on sys.path)
        from trex.stl.api import STLClient
    return STLClient


def _stl_profile_loader(path, tunables, direction=0, port_id=0):
    """The profile's streams for one port, loaded by the client's own loader (stl_loader.load)."""
    _check_python()
    from .stl_loader import Refused, load
    try:
        return load(str(path), tunables, direction=direction, port_id=port_id)
    except Refused as e:
        raise TrafficError(f"Failed to load profile {path} with tunables {' '.join(tunables) or '(none)'}: "
                           f"{e}") from None


def server_cores(c) -> int | None:
    """The server's data-path cores per dual port, over which it splits each stream: get_system_info's
    dp_core_count_per_port (trex-core doc/trex_rpc_server_spec.asciidoc, "DP core count per pair of
    ports"; the client keeps the reply from connect(): STLClient.get_server_system_info). None if
    the server does not say."""
    info = c.get_server_system_info() or {}
    n = info.get("dp_core_count_per_port")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else None


def with_cores(profile, tunables: dict | None, cores: int | None) -> dict:
    """The tunables with the server's core count for a profile that declares `cores` (ours: the
    field-engine cache then divides evenly over the cores, xb_common.cache_size) unless given."""
    t = dict(tunables or {})
    if cores is not None and "cores" in declared_tunables(profile) and t.get("cores") is None:
        t["cores"] = cores
    return t


class TrexDriver:
    def __init__(self, tcfg: dict, client_factory=None, profile_loader=None):
        self.tcfg = tcfg
        self.in_process = client_factory is not None
        t = _trex_section(tcfg)
        self.server = t["server"]
        self.sync_port = t["sync_port"]
        self.async_port = t["async_port"]
        self.ports = list(t["ports"])
        self.version = t["version"]
        self.user = t["user"]
        self.client_factory = client_factory
        self.server_version = None
        self.cores = None   # the server's dp_core_count_per_port, read after connect()
        self.queue_full_max_pct = float(t["queue_full_max_pct"])
        self.profile_loader = profile_loader or _stl_profile_loader

    def _client(self):
        return self.client_factory(username=self.user, server=self.server, sync_port=self.sync_port,
                                   async_port=self.async_port)

    def _connect(self, c) -> None:
        where = f"TRex server {self.server}:{self.sync_port}"
        try:
            c.connect()
        except Exception as e:  # STLError / TRexError / OSError
            raise TrafficError(f"Failed to connect to {where}: {_reason(e)} "
                               "(is the server running? `xenobench traffic server start` starts it from traffic.trex.daemon; "
                               "the workflow's rule trex_server does)") from None
        if self.version:
            try:
                got = c.get_server_version()
            except Exception as e:
                raise TrafficError(f"Failed to read the version of {where}: {_reason(e)}") from None
            have = str(got.get("version", "") if isinstance(got, dict) else got).strip()
            self.server_version = have
            if have != str(self.version):
                raise TrafficError(f"Failed to connect to {where}: server version {have!r} does not match "
                                   f"traffic.trex.version {self.version!r} in the config")

    def mult(self, rate_pps: float) -> str:
        """The requested rate is the total over the ports; each port gets its share."""
        return pps_mult(rate_pps / len(self.ports)) if rate_pps > 0 else pps_mult(0)

    def plan(self, profile, tunables: dict | None, spec: TrialSpec, streams: list[dict]) -> dict:
        """The STLClient calls a trial makes, in order, without connecting (the dry run).
        streams: the profile's STLStream JSON (profiles.load_streams) for the summary."""
        argv = tunables_argv(tunables)
        rate_pps, duration_s = spec.rate_pps, spec.duration_s
        dur = duration_s if duration_s else -1
        calls = [f"STLClient(username={self.user!r}, server={self.server!r}, sync_port={self.sync_port}, "
                 f"async_port={self.async_port})",
                 "connect()"]
        if self.version:
            calls.append(f"get_server_version()   # must be {self.version!r} (traffic.trex.version)")
        declares_cores = "cores" in declared_tunables(profile) and (tunables or {}).get("cores") is None
        calls.append("get_server_system_info()   # dp_core_count_per_port: the cores TRex splits each stream over"
                     + (", passed to the profile as --cores N" if declares_cores else ""))
        calls.append(f"reset(ports={self.ports})")
        shown = argv + (["--cores", "N"] if declares_cores else [])
        for port in self.ports:
            calls.append(f"add_streams(STLProfile.load({str(resolve_profile(profile))!r}, direction={port % 2}, "
                         f"port_id={port}, tunables={shown!r}).get_streams(), ports=[{port}])")
        calls += ["clear_stats()",
                  f"start(ports={self.ports}, mult={self.mult(rate_pps)!r}, duration={dur!r}, force=True)",
                  f"wait_on_traffic(ports={self.ports}, timeout={(duration_s or 0) * 2 + 30!r})",
                  f"stop(ports={self.ports})", f"get_stats(ports={self.ports})",
                  *[f"get_xstats({p})" for p in self.ports], "disconnect()"]
        return {"generator": "trex", "server": f"{self.server}:{self.sync_port}", "ports": self.ports,
                "mult": self.mult(rate_pps), "requested_pps": float(rate_pps), "duration_s": duration_s,
                "spec": spec.to_dict(),
                "profile": str(resolve_profile(profile)), "tunables": argv,
                "streams": [stream_summary(s) for s in streams], "calls": calls}

    def start(self, profile, tunables: dict | None, spec: TrialSpec):
        path = resolve_profile(profile)
        rate_pps, duration_s = spec.rate_pps, spec.duration_s
        self.mult(rate_pps)  # refuse a rate TRex cannot express before starting anything
        if not self.in_process:
            return TrexProcessRun(self.tcfg, str(path), dict(tunables or {}), spec)
        c = self._client()
        self._connect(c)
        try:
            self.cores = server_cores(c)
            tunables = with_cores(path, tunables, self.cores)
            argv = tunables_argv(tunables)
            c.reset(ports=self.ports)
            for port in self.ports:
                # as TRex's console loads a profile for each port (STLClient.start_line: direction port % 2)
                streams = self.profile_loader(path, argv, port % 2, port)
                c.add_streams(streams, ports=[port])
            c.clear_stats()
            sent = time.monotonic()
            c.start(ports=self.ports, mult=self.mult(rate_pps), duration=duration_s if duration_s else -1, force=True)
            started = (sent, time.monotonic())
        except TrafficError:
            _quiet_disconnect(c)
            raise
        except Exception as e:
            _quiet_disconnect(c)
            raise TrafficError(f"Failed to start traffic on TRex server {self.server} ports {self.ports}: "
                               f"{_reason(e)}") from None
        return TrexRun(self, c, spec, str(path), tunables, started)

    def run(self, profile, tunables, spec: TrialSpec) -> TrialResult:
        if spec.duration_s is None:
            raise TrafficError("Failed to run TRex: give a duration or a count")
        return self.start(profile, tunables, spec).wait()


def start(testbed, profile, tunables: dict, spec: TrialSpec, **opts):
    """The contract's start: a TRex trial with the config's traffic.trex server."""
    run = TrexDriver(testbed.cfg.section("traffic"), **opts).start(profile, tunables, spec)
    run.server_node = testbed.node_for_role("loadgen")
    return run


def server_actor(node) -> tuple | None:
    """The TRex server as an actor of a trial (TrafficHandle.actor): the process `traffic server
    start` (the workflow's rule trex_server) started on the loadgen node; None for a server the
    harness did not start (its process is not known: the trial's RPC calls fail when it is gone)."""
    from ..actors import tagged
    if node is None or node.handle(SERVER_TAG) is None:
        return None
    return ("generator_trex", "generator trex (TRex server)", tagged(node, SERVER_TAG), None)


def plan(cfg, profile, tunables: dict, spec: TrialSpec) -> dict:
    """The dry run: the STLClient calls of the trial, with the profile's streams (loaded, not sent)."""
    _, streams = load_streams(profile, tunables)
    return TrexDriver(cfg.section("traffic")).plan(profile, tunables, spec, streams)


GENERATOR = Generator("trex", start, plan, counts=False)


class TrexRun:
    server_node = None  # the loadgen node (start()): the server watched as an actor

    def actor(self) -> tuple | None:
        return server_actor(self.server_node)

    def __init__(self, drv: TrexDriver, c, spec: TrialSpec, profile, tunables, started: tuple[float, float]):
        """started: (monotonic time the start request was sent, the time its reply came back)."""
        self.drv, self.c, self.spec, self.duration = drv, c, spec, spec.duration_s
        self.profile, self.tunables = profile, tunables
        self.started = started
        self._result = None
        # an open-ended run (stopped on request, as update's background): its rate is judged over a
        # window inside it, between two reads of the ports' opackets (live_rate)
        self.live0 = self._live() if not self.duration else None

    def _live(self) -> tuple[float, int, float] | None:
        """(the middle of a get_stats request and its reply, the ports' opackets then, half the
        round trip); None when the read fails (the window's rate is then not known)."""
        try:
            a = time.monotonic()
            st = self.c.get_stats(ports=self.drv.ports)
            b = time.monotonic()
        except Exception as e:
            logger.warning("TRex get_stats during the run: %s", _reason(e))
            return None
        return (a + b) / 2, sum(int(st.get(p, st.get(str(p), {})).get("opackets", 0)) for p in self.drv.ports), (b - a) / 2

    def wait(self) -> dict:
        try:
            self.c.wait_on_traffic(ports=self.drv.ports, timeout=(self.duration or 0) * 2 + 30)
        except Exception as e:
            # a server gone (the client disconnected): stop() below fails and names it, this would
            # only echo it; otherwise (a timeout) the trial goes on to stop() and this says why
            connected = getattr(self.c, "is_connected", lambda: True)()  # TRexClient.is_connected (trex/common/trex_client.py)
            (logger.warning if connected else logger.debug)("TRex wait_on_traffic: %s", _reason(e))
        return self.stop()

    def stop(self) -> dict:
        if self._result is not None:
            return self._result
        c, ports = self.c, self.drv.ports
        try:
            # stopped first: a trial stopped early (an actor gone, xenobench.actors) still sends, and
            # frames sent after the statistics were read would reach the backends uncounted; TRex keeps
            # the ports' statistics after stop (until clear_stats)
            live1 = self._live() if self.live0 is not None else None
            sent = time.monotonic()
            c.stop(ports=ports)
            stopped = (sent, time.monotonic())
            stats = c.get_stats(ports=ports)
            xstats = {p: c.get_xstats(p) for p in ports}
        except Exception as e:
            _quiet_disconnect(c)
            raise TrafficError(f"Failed to collect statistics from TRex server {self.drv.server}: {_reason(e)}") from None
        _quiet_disconnect(c)
        # the rate over the time it sent: the duration, or less when stopped early. The server began
        # and ended sending between each request and its reply: each at the midpoint (an RPC over
        # SSH or the lab's network takes milliseconds, 2-4 % of a 0.5 s burst if counted whole),
        # uncertain by half of both round trips together
        elapsed, uncertain = send_time(self.started, stopped)
        duration = min(self.duration, elapsed) if self.duration else elapsed
        window = live_rate(self.live0, live1)  # an open-ended run: judged inside it, not on its edges
        self._result = evaluate(stats, xstats, ports, self.spec, duration, profile=self.profile, tunables=self.tunables,
                                queue_full_max_pct=self.drv.queue_full_max_pct, server=self.drv.server,
                                server_version=self.drv.server_version, server_cores=self.drv.cores,
                                client_version=client_version(), achieved_pps=window["pps"] if window else None)
        self._result["send_time_uncertainty_s"] = round(uncertain, 6)
        if window is not None:
            opk = self._result["tx_packets"]
            self._result.update(achieved_pps_whole_run=opk / duration if duration > 0 else 0.0, rate_window=window)
        return self._result


class TrexProcessRun:
    """A trial run by trex_worker.py in a child process; same wait()/stop()/actor() as TrexRun."""

    server_node = None

    def actor(self) -> tuple | None:
        return server_actor(self.server_node)

    def __init__(self, tcfg, profile, tunables, spec: TrialSpec):
        import json
        import subprocess
        import sys
        from .. import REPO_ROOT
        self.duration = spec.duration_s
        self.p = subprocess.Popen([sys.executable, "-m", "xenobench.traffic.trex_worker"], cwd=REPO_ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.p.stdin.write(json.dumps({"tcfg": tcfg, "profile": profile, "tunables": tunables,
                                       "spec": spec.to_dict()}) + "\n")
        self.p.stdin.flush()
        self._result = None
        self._error = None  # how the trial failed, once it did: stop() after a failed wait() says it again
        ev = self._read()
        if ev["event"] != "started":
            self._finish()
            raise TrafficError(ev.get("error", f"Failed to start traffic on TRex: worker said {ev}"))

    def _read(self, timeout: float | None = None) -> dict:
        """The worker's next event; a worker silent for `timeout` s (an RPC to a server that died
        under it) is killed and the trial fails by name instead of the harness waiting for ever."""
        import json
        import select
        if timeout is not None and not select.select([self.p.stdout], [], [], timeout)[0]:
            self.p.kill()
            self._finish()
            return {"event": "error", "error": f"Failed to collect the TRex trial: the worker did not answer "
                                               f"within {timeout:g} s (did the TRex server die?); it was stopped"}
        line = self.p.stdout.readline()
        if not line:
            self._finish()
            return {"event": "error", "error": f"Failed to run the TRex worker: it exited with status {self.p.returncode}"}
        return json.loads(line)

    def _finish(self) -> None:
        try:
            self.p.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.p.wait(timeout=30)
        except Exception:
            self.p.kill()
            self.p.wait()

    def _collect(self) -> dict:
        # the trial's rest, then the statistics: TRex's own wait_on_traffic timeout (duration x 2 + 30 s)
        ev = self._read(timeout=(self.duration or 0) * 2 + 30)
        self._finish()
        if ev["event"] != "result":
            self._error = ev.get("error", f"Failed to collect the TRex trial: worker said {ev}")
            raise TrafficError(self._error)
        self._result = TrialResult(ev["result"])
        return self._result

    def wait(self) -> dict:
        if self._result is not None:
            return self._result
        if not self.duration:
            raise TrafficError("Failed to wait for the TRex trial: it has no duration; call stop()")
        return self._collect()

    def stop(self) -> dict:
        if self._result is not None:
            return self._result
        if self._error is not None:  # the worker is gone: nothing to stop, the failure stands
            raise TrafficError(self._error)
        try:
            self.p.stdin.write("stop\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):  # ValueError: stdin closed (the worker ended)
            pass
        return self._collect()


def live_rate(a, b, min_window_s: float = 0.2) -> dict | None:
    """The sending rate of an open-ended run between two reads of its opackets (TrexRun._live),
    None without both or over less than min_window_s. Why not the whole run's opackets over the
    time between start and stop: when the server began and ended sending within its start and stop
    requests is not known. The stand-in answers start once xdpgen sends, after writing the port's
    pcap and loading xdpgen's program, so the midpoint of a 40-50 ms start request lay ~20 ms
    before the first frame and a 1 s background measured 97.7-98.3 % of the asked rate at any rate
    (the rehearsal's update trials); a read of the counters has no such asymmetry: each is the
    counter at some moment within its own round trip, the middle the estimate either way."""
    if a is None or b is None or b[0] - a[0] < min_window_s:
        return None
    secs = b[0] - a[0]
    return {"pps": (b[1] - a[1]) / secs, "seconds": round(secs, 6), "frames": b[1] - a[1],
            "uncertainty_s": round(a[2] + b[2], 6)}


def send_time(started: tuple[float, float], stopped: tuple[float, float]) -> tuple[float, float]:
    """How long the server sent: from the midpoint of the start request and its reply to the
    midpoint of the stop request and its reply; and its uncertainty, half of both round trips."""
    (a0, a1), (b0, b1) = started, stopped
    return (b0 + b1) / 2 - (a0 + a1) / 2, ((a1 - a0) + (b1 - b0)) / 2


def evaluate(stats: dict, xstats: dict, ports: list, spec: TrialSpec, duration_s: float, profile: str = "",
             tunables: dict | None = None, *, queue_full_max_pct: float, achieved_pps: float | None = None,
             **extra) -> TrialResult:
    """The trial's result from TRex statistics (pure: tested on recorded/fake stats). queue_full
    (TRex's global counter) is judged against queue_full_max_pct % of the ports' opackets, as TRex's
    NDR bench judges it (trex-core scripts/automation/trex_control_plane/interactive/trex/examples/
    stl/ndr_bench.py: NdrBench.perf_run, queue_full / opackets x 100 against q_full_resolution,
    default 2.00; ours: traffic.trex.queue_full_max_pct); the count, its share and the allowance are
    recorded. achieved_pps: the rate judged where it was measured otherwise (an open-ended run's
    window, live_rate); by default opackets / duration_s."""
    opk = sum(int(stats.get(p, stats.get(str(p), {})).get("opackets", 0)) for p in ports)
    ipk = sum(int(stats.get(p, stats.get(str(p), {})).get("ipackets", 0)) for p in ports)
    qfull = int((stats.get("global") or {}).get("queue_full", 0))
    res = TrialResult.judged(
        spec, "trex", tunables or {}, profile, tx_packets=opk,
        achieved_pps=achieved_pps if achieved_pps is not None else opk / duration_s if duration_s > 0 else 0.0,
        duration_s=duration_s, where=f"TRex ports {ports}", queue_full=qfull, queue_full_max_pct=queue_full_max_pct,
        queue_full_count=qfull, queue_full_pct=qfull * 100 / opk if opk else None,
        rx_packets=ipk, xstats={str(p): x for p, x in xstats.items()},
        ports={str(p): {k: stats.get(p, {}).get(k) for k in ("opackets", "ipackets", "obytes", "ibytes",
                                                             "oerrors", "ierrors")} for p in ports}, **extra)
    res["queue_full_max_pct"] = queue_full_max_pct
    return res


def stream_summary(stream: dict) -> dict:
    """What a stream sends, from its STLStream JSON: frame length, rate, field-engine variables
    (name, op, number of values) and cache."""
    import base64
    vm = stream.get("vm") or {}
    fvars = []
    for i in vm.get("instructions", []):
        if i.get("type") == "flow_var":
            n = len(i["value_list"]) if i.get("value_list") is not None else \
                (i["max_value"] - i["min_value"]) // max(1, i.get("step", 1)) + 1
            fvars.append({"name": i["name"], "op": i["op"], "values": n})
    rate = (stream.get("mode") or {}).get("rate") or {}
    return {"frame_len": len(base64.b64decode(stream["packet"]["binary"])),
            "mode": (stream.get("mode") or {}).get("type"), "rate": {rate.get("type"): rate.get("value")},
            "flow_vars": fvars, "cache_size": vm.get("cache")}


def client_version() -> str:
    """The STL client library in use (pinned in pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"lbr-trex-client {version('lbr-trex-client')}"
    except PackageNotFoundError:
        return "lbr-trex-client (not installed)"


def _reason(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text or type(e).__name__


def _quiet_disconnect(c) -> None:
    try:
        c.disconnect()
    except Exception:
        pass


# --- deploy: the TRex server over SSH ----------------------------------------------------------
def _trex_section(tcfg: dict) -> dict:
    """traffic.trex of a validated traffic section (its defaults are the schema's, filled in by
    config loading or config.section_with_defaults); refused where the config has none."""
    t = tcfg.get("trex")
    if not t:
        raise TrafficError("Failed to use TRex: traffic.trex (server, version) is not set in the config")
    return t


def _daemon_section(tcfg: dict) -> dict:
    d = _trex_section(tcfg).get("daemon")
    if not d:
        raise TrafficError("Failed to start the TRex server: traffic.trex.daemon.path is not set in the config")
    return d


#: what TRex's own daemon always adds to t-rex-64's line (trex-core v3.04
#: scripts/automation/trex_control_plane/server/trex_server.py, generate_run_cmd: `--iom 0 ...
#: --no-key`): no periodic stats screen, and no keyboard reader, so that the stdin it inherits
#: (here /dev/null, whose EOF a keyboard reader may take for a key) is never read
DAEMON_FLAGS = (("--iom", "0"), ("--no-key",))


def server_argv(tcfg: dict) -> list[str]:
    d = _daemon_section(tcfg)
    path = d["path"]
    args = [str(a) for a in d["args"]]
    for flag in DAEMON_FLAGS:
        if flag[0] not in args:
            args += flag
    # t-rex-64 must run from its install directory (it finds its libraries relative to it)
    return ["sh", "-c", 'cd "$1" && shift && exec ./t-rex-64 "$@"', "t-rex", str(path), *args]


def start_server(testbed, tcfg: dict):
    """Start t-rex-64 on the loadgen node (over SSH on the thesis testbed); refused if it runs.
    Waits daemon.ready_s and checks it is still alive, then, unless
    daemon.wait_rpc_s is 0, until the RPC port (trex.server:sync_port) accepts connections."""
    import socket
    t, d = _trex_section(tcfg), _daemon_section(tcfg)
    node = testbed.node_for_role("loadgen")
    h = node.start(SERVER_TAG, server_argv(tcfg), ready=float(d["ready_s"]))
    wait = float(d["wait_rpc_s"])
    if wait > 0:
        addr = (t["server"], t["sync_port"])
        end = time.monotonic() + wait
        while True:
            try:
                socket.create_connection(addr, timeout=1).close()
                break
            except OSError as e:
                if time.monotonic() >= end:
                    node.stop(SERVER_TAG)
                    raise TrafficError(f"Failed to start the TRex server on {node.name}: RPC port "
                                       f"{addr[0]}:{addr[1]} not open after {wait:g} s ({e}); log {h.log}") from None
                time.sleep(0.5)
    return h


def revive_server(testbed, progress=print) -> bool:
    """Start the TRex server again when the harness started it (its process is recorded) and it is
    gone (it died in an earlier attempt, recorded invalid naming it: generator_trex_alive); True if
    it was started. Nothing for another generator or a server the harness did not start."""
    if testbed.cfg.section("traffic")["generator"] != "trex":
        return False
    node = testbed.node_for_role("loadgen")
    if node.handle(SERVER_TAG) is None or node.running(SERVER_TAG):
        return False
    progress(f"TRex server on {node.name} is not running: starting it again")
    node.stop(SERVER_TAG)  # forget the dead one
    start_server(testbed, testbed.cfg.section("traffic"))
    return True


def stop_server(testbed) -> bool:
    return testbed.node_for_role("loadgen").stop(SERVER_TAG, timeout=15)
