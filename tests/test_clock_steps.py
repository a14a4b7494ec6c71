"""Durations against a step of the realtime clock (as NTP makes one): a trial's counter seconds and
the prober's RTTs come from clocks that do not step; CLOCK_REALTIME stays a recorded stamp.

The step is simulated, not made (stepping the machine's clock would disturb every other process):
the prober gets a Clocks whose realtime jumps by the step at a chosen moment, and the kernel's
software stamps of frames after that moment are moved by the same step (they are CLOCK_REALTIME).
The figures are the ones an NTP step gave in a trial: +3608 s and -3591 s."""

import socket
import threading
import time

import dns.message
import dns.rrset
import pytest

from xenobench import counters
from xenobench.agents import prober
from xenobench.agents.prober import Clocks, Prober, summarize

QNAME = "probe.example.com."
STEPS_S = [3608, -3591]


# --- counters: seconds between two snapshots --------------------------------------------------------
class FakeNode:
    name = "fips2"

    def run(self, argv, check=False, **kw):
        out = {"ethtool": "driver: veth\n", "sh": "/sys/x/rx_packets:5\n"}.get(argv[0], "")
        if argv[:2] == ["ethtool", "-S"]:
            out = "NIC statistics:\n     rx_queue_0_xdp_packets: 4\n"
        return type("R", (), {"ok": True, "stdout": out, "stderr": ""})()


@pytest.mark.parametrize("step_s", STEPS_S)
def test_counter_seconds_do_not_see_a_realtime_step(monkeypatch, step_s):
    wall = iter([1_700_000_000.0, 1_700_000_000.0 + 2.5 + step_s])
    mono = iter([100.0, 102.5])
    monkeypatch.setattr(counters.time, "time", lambda: next(wall))
    monkeypatch.setattr(counters.time, "monotonic", lambda: next(mono))
    a, b = counters.snapshot(FakeNode(), "p0"), counters.snapshot(FakeNode(), "p0")
    d = counters.diff(a, b)
    assert d["seconds"] == 2.5
    assert (a["time"], b["time"]) == (1_700_000_000.0, 1_700_000_002.5 + step_s)  # the wall stamps, kept


def test_counter_snapshots_without_a_monotonic_stamp_fall_back_to_their_wall_stamps():
    a = {"node": "n", "iface": "i", "driver": "veth", "time": 1.0, "view": {}, "ethtool": {}, "sysfs": {}}
    assert counters.diff(a, {**a, "time": 3.5})["seconds"] == 2.5
    assert counters.diff({**a, "monotonic": 7.0}, {**a, "time": 3.5, "monotonic": 8.0})["seconds"] == 1.0


# --- the prober ---------------------------------------------------------------------------------------
class SteppingClocks(Clocks):
    """The system's clocks, with realtime stepped by step_ns from the moment step() is called."""

    def __init__(self, step_ns: int):
        self.step_ns, self.at = step_ns, None

    def step(self) -> None:
        self.at = time.clock_gettime_ns(time.CLOCK_REALTIME)

    def shift(self, real_ns: int) -> int:
        return real_ns + (self.step_ns if self.at is not None and real_ns >= self.at else 0)

    def real_ns(self) -> int:
        return self.shift(super().real_ns())


class Responder(threading.Thread):
    """Answers every query on 127.0.0.1; on query `step_on` it steps the clock, then answers after
    `delay_s` (after=True: answers, then steps)."""

    def __init__(self, n: int, clocks: SteppingClocks, step_on: int, delay_s: float, after: bool = False):
        super().__init__(daemon=True)
        self.n, self.clocks, self.step_on, self.delay_s, self.after = n, clocks, step_on, delay_s, after
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def run(self):
        for i in range(self.n):
            wire, peer = self.sock.recvfrom(4096)
            q = dns.message.from_wire(wire)
            r = dns.message.make_response(q)
            r.answer.append(dns.rrset.from_text(q.question[0].name, 300, "IN", "A", "198.18.0.53"))
            if i == self.step_on and not self.after:
                self.clocks.step()
                time.sleep(self.delay_s)
            self.sock.sendto(r.to_wire(), peer)
            if i == self.step_on and self.after:
                self.clocks.step()


