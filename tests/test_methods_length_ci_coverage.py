"""The pooled length-correlation interval keeps its 95 % level under the null (issue 28, finding 1).

A seeded, fast version of scripts/bench_length_ci_coverage.py on a few cells: the count of intervals
containing 0 must not fall below what a true coverage of 0.94 would give 99 % of the time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

_path = Path(__file__).resolve().parent.parent / "scripts" / "bench_length_ci_coverage.py"
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


def test_no_estimate_is_none():
    from council.methods.bias_indicators import pooled_length_correlation

    few = pooled_length_correlation([0.1] * 9)
    assert few.length_correlation is None and few.length_correlation_ci is None
    assert few.confidence_level == "insufficient"
    flat = pooled_length_correlation([0.0] * 12)  # no spread between sessions: the seed's se, not a zero width
    half = np.tanh(sps.t.ppf(0.975, 11) / np.sqrt(12 - 3))
    assert flat.length_correlation_ci == pytest.approx((-half, half), abs=1e-3)
