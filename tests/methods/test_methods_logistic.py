"""The one logistic fitter behind the controlled ratings, against statsmodels' binomial GLM."""

from __future__ import annotations

import numpy as np
import pytest

from council.methods.logistic import (
    Term,
    fit_firth,
    fit_logistic,
    information,
    linear_predictor,
    sigmoid,
    weak_directions,
)

sm = pytest.importorskip("statsmodels.api")


def _dense(terms, rows, n):
    x = np.zeros((rows, n))
    for t in terms:
        col = np.broadcast_to(np.asarray(t.column), rows)
        np.add.at(x, (np.arange(rows), col), np.broadcast_to(np.asarray(t.value, float), rows))
    return x


def test_soft_labels_match_statsmodels_binomial_glm():
    rng = np.random.default_rng(1)
    rows, groups = 600, 7
    group = rng.integers(0, groups, rows)
    x1 = rng.normal(size=rows)
    truth = np.r_[rng.normal(size=groups), 0.8]
    terms = [Term(group), Term(groups, x1)]
    p = sigmoid(linear_predictor(terms, truth, rows))
    y = np.clip(p + rng.normal(scale=0.1, size=rows), 0, 1)  # a judge's probabilities, not 0/1
    fit = fit_logistic(terms, y, groups + 1)
    ref = sm.GLM(y, _dense(terms, rows, groups + 1), family=sm.families.Binomial()).fit(tol=1e-12)
    np.testing.assert_allclose(fit.coef, ref.params, atol=1e-7)
    np.testing.assert_allclose(fit.standard_errors(), ref.bse, rtol=1e-6)


def test_weights_are_repeated_rows():
    rng = np.random.default_rng(2)
    rows = 200
    x = rng.normal(size=rows)
    y = (rng.random(rows) < sigmoid(0.3 + x)).astype(float)
    counts = rng.integers(0, 4, rows).astype(float)
    weighted = fit_logistic([Term(0), Term(1, x)], y, 2, weight=counts)
    keep = np.repeat(np.arange(rows), counts.astype(int))
    repeated = fit_logistic([Term(0), Term(1, x[keep])], y[keep], 2)
    np.testing.assert_allclose(weighted.coef, repeated.coef, atol=1e-9)


def test_ridge_keeps_a_separated_column_finite():
    # column 1 only ever "wins": without a prior its coefficient runs off to infinity
    y = np.r_[np.ones(5), np.zeros(5), np.ones(5) * 0.5]
    col = np.r_[np.ones(5, int), np.zeros(10, int)]
    fit = fit_logistic([Term(col)], y, 2, ridge=np.array([0.0, 1.0]))
    assert np.isfinite(fit.coef).all()
    assert 0 < fit.coef[1] < 5
    assert fit.coef[0] == pytest.approx(np.log(1 / 3), abs=1e-9)  # 5 losses, 5 ties: p = 1/4, no prior


def test_firth_with_soft_labels_and_weights_matches_a_general_optimizer():
    """fit_firth maximises ℓ + ½ log det X'WX: the same penalised likelihood, written densely and
    maximised by scipy's BFGS, on soft labels with frequency weights (a bootstrap round's)."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(4)
    rows, groups = 120, 5
    group = rng.integers(0, groups, rows)
    x1 = rng.normal(size=rows)
    terms = [Term(group), Term(groups, x1)]
    y = np.clip(sigmoid(linear_predictor(terms, np.r_[rng.normal(size=groups), 0.8], rows))
                + rng.normal(scale=0.1, size=rows), 0, 1)  # fmt: skip
    weight = rng.multinomial(rows, np.full(rows, 1 / rows)).astype(float)
    fit = fit_firth(terms, y, groups + 1, weight=weight)
    x = _dense(terms, rows, groups + 1)

    def loss(beta):
        eta = x @ beta
        p = sigmoid(eta)
        info = x.T @ (x * (weight * p * (1 - p))[:, None])
        loglik = (weight * (y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta))).sum()
        return -(loglik + 0.5 * np.linalg.slogdet(info)[1])

    ref = minimize(loss, np.zeros(groups + 1), method="BFGS", options={"gtol": 1e-10})
    assert fit.converged
    np.testing.assert_allclose(fit.coef, ref.x, atol=1e-6)
    ml = fit_logistic(terms, y, groups + 1, weight=weight)
    assert np.abs(fit.coef).sum() < np.abs(ml.coef).sum()  # Jeffreys' prior shrinks toward p = ½


def test_weak_directions_are_the_separated_and_the_collinear_ones():
    """Rows separated by x1 where it is not 0 (y = 1 exactly where x1 > 0), noisy where it is:
    after the fit runs off, x1's direction has no information left and the intercept keeps the
    rows at 0; a copy of column 0 is collinear. A noisy design has neither."""
    rng = np.random.default_rng(5)
    rows = 200
    x1 = np.where(np.arange(rows) < 50, 0.0, rng.normal(size=rows))
    terms = [Term(0), Term(1, x1), Term(2)]  # column 2 = column 0: collinear
    separated = np.where(x1 == 0, rng.random(rows) < 0.5, x1 > 0).astype(float)
    fit = fit_logistic(terms, separated, 3)  # may stop "converged": the step along x1 is below the lstsq cutoff
    seen = information(terms, fit.coef, rows, 3)
    most = information(terms, fit.coef, rows, 3, at_half=True)
    collinear, weak = weak_directions(seen, most, range(3))
    assert collinear.shape[1] == 1 and abs(collinear[0, 0]) == pytest.approx(abs(collinear[2, 0]))
    assert weak.shape[1] == 1 and abs(weak[1, 0]) == pytest.approx(1.0, abs=1e-3)
    noisy = (rng.random(rows) < sigmoid(rng.normal(size=rows))).astype(float)
    fit = fit_logistic(terms[:2], noisy, 2)
    assert fit.converged
    seen = information(terms[:2], fit.coef, rows, 2)
    most = information(terms[:2], fit.coef, rows, 2, at_half=True)
    assert [d.shape[1] for d in weak_directions(seen, most, range(2))] == [0, 0]
