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
instruction. AlpacaEval downloads a difficulty vector fitted once on its own models; here it is
estimated from the data at hand, and *cross-fitted*: model m's games use the difficulty its
instruction has in the other models' games (:func:`cross_fitted_difficulty`). Estimated from
m's own games too, an instruction m alone played would encode m's outcome there, and the LC
rate would repeat the raw one. Without instructions the ψ·γ term is left out (AlpacaEval's
``length_controlled_minimal``).

A rate is printed only where the games determine it (:func:`length_controlled`): when m's
answers are always longer (or always shorter) than the baseline's, or its fit runs off to
infinity (separation), its own games cannot tell quality from length. Then the length slope is
the other models' (inverse-variance weighted mean of their own slopes, AlpacaEval's fit shares
it with gamed baselines); with no other model, or still undetermined, the rate is None with the
reason. docs/methods.md, "Length-controlled win rate".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from council.methods.logistic import Term, fit_logistic, information, linear_predictor, sigmoid, weak_directions

#: Prior precision of each instruction term in the joint fit (a N(0, 10²) prior: weak next to
#: the tens of games per instruction, strong enough to pin the level the model terms share).
DIFFICULTY_RIDGE = 0.01
#: The cross-fitted difficulty is one Newton step from the joint fit's instruction term, then
#: Newton's method to the end (over the instruction's other games: O(games) a cell, a few million
#: pairs at a time) where the instruction has at most EXACT_GAMES games or the step exceeded
#: TRUSTED_STEP: below it, the step's own error is at most half its square (|h''/h'| ≤ 1 for a
#: sum of logistic curves), 0.005.
EXACT_GAMES = 64
TRUSTED_STEP = 0.1
PAIRS_AT_ONCE = 4_000_000


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


def _joint_fit(games: BaselineGames, n_models: int, n_prompts: int):
    """The joint fit: a term per model, a length slope per model, a term per instruction."""
    assert games.prompt is not None and games.length_delta is not None
    length = standardised_length(games, n_models)
    present, model = np.unique(games.model, return_inverse=True)  # models without games have no terms
    k = len(present)
    terms = [Term(model), Term(k + model, length), Term(2 * k + games.prompt)]
    ridge = np.r_[np.zeros(2 * k), np.full(n_prompts, DIFFICULTY_RIDGE)]
    fit = fit_logistic(terms, games.preference, 2 * k + n_prompts, ridge=ridge, groups_from=2 * k)
    return fit.coef[model] + fit.coef[k + model] * length, fit.coef[2 * k :]


def instruction_difficulty(games: BaselineGames, n_models: int, n_prompts: int) -> np.ndarray:
    """γ per instruction from the joint fit (a term per model, a length slope per model, a term
    per instruction); higher γ: the models beat the baseline more easily on that instruction."""
    return _joint_fit(games, n_models, n_prompts)[1]


