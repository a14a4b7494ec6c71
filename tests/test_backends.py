"""The backends readers against the shared vectors (tests/vectors/backends/cases.yaml): Python
(xenobench.backends) refuses every bad case with its exact message; XenoFlow's C reader
(lb/src/backends.c through xenoflow-check-backends), which words its refusals in its own way,
gives the same verdict: it refuses every bad JSON case and every YAML file, and reads the canonical
JSON the harness writes for every good case (and the good JSON cases as written) to the same set."""

import json
from pathlib import Path

import pytest
import yaml

from xenobench.backends import CLASSES, RING, canonical_json, load_backends, write_canonical
from xenobench.errors import BackendsError

from .strategies import c_load, needs_check

CASES = yaml.safe_load((Path(__file__).parent / "vectors/backends/cases.yaml").read_text())
YAML_ONLY = "(top level): XenoFlow reads JSON only; `xenobench lb start` writes it from YAML"


def write_case(case, d: Path) -> Path:
    f = d / f"backends.{case['ext']}"
    data = bytes.fromhex(case["hex"]) if "hex" in case else case["text"].encode()
    f.write_bytes(data.ljust(case.get("pad_to", 0), b" "))
    return f


def py_verdict(f: Path):
    try:
        return load_backends(f)
    except BackendsError as e:
        return str(e)


def assert_refused_as(msg, f: Path, case):
    assert isinstance(msg, str), f"{case['id']}: accepted"
    head = f"Failed to load backends {f}: "
    if "expect" in case:
        assert msg == head + case["expect"]
    else:
        assert msg.startswith(head + case["expect_prefix"]), msg


def assert_c_refuses(f: Path):
    """XenoFlow's verdict on a bad file: exit 2 and one line naming the file (its own words)."""
    rc, out = c_load(f)
    assert rc == 2, out
    assert out.startswith(f"Failed to load backends {f}: ") and "\n" not in out, out


def as_c(bs) -> dict:
    """A BackendSet as xenoflow-check-backends prints one."""
    return {"class_bits": bs.class_bits, "slots": list(bs.slots),
            "backends": [{"name": b.name, "mac": b.mac, "weight": b.weight} for b in bs.backends]}


@pytest.mark.parametrize("case", CASES["bad"], ids=[c["id"] for c in CASES["bad"]])
def test_bad_backends_file_is_rejected_with_its_message(case, tmp_path):
    f = write_case(case, tmp_path)
    assert_refused_as(py_verdict(f), f, case)


@pytest.mark.parametrize("case", CASES["good"], ids=[c["id"] for c in CASES["good"]])
def test_good_backends_file_gives_slot_table(case, tmp_path):
    bs = load_backends(write_case(case, tmp_path))
    assert bs.class_bits == case["class_bits"]
    assert list(bs.slots) == case["slots"]
    # the canonical JSON reads back to the same set
    g = tmp_path / "canonical.json"
    g.write_text(canonical_json(bs), encoding="utf-8")
    assert as_c(load_backends(g)) == as_c(bs)


@needs_check
@pytest.mark.parametrize("case", CASES["bad"], ids=[c["id"] for c in CASES["bad"]])
def test_c_parser_refuses_bad_files_as_python_does(case, tmp_path):
    f = write_case(case, tmp_path)
    assert isinstance(py_verdict(f), str)
    assert_c_refuses(f)
    if case["ext"] == "yaml":
        assert c_load(f) == (2, f"Failed to load backends {f}: {YAML_ONLY}")


@needs_check
@pytest.mark.parametrize("case", CASES["good"], ids=[c["id"] for c in CASES["good"]])
def test_c_parser_reads_good_files_as_python_does(case, tmp_path):
    f = write_case(case, tmp_path)
    bs = load_backends(f)
    canonical = write_canonical(f, tmp_path / "canon")
    assert canonical == tmp_path / "canon" / "backends.json"
    assert c_load(canonical) == (0, as_c(bs))
    rc, out = c_load(f)
    if case["ext"] == "yaml":
        assert (rc, out) == (2, f"Failed to load backends {f}: {YAML_ONLY}")
    else:
        assert (rc, out) == (0, as_c(bs))


