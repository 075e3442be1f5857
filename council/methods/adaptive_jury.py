"""A jury that stops when it is sure (pure): each item's posterior under known confusion matrices,
the order in which to ask the annotators, and what the unasked annotators could still change.

The model is Dawid & Skene's (1979, :mod:`council.methods.dawid_skene`) with its parameters held
fixed, fitted beforehand on other items: a class prior ``prior[t]`` and, for each annotator (one
judge in one order), ``confusion[a][o][t]`` = P(annotator a says o | the true class is t). Votes are
independent given the true class, so after the votes V of an item

    P(t | V) ∝ prior[t] · Π_{(a, o) ∈ V} confusion[a][o][t].

The write-up is in docs/methods.md ("Adaptive jury").
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

#: Two posteriors this close are a tie (their classes are equally likely, up to rounding).
POSTERIOR_TIE = 1e-9
#: The verdict where the two most likely classes are equally likely.
TIE = "TIE"
#: The most unasked annotators whose every combination of votes is enumerated for the expected
#: agreement with the full panel (3 classes: 3^12 ≈ 531,000 combinations, a few milliseconds).
MAX_ENUMERATED = 12

Confusion = Mapping[str, Mapping[str, float]]  # observed -> true -> probability


def posterior(
    prior: Mapping[str, float], confusion: Mapping[Hashable, Confusion], votes: Mapping[Hashable, str]
) -> dict[str, float]:
    """P(true class | ``votes``) (annotator → the class it said) under the fixed ``prior`` and
    ``confusion`` matrices. A vote the matrices cannot weigh (an annotator without a matrix, or a
    class it was never seen to give, every entry of its row zero) carries no information and is
    left out, rather than ruling every class out."""
    classes = list(prior)
    logs = {t: math.log(prior[t]) if prior[t] > 0 else -math.inf for t in classes}
    for annotator, said in votes.items():
        row = confusion.get(annotator, {}).get(said)
        if row is None or not any(row.get(t, 0.0) > 0 for t in classes):
            continue
        for t in classes:
            p = row.get(t, 0.0)
            logs[t] += math.log(p) if p > 0 else -math.inf
    top = max(logs.values())
    if top == -math.inf:  # every class ruled out: nothing is known
        return {t: 1.0 / len(classes) for t in classes}
    weights = {t: math.exp(v - top) for t, v in logs.items()}
    total = sum(weights.values())
    return {t: w / total for t, w in weights.items()}


def posterior_verdict(post: Mapping[str, float]) -> tuple[str, float]:
    """The posterior's most likely class and its probability; ``TIE`` (with that shared probability)
    where the two most likely classes are equally likely."""
    ranked = sorted(post.items(), key=lambda kv: kv[1], reverse=True)
    (best, top), runner_up = ranked[0], ranked[1][1] if len(ranked) > 1 else -1.0
    tied = math.isclose(top, runner_up, rel_tol=POSTERIOR_TIE, abs_tol=POSTERIOR_TIE)
    return (TIE if tied else best), top


def is_sure(post: Mapping[str, float], confidence: float) -> bool:
    """The stopping rule: the posterior probability of the verdict has reached ``confidence``."""
    verdict, p = posterior_verdict(post)
    return verdict != TIE and p >= confidence


def information(prior: Mapping[str, float], confusion: Confusion) -> float:
    """How much one vote of an annotator tells about the true class: the mutual information
    I(vote; class) in bits under ``prior``, Σ_t Σ_o prior[t]·π(o|t)·log2(π(o|t) / q(o)) with
    q(o) = Σ_t prior[t]·π(o|t). 0 for an annotator whose vote does not depend on the class."""
    bits = 0.0
    for row in confusion.values():
        q = sum(prior[t] * row.get(t, 0.0) for t in prior)
        for t in prior:
            joint = prior[t] * row.get(t, 0.0)
            if joint > 0 and q > 0:
                bits += joint * math.log2(row[t] / q)
    return max(bits, 0.0)


def asking_order(
    prior: Mapping[str, float], confusion: Mapping[Hashable, Confusion], costs: Mapping[Hashable, float | None]
) -> list[Hashable]:
    """The annotators of ``costs`` (annotator → the estimated cost of one of its calls, None when
    unknown), most informative per dollar first. Free annotators (cost 0) come first; where any
    cost is unknown, dollars cannot be compared and the order is by information alone. Equal keys
    keep ``costs``' order."""
    known = all(c is not None for c in costs.values())

    def key(a: Hashable) -> tuple[int, float]:
        bits = information(prior, confusion[a]) if a in confusion else 0.0
        cost = costs[a]
        if not known:
            return (0, -bits)
        assert cost is not None
        return (0, -bits) if cost <= 0 else (1, -bits / cost)

    return sorted(costs, key=key)


