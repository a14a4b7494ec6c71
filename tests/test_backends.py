"""The Python backends parser against the shared vectors (tests/vectors/backends/cases.yaml)."""

from pathlib import Path

import pytest
import yaml

from xenobench.backends import load_backends
from xenobench.errors import BackendsError

CASES = yaml.safe_load((Path(__file__).parent / "vectors/backends/cases.yaml").read_text())


@pytest.mark.parametrize("case", CASES["bad"], ids=[c["id"] for c in CASES["bad"]])
def test_bad_backends_file_is_rejected_with_its_message(case, tmp_path):
    f = tmp_path / f"backends.{case['ext']}"
    f.write_text(case["text"])
    with pytest.raises(BackendsError) as e:
        load_backends(f)
    assert str(e.value) == f"Failed to load backends {f}: {case['expect']}"


@pytest.mark.parametrize("case", CASES["good"], ids=[c["id"] for c in CASES["good"]])
def test_good_backends_file_gives_slot_table(case, tmp_path):
    f = tmp_path / f"backends.{case['ext']}"
    f.write_text(case["text"])
    bs = load_backends(f)
    assert bs.class_bits == case["class_bits"]
    assert list(bs.slots) == case["slots"]


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
