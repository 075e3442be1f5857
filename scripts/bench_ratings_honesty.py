"""Benchmark: the leaderboard's ratings against simulated truth (issue 61, findings 1–4).

    python scripts/bench_ratings_honesty.py sessions             # interval coverage at 5, 10, 30 sessions
    python scripts/bench_ratings_honesty.py sessions --reps 1000 --seed 3
    python scripts/bench_ratings_honesty.py style                # the length coefficient in a sparse arena

The tests (tests/methods/test_methods_leaderboard_honesty.py, ..._style_control.py,
..._length_controlled.py) run these simulations with fewer replicates; docs/methods.md quotes
this script's larger runs.

``sessions``: council sessions in which every reviewer ranks the same answers, each answer's
quality shared by its reviewers: quality = θ_model + N(0, answer_sd²), a reviewer's score =
quality + N(0, reviewer_sd²), four models of strengths 1, 1.5, 2.5, 4, three reviewers a session.
The truth is the Bradley–Terry fit to the exact pairwise probabilities (what the ratings converge
to with endless sessions); coverage is the share of the 95 % intervals (``rate``, 200 bootstrap
rounds) that contain it, over models and replicates.

``style``: a sparse arena, 16 models (θ evenly from −spread to +spread) and 80 judgments of
random pairs, in which better models write longer answers (log length = 6 + slope·θ +
N(0, noise²)); the judge has a length taste γ (0: none). For each design, the share of the
length coefficient's 95 % Wald intervals that exclude 0 (at γ = 0: the false-positive rate)
and that contain γ, its mean estimate, and the share of replicates where it is not identified.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from council.methods.bradley_terry import Stratum, elo_scale, fit_log_strengths, rate  # noqa: E402
from council.methods.logistic import sigmoid  # noqa: E402
from council.methods.style_control import style_controlled_ratings, style_difference  # noqa: E402

STRENGTHS = np.log([1.0, 1.5, 2.5, 4.0])
#: (answer_sd, reviewer_sd): independent reviewers, then answers' share of the variance 0.5 and 0.9.
SPREADS = ((0.0, 1.0), (1.0, 1.0), (1.5, 0.5))


def shared_quality_sessions(
    theta: np.ndarray,
    n: int,
    rng: np.random.Generator,
    *,
    answer_sd: float = 1.0,
    reviewer_sd: float = 1.0,
    reviewers: int = 3,
) -> Stratum:
    """``n`` sessions: each model's answer has quality θ + N(0, answer_sd²), the same for every
    reviewer of the session; each reviewer ranks the answers by quality + N(0, reviewer_sd²)."""
    groups = []
    m = len(theta)
    for _ in range(n):
        quality = theta + rng.normal(0.0, answer_sd, m)
        out: dict[tuple[int, int], float] = {}
        for _ in range(reviewers):
            order = np.argsort(-(quality + rng.normal(0.0, reviewer_sd, m))).tolist()
            for x in range(m):
                for y in range(x + 1, m):
                    out[(order[x], order[y])] = out.get((order[x], order[y]), 0) + 1
        groups.append((1, out))
    return Stratum("sessions", groups)


def shared_quality_truth(theta: np.ndarray, answer_sd: float = 1.0, reviewer_sd: float = 1.0) -> np.ndarray:
    """The ratings the fit converges to with endless sessions: Bradley–Terry fitted to the exact
    pairwise win probabilities Φ((θ_i − θ_j) / √(2·(answer_sd² + reviewer_sd²)))."""
    spread = math.sqrt(2 * (answer_sd**2 + reviewer_sd**2))
    phi = np.vectorize(NormalDist().cdf)
    p = phi((theta[:, None] - theta[None, :]) / spread)
    np.fill_diagonal(p, 0.0)
    return elo_scale(fit_log_strengths(p * 1e6, prior_games=0.0))


def session_coverage(sessions: int, reps: int, seed: int, *, answer_sd: float = 1.0, reviewer_sd: float = 1.0,
                     bootstrap: int = 200) -> float:  # fmt: skip
    """Share of the models' 95 % intervals, over ``reps`` replicates of ``sessions`` sessions, that
    contain the true rating."""
    true = shared_quality_truth(STRENGTHS, answer_sd, reviewer_sd)
    rng = np.random.default_rng(seed)
    hits = 0
    for rep in range(reps):
        stratum = shared_quality_sessions(STRENGTHS, sessions, rng, answer_sd=answer_sd, reviewer_sd=reviewer_sd)
        for r in rate([stratum], len(STRENGTHS), bootstrap=bootstrap, seed=rep):
            assert r.ci is not None
            hits += r.ci[0] <= true[r.index] <= r.ci[1]
    return hits / (reps * len(STRENGTHS))


def run_sessions(args: argparse.Namespace) -> None:
    print(f"{'answer_sd':>9} {'reviewer_sd':>11} {'sessions':>8} {'reps':>6} {'coverage':>9} {'binomial se':>11}")
    for answer_sd, reviewer_sd in SPREADS:
        for sessions in (5, 10, 30):
            start = time.perf_counter()
            c = session_coverage(sessions, args.reps, args.seed + sessions, answer_sd=answer_sd,
                                 reviewer_sd=reviewer_sd)  # fmt: skip
            se = math.sqrt(c * (1 - c) / (args.reps * len(STRENGTHS)))
            print(f"{answer_sd:>9} {reviewer_sd:>11} {sessions:>8} {args.reps:>6} {c:>9.4f} {se:>11.4f}"
                  f"   ({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip


#: (spread, slope, noise) of the sparse arenas: how far apart the models are, how much longer the
#: better ones write, and how much lengths vary besides.
ARENAS = ((1.0, 0.5, 0.5), (1.5, 0.8, 0.4), (2.0, 0.8, 0.3))


def sparse_arena(rng: np.random.Generator, gamma: float, *, spread: float = 1.5, slope: float = 0.8,
                 noise: float = 0.4, models: int = 16, judgments: int = 80):  # fmt: skip
    """One arena's judgments (a, b, y) and standardised length differences z."""
    theta = np.linspace(-spread, spread, models)
    a = rng.integers(0, models, judgments)
    b = (a + rng.integers(1, models, judgments)) % models
    length_a = np.exp(6 + slope * theta[a] + rng.normal(0, noise, judgments))
    length_b = np.exp(6 + slope * theta[b] + rng.normal(0, noise, judgments))
    z = style_difference(length_a, length_b)
    y = (rng.random(judgments) < sigmoid(theta[b] - theta[a] + gamma * z)).astype(float)
    return a, b, y, z


