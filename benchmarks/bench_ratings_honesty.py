"""Benchmark: the leaderboard's ratings against simulated truth (issue 61, findings 1–4).

    python benchmarks/bench_ratings_honesty.py sessions             # interval coverage at 5, 10, 30 sessions
    python benchmarks/bench_ratings_honesty.py sessions --reps 1000 --seed 3
    python benchmarks/bench_ratings_honesty.py style                # the length coefficient in a sparse arena
    python benchmarks/bench_ratings_honesty.py lc                   # length-controlled win rates against truth

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
First, the dense design the style-control tests use (four models, 30, 100 and 400 judgments).

``lc``: length-controlled win rates against a baseline, the judge's preference σ(θ_m + difficulty +
1.5·tanh(Δlen / sd_m)), truth = 100 · mean σ(θ_m + difficulty) (the length term at 0). "alone":
one model as good as the baseline and usually longer (1.6×), one game per instruction (400);
"always longer": a model as good as the baseline and always about 3× longer, beside two models
of the baseline's length (θ = 0.8, −1), 300 instructions each, and then alone. Per cell: the mean error, its root
mean square, and the share of replicates with no rate (null).
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
from council.methods.length_controlled import (  # noqa: E402
    BaselineGames,
    cross_fitted_difficulty,
    lc_win_rates,
    standardised_length,
)
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


def dense_coverage(judgments: int, reps: int, seed: int, gamma: float = 0.5, models: int = 4) -> tuple[float, float]:
    """The dense design of the style-control tests: four models (θ from −0.5 to 0.5), random
    pairs, log-normal lengths independent of the models, a length taste γ. Returns the share of
    95 % Wald intervals that contain γ, and of ±1 standard error intervals that do."""
    rng = np.random.default_rng(seed)
    theta = np.linspace(-0.5, 0.5, models)
    hits = narrow = 0
    for _ in range(reps):
        a = rng.integers(0, models, judgments)
        b = (a + rng.integers(1, models, judgments)) % models
        z = style_difference(np.exp(rng.normal(6, 0.6, judgments)), np.exp(rng.normal(6, 0.6, judgments)))
        y = (rng.random(judgments) < sigmoid(theta[b] - theta[a] + gamma * z)).astype(float)
        c = style_controlled_ratings(a, b, y, z[:, None], ["length"], models).coefficients["length"]
        if c.ci is not None and c.estimate is not None and c.standard_error is not None:
            assert c.ci_method == "wald"
            hits += c.ci[0] <= gamma <= c.ci[1]
            narrow += abs(c.estimate - gamma) <= c.standard_error
    return hits / reps, narrow / reps


def run_style(args: argparse.Namespace) -> None:
    for judgments in (30, 100, 400):
        covered = dense_coverage(judgments, args.reps, args.seed + judgments)[0]
        print(f"dense, 4 models, {judgments} judgments, gamma 0.5: coverage {covered:.4f} over {args.reps}", flush=True)
    print(f"{'spread':>6} {'slope':>5} {'noise':>5} {'gamma':>5} {'reps':>6} {'excl. 0':>8} {'covers':>7} "
          f"{'mean':>7} {'not id.':>7}")  # fmt: skip
    for spread, slope, noise in ARENAS:
        for gamma in (0.0, 0.5):
            start = time.perf_counter()
            r = coefficient_runs(args.reps, args.seed, gamma, spread=spread, slope=slope, noise=noise)
            print(f"{spread:>6} {slope:>5} {noise:>5} {gamma:>5} {args.reps:>6} {r.excluded_zero:>8.4f} "
                  f"{r.covered:>7.4f} {r.mean:>+7.3f} {r.not_identified:>7.4f}"
                  f"   ({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip


LENGTH_TASTE = 1.5  # the simulated judge's pull toward the longer answer, per tanh unit


def one_model_one_game_per_prompt(seed: int, prompts: int = 400) -> tuple[BaselineGames, float]:
    """One model as good as the baseline, usually longer (1.6× on average, sometimes shorter),
    one game per instruction; returns the games and the true LC win rate."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(scale=0.7, size=prompts)
    base_len = np.exp(rng.normal(np.log(800), 0.6, prompts))
    delta = 1.6 * np.exp(rng.normal(np.log(800), 0.6, prompts)) - base_len
    model, prompt = np.zeros(prompts, dtype=np.int64), np.arange(prompts)
    z = standardised_length(BaselineGames(model, np.zeros(prompts), delta, prompt), 1)
    y = (rng.random(prompts) < sigmoid(difficulty + LENGTH_TASTE * z)).astype(float)
    return BaselineGames(model, y, delta, prompt), 100 * float(sigmoid(difficulty).mean())


def always_longer(seed: int, prompts: int = 300, alone: bool = False) -> tuple[BaselineGames, float]:
    """Model 0 is as good as the baseline and always about three times longer; models 1 (θ = 0.8)
    and 2 (θ = −1) write about as long as the baseline, sometimes longer, sometimes shorter (left
    out ``alone``). Returns the games and model 0's true LC win rate."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(scale=0.7, size=prompts)
    base_len = np.exp(rng.normal(np.log(800), 0.3, prompts))
    models = 1 if alone else 3
    model = np.repeat(np.arange(models), prompts)
    prompt = np.tile(np.arange(prompts), models)
    own_len = np.where(model == 0, 3 * base_len[prompt] * np.exp(rng.normal(0, 0.05, len(model))),
                       np.exp(rng.normal(np.log(800), 0.6, len(model))))  # fmt: skip
    delta = own_len - base_len[prompt]
    z = standardised_length(BaselineGames(model, np.zeros(len(model)), delta, prompt), models)
    quality = np.array([0.0, 0.8, -1.0])[:models]
    y = (rng.random(len(model)) < sigmoid(quality[model] + difficulty[prompt] + LENGTH_TASTE * z)).astype(float)
    return BaselineGames(model, y, delta, prompt), 100 * float(sigmoid(difficulty).mean())


def lc_errors(make, reps: int, seed: int) -> tuple[float, float, float]:
    """(mean error, root mean square error, share null) of model 0's LC win rate over ``reps``."""
    errors, null = [], 0
    for rep in range(reps):
        games, truth = make(seed + rep)
        n = int(games.model.max()) + 1
        assert games.prompt is not None
        rate = lc_win_rates(games, n, cross_fitted_difficulty(games, n, int(games.prompt.max()) + 1)).rates[0]
        if np.isnan(rate):
            null += 1
        else:
            errors.append(rate - truth)
    e = np.array(errors)
    return (float(e.mean()), float(np.sqrt((e * e).mean())), null / reps) if len(e) else (np.nan, np.nan, 1.0)


def run_lc(args: argparse.Namespace) -> None:
    print(f"{'design':>24} {'reps':>6} {'mean error':>10} {'rms error':>9} {'null':>6}")
    for name, make in (("alone, 1 game a prompt", one_model_one_game_per_prompt), ("always longer", always_longer),
                       ("always longer, alone", lambda s: always_longer(s, alone=True))):  # fmt: skip
        start = time.perf_counter()
        mean, rms, null = lc_errors(make, args.reps, args.seed)
        print(f"{name:>24} {args.reps:>6} {mean:>+10.2f} {rms:>9.2f} {null:>6.3f}"
              f"   ({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["sessions", "style", "lc"])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=61)
    args = parser.parse_args()
    {"sessions": run_sessions, "style": run_style, "lc": run_lc}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
