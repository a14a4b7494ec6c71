"""What a probe run's summary makes of a run with nothing to measure: `xenobench rtt probe` exits
non-zero with one line naming how many probes were lost and the likely causes, and a trial's
prober-vs-pcap check says which median is missing instead of "differ by None". The summaries are
fixtures in the shape xenobench.agents.prober.summarize and xenobench.rtt.probe make them; no
namespaces, no prober process."""

import json

import pytest
from click.testing import CliRunner

from xenobench import rtt
from xenobench.agents.prober import summarize
from xenobench.cli import Context, main
from xenobench.config import load_config
from xenobench.measure.latency import pcap_agreement

BACKEND = load_config(None).role("dns_backend").name  # the default config's, as the CLI loads it


def summary(records, server="xdp", via="lb", send_errors=0, **over):
    """A probe summary as xenobench.rtt.probe returns it: the prober's, then the harness's fields."""
    s = summarize(records, send_errors=send_errors)
    return s | {"server": server, "via": via, "raw": "p.jsonl", "pcap_file": None, "pcap": None,
                "pcap_median_diff_us": None, "tolerance_us": 2.0} | over


def rec(i, status="timeout", rtt_ns=None):
    return {"id": i, "status": status, "rtt_ns": rtt_ns, "user_rtt_ns": rtt_ns and rtt_ns + 500, "ts": "kernel"}


LOST_100 = [rec(i) for i in range(100)]
# (description, summary, --via, the line on stderr after "xenobench: ")
UNANSWERED = [
    ("no server, via the LB", summary(LOST_100, server=None), "lb",
     "Failed to measure an RTT: 100 of 100 probes lost: 100 without an answer within the timeout; likely: no DNS "
     f"server runs on {BACKEND} (`xenobench dns start`); or the LB is not running or does not forward to {BACKEND} "
     "(`xenobench lb start`; `--via direct` leaves it out)"),
    ("a server, direct", summary(LOST_100, via="direct"), "direct",
     f"Failed to measure an RTT: 100 of 100 probes lost: 100 without an answer within the timeout; likely: the "
     f"queries do not reach {BACKEND} (`xenobench testbed check`)"),
    ("wrong answers and refused sends",
     summary([rec(i, "bad_answer") for i in range(3)] + [rec(3, "send_error: Network is unreachable")],
             send_errors=1), "lb",
     "Failed to measure an RTT: 4 of 4 probes lost: 3 answered without the expected address, 1 not sent (the "
     "socket refused them); likely: the server answers for another name or address (dns.qname, dns.records in "
     f"{load_config(None).path}); or the client's interface is down or has no route to the VIP "
     "(`xenobench testbed check`)"),
]


def run_probe(monkeypatch, s, via, *extra):
    monkeypatch.setattr(Context, "testbed", lambda self, root=True: object())
    monkeypatch.setattr(rtt, "probe", lambda testbed, **kw: s)
    monkeypatch.setattr(rtt, "running_lbs", lambda testbed: [], raising=False)  # no LB node to ask
    return CliRunner().invoke(main, ["rtt", "probe", "--count", str(s["sent"]), "--rate", "100", "--via", via,
                                     *extra])


@pytest.mark.parametrize("s, via, line", [u[1:] for u in UNANSWERED], ids=[u[0] for u in UNANSWERED])
def test_probe_with_no_answer_exits_non_zero_with_one_line(monkeypatch, s, via, line):
    r = run_probe(monkeypatch, s, via)
    assert r.exit_code == 1, r.output
    assert r.stderr == f"xenobench: {line}\n"
    assert r.stdout.startswith(f"prober (user timestamps, via {via}): n=0 lost={s['lost']} ")


def test_probe_json_prints_the_summary_then_refuses(monkeypatch):
    s = UNANSWERED[0][1]
    r = run_probe(monkeypatch, s, "lb", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout) == s
    assert r.stderr.startswith("xenobench: Failed to measure an RTT: 100 of 100 probes lost: ")


def test_probe_with_one_answer_exits_zero(monkeypatch):
    s = summary([rec(0, "ok", 20_000)] + LOST_100[1:])
    r = run_probe(monkeypatch, s, "lb")
    assert r.exit_code == 0 and r.stderr == ""
    assert "n=1 lost=99 " in r.stdout and "median 20.0 µs" in r.stdout


# (description, summary, passes, reason)
PCAP_CASES = [
    ("within the tolerance", summary([rec(0, "ok", 20_000)], pcap_median_diff_us=0.5), True,
     "prober and pcap medians differ by 0.5 us (tolerance 2 us)"),
    ("beyond it", summary([rec(0, "ok", 20_000)], pcap_median_diff_us=-3.25), False,
     "prober and pcap medians differ by -3.25 us (tolerance 2 us)"),
    ("no probe answered", summary(LOST_100), False,
     "no prober median to compare with the pcap's (no probe was answered)"),
    ("the capture unreadable", summary([rec(0, "ok", 20_000)], pcap_error="Failed to read p.pcap: truncated"), False,
     "no pcap median to compare with the prober's: Failed to read p.pcap: truncated"),
    ("the capture without pairs", summary([rec(0, "ok", 20_000)]), False,
     "no pcap median to compare with the prober's (the capture holds no query with its answer)"),
]


@pytest.mark.parametrize("s, ok, why", [c[1:] for c in PCAP_CASES], ids=[c[0] for c in PCAP_CASES])
def test_the_pcap_check_names_what_is_missing(s, ok, why):
    assert pcap_agreement(s) == (ok, why)
    assert "None" not in why
