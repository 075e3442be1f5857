"""The calibration map's claimed level (issue 58): fitted on one half of the labelled items,
applied to the other half, the calibrated ECE is at most 0.05 where the raw one is larger, with
simulated overconfident judges (seeded); LLMBar's published verdicts: test_methods_llmbar_jury.py."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from council.methods.calibration import calibration, vote_share
from council.methods.dawid_skene import dawid_skene
from council.methods.isotonic import fit_isotonic

LEVEL = 0.05


def other(verdict: str) -> str:
    return "B" if verdict == "A" else "A"


def overconfident_jury(seed: int, n: int = 2000) -> tuple[list[dict[tuple[str, str], str]], list[str]]:
    """Three judges of accuracy 0.8, 0.7, 0.65; each judge's two passes repeat its opinion of the
    pair (each flipped with probability 0.1), so they are far from independent given the truth,
    which Dawid–Skene assumes: its posteriors are overconfident."""
    rng = random.Random(seed)
    votes, truth = [], []
    for _ in range(n):
        label = rng.choice("AB")
        item = {}
        for judge, accuracy in (("j1", 0.8), ("j2", 0.7), ("j3", 0.65)):
            opinion = label if rng.random() < accuracy else other(label)
            for shown_first in "AB":
                item[(judge, shown_first)] = opinion if rng.random() < 0.9 else other(opinion)
        votes.append(item)
        truth.append(label)
    return votes, truth


def held_out(probabilities, correct, fit_on, evaluate_on):
    """Raw and calibrated calibration of ``evaluate_on``, the map fitted on ``fit_on`` only."""
    mapping = fit_isotonic([probabilities[i] for i in fit_on], [1.0 if correct[i] else 0.0 for i in fit_on])
    held = [probabilities[i] for i in evaluate_on]
    right = [correct[i] for i in evaluate_on]
    return calibration(held, right), calibration([mapping(p) for p in held], right)


@pytest.mark.parametrize("seed", range(5))
def test_the_posterior_of_overconfident_judges_calibrated_on_held_out_items(seed: int) -> None:
    votes, truth = overconfident_jury(seed)
    fit = dawid_skene(votes)  # no label read
    probabilities = [fit.probability(i) for i in range(len(votes))]
    correct = [fit.verdicts[i] == truth[i] for i in range(len(votes))]
    half = len(votes) // 2
    raw, calibrated = held_out(probabilities, correct, range(half), range(half, len(votes)))
    assert raw.ece > LEVEL  # overconfident, as built
    assert calibrated.ece <= LEVEL
    assert calibrated.brier < raw.brier


@pytest.mark.parametrize("seed", range(5))
def test_the_vote_share_calibrated_on_held_out_items(seed: int) -> None:
    votes, truth = overconfident_jury(seed)
    verdicts = [Counter(item.values()).most_common(1)[0][0] for item in votes]  # 6 passes: a tie is rare
    probabilities = [vote_share(list(item.values()), v) for item, v in zip(votes, verdicts, strict=True)]
    correct = [v == t for v, t in zip(verdicts, truth, strict=True)]
    half = len(votes) // 2
    _, calibrated = held_out(probabilities, correct, range(half), range(half, len(votes)))
    # The share of six passes is coarse and only sometimes off by more than the level (0.045 to
    # 0.073 over these seeds): what holds is the calibrated one's.
    assert calibrated.ece <= LEVEL


def test_vote_share() -> None:
    assert vote_share(["A", "A", "B", "A"], "A") == 0.75
    assert vote_share(["A", "B"], "TIE") == 0.0  # no pass said TIE
    assert vote_share([], "A") is None
