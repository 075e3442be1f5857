"""Length-controlled win rates (docs/methods.md, "Length-controlled win rate") on simulated
judgments with a planted length effect, against statsmodels' GLM of the same formula."""

from __future__ import annotations

import numpy as np
import pytest

from council.methods.length_controlled import (
    BaselineGames,
    instruction_difficulty,
    lc_win_rates,
    standardised_length,
    win_rates_against,
)
from council.methods.logistic import sigmoid

sm = pytest.importorskip("statsmodels.api")

PROMPTS = 400
LENGTH_TASTE = 1.5  # the simulated judge's pull toward the longer answer, per tanh unit


def _simulate(seed: int = 0, prompts: int = PROMPTS):
    """Model 0 is as good as the baseline but three times longer; model 1 is better (θ = 0.8)
    at the baseline's length; model 2 is worse (θ = −1) and a little shorter."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(scale=0.7, size=prompts)
    base_len = np.exp(rng.normal(np.log(800), 0.6, prompts))
    quality = np.array([0.0, 0.8, -1.0])
    stretch = np.array([3.0, 1.0, 0.8])
    model = np.repeat(np.arange(3), prompts)
    prompt = np.tile(np.arange(prompts), 3)
    # answers' lengths vary a lot from one instruction to the next, so even the verbose model is
    # sometimes the shorter one: the length slope is identified, and σ(θ) is no extrapolation
    own_len = stretch[model] * np.exp(rng.normal(np.log(800), 0.6, len(model)))
    delta = own_len - base_len[prompt]
    games = BaselineGames(model, np.zeros(len(model)), delta, prompt)
    z = standardised_length(games, 3)
    p = sigmoid(quality[model] + difficulty[prompt] + LENGTH_TASTE * z)
    y = (rng.random(len(model)) < p).astype(float)
    return BaselineGames(model, y, delta, prompt), quality, difficulty


def test_planted_length_effect_is_removed():
    games, quality, difficulty = _simulate()
    raw = 100 * np.bincount(games.model, weights=games.preference) / np.bincount(games.model)
    lc = lc_win_rates(games, 3, instruction_difficulty(games, 3, PROMPTS))
    assert raw[0] > 65  # the verbose model buys its raw rate with length
    assert abs(lc[0] - 50) < 6  # ... and is as good as the baseline once length is held equal
    truth_better = 100 * sigmoid(quality[1] + difficulty).mean()
    assert abs(lc[1] - raw[1]) < 4 and abs(lc[1] - truth_better) < 6  # same length: LC ≈ raw
    assert lc[2] < 35


def test_per_model_fit_matches_statsmodels_glm():
    games, _, _ = _simulate(1)
    gamma = instruction_difficulty(games, 3, PROMPTS)
    lc = lc_win_rates(games, 3, gamma)
    z = standardised_length(games, 3)
    for m in range(3):
        rows = games.model == m
        x = np.column_stack([np.ones(rows.sum()), z[rows], gamma[games.prompt[rows]]])
        ref = sm.GLM(games.preference[rows], x, family=sm.families.Binomial()).fit(tol=1e-12)
        x0 = x.copy()
        x0[:, 1] = 0.0  # the length term set to zero
        assert lc[m] == pytest.approx(100 * ref.predict(x0).mean(), abs=1e-6)


def test_joint_difficulty_matches_a_general_optimizer_with_the_same_prior():
    from scipy.optimize import minimize

    games, _, difficulty = _simulate(2, 120)
    gamma = instruction_difficulty(games, 3, 120)
    # the same penalised log-likelihood, dense, by L-BFGS (a prior N(0, 10²) on each instruction term)
    n = len(games.model)
    x = np.zeros((n, 6 + 120))
    x[np.arange(n), games.model] = 1
    x[np.arange(n), 3 + games.model] = standardised_length(games, 3)
    x[np.arange(n), 6 + games.prompt] = 1
    lam = np.r_[np.zeros(6), np.full(120, 0.01)]
    y = games.preference

    def loss(b):
        eta = x @ b
        value = -(y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta)).sum() + 0.5 * (lam * b * b).sum()
        return value, -(x.T @ (y - sigmoid(eta))) + lam * b

    ref = minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 1e-15})
    # the surface is flat along the instruction terms (three games each): L-BFGS stops a little short
    np.testing.assert_allclose(gamma, ref.x[6:], atol=2e-2)
    assert np.corrcoef(gamma, difficulty)[0, 1] > 0.4  # it tracks the planted difficulty


def test_without_prompts_or_lengths():
    games, _, _ = _simulate(3)
    no_prompt = BaselineGames(games.model, games.preference, games.length_delta, None)
    minimal = lc_win_rates(no_prompt, 3)
    assert abs(minimal[0] - 50) < 8  # the length term alone still removes most of the pull
    no_length = BaselineGames(games.model, games.preference, None, games.prompt)
    assert np.isnan(lc_win_rates(no_length, 3)).all()


def test_win_rates_against_a_baseline_count_ties_as_half():
    wins = np.array([[0, 3, 0.5], [1, 0, 0], [1.5, 0, 0]])  # model 2 met only model 0, one tie among 2 games
    rates = win_rates_against(wins, 0)
    assert rates.tolist() == [50.0, 25.0, 75.0]
    assert np.isnan(win_rates_against(wins, 1)[2])  # never met model 1


def test_the_instruction_terms_fit_apart_equals_the_whole_hessians_fit():
    """The Newton step through the instructions' diagonal block (their Schur complement) is the
    step of the whole Hessian: the same coefficients, and the first columns' information is the
    inverse of their block of the whole covariance."""
    from council.methods.logistic import Term, fit_logistic

    games, _, _ = _simulate(3, 150)
    z = standardised_length(games, 3)
    terms = [Term(games.model), Term(3 + games.model, z), Term(6 + games.prompt)]
    ridge = np.r_[np.zeros(6), np.full(150, 0.01)]
    whole = fit_logistic(terms, games.preference, 156, ridge=ridge)
    apart = fit_logistic(terms, games.preference, 156, ridge=ridge, groups_from=6)
    np.testing.assert_allclose(apart.coef, whole.coef, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(np.linalg.inv(apart.information), whole.covariance()[:6, :6], rtol=1e-7)
    assert apart.information.shape == (6, 6)
    with pytest.raises(ValueError):
        fit_logistic(terms, games.preference, 156, groups_from=6)  # no ridge on the instructions


def test_thousands_of_instructions_fit_in_memory_linear_in_their_number():
    """A store's judged pairs may each have an instruction of their own: 4,000 instructions made a
    4,006² Hessian per Newton step (128 MB a bincount; 50,000 made 20 GB and the process was
    killed). Apart, the fit holds a few arrays of the games' length."""
    import tracemalloc

    games, _, _ = _simulate(4, 4_000)
    tracemalloc.start()
    try:
        gamma = instruction_difficulty(games, 3, 4_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert gamma.shape == (4_000,) and np.isfinite(gamma).all()
    assert peak < 16 * 2**20, peak
