"""Significance tests computed from sums (n, Σx, Σx²), so SQL aggregates can feed them.

One-way ANOVA, chi-square goodness of fit to uniform, paired and Welch t-tests, Holm's
step-down adjustment, and how a p-value is written (docs/methods.md, "Significance tests").
P-values come from :mod:`council.methods.distributions`. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pydantic import BaseModel

from council.methods.distributions import CANCELLATION, chi2_sf, f_sf, t_two_sided_p

ALPHA = 0.05


class SignificanceTest(BaseModel):
    name: str
    statistic: float | None
    df: list[int]
    p_value: float | None
    significant: bool
    """p < alpha; False whenever the test could not be computed."""
    alpha: float = ALPHA
    note: str | None = None


def p_text(p: float) -> str:
    """A p-value as people read it: never "p = 0", two significant digits otherwise."""
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2g}"


class GroupSums(NamedTuple):
    """One group's n, Σx and Σx² (one SQL GROUP BY row)."""

    n: int
    total: float
    total_sq: float


def variance_from_sums(n: int, total: float, total_sq: float) -> float:
    """Sample variance (n − 1 denominator) from n, Σx, Σx²; 0 for n < 2."""
    if n < 2:
        return 0.0
    return max(0.0, (total_sq - total * total / n) / (n - 1))


def one_way_anova(groups: Sequence[GroupSums], *, name: str = "one-way ANOVA") -> SignificanceTest:
    """F-test that all group means are equal, from each group's (n, Σx, Σx²).

    Treats every score as an independent observation; scores of one review share
    a reviewer, whose harshness adds within-group spread (so the test errs on the
    conservative side rather than inventing significance).
    """
    groups = [g for g in groups if g.n > 0]
    k = len(groups)
    n_total = sum(g.n for g in groups)
    df1, df2 = k - 1, n_total - k
    if k < 2 or df2 < 1:
        return SignificanceTest(name=name, statistic=None, df=[max(df1, 0), max(df2, 0)], p_value=None,
                                significant=False, note="needs at least 2 groups and more observations than groups")
    grand = sum(g.total for g in groups)
    between_raw = sum(g.total * g.total / g.n for g in groups)
    ss_between = max(0.0, between_raw - grand * grand / n_total)
    ss_within = max(0.0, sum(g.total_sq for g in groups) - between_raw)
    scale = max(abs(sum(g.total_sq for g in groups)), 1.0)
    if ss_within <= CANCELLATION * scale:
        if ss_between <= CANCELLATION * scale:
            return SignificanceTest(name=name, statistic=0.0, df=[df1, df2], p_value=1.0, significant=False,
                                    note="every score is identical")
        return SignificanceTest(name=name, statistic=None, df=[df1, df2], p_value=0.0, significant=True,
                                note="no spread within positions: the F statistic is infinite")
    f = (ss_between / df1) / (ss_within / df2)
    p = f_sf(f, df1, df2)
    return SignificanceTest(name=name, statistic=f, df=[df1, df2], p_value=p, significant=p < ALPHA)


def chi_square_statistic(counts: Sequence[float]) -> float:
    """Pearson's chi-square of observed counts against a uniform expectation."""
    total = sum(counts)
    expected = total / len(counts)
    return sum((c - expected) ** 2 for c in counts) / expected


MIN_EXPECTED_COUNT = 5
"""The usual validity rule for a chi-square test: every expected count ≥ 5."""