@dataclass
class CoefficientRuns:
    """How the length coefficient's intervals fared over the replicates that identified it."""

    excluded_zero: float
    covered: float
    mean: float
    not_identified: float


def coefficient_runs(reps: int, seed: int, gamma: float, **arena: float) -> CoefficientRuns:
    rng = np.random.default_rng(seed)
    estimates, excluded, covered, missing = [], 0, 0, 0
    models = int(arena.pop("models", 16))
    for _ in range(reps):
        a, b, y, z = sparse_arena(rng, gamma, models=models, **arena)
        c = style_controlled_ratings(a, b, y, z[:, None], ["length"], models).coefficients["length"]
        if c.ci is None or c.estimate is None:
            missing += 1
            continue
        estimates.append(c.estimate)
        excluded += not c.ci[0] <= 0 <= c.ci[1]
        covered += c.ci[0] <= gamma <= c.ci[1]
    used = max(reps - missing, 1)
    return CoefficientRuns(excluded / used, covered / used, float(np.mean(estimates)), missing / reps)


def run_style(args: argparse.Namespace) -> None:
    print(f"{'spread':>6} {'slope':>5} {'noise':>5} {'gamma':>5} {'reps':>6} {'excl. 0':>8} {'covers':>7} "
          f"{'mean':>7} {'not id.':>7}")  # fmt: skip
    for spread, slope, noise in ARENAS:
        for gamma in (0.0, 0.5):
            start = time.perf_counter()
            r = coefficient_runs(args.reps, args.seed, gamma, spread=spread, slope=slope, noise=noise)
            print(f"{spread:>6} {slope:>5} {noise:>5} {gamma:>5} {args.reps:>6} {r.excluded_zero:>8.4f} "
                  f"{r.covered:>7.4f} {r.mean:>+7.3f} {r.not_identified:>7.4f}"
                  f"   ({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["sessions", "style"])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=61)
    args = parser.parse_args()
    {"sessions": run_sessions, "style": run_style}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
