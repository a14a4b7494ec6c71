"""`xenobench traffic compile|run`: TRex profiles compiled to trafgen, and one trial."""

import json
from pathlib import Path

import click

from ..errors import XenobenchError

tunable_option = click.option(
    "-t", "--tunable", "tunables", multiple=True, metavar="KEY=VALUE|'--OPT VALUE ...'",
    help="Profile tunable (repeatable), e.g. -t payload=64 -t split=70/30, or TRex's argv form "
         "-t '--size 64 --vm cached' (a bare --flag is a store_true flag). Each key reaches the profile as "
         "--KEY as given; the testbed's tunables only reach profiles that declare TESTBED_TUNABLES.")


def parse_tunables(items) -> dict:
    """-t items → the tunables dict (keys as given: TRex passes `-t pg_id=7` as `--pg_id 7`).
    KEY=VALUE, or an item starting with "--": TRex's own argv form, `--opt value`, `--opt=value`,
    or a bare `--flag` (True: passed as a flag)."""
    import shlex
    out = {}
    for it in items:
        if it.lstrip().startswith("-"):
            try:
                toks = shlex.split(it)
            except ValueError as e:
                raise XenobenchError(f"Failed to parse tunable {it!r}: {e}") from None
            i = 0
            while i < len(toks):
                tok = toks[i]
                if not tok.startswith("--") or len(tok) < 3:
                    raise XenobenchError(f"Failed to parse tunable {it!r}: {tok!r} is not a --option (give long "
                                         "options: --size 64, --size=64 or a bare --flag)")
                name, eq, val = tok[2:].partition("=")
                if eq:
                    out[name] = val
                    i += 1
                elif i + 1 < len(toks) and not toks[i + 1].startswith("--"):
                    out[name] = toks[i + 1]
                    i += 2
                else:
                    out[name] = True
                    i += 1
            continue
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise XenobenchError(f"Failed to parse tunable {it!r}: expected KEY=VALUE (like payload=64) or "
                                 "TRex's form '--payload 64'")
        out[k.strip()] = v.strip()
    return out


@click.group("traffic")
def traffic_group():
    """TRex STL profiles (trex_profiles/): compile them to trafgen, run a trial."""


@traffic_group.command("compile")
@click.argument("profile")
@tunable_option
@click.option("--out", type=click.Path(dir_okay=False), help="FILE.cfg: trafgen configuration; FILE.pcap: "
              "the first --count frames as the local executor emits them. Default: the configuration on stdout.")
@click.option("--count", type=click.IntRange(min=1), help="Frames written to a .pcap (default: one stream cycle).")
@click.pass_obj
def compile_cmd(obj, profile, tunables, out, count):
    """Load PROFILE (a name like udp_payload, or any TRex STL profile's path: .py, .json, .yaml, .pcap)
    with the client library's loader (STLProfile.load) and compile it; the testbed's tunables go to
    profiles that declare them."""
    from ..traffic import compile_for, to_trafgen, write_pcap
    c = compile_for(obj.config, profile, parse_tunables(tunables))
    if out is None or out.endswith(".cfg"):
        text = to_trafgen(c)
        if out is None:
            click.echo(text, nl=False)
            return
        try:
            Path(out).write_text(text)
        except OSError as e:
            raise XenobenchError(f"Failed to write {out}: {e.strerror}") from None
        click.echo(f"{out}: {c.cycle} frames (one stream cycle), {len(c.frames[0])} B each without FCS", err=True)
    elif out.endswith(".pcap"):
        n = count or c.cycle
        frames = [c.frames[i % c.cycle] for i in range(n)]
        try:
            times = getattr(c, "times", None)  # TRex's send times of one cycle
            write_pcap(frames, out, times if times is not None and n == c.cycle else None)
        except OSError as e:
            raise XenobenchError(f"Failed to write {out}: {e.strerror}") from None
        click.echo(f"{out}: {n} frames (cycle {c.cycle})", err=True)
    else:
        raise XenobenchError(f"Failed to compile {profile}: --out {out!r} must end in .cfg or .pcap")