def cross_fitted_difficulty(games: BaselineGames, n_models: int, n_prompts: int) -> np.ndarray:
    """Per game, its instruction's difficulty in the *other* models' games: the joint fit's
    instruction term refitted without the games of the game's own model on that instruction,
    the models' terms held at the joint fit (the N(0, 10²) prior kept): 0, the prior's mean,
    where no other model played it: Newton's method on that one-dimensional penalised
    likelihood, from the joint fit's term, stopped after one step only where the instruction has
    more than :data:`EXACT_GAMES` games and the step is below :data:`TRUSTED_STEP`.
    docs/methods.md, "Length-controlled win rate"."""
    assert games.prompt is not None
    eta, gamma = _joint_fit(games, n_models, n_prompts)
    y, prompt = games.preference, games.prompt
    # each (instruction, model) is left out as a whole: a model's repeated games on it included
    cell, cell_of = np.unique(prompt * n_models + games.model, return_inverse=True)
    cell_prompt = cell // n_models
    out = gamma[cell_prompt].astype(float)
    per_prompt = np.bincount(prompt, minlength=n_prompts)
    # One Newton step from the joint fit's term for every cell (the joint fit's score is 0 there:
    # Σ (y − p) = λγ over the instruction's games) ...
    p = sigmoid(eta + gamma[prompt])
    own = np.bincount(cell_of, weights=y - p, minlength=len(cell))
    own_curvature = np.bincount(cell_of, weights=p * (1 - p), minlength=len(cell))
    curvature = DIFFICULTY_RIDGE + np.bincount(prompt, weights=p * (1 - p), minlength=n_prompts)[cell_prompt]
    step = own / (curvature - own_curvature)
    out -= step
    # ... then Newton's method to the end over every other game of the instruction, for the cells of
    # small instructions and those the step moved far (the left-out game weighed much there)
    exact = (per_prompt[cell_prompt] <= EXACT_GAMES) | (np.abs(step) > TRUSTED_STEP)
    needed = np.isin(prompt, cell_prompt[exact])
    order = np.flatnonzero(needed)
    order = order[np.argsort(prompt[order], kind="stable")]
    cells = np.flatnonzero(exact)  # sorted by instruction, as the cells are
    start = np.searchsorted(prompt[order], cell_prompt[cells], side="left")
    count = np.searchsorted(prompt[order], cell_prompt[cells], side="right") - start
    total = np.cumsum(count)
    first = 0
    while first < len(cells):
        done = int(total[first - 1]) if first else 0
        last = max(int(np.searchsorted(total, done + PAIRS_AT_ONCE, side="right")), first + 1)
        at = cells[first:last]
        out[at] = _left_out(eta, y, cell_of, order, at, start[first:last], count[first:last], out[at])
        first = last
    return out[cell_of]


def _left_out(eta, y, cell_of, order, cells, start, count, g):
    """Newton's method on each cell's instruction term over the instruction's other games
    (``order[start:start + count]``, less the cell's own), the N(0, 10²) prior kept."""
    left = np.repeat(np.arange(len(cells)), count)
    partner = order[np.repeat(start, count) + np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)]
    keep = cell_of[partner] != cells[left]
    left, partner = left[keep], partner[keep]
    g = np.array(g, dtype=float)
    g[np.bincount(left, minlength=len(cells)) == 0] = 0.0  # no other model's game: the prior's mean, exactly
    for _ in range(50):
        q = sigmoid(eta[partner] + g[left])
        score = np.bincount(left, weights=y[partner] - q, minlength=len(cells)) - DIFFICULTY_RIDGE * g
        slope = np.bincount(left, weights=q * (1 - q), minlength=len(cells)) + DIFFICULTY_RIDGE
        step = score / slope
        g += step
        if np.abs(step).max(initial=0.0) < 1e-10:
            break
    return g


#: A fitted probability within e^−30 of 0 or 1 ("numerically 0 or 1", as R's glm warns): the
#: fit has run off along a direction that separates the games.
CERTAIN = 30.0


def _determined(terms: list[Term], names: list[str], y: np.ndarray, offset: np.ndarray | None = None):
    """The fit of ``terms`` (columns ``names``, the intercept first) to ``y``, its observed
    information, and, when it cannot be trusted, why (None: determined): a column (almost)
    collinear with the others, a direction without information (separation,
    :func:`~council.methods.logistic.weak_directions`), or a fitted probability numerically 0 or 1."""
    rows, n_columns = len(y), len(names)
    fit = fit_logistic(terms, y, n_columns, offset=offset)
    seen = information(terms, fit.coef, rows, n_columns, offset=offset)
    most = information(terms, fit.coef, rows, n_columns, at_half=True)
    collinear, weak = weak_directions(seen, most, range(n_columns))
    if collinear.shape[1]:
        name = names[1 + int(np.argmax(np.abs(collinear[1:, 0])))]
        return fit, seen, f"its {name} term is (almost) constant over its games"
    if weak.shape[1] or (np.abs(linear_predictor(terms, fit.coef, rows, offset)) > CERTAIN).any():
        return fit, seen, "its games are separated: the fitted probabilities run to 0 or 1"
    return fit, seen, None


