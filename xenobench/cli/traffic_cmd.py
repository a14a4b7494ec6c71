"""`xenobench traffic compile|run`: TRex profiles compiled to trafgen, and one trial."""

import json
from pathlib import Path

import click

from ..errors import XenobenchError

tunable_option = click.option("-t", "--tunable", "tunables", multiple=True, metavar="KEY=VALUE",
                              help="Profile tunable (repeatable), e.g. -t payload=64 -t split=70/30.")


def parse_tunables(items) -> dict:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k.strip():
            raise XenobenchError(f"Failed to parse tunable {it!r}: expected KEY=VALUE (like payload=64)")
        out[k.strip().replace("-", "_")] = v.strip()
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
    """Load PROFILE (a name like udp_payload or a path) with the testbed's tunables and compile it."""
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
            write_pcap(frames, out)
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
    from ..traffic import run_traffic
    if (duration is None) == (count is None):
        raise XenobenchError("Failed to run traffic: give exactly one of --duration and --count")
    if dry_run:
        plan = _dry_run(obj.config, profile, parse_tunables(tunables), rate, duration, count)
        if as_json:
            click.echo(json.dumps(plan))
        else:
            click.echo(f"# {plan['generator']}: {profile} at {plan['requested_pps']:.0f} pps (dry run, nothing sent)")
            for line in plan.get("calls", []):
                click.echo(line)
            if plan["generator"] != "trex":
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


def _dry_run(cfg, profile, tunables, rate, duration, count) -> dict:
    """The trial's plan from the config alone: no testbed, no connection."""
    from ..traffic import compile_for, fill_tunables, traffic_config
    from ..traffic.profiles import load_streams
    tcfg = traffic_config(cfg)
    if tcfg["generator"] == "trex":
        from ..traffic.trex import TrexDriver
        if count is not None:
            if rate <= 0:  # as TrexDriver.run: TRex sends for a duration
                raise XenobenchError("Failed to run TRex: a count needs a rate (count / rate = duration)")
            duration = count / rate
        tun = fill_tunables(cfg, profile, tunables)
        _, streams = load_streams(profile, tun)
        return TrexDriver(tcfg).plan(profile, tun, rate, duration, streams)
    c = compile_for(cfg, profile, tunables)
    return {"generator": tcfg["generator"], "requested_pps": float(rate), "duration_s": duration, "count": count,
            "profile": str(c.profile), "tunables": c.argv, "frames_per_cycle": c.cycle,
            "frame_len": len(c.frames[0])}


@traffic_group.group("server")
def server_group():
    """The TRex server on the loadgen node (deploy step of the thesis testbed)."""


@server_group.command("start")
@click.pass_obj
def server_start(obj):
    """Start t-rex-64 -i from traffic.trex.daemon.path on the loadgen node and wait for its RPC port.
    A server that already answers on traffic.trex.server:sync_port is reported and left alone."""
    import socket

    from ..traffic import traffic_config
    from ..traffic.trex import _trex_section, start_server
    tcfg = traffic_config(obj.config)
    t = _trex_section(tcfg)
    try:
        socket.create_connection((t["server"], t["sync_port"]), timeout=2).close()
        click.echo(f"trex server: already running at {t['server']}:{t['sync_port']} (not started by "
                   "xenobench: left running, never stopped by it)")
        return
    except OSError:
        pass
    h = start_server(obj.testbed(), tcfg)
    click.echo(f"trex server: started on {h.node} as pid {h.pid} (log {h.log})")


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