def expected_agreement(
    prior: Mapping[str, float],
    confusion: Mapping[Hashable, Confusion],
    votes: Mapping[Hashable, str],
    unasked: Sequence[Hashable],
) -> float | None:
    """The probability, under the model, that asking the ``unasked`` annotators too would leave
    the verdict of ``votes`` as it is: Σ over every combination v of their votes of
    P(v | votes) · [verdict(votes ∪ v) = verdict(votes)], with P(v | votes) = Σ_t P(t | votes) ·
    Π confusion[a][v_a][t]. Exact, by enumeration (vectorised); None with more than
    ``MAX_ENUMERATED`` unasked."""
    import numpy as np  # only an adaptive jury's items load it

    if len(unasked) > MAX_ENUMERATED:
        return None
    classes = list(prior)
    now = posterior(prior, confusion, votes)
    verdict, _ = posterior_verdict(now)
    with np.errstate(divide="ignore"):
        joint = np.log(np.array([[now[t] for t in classes]]))  # combinations × classes: log P(t, v | votes)
        for a in unasked:
            rows = [[confusion[a][o].get(t, 0.0) for t in classes] for o in confusion.get(a, {})]
            rows = [r for r in rows if any(p > 0 for p in r)]  # a vote the matrices cannot weigh tells nothing
            if rows:
                joint = (joint[:, None, :] + np.log(np.array(rows))[None, :, :]).reshape(-1, len(classes))
    top = joint.max(axis=1, keepdims=True)
    live = np.isfinite(top[:, 0])
    joint, top = joint[live], top[live]
    scaled = np.exp(joint - top)
    weight = scaled.sum(axis=1) * np.exp(top[:, 0])
    full = scaled / scaled.sum(axis=1, keepdims=True)
    ranked = np.sort(full, axis=1)[:, ::-1]
    second = ranked[:, 1] if len(classes) > 1 else np.full(len(full), -1.0)
    tied = np.isclose(ranked[:, 0], second, rtol=POSTERIOR_TIE, atol=POSTERIOR_TIE)
    names = np.array(classes, dtype=object)[full.argmax(axis=1)]
    same = np.where(tied, verdict == TIE, names == verdict)
    total = float(weight.sum())
    return float(weight[same].sum()) / total if total > 0 else None


class SequentialJury:
    """One item's annotators asked in ``order`` until the posterior is sure: ``next()`` names the
    annotator to ask (None once sure or once all are asked), ``add(annotator, vote)`` records its
    vote (None: it gave none, a failed pass), after which the posterior is computed again."""

    def __init__(
        self,
        prior: Mapping[str, float],
        confusion: Mapping[Hashable, Confusion],
        order: Sequence[Hashable],
        confidence: float,
    ) -> None:
        self.prior, self.confusion, self.confidence = prior, confusion, confidence
        self.order = list(order)
        self.asked: list[Hashable] = []
        self.votes: dict[Hashable, str] = {}
        self.post = posterior(prior, confusion, {})
        self.sure = is_sure(self.post, confidence)

    def next(self) -> Hashable | None:
        if self.sure or len(self.asked) == len(self.order):
            return None
        return self.order[len(self.asked)]

    def add(self, annotator: Hashable, vote: str | None) -> None:
        self.asked.append(annotator)
        if vote is not None:
            self.votes[annotator] = vote
            self.post = posterior(self.prior, self.confusion, self.votes)
            self.sure = is_sure(self.post, self.confidence)

    @property
    def verdict(self) -> tuple[str, float]:
        return posterior_verdict(self.post)

    @property
    def unasked(self) -> list[Hashable]:
        return self.order[len(self.asked) :]
