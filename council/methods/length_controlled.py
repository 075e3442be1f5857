"""Win rates against a baseline, raw and length-controlled as AlpacaEval 2.0 (pure, numpy).

The length-controlled (LC) win rate of Dubois et al. (2024), "Length-Controlled AlpacaEval":
for each model m, a logistic regression of the judge's preference for m over the baseline on
game i (an instruction i),

    P(m beats baseline on i) = σ(θ_m + φ_m · tanh(Δlen_i / sd_m(Δlen)) + ψ_m · γ_i),

with Δlen = length of m's answer − length of the baseline's, sd_m its standard deviation over
m's games (not centred), and γ_i the instruction's difficulty. The LC win rate is the fitted
preference with the length term set to zero, averaged over m's games: what m would win if its
answers were as long as the baseline's. A longer-is-better judge moves φ_m, not θ_m.

γ comes, as in AlpacaEval's ``notebooks/instruction_difficulty.ipynb``, from one joint fit over
every model's games with a term per model, a length slope per model and a term per
instruction; the instruction terms are the difficulties. AlpacaEval downloads a difficulty
vector fitted once on its own models; here it is estimated from the data at hand. Without
instructions the ψ·γ term is left out (AlpacaEval's ``length_controlled_minimal``).

AlpacaEval fits with L1-regularised, cross-validated scikit-learn and pulls each model toward
two deliberately gamed baselines; here the fits are plain maximum likelihood, with a weak
Gaussian prior (:data:`DIFFICULTY_RIDGE`) on the instruction terms only, which fixes their
common level (it trades off against the model terms) and keeps an instruction every model
lost finite. docs/methods.md, "Length-controlled win rate".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from council.methods.logistic import Term, fit_logistic, sigmoid

#: Prior precision of each instruction term in the joint fit (a N(0, 10²) prior: weak next to
#: the tens of games per instruction, strong enough to pin the level the model terms share).
DIFFICULTY_RIDGE = 0.01


@dataclass(frozen=True)
class BaselineGames:
    """Games of models against one baseline, one entry per game.

    ``model``: the other model's index (0..n_models−1); ``preference``: the probability that it
    beat the baseline (1 win, 0 loss, ½ tie); ``length_delta``: its answer's length minus the
    baseline's (None when unknown); ``prompt``: the instruction's index (None when unknown).
    """

    model: np.ndarray
    preference: np.ndarray
    length_delta: np.ndarray | None = None
    prompt: np.ndarray | None = None


def win_rates_against(wins: np.ndarray, baseline: int) -> np.ndarray:
    """Percent of each model's games against ``baseline`` won, from ``wins[i, j]`` = wins of i
    over j (ties already halves); NaN for a model that never met it; the baseline itself 50."""
    won, lost = wins[:, baseline], wins[baseline, :]
    games = won + lost
    out = np.divide(100.0 * won, games, out=np.full(len(won), np.nan), where=games > 0)
    out[baseline] = 50.0
    return out


def standardised_length(games: BaselineGames, n_models: int) -> np.ndarray:
    """tanh(Δlen / sd_m(Δlen)) per game: sd over the model's own games (sample sd, uncentred Δ)."""
    assert games.length_delta is not None
    delta = np.asarray(games.length_delta, dtype=float)
    count = np.bincount(games.model, minlength=n_models).astype(float)
    total = np.bincount(games.model, weights=delta, minlength=n_models)
    squares = np.bincount(games.model, weights=delta * delta, minlength=n_models)
    mean = total / np.maximum(count, 1)
    var = (squares - count * mean * mean) / np.maximum(count - 1, 1)
    sd = np.sqrt(np.clip(var, 0.0, None))[games.model]
    return np.tanh(np.divide(delta, sd, out=np.zeros_like(delta), where=sd > 0))


def instruction_difficulty(games: BaselineGames, n_models: int, n_prompts: int) -> np.ndarray:
    """γ per instruction from the joint fit (a term per model, a length slope per model, a term
    per instruction); higher γ: the models beat the baseline more easily on that instruction."""
    assert games.prompt is not None and games.length_delta is not None
    length = standardised_length(games, n_models)
    present, model = np.unique(games.model, return_inverse=True)  # models without games have no terms
    k = len(present)
    terms = [Term(model), Term(k + model, length), Term(2 * k + games.prompt)]
    ridge = np.r_[np.zeros(2 * k), np.full(n_prompts, DIFFICULTY_RIDGE)]
    fit = fit_logistic(terms, games.preference, 2 * k + n_prompts, ridge=ridge, groups_from=2 * k)
    return fit.coef[2 * k :]


def lc_win_rates(games: BaselineGames, n_models: int, difficulty: np.ndarray | None = None) -> np.ndarray:
    """Percent LC win rate of each model against the baseline; NaN without games or lengths.

    ``difficulty``: γ per instruction (indexed by ``games.prompt``); None leaves the term out."""
    out = np.full(n_models, np.nan)
    if games.length_delta is None:
        return out
    length = standardised_length(games, n_models)
    for m in np.unique(games.model):
        rows = games.model == m
        terms = [Term(0), Term(1, length[rows])]
        gamma = None
        if difficulty is not None and games.prompt is not None:
            gamma = difficulty[games.prompt[rows]]
            terms.append(Term(2, gamma))
        fit = fit_logistic(terms, games.preference[rows], len(terms))
        eta = fit.coef[0] + (0.0 if gamma is None else fit.coef[2] * gamma)
        out[m] = 100.0 * float(np.mean(sigmoid(np.broadcast_to(eta, int(rows.sum())))))
    return out
