"""The session's means, variances and standard deviations equal the statistics module's to the
last bit (each the correctly rounded value of the exact result), on any finite floats."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from council.methods.exact_moments import mean, stdev, variance

_FLOATS = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e150, max_value=1e150)
_SCORES = st.integers(1, 10).map(float)
_AWKWARD = st.sampled_from([0.1, 0.2, 0.3, 1 / 3, 2 / 3, 5e-324, 2.2250738585072014e-308, 1e-300, 7.25, 1e15 + 0.5])


def _same(a: float, b: float) -> bool:
    return a == b and math.copysign(1, a) == math.copysign(1, b) and type(a) is type(b)


@given(st.lists(st.one_of(_FLOATS, _SCORES, _AWKWARD), min_size=1, max_size=30))
def test_mean_is_the_statistics_modules_to_the_bit(values):
    assert _same(mean(values), statistics.mean(values))


@given(st.lists(st.one_of(_FLOATS, _SCORES, _AWKWARD), min_size=2, max_size=30))
def test_variance_and_stdev_are_the_statistics_modules_to_the_bit(values):
    assert _same(variance(values), statistics.variance(values))
    assert _same(stdev(values), statistics.stdev(values))


@given(st.lists(_SCORES, min_size=2, max_size=12))
def test_integer_scores(values):
    assert _same(mean(values), statistics.mean(values))
    assert _same(stdev(values), statistics.stdev(values))


def test_an_iterator_is_taken_as_the_statistics_module_takes_it():
    assert mean(x for x in [1.0, 2.0, 4.0]) == statistics.mean([1.0, 2.0, 4.0])
    assert stdev(iter([1.0, 2.0, 4.0])) == statistics.stdev([1.0, 2.0, 4.0])
    assert variance(x / 10 for x in range(5)) == statistics.variance([x / 10 for x in range(5)])


def test_worked_values():
    assert mean([6.0, 8.0, 7.25]) == 7.083333333333333
    assert stdev([6.0, 8.0, 7.25]) == statistics.stdev([6.0, 8.0, 7.25]) == 1.0103629710818451
    assert variance([0.1, 0.2, 0.3]) == statistics.variance([0.1, 0.2, 0.3])  # not 0.01 in floats


def test_what_it_does_not_take_is_the_statistics_modules_to_answer():
    assert mean([2, 4]) == statistics.mean([2, 4]) == 3 and type(mean([2, 4])) is int  # ints stay ints
    assert math.isnan(mean([1.0, math.nan]))
    assert mean([1.0, math.inf]) == math.inf
    with pytest.raises(statistics.StatisticsError):
        mean([])
    with pytest.raises(statistics.StatisticsError):
        stdev([1.0])
    for f in (variance, statistics.variance):  # beyond the largest float, as the statistics module
        with pytest.raises(OverflowError):
            f([0.0, 1e200])
