"""`xenobench testbed up|down|status|check`."""

import json
import time

import click


@click.group("testbed")
def testbed_group():
    """Bring the testbed up or down, show it, prove its connectivity."""


@testbed_group.command("up")
@click.option("--results", "results_root", default="results", show_default=True, type=click.Path(file_okay=False),
              help="The results root the study will write: checked writable, with experiments.min_free_mb free, "
                   "before anything is brought up.")
@click.pass_obj
def up(obj, results_root):
    """Create the namespace testbed (idempotent); on a hosts testbed only checks the nodes."""
    from pathlib import Path

    from ..layout import check_results_root
    tb = obj.testbed()  # not root: refused first
    check_results_root(Path(results_root), obj.config.section("experiments")["min_free_mb"])
    t0 = time.monotonic()
    res = tb.up()
    what = "created" if res.get("changed") else "already up"
    click.echo(f"testbed {obj.config.name}: {what} ({time.monotonic() - t0:.2f} s)")


@testbed_group.command("down")
@click.option("--purge", is_flag=True, help="Remove the state directory (logs, process records) and what "
              "`xenobench deploy` placed on the nodes too.")
@click.pass_obj
def down(obj, purge):
    """Remove every namespace, link, pinned BPF object and process the testbed of this prefix
    created, whichever config built it."""
    t0 = time.monotonic()
    res = obj.testbed().down(purge=purge)
    click.echo(f"testbed {obj.config.name}: down, removed {len(res.get('removed', []))} namespaces "
               f"({time.monotonic() - t0:.2f} s)")
    if res.get("purged"):
        click.echo(f"removed the deployed artefact from {', '.join(res['purged'])}")
    if purge:
        # the workflow's record that the nodes hold the artefact (rule deploy) is gone with it
        from pathlib import Path
        marker = Path("results") / obj.config.name / "deploy.txt"
        if marker.exists():
            marker.unlink()
            click.echo(f"removed {marker} (the workflow deploys again on its next run)")


@testbed_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def status(obj, as_json):
    """Show namespaces, interfaces, attached XDP programs and background processes."""
    from ..report import generator_line
    st = obj.testbed(root=False).status()
    if as_json:
        click.echo(json.dumps(st, indent=1))
        return
    click.echo(f"testbed {st['testbed']} ({st['kind']}): {'up' if st.get('up', True) else 'down'}")
    click.echo(f"  generator {generator_line(st['generator'])}")
    for name, n in st["nodes"].items():
        ifs = ", ".join(f"{k}{'' if v is None else (' up' if v['up'] else ' down')}"
                        f"{' xdp=' + str(v['xdp']) if v and v.get('xdp') else ''}"
                        for k, v in n.get("interfaces", {}).items())
        procs = ", ".join(n["processes"]) or "-"
        click.echo(f"  {name:8} {n['role']:12} {ifs or '-':30} processes: {procs}")


@testbed_group.command("check")
@click.option("--json", "as_json", is_flag=True,
              help="One object per check: check, ok, detail (the exit status as without).")
@click.pass_obj
def check(obj, as_json):
    """Prove connectivity: client → each backend, and VIP frames to each backend's MAC.
    Exit status 1 if a check failed."""
    rows = obj.testbed().check()
    if as_json:
        click.echo(json.dumps([{"check": desc, "ok": bool(ok), "detail": detail} for desc, ok, detail in rows]))
    for desc, ok, detail in [] if as_json else rows:
        click.echo(f"{'ok  ' if ok else 'FAIL'} {desc}: {detail}")
    if not all(ok for _, ok, _ in rows):
        raise SystemExit(1)


COMMANDS = [testbed_group]
