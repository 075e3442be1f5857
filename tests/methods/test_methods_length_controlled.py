"""Length-controlled win rates (docs/methods.md, "Length-controlled win rate") on simulated
judgments with a planted length effect, against statsmodels' GLM of the same formula."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from council.methods.length_controlled import (
    OWN,
    POOLED,
    BaselineGames,
    cross_fitted_difficulty,
    instruction_difficulty,
    lc_win_rates,
    standardised_length,
    win_rates_against,
)
from council.methods.logistic import sigmoid

sm = pytest.importorskip("statsmodels.api")

# The simulations are the benchmark's (benchmarks/bench_ratings_honesty.py), which docs/methods.md
# quotes with more replicates.
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import bench_ratings_honesty as bench  # noqa: E402

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
    out = lc_win_rates(games, 3, cross_fitted_difficulty(games, 3, PROMPTS))
    lc = out.rates
    assert out.method == [OWN] * 3 and out.reason == [None] * 3
    assert raw[0] > 65  # the verbose model buys its raw rate with length
    assert abs(lc[0] - 50) < 6  # ... and is as good as the baseline once length is held equal
    truth_better = 100 * sigmoid(quality[1] + difficulty).mean()
    assert abs(lc[1] - raw[1]) < 4 and abs(lc[1] - truth_better) < 6  # same length: LC ≈ raw
    assert lc[2] < 35


def test_per_model_fit_matches_statsmodels_glm():
    games, _, _ = _simulate(1)
    gamma = cross_fitted_difficulty(games, 3, PROMPTS)
    lc = lc_win_rates(games, 3, gamma).rates
    z = standardised_length(games, 3)
    for m in range(3):
        rows = games.model == m
        x = np.column_stack([np.ones(rows.sum()), z[rows], gamma[rows]])
        ref = sm.GLM(games.preference[rows], x, family=sm.families.Binomial()).fit(tol=1e-12)
        x0 = x.copy()
        x0[:, 1] = 0.0  # the length term set to zero
        assert lc[m] == pytest.approx(100 * ref.predict(x0).mean(), abs=1e-6)


def test_cross_fitted_difficulty_is_the_other_models_games_own_optimum():
    """Each game's difficulty maximises, over g, the other models' games' likelihood on its
    instruction (their model terms held at the joint fit) less the N(0, 10²) prior: scipy's
    bounded scalar optimiser finds the same g. Above EXACT_GAMES games an instruction gets one
    Newton step, within a few hundredths here."""
    from scipy.optimize import minimize_scalar

    import council.methods.length_controlled as lc

    games, _, _ = _simulate(5, 40)
    eta, _ = lc._joint_fit(games, 3, 40)
    gamma = cross_fitted_difficulty(games, 3, 40)
    for j in range(0, len(gamma), 7):
        others = (games.prompt == games.prompt[j]) & (games.model != games.model[j])
        y, e = games.preference[others], eta[others]

        def loss(g, y=y, e=e):
            return -(y * -np.logaddexp(0, -(e + g)) + (1 - y) * -np.logaddexp(0, e + g)).sum() + 0.005 * g * g

        assert gamma[j] == pytest.approx(minimize_scalar(loss, bounds=(-30, 30), method="bounded",
                                                         options={"xatol": 1e-10}).x, abs=1e-6)  # fmt: skip


def test_one_newton_step_is_close_to_the_exact_left_out_difficulty_with_many_models(monkeypatch):
    """Forty models on each of 15 instructions: one Newton step from the joint fit's term (what
    instructions with more than EXACT_GAMES games get where the step is small) against the exact
    left-out optimum. One step alone was 5.4 off (80 models) where the left-out game was the only win."""
    import council.methods.length_controlled as lc

    rng = np.random.default_rng(1)
    models, prompts = 40, 15
    model, prompt = np.repeat(np.arange(models), prompts), np.tile(np.arange(prompts), models)
    delta = np.exp(rng.normal(6.5, 0.6, models * prompts)) - np.exp(rng.normal(6.5, 0.6, models * prompts))
    z = standardised_length(BaselineGames(model, np.zeros(len(model)), delta, prompt), models)
    eta = rng.normal(0, 1, models)[model] + rng.normal(0, 1.5, prompts)[prompt] + z
    games = BaselineGames(model, (rng.random(len(model)) < sigmoid(eta)).astype(float), delta, prompt)
    monkeypatch.setattr(lc, "EXACT_GAMES", 1000)
    exact = cross_fitted_difficulty(games, models, prompts)
    monkeypatch.setattr(lc, "EXACT_GAMES", 0)
    one_step = cross_fitted_difficulty(games, models, prompts)
    assert np.abs(one_step - exact).max() < lc.TRUSTED_STEP**2 / 2
    rates = lc_win_rates(games, models, one_step).rates, lc_win_rates(games, models, exact).rates
    assert np.nanmax(np.abs(rates[0] - rates[1])) < 0.02


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
    minimal = lc_win_rates(no_prompt, 3).rates
    assert abs(minimal[0] - 50) < 8  # the length term alone still removes most of the pull
    no_length = BaselineGames(games.model, games.preference, None, games.prompt)
    assert np.isnan(lc_win_rates(no_length, 3).rates).all()


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


# Issue 61, finding 1: rates the games cannot determine, and difficulty that encodes the outcome.


def test_a_model_always_three_times_longer_borrows_the_length_slope_or_is_null():
    """Its own games cannot tell quality from length: its per-model fit read 99.4 for a model as
    good as the baseline (truth 50.4); alone, 79.0 (its raw rate) with prompt ids and 67.1
    without. Among other models it takes their length slope and reads the truth within 6
    points; alone it is null, with the reason."""
    games, truth = bench.always_longer(11)
    out = lc_win_rates(games, 3, cross_fitted_difficulty(games, 3, 300))
    raw = 100 * games.preference[games.model == 0].mean()
    assert raw > 70
    assert out.method[0] == POOLED and "always longer" in out.reason[0]
    assert abs(out.rates[0] - truth) < 6, (out.rates[0], truth)
    assert out.method[1:] == [OWN, OWN]
    alone, _ = bench.always_longer(11, alone=True)
    single = lc_win_rates(alone, 1, cross_fitted_difficulty(alone, 1, 300))
    assert np.isnan(single.rates[0]) and single.method[0] is None
    assert "always longer" in single.reason[0] and "no other model" in single.reason[0]


def test_the_pooled_slope_is_the_inverse_variance_mean_of_statsmodels_own_slopes():
    games, _ = bench.always_longer(12)
    gamma = cross_fitted_difficulty(games, 3, 300)
    out = lc_win_rates(games, 3, gamma)
    z = standardised_length(games, 3)
    slopes, weights = [], []
    for m in (1, 2):
        rows = games.model == m
        x = np.column_stack([np.ones(rows.sum()), z[rows], gamma[rows]])
        ref = sm.GLM(games.preference[rows], x, family=sm.families.Binomial()).fit(tol=1e-12)
        slopes.append(ref.params[1])
        weights.append(1 / ref.bse[1] ** 2)
    pooled = np.dot(weights, slopes) / np.sum(weights)
    rows = games.model == 0
    ref = sm.GLM(games.preference[rows], np.column_stack([np.ones(rows.sum()), gamma[rows]]),
                 family=sm.families.Binomial(), offset=pooled * z[rows]).fit(tol=1e-12)  # fmt: skip
    expected = 100 * sigmoid(ref.params[0] + ref.params[1] * gamma[rows]).mean()
    assert out.rates[0] == pytest.approx(expected, abs=1e-5)
    assert f"{pooled:+.2f}" in out.reason[0]


def test_one_game_per_prompt_alone_reads_the_truth_not_the_raw_rate():
    """One model against the baseline, as good as it and usually longer, one game per
    instruction: estimated from the same games, each instruction's difficulty encoded its one
    outcome and lc_win_rate was the raw rate (to 1e-5 here: a mean error of +9.3 points over these
    replicates). Cross-fitted, no other model played them: no difficulty term. Over 20 seeded
    replicates of 400 games the mean error is within 2.5 points (the standard error of one is
    about 4) and none is off by 12."""
    errors, lifts = [], []
    for seed in range(20):
        games, truth = bench.one_model_one_game_per_prompt(seed)
        gamma = cross_fitted_difficulty(games, 1, 400)
        assert (gamma == 0).all()
        lc = lc_win_rates(games, 1, gamma).rates[0]
        errors.append(lc - truth)
        lifts.append(100 * games.preference.mean() - lc)
    assert abs(np.mean(errors)) < 2.5 and np.abs(errors).max() < 12, errors
    assert np.mean(lifts) > 8  # the raw rate is well above: length bought it


def test_alpaca_evals_gamed_model_alone_is_null_not_99_87():
    """gpt4_gamed's AlpacaEval games against gpt4_1106_preview, preferences rounded to winners as
    a judge giving verdicts would: it wins 31 of the 31 games where its answer is longer and 1 of
    772 where it is shorter, so its fit is separated. It read 99.87 with prompt ids (raw 4.10)
    and 69.0 without; now null with the reason, either way. claude-2 alone read its raw rate
    (16.34) with prompt ids; now the same with and without them (no other model's games)."""
    import gzip
    import json

    path = Path(__file__).parent.parent / "data" / "alpaca_eval" / "judgments.jsonl.gz"
    rows = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    for name in ("gpt4_gamed", "claude-2"):
        mine = [r for r in rows if r["model_b"] == name]
        y = np.array([1.0 if r["preference"] > 0.5 else 0.0 if r["preference"] < 0.5 else 0.5 for r in mine])
        delta = np.array([r["length_b"] - r["length_a"] for r in mine], dtype=float)
        prompt = np.array([int(r["prompt_id"]) for r in mine])
        model = np.zeros(len(mine), dtype=np.int64)
        with_ids = BaselineGames(model, y, delta, prompt)
        out = lc_win_rates(with_ids, 1, cross_fitted_difficulty(with_ids, 1, prompt.max() + 1))
        without = lc_win_rates(BaselineGames(model, y, delta, None), 1)
        if name == "gpt4_gamed":
            assert np.isnan(out.rates[0]) and np.isnan(without.rates[0])
            assert "separated" in out.reason[0] and "no other model" in out.reason[0]
        else:
            assert out.rates[0] == pytest.approx(without.rates[0], abs=1e-9)
            assert abs(out.rates[0] - 100 * y.mean()) > 10