def chi_square_uniform(
    tables: Sequence[Sequence[int]], *, name: str = "chi-square goodness of fit"
) -> SignificanceTest:
    """Goodness of fit to uniform for one or more independent count vectors.

    Each vector (e.g. top-scored position counts for reviews of one size) gives a
    statistic with len − 1 degrees of freedom; independent statistics add, and so
    do their degrees of freedom. Vectors whose expected count is below 5 per cell
    are left out (the approximation would not hold).
    """
    used = [list(t) for t in tables if len(t) >= 2 and sum(t) >= MIN_EXPECTED_COUNT * len(t)]
    if not used:
        return SignificanceTest(name=name, statistic=None, df=[0], p_value=None, significant=False,
                                note=f"too few observations (expected count per cell < {MIN_EXPECTED_COUNT})")
    stat = sum(chi_square_statistic(t) for t in used)
    df = sum(len(t) - 1 for t in used)
    p = chi2_sf(stat, df)
    return SignificanceTest(name=name, statistic=stat, df=[df], p_value=p, significant=p < ALPHA)


def paired_t_test(n: int, sum_d: float, sum_d2: float, *, name: str = "paired t-test") -> SignificanceTest:
    """Two-sided test that the mean of paired differences d is zero, from n, Σd, Σd²."""
    if n < 2:
        return SignificanceTest(name=name, statistic=None, df=[max(n - 1, 0)], p_value=None, significant=False,
                                note="needs at least 2 pairs")
    mean = sum_d / n
    var = variance_from_sums(n, sum_d, sum_d2)
    if var <= CANCELLATION * max(abs(sum_d2), 1.0):
        if mean == 0:
            return SignificanceTest(name=name, statistic=0.0, df=[n - 1], p_value=1.0, significant=False,
                                    note="every difference is zero")
        return SignificanceTest(name=name, statistic=None, df=[n - 1], p_value=0.0, significant=True,
                                note="every difference is the same: the t statistic is infinite")
    t = mean / math.sqrt(var / n)
    p = t_two_sided_p(t, n - 1)
    return SignificanceTest(name=name, statistic=t, df=[n - 1], p_value=p, significant=p < ALPHA)


def welch_t_test(a: GroupSums, b: GroupSums, *, name: str = "Welch's t-test") -> SignificanceTest:
    """Two-sided test that two groups have equal means, unequal variances allowed (Welch 1947).

    From each group's (n, Σx, Σx²); the degrees of freedom are Welch–Satterthwaite's
    (not an integer in general; ``df`` reports them rounded down)."""
    if a.n < 2 or b.n < 2:
        return SignificanceTest(name=name, statistic=None, df=[0], p_value=None, significant=False,
                                note="needs at least 2 scores in each group")
    va, vb = variance_from_sums(*a) / a.n, variance_from_sums(*b) / b.n
    diff = a.total / a.n - b.total / b.n
    se2 = va + vb
    if se2 <= CANCELLATION * max(abs(a.total_sq) + abs(b.total_sq), 1.0) / (a.n + b.n):
        if abs(diff) <= CANCELLATION * max(abs(a.total / a.n), 1.0):
            return SignificanceTest(name=name, statistic=0.0, df=[a.n + b.n - 2], p_value=1.0, significant=False,
                                    note="every score is identical")
        return SignificanceTest(name=name, statistic=None, df=[a.n + b.n - 2], p_value=0.0, significant=True,
                                note="no spread within either group: the t statistic is infinite")
    t = diff / math.sqrt(se2)
    df = se2 * se2 / (va * va / (a.n - 1) + vb * vb / (b.n - 1))
    p = t_two_sided_p(t, df)
    return SignificanceTest(name=name, statistic=t, df=[int(df)], p_value=p, significant=p < ALPHA)


def holm_adjust(p_values: Mapping[str, float | None]) -> dict[str, float | None]:
    """Holm's (1979) step-down adjustment: family-wise error ≤ alpha over the whole family.

    Sorted ascending, p₍ᵢ₎ becomes max over j ≤ i of min(1, (m − j + 1) p₍ⱼ₎), with m the
    number of tests that have a p-value (None stays None)."""
    known = sorted((p, key) for key, p in p_values.items() if p is not None)
    m = len(known)
    out: dict[str, float | None] = {key: None for key in p_values}
    running = 0.0
    for i, (p, key) in enumerate(known):
        running = max(running, min(1.0, (m - i) * p))
        out[key] = running
    return out
