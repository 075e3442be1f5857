"""Bradley–Terry with style covariates (docs/methods.md, "Style control")."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from council.methods.bradley_terry import elo_scale, fit_log_strengths
from council.methods.logistic import sigmoid
from council.methods.style_control import markdown_counts, style_controlled_ratings, style_difference

sm = pytest.importorskip("statsmodels.api")

# The simulations are the benchmark's (benchmarks/bench_ratings_honesty.py), which docs/methods.md
# quotes with more replicates.
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import bench_ratings_honesty as bench  # noqa: E402


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


def _design(a, b, n_models, columns=()):
    """The dense design: rating terms (+1 for B, −1 for A) without model 0's (θ_0 = 0), then the covariates."""
    x = np.zeros((len(a), n_models))
    x[np.arange(len(a)), b] += 1
    x[np.arange(len(a)), a] -= 1
    return np.column_stack([x[:, 1:], *columns])


def _firth_reference(x, y):
    """Firth's estimate by a general optimiser (scipy's BFGS) on the penalised log-likelihood
    ℓ(β) + ½ log det X'WX written out densely, and its Wald standard errors (X'WX)⁻¹ there."""
    from scipy.optimize import minimize

    def loss(beta):
        eta = x @ beta
        p = sigmoid(eta)
        info = x.T @ (x * (p * (1 - p))[:, None])
        loglik = (y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta)).sum()
        return -(loglik + 0.5 * np.linalg.slogdet(info)[1])

    beta = minimize(loss, np.zeros(x.shape[1]), method="BFGS", options={"gtol": 1e-9}).x
    p = sigmoid(x @ beta)
    return beta, np.sqrt(np.diag(np.linalg.inv(x.T @ (x * (p * (1 - p))[:, None]))))


def test_coefficient_is_firths_and_the_ratings_are_the_glm_given_it():
    """γ is the Jeffreys-penalised (Firth) estimate with the ratings free, against a general
    optimiser on that penalised likelihood; it is within a tenth of a standard error of
    statsmodels' maximum likelihood on 800 judgments (Firth removes an O(1/n) bias). The ratings
    are the posterior mode with γ held there: without the prior, statsmodels' GLM with γ·z as
    its offset."""
    a, b, y, z, _ = _simulate(1, 800)
    out = style_controlled_ratings(a, b, y, z[:, None], ["length"], 3, prior_games=0.0)
    x = _design(a, b, 3, [z])
    beta, se = _firth_reference(x, y)
    c = out.coefficients["length"]
    assert c.estimate == pytest.approx(beta[-1], abs=1e-6)
    assert c.standard_error == pytest.approx(se[-1], rel=1e-5)
    ml = sm.GLM(y, x, family=sm.families.Binomial()).fit(tol=1e-12)
    assert abs(c.estimate - ml.params[-1]) < 0.1 * ml.bse[-1]
    given = sm.GLM(y, x[:, :-1], family=sm.families.Binomial(), offset=c.estimate * z).fit(tol=1e-12)
    np.testing.assert_allclose(out.ratings, elo_scale(np.r_[0.0, given.params]), atol=1e-5)


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
    beta, se = _firth_reference(_design(a, b, 3, [z, w]), y)  # the reduced design
    for name, k in (("length", -2), ("bold", -1)):
        c = out.coefficients[name]
        assert c.not_estimable is None and c.identified
        assert c.estimate == pytest.approx(beta[k], abs=1e-6)
        assert c.standard_error == pytest.approx(se[k], rel=1e-5)
        assert c.ci[1] - c.ci[0] < 1  # never the ±3e7 of a singular information matrix
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
    # their ratings with length held equal cannot be told from the length effect (issue 61, finding 2)
    assert sorted(out.not_identified) == [0, 1] and "length" in out.not_identified[1]


def test_coefficient_wald_intervals_hold_their_level_in_a_seeded_simulation():
    """Four models, a planted length taste γ = 0.5 (the benchmark's dense design)."""
    from scipy.stats import binom

    reps = 400
    lowest = binom.ppf(0.001, reps, 0.95) / reps  # below this a 95 % interval is (p < 0.001) too narrow
    for n in (30, 100, 400):
        covered, narrow = bench.dense_coverage(n, reps, n)
        assert covered >= lowest, (n, covered)
        assert narrow < lowest  # a ±1 se interval must fail the bound


