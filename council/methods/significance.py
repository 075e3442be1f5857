"""Significance tests computed from sums (n, Σx, Σx²), so SQL aggregates can feed them.

One-way and within-block ANOVA, chi-square goodness of fit to uniform, the paired t-test, Holm's
step-down adjustment, and how a p-value is written (docs/methods.md, "Significance tests").
P-values come from :mod:`council.methods.distributions`. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pydantic import BaseModel

from council.methods.distributions import CANCELLATION, chi2_sf, f_sf, t_two_sided_p
from council.methods.graphs import component_roots

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
    return _f_test(ss_between, ss_within, df1, df2, scale, name=name,
                   notes=("every score is identical", "no spread within positions"))  # fmt: skip


def _f_test(
    ss_effect: float, ss_error: float, df1: int, df2: int, scale: float, *, name: str, notes: tuple[str, str]
) -> SignificanceTest:
    """F = (SS_effect / df1) / (SS_error / df2) and its p; an error sum of squares that is a
    rounding error of ``scale`` is zero: F = 0 with ``notes[0]`` when the effect's is too, else
    infinite (p = 0) with ``notes[1]``."""
    if ss_error <= CANCELLATION * scale:
        if ss_effect <= CANCELLATION * scale:
            return SignificanceTest(name=name, statistic=0.0, df=[df1, df2], p_value=1.0, significant=False,
                                    note=notes[0])
        return SignificanceTest(name=name, statistic=None, df=[df1, df2], p_value=0.0, significant=True,
                                note=f"{notes[1]}: the F statistic is infinite")
    f = (ss_effect / df1) / (ss_error / df2)
    p = f_sf(f, df1, df2)
    return SignificanceTest(name=name, statistic=f, df=[df1, df2], p_value=p, significant=p < ALPHA)


class Block(NamedTuple):
    """Blocks that hold the same treatments, one observation each (reviews of one size: positions
    0..k−1): how many, Σ of their totals, Σ of their totals²."""

    members: tuple[int, ...]
    count: int
    total: float
    totals_sq: float


def within_block_anova(
    treatments: Mapping[int, GroupSums], blocks: Sequence[Block], *, name: str = "two-way ANOVA within blocks"
) -> SignificanceTest:
    """F-test that treatment effects are zero, treatments compared within blocks: the additive
    two-way model y = block + treatment + error fitted by least squares, the treatments' sum of
    squares adjusted for the blocks (the type I table with blocks first), from sums only.

    ``treatments`` holds each treatment's (n, Σy, Σy²) over exactly the observations of
    ``blocks``. Incomplete blocks are fine (reviews of 3 and of 5 answers): the reduced normal
    equations C τ = Q, with C = Σ_blocks (diag(members) − J/k) and Q_t = T_t − Σ_{blocks with t}
    block mean, are solved once per connected set of treatments (docs/methods.md, "Position bias").
    """
    index: dict[int, int] = {}
    for block in blocks:
        if len(block.members) >= 2:
            for t in block.members:
                index.setdefault(t, len(index))
    size = len(index)
    c = [[0.0] * size for _ in range(size)]
    q = [0.0] * size
    for t, i in index.items():
        q[i] = treatments[t].total if t in treatments else 0.0
    n_obs = n_blocks = 0
    block_ss = 0.0
    for members, count, total, totals_sq in blocks:
        k = len(members)
        n_obs += count * k
        n_blocks += count
        block_ss += totals_sq / k
        for t in members:
            if t not in index:
                continue  # a block of one: its observation is its own mean
            i = index[t]
            q[i] -= total / k
            c[i][i] += count
            for u in members:
                c[i][index[u]] -= count / k
    # One treatment per connected set fixed at 0 (the model's constraint): solve for the rest.
    roots = component_roots(size, ((index[t], index[b.members[0]]) for b in blocks if len(b.members) >= 2
                                   for t in b.members))  # fmt: skip
    free = [i for i in range(size) if roots[i] != i]
    df1 = len(free)
    df2 = n_obs - n_blocks - df1
    if df1 < 1 or df2 < 1:
        return SignificanceTest(name=name, statistic=None, df=[max(df1, 0), max(df2, 0)], p_value=None,
                                significant=False, note="needs 2 treatments in a block and more observations "
                                "than blocks and treatments")  # fmt: skip
    tau = _solve_symmetric([[c[i][j] for j in free] for i in free], [q[i] for i in free])
    ss_treat = max(0.0, sum(t * q[i] for t, i in zip(tau, free, strict=True)))
    total_sq = sum(g.total_sq for g in treatments.values())
    ss_error = max(0.0, total_sq - block_ss - ss_treat)
    return _f_test(ss_treat, ss_error, df1, df2, max(abs(total_sq), 1.0), name=name,
                   notes=("no spread within blocks", "no spread left within blocks"))  # fmt: skip


def _solve_symmetric(a: list[list[float]], b: list[float]) -> list[float]:
    """x with a x = b for a small symmetric positive definite a (Cholesky)."""
    n = len(b)
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            acc = a[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            low[i][j] = math.sqrt(max(acc, 0.0)) if i == j else acc / low[j][j]
    y = [0.0] * n
    for i in range(n):
        y[i] = (b[i] - sum(low[i][k] * y[k] for k in range(i))) / low[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum(low[k][i] * x[k] for k in range(i + 1, n))) / low[i][i]
    return x


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
