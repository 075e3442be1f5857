"""How far a judge agrees with people: agreement tables for labelled batches (pure).

Pairs carry a label ("A", "B" or "TIE"); the judge's final verdict is compared with it,
and so is each single pass, by the order it showed the responses in — the table LLM-judge
evaluations report, here with the exact counts behind every rate:

- ``agree``/``accuracy``: items whose final verdict equals the label;
- ``ties``: labelled items the judge called a tie;
- ``cohen_kappa``: agreement beyond chance over the three categories,
  κ = (p_o − p_e) / (1 − p_e), p_e from the two marginal distributions (Cohen 1960);
- ``per_order_accuracy``: of the passes that showed A first (resp. B first), the share
  that picked the labelled winner (a TIE label is picked by a TIE); an invalid pass picks
  nothing. With one judge and one vote there is one pass of each order per item;
- ``position_consistency``: of the swap pairs (the A-first and B-first pass of one judge's
  vote, both valid), the share whose two passes chose the same response.

Graded responses carry a gold score; the judge's score on the rubric's scale is compared
by mean absolute error and Spearman's ρ (Pearson's r of average ranks, so ties are handled).
The method write-up is in docs/methods.md (Judge agreement).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

CATEGORIES = ("A", "B", "TIE")


class PerOrderAccuracy(BaseModel):
    a_first: float | None
    b_first: float | None


class LabelAgreement(BaseModel):
    labelled: int
    agree: int
    accuracy: float | None
    #: Labelled items whose final verdict is TIE.
    ties: int
    cohen_kappa: float | None
    per_order_accuracy: PerOrderAccuracy
    position_consistency: float | None
    #: label → verdict → items: every number above follows from it (and the passes).
    confusion: dict[str, dict[str, int]]
    #: Passes that picked the labelled winner, and passes, by the response shown first.
    per_order_correct: dict[str, int] = Field(default_factory=dict)
    per_order_passes: dict[str, int] = Field(default_factory=dict)
    swap_pairs: int = 0
    consistent_pairs: int = 0


class GoldAgreement(BaseModel):
    scored: int
    mean_absolute_error: float | None
    spearman_rho: float | None


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def confusion_matrix(
    pairs: Iterable[tuple[str, str]], categories: Sequence[str] = CATEGORIES
) -> dict[str, dict[str, int]]:
    """``matrix[label][verdict]`` = count, every category present."""
    matrix = {a: dict.fromkeys(categories, 0) for a in categories}
    for label, verdict in pairs:
        matrix[label][verdict] += 1
    return matrix


def cohen_kappa(pairs: Sequence[tuple[str, str]], categories: Sequence[str] = CATEGORIES) -> float | None:
    """Cohen's κ between two raters' categories; None when undefined (no items, or both
    raters always used one and the same category, so chance agreement is 1)."""
    return _kappa(confusion_matrix(pairs, categories), categories)


def _kappa(matrix: Mapping[str, Mapping[str, int]], categories: Sequence[str] = CATEGORIES) -> float | None:
    """Cohen's κ from the confusion matrix (``matrix[rater 1][rater 2]`` = count)."""
    n = sum(sum(row.values()) for row in matrix.values())
    if n == 0:
        return None
    observed = sum(matrix[c][c] for c in categories) / n
    expected = sum(
        sum(matrix[c].values()) * sum(matrix[r][c] for r in categories) for c in categories
    ) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


class LabelTally:
    """The agreement table's counts, one labelled item at a time (a batch's summary reads its
    items once, a page at a time): what it holds does not grow with the items."""

    def __init__(self) -> None:
        self.confusion = {a: dict.fromkeys(CATEGORIES, 0) for a in CATEGORIES}
        self.correct = {"A": 0, "B": 0}
        self.total = {"A": 0, "B": 0}
        self.swap_pairs = self.consistent = 0

    def add(self, label: str, verdict: str, passes: Iterable[Mapping[str, Any]] = ()) -> None:
        """One finished labelled item: its label, the judge's final verdict and its pairwise
        passes (``judge, vote, shown_first, valid, winner``; ``winner`` in the original labels)."""
        self.confusion[label][verdict] += 1
        swap: dict[tuple[str, int], dict[str, str | None]] = defaultdict(dict)
        for p in passes:
            first = p["shown_first"]
            if first not in self.total:
                continue
            winner = p["winner"] if p["valid"] else None
            self.total[first] += 1
            self.correct[first] += winner == label
            swap[(p["judge"], p["vote"])][first] = winner
        both = [s for s in swap.values() if s.get("A") is not None and s.get("B") is not None]
        self.swap_pairs += len(both)
        self.consistent += sum(1 for s in both if s["A"] == s["B"])

    def result(self) -> LabelAgreement:
        matrix = self.confusion
        labelled = sum(sum(row.values()) for row in matrix.values())
        agree = sum(matrix[c][c] for c in CATEGORIES)
        correct, total = self.correct, self.total
        return LabelAgreement(
            labelled=labelled,
            agree=agree,
            accuracy=_rate(agree, labelled),
            ties=sum(row["TIE"] for row in matrix.values()),
            cohen_kappa=_kappa(matrix),
            per_order_accuracy=PerOrderAccuracy(
                a_first=_rate(correct["A"], total["A"]), b_first=_rate(correct["B"], total["B"])
            ),
            position_consistency=_rate(self.consistent, self.swap_pairs),
            confusion={a: dict(row) for a, row in matrix.items()},
            per_order_correct={"a_first": correct["A"], "b_first": correct["B"]},
            per_order_passes={"a_first": total["A"], "b_first": total["B"]},
            swap_pairs=self.swap_pairs,
            consistent_pairs=self.consistent,
        )


def label_agreement(verdicts: Mapping[str, tuple[str, str]], passes: Iterable[Mapping[str, Any]]) -> LabelAgreement:
    """The agreement table (:class:`LabelTally` over every item).

    ``verdicts``: item id → (label, final verdict) for every finished labelled item;
    ``passes``: that item's pairwise passes, as stored (``item_id, judge, vote, shown_first,
    valid, winner``; ``winner`` in the original labels).
    """
    by_item: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for p in passes:
        if p["item_id"] in verdicts:
            by_item[p["item_id"]].append(p)
    tally = LabelTally()
    for item, (label, verdict) in verdicts.items():
        tally.add(label, verdict, by_item.get(item, ()))
    return tally.result()


# ----------------------------------------------------------------------- gold scores


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values sharing the mean of their places."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ; None with fewer than two pairs or when either side is constant."""
    if len(x) != len(y):
        raise ValueError("spearman_rho needs two sequences of the same length")
    if len(x) < 2:
        return None
    return _pearson(average_ranks(x), average_ranks(y))


def gold_agreement(pairs: Sequence[tuple[float, float]]) -> GoldAgreement:
    """``pairs``: (gold score, judge's score) per graded item, on the same scale."""
    if not pairs:
        return GoldAgreement(scored=0, mean_absolute_error=None, spearman_rho=None)
    gold = [g for g, _ in pairs]
    judged = [j for _, j in pairs]
    return GoldAgreement(
        scored=len(pairs),
        mean_absolute_error=sum(abs(g - j) for g, j in pairs) / len(pairs),
        spearman_rho=spearman_rho(gold, judged),
    )
