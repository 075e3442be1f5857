"""Benchmark: coverage of the pooled length-correlation interval under the null (issues 28 and 61).

    python benchmarks/bench_length_ci_coverage.py                  # 4,000 replicates a cell
    python benchmarks/bench_length_ci_coverage.py --reps 2000 --seed 3

Null data: in each session every model's answer length (log-normal words) is independent of the
score it received (the mean of three reviewers' integer 1–10 scores). Each replicate is one bias
report's worth of sessions: the sessions' sums (n, Σx, Σy, Σx², Σy², Σxy, as the report reads
them), pooled by ``pooled_length_correlation``. Coverage is the share of replicates whose
95 % interval contains 0; the honest interval must keep ≥ 0.94 in every cell (3, 5, 8 models a
session × 10, 30, 100 sessions). The seed's interval (se = 1/√(sessions − 3)) is shown beside it.
Away from the null: benchmarks/bench_bias_indicators.py --only length_coverage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from council.methods.bias_indicators import SessionSums, pooled_length_correlation  # noqa: E402

CELLS = [(k, m) for k in (3, 5, 8) for m in (10, 30, 100)]


def null_sessions(rng: np.random.Generator, models: int, sessions: int, reviewers: int = 3) -> list[SessionSums]:
    """One replicate's per-session sums, lengths independent of scores."""
    x = rng.lognormal(5.5, 0.7, size=(sessions, models)).round()
    y = rng.integers(1, 11, size=(sessions, models, reviewers)).mean(axis=2)
    sums = zip(x.sum(1), y.sum(1), (x * x).sum(1), (y * y).sum(1), (x * y).sum(1), strict=True)
    return [(models, *map(float, s)) for s in sums]


def coverage(rng: np.random.Generator, models: int, sessions: int, reps: int) -> tuple[float, float, int]:
    """(honest coverage, seed's coverage, replicates with an estimate)."""
    honest = seed = used = 0
    for _ in range(reps):
        pooled = pooled_length_correlation(null_sessions(rng, models, sessions))
        if pooled.length_correlation_ci is None or pooled.length_correlation_ci_seed is None:
            continue  # the seed's: fewer than 10 usable sessions (r = ±1 left out), no interval to compare
        used += 1
        lo, hi = pooled.length_correlation_ci
        honest += lo <= 0 <= hi
        lo, hi = pooled.length_correlation_ci_seed
        seed += lo <= 0 <= hi
    return honest / used, seed / used, used


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=28)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{'models':>6} {'sessions':>8} {'reps':>6} {'coverage':>9} {'seed CI':>8} {'binomial se':>11}")
    worst = 1.0
    start = time.perf_counter()
    for k, m in CELLS:
        honest, seed, used = coverage(rng, k, m, args.reps)
        worst = min(worst, honest)
        se = (honest * (1 - honest) / used) ** 0.5
        print(f"{k:>6} {m:>8} {used:>6} {honest:>9.4f} {seed:>8.4f} {se:>11.4f}")
    print(f"worst honest coverage {worst:.4f} (goal ≥ 0.94); {time.perf_counter() - start:.1f} s")
    return 0 if worst >= 0.94 else 1


if __name__ == "__main__":
    raise SystemExit(main())
