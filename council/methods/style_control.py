"""Bradley–Terry with style covariates: Chatbot Arena's style control (pure, numpy).

Each judgment compares answer A (model a) with answer B (model b); y = P(B judged better)
(1, 0, or ½ for a tie; a judge's probability when it gives one). The model is

    P(B better) = σ(θ_b − θ_a + Σ_k γ_k · z_k),

z_k the standardised style difference of the pair: for a style count s (characters, markdown
headers, lists, bold spans), the normalised difference (s_B − s_A) / (s_B + s_A) (0 when both
are 0), then centred and divided by its standard deviation over the judgments, as Chatbot
Arena does ("Does style matter?", LMSYS, August 2024). γ_k is the judge's taste for that style
(γ_length > 0: longer answers win more often at equal strength); θ are the ratings with the
style held equal, read on the leaderboard's Elo-style scale.

The coefficients γ are fitted with the ratings free, by the likelihood penalised with Jeffreys'
prior (Firth): the leaderboard's prior on the ratings (``prior_games`` virtual tied games per
model against a fixed reference, :mod:`council.methods.bradley_terry`) shrinks them toward
equal, and where better models write longer that shrinkage leaves part of their quality for γ to
take. The ratings are then the leaderboard's posterior mode with γ held at that estimate.

What the judgments cannot determine is said, not printed as a number: a covariate constant,
fixed by which models are compared or collinear with another (:func:`not_estimable`); and
judgments separated by the styles, which the longer (or more formatted) answer always wins, so
that γ runs off to infinity (:func:`separation`). Ratings then rest on the judgments the
separation leaves, and models with none are flagged.

Coefficients get Wald intervals (the Firth fit's information); ratings get the hull of
percentile intervals from refits on judgments resampled with replacement and the curvature
interval of the fit, as the plain leaderboard's. docs/methods.md, "Style control".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from council.methods import graphs
from council.methods.bradley_terry import CI_LEVEL, ELO_FACTOR, PRIOR_GAMES, elo_scale
from council.methods.logistic import Term, fit_firth, fit_logistic, information, symmetric_inverse, weak_directions
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
#: A covariate with less than this share of its variation within the model pairs is called
#: "almost fixed by which models are compared" when the judgments are separated.
CONFOUNDED = 0.1
#: A direction's entry above this (the direction of unit length) involves that covariate.
INVOLVED = 1e-3


@dataclass(frozen=True)
class Coefficient:
    """A covariate's coefficient with its 95 % Wald interval, or, when the judgments cannot
    determine it, None everywhere, ``identified`` False and ``not_estimable`` saying why."""

    estimate: float | None
    ci: tuple[float, float] | None
    standard_error: float | None
    not_estimable: str | None = None
    #: How ``ci`` was made: a Wald interval from the fit's observed information (its coverage is
    #: checked by a seeded simulation, docs/methods.md, "Style control").
    ci_method: str = "wald"

    @property
    def identified(self) -> bool:
        return self.not_estimable is None


@dataclass(frozen=True)
class _OnRatings:
    """Each covariate regressed on the rating terms θ_b − θ_a and a constant: its sum of squares,
    what is left of it (R = Z'Z − C' M⁺ C), and the regression's rating coefficients."""

    squares: np.ndarray
    left: np.ndarray
    ratings: np.ndarray  # (n_models, k)


def _on_ratings(a: np.ndarray, b: np.ndarray, covariates: np.ndarray, n_models: int) -> _OnRatings:
    """Least squares on the Gram matrix of the design, formed with ``bincount`` (the model block is
    the comparison graph's Laplacian), one pseudo-inverse for every covariate."""
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
    solved = np.linalg.pinv(gram_models, hermitian=True) @ cross
    squares = covariates.T @ covariates
    return _OnRatings(squares, squares - cross.T @ solved, solved[:n_models])


def not_estimable(
    a: np.ndarray, b: np.ndarray, covariates: np.ndarray, names: Sequence[str], n_models: int
) -> dict[str, str]:
    """The covariates whose coefficient the judgments cannot determine, with the reason: constant
    over the judgments, fixed by which models are compared (in the span of the rating terms
    θ_b − θ_a), or collinear with the covariates before it: what is left of each after the rating
    terms and a constant (:func:`_on_ratings`), then Schur complements for the covariates kept
    before. docs/methods.md, "Style control"."""
    rows = len(covariates)
    fit = _on_ratings(a, b, covariates, n_models)
    squares, left = fit.squares, fit.left
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


