"""Bradley–Terry with style covariates (docs/methods.md, "Style control")."""

from __future__ import annotations

import numpy as np
import pytest

from council.methods.bradley_terry import elo_scale, fit_log_strengths
from council.methods.logistic import sigmoid
from council.methods.style_control import markdown_counts, style_controlled_ratings, style_difference

sm = pytest.importorskip("statsmodels.api")


def _simulate(seed=0, n=3000):
    """Three models of strength 0, 0, 0.5; model 1 writes twice as long; the judge likes length."""
    rng = np.random.default_rng(seed)
    theta = np.array([0.0, 0.0, 0.5])
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(1, 3, n)) % 3
    stretch = np.array([1.0, 2.0, 1.0])
    len_a = stretch[a] * np.exp(rng.normal(6.5, 0.5, n))
    len_b = stretch[b] * np.exp(rng.normal(6.5, 0.5, n))
    z = style_difference(len_a, len_b)
    y = (rng.random(n) < sigmoid(theta[b] - theta[a] + 0.7 * z)).astype(float)
    return a, b, y, z, theta


def test_planted_style_effect_is_recovered_and_removed():
    a, b, y, z, theta = _simulate()
    out = style_controlled_ratings(a, b, y, z[:, None], ["length"], 3)
    coef = out.coefficients["length"]
    assert coef.ci[0] < 0.7 < coef.ci[1] and coef.ci[0] > 0.4
    assert abs(out.ratings[1] - out.ratings[0]) < 25  # equal strength once length is held equal
    wins = np.zeros((3, 3))
    np.add.at(wins, (b, a), y)
    np.add.at(wins, (a, b), 1 - y)
    plain = elo_scale(fit_log_strengths(wins))
    assert plain[1] - plain[0] > 50  # the plain fit pays model 1 for its length


def test_matches_statsmodels_glm_without_the_prior():
    a, b, y, z, _ = _simulate(1, 800)
    out = style_controlled_ratings(a, b, y, z[:, None], ["length"], 3, prior_games=0.0)
    x = np.zeros((len(y), 3))
    x[np.arange(len(y)), b] += 1
    x[np.arange(len(y)), a] -= 1
    x = np.column_stack([x[:, 1:], z])  # model 0 as the reference (θ_0 = 0)
    ref = sm.GLM(y, x, family=sm.families.Binomial()).fit(tol=1e-12)
    assert out.coefficients["length"].estimate == pytest.approx(ref.params[-1], abs=1e-7)
    assert out.coefficients["length"].standard_error == pytest.approx(ref.bse[-1], rel=1e-5)
    theta = np.r_[0.0, ref.params[:2]]
    np.testing.assert_allclose(out.ratings, elo_scale(theta), atol=1e-5)


def test_bootstrap_intervals_cover_the_point_and_are_reproducible():
    a, b, y, z, _ = _simulate(2, 600)
    one = style_controlled_ratings(a, b, y, z[:, None], ["length"], 3, bootstrap=30, seed=4)
    two = style_controlled_ratings(a, b, y, z[:, None], ["length"], 3, bootstrap=30, seed=4)
    np.testing.assert_array_equal(one.intervals, two.intervals)
    assert ((one.intervals[:, 0] <= one.ratings) & (one.ratings <= one.intervals[:, 1])).all()
    assert (one.intervals[:, 1] - one.intervals[:, 0] > 0).all()


def test_markdown_counts_and_differences():
    text = "# Title\n\nSome **bold** and __more__.\n\n- one\n- two\n1. three\n#notaheader\n"
    assert markdown_counts(text) == {"headers": 1, "lists": 3, "bold": 2}
    assert markdown_counts("") == {"headers": 0, "lists": 0, "bold": 0}
    z = style_difference(np.array([0, 1, 3.0]), np.array([0, 3, 1.0]))
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)
    assert z[0] == pytest.approx(0)  # both zero: no difference
    assert z[1] == pytest.approx(-z[2])


