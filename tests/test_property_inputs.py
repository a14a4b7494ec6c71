"""Property tests (Hypothesis) for the readers of user input: whatever the bytes, a reader returns
a result or raises the project's own error (ConfigError, DataError), never another exception.

- the config loader: config/local.yaml with values replaced, keys dropped or added (any YAML
  value, NaN/inf, floats for integers, deep nesting, odd keys), and byte-level mutations of it;
- the capture readers (xenobench.pcap_rtt): pcap, pcapng and tcpdump -e text captures of a few
  probes and answers, truncated and mutated, and random bytes behind each format's magic;
- the thesis raw series (xenobench.ingest.read_series): random lines and bytes;
- the tidy CSVs (xenobench.results.read_tidy): the fixture's pps.csv with cells replaced and
  bytes mutated; what is accepted has finite numbers and the schema's columns;
- the profile compiler (xenobench.traffic.profiles.compile_streams): a user profile's streams as
  the TRex client writes them (typed as STLStream.to_json types them), with rates, flags, flow
  variables, offsets and checksum fixes replaced: frames of the packet's own length, or
  TrafficError.

Example counts are bounded (settings below) so the file stays within a few tens of seconds;
derandomized, so a failure reproduces. The byte mutator is tests/strategies.py's.
"""

from __future__ import annotations

import copy
import math
import struct

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xenobench.config import DEFAULT_CONFIG, Config, load_config
from xenobench.errors import ConfigError, DataError, TrafficError
from xenobench.ingest import MAX_COUNT, read_series
from xenobench.pcap_rtt import RttResult, analyze_pcap
from xenobench.results import COLUMNS, NUMERIC, read_tidy
from xenobench.traffic.profiles import compile_streams, load_streams

from xenobench import REPO_ROOT

from .strategies import examples, mutated
from .test_rtt_pairing import CLIENT, LB, T0, answer, pcap_ns, pcapng, probe, tcpdump_line

SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])

# --- the config loader ------------------------------------------------------------------------------
LOCAL_TEXT = DEFAULT_CONFIG.read_bytes()
BASE = yaml.safe_load(LOCAL_TEXT)

leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, 1, -1, 53, 65536, 2**63]),
    st.floats(), st.sampled_from([float("nan"), float("inf"), -float("inf"), 53.0, 0.5, 1e308, -0.0]),
    st.text(max_size=20), st.sampled_from(["", " ", "-", "ssh", "netns", "02:00:00:00:02:00", "198.18.0.9/24",
                                           "example..com.", "a" * 70 + ".", "@", "../x", "\x00", "é"]))
