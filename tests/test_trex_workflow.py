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
    assert r.exit_code == 0, r.output
    assert r.output.strip() == (f"trex server: already running at 127.0.0.1:{port} (not started by xenobench: "
                                "left running, never stopped by it)")
    assert not list(tmp_path.rglob("*.json"))  # no process record: `stop` will not touch it