def _glm_reference(a, b, y, columns, n_models):
    x = np.zeros((len(y), n_models))
    x[np.arange(len(y)), b] += 1
    x[np.arange(len(y)), a] -= 1
    return sm.GLM(y, np.column_stack([x[:, 1:], *columns]), family=sm.families.Binomial()).fit(tol=1e-12)


def test_constant_and_collinear_covariates_are_not_estimable_and_the_rest_match_statsmodels():
    a, b, y, z, _ = _simulate(1, 800)
    rng = np.random.default_rng(5)
    w = style_difference(rng.integers(0, 4, len(y)), rng.integers(0, 4, len(y)))  # an independent style
    covariates = np.column_stack([z, np.zeros_like(z), z, w, 0.5 * z - 2 * w])
    names = ["length", "headers", "lists", "bold", "mix"]
    out = style_controlled_ratings(a, b, y, covariates, names, 3, prior_games=0.0, bootstrap=20)
    for name, why in (("headers", "constant"), ("lists", "collinear with length"),
                      ("mix", "collinear with length and bold")):  # fmt: skip
        c = out.coefficients[name]
        assert (c.estimate, c.ci, c.standard_error) == (None, None, None)
        assert c.not_estimable is not None and why in c.not_estimable, c.not_estimable
    ref = _glm_reference(a, b, y, [z, w], 3)
    for name, k in (("length", -2), ("bold", -1)):
        c = out.coefficients[name]
        assert c.not_estimable is None
        assert c.estimate == pytest.approx(ref.params[k], abs=1e-7)
        assert c.standard_error == pytest.approx(ref.bse[k], rel=1e-5)
        assert c.ci[1] - c.ci[0] < 1  # never the ±3e7 of a singular information matrix
    np.testing.assert_allclose(out.ratings, elo_scale(np.r_[0.0, ref.params[:2]]), atol=1e-5)
    assert np.isfinite(out.intervals).all()


def test_a_style_fixed_by_which_models_are_compared_is_not_estimable():
    rng = np.random.default_rng(0)
    n = 200
    swap = rng.random(n) < 0.5
    a, b = np.where(swap, 1, 0), np.where(swap, 0, 1)
    z = style_difference(np.array([100.0, 300.0])[a], np.array([100.0, 300.0])[b])  # model 1 always 3x longer
    y = (rng.random(n) < 0.6).astype(float)
    out = style_controlled_ratings(a, b, y, z[:, None], ["length"], 2)
    c = out.coefficients["length"]
    assert c.estimate is None and "which models are compared" in c.not_estimable
    assert np.isfinite(out.ratings).all()


def test_coefficient_wald_intervals_hold_their_level_in_a_seeded_simulation():
    from scipy.stats import binom

    reps, gamma, models = 400, 0.5, 4
    theta = np.linspace(-0.5, 0.5, models)
    lowest = binom.ppf(0.001, reps, 0.95) / reps  # below this a 95 % interval is (p < 0.001) too narrow
    for n in (30, 100, 400):
        rng = np.random.default_rng(n)
        hits = narrow = 0
        for _ in range(reps):
            a = rng.integers(0, models, n)
            b = (a + rng.integers(1, models, n)) % models
            z = style_difference(np.exp(rng.normal(6, 0.6, n)), np.exp(rng.normal(6, 0.6, n)))
            y = (rng.random(n) < sigmoid(theta[b] - theta[a] + gamma * z)).astype(float)
            c = style_controlled_ratings(a, b, y, z[:, None], ["length"], models).coefficients["length"]
            assert c.ci_method == "wald"
            hits += c.ci[0] <= gamma <= c.ci[1]
            narrow += abs(c.estimate - gamma) <= c.standard_error  # a ±1 se interval: must fail the bound
        assert hits / reps >= lowest, (n, hits / reps)
        assert narrow / reps < lowest
