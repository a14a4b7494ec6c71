"""A ratio's verdict as the report words it: an order where the interval excludes 1 from enough
ratios (xenobench.rateblocks.MIN_ROUNDS), otherwise "not distinguishable", saying why where the
interval alone would have claimed one."""

import pytest

from xenobench.rateblocks import MIN_ROUNDS, RateRatio
from xenobench.report import _verdict

CASES = [  # (median, ci, ratios, words)
    (0.90, (0.85, 0.95), MIN_ROUNDS, "xenoflow slower than wire"),
    (1.10, (1.02, 1.20), 12, "xenoflow faster than wire"),
    (1.00, (0.90, 1.10), 12, "not distinguishable"),
    (1.78, (1.12, 2.44), 2, f"not distinguishable (2 ratios; an order needs {MIN_ROUNDS})"),
    (0.80, (0.70, 0.90), MIN_ROUNDS - 1, f"not distinguishable ({MIN_ROUNDS - 1} ratios; an order needs {MIN_ROUNDS})"),
]


@pytest.mark.parametrize("median, ci, n, words", CASES)
def test_the_verdict_in_words(median, ci, n, words):
    assert _verdict(RateRatio("xenoflow", "wire", median, *ci, n, 2)) == words