@needs_check
def test_257_backends_do_not_fit_in_either_parser(tmp_path):
    doc = {"backends": [{"name": f"b{i}", "mac_address": f"02:00:00:00:{i >> 8:02x}:{i & 255:02x}"}
                        for i in range(257)]}
    f = tmp_path / "b.json"
    f.write_text(json.dumps(doc))
    assert py_verdict(f) == f"Failed to load backends {f}: backends: 257 backends do not fit in 256 slots"
    assert c_load(f) == (2, f"Failed to load backends {f}: backends: more than 256 backends do not fit in 256 slots")


@needs_check
@pytest.mark.parametrize("path,reason", [("/dev/zero", "is not a regular file (a character device)"),
                                         ("/", "Is a directory")])
def test_devices_and_directories_are_refused_alike(path, reason):
    want = f"Failed to load backends {path}: {reason}"
    assert py_verdict(Path(path)) == want
    assert c_load(Path(path)) == (2, want)


def test_canonical_json_is_the_thesis_format_with_every_key():
    bs = load_backends(Path(__file__).parent.parent / "config" / "backends.json")
    doc = json.loads(canonical_json(bs))
    assert list(doc) == ["class_bits", "backends"]
    assert all(list(b) == ["name", "mac_address", "weight"] for b in doc["backends"])
    assert [b["mac_address"] for b in doc["backends"]] == [b.mac for b in bs.backends]


def test_class_of_source_address_follows_low_bits(tmp_path):
    f = tmp_path / "b.json"
    f.write_text('{"backends":[{"name":"x","mac_address":"02:00:00:00:00:01","weight":3},'
                 '{"name":"y","mac_address":"02:00:00:00:00:02"}]}')
    bs = load_backends(f)
    assert [bs.backend_for_source(f"198.18.0.{i}").name for i in range(8)] == ["x", "x", "x", "y"] * 2
    assert bs.classes_of("y") == [3]


def test_missing_file_names_it(tmp_path):
    with pytest.raises(BackendsError, match=r"Failed to load backends .*nope.json: No such file"):
        load_backends(tmp_path / "nope.json")


@needs_check
def test_an_object_of_many_keys_is_refused_alike(tmp_path):
    """80,000 keys, the first repeat at index 50,000: Python names the repeat, XenoFlow's reader
    the first key it does not know."""
    f = tmp_path / "b.json"
    f.write_text("{" + ",".join(f'"k{i % 50000}":1' for i in range(80000)) + "}")
    assert py_verdict(f) == f"Failed to load backends {f}: (top level): duplicate key 'k0'"
    assert c_load(f) == (2, f"Failed to load backends {f}: (top level): unknown key 'k0' (known: class_bits, backends)")


# --- the weight rule belongs to the LB kind ---------------------------------------------------------
def _doc(weights, class_bits=None) -> dict:
    d = {"backends": [{"name": n, "mac_address": f"02:00:00:00:00:{i + 1:02x}", "weight": w}
                      for i, (n, w) in enumerate(zip("abcdefghij", weights))]}
    return d if class_bits is None else {"class_bits": class_bits, **d}


