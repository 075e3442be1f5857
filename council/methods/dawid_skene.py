"""Dawid–Skene: each annotator's confusion matrix and each item's true class, estimated together
by EM without labels (pure).

Dawid, A. P. & Skene, A. M. (1979). Maximum likelihood estimation of observer error-rates using
the EM algorithm. *Applied Statistics* 28(1), 20–28. The iteration follows the common
implementation (crowd-kit's ``DawidSkene``, which the tests check this against): start from the
majority vote's shares, then alternate the M-step (class priors; each annotator's confusion
matrix, its rows clipped at ``EPS`` and normalised) and the E-step (each item's posterior), until
the evidence lower bound per vote gains less than ``TOL`` or ``MAX_ITERATIONS`` pass.
The write-up is in docs/methods.md ("Dawid–Skene").
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MAX_ITERATIONS = 100
TOL = 1e-5
#: Floor of a probability before its log is taken (crowd-kit's ``_EPS``).
EPS = 1e-10


@dataclass(frozen=True)
class DawidSkene:
    """The fit: ``classes`` (sorted, those any vote uses), ``posteriors[i][c]`` for item i, ``verdicts``
    (the posterior's maximum; the first class in ``classes`` order on an exact tie), ``priors``,
    ``confusion[annotator][observed][true]`` and the ``iterations`` run."""

    classes: tuple[Hashable, ...]
    posteriors: list[dict[Hashable, float]]
    verdicts: list[Hashable]
    priors: dict[Hashable, float]
    confusion: dict[Hashable, dict[Hashable, dict[Hashable, float]]]
    iterations: int

    def probability(self, item: int) -> float:
        """The posterior probability of item ``item``'s verdict."""
        return self.posteriors[item][self.verdicts[item]]


def dawid_skene(
    votes: Sequence[Mapping[Hashable, Hashable]], *, max_iterations: int = MAX_ITERATIONS, tol: float = TOL
) -> DawidSkene:
    """Fit Dawid–Skene to ``votes``: one mapping per item, annotator → the class it gave (an
    annotator may skip items; an item without votes keeps the prior)."""
    classes = tuple(sorted({c for item in votes for c in item.values()}, key=str))
    annotators = tuple(sorted({a for item in votes for a in item}, key=str))
    n, k, m = len(votes), len(classes), len(annotators)
    if not k:
        return DawidSkene(classes, [{} for _ in votes], [None] * n, {}, {}, 0)
    class_of = {c: i for i, c in enumerate(classes)}
    annotator_of = {a: i for i, a in enumerate(annotators)}
    # One row per vote: its item, annotator and observed class.
    rows = [(i, annotator_of[a], class_of[c]) for i, item in enumerate(votes) for a, c in item.items()]
    item_ix = np.array([r[0] for r in rows], dtype=np.intp)
    ann_ix = np.array([r[1] for r in rows], dtype=np.intp)
    obs_ix = np.array([r[2] for r in rows], dtype=np.intp)
    seen = np.zeros((m, k), dtype=bool)  # which (annotator, observed class) pairs occur
    seen[ann_ix, obs_ix] = True

    shares = np.zeros((n, k))
    np.add.at(shares, (item_ix, obs_ix), 1.0)
    totals = shares.sum(axis=1, keepdims=True)
    probas = np.divide(shares, totals, out=np.full_like(shares, 1.0 / k), where=totals > 0)

    def m_step(probas: np.ndarray) -> np.ndarray:
        counts = np.zeros((m, k, k))  # annotator, observed, true
        np.add.at(counts, (ann_ix, obs_ix), probas[item_ix])
        counts = np.where(seen[:, :, None], np.maximum(counts, EPS), 0.0)
        return counts / counts.sum(axis=1, keepdims=True)

    def log_terms(errors: np.ndarray, priors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(divide="ignore"):
            per_vote = np.log(errors[ann_ix, obs_ix])  # votes × true class
        return per_vote, np.log(np.maximum(priors, EPS))

    def e_step(errors: np.ndarray, priors: np.ndarray) -> np.ndarray:
        per_vote, log_prior = log_terms(errors, priors)
        log_like = np.zeros((n, k))
        np.add.at(log_like, item_ix, per_vote)
        log_like += log_prior
        log_like -= log_like.max(axis=1, keepdims=True)
        like = np.exp(log_like)
        return like / like.sum(axis=1, keepdims=True)

    def lower_bound(probas: np.ndarray, priors: np.ndarray, errors: np.ndarray) -> float:
        per_vote, log_prior = log_terms(errors, priors)
        expectation = float((probas[item_ix] * (per_vote + log_prior)).sum())
        clipped = np.maximum(probas, EPS)
        entropy = float(-(np.log(clipped) * clipped).sum())
        return (expectation + entropy) / len(rows)

    priors = probas.mean(axis=0)
    errors = m_step(probas)
    bound, iterations = -np.inf, 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007  (the count is reported)
        probas = e_step(errors, priors)
        priors = probas.mean(axis=0)
        errors = m_step(probas)
        new_bound = lower_bound(probas, priors, errors)
        if new_bound - bound < tol:
            break
        bound = new_bound
    verdicts = [classes[int(j)] for j in probas.argmax(axis=1)]
    return DawidSkene(
        classes=classes,
        posteriors=[{c: float(p) for c, p in zip(classes, row, strict=True)} for row in probas],
        verdicts=verdicts,
        priors={c: float(p) for c, p in zip(classes, priors, strict=True)},
        confusion={
            a: {o: {t: float(errors[ai, oi, ti]) for ti, t in enumerate(classes)} for oi, o in enumerate(classes)}
            for ai, a in enumerate(annotators)
        },
        iterations=iterations,
    )
