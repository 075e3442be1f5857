"""How well stated probabilities match how often verdicts are right (pure): expected calibration
error over equal-width bins, the Brier score and the reliability table behind them.

The bins are scikit-learn's ``calibration_curve(strategy="uniform")``'s: ``BINS`` equal widths on
[0, 1], a probability on an inner edge belonging to the lower bin. The write-up is in
docs/methods.md ("Verdict calibration").
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

BINS = 10


class ReliabilityBin(BaseModel):
    lo: float
    hi: float
    count: int
    #: Mean stated probability and share of right verdicts in the bin; None when it is empty.
    mean_probability: float | None
    accuracy: float | None


class Calibration(BaseModel):
    ece: float | None
    brier: float | None
    bins: list[ReliabilityBin]


def bin_of(probability: float, bins: int = BINS) -> int:
    """The 0-based bin of ``probability``: the inner edges strictly below it (so 0.1 is in bin 0)."""
    return sum(1 for edge in range(1, bins) if edge / bins < probability)


def vote_share(winners: Sequence[str], verdict: str) -> float | None:
    """The probability the vote gives ``verdict``: the share of ``winners`` (the pair's valid
    passes, every judge in every order) that name it; None without passes."""
    return sum(1 for w in winners if w == verdict) / len(winners) if winners else None


def calibration(probabilities: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> Calibration:
    """ECE = Σ_b (n_b / n) · |accuracy_b − mean probability_b| over the non-empty bins; Brier =
    mean (p − 1[correct])². ``None`` for both without items."""
    if len(probabilities) != len(correct):
        raise ValueError("one correctness per probability")
    counts = [0] * bins
    sums = [0.0] * bins
    rights = [0] * bins
    squared = 0.0
    for p, ok in zip(probabilities, correct, strict=True):
        b = bin_of(p, bins)
        counts[b] += 1
        sums[b] += p
        rights[b] += 1 if ok else 0
        squared += (p - (1.0 if ok else 0.0)) ** 2
    n = len(probabilities)
    table = [
        ReliabilityBin(
            lo=b / bins,
            hi=(b + 1) / bins,
            count=counts[b],
            mean_probability=sums[b] / counts[b] if counts[b] else None,
            accuracy=rights[b] / counts[b] if counts[b] else None,
        )
        for b in range(bins)
    ]
    if not n:
        return Calibration(ece=None, brier=None, bins=table)
    ece = sum(counts[b] / n * abs(rights[b] / counts[b] - sums[b] / counts[b]) for b in range(bins) if counts[b])
    return Calibration(ece=ece, brier=squared / n, bins=table)
