"""Isotonic regression by pool-adjacent-violators (council.methods.isotonic) against scikit-learn's
``IsotonicRegression``, a hand-computed example, and the calibration map it makes."""

from __future__ import annotations

import random

import pytest
from sklearn.isotonic import IsotonicRegression

from council.methods.isotonic import IsotonicMap, fit_isotonic


def sklearn_fit(x, y, weights=None) -> IsotonicRegression:
    return IsotonicRegression(out_of_bounds="clip").fit(x, y, sample_weight=weights)


@pytest.mark.parametrize("seed", range(6))
def test_the_fit_and_its_predictions_match_scikit_learn(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([5, 40, 300])
    # repeated probabilities (as posteriors and vote shares are), 0/1 targets like right verdicts
    x = [round(rng.uniform(0.3, 1.0), rng.choice([1, 2, 3])) for _ in range(n)]
    y = [1.0 if rng.random() < p**2 else 0.0 for p in x]
    weights = [rng.uniform(0.5, 2.0) for _ in range(n)] if seed % 2 else None
    ours = fit_isotonic(x, y, weights)
    theirs = sklearn_fit(x, y, weights)
    assert list(ours.xs) == pytest.approx(list(theirs.X_thresholds_), abs=1e-12)
    assert list(ours.ys) == pytest.approx(list(theirs.y_thresholds_), abs=1e-12)
    queries = [i / 200 for i in range(201)] + x
    assert [ours(q) for q in queries] == pytest.approx(list(theirs.predict(queries)), abs=1e-12)


def test_real_valued_targets_match_scikit_learn() -> None:
    rng = random.Random(9)
    x = [rng.random() for _ in range(100)]
    y = [xi + rng.gauss(0, 0.3) for xi in x]
    ours, theirs = fit_isotonic(x, y), sklearn_fit(x, y)
    assert [ours(q) for q in x] == pytest.approx(list(theirs.predict(x)), abs=1e-12)


def test_a_hand_computed_example() -> None:
    # (0.6, 1) (0.7, 0) (0.8, 0) (0.9, 1): the middle three violate, pooled to 1/3, then 1.
    fitted = fit_isotonic([0.6, 0.7, 0.8, 0.9], [1, 0, 0, 1])
    assert fitted.xs == (0.6, 0.8, 0.9)  # 0.7 lies inside a flat run: the line is the same without it
    assert fitted.ys == pytest.approx((1 / 3, 1 / 3, 1.0))
    assert fitted(0.85) == pytest.approx((1 / 3 + 1.0) / 2)
    assert fitted(0.1) == pytest.approx(1 / 3) and fitted(1.0) == 1.0  # clipped beyond the data


def test_the_map_is_monotone_and_round_trips_through_its_points() -> None:
    rng = random.Random(2)
    x = [rng.random() for _ in range(200)]
    fitted = fit_isotonic(x, [1.0 if rng.random() < 0.5 else 0.0 for _ in x])
    values = [fitted(i / 100) for i in range(101)]
    assert all(a <= b for a, b in zip(values, values[1:], strict=False))
    again = IsotonicMap.from_points(fitted.points())
    assert again == fitted


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        fit_isotonic([], [])
    with pytest.raises(ValueError, match="one target per"):
        fit_isotonic([0.1], [1, 0])
    with pytest.raises(ValueError, match="increasing"):
        IsotonicMap.from_points([[0.5, 0.2], [0.4, 0.3]])