def _difficulty_of(difficulty: np.ndarray | None, rows: np.ndarray) -> np.ndarray | None:
    """The model's games' difficulty, None where no other model played its instructions."""
    gamma = None if difficulty is None else difficulty[rows]
    return None if gamma is None or not np.any(gamma) else gamma


@dataclass(frozen=True)
class LengthControlled:
    """Percent LC win rate per model (NaN: not estimated), how each was estimated and why not."""

    rates: np.ndarray
    method: list[str | None]
    reason: list[str | None]


OWN = "own length slope"
POOLED = "pooled length slope"


def lc_win_rates(games: BaselineGames, n_models: int, difficulty: np.ndarray | None = None) -> LengthControlled:
    """Each model's LC win rate against the baseline (NaN without games or lengths).

    ``difficulty``: γ per game (:func:`cross_fitted_difficulty`); None leaves the term out. A
    model's own fit (AlpacaEval's) is used where its games straddle the baseline's length and the
    fit is determined; otherwise the length slope is the other models' (their own slopes'
    inverse-variance weighted mean) and only θ_m, ψ_m are fitted; with none, or still
    undetermined, the rate is NaN with the reason."""
    rates = np.full(n_models, np.nan)
    method: list[str | None] = [None] * n_models
    reason: list[str | None] = [None] * n_models
    if games.length_delta is None:
        return LengthControlled(rates, method, reason)
    length = standardised_length(games, n_models)
    slopes: list[tuple[float, float]] = []
    failed: dict[int, str] = {}
    for m in np.unique(games.model).tolist():
        rows = games.model == m
        y, z, gamma = games.preference[rows], length[rows], _difficulty_of(difficulty, rows)
        if (z > 0).all() or (z < 0).all():
            side = "longer" if (z > 0).all() else "shorter"
            failed[m] = (f"its answers are always {side} than the baseline's, so its own games cannot tell quality "
                         "from length")  # fmt: skip
            continue
        terms = [Term(0), Term(1, z)] + ([] if gamma is None else [Term(2, gamma)])
        fit, seen, why = _determined(terms, ["intercept", "length", "difficulty"][: len(terms)], y)
        if why is not None:
            failed[m] = f"its own fit does not determine it: {why}"
            continue
        rates[m] = _rate(fit.coef[0], fit.coef[2] if gamma is not None else 0.0, gamma, len(y))
        method[m] = OWN
        slopes.append((float(fit.coef[1]), float(np.linalg.inv(seen)[1, 1])))
    pooled = None
    usable = [(s, v) for s, v in slopes if np.isfinite(v) and v > 0]
    if usable:
        weights = np.array([1 / v for _, v in usable])
        pooled = float(np.dot(weights, [s for s, _ in usable]) / weights.sum())
    for m, why in failed.items():
        if pooled is None:
            reason[m] = f"{why}, and no other model's games give the judge's length effect"
            continue
        rows = games.model == m
        y, z, gamma = games.preference[rows], length[rows], _difficulty_of(difficulty, rows)
        terms = [Term(0)] + ([] if gamma is None else [Term(1, gamma)])
        fit, _, still = _determined(terms, ["intercept", "difficulty"][: len(terms)], y, offset=pooled * z)
        if still is not None:
            reason[m] = f"{why}; with the other models' length slope ({pooled:+.2f}) still not determined: {still}"
            continue
        rates[m] = _rate(fit.coef[0], fit.coef[1] if gamma is not None else 0.0, gamma, len(y))
        method[m] = POOLED
        reason[m] = (f"{why}: the length slope is the other models' ({pooled:+.2f}, their own slopes' "
                     f"inverse-variance weighted mean over {len(usable)} models)")  # fmt: skip
    return LengthControlled(rates, method, reason)


def _rate(theta: float, psi: float, gamma: np.ndarray | None, n: int) -> float:
    """100 × the mean fitted preference with the length term at 0."""
    eta = np.full(n, theta) + (0.0 if gamma is None else psi * gamma)
    return 100.0 * float(np.mean(sigmoid(eta)))
