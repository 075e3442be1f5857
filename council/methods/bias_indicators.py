"""Bias indicators: pure formulas over plain data, hand-written (docs/methods.md, "Bias audit").

Reviewer calibration, length–score correlation, position bias and cross-session Fisher-z
pooling follow the evaluator-bias write-up formula for formula; the statistical-honesty
minimums and the reviewer-profile labels are what the cross-session report adds. The tests
they are read with are in :mod:`council.methods.significance`.

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
from typing import Any

from pydantic import BaseModel

from council.methods import exact_moments
from council.methods.distributions import CANCELLATION, t_quantile_two_sided

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
    std_of_means = exact_moments.stdev(all_means) if len(all_means) > 2 else 1
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
            "mean": exact_moments.mean(values),
            "std": exact_moments.stdev(values) if len(values) > 1 else 0,
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
    mean_x = exact_moments.mean(x)
    mean_y = exact_moments.mean(y)
    numerator = sum((xi - mean_x) * (yi - mean_y) for xi, yi in zip(x, y, strict=True))
    sum_sq_x = sum((xi - mean_x) ** 2 for xi in x)
    sum_sq_y = sum((yi - mean_y) ** 2 for yi in y)
    denominator = math.sqrt(sum_sq_x * sum_sq_y)
    if denominator == 0:
        return 0.0
    return numerator / denominator


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
    if vx <= CANCELLATION * n * abs(sxx) or vy <= CANCELLATION * n * abs(syy):
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
    position_means = [exact_moments.mean(s) for s in by_position.values() if s]
    variance = exact_moments.variance(position_means) if len(position_means) > 1 else 0
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
    return _seed_pooling([0.5 * math.log((1 + r) / (1 - r)) for r in valid], min_sessions)


def _seed_pooling(z_values: Sequence[float], min_sessions: int) -> AggregatedBiasResult:
    """:func:`run_aggregated_bias_audit` from the sessions' z = atanh(r)."""
    n = len(z_values)
    if n < min_sessions:
        return AggregatedBiasResult(0.0, (0.0, 0.0), n, "insufficient")
    pooled_z = math.fsum(z_values) / n  # statistics.mean's exact fractions are slow, and paid per session
    pooled_r = _tanh_from_z(pooled_z)
    if n <= 3:
        return AggregatedBiasResult(round(pooled_r, 3), (-1.0, 1.0), n, "insufficient")
    se = 1 / math.sqrt(n - 3)
    ci_lower = _tanh_from_z(pooled_z - 1.96 * se)
    ci_upper = _tanh_from_z(pooled_z + 1.96 * se)
    confidence = "high" if n >= 50 else "moderate" if n >= 20 else "preliminary"
    return AggregatedBiasResult(round(pooled_r, 3), (round(ci_lower, 3), round(ci_upper, 3)), n, confidence)


SessionSums = tuple[int, float, float, float, float, float]
"""One session's (n, Σx, Σy, Σx², Σy², Σxy) over its answers: x = length, y = mean score received."""


@dataclass(frozen=True)
class PooledLengthCorrelation:
    """The cross-session length correlation as the report gives it: ``None`` where there is no estimate."""

    length_correlation: float | None
    """The pooled within-session correlation (docs/methods.md, "Pooling across sessions")."""
    length_correlation_ci: tuple[float, float] | None
    """95 % interval that keeps its level: Fisher's z, jackknife over sessions, t quantile."""
    length_correlation_ci_seed: tuple[float, float] | None
    """The seed's interval, se = 1/√(sessions − 3), around the seed's estimate."""
    sample_size: int
    """Sessions pooled: those with at least 3 answers with a length."""
    confidence_level: str
    length_correlation_seed: float | None = None
    """The seed's estimate: the mean of the sessions' Fisher z (biased away from zero)."""


JACKKNIFE_MAX_SESSIONS = 1000
"""Up to this many sessions the interval's jackknife leaves each out in turn; above it, its
linear approximation from sums (the same to O(1/sessions); docs/methods.md, "Pooling across sessions")."""


def pooled_length_correlation(sessions: Sequence[SessionSums], min_sessions: int = 10) -> PooledLengthCorrelation:
    """The pooled within-session correlation of length and score, with an interval that holds
    its level at any correlation (docs/methods.md, "Pooling across sessions").

    Each session's lengths and scores are centred on the session's own means and one Pearson r
    is taken over all of them: r = ΣSxy / √(ΣSxx · ΣSyy). The interval is on Fisher's z with
    the jackknife standard error over sessions and the t quantile on Satterthwaite's degrees of
    freedom (at most sessions − 1). Sessions with fewer than 3 answers are left out (the seed's rule); fewer than
    ``min_sessions`` left, or no spread in lengths or in scores → no estimate: ``None``, never 0.
    The seed's figures (the mean of the sessions' Fisher z and its interval with se = 1/√(m − 3))
    are returned beside it.
    """
    keep = len(sessions) <= JACKKNIFE_MAX_SESSIONS
    sums = _pooled_sums(sessions, keep)
    m, a, b, c = sums.m, sums.a, sums.b, sums.c
    seed = _seed_pooling(sums.seed_z, min_sessions)
    seed_r = None if seed.confidence_level == "insufficient" else seed.length_correlation
    seed_ci = None if seed_r is None else seed.length_correlation_ci
    if m < min_sessions or m <= 3 or b <= 0 or c <= 0:
        return PooledLengthCorrelation(None, None, seed_ci, m, "insufficient", seed_r)
    r = max(-1.0, min(1.0, a / math.sqrt(b * c)))
    confidence = "high" if m >= 50 else "moderate" if m >= 20 else "preliminary"
    if abs(r) == 1:
        return PooledLengthCorrelation(round(r, 3), (-1.0, 1.0), seed_ci, m, confidence, seed_r)
    spread = _exact_jackknife(sums) if keep else _linear_jackknife(sums, r)
    if spread is None:  # a session alone holds a spread: no jackknife
        return PooledLengthCorrelation(round(r, 3), (-1.0, 1.0), seed_ci, m, confidence, seed_r)
    var, df = spread
    # Every session alike (no spread between them): the seed's se rather than a zero width.
    se = math.sqrt(var) if var > 0 else 1 / math.sqrt(m - 3)
    half = t_quantile_two_sided(0.05, df) * se
    centre = math.atanh(r)
    ci = (round(math.tanh(centre - half), 3), round(math.tanh(centre + half), 3))
    return PooledLengthCorrelation(round(r, 3), ci, seed_ci, m, confidence, seed_r)