# Issue 61, finding 2: separation. The reference is an exact linear programme (scipy's linprog):
# the judgments are separated along the styles when some (γ, c) ≠ 0 puts every judgment on the side
# its outcome went: s_i·(z_i·γ + c) ≥ 0, s_i = +1 when B won, −1 when A won, = 0 for a tie (the
# ratings' prior keeps θ out of any such direction; c is the centring's constant).


def _separated_by_styles(y, covariates):
    """(separated along the styles, along a direction that moves γ) by linear programming:
    maximise Σ s_i x_i'β subject to 0 ≤ s_i x_i'β ≤ 1 (= 0 for a tie), x_i = (z_i, 1); the
    optimum is positive exactly when a direction of separation exists (Konis 2007). Then whether
    one exists with γ ≠ 0: maximise |γ_j| over the same cone."""
    from scipy.optimize import linprog

    x = np.column_stack([covariates, np.ones(len(y))])
    sign = np.where(y == 1, 1.0, np.where(y == 0, -1.0, 0.0))
    tie = sign == 0
    signed = x * np.where(tie, 1.0, sign)[:, None]
    upper = np.r_[-signed[~tie], signed[~tie]]
    bounds = np.r_[np.zeros((~tie).sum()), np.ones((~tie).sum())]
    eq = signed[tie] if tie.any() else None
    cone = {"A_ub": upper, "b_ub": bounds, "A_eq": eq, "b_eq": np.zeros(tie.sum()) if tie.any() else None,
            "bounds": [(None, None)] * x.shape[1]}  # fmt: skip
    best = linprog(-signed[~tie].sum(axis=0), **cone)
    if not best.success or -best.fun < 1e-7:
        return False, False
    moves = False
    for j in range(covariates.shape[1]):
        for direction in (1.0, -1.0):
            goal = np.zeros(x.shape[1])
            goal[j] = -direction
            far = linprog(goal, **{**cone, "bounds": [(-1e3, 1e3)] * x.shape[1]})
            moves |= far.success and -far.fun > 1e-6
    return True, moves


def test_two_models_one_always_longer_and_always_winning_is_not_identified():
    """Only X and Y compared, X 2.5–3.5× longer and always winning: the length coefficient printed
    +122.892 (+122.892 to +122.892), standard error 0, and both ratings as if known. statsmodels'
    GLM of the same design gives a standard error in the hundreds of thousands (not identified)."""
    rng = np.random.default_rng(1)
    n = 100
    swap = rng.random(n) < 0.5
    a, b = np.where(swap, 1, 0), np.where(swap, 0, 1)  # model 0 is X
    base = np.exp(rng.normal(6, 0.5, n))
    ratio = rng.uniform(2.5, 3.5, n)
    z = style_difference(np.where(a == 0, ratio, 1) * base, np.where(b == 0, ratio, 1) * base)
    y = (b == 0).astype(float)
    assert _separated_by_styles(y, z[:, None]) == (True, True)
    with pytest.warns(Warning):  # statsmodels: perfect separation / no convergence
        ref = sm.GLM(y, _design(a, b, 2, [z]), family=sm.families.Binomial()).fit()
    assert ref.bse[-1] > 1e3
    out = style_controlled_ratings(a, b, y, z[:, None], ["length"], 2, bootstrap=20)
    c = out.coefficients["length"]
    assert not c.identified and (c.estimate, c.ci, c.standard_error) == (None, None, None)
    assert "separated" in c.not_estimable and "almost fixed by which models are compared" in c.not_estimable
    assert sorted(out.not_identified) == [0, 1]


def test_a_judge_that_always_picks_the_longer_answer_is_not_identified():
    """Four equal models, a judge that always picks the longer answer: γ = 25–50 with a
    "significant" interval, and non-overlapping intervals for equal models, without a warning."""
    rng = np.random.default_rng(0)
    n, models = 200, 4
    a = rng.integers(0, models, n)
    b = (a + rng.integers(1, models, n)) % models
    length_a, length_b = np.exp(rng.normal(6, 0.6, n)), np.exp(rng.normal(6, 0.6, n))
    z = style_difference(length_a, length_b)
    y = (length_b > length_a).astype(float)
    assert _separated_by_styles(y, z[:, None]) == (True, True)
    out = style_controlled_ratings(a, b, y, z[:, None], ["length"], models, bootstrap=20)
    c = out.coefficients["length"]
    assert not c.identified and c.ci is None and "separated" in c.not_estimable
    assert sorted(out.not_identified) == [0, 1, 2, 3]


