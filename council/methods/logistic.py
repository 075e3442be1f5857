"""Logistic regression with soft labels on a sparse design, by Newton's method (pure, numpy).

The controlled ratings (docs/methods.md, "Style control" and "Length-controlled win rate")
are logistic regressions whose design rows hold a few nonzeros each: a model's indicator
(+1 / −1 for the two sides of a comparison), an instruction's indicator, a handful of
covariates. A design is therefore a list of :class:`Term`: each term puts one value in one
column of every row. X'WX is then a sum of one ``bincount`` per pair of terms, so a fit with
a thousand columns over fifty thousand rows never builds the dense rows × columns matrix.

Labels are probabilities in [0, 1] (a judge's preference, ½ for a tie): the log-likelihood
Σ w·(y log p + (1 − y) log(1 − p)) is the binomial GLM's with a fractional response (what
statsmodels' ``GLM(family=Binomial())`` fits), strictly concave in the coefficients once the
design has full rank. ``ridge`` adds −½ λ_k β_k² per column (a Gaussian prior) where a
column could run off to infinity (a model that never won, an instruction every model lost).
The covariance is the inverse of the negative Hessian at the optimum (Wald intervals).

:func:`fit_firth` maximises the likelihood penalised by Jeffreys' prior (Firth 1993): finite
wherever the design has full rank, with the O(1/n) bias of maximum likelihood removed — the
estimate for few games per column. :func:`weak_directions` finds what a fit cannot determine:
the directions along which the data's information vanishes (separation: the likelihood keeps
rising toward infinity there; Geyer 2009, Eck & Geyer 2021). docs/methods.md, "Style control".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_ITERATIONS = 100
TOLERANCE = 1e-10
#: A direction along which the fit's information is below this share of what the same design
#: would give with every probability ½ is one the data do not determine (docs/methods.md,
#: "Style control"): past separation the share falls as e^(−margin), far below it within the
#: iterations a fit takes; a determined direction keeps ≥ 4 p (1 − p) of it.
WEAK = 1e-6
#: Design directions below this share of the largest (column-scaled) are collinear.
COLLINEAR = 1e-9


@dataclass(frozen=True)
class Term:
    """One nonzero per row: ``value[r]`` in column ``column[r]`` (either may be a scalar)."""

    column: np.ndarray | int
    value: np.ndarray | float = 1.0


@dataclass(frozen=True)
class LogisticFit:
    coef: np.ndarray
    #: Negative Hessian of the penalised log-likelihood at ``coef`` (the observed information).
    information: np.ndarray
    iterations: int
    #: The last Newton step was below the tolerance (False: the iterations ran out, e.g. a
    #: coefficient running off to infinity under separation).
    converged: bool = True

    def covariance(self) -> np.ndarray:
        """Its inverse: the coefficients' covariance (pseudo-inverse where the design is rank-deficient)."""
        return np.linalg.pinv(self.information)

    def standard_errors(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.covariance()), 0.0, None))


