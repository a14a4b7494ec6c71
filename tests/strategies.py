"""Hypothesis strategies and helpers shared by the property tests (tests/test_property_*.py).

Backends files: documents shaped like the schema with every field perturbed (types, ranges,
escapes, duplicate keys, odd keys), written as JSON text by our own writer (json.dumps cannot
write a duplicate key) and then possibly mutated byte-wise; plus YAML renderings with aliases,
merge keys and tags mixed in. DNS: queries built with dnspython, then mutated.

The C parser is reached through xenoflow-check-backends (lb/build, or the build directory in
XENOBENCH_LB_BUILD for a private build)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from xenobench import REPO_ROOT

CHECK = Path(os.environ.get("XENOBENCH_LB_BUILD", REPO_ROOT / "lb" / "build")) / "xenoflow-check-backends"
needs_check = pytest.mark.skipif(not CHECK.exists(), reason=f"{CHECK} not built (make build)")

def examples(n: int) -> int:
    """A property test's example count: `n` under the "deep" Hypothesis profile (max_examples 100,
    `make test-e2e`), scaled by the loaded profile otherwise ("quick", `make test`: n/4), at least 10.
    tests/conftest.py registers and loads the profiles before any test module is imported."""
    return max(10, n * settings().max_examples // 100)


# Bounded so the property tests stay a few seconds each; deadline off because each C example is a
# process start whose time depends on the machine's load, not on the input.
PROPERTY = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize=True)


def c_load(path: Path) -> tuple[int, object]:
    """(exit code, parsed JSON on success or the one-line error) from the C parser."""
    p = subprocess.run([str(CHECK), str(path)], capture_output=True, timeout=10)
    if p.returncode == 0:
        return 0, json.loads(p.stdout)
    assert p.returncode == 2 and p.stdout == b"", (p.returncode, p.stdout, p.stderr)
    return 2, p.stderr.decode("utf-8", "backslashreplace").rstrip("\n")


# --- backends documents -----------------------------------------------------------------------------
macs = st.builds(lambda octets, upper: ":".join(f"{o:02X}" if upper else f"{o:02x}" for o in octets),
                 st.lists(st.integers(0, 255), min_size=6, max_size=6), st.booleans())
odd_text = st.text(st.one_of(st.characters(), st.sampled_from(["\x00", "\ud800", "\udfff", "\ud83d", "'", '"', "\\",
                                                             "\x7f", "\x85", "\u2028", "\U0001f600"])),
                   max_size=12)
names = st.one_of(st.sampled_from(["fips2", "fips3", "a", "b", "é", "x\"y", "a\\b", "\n"]), odd_text)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), odd_text)
junk = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(odd_text, inner, max_size=3)),
                    max_leaves=6)
weights = st.one_of(st.integers(1, 4), st.integers(-2, 300), st.sampled_from([1.0, 2.5, True, "2", None]))
class_bits = st.one_of(st.integers(0, 8), st.integers(-1, 10), st.sampled_from([1.0, False, "1", None]))


@st.composite
def backend(draw) -> list[tuple[str, object]]:
    """One backend object as (key, value) pairs: sometimes a key missing, doubled or unknown."""
    pairs = [("name", draw(names)), ("mac_address", draw(st.one_of(macs, macs, junk)))]
    if draw(st.booleans()):
        pairs.append(("weight", draw(weights)))
    if draw(st.integers(0, 9)) == 0:
        pairs.pop(draw(st.integers(0, len(pairs) - 1)))
    if draw(st.integers(0, 9)) == 0:
        pairs.append((draw(st.sampled_from(["name", "mac_address", "weight", "ip", "Name", ""])), draw(junk)))
    return draw(st.permutations(pairs))


@st.composite
def backends_doc(draw) -> list[tuple[str, object]]:
    """A whole document as (key, value) pairs; objects inside are lists of pairs too (a `Pairs`)."""
    bes = draw(st.lists(backend(), min_size=0, max_size=5))
    if draw(st.integers(0, 3)) == 0:  # the same MAC or name twice
        bes = bes + bes[:1]
    pairs: list[tuple[str, object]] = [("backends", [Pairs(b) for b in bes])]
    if draw(st.booleans()):
        pairs.append(("class_bits", draw(class_bits)))
    if draw(st.integers(0, 9)) == 0:
        pairs.append((draw(st.sampled_from(["backends", "class_bits", "mask", "class bits"])), draw(junk)))
    return Pairs(draw(st.permutations(pairs)))


class Pairs(list):
    """A JSON object written key by key, so a key may come twice."""


def write_json(v, ensure_ascii: bool, sep: str) -> str:
    if isinstance(v, Pairs):
        return "{" + sep.join(f"{json.dumps(k, ensure_ascii=ensure_ascii)}:{write_json(x, ensure_ascii, sep)}"
                              for k, x in v) + "}"
    if isinstance(v, dict):
        return write_json(Pairs(v.items()), ensure_ascii, sep)
    if isinstance(v, list):
        return "[" + sep.join(write_json(x, ensure_ascii, sep) for x in v) + "]"
    return json.dumps(v, ensure_ascii=ensure_ascii)


# tokens a mutation inserts: the ones parsers disagree on
TOKENS = [b",", b"}", b"]", b"{", b"[", b'"', b"\\", b":", b" ", b"\n", b"\t", b"0", b"-", b"1e999", b"NaN",
          b"Infinity", b"0o2", b"02", b"1.", b".5", b"+1", b"true", b"null", b"\\u0000", b"\\ud800", b"\\ud83d\\ude00",
          b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\xef\xbb\xbf", b"\x00", b"'", b"/*", b"#",
          b"9223372036854775808", b"-9223372036854775808", b"1e16", b"5e-324", b"[" * 33]


@st.composite
def mutated(draw, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.integers(0, 4))
        pos = draw(st.integers(0, len(data)))
        if op == 0 and data:  # delete a run
            del data[pos:pos + draw(st.integers(1, 4))]
        elif op == 1:  # insert a token
            data[pos:pos] = draw(st.sampled_from(TOKENS))
        elif op == 2 and data:  # repeat a slice (a second document, a doubled key)
            a = draw(st.integers(0, len(data) - 1))
            data[pos:pos] = data[a:a + draw(st.integers(1, 40))]
        elif op == 3:  # cut
            del data[pos:]
        else:  # a random byte
            data[pos:pos] = bytes([draw(st.integers(0, 255))])
    return bytes(data)


@st.composite
def json_files(draw) -> bytes:
    """Bytes of a backends file meant as JSON: mostly schema-shaped, often mutated."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=64))
    text = write_json(draw(backends_doc()), draw(st.booleans()), draw(st.sampled_from([",", ", ", ",\n  "])))
    if draw(st.integers(0, 3)) == 0:  # around the document: a BOM, a second document, a stray comma
        text = draw(st.sampled_from(["", " ", "\n", "\ufeff"])) + text + draw(st.sampled_from(["", "\n", " x", "{}", ","]))
    data = text.encode("utf-8", "surrogatepass")
    return draw(mutated(data)) if kind > 4 else data


