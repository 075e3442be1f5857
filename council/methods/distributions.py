"""Tail probabilities of the chi-square, F and Student's t distributions, hand-written.

The regularised incomplete beta and gamma functions by their continued fractions
(modified Lentz) and series, as in Numerical Recipes; checked against scipy in
tests/test_methods_bias_stats.py (docs/methods.md, "Significance tests"). Pure: no I/O.
"""

from __future__ import annotations

import functools
import math

CANCELLATION = 1e-12
"""Relative size below which a sum of squared deviations computed from raw sums is
cancellation noise, i.e. the values were all equal."""


_TINY = 1e-300
_EPS = 1e-15


def _max_iterations(*shape: float) -> int:
    # Both continued fractions converge in O(sqrt(max(a, b))) steps.
    return 200 + int(20 * math.sqrt(max(shape)))


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), modified Lentz's method."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _max_iterations(a, b) + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def regularized_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), for a, b > 0 and 0 ≤ x ≤ 1."""
    if a <= 0 or b <= 0:
        raise ValueError("a and b must be positive")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    # The fraction converges fast for x below the mean; above it use I_x(a,b) = 1 − I_{1−x}(b,a).
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def regularized_gamma_q(a: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(a, x) = 1 − P(a, x)."""
    if a <= 0:
        raise ValueError("a must be positive")
    if x <= 0.0:
        return 1.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    limit = _max_iterations(a, x)
    if x < a + 1.0:
        # Series for P(a, x).
        ap, term = a, 1.0 / a
        total = term
        for _ in range(limit):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                return 1.0 - total * math.exp(log_front)
        raise ArithmeticError(f"incomplete gamma series did not converge (a={a}, x={x})")
    # Continued fraction for Q(a, x), modified Lentz's method.
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, limit + 1):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = b + an / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            return math.exp(log_front) * h
    raise ArithmeticError(f"incomplete gamma fraction did not converge (a={a}, x={x})")


def f_sf(f: float, df1: float, df2: float) -> float:
    """P(F ≥ f) for the F distribution with (df1, df2) degrees of freedom."""
    if f <= 0:
        return 1.0
    if math.isinf(f):
        return 0.0
    return regularized_beta(df2 / 2.0, df1 / 2.0, df2 / (df2 + df1 * f))


def chi2_sf(x: float, df: float) -> float:
    """P(X ≥ x) for the chi-square distribution with ``df`` degrees of freedom."""
    return regularized_gamma_q(df / 2.0, x / 2.0)


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| ≥ |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return regularized_beta(df / 2.0, 0.5, df / (df + t * t))


@functools.lru_cache(maxsize=256)
def t_quantile_two_sided(alpha: float, df: float) -> float:
    """The t with P(|T| ≥ t) = ``alpha`` (Student's t, ``df`` degrees of freedom), by bisection on
    :func:`t_two_sided_p`, which falls monotonically in t; to 1e-10."""
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > alpha:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-10 * hi:
        mid = (lo + hi) / 2
        if t_two_sided_p(mid, df) > alpha:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