KATRAN = "; or run Katran, which takes any positive weights"
WHY = "XenoFlow and the eBPF baseline give each backend weight/total of"
# (description, weights, class_bits, rule, (class_bits, slots) accepted or the exact message after
# "Failed to load backends <file>: ")
WEIGHT_RULES = [
    ("three equal weights, Katran", [1, 1, 1], None, RING, (None, [])),
    ("three equal weights, a class split", [1, 1, 1], None, CLASSES,
     f"backends: weights a 1, b 1, c 1 sum to 3, not a power of two up to 256: {WHY} 2^k source-address classes "
     f"(k at most 8), so the split would not be exact; give weights summing to 4 (e.g. a 2, b 1, c 1){KATRAN}"),
    ("weights 200, 100, a class split", [200, 100], None, CLASSES,
     f"backends: weights a 200, b 100 sum to 300, not a power of two up to 256: {WHY} 2^k source-address classes "
     f"(k at most 8), so the split would not be exact; give weights summing to 256 (e.g. a 171, b 85){KATRAN}"),
    ("weights 200, 100, Katran", [200, 100], None, RING, (None, [])),
    ("3:1 with class_bits 1, a class split", [3, 1], 1, CLASSES,
     f"backends: weights a 3, b 1 sum to 4 and do not fit in 2 slots (the classes of class_bits 1): {WHY} the "
     f"2^class_bits source-address classes, so the split would not be exact; give weights summing to 2 (e.g. a 1, "
     f"b 1){KATRAN}"),
    ("3:1 with class_bits 1, Katran (class_bits is for the class splits)", [3, 1], 1, RING, (None, [])),
    ("3:1, Katran, the class table kept for the other LBs", [3, 1], None, RING, (2, [0, 0, 0, 1])),
    ("uint32's largest weight, Katran", [4294967295, 1], None, RING, (None, [])),
    ("a weight beyond uint32, Katran", [4294967296, 1], None, RING,
     "backends[0].weight: 4294967296 is not an integer in 1..4294967295"),
    ("weight 0, Katran", [0, 1], None, RING, "backends[0].weight: 0 is not an integer in 1..4294967295"),
    ("weight 1000, a class split", [1000], None, CLASSES, "backends[0].weight: 1000 is not an integer in 1..256"),
    ("weight 1000 alone, Katran", [1000], None, RING, (None, [])),
]


@pytest.mark.parametrize("desc,weights,class_bits,rule,want", WEIGHT_RULES, ids=[w[0] for w in WEIGHT_RULES])
def test_weights_are_read_by_the_lb_kinds_rule(tmp_path, desc, weights, class_bits, rule, want):
    f = tmp_path / "b.json"
    f.write_text(json.dumps(_doc(weights, class_bits)))
    if isinstance(want, str):
        with pytest.raises(BackendsError) as e:
            load_backends(f, rule)
        assert str(e.value) == f"Failed to load backends {f}: {want}", desc
        return
    bs = load_backends(f, rule)
    assert (bs.class_bits, list(bs.slots), [b.weight for b in bs.backends]) == (*want, weights), desc
    # its canonical JSON (what the agent gets) reads back to the same backends and weights under the
    # same rule, and to the same class table where there is one (without one it has no class_bits)
    doc = json.loads(canonical_json(bs))
    assert ("class_bits" in doc) == (bs.class_bits is not None)
    again = load_backends(write_canonical(f, tmp_path / "canon", rule), rule)
    assert again.backends == bs.backends
    if bs.class_bits is not None:
        assert (again.class_bits, again.slots) == (bs.class_bits, bs.slots)


def test_a_set_without_class_table_refuses_a_class_question(tmp_path):
    f = tmp_path / "b.json"
    f.write_text(json.dumps(_doc([1, 1, 1])))
    bs = load_backends(f, RING)
    with pytest.raises(BackendsError, match=r"^Failed to split .*b.json by class: weights a 1, b 1, c 1 sum to 3, not a "
                                            r"power of two up to 256: .*give weights summing to 4 \(e.g. a 2, b 1, c 1\)$"):
        bs.backend_for_source("198.18.0.1")


def test_each_lb_kind_names_its_rule():
    from xenobench.agents import ebpf_lb, katran_lb, wire_lb
    from xenobench.lb.ebpf import EbpfLB
    from xenobench.lb.katran import KatranLB
    from xenobench.lb.wire import WireLB
    from xenobench.lb.xenoflow import XenoFlowLB
    assert (KatranLB.weights, katran_lb.AGENT.weights) == (RING, RING)
    assert {EbpfLB.weights, WireLB.weights, XenoFlowLB.weights, ebpf_lb.AGENT.weights, wire_lb.AGENT.weights} == {CLASSES}


def test_suggested_weights_keep_the_proportions_and_sum_to_the_table():
    from xenobench.backends import Backend, _suggest
    bs = [Backend(n, f"02:00:00:00:00:0{i}", w) for i, (n, w) in enumerate(zip("abcde", [5, 7, 9, 11, 1000]))]
    got = _suggest(bs, 256)
    assert sum(got) == 256 and min(got) >= 1 and got == sorted(got)