def confounded_models(a: np.ndarray, b: np.ndarray, covariate: np.ndarray, n_models: int) -> list[int]:
    """The models whose rating a covariate fixed by the model pairs moves with: the difference is
    θ_b − θ_a (+ a constant) for some t, and the ratings with it held equal cannot be told apart
    along t; the models off the level most models share (t's median) are the ones affected."""
    t = _on_ratings(a, b, covariate[:, None], n_models).ratings[:, 0]
    present = np.union1d(a, b)
    off = np.abs(t - np.median(t[present])) > 1e-6 * max(np.abs(t).max(initial=0.0), 1e-300)
    return [int(i) for i in present if off[i]]


def _terms(a: np.ndarray, b: np.ndarray, covariates: np.ndarray, n_models: int, virtual: bool = True) -> list[Term]:
    """The design: rating terms (+1 for B, −1 for A), then the covariates; with ``virtual``, one
    more row per model after the judgments: its tie against the fixed reference (θ = 0)."""
    rows, k = covariates.shape
    if not virtual:
        return [Term(b, 1.0), Term(a, -1.0), *(Term(n_models + j, covariates[:, j]) for j in range(k))]
    models = np.arange(n_models)
    return [
        Term(np.r_[b, models], 1.0),
        Term(np.r_[a, models], np.r_[np.full(rows, -1.0), np.zeros(n_models)]),
        *(Term(n_models + j, np.r_[covariates[:, j], np.zeros(n_models)]) for j in range(k)),
    ]


def _with_prior(y: np.ndarray, weight: np.ndarray, n_models: int, prior_games: float) -> tuple[np.ndarray, np.ndarray]:
    """Labels and weights of the judgments, then of the virtual ties (weight ``prior_games``)."""
    return np.r_[y, np.full(n_models, 0.5)], np.r_[weight, np.full(n_models, prior_games)]


def _ratings_fit(
    a: np.ndarray,
    b: np.ndarray,
    y: np.ndarray,
    offset: np.ndarray,
    n_models: int,
    weight: np.ndarray,
    prior_games: float,
    start: np.ndarray | None = None,
):
    """The leaderboard's posterior mode of θ with the styles' part of η held at ``offset``."""
    target, w = _with_prior(y, weight, n_models, prior_games)
    terms = _terms(a, b, np.zeros((len(y), 0)), n_models)
    return fit_logistic(terms, target, n_models, weight=w, start=start, offset=np.r_[offset, np.zeros(n_models)])


