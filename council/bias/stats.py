"""Bias statistics: pure functions over plain data, hand-written (docs/methods.md, "Bias audit").

The first half follows the evaluator-bias write-up formula for formula (reviewer
calibration, length–score correlation, position bias, cross-session Fisher-z pooling).
The second half adds what the cross-session report needs and the write-up leaves out
(docs/methods.md, "Significance tests"): significance tests (one-way ANOVA, chi-square
goodness of fit, paired and Welch t, Holm's adjustment) whose p-values come from
hand-written regularised incomplete beta and gamma functions, the statistical-honesty
minimums, and the reviewer-profile labels.

Every statistic here is computable from a few sums (n, Σx, Σx²...), so the report
can feed it straight from SQL aggregates. Nothing here ever changes a score: the
audit reports, it does not correct.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import BaseModel

# ---------------------------------------------------------------------------
# Reviewer calibration (docs/methods.md, "Reviewer calibration")
# ---------------------------------------------------------------------------


def classify_z(z_score: float) -> str:
    """Harsh below −1, generous above +1, neutral in between (docs/methods.md, "Reviewer calibration")."""
    return "harsh" if z_score < -1 else "generous" if z_score > 1 else "neutral"


def calibration_zscores(means: Mapping[str, float]) -> dict[str, tuple[float, str]]:
    """Each reviewer's z-score against the median of all reviewers' means.

    The spread is the sample standard deviation of the means when there are more
    than two reviewers, else 1 (the write-up's guard against a meaningless spread).
    Returns reviewer → (z rounded to 2 places, classification of the unrounded z).
    See docs/methods.md, "Reviewer calibration".
    """
    if not means:
        return {}
    all_means = list(means.values())
    median_mean = statistics.median(all_means)
    std_of_means = statistics.stdev(all_means) if len(all_means) > 2 else 1
    out: dict[str, tuple[float, str]] = {}
    for reviewer, mean in means.items():
        z_score = (mean - median_mean) / std_of_means if std_of_means > 0 else 0
        out[reviewer] = (round(z_score, 2), classify_z(z_score))
    return out


def audit_reviewer_calibration(scores: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Harsh and generous reviewers (docs/methods.md, "Reviewer calibration").

    ``scores`` maps reviewer → {item → score}. The comparison assumes every reviewer
    graded the same set of items. Returns reviewer → {mean, std, z_score, classification}.

    The write-up's example: means 6.0, 8.0, 7.25 → median 7.25. It prints z = −1.25 and
    0.75 because it rounds the spread to "std ≈ 1.0"; the exact sample standard
    deviation of the three means is 1.0104, so the exact z-scores are −1.24 and
    0.74. The classifications (harsh, neutral, neutral) are the same either way;
    we compute the exact formula.
    """
    calibration: dict[str, dict[str, Any]] = {}
    for reviewer, reviewer_scores in scores.items():
        values = list(reviewer_scores.values())
        if not values:
            continue
        calibration[reviewer] = {
            "mean": statistics.mean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0,
        }
    zs = calibration_zscores({r: c["mean"] for r, c in calibration.items()})
    for reviewer, stats in calibration.items():
        stats["z_score"], stats["classification"] = zs[reviewer]
    return calibration


# ---------------------------------------------------------------------------
# Length–score correlation (docs/methods.md, "Length-score correlation")
# ---------------------------------------------------------------------------


def pearson_correlation(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r, pure Python: 0.0 for n < 3 or a zero denominator (docs/methods.md, "Length-score correlation")."""
    n = len(x)
    if n < 3:
        return 0.0
    mean_x = statistics.mean(x)
    mean_y = statistics.mean(y)
    numerator = sum((xi - mean_x) * (yi - mean_y) for xi, yi in zip(x, y, strict=True))
    sum_sq_x = sum((xi - mean_x) ** 2 for xi in x)
    sum_sq_y = sum((yi - mean_y) ** 2 for yi in y)
    denominator = math.sqrt(sum_sq_x * sum_sq_y)
    if denominator == 0:
        return 0.0
    return numerator / denominator


# Relative size below which a sum of squared deviations computed from raw sums
# is cancellation noise, i.e. the values were all equal.
_CANCELLATION = 1e-12


def pearson_from_sums(n: int, sx: float, sy: float, sxx: float, syy: float, sxy: float) -> float:
    """Pearson's r from the sums SQL can compute (n, Σx, Σy, Σx², Σy², Σxy).

    Same conventions as :func:`pearson_correlation`. Computing from raw sums
    cancels catastrophically when all x (or all y) are equal, so a spread that is
    a rounding error of the sums counts as zero (→ r = 0.0, as a zero denominator), and an r
    within rounding of ±1 is snapped to ±1 (so the aggregation's −1 < r < 1 filter
    treats it exactly as the two-pass formula would).
    """
    if n < 3:
        return 0.0
    vx = n * sxx - sx * sx
    vy = n * syy - sy * sy
    if vx <= _CANCELLATION * n * abs(sxx) or vy <= _CANCELLATION * n * abs(syy):
        return 0.0
    r = (n * sxy - sx * sy) / math.sqrt(vx * vy)
    if abs(r) > 1 - 1e-12:
        return math.copysign(1.0, r)
    return r


def length_correlation_interpretation(r: float) -> str:
    """Interpretation bands (docs/methods.md, "Length-score correlation"); healthy: weak, −0.3 < r ≤ 0.3."""
    return (
        "strong_positive"
        if r > 0.7
        else "moderate_positive"
        if r > 0.3
        else "weak"
        if r > -0.3
        else "moderate_negative"
        if r > -0.7
        else "strong_negative"
    )


def calculate_length_correlation(
    lengths: Mapping[str, float], avg_scores: Mapping[str, float]
) -> tuple[float, str]:
    """r between each model's response length and the mean score it received.

    Models present in both mappings are used; fewer than 3 → (0.0, "insufficient_data").
    See docs/methods.md, "Length-score correlation".
    """
    models = [m for m in avg_scores if m in lengths]
    if len(models) < 3:
        return 0.0, "insufficient_data"
    r = pearson_correlation([lengths[m] for m in models], [avg_scores[m] for m in models])
    return round(r, 3), length_correlation_interpretation(r)


# ---------------------------------------------------------------------------
# Position bias (docs/methods.md, "Position bias")
# ---------------------------------------------------------------------------


def position_scores(session_data: Sequence[Mapping[str, Any]]) -> dict[int, list[float]]:
    """Scores grouped by 0-based display position (docs/methods.md, "Position bias")."""
    by_position: dict[int, list[float]] = defaultdict(list)
    for session in session_data:
        scores = session["scores"]
        for position, model in enumerate(session["display_order"]):
            if model in scores:
                by_position[position].append(scores[model])
    return dict(by_position)


POSITION_VARIANCE_THRESHOLD = 0.5
"""Variance of per-position means above this (1–10 scale) = position bias (docs/methods.md, "Position bias")."""


def calculate_position_bias(session_data: Sequence[Mapping[str, Any]]) -> tuple[float, bool]:
    """Does display order affect scores? The variance rule (docs/methods.md, "Position bias").

    Each entry has ``display_order`` (models in the order the reviewer saw them) and
    ``scores`` (model → score). Returns (variance of per-position means rounded to 3,
    variance > 0.5); fewer than 2 positions → (0.0, False).
    """
    by_position = position_scores(session_data)
    if len(by_position) < 2:
        return 0.0, False
    position_means = [statistics.mean(s) for s in by_position.values() if s]
    variance = statistics.variance(position_means) if len(position_means) > 1 else 0
    return round(variance, 3), variance > POSITION_VARIANCE_THRESHOLD


# ---------------------------------------------------------------------------
# Cross-session aggregation (docs/methods.md, "Fisher-z pooling")
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AggregatedBiasResult:
    length_correlation: float
    length_correlation_ci: tuple[float, float]
    """95% confidence interval."""
    sample_size: int
    confidence_level: str
    """insufficient | preliminary | moderate | high"""


def _tanh_from_z(z: float) -> float:
    return (math.exp(2 * z) - 1) / (math.exp(2 * z) + 1)


def run_aggregated_bias_audit(
    correlations: Sequence[float | None], min_sessions: int = 10
) -> AggregatedBiasResult:
    """Pool per-session length correlations with the Fisher z-transform (docs/methods.md, "Fisher-z pooling").

    Only r strictly inside (−1, 1) count. Fewer than ``min_sessions`` → insufficient
    with a (0, 0) interval; 3 or fewer → the pooled r with a (−1, 1) interval. The
    standard error uses the session count as n (SE = 1/√(n−3)), as the write-up does;
    confidence: high ≥ 50 sessions, moderate ≥ 20, else preliminary.
    """
    valid = [r for r in correlations if r is not None and -1 < r < 1]
    if len(valid) < min_sessions:
        return AggregatedBiasResult(0.0, (0.0, 0.0), len(valid), "insufficient")
    z_values = [0.5 * math.log((1 + r) / (1 - r)) for r in valid]
    pooled_z = statistics.mean(z_values)
    pooled_r = _tanh_from_z(pooled_z)
    n = len(z_values)
    if n <= 3:
        return AggregatedBiasResult(round(pooled_r, 3), (-1.0, 1.0), n, "insufficient")
    se = 1 / math.sqrt(n - 3)
    ci_lower = _tanh_from_z(pooled_z - 1.96 * se)
    ci_upper = _tanh_from_z(pooled_z + 1.96 * se)
    confidence = "high" if n >= 50 else "moderate" if n >= 20 else "preliminary"
    return AggregatedBiasResult(round(pooled_r, 3), (round(ci_lower, 3), round(ci_upper, 3)), n, confidence)


# ---------------------------------------------------------------------------
# Special functions (for p-values; docs/methods.md, "Significance tests")
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# Significance tests from sums
# ---------------------------------------------------------------------------

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
    if ss_within <= _CANCELLATION * scale:
        if ss_between <= _CANCELLATION * scale:
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
    if var <= _CANCELLATION * max(abs(sum_d2), 1.0):
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
    if se2 <= _CANCELLATION * max(abs(a.total_sq) + abs(b.total_sq), 1.0) / (a.n + b.n):
        if abs(diff) <= _CANCELLATION * max(abs(a.total / a.n), 1.0):
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


# ---------------------------------------------------------------------------
# Statistical honesty and reviewer profiles
# ---------------------------------------------------------------------------

HONESTY_MINIMUMS: dict[str, tuple[int, str]] = {
    "length_correlation": (30, "pairs"),
    "position_bias": (20, "orderings"),
    "reviewer_calibration": (50, "scores"),
}
"""Minimum data points for significance (docs/methods.md, "Statistical honesty")."""

INDICATORS_NOTE = "These are indicators, not evidence: sample sizes are below the minimums for significance."


class HonestyRow(BaseModel):
    metric: str
    data_points: int
    minimum: int
    unit: str
    status: str
    """sufficient | insufficient"""
    verdict: str | None = None
    """Only given when the status is sufficient."""


def honesty_row(metric: str, data_points: int, verdict: str | None, *, estimated: bool = True) -> HonestyRow:
    """``data_points``: the data the estimate actually used; ``estimated=False`` when no
    estimate could be made from them (the row is then insufficient whatever the count)."""
    minimum, unit = HONESTY_MINIMUMS[metric]
    sufficient = estimated and data_points >= minimum
    return HonestyRow(
        metric=metric,
        data_points=data_points,
        minimum=minimum,
        unit=unit,
        status="sufficient" if sufficient else "insufficient",
        verdict=verdict if sufficient else None,
    )


REFERENCE_SCALE = (1, 10)
"""The write-up's thresholds are on a 1–10 scale (docs/methods.md, "Score scales and normalisation")."""


def scale_factor(scale: tuple[float, float] | None) -> float:
    """How much a variance on ``scale`` is stretched relative to the 1–10 scale: ((hi−lo)/9)²."""
    if scale is None:
        return 1.0
    lo, hi = scale
    ref_lo, ref_hi = REFERENCE_SCALE
    return ((hi - lo) / (ref_hi - ref_lo)) ** 2


COMPRESSED_BELOW = 1.0
DISCRIMINATING_ABOVE = 1.5
"""Score-variance bands on a 1–10 scale, chosen to fit the write-up's reviewer profiles
(0.9 compressed, 1.4 balanced, 1.8 discriminating; docs/methods.md, "Reviewer profiles"). On other scales both bounds
are multiplied by :func:`scale_factor` (variance grows with the square of the range)."""


def variance_label(variance: float, samples: int, scale: tuple[float, float] | None = None) -> str:
    """compressed | balanced | discriminating (or undetermined below 2 scores)."""
    if samples < 2:
        return "undetermined"
    factor = scale_factor(scale)
    if variance < COMPRESSED_BELOW * factor:
        return "compressed"
    if variance > DISCRIMINATING_ABOVE * factor:
        return "discriminating"
    return "balanced"


def reliability(samples: int) -> str:
    """high ≥ 50 scores (the calibration minimum of "Statistical honesty"), moderate ≥ 20, else low."""
    return "high" if samples >= 50 else "moderate" if samples >= 20 else "low"


def position_variance_threshold(scale: tuple[float, float] | None = None) -> float:
    """0.5 on 1–10, scaled like the variance labels for other scales (docs/methods.md, "Position bias")."""
    return POSITION_VARIANCE_THRESHOLD * scale_factor(scale)
