"""Property tests of the backends readers (Hypothesis; strategies in tests/strategies.py): on
generated and mutated files, Python's reader raises nothing but BackendsError, and XenoFlow's C
reader (through xenoflow-check-backends) gives the same verdict and, where both accept, the same
parsed result (each reader words its refusals in its own way). YAML files, which XenoFlow does not
read, are compared through the canonical JSON the harness writes for it."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xenobench.backends import CLASSES, RING, BackendSet, canonical_json, load_backends
from xenobench.errors import BackendsError

from .strategies import PROPERTY, c_load, json_files, needs_check, valid_backends_doc, write_json, yaml_files


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("backends-property")


def py_load(f):
    """(0, result as the C reader prints it) or (2, message); any other exception fails the test."""
    try:
        bs = load_backends(f)
    except BackendsError as e:
        assert str(e).startswith(f"Failed to load backends {f}: "), str(e)
        return 2, str(e)
    return 0, {"class_bits": bs.class_bits, "slots": list(bs.slots),
               "backends": [{"name": b.name, "mac": b.mac, "weight": b.weight} for b in bs.backends]}


def assert_same(py, c, f, data):
    """The same verdict; the same set where both accept; a refusal naming the file."""
    if py[0] == 2 and c[0] == 2:
        assert c[1].startswith(f"Failed to load backends {f}: "), c[1]
        return
    assert c == py, f"file bytes: {data!r}"


@needs_check
@PROPERTY
@given(data=json_files())
def test_c_and_python_agree_on_json_files(workdir, data):
    f = workdir / "b.json"
    f.write_bytes(data)
    py = py_load(f)
    assert_same(py, c_load(f), f, data)
    if py[0] == 0:  # the canonical form reads back to the same set, in both
        g = workdir / "canonical.json"
        g.write_text(canonical_json(load_backends(f)), encoding="utf-8")
        assert py_load(g)[1] == py[1] and c_load(g) == (0, py[1])


@needs_check
@PROPERTY
@given(doc=valid_backends_doc(), ensure_ascii=st.booleans(), sep=st.sampled_from([",", ", ", ",\n\t"]))
def test_c_and_python_read_valid_files_alike(workdir, doc, ensure_ascii, sep):
    f = workdir / "v.json"
    f.write_text(write_json(doc, ensure_ascii, sep), encoding="utf-8")
    py = py_load(f)
    assert py[0] == 0, py[1]
    assert c_load(f) == py
    assert json.loads(canonical_json(load_backends(f)))["class_bits"] == py[1]["class_bits"]


@needs_check
@PROPERTY
@given(data=yaml_files())
def test_yaml_files_refused_cleanly_or_handed_to_c_as_the_same_set(workdir, data):
    f = workdir / "b.yaml"
    f.write_bytes(data)
    py = py_load(f)
    if py[0] == 0:
        g = workdir / "from-yaml.json"
        g.write_text(canonical_json(load_backends(f)), encoding="utf-8")
        assert c_load(g) == py, f"file bytes: {data!r}"


@needs_check
@PROPERTY
@given(x=st.floats(allow_nan=False, allow_infinity=False), as_list=st.booleans())
def test_c_refuses_any_float_weight_as_python_does(workdir, x, as_list):
    """A float is no weight, even an integral one (2.0): Python shows it with repr(), C refuses it
    as "expected an integer"."""
    f = workdir / "w.json"
    value = f"[{x!r}, 1]" if as_list else repr(x)
    f.write_text('{"backends":[{"name":"a","mac_address":"02:00:00:00:00:01","weight":%s}]}' % value)
    assert py_load(f)[1].endswith(f"weight: {value} is not an integer in 1..256")
    assert c_load(f) == (2, f"Failed to load backends {f}: backends[0].weight: expected an integer in 1..256")


def _rule_verdict(f, rule):
    try:
        return load_backends(f, rule)
    except BackendsError as e:
        return str(e)


@PROPERTY
@given(data=json_files())
def test_katrans_rule_refuses_no_more_than_the_class_rule(workdir, data):
    """On any file: what the class rule accepts Katran's accepts as the same set; what Katran's
    refuses the class rule refuses with the same message but for the weight's range (the rules
    differ in weights only)."""
    f = workdir / "r.json"
    f.write_bytes(data)
    cls, ring = _rule_verdict(f, CLASSES), _rule_verdict(f, RING)
    if isinstance(cls, BackendSet):
        assert isinstance(ring, BackendSet) and (ring.backends, ring.class_bits, ring.slots) == \
            (cls.backends, cls.class_bits, cls.slots)
    if isinstance(ring, str):
        assert cls == ring.replace(f"1..{RING.max_weight}", f"1..{CLASSES.max_weight}")


@PROPERTY
@given(weights=st.lists(st.integers(1, (1 << 32) - 1) | st.integers(1, 9), min_size=1, max_size=12))
def test_katran_takes_any_positive_weights_and_the_class_rule_only_exact_splits(workdir, weights):
    f = workdir / "w.json"
    f.write_text(json.dumps({"backends": [{"name": f"b{i}", "mac_address": f"02:00:00:00:00:{i:02x}", "weight": w}
                                          for i, w in enumerate(weights)]}))
    ring = _rule_verdict(f, RING)
    assert isinstance(ring, BackendSet) and [b.weight for b in ring.backends] == weights
    total = sum(weights)
    exact = max(weights) <= 256 and total <= 256 and total & (total - 1) == 0
    cls = _rule_verdict(f, CLASSES)
    assert isinstance(cls, BackendSet) == exact, cls
    if not exact and max(weights) <= 256:
        assert cls.endswith("; or run Katran, which takes any positive weights"), cls
