"""Bias statistics: seed 004's worked examples, and hand-written tests checked against scipy."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import special
from scipy import stats as sps

from council.methods import bias_indicators, distributions, significance
from council.methods.significance import GroupSums

SEED_SCORES = {
    "openai/gpt-4": {"a": 6, "b": 7, "c": 5, "d": 6},
    "anthropic/claude": {"a": 8, "b": 9, "c": 8, "d": 7},
    "google/gemini": {"a": 7, "b": 7, "c": 8, "d": 7},
}

floats = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)


# -- §1 calibration -------------------------------------------------------------


def test_seed_calibration_example_means_median_and_classes():
    cal = bias_indicators.audit_reviewer_calibration(SEED_SCORES)
    assert {r: c["mean"] for r, c in cal.items()} == {
        "openai/gpt-4": 6.0,
        "anthropic/claude": 8.0,
        "google/gemini": 7.25,
    }
    assert statistics.median(c["mean"] for c in cal.values()) == 7.25
    assert [cal[r]["classification"] for r in SEED_SCORES] == ["harsh", "neutral", "neutral"]
    assert cal["openai/gpt-4"]["std"] == pytest.approx(statistics.stdev([6, 7, 5, 6]))


def test_seed_calibration_z_is_the_exact_formula_not_the_rounded_one():
    # The seed prints −1.25 / 0.75 using "std ≈ 1.0"; the exact stdev of the means is 1.0104.
    std_of_means = statistics.stdev([6.0, 8.0, 7.25])
    assert std_of_means == pytest.approx(1.0104, abs=1e-4)
    cal = bias_indicators.audit_reviewer_calibration(SEED_SCORES)
    assert cal["openai/gpt-4"]["z_score"] == round((6.0 - 7.25) / std_of_means, 2) == -1.24
    assert cal["anthropic/claude"]["z_score"] == round((8.0 - 7.25) / std_of_means, 2) == 0.74
    assert cal["google/gemini"]["z_score"] == 0.0


def test_calibration_with_two_reviewers_uses_unit_spread():
    cal = bias_indicators.audit_reviewer_calibration({"a": {"x": 4, "y": 6}, "b": {"x": 7, "y": 9}})
    # median of (5, 8) = 6.5, std_of_means = 1 (seed: only with more than 2 reviewers)
    assert cal["a"]["z_score"] == -1.5 and cal["a"]["classification"] == "harsh"
    assert cal["b"]["z_score"] == 1.5 and cal["b"]["classification"] == "generous"
    assert bias_indicators.audit_reviewer_calibration({"solo": {"x": 5}})["solo"] == {
        "mean": 5, "std": 0, "z_score": 0.0, "classification": "neutral"
    }


def test_identical_means_give_zero_z():
    cal = bias_indicators.audit_reviewer_calibration({r: {"x": 5, "y": 7} for r in "abc"})
    assert all(c["z_score"] == 0 and c["classification"] == "neutral" for c in cal.values())


# -- §2 length correlation ------------------------------------------------------


def test_pearson_conventions():
    assert bias_indicators.pearson_correlation([1, 2], [3, 4]) == 0.0  # n < 3
    assert bias_indicators.pearson_correlation([1, 1, 1], [1, 2, 3]) == 0.0  # zero denominator
    assert bias_indicators.pearson_correlation([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert bias_indicators.pearson_correlation([1, 2, 3], [6, 4, 2]) == pytest.approx(-1.0)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(floats, floats), min_size=3, max_size=40))
def test_pearson_matches_scipy(pairs):
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    assume(statistics.pvariance(x) > 1e-6 and statistics.pvariance(y) > 1e-6)
    expected = sps.pearsonr(x, y).statistic
    assert bias_indicators.pearson_correlation(x, y) == pytest.approx(expected, abs=1e-9)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20_000), st.integers(1, 10)), min_size=3, max_size=8))
def test_pearson_from_sums_equals_two_pass_formula(pairs):
    x, y = [float(p[0]) for p in pairs], [float(p[1]) for p in pairs]
    n = len(x)
    from_sums = bias_indicators.pearson_from_sums(
        n, sum(x), sum(y), sum(v * v for v in x), sum(v * v for v in y), sum(a * b for a, b in zip(x, y, strict=True))
    )
    two_pass = bias_indicators.pearson_correlation(x, y)
    if abs(two_pass) == 1.0:
        assert from_sums == two_pass
    else:
        assert from_sums == pytest.approx(two_pass, abs=1e-9)


@pytest.mark.parametrize(
    "r, band",
    [(0.71, "strong_positive"), (0.7, "moderate_positive"), (0.31, "moderate_positive"), (0.3, "weak"),
     (0.0, "weak"), (-0.29, "weak"), (-0.3, "moderate_negative"), (-0.69, "moderate_negative"),
     (-0.7, "strong_negative"), (-1.0, "strong_negative")],
)
def test_length_interpretation_bands(r, band):
    assert bias_indicators.length_correlation_interpretation(r) == band


def test_calculate_length_correlation():
    too_few = bias_indicators.calculate_length_correlation({"a": 100, "b": 200}, {"a": 5, "b": 6})
    assert too_few == (0.0, "insufficient_data")
    lengths = {"a": 300, "b": 900, "c": 1200, "d": 2000}
    scores = {"a": 5.0, "b": 6.5, "c": 7.0, "d": 8.5}
    r, band = bias_indicators.calculate_length_correlation(lengths, scores)
    assert r == round(sps.pearsonr(list(lengths.values()), list(scores.values())).statistic, 3)
    assert band == "strong_positive"
    # a model without a length is left out
    left_out = bias_indicators.calculate_length_correlation({"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3})
    assert left_out[1] == "insufficient_data"


# -- §3 position bias ------------------------------------------------------------


def test_position_bias_seed_shape():
    # Position 0 averages 7.5 and position 3 averages 6.2 (the seed's illustration).
    data = [
        {"display_order": ["a", "b", "c", "d"], "scores": {"a": 8, "b": 7, "c": 7, "d": 6}},
        {"display_order": ["d", "c", "b", "a"], "scores": {"a": 6.4, "b": 7, "c": 7, "d": 7}},
    ]
    variance, detected = bias_indicators.calculate_position_bias(data)
    means = [7.5, 7.0, 7.0, 6.2]
    assert variance == round(statistics.variance(means), 3)
    assert detected is (statistics.variance(means) > 0.5)


def test_position_bias_threshold_and_degenerate_cases():
    big = [{"display_order": ["a", "b"], "scores": {"a": 9, "b": 3}}]
    assert bias_indicators.calculate_position_bias(big) == (18.0, True)
    assert bias_indicators.calculate_position_bias([{"display_order": ["a"], "scores": {"a": 9}}]) == (0.0, False)
    assert bias_indicators.calculate_position_bias([]) == (0.0, False)
    same = [{"display_order": ["a", "b"], "scores": {"a": 5, "b": 5}}]
    assert bias_indicators.calculate_position_bias(same) == (0.0, False)


# -- cross-session aggregation -------------------------------------------------------


def _fisher_reference(rs, z_crit=1.96):
    """Independent Fisher-z pooling: atanh/tanh, SE = 1/sqrt(n − 3)."""
    z = [math.atanh(r) for r in rs]
    mean_z = math.fsum(z) / len(z)
    se = 1 / math.sqrt(len(z) - 3)
    return math.tanh(mean_z), math.tanh(mean_z - z_crit * se), math.tanh(mean_z + z_crit * se)


def test_aggregation_insufficient_and_small_n():
    res = bias_indicators.run_aggregated_bias_audit([0.5] * 9)
    assert (res.length_correlation, res.length_correlation_ci, res.sample_size, res.confidence_level) == (
        0.0, (0.0, 0.0), 9, "insufficient"
    )
    res = bias_indicators.run_aggregated_bias_audit([0.2, 0.4, 0.6], min_sessions=2)
    assert res.length_correlation_ci == (-1, 1) and res.confidence_level == "insufficient"
    pooled = math.tanh(statistics.mean(math.atanh(r) for r in (0.2, 0.4, 0.6)))
    assert res.length_correlation == round(pooled, 3) == 0.414


def test_aggregation_filters_out_of_range_and_none():
    rs = [0.3] * 10 + [1.0, -1.0, None, 1.5]
    res = bias_indicators.run_aggregated_bias_audit(rs)
    assert res.sample_size == 10
    assert res.length_correlation == 0.3


@pytest.mark.parametrize("n, level", [(10, "preliminary"), (19, "preliminary"), (20, "moderate"),
                                      (49, "moderate"), (50, "high")])
def test_aggregation_confidence_levels(n, level):
    assert bias_indicators.run_aggregated_bias_audit([0.1] * n).confidence_level == level


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=-0.99, max_value=0.99), min_size=10, max_size=80))
def test_aggregation_matches_independent_fisher_ci(rs):
    res = bias_indicators.run_aggregated_bias_audit(rs)
    r, lo, hi = _fisher_reference(rs)
    assert res.length_correlation == pytest.approx(round(r, 3), abs=1e-3 + 1e-12)
    assert res.length_correlation_ci[0] == pytest.approx(round(lo, 3), abs=1e-3 + 1e-12)
    assert res.length_correlation_ci[1] == pytest.approx(round(hi, 3), abs=1e-3 + 1e-12)
    assert res.length_correlation_ci[0] <= res.length_correlation <= res.length_correlation_ci[1]


def test_aggregation_worked_example():
    rs = [0.1, 0.2, 0.3, 0.4, 0.5, 0.1, 0.2, 0.3, 0.4, 0.5, 0.3, 0.3]
    res = bias_indicators.run_aggregated_bias_audit(rs)
    r, lo, hi = _fisher_reference(rs)
    assert res == bias_indicators.AggregatedBiasResult(round(r, 3), (round(lo, 3), round(hi, 3)), 12, "preliminary")


# -- special functions and tests vs scipy -----------------------------------------------------

shape = st.floats(min_value=0.05, max_value=5e4)


@settings(max_examples=200, deadline=None)
@given(shape, shape, st.floats(min_value=0.0, max_value=1.0))
def test_regularized_beta_matches_scipy(a, b, x):
    expected = special.betainc(a, b, x)
    got = distributions.regularized_beta(a, b, x)
    assert got == pytest.approx(expected, rel=1e-8, abs=1e-13)


@settings(max_examples=200, deadline=None)
@given(shape, st.floats(min_value=0.0, max_value=1e5))
def test_regularized_gamma_q_matches_scipy(a, x):
    assert distributions.regularized_gamma_q(a, x) == pytest.approx(special.gammaincc(a, x), rel=1e-8, abs=1e-13)


def _sums(values):
    return GroupSums(len(values), float(sum(values)), float(sum(v * v for v in values)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(1, 10), min_size=2, max_size=40), min_size=2, max_size=6))
def test_one_way_anova_matches_scipy(groups):
    flat = [v for g in groups for v in g]
    assume(len(set(flat)) > 1)
    assume(any(len(set(g)) > 1 for g in groups))  # some spread within groups
    result = significance.one_way_anova([_sums(g) for g in groups])
    ref = sps.f_oneway(*groups)
    assert result.statistic == pytest.approx(ref.statistic, rel=1e-7, abs=1e-12)
    if math.isnan(ref.pvalue):  # scipy gives nan when the group means are equal (F = 0): P(F ≥ 0) = 1
        # F is then 0 up to rounding (scipy gave -1.1e-31 once): never compare it exactly.
        assert ref.statistic == pytest.approx(0.0, abs=1e-9) and result.statistic == pytest.approx(0.0, abs=1e-9)
        assert result.p_value == 1.0
        return
    assert result.p_value == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-12)
    assert result.df == [len(groups) - 1, len(flat) - len(groups)]
    assert result.significant == bool(ref.pvalue < 0.05)


def test_anova_degenerate_cases():
    assert significance.one_way_anova([_sums([5, 5])]).p_value is None  # one group
    same = significance.one_way_anova([_sums([5, 5]), _sums([5, 5])])
    assert same.p_value == 1.0 and not same.significant
    separated = significance.one_way_anova([_sums([1, 1]), _sums([9, 9])])
    assert separated.p_value == 0.0 and separated.significant and separated.statistic is None


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 500), min_size=2, max_size=8))
def test_chi_square_uniform_matches_scipy(counts):
    assume(sum(counts) >= 5 * len(counts))
    result = significance.chi_square_uniform([counts])
    ref = sps.chisquare(counts)
    assert result.statistic == pytest.approx(ref.statistic, rel=1e-9, abs=1e-12)
    assert result.p_value == pytest.approx(ref.pvalue, rel=1e-7, abs=1e-13)
    assert result.df == [len(counts) - 1]


def test_chi_square_combines_independent_tables_and_skips_small_ones():
    t4, t5, tiny = [30, 20, 25, 45], [10, 12, 9, 30, 19], [1, 2, 0]
    result = significance.chi_square_uniform([t4, t5, tiny])
    stat = sps.chisquare(t4).statistic + sps.chisquare(t5).statistic
    assert result.statistic == pytest.approx(stat)
    assert result.df == [3 + 4]
    assert result.p_value == pytest.approx(sps.chi2.sf(stat, 7), rel=1e-9)
    assert significance.chi_square_uniform([tiny]).p_value is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-9, 9), min_size=2, max_size=60))
def test_paired_t_matches_scipy(diffs):
    assume(len(set(diffs)) > 1)
    result = significance.paired_t_test(len(diffs), float(sum(diffs)), float(sum(d * d for d in diffs)))
    ref = sps.ttest_1samp(diffs, 0.0)
    assert result.statistic == pytest.approx(ref.statistic, rel=1e-7, abs=1e-12)
    assert result.p_value == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-12)


def test_distribution_tails_at_known_points():
    assert distributions.f_sf(3.0, 2, 10) == pytest.approx(sps.f.sf(3.0, 2, 10), rel=1e-10)
    assert distributions.chi2_sf(3.84, 1) == pytest.approx(0.05004, abs=1e-5)
    assert distributions.t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=1e-4)
    assert distributions.f_sf(0.0, 3, 3) == 1.0


# -- honesty, profiles -----------------------------------------------------------


@pytest.mark.parametrize(
    "metric, minimum", [("length_correlation", 30), ("position_bias", 20), ("reviewer_calibration", 50)]
)
def test_honesty_minimums(metric, minimum):
    below = bias_indicators.honesty_row(metric, minimum - 1, "a verdict")
    assert below.status == "insufficient" and below.verdict is None
    assert (below.data_points, below.minimum) == (minimum - 1, minimum)
    at = bias_indicators.honesty_row(metric, minimum, "a verdict")
    assert at.status == "sufficient" and at.verdict == "a verdict"


def test_variance_labels_fit_the_seed_profiles():
    assert bias_indicators.variance_label(1.8, 50) == "discriminating"
    assert bias_indicators.variance_label(0.9, 50) == "compressed"
    assert bias_indicators.variance_label(1.4, 50) == "balanced"
    assert bias_indicators.variance_label(1.4, 1) == "undetermined"


def test_variance_labels_scale_with_the_square_of_the_range():
    factor = (4 / 9) ** 2  # a 1–5 scale
    assert bias_indicators.scale_factor((1, 5)) == pytest.approx(factor)
    assert bias_indicators.variance_label(0.9 * factor, 50, (1, 5)) == "compressed"
    assert bias_indicators.variance_label(1.4 * factor, 50, (1, 5)) == "balanced"
    assert bias_indicators.variance_label(1.8 * factor, 50, (1, 5)) == "discriminating"
    assert bias_indicators.variance_label(0.9, 50, (1, 5)) == "discriminating"  # 0.9 is a lot on 1–5
    assert bias_indicators.position_variance_threshold((0, 100)) == pytest.approx(0.5 * (100 / 9) ** 2)


@pytest.mark.parametrize("n, level", [(0, "low"), (19, "low"), (20, "moderate"), (49, "moderate"), (50, "high")])
def test_reliability(n, level):
    assert bias_indicators.reliability(n) == level