values = st.recursive(leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(st.one_of(st.text(max_size=8), st.integers()),
                                                                    inner, max_size=4)),
                      max_leaves=8)


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _paths(doc, prefix=()):
    """Every key path of a document (mappings and lists)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(BASE)[1:]
NUMERIC_PATHS = [p for p in PATHS if type(_get(BASE, p)) in (int, float)]
ODD_NUMBERS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 53.0, 2.0, 1e308, -1, 0, 2**63, 1e-300])
INT_KEYS = [("service", "port"), ("experiments", "repetitions"), ("experiments", "max_attempts"), ("dns", "ttl_s")]


@st.composite
def config_docs(draw):
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
        path = draw(st.sampled_from(PATHS))
        parent = doc
        try:
            for k in path[:-1]:
                parent = parent[k]
            op = draw(st.sampled_from([0, 1, 2, 3, 4, 4, 4, 4]))  # numbers weighted: they pass YAML and shape
            if op >= 4:  # a number where the config has one: NaN, inf, a float for an integer
                num = draw(st.sampled_from(NUMERIC_PATHS))
                target = doc
                for k in num[:-1]:
                    target = target[k]
                target[num[-1]] = draw(ODD_NUMBERS)
            elif op == 0:
                parent[path[-1]] = draw(values)
            elif op == 1 and isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif op == 2 and isinstance(parent, dict):
                parent[draw(st.one_of(st.text(max_size=10), st.integers(), st.booleans()))] = draw(values)
            else:  # nest the value deeper than any schema goes
                v = parent[path[-1]]
                for _ in range(draw(st.integers(1, 40))):
                    v = [v]
                parent[path[-1]] = v
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced the path
    return doc


def _load(tmp_path, data: bytes):
    f = tmp_path / "c.yaml"
    f.write_bytes(data)
    try:
        cfg = load_config(f)
    except ConfigError as e:
        assert str(e).startswith(f"Failed to load config {f}") or str(e).startswith("Failed to "), e
        assert "\n" not in str(e).split(": ", 1)[0]
        return None
    assert isinstance(cfg, Config)
    return cfg


@settings(max_examples=examples(100), **SETTINGS)
@given(doc=config_docs())
def test_config_with_any_values_loads_or_fails_with_config_error(tmp_path, doc):
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except (yaml.YAMLError, RecursionError):
        return
    cfg = _load(tmp_path, text.encode("utf-8", "surrogatepass"))
    if cfg is not None:  # accepted: what the schema promises holds
        for p in INT_KEYS:
            v = _get(cfg.raw, p)
            assert type(v) is int, (p, v)
        for sec in ("experiments", "dns", "traffic"):
            for p in _paths(cfg.section(sec)):
                v = cfg.section(sec)
                for k in p:
                    v = v[k]
                assert not (isinstance(v, float) and not math.isfinite(v)), (sec, p, v)


@settings(max_examples=examples(150), **SETTINGS)
@given(data=mutated(LOCAL_TEXT))
def test_config_bytes_mutated_load_or_fail_with_config_error(tmp_path, data):
    _load(tmp_path, data)


# --- captures: pcap, pcapng, tcpdump -e text --------------------------------------------------------
RECORDS = [(T0 + i * 200_000_000, probe(i)) for i in range(3)]
RECORDS = sorted(RECORDS + [(T0 + i * 200_000_000 + 25_000 + i, answer(i)) for i in range(3)])
TEXT_Q = "ethertype IPv4 (0x0800), length 73: 10.0.0.1.44444 > 10.0.0.45.53: 4660+ A? example.local. (31)"
TEXT_A = "ethertype IPv4 (0x0800), length 102: 10.0.0.45.53 > 10.0.0.3.5353: 4660*- 1/0/0 A 1.1.1.1 (60)"
TEXT = "".join(tcpdump_line(f"23:59:59.{700000 + i * 100:06d}", *((CLIENT, LB, TEXT_Q) if i % 2 == 0 else
                                                                 ("02:00:00:00:02:00", CLIENT, TEXT_A))) + "\n"
               for i in range(6)).encode()


def _seeds(tmp_path):
    return {"pcap": pcap_ns(tmp_path / "seed.pcap", RECORDS).read_bytes(),
            "pcapng": pcapng([(ts // 1000, raw) for ts, raw in RECORDS]),
            "text": TEXT}


@st.composite
def captures(draw, seeds):
    kind = draw(st.sampled_from(sorted(seeds)))
    base = seeds[kind]
    how = draw(st.integers(0, 4))
    if how == 4:
        return draw(tcpdump_texts())
    if how == 0:  # cut anywhere
        return base[:draw(st.integers(0, len(base)))]
    if how == 1:  # the format's first bytes, then anything
        return base[:draw(st.integers(4, 40))] + draw(st.binary(max_size=200))
    data = bytearray(draw(mutated(base)))
    for _ in range(draw(st.integers(0, 6))):  # flip bits: lengths, option codes, magic numbers
        if data:
            pos = draw(st.integers(0, len(data) - 1))
            data[pos] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


@st.composite
def pcapng_blocks(draw):
    """pcapng whose framing is right (type, length, body, length) but whose blocks are anything:
    short or empty bodies, options running past their block, unknown types, either byte order,
    packets naming interfaces that are not there; frames are the seeds' own."""
    e = draw(st.sampled_from(["<", ">"]))

    def block(btype, body):
        body += b"\0" * (-len(body) % 4)
        return struct.pack(e + "II", btype, 12 + len(body)) + body + struct.pack(e + "I", 12 + len(body))

    out = block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))
    for _ in range(draw(st.integers(1, 6))):
        btype = draw(st.sampled_from([1, 1, 6, 6, 2, 3, 5, 0x0A0D0D0A, 0x80000001]))
        if btype == 1:
            body = struct.pack(e + "HHI", draw(st.sampled_from([1, 113, 0])), 0, 65535)
            for _ in range(draw(st.integers(0, 3))):
                code, olen = draw(st.sampled_from([9, 14, 0, 2, 9])), draw(st.integers(0, 12))
                body += struct.pack(e + "HH", code, olen) + draw(st.binary(min_size=0, max_size=12))
        elif btype in (6, 2):
            raw = draw(st.sampled_from([f for _, f in RECORDS]))
            ts = draw(st.integers(0, 2**64 - 1))
            iface = draw(st.integers(0, 2))
            head = (struct.pack(e + "IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(raw), len(raw)) if btype == 6 else
                    struct.pack(e + "HHIIII", iface, 0, ts >> 32, ts & 0xFFFFFFFF, len(raw), len(raw)))
            body = head + raw
        elif btype == 0x0A0D0D0A:
            body = struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1)
        else:
            body = draw(st.binary(max_size=24))
        body = body[:draw(st.integers(0, len(body)))] if draw(st.integers(0, 3)) == 0 else body
        out += block(btype, body)
    return out


