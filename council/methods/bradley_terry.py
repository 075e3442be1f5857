"""Bradley–Terry ratings from pairwise outcomes, with bootstrap intervals (pure, numpy).

Model i beats model j with probability p_i / (p_i + p_j) = σ(θ_i − θ_j), θ = log p. A tie
counts as half a win for each side.

The plain maximum-likelihood estimate exists only when the comparison graph is strongly
connected (every split of the models into two groups has a win in each direction): a model
that never won would go to −∞, and models never compared with each other have no relative
rating at all. So every model also plays ``prior_games`` virtual games against a fixed
reference of strength 1 (θ = 0), all ties: a small symmetric prior that keeps every
estimate finite and weighs as much as one real comparison. With real data in the hundreds
of comparisons its pull is negligible; a model that never won gets a finite low rating and
a wide interval instead of −∞. Models in separate components of the comparison graph get
ratings from the prior alone relative to each other: :func:`components` finds them, and the
leaderboard says so. The fit is Newton's method on that (strictly concave) log-posterior;
without a prior, Hunter's MM algorithm (2004) gives the plain maximum-likelihood estimate.

Ratings are read on an Elo-style scale: rating = 1000 + 400 · log10(p_i / g), g the
geometric mean of the strengths, so the mean rating is 1000 and a 400-point gap means 10:1
odds of winning. Intervals: the hull of a percentile bootstrap over units (sessions, judged
items; resampled with replacement within each source, refitted each round), the normal
interval of the posterior mode (its curvature) and a cluster-robust (sandwich) interval with
Student's t, each unit a cluster: the bootstrap alone undercovers with few sessions and
collapses to zero width when every session agrees, and the curvature alone takes a session's
ballots, which rank the same answers, for independent games. The method write-up is in
docs/methods.md, "Leaderboard".
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from council.methods import graphs
from council.methods.distributions import t_quantile_two_sided

ELO_ANCHOR = 1000.0
ELO_FACTOR = 400.0 / math.log(10.0)  # rating points per unit of θ (natural log of strength)
PRIOR_GAMES = 1.0
CI_LEVEL = 0.95
MAX_ITERATIONS = 20_000
TOLERANCE = 1e-10

Pair = tuple[int, int]  # (winner, loser) model indices


class SeparationWarning(UserWarning):
    """The plain maximum-likelihood estimate does not exist: some models never beat some others."""


# ----------------------------------------------------------------------------- the fit


def fit_log_strengths(
    wins: np.ndarray,
    *,
    prior_games: float = PRIOR_GAMES,
    tolerance: float = TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
) -> np.ndarray:
    """θ = log strength for each model, from ``wins[..., i, j]`` = wins of i over j.

    Works on a stack of win matrices at once (shape ``(..., M, M)``; one bootstrap round per
    matrix). With ``prior_games > 0``: the posterior mode, θ relative to the virtual reference
    (θ = 0), by Newton's method. With ``prior_games == 0``: the plain maximum-likelihood
    estimate by Hunter's MM algorithm, mean θ = 0 over the models that won something, −∞ for
    a model that never won.
    """
    wins = np.asarray(wins, dtype=float)
    if prior_games > 0:
        return _newton(wins, prior_games, tolerance, max_iterations)
    return _minorize_maximize(wins, tolerance, max_iterations)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(_log_sigmoid(x))


def _log_posterior(theta: np.ndarray, wins: np.ndarray, prior_games: float) -> np.ndarray:
    diff = theta[..., :, None] - theta[..., None, :]
    data = (wins * _log_sigmoid(diff)).sum(axis=(-1, -2))
    prior = prior_games / 2 * (_log_sigmoid(theta) + _log_sigmoid(-theta)).sum(axis=-1)
    return data + prior


def _newton(wins: np.ndarray, prior_games: float, tolerance: float, max_iterations: int) -> np.ndarray:
    """Newton's method with a backtracking line search on the log-posterior, which is
    strictly concave (the virtual games make its Hessian negative definite), so it converges
    from anywhere, in a handful of steps. (MM crawls here: with a weak prior the common level
    of θ is barely determined, and MM's steps along it shrink by that ratio.)"""
    m = wins.shape[-1]
    games = wins + np.swapaxes(wins, -1, -2)
    won = wins.sum(axis=-1) + prior_games / 2
    theta = np.zeros(wins.shape[:-1])
    value = _log_posterior(theta, wins, prior_games)
    diagonal = np.arange(m)
    for _ in range(max_iterations):
        s = _sigmoid(theta[..., :, None] - theta[..., None, :])
        s_ref = _sigmoid(theta)
        gradient = won - (games * s).sum(axis=-1) - prior_games * s_ref
        curvature = games * s * (1 - s)
        neg_hessian = -curvature
        neg_hessian[..., diagonal, diagonal] = curvature.sum(axis=-1) + prior_games * s_ref * (1 - s_ref)
        step = np.linalg.solve(neg_hessian, gradient[..., None])[..., 0]
        size = np.abs(step).max(axis=-1)
        if size.max(initial=0.0) < tolerance:
            break
        slope = (gradient * step).sum(axis=-1)
        t = np.ones(theta.shape[:-1])
        for _ in range(60):  # halve the step where it does not raise the posterior enough (Armijo)
            candidate = theta + t[..., None] * step
            new_value = _log_posterior(candidate, wins, prior_games)
            # (rounding noise at the optimum is no reason to halve: converged rows are left alone)
            short = (new_value < value + 1e-4 * t * slope - 1e-12 * np.abs(value)) & (t * size >= tolerance)
            if not short.any():
                break
            t = np.where(short, t / 2, t)
        theta, value = candidate, new_value
    return theta


def _minorize_maximize(wins: np.ndarray, tolerance: float, max_iterations: int) -> np.ndarray:
    m = wins.shape[-1]
    games = wins + np.swapaxes(wins, -1, -2)
    won = wins.sum(axis=-1)
    p = np.ones(wins.shape[:-1])
    for _ in range(max_iterations):
        # MM step (Hunter 2004): p_i ← W_i / Σ_j n_ij / (p_i + p_j)
        pair_sum = p[..., :, None] + p[..., None, :]
        pair_sum[..., np.arange(m), np.arange(m)] = np.inf  # no games against oneself
        denom = (games / pair_sum).sum(axis=-1)
        new = _unit_geometric_mean(np.divide(won, denom, out=np.zeros_like(won), where=denom > 0))
        scale = np.maximum(new.max(axis=-1, keepdims=True), 1e-300)
        delta = np.abs(new - p).max(axis=-1, keepdims=True) / scale
        p = new
        if delta.max() < tolerance:
            break
    with np.errstate(divide="ignore"):
        return np.log(p)


def _unit_geometric_mean(p: np.ndarray) -> np.ndarray:
    """Strengths rescaled so the positive ones have geometric mean 1 (the MLE has no scale)."""
    positive = p > 0
    logs = np.log(np.where(positive, p, 1.0))
    count = np.maximum(positive.sum(axis=-1, keepdims=True), 1)
    mean = (logs * positive).sum(axis=-1, keepdims=True) / count
    return p * np.exp(-mean)


def elo_scale(theta: np.ndarray) -> np.ndarray:
    """θ on the Elo-style scale: 1000 + 400·log10(p / geometric mean of p), per row."""
    theta = np.asarray(theta, dtype=float)
    return ELO_ANCHOR + ELO_FACTOR * (theta - theta.mean(axis=-1, keepdims=True))


def win_probability(rating_i: float, rating_j: float) -> float:
    """The chance that i beats j, read off the Elo-style scale."""
    return 1.0 / (1.0 + 10.0 ** ((rating_j - rating_i) / 400.0))


# ----------------------------------------------------------------------- the data


@dataclass(frozen=True)
class Stratum:
    """One source of units (sessions, or judged items), grouped by identical outcomes.

    ``groups`` is a list of ``(units, outcomes)``: that many units each gave ``outcomes``
    (``(winner, loser) -> wins``, ties already split into halves). Grouping changes nothing
    statistically (resampling units = a multinomial draw over the groups) and makes the
    bootstrap cost depend on the number of distinct groups, not of units.
    """

    name: str
    groups: Sequence[tuple[int, Mapping[Pair, float]]]

    @property
    def units(self) -> int:
        return sum(n for n, _ in self.groups)


def win_matrix(strata: Sequence[Stratum], n_models: int) -> np.ndarray:
    """Every unit's outcomes added up: ``wins[i, j]`` = wins of i over j."""
    wins = np.zeros((n_models, n_models))
    for stratum in strata:
        for n, outcomes in stratum.groups:
            for (i, j), w in outcomes.items():
                wins[i, j] += n * w
    return wins


def bradley_terry(outcomes: Iterable[tuple[str, str]], *, prior_games: float = 0.0) -> dict[str, float]:
    """Bradley–Terry strengths from named (winner, loser) pairs, normalised to sum to 1.

    A front end to the one fitter, :func:`fit_log_strengths`: the pairs become its win
    matrix. Without a prior (the default here) this is the maximum-likelihood estimate, and
    a player with no wins gets strength 0 (the limit of the diverging estimate).
    """
    wins: dict[Pair, float] = defaultdict(float)
    names: dict[str, int] = {}
    for winner, loser in outcomes:
        if winner == loser:
            continue
        i, j = names.setdefault(winner, len(names)), names.setdefault(loser, len(names))
        wins[(i, j)] += 1
    if not names:
        return {}
    matrix = win_matrix([Stratum("pairs", [(1, wins)])], len(names))
    if prior_games == 0 and separated(matrix):
        warnings.warn(
            "the maximum-likelihood Bradley–Terry estimate does not exist: some models never beat models they "
            "were compared with, so their strengths diverge; the numbers are a limit (0 for a model that never won) "
            "set by the iteration cap. Use prior_games > 0 for finite estimates.",
            SeparationWarning,
            stacklevel=2,
        )
    p = np.exp(fit_log_strengths(matrix, prior_games=prior_games))
    p = p / p.sum()
    return {name: float(p[i]) for name, i in names.items()}


def separated(wins: np.ndarray) -> bool:
    """True when, inside a connected group, some model cannot be reached from another by a chain
    of wins: the plain maximum-likelihood estimate then does not exist (Hunter 2004, Assumption 1)."""
    m = len(wins)
    reach = (wins > 0) | np.eye(m, dtype=bool)
    for k in range(m):  # transitive closure (Warshall)
        reach = reach | (reach[:, [k]] & reach[[k], :])
    compared = np.zeros((m, m), dtype=bool)
    for part in components(wins):
        compared[np.ix_(part, part)] = True
    return bool((compared & ~(reach & reach.T)).any())


def components(wins: np.ndarray) -> list[list[int]]:
    """The connected components of the comparison graph (models compared at least once)."""
    compared = (wins + wins.T) > 0
    return graphs.components(len(wins), zip(*(a.tolist() for a in np.nonzero(compared)), strict=True))


@dataclass(frozen=True)
class _PairTable:
    """One stratum's outcomes as a groups × pairs table: ``pairs[k]`` = (winner, loser); entry e
    puts ``value[e]`` wins in group ``group_of[e]``, pair ``column_of[e]``; ``sizes``: units per group."""

    pairs: list[Pair]
    group_of: np.ndarray
    column_of: np.ndarray
    value: np.ndarray
    sizes: np.ndarray


def _pair_table(stratum: Stratum) -> _PairTable:
    pairs = sorted({pair for _, outcomes in stratum.groups for pair in outcomes})
    column = {pair: k for k, pair in enumerate(pairs)}
    entries = [(g, column[pair], w) for g, (_, outcomes) in enumerate(stratum.groups) for pair, w in outcomes.items()]
    group_of, column_of, value = (np.array(x) for x in zip(*entries, strict=True))
    sizes = np.array([n for n, _ in stratum.groups], dtype=float)
    return _PairTable(pairs, group_of, column_of, value.astype(float), sizes)


def bootstrap_wins(
    strata: Sequence[Stratum],
    n_models: int,
    rounds: int,
    rng: np.random.Generator,
    *,
    dense_limit: int = 4_000_000,
) -> np.ndarray:
    """``rounds`` win matrices, each from the units resampled with replacement within each stratum.

    Resampling a stratum's units is one multinomial draw of how often each group is picked;
    a round's wins are those counts times the groups' outcomes. The groups × pairs matrix is
    dense while it has at most ``dense_limit`` cells, else it is kept sparse."""
    total = np.zeros((rounds, n_models, n_models))
    for stratum in strata:
        if not stratum.groups:
            continue
        table = _pair_table(stratum)
        pairs, sizes = table.pairs, table.sizes
        group_of, column_of, value = table.group_of, table.column_of, table.value
        units = int(sizes.sum())
        n_groups = len(stratum.groups)
        dense = None
        if n_groups * len(pairs) <= dense_limit:
            dense = np.zeros((n_groups, len(pairs)))
            dense[group_of, column_of] = value
        else:  # entries sorted by column: each column's sum is one reduceat segment
            order = np.argsort(column_of, kind="stable")
            group_of, column_of, value = group_of[order], column_of[order], value[order]
            starts = np.flatnonzero(np.r_[True, column_of[1:] != column_of[:-1]])
        per_pair = np.zeros((rounds, len(pairs)))
        # Rounds in chunks of ~64 MB of draws: few, large products (many small ones are slow
        # with a multi-threaded BLAS on a busy machine).
        step = max(1, 8_000_000 // max(n_groups if dense is not None else len(group_of), 1))
        for first in range(0, rounds, step):
            count = min(step, rounds - first)
            draws = rng.multinomial(units, sizes / units, size=count).astype(float)  # (count, groups)
            if dense is not None:
                per_pair[first : first + count] = draws @ dense
            else:
                per_pair[first : first + count, column_of[starts]] = np.add.reduceat(
                    draws[:, group_of] * value, starts, axis=1
                )
        winners = np.array([i for i, _ in pairs])
        losers = np.array([j for _, j in pairs])
        total[:, winners, losers] += per_pair
    return total


# ----------------------------------------------------------------------- ratings


def _neg_hessian(wins: np.ndarray, theta: np.ndarray, prior_games: float) -> np.ndarray:
    """The negative Hessian of the log-posterior at θ: the weighted graph Laplacian plus the prior's curvature."""
    m = len(theta)
    games = wins + wins.T
    s = _sigmoid(theta[:, None] - theta[None, :])
    curvature = games * s * (1 - s)
    neg_hessian = -curvature
    s_ref = _sigmoid(theta)
    neg_hessian[np.arange(m), np.arange(m)] = curvature.sum(axis=1) + prior_games * s_ref * (1 - s_ref)
    return neg_hessian


def _elo_sd(cov: np.ndarray) -> np.ndarray:
    """The sd of each θ_i − mean θ on the Elo-style scale, from θ's covariance."""
    m = len(cov)
    centre = np.eye(m) - 1.0 / m
    return ELO_FACTOR * np.sqrt(np.clip(np.diag(centre @ cov @ centre.T), 0.0, None))


def posterior_sd(wins: np.ndarray, prior_games: float = PRIOR_GAMES) -> np.ndarray:
    """Each rating's standard deviation on the Elo-style scale from the curvature of the log-posterior
    at its mode (Laplace): the inverse negative Hessian, for θ_i − mean θ. Finite and positive
    whatever the data, because the virtual games make the Hessian negative definite."""
    theta = fit_log_strengths(wins, prior_games=prior_games)
    return _elo_sd(np.linalg.inv(_neg_hessian(wins, theta, prior_games)))


def cluster_robust_sd(
    strata: Sequence[Stratum], n_models: int, prior_games: float = PRIOR_GAMES
) -> tuple[np.ndarray, int]:
    """Each rating's cluster-robust (sandwich) standard deviation on the Elo-style scale, with its
    degrees of freedom: H⁻¹ B H⁻¹, H the negative Hessian of the log-posterior at its mode and B
    the spread of the units' scores (a unit — a session, a judged pair — is a cluster: its pairs
    share the answers they compare), B = Σ_strata G/(G − 1) Σ_units (g_u − ḡ)(g_u − ḡ)ᵀ over the
    G units of each stratum (CR1; Cameron & Miller 2015). Degrees of freedom: Σ (G − 1), for
    Student's t. A stratum of one unit has no spread to measure and adds none.
    docs/methods.md, "Bootstrap intervals"."""
    wins = win_matrix(strata, n_models)
    theta = fit_log_strengths(wins, prior_games=prior_games)
    s = _sigmoid(theta[:, None] - theta[None, :])
    spread = np.zeros((n_models, n_models))
    df = 0
    for stratum in strata:
        units = stratum.units
        if units < 2:
            continue
        table = _pair_table(stratum)
        winners = np.array([i for i, _ in table.pairs])
        losers = np.array([j for _, j in table.pairs])
        # a win of i over j adds (1 − σ(θ_i − θ_j)) to i's score and takes it from j's; each unit's
        # score is sparse (the models it compared), so B is summed over the pairs of its nonzeros
        push = table.value * (1 - s[winners[table.column_of], losers[table.column_of]])
        keys = np.r_[table.group_of * n_models + winners[table.column_of],
                     table.group_of * n_models + losers[table.column_of]]  # fmt: skip
        cells, where = np.unique(keys, return_inverse=True)  # sorted: by group, then model
        score = np.bincount(where, weights=np.r_[push, -push])
        group, model = cells // n_models, cells % n_models
        weight = table.sizes[group]
        mean = np.bincount(model, weights=weight * score, minlength=n_models) / units
        count = np.bincount(group, minlength=len(stratum.groups))[group]  # nonzeros of each cell's unit
        left = np.repeat(np.arange(len(cells)), count)
        first = np.searchsorted(group, group)  # the unit's first cell
        right = first[left] + np.arange(len(left)) - np.repeat(np.cumsum(count) - count, count)
        products = np.bincount(model[left] * n_models + model[right],
                               weights=weight[left] * score[left] * score[right], minlength=n_models * n_models)
        spread += units / (units - 1) * (products.reshape(n_models, n_models) - units * np.outer(mean, mean))
        df += units - 1
    inverse = np.linalg.inv(_neg_hessian(wins, theta, prior_games))
    return _elo_sd(inverse @ spread @ inverse), df


@dataclass(frozen=True)
class Rating:
    index: int
    rating: float
    ci: tuple[float, float] | None
    comparisons: float
    wins: float

    @property
    def win_rate(self) -> float | None:
        return self.wins / self.comparisons if self.comparisons else None


def rate(
    strata: Sequence[Stratum],
    n_models: int,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    prior_games: float = PRIOR_GAMES,
    level: float = CI_LEVEL,
) -> list[Rating]:
    """Elo-style ratings of models ``0..n_models-1``, best first, with percentile intervals
    from ``bootstrap`` rounds (none when 0). Same data and seed, same numbers."""
    if n_models == 0:
        return []
    wins = win_matrix(strata, n_models)
    point = elo_scale(fit_log_strengths(wins, prior_games=prior_games))
    intervals: np.ndarray | None = None
    if bootstrap > 0:
        rng = np.random.default_rng(seed)
        rounds = elo_scale(fit_log_strengths(bootstrap_wins(strata, n_models, bootstrap, rng), prior_games=prior_games))
        tail = (1 - level) / 2 * 100
        intervals = np.percentile(rounds, [tail, 100 - tail], axis=0).T
        if prior_games > 0:  # the hull with the curvature interval (docs/methods.md, "Bootstrap intervals")
            half = NormalDist().inv_cdf(1 - (1 - level) / 2) * posterior_sd(wins, prior_games)
            robust, df = cluster_robust_sd(strata, n_models, prior_games)
            if df > 0:  # ... and the cluster-robust one: a session's ballots are not independent
                half = np.maximum(half, t_quantile_two_sided(1 - level, df) * robust)
            intervals = np.column_stack([np.minimum(intervals[:, 0], point - half),
                                         np.maximum(intervals[:, 1], point + half)])
    games = (wins + wins.T).sum(axis=1)
    won = wins.sum(axis=1)
    out = [
        Rating(
            index=i,
            rating=float(point[i]),
            ci=None if intervals is None else (float(intervals[i, 0]), float(intervals[i, 1])),
            comparisons=float(games[i]),
            wins=float(won[i]),
        )
        for i in range(n_models)
    ]
    return sorted(out, key=lambda r: (-r.rating, r.index))