def _columns(terms: Sequence[Term], rows: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [
        (np.broadcast_to(np.asarray(t.column, dtype=np.int64), rows), np.broadcast_to(np.asarray(t.value, float), rows))
        for t in terms
    ]


def linear_predictor(
    terms: Sequence[Term], coef: np.ndarray, rows: int, offset: np.ndarray | None = None
) -> np.ndarray:
    """η = Xβ (+ ``offset``, a fixed part of η) for the design ``terms``."""
    return _eta(_columns(terms, rows), coef, rows, offset)


def _eta(cols: Sequence[tuple[np.ndarray, np.ndarray]], coef: np.ndarray, rows: int, offset: np.ndarray | None = None):
    eta = np.zeros(rows) if offset is None else np.array(offset, dtype=float)
    for column, value in cols:
        eta += coef[column] * value
    return eta


def information(
    terms: Sequence[Term],
    coef: np.ndarray,
    rows: int,
    n_columns: int,
    *,
    weight: np.ndarray | None = None,
    ridge: np.ndarray | float = 0.0,
    offset: np.ndarray | None = None,
    at_half: bool = False,
) -> np.ndarray:
    """X'WX + diag(λ) at ``coef``: the observed information of the (penalised) fit there; with
    ``at_half``, as if every probability were ½ (W = weight / 4): the most the design can give."""
    w = np.ones(rows) if weight is None else np.asarray(weight, dtype=float)
    if at_half:
        curvature = w / 4
    else:
        p = sigmoid(linear_predictor(terms, coef, rows, offset))
        curvature = w * p * (1 - p)
    lam = np.broadcast_to(np.asarray(ridge, dtype=float), n_columns)
    return _information(_columns(terms, rows), curvature, lam, n_columns)


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def fit_logistic(
    terms: Sequence[Term],
    y: np.ndarray,
    n_columns: int,
    *,
    weight: np.ndarray | None = None,
    ridge: np.ndarray | float = 0.0,
    start: np.ndarray | None = None,
    tolerance: float = TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
    groups_from: int | None = None,
    offset: np.ndarray | None = None,
) -> LogisticFit:
    """The penalised maximum-likelihood coefficients (length ``n_columns``) of P(y = 1) = σ(Xβ + offset).

    ``start``: where Newton's method begins (zeros by default; a bootstrap round starts from the
    full-data fit, a few steps away).

    ``groups_from``: the columns from there on are one term's indicator, one of them a row with
    the value 1 (an instruction's), each with a positive ridge. Their block of the Hessian is then
    diagonal, and each Newton step is solved through the Schur complement of that block: memory
    and time linear in their number, where the whole Hessian is quadratic (50,000 instructions:
    20 GB). The fit's ``information`` is then the other columns' own (their covariance is its
    inverse, the groups' coefficients profiled out)."""
    y = np.asarray(y, dtype=float)
    rows = len(y)
    w = np.ones(rows) if weight is None else np.asarray(weight, dtype=float)
    lam = np.broadcast_to(np.asarray(ridge, dtype=float), n_columns)
    cols = _columns(terms, rows)
    beta = np.zeros(n_columns) if start is None else np.array(start, dtype=float)
    if groups_from is not None:
        if not (lam[groups_from:] > 0).all():
            raise ValueError("the group columns need a positive ridge")
        dense = [(c, v) for c, v in cols if c.max(initial=0) < groups_from]
        grouped = [(c, v) for c, v in cols if c.max(initial=0) >= groups_from]
        if len(grouped) != 1 or grouped[0][0].min(initial=groups_from) < groups_from or (grouped[0][1] != 1).any():
            raise ValueError("the group term must be one indicator a row, in the columns from groups_from on")
        [(group, _)] = grouped

    def objective(b: np.ndarray) -> float:
        eta = _eta(cols, b, rows, offset)
        return float((w * (y * _log_sigmoid(eta) + (1 - y) * _log_sigmoid(-eta))).sum() - 0.5 * (lam * b * b).sum())

    value = objective(beta)
    iterations = 0
    converged = False
    hessian = np.diag(lam[: n_columns if groups_from is None else groups_from]).astype(float)
    for _ in range(max_iterations):
        iterations += 1
        eta = _eta(cols, beta, rows, offset)
        p = np.exp(_log_sigmoid(eta))
        residual = w * (y - p)
        curvature = w * p * (1 - p)
        gradient = -lam * beta
        for column, v in cols:
            gradient += np.bincount(column, weights=residual * v, minlength=n_columns)
        if groups_from is None:
            hessian = _information(cols, curvature, lam, n_columns)
            step = _newton_step(hessian, gradient)
        else:
            step, hessian = _grouped_step(dense, group - groups_from, curvature, gradient, lam, groups_from)
        if np.abs(step).max(initial=0.0) < tolerance:
            converged = True
            break
        beta, value = _backtrack(objective, beta, value, step, float(gradient @ step))
    return LogisticFit(coef=beta, information=hessian, iterations=iterations, converged=converged)


def _backtrack(objective, beta: np.ndarray, value: float, step: np.ndarray, slope: float) -> tuple[np.ndarray, float]:
    """The step halved until it raises the objective enough (Armijo): a full Newton step can
    overshoot far from the optimum."""
    t = 1.0
    for _ in range(60):
        candidate = beta + t * step
        new_value = objective(candidate)
        if new_value >= value + 1e-4 * t * slope - 1e-12 * abs(value):
            break
        t /= 2
    return candidate, new_value


def fit_firth(
    terms: Sequence[Term],
    y: np.ndarray,
    n_columns: int,
    *,
    weight: np.ndarray | None = None,
    null_space: np.ndarray | None = None,
    start: np.ndarray | None = None,
    tolerance: float = TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
) -> LogisticFit:
    """The coefficients maximising ℓ(β) + ½ log det I(β), the log-likelihood penalised by Jeffreys'
    prior (Firth 1993; Heinze & Schemper 2002 for logistic regression; finite whenever X has full
    rank, Kosmidis & Firth 2021). Its gradient is the modified score X'(w(y − p) + h(½ − p)),
    h the leverages w·x'I⁻¹x; each step is I⁻¹ times it (I = X'WX), halved until the penalised
    log-likelihood rises. Returns the coefficients with I at them (Wald standard errors, as logistf).

    ``null_space``: columns spanning the directions X does not determine (e.g. a common shift of
    ratings that only differences identify); N N' is added to I to invert it there, which leaves
    I⁻¹ on X's rows unchanged, and log det then runs over X's range only."""
    y = np.asarray(y, dtype=float)
    rows = len(y)
    w = np.ones(rows) if weight is None else np.asarray(weight, dtype=float)
    cols = _columns(terms, rows)
    fill = np.zeros((n_columns, n_columns)) if null_space is None else null_space @ null_space.T
    zero = np.zeros(n_columns)
    beta = np.zeros(n_columns) if start is None else np.array(start, dtype=float)

    def objective(b: np.ndarray) -> float:
        eta = _eta(cols, b, rows)
        p = np.exp(_log_sigmoid(eta))
        logdet = _log_pseudo_determinant(_information(cols, w * p * (1 - p), zero, n_columns) + fill)
        return float((w * (y * _log_sigmoid(eta) + (1 - y) * _log_sigmoid(-eta))).sum() + 0.5 * logdet)

    value = objective(beta)
    iterations = 0
    converged = False
    for _ in range(max_iterations):
        iterations += 1
        eta = _eta(cols, beta, rows)
        p = np.exp(_log_sigmoid(eta))
        curvature = w * p * (1 - p)
        inverse = symmetric_inverse(_information(cols, curvature, zero, n_columns) + fill)
        leverage = np.zeros(rows)
        for ca, va in cols:
            for cb, vb in cols:
                leverage += inverse[ca, cb] * va * vb
        pull = w * (y - p) + curvature * leverage * (0.5 - p)
        gradient = np.zeros(n_columns)
        for column, v in cols:
            gradient += np.bincount(column, weights=pull * v, minlength=n_columns)
        step = inverse @ gradient
        if np.abs(step).max(initial=0.0) < tolerance:
            converged = True
            break
        beta, value = _backtrack(objective, beta, value, step, float(gradient @ step))
    p = np.exp(_log_sigmoid(_eta(cols, beta, rows)))
    return LogisticFit(coef=beta, information=_information(cols, w * p * (1 - p), zero, n_columns),
                       iterations=iterations, converged=converged)  # fmt: skip


def symmetric_inverse(m: np.ndarray) -> np.ndarray:
    """The inverse of a symmetric positive semi-definite matrix, or its pseudo-inverse where it is
    singular (a bootstrap round in which a covariate happens not to vary: no step along it)."""
    try:
        inverse = np.linalg.inv(m)
        if np.isfinite(inverse).all() and np.allclose(m @ inverse, np.eye(len(m)), atol=1e-6):
            return inverse
    except np.linalg.LinAlgError:
        pass
    return np.linalg.pinv(m, hermitian=True)


def _log_pseudo_determinant(m: np.ndarray) -> float:
    """log det m, over its range where it is singular (Jeffreys' prior on what the data determine)."""
    sign, logdet = np.linalg.slogdet(m)
    if sign > 0:
        return float(logdet)
    values = np.linalg.eigvalsh(m)
    return float(np.log(values[values > 1e-12 * max(values.max(initial=0.0), 1e-300)]).sum())


def weak_directions(
    information: np.ndarray, reference: np.ndarray, columns: Sequence[int], tolerance: float = WEAK
) -> tuple[np.ndarray, np.ndarray]:
    """The directions among ``columns`` (the others profiled out: each such direction may move
    them too) that a fit cannot determine, as the columns of two matrices (one row per entry of
    ``columns``, unit length): the design's own (collinear with the profiled-out columns or each
    other: ``reference`` is singular there), and the fit's: those along which ``information`` (the
    observed information at the fit) is below ``tolerance`` times ``reference`` (the same
    design's information with every probability ½).

    After separation the fit's probabilities on the rows a direction separates are numerically
    0 or 1, so its information there is nil: these are the directions of recession of the
    likelihood (Geyer 2009; Eck & Geyer 2021: the null eigenvectors of the Fisher information at
    a fit run far enough). docs/methods.md, "Style control"."""
    keep = np.asarray(columns)
    other = np.setdiff1d(np.arange(len(information)), keep)

    def profile(m: np.ndarray) -> np.ndarray:
        block = m[np.ix_(keep, keep)]
        if not len(other):
            return block
        cross = m[np.ix_(keep, other)]
        return block - cross @ np.linalg.pinv(m[np.ix_(other, other)], hermitian=True) @ cross.T

    fit, most = profile(information), profile(reference)
    scale = 1.0 / np.sqrt(np.clip(np.diag(most), 1e-300, None))
    values, vectors = np.linalg.eigh(most * scale[:, None] * scale[None, :])
    spanned = values > COLLINEAR * max(values.max(initial=0.0), 1e-300)
    whiten = vectors[:, spanned] / np.sqrt(values[spanned])
    ratio, turns = np.linalg.eigh(whiten.T @ (fit * scale[:, None] * scale[None, :]) @ whiten)

    def unit(directions: np.ndarray) -> np.ndarray:
        directions = directions * scale[:, None]
        norms = np.linalg.norm(directions, axis=0)
        return directions / np.where(norms > 0, norms, 1.0)

    return unit(vectors[:, ~spanned]), unit(whiten @ turns[:, ratio < tolerance])


def _information(
    cols: Sequence[tuple[np.ndarray, np.ndarray]], curvature: np.ndarray, lam: np.ndarray, n: int
) -> np.ndarray:
    """X'WX + diag(λ) over the first ``n`` columns: one ``bincount`` per pair of terms."""
    flat = np.diag(lam[:n]).ravel().copy()
    for ca, va in cols:
        for cb, vb in cols:
            flat += np.bincount(ca * n + cb, weights=curvature * va * vb, minlength=n * n)
    return flat.reshape(n, n)


def _grouped_step(
    dense: Sequence[tuple[np.ndarray, np.ndarray]],
    group: np.ndarray,
    curvature: np.ndarray,
    gradient: np.ndarray,
    lam: np.ndarray,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The Newton step H·step = g with H = [[A, B], [B', D]], D diagonal (the group columns from
    ``k`` on, ``group``: each row's, counted from 0): the first ``k`` from the Schur complement
    S = A − B D⁻¹ B', the rest as D⁻¹ (g₂ − B' step₁). Returns the step and S."""
    n_groups = len(lam) - k
    a = _information(dense, curvature, lam, k)
    b = np.zeros(k * n_groups)
    for column, value in dense:
        b += np.bincount(column * n_groups + group, weights=curvature * value, minlength=k * n_groups)
    b = b.reshape(k, n_groups)
    d = lam[k:] + np.bincount(group, weights=curvature, minlength=n_groups)
    schur = a - (b / d) @ b.T
    first = _newton_step(schur, gradient[:k] - b @ (gradient[k:] / d))
    return np.r_[first, (gradient[k:] - b.T @ first) / d], schur


def _newton_step(hessian: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """Solve H·step = g; where H is singular (a column no row uses, collinear columns, ratings
    without a prior that only differences identify) take the minimum-norm step instead."""
    try:
        step = np.linalg.solve(hessian, gradient)
        if np.allclose(hessian @ step, gradient, rtol=1e-8, atol=1e-10 * (1 + np.abs(gradient).max())):
            return step
    except np.linalg.LinAlgError:
        pass
    return np.linalg.lstsq(hessian, gradient, rcond=None)[0]


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    return np.exp(_log_sigmoid(np.asarray(x, dtype=float)))