@st.composite
def tcpdump_texts(draw):
    """tcpdump -e lines with any clock, date, MACs, ports, ids and question."""
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        clock = draw(st.sampled_from(["23:59:59.700000", "00:00:00.000020", "99:99:99.999999", "2024-13-45 10:00:00.1",
                                      "2024-02-29 10:00:00.123456789", "1700000000.123456", "0:0:0.0", "12:00:00"]))
        q = draw(st.sampled_from([TEXT_Q, TEXT_A, TEXT_Q.replace("4660", "99999999999999999999"),
                                  TEXT_Q.replace(".53:", ".domain:"), TEXT_A.replace("1/0/0", "x/y/z"), ""]))
        macs = draw(st.sampled_from([(CLIENT, LB), (LB, CLIENT), ("zz", "yy")]))
        lines.append(tcpdump_line(clock, *macs, q))
    return "\n".join(lines).encode()


def test_capture_seeds_give_their_rtts(tmp_path):
    """The seeds are valid captures: the mutations start from something the reader accepts."""
    for kind, data in _seeds(tmp_path).items():
        f = tmp_path / f"ok.{kind}"
        f.write_bytes(data)
        r = analyze_pcap(f)
        assert r.n == 3 and r.lost == 0, kind


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return _seeds(tmp_path_factory.mktemp("seeds"))


@settings(max_examples=examples(200), **SETTINGS)
@given(data=st.data())
def test_capture_readers_return_a_result_or_data_error(tmp_path, seeds, data):
    raw = data.draw(captures(seeds))
    f = tmp_path / "c.cap"
    f.write_bytes(raw)
    try:
        r = analyze_pcap(f)
    except DataError as e:
        assert str(e).startswith("Failed to ") and str(f) in str(e), e
        return
    assert isinstance(r, RttResult) and r.n >= 1
    assert (np.asarray(r.rtts_ns) >= 0).all()
    r.summary()
    r.flags()


@settings(max_examples=examples(150), **SETTINGS)
@given(raw=pcapng_blocks())
def test_pcapng_blocks_of_any_shape_give_a_result_or_data_error(tmp_path, raw):
    f = tmp_path / "c.pcapng"
    f.write_bytes(raw)
    try:
        analyze_pcap(f)
    except DataError as e:
        assert str(e).startswith("Failed to ") and str(f) in str(e), e


# --- thesis raw series --------------------------------------------------------------------------------
series_lines = st.lists(st.one_of(st.integers(-10, 10**13).map(str), st.integers(0, 2**80).map(str),
                                  st.sampled_from(["", " ", "1.5", "1e3", "0x10", "+5", "-0", "nan", "١٢", "5 6"]),
                                  st.text(max_size=6)), max_size=30)


@settings(max_examples=examples(200), **SETTINGS)
@given(data=st.one_of(series_lines.map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
                      st.binary(max_size=100)))
def test_series_reader_returns_bounded_counts_or_data_error(tmp_path, data):
    f = tmp_path / "22b_1.txt"
    f.write_bytes(data)
    try:
        x = read_series(f)
    except DataError as e:
        assert str(e).startswith(f"Failed to read series {f}"), e
        return
    assert x.dtype == np.int64 and len(x) >= 1
    assert ((x >= 0) & (x <= MAX_COUNT)).all()
    assert int(x.sum()) == sum(int(v) for v in x.tolist())  # no int64 wrap-around


# --- tidy CSVs ----------------------------------------------------------------------------------------
PPS = (REPO_ROOT / "tests/fixtures/results/small/pps.csv").read_bytes()
CELLS = st.one_of(st.sampled_from(["", "nan", "inf", "-inf", "1e999", "NaN", "abc", "5", "1,5", '"', '""', "'",
                                   "2.5", "-1", "packets/s", "%", "rx_pps", "loss_pct", "rtt_median_us", "\u00e9",
                                   "#", "0x10", "1e308"]), st.text(max_size=8))


@st.composite
def tidy_files(draw):
    lines = PPS.decode().splitlines()
    if draw(st.booleans()):
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(2, len(lines) - 1))  # past the two comment lines
            cells = lines[i].split(",")
            col = draw(st.one_of(st.integers(0, len(cells) - 1),  # any column, or a numeric or text one
                                 st.sampled_from([COLUMNS.index(c) for c in (*NUMERIC, "metric", "unit")])))
            cells[min(col, len(cells) - 1)] = draw(CELLS)
            lines[i] = ",".join(cells)
        return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    return draw(mutated(PPS))


