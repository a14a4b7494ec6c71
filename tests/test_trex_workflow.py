"""The workflow starts the TRex server itself: every experiment job of a trex
plan waits for rule trex_server; a server already answering is reported, never started or killed."""

import socket
import subprocess
import sys

from click.testing import CliRunner

from xenobench.cli import main
from xenobench.config import DEFAULT_CONFIG


def test_fips_plan_starts_trex_before_every_experiment_job():
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "all", "--configfile", "config/fips.yaml"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    jobs = out.split("\nrule ")
    points = [j for j in jobs if j.startswith("experiment_point:")]
    assert points and all("results/fips/trex_server.txt" in j for j in points)
    trex = [j for j in jobs if j.startswith("trex_server:")]
    assert len(trex) == 1 and "results/fips/testbed_check.txt" in trex[0]


def test_a_running_trex_is_reported_not_started(tmp_path):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        f = tmp_path / "c.yaml"
        f.write_text(f"extends: {DEFAULT_CONFIG.parent / 'fips.yaml'}\n"
                     f"traffic:\n  trex: {{server: 127.0.0.1, sync_port: {port}}}\n"
                     f"testbed: {{state_dir: {tmp_path}}}\n")
        r = CliRunner().invoke(main, ["--config", str(f), "traffic", "server", "start"])
    lines = r.output.strip().splitlines()
    assert lines[0] == (f"trex server: already running at 127.0.0.1:{port} (not started by xenobench: "
                        "left running, never stopped by it)"), r.output
    # a server that answers is still asked to send (here nothing is behind the port, and fips2 is not
    # reachable from the test): the smoke test's row, then one line, and a non-zero exit
    assert lines[1].startswith("FAIL trex sends about 200 frames from fips4:") and "fips2" in lines[1], r.output
    assert lines[2].startswith("xenobench: Failed to start the study's generator: the TRex server at 127.0.0.1 "
                               "answers, but trex sends about 200 frames"), r.output
    assert len(lines) == 3 and r.exit_code != 0, r.output
    assert not list(tmp_path.rglob("*.json"))  # no process record: `stop` will not touch it
