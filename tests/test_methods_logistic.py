"""The one logistic fitter behind the controlled ratings, against statsmodels' binomial GLM."""

from __future__ import annotations

import numpy as np
import pytest

from council.methods.logistic import Term, fit_logistic, linear_predictor, sigmoid

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
