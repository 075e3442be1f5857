"""The pooled length-correlation interval keeps its 95 % level under the null (issue 28, finding 1)
and away from it (issue 61, finding 8).

Seeded, fast versions of benchmarks/bench_length_ci_coverage.py and of benchmarks/bench_bias_indicators.py
--only length_coverage on a few cells: the count of intervals containing the truth must not fall
below what a true coverage of 0.94 (0.935 away from the null) would give 99 % of the time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

_path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_length_ci_coverage.py"
_spec = importlib.util.spec_from_file_location("bench_length_ci_coverage", _path)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

REPS = 600


@pytest.mark.parametrize(("models", "sessions"), [(3, 30), (3, 10), (8, 10), (5, 100)])
def test_honest_interval_holds_its_level_and_the_seeds_does_not(models, sessions):
    honest, seed, used = bench.coverage(np.random.default_rng(1000 + models * sessions), models, sessions, REPS)
    floor = sps.binom.ppf(0.01, used, 0.94)
    assert used >= REPS - 20
    assert honest * used >= floor, f"coverage {honest:.3f} over {used} replicates"
    if models == 3:  # three answers a session: the seed's se = 1/√(m − 3) is far too small
        assert seed * used < floor, f"seed's coverage {seed:.3f}"


def _sums(x: list[float], y: list[float]) -> tuple:
    xy = sum(a * b for a, b in zip(x, y, strict=True))
    return (len(x), sum(x), sum(y), sum(v * v for v in x), sum(v * v for v in y), xy)


def test_no_estimate_is_none():
    from council.methods.bias_indicators import pooled_length_correlation

    few = pooled_length_correlation([_sums([1, 2, 3], [1, 3, 2])] * 9)
    assert few.length_correlation is None and few.length_correlation_ci is None
    assert few.confidence_level == "insufficient"
    flat = pooled_length_correlation([_sums([1, 2, 3], [5, 5, 5])] * 12)  # no spread in scores: no r, not 0
    assert flat.length_correlation is None and flat.length_correlation_ci is None
    assert flat.length_correlation_seed == 0.0  # the seed's r = 0 a session, kept as the seed's
    # Every session alike: no spread between the leave-one-out estimates, the seed's se then, not a zero width.
    alike = pooled_length_correlation([_sums([1, 2, 3], [1, 3, 2])] * 12)
    half = sps.t.ppf(0.975, 11) / np.sqrt(12 - 3)
    assert alike.length_correlation == 0.5
    assert alike.length_correlation_ci == pytest.approx(tuple(np.tanh(np.arctanh(0.5) + [-half, half])), abs=1e-3)
    two = pooled_length_correlation([_sums([1, 2], [1, 3])] * 12)  # two answers a session: not pooled
    assert two.sample_size == 0 and two.length_correlation is None


# -- away from the null (issue 61, finding 8) ----------------------------------------------------

_indicators_path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_bias_indicators.py"
_indicators_spec = importlib.util.spec_from_file_location("bench_bias_indicators", _indicators_path)
indicators = importlib.util.module_from_spec(_indicators_spec)
_indicators_spec.loader.exec_module(indicators)

AWAY_REPS = 400


@pytest.mark.parametrize(
    ("sessions", "rho", "skewed"),
    [(10, 0.3, False), (30, 0.5, False), (100, 0.7, False), (300, 0.5, False), (30, 0.5, True), (100, 0.0, True)],
)
def test_interval_holds_its_level_away_from_the_null(sessions, rho, skewed):
    # Sessions of 3–5 answers: the mean of the sessions' Fisher z is biased away from zero
    # (rho 0.5 read 0.69, covered 9 % of the time at 300 sessions); the pooled within-session
    # correlation with a jackknife-over-sessions interval keeps both.
    coverage, mean = indicators.length_coverage(sessions, rho, AWAY_REPS, 61, skewed=skewed)
    floor = sps.binom.ppf(0.01, AWAY_REPS, 0.935)
    assert coverage * AWAY_REPS >= floor, f"coverage {coverage:.3f}"
    assert mean == pytest.approx(rho, abs=0.03 if sessions >= 30 else 0.05)
