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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_ITERATIONS = 100
TOLERANCE = 1e-10


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


def linear_predictor(terms: Sequence[Term], coef: np.ndarray, rows: int) -> np.ndarray:
    """η = Xβ for the design ``terms``."""
    eta = np.zeros(rows)
    for column, value in _columns(terms, rows):
        eta += coef[column] * value
    return eta


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
) -> LogisticFit:
    """The penalised maximum-likelihood coefficients (length ``n_columns``) of P(y = 1) = σ(Xβ).

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
        eta = linear_predictor(terms, b, rows)
        return float((w * (y * _log_sigmoid(eta) + (1 - y) * _log_sigmoid(-eta))).sum() - 0.5 * (lam * b * b).sum())

    value = objective(beta)
    iterations = 0
    hessian = np.diag(lam[: n_columns if groups_from is None else groups_from]).astype(float)
    for _ in range(max_iterations):
        iterations += 1
        eta = linear_predictor(terms, beta, rows)
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
            break
        t = 1.0
        slope = float(gradient @ step)
        for _ in range(60):  # backtracking (Armijo): a full Newton step can overshoot far from the optimum
            candidate = beta + t * step
            new_value = objective(candidate)
            if new_value >= value + 1e-4 * t * slope - 1e-12 * abs(value):
                break
            t /= 2
        beta, value = candidate, new_value
    return LogisticFit(coef=beta, information=hessian, iterations=iterations)


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