@traffic_group.command("run")
@click.argument("profile")
@tunable_option
@click.option("--rate", type=click.FloatRange(min=0), required=True, help="Packets per second (0: as fast as possible).")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="Seconds.")
@click.option("--count", type=click.IntRange(min=1), help="Frames.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--dry-run", is_flag=True, help="Print what the trial would do (TRex: the STLClient calls with the "
              "exact mult string and ports; trafgen: the compiled cycle) without connecting or sending.")
@click.pass_obj
def run_cmd(obj, profile, tunables, rate, duration, count, as_json, dry_run):
    """Run one trial on the configured generator and print the achieved rate."""
    from ..traffic import TrialSpec, fill_tunables, generator_of, run_traffic
    if dry_run:  # the trial's plan from the config alone: no testbed, no connection
        gen = generator_of(obj.config)
        spec = TrialSpec.of(rate, duration, count, counts=gen.counts, blocking=True)
        plan = gen.plan(obj.config, profile, fill_tunables(obj.config, profile, parse_tunables(tunables)), spec)
        if as_json:
            click.echo(json.dumps(plan))
        else:
            click.echo(f"# {plan['generator']}: {profile} at {plan['requested_pps']:.0f} pps (dry run, nothing sent)")
            for line in plan.get("calls", []):
                click.echo(line)
            if "frames_per_cycle" in plan:
                click.echo(f"{plan['generator']}: {plan['frames_per_cycle']} frames per cycle, {plan['frame_len']} B each")
        return
    res = run_traffic(obj.testbed(), profile, parse_tunables(tunables), rate, duration_s=duration, count=count)
    if as_json:
        keys = ("requested_pps", "achieved_pps", "tx_packets", "valid", "reason")
        click.echo(json.dumps({**{k: res[k] for k in keys}, **{k: v for k, v in res.items() if k not in keys}}))
    else:
        click.echo(f"{res['generator']}: requested {res['requested_pps']:.0f} pps, achieved "
                   f"{res['achieved_pps']:.0f} pps, {res['tx_packets']} frames, "
                   f"{'valid' if res['valid'] else 'INVALID: ' + res['reason']}")
    if not res["valid"]:
        raise SystemExit(3)


@traffic_group.group("server")
def server_group():
    """The TRex server on the loadgen node (deploy step of the thesis testbed)."""


@server_group.command("start")
@click.pass_obj
def server_start(obj):
    """Start t-rex-64 -i from traffic.trex.daemon.path on the loadgen node and wait for its RPC port.
    A server that already answers on traffic.trex.server:sync_port is reported and left alone."""
    import socket

    from ..errors import TrafficError
    from ..traffic import smoke_generator, traffic_config
    from ..traffic.trex import _trex_section, start_server, stop_server
    tcfg = traffic_config(obj.config)
    t = _trex_section(tcfg)
    tb = obj.testbed()
    try:
        socket.create_connection((t["server"], t["sync_port"]), timeout=2).close()
        click.echo(f"trex server: already running at {t['server']}:{t['sync_port']} (not started by "
                   "xenobench: left running, never stopped by it)")
        started = None
    except OSError:
        started = start_server(tb, tcfg)
        click.echo(f"trex server: started on {started.node} as pid {started.pid} (log {started.log})")
    desc, ok, detail = smoke_generator(tb)  # a server that answers but cannot send stops the study here
    click.echo(f"{'ok  ' if ok else 'FAIL'} {desc}: {detail}")
    if not ok:
        if started is not None:
            stop_server(tb)
        lines = [x.strip() for x in detail.strip().splitlines() if x.strip()] or ["no detail"]
        why = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"  # one line: a remote traceback's last
        raise TrafficError(f"Failed to start the study's generator: the TRex server at {t['server']} answers, but "
                           f"{desc.split(',')[0]} did not arrive ({why})")


@server_group.command("stop")
@click.option("--collect", type=click.Path(), default=None, help="Copy the server's log here first.")
@click.pass_obj
def server_stop(obj, collect):
    """Stop the TRex server started by `traffic server start` (one it did not start is left alone)."""
    from ..traffic.trex import SERVER_TAG, stop_server
    tb = obj.testbed()
    node = tb.node_for_role("loadgen")
    h = node.handle(SERVER_TAG)
    if collect and h is not None:
        node.get(h.log, collect)
    click.echo(f"trex server: {'stopped' if stop_server(tb) else 'was not running'}")


COMMANDS = [traffic_group]