def test_separation_flags_agree_with_linear_programming_on_small_random_designs():
    """Forty small designs (six to sixteen judgments, a strong length taste, some ties), some
    separated by chance: the fit flags the length coefficient exactly when the linear programme
    finds a direction of separation that moves γ."""
    rng = np.random.default_rng(61)
    verdicts = []
    while len(verdicts) < 40:
        n = int(rng.integers(6, 17))
        a = rng.integers(0, 3, n)
        b = (a + rng.integers(1, 3, n)) % 3
        z = style_difference(np.exp(rng.normal(6, 0.6, n)), np.exp(rng.normal(6, 0.6, n)))
        y = (rng.random(n) < sigmoid(4 * z)).astype(float)
        y[rng.random(n) < 0.1] = 0.5
        if np.all(y == y[0]):
            continue  # the position alone decides them: said so without a fit
        _, moves = _separated_by_styles(y, z[:, None])
        flagged = not style_controlled_ratings(a, b, y, z[:, None], ["length"], 3).coefficients["length"].identified
        verdicts.append((moves, flagged))
    assert all(moves == flagged for moves, flagged in verdicts), verdicts
    assert 5 <= sum(moves for moves, _ in verdicts) <= 35  # the check is tried both ways


def test_a_noisy_judge_with_a_length_taste_is_identified():
    a, b, y, z, _ = _simulate(3, 300)
    assert _separated_by_styles(y, z[:, None]) == (False, False)
    out = style_controlled_ratings(a, b, y, z[:, None], ["length"], 3)
    assert out.coefficients["length"].identified and not out.not_identified


# Issue 61, finding 3: the ratings' prior biased the length coefficient in sparse arenas where
# better models write longer. The simulation is the benchmark's (benchmarks/bench_ratings_honesty.py).


def _runs(reps, seed, gamma):
    return bench.coefficient_runs(reps, seed, gamma, spread=1.5, slope=0.8, noise=0.4)


def test_a_judge_without_length_taste_gets_a_significant_length_coefficient_about_5_percent_of_the_time():
    """16 models, 80 judgments, better models writing longer, a judge with no taste for length:
    with the ratings' one-game prior in the same fit as γ, the length coefficient came out
    "significant" in 14 % of these 400 replicates, mean +0.57 (the prior pulls the ratings
    together, and the length difference takes up the quality they leave). Fitted with the
    ratings free (Firth): within [2 %, 9 %], mean near 0."""
    runs = _runs(400, 7, 0.0)
    assert runs.not_identified < 0.02
    assert 0.02 <= runs.excluded_zero <= 0.09, runs
    assert abs(runs.mean) < 0.1, runs


@pytest.mark.slow
def test_the_length_coefficients_interval_covers_a_planted_taste_in_the_sparse_arena():
    """The same arena with a taste γ = 0.5: the prior's fit covered it in 82 % (mean +1.28)."""
    from scipy.stats import binom

    reps = 400
    runs = _runs(reps, 8, 0.5)
    assert runs.covered >= binom.ppf(0.001, reps, 0.95) / reps, runs
    assert abs(runs.mean - 0.5) < 0.15, runs


def test_a_bootstrap_round_in_which_a_style_does_not_vary_is_no_error():
    """A handful of judgments and four styles: some resamples leave a style constant, which made
    the Firth fit's information singular (LinAlgError); such a round takes no step along it."""
    rng = np.random.default_rng(0)
    for n in (4, 5, 8):
        for seed in range(3):
            a = rng.integers(0, 3, n)
            b = (a + rng.integers(1, 3, n)) % 3
            styles = np.column_stack([style_difference(rng.integers(1, 9, n), rng.integers(1, 9, n)) for _ in range(4)])
            y = rng.integers(0, 2, n).astype(float)
            out = style_controlled_ratings(a, b, y, styles, ["length", "headers", "lists", "bold"], 3, bootstrap=50,
                                           seed=seed)  # fmt: skip
            assert np.isfinite(out.ratings).all() and np.isfinite(out.intervals).all()