def _null_space(a: np.ndarray, b: np.ndarray, weight: np.ndarray, n_models: int, k: int) -> np.ndarray:
    """The directions the judgments leave undetermined without a prior: a common shift of the
    ratings of each group of models compared with each other (a model never compared is its own)."""
    pairs = np.unique(a[weight > 0] * n_models + b[weight > 0])
    parts = graphs.components(n_models, zip((pairs // n_models).tolist(), (pairs % n_models).tolist(), strict=True))
    out = np.zeros((n_models + k, len(parts)))
    for c, part in enumerate(parts):
        out[part, c] = 1.0 / np.sqrt(len(part))
    return out


#: Steps of the Firth fit in a bootstrap round, from the full data's estimate: one step from a
#: consistent start is as good as the full fit to first order (a one-step bootstrap).
ROUND_STEPS = 2


def _firth(a, b, y, covariates, n_models, weight, start=None, steps=None):
    """γ (and θ, free) by the likelihood penalised with Jeffreys' prior, no virtual games."""
    k = covariates.shape[1]
    terms = _terms(a, b, covariates, n_models, virtual=False)
    null = _null_space(a, b, weight, n_models, k)
    more = {} if steps is None else {"max_iterations": steps}
    return fit_firth(terms, y, n_models + k, weight=weight, null_space=null, start=start, **more)


@dataclass(frozen=True)
class Separation:
    """Covariates the judgments separate (reason each), the judgments they decide, and what
    separates them, in words."""

    reasons: dict[str, str]
    decided: np.ndarray  # bool per judgment
    what: str = ""


def separation(
    a: np.ndarray,
    b: np.ndarray,
    y: np.ndarray,
    covariates: np.ndarray,
    names: Sequence[str],
    n_models: int,
    prior_games: float = PRIOR_GAMES,
) -> Separation:
    """The covariates the judgments (quasi-)separate: the posterior of the model with the ratings'
    prior, the covariates free and a free constant (the covariates are centred, so "the longer
    answer always wins" is a threshold at the mean difference, not 0), fitted by Newton's method,
    and its information compared with the design's (:func:`~council.methods.logistic.weak_directions`):
    along a direction of separation the fit's probabilities go to 0 or 1 and its information to
    nothing. A covariate with an entry in such a direction cannot be determined; the judgments
    the direction moves (a nonzero entry of Xd) are decided by it with certainty.
    docs/methods.md, "Style control"."""
    rows, k = covariates.shape
    none = Separation({}, np.zeros(rows, dtype=bool))
    if k == 0 or rows == 0:
        return none
    if (y == 1).all() or (y == 0).all():  # the position alone: nothing else can be told apart
        side = "B" if y[0] == 1 else "A"
        why = (f"not identified: every judgment went to answer {side}: the answers' position decides them all, "
               "so no style effect can be told from it")  # fmt: skip
        return Separation(dict.fromkeys(names, why), np.ones(rows, dtype=bool), "the answers' position")
    with_constant = np.column_stack([covariates, np.ones(rows)])
    terms = _terms(a, b, with_constant, n_models)
    target, w = _with_prior(y, np.ones(rows), n_models, prior_games)
    n = n_models + k + 1
    fit = fit_logistic(terms, target, n, weight=w)
    seen = information(terms, fit.coef, rows + n_models, n, weight=w)
    most = information(terms, fit.coef, rows + n_models, n, weight=w, at_half=True)
    _, weak = weak_directions(seen, most, range(n_models, n))
    if not weak.shape[1]:
        return none
    share = np.linalg.norm(np.linalg.qr(weak)[0], axis=1)  # each covariate's part in those directions
    involved = [j for j in range(k) if share[j] > INVOLVED]
    if not involved:
        return none
    what = " and ".join(names[j] for j in involved) + " difference"
    moved = np.abs(with_constant @ weak)
    decided = (moved > 1e-6 * max(moved.max(initial=0.0), 1e-300)).any(axis=1)
    regressed = _on_ratings(a, b, covariates, n_models)
    reasons = {}
    for j in involved:
        name = names[j]
        within = float(regressed.left[j, j] / regressed.squares[j, j])
        also = (f"; and the {name} difference is almost fixed by which models are compared "
                f"(only {within:.1%} of its variation lies within the model pairs)"
                if within < CONFOUNDED else "")  # fmt: skip
        reasons[name] = (f"not identified: the judgments are separated: the {what} decides {int(decided.sum())} "
                         f"of {rows} judgments with certainty (the side it favours always won), so the "
                         f"coefficient runs off to infinity{also}")  # fmt: skip
    return Separation(reasons, decided, "the " + what)


@dataclass(frozen=True)
class StyleControlled:
    #: Elo-style ratings with the style held equal, per model index.
    ratings: np.ndarray
    #: Percentile bootstrap intervals per model (rows), or None without bootstrap.
    intervals: np.ndarray | None
    coefficients: dict[str, Coefficient]
    #: Models (index) whose rating with the style held equal the judgments cannot determine, and why.
    not_identified: dict[int, str] = field(default_factory=dict)


def _unconnected(a: np.ndarray, b: np.ndarray, n_models: int, present: np.ndarray) -> list[int]:
    """The models of ``present`` outside the largest group that the judgments (a, b) connect."""
    parts = graphs.components(n_models, zip(a.tolist(), b.tolist(), strict=True))
    games = [int(np.isin(a, part).sum()) for part in parts]
    main = set(parts[int(np.argmax(games))]) if len(a) else set()
    return [int(i) for i in present if int(i) not in main]


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
    present = np.union1d(a, b)
    # Covariates the judgments cannot determine are left out of the fit and reported as such:
    # kept in, they share one effect arbitrarily or get a singular information's interval.
    dropped = not_estimable(a, b, covariates, names, n_models)
    flagged: dict[int, str] = {}
    for j, name in enumerate(names):
        if "fixed by which models are compared" in dropped.get(name, ""):
            for i in confounded_models(a, b, covariates[:, j], n_models):
                flagged.setdefault(i, f"not identified: its comparisons fix the {name} difference, so its rating "
                                      f"with {name} held equal cannot be told from the {name} effect")  # fmt: skip
    kept = [j for j, name in enumerate(names) if name not in dropped]
    split = separation(a, b, y, covariates[:, kept], [names[j] for j in kept], n_models, prior_games)
    dropped |= split.reasons
    use = ~split.decided
    a, b, y, covariates = a[use], b[use], y[use], covariates[use]
    if split.reasons:
        for i in _unconnected(a, b, n_models, present):
            flagged.setdefault(i, f"not identified: {split.what} decides every judgment that would place it among "
                                  "the other models (separation); its rating with the style held equal rests on "
                                  "the prior")  # fmt: skip
        kept = [j for j in kept if names[j] not in dropped]
        left = not_estimable(a, b, covariates[:, kept], [names[j] for j in kept], n_models)
        dropped |= {name: f"{why} among the {len(y)} judgments the separation leaves" for name, why in left.items()}
    kept = [j for j in kept if names[j] not in dropped]
    z = covariates[:, kept]
    k = len(kept)
    ones = np.ones(len(y))
    gamma = np.zeros(k)
    if k:
        firth = _firth(a, b, y, z, n_models, ones)
        gamma = firth.coef[n_models:]
        se = _standard_errors(firth.information, _null_space(a, b, ones, n_models, k))[n_models:]
    fit = _ratings_fit(a, b, y, z @ gamma, n_models, ones, prior_games)
    coefficients = {name: Coefficient(None, None, None, dropped[name]) for name in names if name in dropped}
    for col, j in enumerate(kept):
        estimate, error = float(gamma[col]), float(se[col])
        coefficients[names[j]] = Coefficient(estimate, (estimate - Z_95 * error, estimate + Z_95 * error), error)
    coefficients = {name: coefficients[name] for name in names}
    point = elo_scale(fit.coef)
    intervals = None
    if bootstrap > 0:
        rng = np.random.default_rng(seed)
        rounds = np.tile(point, (bootstrap, 1))
        for r in range(bootstrap if len(y) else 0):
            draw = rng.multinomial(len(y), np.full(len(y), 1.0 / len(y))).astype(float)
            g = _firth(a, b, y, z, n_models, draw, firth.coef, ROUND_STEPS).coef[n_models:] if k else gamma
            rounds[r] = elo_scale(_ratings_fit(a, b, y, z @ g, n_models, draw, prior_games, fit.coef).coef)
        tail = (1 - level) / 2 * 100
        intervals = np.percentile(rounds, [tail, 100 - tail], axis=0).T
        # The hull with the curvature interval, as the plain leaderboard's (docs/methods.md,
        # "Leaderboard"): with few games every resample can give the same fit, a zero-width interval.
        # Its covariance is the joint posterior's (γ free), so γ's uncertainty widens it.
        target, w = _with_prior(y, ones, n_models, prior_games)
        joint = information(_terms(a, b, z, n_models), np.r_[fit.coef, gamma], len(target), n_models + k, weight=w)
        centre = np.eye(n_models) - 1.0 / n_models
        cov = centre @ np.linalg.pinv(joint, hermitian=True)[:n_models, :n_models] @ centre.T
        half = NormalDist().inv_cdf(1 - (1 - level) / 2) * ELO_FACTOR * np.sqrt(np.clip(np.diag(cov), 0.0, None))
        intervals = np.column_stack(
            [np.minimum(intervals[:, 0], point - half), np.maximum(intervals[:, 1], point + half)]
        )
    return StyleControlled(ratings=point, intervals=intervals, coefficients=coefficients,
                           not_identified=dict(sorted(flagged.items())))  # fmt: skip


def _standard_errors(info: np.ndarray, null: np.ndarray) -> np.ndarray:
    """Wald standard errors from the information, inverted with the undetermined common shifts
    filled in (which leaves the covariates' block unchanged)."""
    return np.sqrt(np.clip(np.diag(symmetric_inverse(info + null @ null.T)), 0.0, None))