def run_stepped(monkeypatch, step_s: int, *, step_on: int = 1, delay_s: float = 0.02, count: int = 3,
                after: bool = False):
    clocks = SteppingClocks(step_s * 1_000_000_000)
    real = prober._timespecs
    # the kernel's software stamps are CLOCK_REALTIME: those taken after the step carry it
    monkeypatch.setattr(prober, "_timespecs", lambda data: (lambda sw, hw: (clocks.shift(sw) if sw else 0, hw))(
        *real(data)))
    resp = Responder(count, clocks, step_on, delay_s, after)
    resp.start()
    p = Prober(src="127.0.0.1", dst="127.0.0.1", port=resp.port, qname=QNAME, expect="198.18.0.53", count=count,
               rate=20, timeout=0.5, clocks=clocks)
    recs = p.run()
    resp.join(2)
    return recs, summarize(recs, mismatched=p.mismatched)


@pytest.mark.parametrize("step_s", STEPS_S)
def test_a_step_between_a_query_and_its_answer_leaves_its_rtt_alone(monkeypatch, step_s):
    """Query 1's send is stamped before the step, its answer after: its RTT is the monotonic
    one (about the responder's 20 ms delay, not 20 ms + the step), it is not late, and the queries
    wholly before or after the step keep their kernel RTTs."""
    recs, s = run_stepped(monkeypatch, step_s)
    assert [(r["status"], r["ts"], r["clock_step"]) for r in recs] == [
        ("ok", "kernel", False), ("ok", "user", True), ("ok", "kernel", False)]
    stepped = recs[1]
    assert 20_000_000 <= stepped["rtt_ns"] == stepped["user_rtt_ns"] == stepped["mono_recv_ns"] - stepped["mono_send_ns"] \
        < 400_000_000
    # the wall stamps record the step as it was: their difference is the step plus the RTT
    assert abs(stepped["user_recv_ns"] - stepped["user_send_ns"] - stepped["rtt_ns"] - step_s * 1e9) < 1e6
    for r in (recs[0], recs[2]):
        assert 0 < r["rtt_ns"] == r["recv_ns"] - r["send_ns"] < 20_000_000
        assert r["user_rtt_ns"] == r["user_recv_ns"] - r["user_send_ns"] == r["mono_recv_ns"] - r["mono_send_ns"]
        assert r["send_ns"] >= r["user_send_ns"]
    assert recs[2]["send_ns"] - recs[0]["send_ns"] == pytest.approx(step_s * 1e9, abs=1e9)  # the stamps are realtime
    assert (s["n"], s["lost"], s["clock_steps"]) == (3, 0, 1)
    assert s["max_us"] < 400_000


@pytest.mark.parametrize("step_s", STEPS_S)
def test_a_step_while_no_query_is_out_changes_no_rtt(monkeypatch, step_s):
    """The step falls right after query 0 is answered: queries 1 and 2, sent after it, keep their
    kernel RTTs; query 0's own RTT is right whichever side of the step its answer was read on."""
    recs, s = run_stepped(monkeypatch, step_s, step_on=0, delay_s=0.0, count=3, after=True)
    assert [r["status"] for r in recs] == ["ok"] * 3
    assert [(r["ts"], r["clock_step"]) for r in recs[1:]] == [("kernel", False)] * 2
    for r in recs:
        assert 0 < r["rtt_ns"] < 20_000_000
        assert r["rtt_ns"] == (r["recv_ns"] - r["send_ns"] if r["ts"] == "kernel" else r["user_rtt_ns"])
    assert s["clock_steps"] <= 1 and s["max_us"] < 20_000


def test_without_a_step_every_rtt_is_the_kernels_and_the_user_clock_is_monotonic(monkeypatch):
    recs, s = run_stepped(monkeypatch, 0, step_on=99, count=3)
    assert [(r["ts"], r["clock_step"]) for r in recs] == [("kernel", False)] * 3
    assert all(r["rtt_ns"] == r["recv_ns"] - r["send_ns"] for r in recs)
    assert s["clock_steps"] == 0
