"""The mean, sample variance and sample standard deviation of floats, each the correctly rounded
value of the exact result: the statistics module's values to the last bit, without its fractions
(docs/methods.md, "Bias audit").

A finite float is an integer over a power of two, so over the largest denominator among the
values every value is an integer: the sums are exact integers and one true division of two
integers (correctly rounded in Python) gives the correctly rounded quotient. The square root is
taken to 109 bits, rounded to odd, then rounded once to a float, as the statistics module does
(Boldo and Melquiond's round-to-odd). The statistics module's fractions made a session's audit
slow; anything but finite floats still goes to it (``benchmarks/bench_bias_indicators.py``).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Iterable, Sequence

_SQRT_BITS = 2 * sys.float_info.mant_dig + 3


def _sequence(values: Iterable[float]) -> Sequence[float]:
    """The values, read twice below (an iterator is taken as the statistics module takes it)."""
    return values if isinstance(values, list | tuple) else list(values)


def _scaled(values: Sequence[object]) -> tuple[list[int], int] | None:
    """(each value times ``d``, ``d``) with ``d`` the largest denominator; None unless every
    value is a finite float."""
    try:  # an infinity or a NaN has no ratio
        ratios = [x.as_integer_ratio() for x in values if type(x) is float]
    except (OverflowError, ValueError):
        return None
    if not ratios or len(ratios) != len(values):
        return None
    d = max(den for _, den in ratios)
    if d == 1:  # whole numbers: scores on a scale
        return [num for num, _ in ratios], 1
    return [num * (d // den) for num, den in ratios], d


def mean(values: Iterable[float]) -> float:
    values = _sequence(values)
    scaled = _scaled(values)
    if scaled is None:
        return statistics.mean(values)
    ints, d = scaled
    return sum(ints) / (len(ints) * d)


def _variance_ratio(values: Sequence[float]) -> tuple[int, int] | None:
    """The sample variance as (numerator, denominator) integers, exactly."""
    scaled = _scaled(values)
    if scaled is None or len(values) < 2:
        return None
    ints, d = scaled
    n, total = len(ints), sum(ints)
    return n * sum(i * i for i in ints) - total * total, n * (n - 1) * d * d


def variance(values: Iterable[float]) -> float:
    values = _sequence(values)
    ratio = _variance_ratio(values)
    if ratio is None:
        return statistics.variance(values)
    return ratio[0] / ratio[1]


def stdev(values: Iterable[float]) -> float:
    values = _sequence(values)
    ratio = _variance_ratio(values)
    if ratio is None:
        return statistics.stdev(values)
    n, m = ratio
    q = (n.bit_length() - m.bit_length() - _SQRT_BITS) // 2
    if q >= 0:
        return float(_sqrt_round_to_odd(n, m << 2 * q) << q)
    return _sqrt_round_to_odd(n << -2 * q, m) / (1 << -q)


def _sqrt_round_to_odd(n: int, m: int) -> int:
    """√(n/m) to an integer, its last bit set when inexact (so one later rounding is exact)."""
    a = math.isqrt(n // m)
    return a | (a * a * m != n)