@settings(max_examples=examples(150), **SETTINGS)
@given(data=tidy_files())
def test_tidy_reader_returns_a_valid_table_or_data_error(tmp_path, data):
    f = tmp_path / "pps.csv"
    f.write_bytes(data)
    try:
        df = read_tidy(f, "pps")
    except DataError as e:
        assert str(e).startswith(f"Failed to read tidy results {f}"), e
        return
    assert list(df.columns) == COLUMNS
    for c in NUMERIC:
        v = df[c].to_numpy(dtype=float)
        assert not np.isinf(v).any(), c
    assert df.metric.map(lambda m: isinstance(m, str)).all()
    assert pd.notna(df.value).all()


def test_the_property_seeds_are_accepted(tmp_path):
    """Without mutation every reader accepts its seed (else the properties test only refusals)."""
    assert _load(tmp_path, LOCAL_TEXT) is not None
    f = tmp_path / "pps.csv"
    f.write_bytes(PPS)
    assert len(read_tidy(f, "pps")) == 13
    f = tmp_path / "s.txt"
    f.write_bytes(b"1\n2\n")
    assert read_series(f).tolist() == [1, 2]


# --- the profile compiler ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seed_streams():
    """Two streams of tests/fixtures/traffic/refused.py --case ok, loaded by the real TRex client:
    a flow variable written into IP.src with an IPv4 checksum fix, and a plain one."""
    return load_streams("tests/fixtures/traffic/refused.py", {"case": "ok"})[1]


RATE = st.one_of(st.sampled_from([0, -1, 0.0004, 0.5, 1, 100, 1e9, float("nan"), float("inf"), -float("inf")]),
                 st.floats(), st.integers(-10, 10**7))
OFFSET = st.one_of(st.integers(-4, 70), st.integers(-2**16, 2**16))
U64 = st.one_of(st.integers(0, 300), st.sampled_from([0, 255, 256, 2**16, 2**32 - 1, 2**32, 2**64 - 1]),
                st.integers(-5, -1))
# (where in the stream, the values the client can put there)
STREAM_EDITS = [
    (("mode", "rate", "value"), RATE),
    (("enabled",), st.booleans()),
    (("self_start",), st.booleans()),
    (("vm", "instructions", 0, "size"), st.sampled_from([1, 2, 3, 4, 8, 0])),
    (("vm", "instructions", 0, "step"), U64),
    (("vm", "instructions", 0, "min_value"), U64),
    (("vm", "instructions", 0, "max_value"), U64),
    (("vm", "instructions", 0, "init_value"), U64),
    (("vm", "instructions", 0, "value_list"), st.lists(U64, max_size=5)),
    (("vm", "instructions", 0, "op"), st.sampled_from(["inc", "dec", "random"])),
    (("vm", "instructions", 1, "pkt_offset"), OFFSET),
    (("vm", "instructions", 1, "add_value"), st.integers(-2**33, 2**33)),
    (("vm", "instructions", 1, "name"), st.sampled_from(["src", "nope"])),
    (("vm", "instructions", 2, "pkt_offset"), OFFSET),
    (("vm", "instructions", 2), st.builds(lambda l2, l3, t: {"type": "fix_checksum_hw", "l2_len": l2, "l3_len": l3,
                                                           "l4_type": t},
                                        st.integers(0, 70), st.integers(0, 70), st.sampled_from([11, 13, 17]))),
    (("vm", "instructions", 1), st.builds(lambda off, cast, mask, shift: {
        "type": "write_mask_flow_var", "name": "src", "pkt_offset": off, "pkt_cast_size": cast, "mask": mask,
        "shift": shift, "add_value": 0, "is_big_endian": True},
        OFFSET, st.sampled_from([1, 2, 3, 4]), st.integers(0, 2**32 - 1), st.integers(-32, 32))),
]


@st.composite
def stream_sets(draw, seeds):
    streams = copy.deepcopy(seeds)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(streams) - 1))
        path, values = draw(st.sampled_from(STREAM_EDITS))
        node = streams[i]
        try:
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = draw(values)
        except (KeyError, IndexError, TypeError):  # the plain stream has no field engine
            continue
    if draw(st.booleans()):
        streams = draw(st.permutations(streams))
    return streams


@settings(max_examples=examples(300), **SETTINGS)
@given(data=st.data())
def test_profile_compiler_returns_frames_or_traffic_error(seed_streams, data):
    import base64
    streams = data.draw(stream_sets(seed_streams))
    try:
        frames = compile_streams(streams, "profile fuzz.py")
    except TrafficError as e:
        assert str(e).startswith("Failed to compile ") and "fuzz.py" in str(e), e
        return
    lengths = {len(base64.b64decode(s["packet"]["binary"])) for s in streams}
    assert frames and {len(f) for f in frames} <= lengths  # no write grew or cut a frame