@dataclass
class _PooledSums:
    """The sessions' centred sums pooled (ΣSxy, ΣSxx, ΣSyy as ``a``, ``b``, ``c``, with their
    products for the approximate jackknife), each session's own when the jackknife is exact
    (``kept``), and the seed's per-session Fisher z."""

    m: int
    a: float
    b: float
    c: float
    aa: float
    bb: float
    cc: float
    ab: float
    ac: float
    bc: float
    kept: list[tuple[float, float, float]]
    seed_z: list[float]


def _pooled_sums(sessions: Sequence[SessionSums], keep: bool) -> _PooledSums:
    """One pass for both estimates and the sums of the approximate jackknife (a report may pool
    100 k sessions); each session's centred sums are kept only when ``keep`` (the exact jackknife)."""
    atanh, sqrt = math.atanh, math.sqrt
    kept: list[tuple[float, float, float]] = []
    seed_z: list[float] = []
    m = 0
    a = b = c = aa = bb = cc = ab = ac = bc = 0.0  # Σ Sxy, Σ Sxx, Σ Syy and their products
    for n, sx, sy, sxx, syy, sxy in sessions:
        if n < 3:
            continue
        m += 1
        vx, vy = n * sxx - sx * sx, n * syy - sy * sy
        spread_x, spread_y = vx > CANCELLATION * n * abs(sxx), vy > CANCELLATION * n * abs(syy)
        if spread_x and spread_y:
            q = n * sxy - sx * sy
            r = q / sqrt(vx * vy)
            if -1 + 1e-12 <= r <= 1 - 1e-12:  # the seed pools −1 < r < 1 (pearson_from_sums snaps the rest)
                seed_z.append(atanh(r))
            q /= n
        else:
            seed_z.append(0.0)  # pearson_from_sums: no spread, r = 0
            q = 0.0
        p, t = (vx / n if spread_x else 0.0), (vy / n if spread_y else 0.0)
        a += q
        b += p
        c += t
        aa += q * q
        bb += p * p
        cc += t * t
        ab += q * p
        ac += q * t
        bc += p * t
        if keep:
            kept.append((q, p, t))
    return _PooledSums(m, a, b, c, aa, bb, cc, ab, ac, bc, kept, seed_z)


def _exact_jackknife(sums: _PooledSums) -> tuple[float, float] | None:
    """The variance of z = atanh r with each session left out in turn, and its degrees of
    freedom; None when a session alone holds a spread (no jackknife)."""
    m, a, b, c = sums.m, sums.a, sums.b, sums.c
    try:
        z = [math.atanh((a - q) / math.sqrt((b - p) * (c - t))) for q, p, t in sums.kept]
    except (ValueError, ZeroDivisionError):
        return None
    mean = math.fsum(z) / m
    d2 = [(v - mean) ** 2 for v in z]
    s2, s4 = math.fsum(d2), math.fsum(v * v for v in d2)
    # The jackknife variance (m − 1)/m · Σ(z₋ₛ − z̄)² inflated by m/(m − 1), which vanishes as
    # sessions grow: the plain one covered a point short at 10 sessions.
    var = s2
    # Satterthwaite's degrees of freedom of the variance: 2m/(κ − 1) for the leave-one-out
    # estimates' kurtosis κ (m for normal ones); fewer when one session dominates.
    df = min(m - 1.0, 2 * m / (m * s4 / (s2 * s2) - 1)) if s2 > 0 and m * s4 > s2 * s2 else m - 1.0
    return var, df


def _linear_jackknife(sums: _PooledSums, r: float) -> tuple[float, float]:
    """The jackknife's limit from sums, for many sessions: r's linear influence per session,
    w = αq + βp + γt (Σw = 0), on z = atanh r and inflated as the exact one."""
    b, c = sums.b, sums.c
    alpha, beta, gamma = 1 / math.sqrt(b * c), -r / (2 * b), -r / (2 * c)
    w2 = (alpha * alpha * sums.aa + beta * beta * sums.bb + gamma * gamma * sums.cc
          + 2 * (alpha * beta * sums.ab + alpha * gamma * sums.ac + beta * gamma * sums.bc))  # fmt: skip
    var = max(w2, 0.0) / (1 - r * r) ** 2
    return var, sums.m - 1.0


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