def as_plain(v):
    if isinstance(v, Pairs):
        return {k: as_plain(x) for k, x in v}
    if isinstance(v, list):
        return [as_plain(x) for x in v]
    return v


@st.composite
def yaml_files(draw) -> bytes:
    """Bytes of a backends file meant as YAML: a document rendered by PyYAML (block or flow), with
    YAML's own hazards spliced in (aliases, merge keys, tags, a second document), often mutated."""
    import yaml
    doc = as_plain(draw(backends_doc()))
    try:
        text = yaml.safe_dump(doc, default_flow_style=draw(st.sampled_from([False, True, None])),
                              allow_unicode=draw(st.booleans()))
    except yaml.YAMLError:
        text = "backends: []\n"
    extra = draw(st.sampled_from(["", "x: &a [1, 2]\ny: *a\n", "<<: {class_bits: 1}\n", "class_bits: !!int '1'\n",
                                  "---\nbackends: []\n", "class_bits: 0o2\n", "class_bits: 0x1\n",
                                  "class_bits: 1:00\n", "backends: !!python/object:os.system {}\n"]))
    data = (text + extra).encode("utf-8", "surrogatepass")
    return draw(mutated(data)) if draw(st.booleans()) else data


# --- DNS -------------------------------------------------------------------------------------------
@st.composite
def dns_queries(draw) -> bytes:
    """A DNS message meant as a query: a dnspython-built query (random name, type, class, flags,
    EDNS) mutated, or random bytes with a header."""
    import dns.message
    import dns.rdataclass
    import dns.rdatatype
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=80))
    if draw(st.booleans()):  # names the zone serves, in any case
        name = draw(st.sampled_from(["probe.example.com.", "www.example.com.", "PROBE.Example.COM.", "example.com."]))
    else:
        labels = draw(st.lists(st.sampled_from(["probe", "www", "a", "x" * 63, "example", "com", "org", "*", "-"]),
                               min_size=0, max_size=5))
        name = ".".join(labels + draw(st.sampled_from([["example", "com"], [], ["com"]]))) + "."
    try:
        q = dns.message.make_query(name, draw(st.sampled_from(["A", "AAAA", "ANY", "TXT", "MX"])),
                                   rdclass=draw(st.sampled_from(["IN", "CH", "ANY"])),
                                   use_edns=draw(st.sampled_from([None, 0])),
                                   want_dnssec=draw(st.booleans()))
    except Exception:  # noqa: BLE001 - a name dnspython will not build (too long): plain bytes then
        return draw(st.binary(min_size=12, max_size=80))
    q.id = draw(st.integers(0, 0xFFFF))
    wire = bytearray(q.to_wire())
    if draw(st.integers(0, 3)) == 0:  # one more additional record: OPT, TSIG, TKEY, SIG or A, raw rdata
        rdata = draw(st.binary(max_size=24))
        wire += b"\x00" + draw(st.sampled_from([41, 250, 249, 24, 1])).to_bytes(2, "big") \
            + draw(st.integers(0, 0xFFFF)).to_bytes(2, "big") + draw(st.integers(0, 2**32 - 1)).to_bytes(4, "big") \
            + len(rdata).to_bytes(2, "big") + rdata
        wire[10:12] = (int.from_bytes(wire[10:12], "big") + 1).to_bytes(2, "big")
    if kind >= 2:
        wire = bytearray(draw(mutated(bytes(wire))))
        for _ in range(draw(st.integers(0, 3))):  # flip bits anywhere, header included
            if wire:
                pos = draw(st.integers(0, len(wire) - 1))
                wire[pos] ^= 1 << draw(st.integers(0, 7))
    if kind == 4 and len(wire) > 12:  # a label length or pointer byte in the question
        wire[draw(st.integers(12, len(wire) - 1))] = draw(st.sampled_from([0xC0, 0xC1, 0x3F, 0x40, 0x80, 0xFF, 0x00]))
    return bytes(wire)


