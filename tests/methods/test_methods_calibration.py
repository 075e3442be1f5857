"""Calibration (council.methods.calibration) against scikit-learn's ``calibration_curve`` and
``brier_score_loss``, and a hand-computed example."""

from __future__ import annotations

import random

import pytest
import sklearn.calibration as sklearn_calibration
import sklearn.metrics as sklearn_metrics

from council.methods.calibration import calibration


def test_the_reliability_table_and_brier_match_scikit_learn() -> None:
    rng = random.Random(3)
    probs = [round(rng.uniform(0.3, 1.0), 3) for _ in range(500)] + [0.1, 0.5, 0.9, 1.0]  # edges included
    correct = [rng.random() < p ** 1.5 for p in probs]
    ours = calibration(probs, correct)
    accuracy, mean_prob = sklearn_calibration.calibration_curve(correct, probs, n_bins=10, strategy="uniform")
    filled = [b for b in ours.bins if b.count]
    assert [b.accuracy for b in filled] == pytest.approx(list(accuracy))
    assert [b.mean_probability for b in filled] == pytest.approx(list(mean_prob))
    assert ours.brier == pytest.approx(sklearn_metrics.brier_score_loss(correct, probs))
    counts = [b.count for b in filled]
    expected_ece = sum(c / len(probs) * abs(a - m) for c, a, m in zip(counts, accuracy, mean_prob, strict=True))
    assert ours.ece == pytest.approx(expected_ece)


def test_a_hand_computed_example() -> None:
    # Bin [0.5, 0.6): 0.55, 0.55 (one right); bin (0.9, 1.0]: 1.0, 1.0 (both right).
    c = calibration([0.55, 0.55, 1.0, 1.0], [True, False, True, True])
    assert c.ece == pytest.approx(0.5 * abs(0.5 - 0.55) + 0.5 * 0.0)
    assert c.brier == pytest.approx((0.45**2 + 0.55**2 + 0 + 0) / 4)
    assert [(b.lo, b.count) for b in c.bins if b.count] == [(0.5, 2), (0.9, 2)]


def test_no_items() -> None:
    c = calibration([], [])
    assert c.ece is None and c.brier is None and len(c.bins) == 10
