"""Bradley–Terry with style covariates: Chatbot Arena's style control (pure, numpy).

Each judgment compares answer A (model a) with answer B (model b); y = P(B judged better)
(1, 0, or ½ for a tie; a judge's probability when it gives one). The model is

    P(B better) = σ(θ_b − θ_a + Σ_k γ_k · z_k),

z_k the standardised style difference of the pair: for a style count s (characters, markdown
headers, lists, bold spans), the normalised difference (s_B − s_A) / (s_B + s_A) (0 when both
are 0), then centred and divided by its standard deviation over the judgments, as Chatbot
Arena does ("Does style matter?", LMSYS, August 2024). γ_k is the judge's taste for that style
(γ_length > 0: longer answers win more often at equal strength); θ are the ratings with the
style held equal, read on the leaderboard's Elo-style scale. As in the plain leaderboard every
model also plays ``prior_games`` virtual tied games against a fixed reference (θ = 0), which
keeps a model that never won finite (:mod:`council.methods.bradley_terry`).

Coefficients get Wald intervals (the fit's observed information); ratings get the hull of
percentile intervals from refits on judgments resampled with replacement and the curvature
interval of the fit, as the plain leaderboard's. docs/methods.md, "Style control".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from council.methods.bradley_terry import CI_LEVEL, ELO_FACTOR, PRIOR_GAMES, elo_scale
from council.methods.logistic import Term, fit_logistic
from council.methods.style_counts import markdown_counts  # noqa: F401  (found here too)

Z_95 = 1.959963984540054  # the standard normal's 97.5 % quantile

CONTROLS = ("length", "markdown")


def style_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(b − a) / (b + a), 0 where both are 0, standardised over the judgments (mean 0, sd 1)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    total = a + b
    z = np.divide(b - a, total, out=np.zeros_like(total), where=total > 0)
    sd = z.std()
    return (z - z.mean()) / sd if sd > 0 else z - z.mean()


#: A covariate whose part left after the ratings and the covariates before it is below this share
#: of its own sum of squares is collinear with them: its coefficient cannot be estimated.
COLLINEAR = 1e-9


@dataclass(frozen=True)
class Coefficient:
    """A covariate's coefficient with its 95 % Wald interval, or, when the judgments cannot
    determine it, None everywhere and ``not_estimable`` saying why."""

    estimate: float | None
    ci: tuple[float, float] | None
    standard_error: float | None
    not_estimable: str | None = None
    #: How ``ci`` was made: a Wald interval from the fit's observed information (its coverage is
    #: checked by a seeded simulation, docs/methods.md, "Style control").
    ci_method: str = "wald"


def not_estimable(
    a: np.ndarray, b: np.ndarray, covariates: np.ndarray, names: Sequence[str], n_models: int
) -> dict[str, str]:
    """The covariates whose coefficient the judgments cannot determine, with the reason: constant
    over the judgments, fixed by which models are compared (in the span of the rating terms
    θ_b − θ_a), or collinear with the covariates before it. Least squares on the Gram matrix of
    the design, formed with ``bincount`` (the model block is the comparison graph's Laplacian), and
    Schur complements for the covariates kept before.
    docs/methods.md, "Style control"."""
    rows, k = covariates.shape
    # The rating terms, plus a constant: the covariates are centred, and a centred difference
    # fixed by the models would otherwise be "estimated" from how often each model was answer B.
    m = n_models + 1
    gram_models = np.zeros((m, m))
    np.add.at(gram_models, (a, a), 1.0)
    np.add.at(gram_models, (b, b), 1.0)
    np.add.at(gram_models, (a, b), -1.0)
    np.add.at(gram_models, (b, a), -1.0)
    balance = np.bincount(b, minlength=n_models) - np.bincount(a, minlength=n_models)
    gram_models[:n_models, n_models] = gram_models[n_models, :n_models] = balance
    gram_models[n_models, n_models] = rows
    cross = np.zeros((m, k))
    for j in range(k):
        cross[:n_models, j] = np.bincount(b, covariates[:, j], n_models) - np.bincount(a, covariates[:, j], n_models)
        cross[n_models, j] = covariates[:, j].sum()
    squares = covariates.T @ covariates
    # What is left of each covariate once the rating terms and the constant are projected out:
    # R = Z'Z − C' M⁺ C, one pseudo-inverse (symmetric eigendecomposition) for every covariate.
    left = squares - cross.T @ np.linalg.pinv(gram_models, hermitian=True) @ cross
    out: dict[str, str] = {}
    kept: list[int] = []
    for j, name in enumerate(names):
        total = float(squares[j, j])
        rest = left[j, j]  # then less what the covariates kept so far explain (a Schur complement)
        if kept:
            rest -= left[j, kept] @ np.linalg.solve(left[np.ix_(kept, kept)], left[kept, j])
        if total <= 1e-12 * max(rows, 1):
            out[name] = f"not estimable: constant (every judgment has the same {name} difference)"
        elif left[j, j] <= COLLINEAR * total:
            out[name] = (f"not estimable: the {name} difference is fixed by which models are compared "
                         "(collinear with the ratings)")  # fmt: skip
        elif rest <= COLLINEAR * total:
            out[name] = f"not estimable: collinear with {' and '.join(names[i] for i in kept)}"
        else:
            kept.append(j)
    return out


@dataclass(frozen=True)
class StyleControlled:
    #: Elo-style ratings with the style held equal, per model index.
    ratings: np.ndarray
    #: Percentile bootstrap intervals per model (rows), or None without bootstrap.
    intervals: np.ndarray | None
    coefficients: dict[str, Coefficient]


def _fit(
    a: np.ndarray,
    b: np.ndarray,
    y: np.ndarray,
    covariates: np.ndarray,
    n_models: int,
    weight: np.ndarray,
    prior_games: float,
    start: np.ndarray | None = None,
):
    rows, k = covariates.shape
    models = np.arange(n_models)
    # real judgments, then one virtual row per model: a tie against the reference, weight prior_games
    terms = [
        Term(np.r_[b, models], 1.0),
        Term(np.r_[a, models], np.r_[np.full(rows, -1.0), np.zeros(n_models)]),
        *(Term(n_models + j, np.r_[covariates[:, j], np.zeros(n_models)]) for j in range(k)),
    ]
    target = np.r_[y, np.full(n_models, 0.5)]
    w = np.r_[weight, np.full(n_models, prior_games)]
    return fit_logistic(terms, target, n_models + k, weight=w, start=start)


def style_controlled_ratings(
    a: np.ndarray,
    b: np.ndarray,
    y: np.ndarray,
    covariates: np.ndarray,
    names: Sequence[str],
    n_models: int,
    *,
    bootstrap: int = 0,
    seed: int = 0,
    prior_games: float = PRIOR_GAMES,
    level: float = CI_LEVEL,
) -> StyleControlled:
    """Ratings of models ``0..n_models−1`` from judgments (a, b, y) with style ``covariates``
    (rows × len(names), already standardised), and each covariate's coefficient."""
    a, b, y = np.asarray(a), np.asarray(b), np.asarray(y, dtype=float)
    covariates = np.asarray(covariates, dtype=float).reshape(len(y), len(names))
    # Covariates the judgments cannot determine are left out of the fit and reported as such:
    # kept in, they share one effect arbitrarily or get a singular information's interval.
    dropped = not_estimable(a, b, covariates, names, n_models)
    kept = [j for j, name in enumerate(names) if name not in dropped]
    covariates = covariates[:, kept]
    fit = _fit(a, b, y, covariates, n_models, np.ones(len(y)), prior_games)
    se = fit.standard_errors()
    z = Z_95  # coefficients: 95 % Wald intervals (``level`` is the ratings' bootstrap level)
    coefficients = {name: Coefficient(None, None, None, dropped[name]) for name in names if name in dropped}
    for col, j in enumerate(kept):
        estimate, error = float(fit.coef[n_models + col]), float(se[n_models + col])
        coefficients[names[j]] = Coefficient(estimate, (estimate - z * error, estimate + z * error), error)
    coefficients = {name: coefficients[name] for name in names}
    intervals = None
    if bootstrap > 0 and len(y):
        rng = np.random.default_rng(seed)
        rounds = np.empty((bootstrap, n_models))
        for r in range(bootstrap):
            draw = rng.multinomial(len(y), np.full(len(y), 1.0 / len(y))).astype(float)
            rounds[r] = elo_scale(_fit(a, b, y, covariates, n_models, draw, prior_games, fit.coef).coef[:n_models])
        tail = (1 - level) / 2 * 100
        intervals = np.percentile(rounds, [tail, 100 - tail], axis=0).T
        # The hull with the curvature interval, as the plain leaderboard's (docs/methods.md,
        # "Leaderboard"): with few games every resample can give the same fit, a zero-width interval.
        centre = np.eye(n_models) - 1.0 / n_models
        cov = centre @ fit.covariance()[:n_models, :n_models] @ centre.T
        half = NormalDist().inv_cdf(1 - (1 - level) / 2) * ELO_FACTOR * np.sqrt(np.clip(np.diag(cov), 0.0, None))
        point = elo_scale(fit.coef[:n_models])
        intervals = np.column_stack(
            [np.minimum(intervals[:, 0], point - half), np.maximum(intervals[:, 1], point + half)]
        )
    return StyleControlled(ratings=elo_scale(fit.coef[:n_models]), intervals=intervals, coefficients=coefficients)