@st.composite
def valid_backends_doc(draw) -> Pairs:
    """A document both parsers must accept: distinct names (any text a C string carries), distinct
    MACs in either case, weights summing to a power of two, class_bits (if given) large enough."""
    t = draw(st.integers(0, 4))
    total = 1 << t
    n = draw(st.integers(1, total))
    cuts = sorted(draw(st.lists(st.integers(1, total - 1), min_size=n - 1, max_size=n - 1, unique=True))) if n > 1 else []
    parts = [b - a for a, b in zip([0, *cuts], [*cuts, total])]
    plain_name = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=8)
    nms = draw(st.lists(plain_name, min_size=n, max_size=n, unique=True))
    ms = draw(st.lists(macs, min_size=n, max_size=n, unique_by=str.lower))
    bes = []
    for name, mac, w in zip(nms, ms, parts):
        pairs = [("name", name), ("mac_address", mac)]
        if w != 1 or draw(st.booleans()):
            pairs.append(("weight", w))
        bes.append(Pairs(draw(st.permutations(pairs))))
    doc = [("backends", bes)]
    if draw(st.booleans()):  # without it, k is the smallest with total | 2^k: t
        doc.append(("class_bits", draw(st.integers(t, 8))))
    return Pairs(draw(st.permutations(doc)))
