"""loadgen/cpu_rtt, the kept cache-line round-trip agent (xenobench.measure.rank), driven through its pipes as
the harness's Session does: every request line gets exactly one answer (a framed JSON reply or one
`E ...` line), no request hangs it, EOF on stdin ends it, and each way it ends has its own exit code.
Its request line is fuzzed with Hypothesis against a model of the grammar its header states.

Needs two CPUs (the machine the namespace testbed runs on has them); CPU 1000 stands for a CPU that
is offline or outside the process's cpuset (pthread_setaffinity_np refuses both with EINVAL)."""

import json
import os
import re
import select
import subprocess
import time

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from xenobench import REPO_ROOT

from .strategies import examples

CPU_RTT = REPO_ROOT / "loadgen" / "build" / "cpu_rtt"
TWO_CPUS = (os.cpu_count() or 1) >= 2
needs_cpu_rtt = pytest.mark.skipif(not CPU_RTT.is_file() or not TWO_CPUS,
                                   reason=f"needs {CPU_RTT} built (scripts/build.sh) and two CPUs")
pytestmark = needs_cpu_rtt

MAX_LINE = 64
HEAD = 'E expected "BURSTS PER_BURST" (BURSTS 1..10000, at most 10000000 round trips in all): '


class Agent:
    """cpu_rtt with pipes; request() returns ("E", text) or ("reply", dict) for one line sent."""

    def __init__(self, *args: str):
        self.p = subprocess.Popen([str(CPU_RTT), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.buf = b""

    def _fill(self, until, deadline: float) -> None:
        fd = self.p.stdout.fileno()
        while not until():
            left = deadline - time.monotonic()
            assert left > 0, f"no answer within the time; have {self.buf!r}"
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                assert chunk, f"cpu_rtt ended (rc {self.p.wait()}): {self.p.stderr.read()!r}"
                self.buf += chunk

    def answer(self, timeout: float = 15.0):
        deadline = time.monotonic() + timeout
        self._fill(lambda: b"\n" in self.buf, deadline)
        head, _, self.buf = self.buf.partition(b"\n")
        if head.startswith(b"E "):
            return "E", head.decode()
        n = int(head)
        self._fill(lambda: len(self.buf) >= n, deadline)
        data, self.buf = self.buf[:n], self.buf[n:]
        return "reply", json.loads(data)

    def request(self, line: bytes, timeout: float = 15.0):
        self.p.stdin.write(line + b"\n")
        self.p.stdin.flush()
        return self.answer(timeout)

    def close(self, timeout: float = 15.0) -> int:
        self.p.stdin.close()
        try:
            return self.p.wait(timeout)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
            self.p.stdout.close()
            self.p.stderr.close()


def model(line: bytes):
    """The request grammar of loadgen/cpu_rtt.c's header: (bursts, per_burst), or the refusal's reason."""
    if len(line) > MAX_LINE:
        return f"longer than {MAX_LINE} bytes"
    if b"\0" in line:
        return "a NUL byte"
    if not line.strip(b" \t\r"):
        return 20, 100
    m = re.fullmatch(rb"[ \t\r]*([0-9]+)[ \t\r]+([0-9]+)[ \t\r]*", line)
    if not m:
        return "not two whole numbers"
    bursts, per = int(m.group(1)), int(m.group(2))
    if not 1 <= bursts <= 10000:
        return "BURSTS out of range"
    if per < 1:
        return "PER_BURST out of range"
    if per > 10_000_000 // bursts:
        return "too many round trips"
    return bursts, per


def shown(line: bytes) -> str:
    """A refused line as cpu_rtt shows it: printable ASCII but quote and backslash, else \\xNN; 40 bytes."""
    s = "".join(chr(c) if 0x20 <= c < 0x7F and c not in b'"\\' else f"\\x{c:02x}" for c in line[:40])
    return s + ("..." if len(line) > 40 else "")


# (description, request line, the answer: (bursts, per_burst) measured, or the refusal's exact line)
REQUESTS = [
    ("empty: the defaults", b"", (20, 100)),
    ("two numbers", b"3 10", (3, 10)),
    ("blanks around and between, CR", b" \t2 \t 5 \r", (2, 5)),
    ("leading zeros", b"003 0010", (3, 10)),
    ("zero bursts", b"0 5", HEAD + 'BURSTS out of range, got "0 5"'),
    ("zero round trips a burst", b"1 0", HEAD + 'PER_BURST out of range, got "1 0"'),
    ("a word", b"foo", HEAD + 'not two whole numbers, got "foo"'),
    ("one number", b"7", HEAD + 'not two whole numbers, got "7"'),
    ("three numbers", b"1 2 3", HEAD + 'not two whole numbers, got "1 2 3"'),
    ("a sign", b"-1 5", HEAD + 'not two whole numbers, got "-1 5"'),
    ("hex", b"0x10 5", HEAD + 'not two whole numbers, got "0x10 5"'),
    ("bursts x per overflowing a signed long", b"10000 922337203685477580",
     HEAD + 'too many round trips, got "10000 922337203685477580"'),
    ("numbers beyond any long", b"99999999999999999999999 1", HEAD + 'BURSTS out of range, got "99999999999999999999999 1"'),
    ("one round trip too many", b"10000 1001", HEAD + 'too many round trips, got "10000 1001"'),
    ("a NUL byte", b"1\x002", HEAD + 'a NUL byte, got "1\\x002"'),
    ("not UTF-8, a quote", b'\xff"\\', HEAD + 'not two whole numbers, got "\\xff\\x22\\x5c"'),
    ("a line of 65 bytes", b"1" * 65, HEAD + f'longer than 64 bytes, got "{"1" * 40}..."'),
    ("a line of 100,000 bytes", b"2 " * 50_000, HEAD + f'longer than 64 bytes, got "{"2 " * 20}..."'),
]


@pytest.fixture(scope="module")
def agent():
    a = Agent("0", "1", "5")
    yield a
    assert a.close() == 0


@pytest.mark.parametrize("desc,line,want", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_each_request_gets_one_answer(agent, desc, line, want):
    kind, got = agent.request(line)
    if isinstance(want, str):
        assert (kind, got) == ("E", want), desc
        assert model(line) == want[len(HEAD):].split(", got")[0]
    else:
        assert kind == "reply", got
        assert (got["cpus"], got["bursts"], got["per_burst"]) == ([0, 1], *want), desc
        assert 0 < got["min_ns"] <= got["median_ns"]
        assert model(line) == want
    assert agent.request(b"1 1")[0] == "reply"  # in step: the next request's answer is its own


def test_a_cpu_it_cannot_pin_is_one_error_line_not_a_hang():
    a = Agent("0", "1000")
    t0 = time.monotonic()
    assert a.request(b"2 5") == ("E", "E Failed to pin a thread to CPU 1000: Invalid argument")
    assert time.monotonic() - t0 < 2
    assert a.request(b"2 5")[0] == "E"  # and it reads on
    assert a.close() == 0


@pytest.mark.parametrize("argv,rc,err", [
    (["1000", "0"], 3, "Failed to pin to CPU 1000: Invalid argument\n"),
    (["0", "0"], 2, "usage: cpu_rtt CPU_A CPU_B [TIMEOUT_S] (two different CPU numbers 0..1023; seconds 1..3600, "
                    "default 10)\n"),
    (["0", "x"], 2, None), (["0", "1", "0"], 2, None), (["0", "1", "3601"], 2, None), (["0"], 2, None),
    (["0", "1", "5", "extra"], 2, None),
])
def test_arguments_and_exit_codes(argv, rc, err):
    r = subprocess.run([str(CPU_RTT), *argv], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert r.returncode == rc, r.stderr
    assert r.stderr == (err or r.stderr) and r.stderr.endswith("\n") and r.stderr.count("\n") == 1


def test_a_measurement_past_its_timeout_is_refused_and_it_reads_on():
    # the most round trips a request may ask (10^7): past 1 s wherever a round trip takes over 100 ns
    # (a loaded or split host); a host that shares a cache between the two CPUs may finish them in
    # time, and then answers. Either way one answer comes within the timeout, and it reads on.
    a = Agent("0", "1", "1")
    t0 = time.monotonic()
    kind, text = a.request(b"1000 10000")
    assert (kind, text) == ("E", "E Failed to measure CPU 0 to CPU 1: 1000 bursts of 10000 round trips "
                                 "not done within 1 s") or kind == "reply", (kind, text)
    assert time.monotonic() - t0 < 3
    assert a.request(b"2 2")[0] == "reply"
    assert a.close() == 0


def test_eof_ends_it_also_during_a_measurement():
    """The SSH session closed: stdin at EOF. Idle, it exits at once; in a measurement, when the
    measurement ends (at most its timeout)."""
    a = Agent("0", "1")
    t0 = time.monotonic()
    assert a.close(5) == 0 and time.monotonic() - t0 < 1
    a = Agent("0", "1", "1")
    a.p.stdin.write(b"1000 10000\n")
    a.p.stdin.flush()
    t0 = time.monotonic()
    assert a.close(5) == 0 and time.monotonic() - t0 < 3


def test_a_reader_gone_is_exit_5_not_a_spin():
    p = subprocess.Popen([str(CPU_RTT), "0", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    p.stdin.write(b"2 2\n")
    p.stdin.flush()
    assert p.wait(5) == 5
    assert p.stderr.read() == b"Failed to write a reply to stdout: Broken pipe\n"
    p.stdin.close()
    p.stderr.close()


# --- the request line under a fuzzer ------------------------------------------------------------------
_token = st.sampled_from([b"0", b"1", b"2", b"20", b"100", b"10000", b"10001", b"1000", b"9223372036854775807",
                          b"18446744073709551617", b"-1", b"+1", b"0x1", b"1e3", b" ", b"\t", b"\r", b"\x00", b"\xff",
                          b"\xc3\xa9", b'"', b"\\", b"%s", b"%n", b"E", b"1 1"])
_line = st.one_of(
    st.lists(_token, max_size=8).map(b"".join),
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
    st.tuples(st.integers(0, 10**25), st.integers(0, 10**25)).map(lambda t: b"%d %d" % t),
    st.tuples(st.integers(1, 40), st.integers(1, 40)).map(lambda t: b"%d %d" % t),  # cheap valid requests
    st.binary(min_size=60, max_size=4096).map(lambda b: b.replace(b"\n", b"1")),  # around and over 64 bytes
)
FUZZ = settings(max_examples=int(os.environ.get("XENOBENCH_FUZZ_EXAMPLES", examples(300))), deadline=None)


FUZZ_TIMEOUT_S = 2


@FUZZ
@given(lines=st.lists(_line, min_size=1, max_size=4))
def test_fuzzed_request_lines_get_one_answer_each_as_the_grammar_says(lines):
    """Several lines at once (as a pipe delivers them), to a fresh agent: each gets its own answer,
    in order, the agent's verdict is the grammar's (a valid request too long for the timeout is
    refused as such), and EOF then ends it with 0."""
    a = Agent("0", "1", str(FUZZ_TIMEOUT_S))
    try:
        a.p.stdin.write(b"".join(line + b"\n" for line in lines))
        a.p.stdin.flush()
        for line in lines:
            want = model(line)
            kind, got = a.answer()
            event(f"{'refused: ' + want if isinstance(want, str) else 'valid: ' + kind}")
            if isinstance(want, tuple) and kind == "E":
                assert got == (f"E Failed to measure CPU 0 to CPU 1: {want[0]} bursts of {want[1]} round trips not "
                               f"done within {FUZZ_TIMEOUT_S} s"), line
            elif isinstance(want, tuple):
                assert kind == "reply" and (got["bursts"], got["per_burst"]) == want, (line, got)
            else:
                assert (kind, got) == ("E", f'{HEAD}{want}, got "{shown(line)}"'), line
        assert a.p.poll() is None and a.buf == b""
    finally:
        rc = a.close()
    assert rc == 0
