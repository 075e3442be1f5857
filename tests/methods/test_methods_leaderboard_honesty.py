"""Issue 28, findings 3 and 6: leaderboard intervals that are never certain from a handful of games and
hold their level, a plain MLE that says when it does not exist, ranks within connected groups."""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from council.leaderboard.stored import build_leaderboard
from council.methods.bradley_terry import SeparationWarning, Stratum, bradley_terry, elo_scale, rate
from council.storage import ComparisonData

RANKING = {(0, 1): 1.0, (0, 2): 1.0, (1, 2): 1.0}  # one unanimous ranking a > b > c


def test_unanimous_sessions_do_not_give_zero_width_intervals():
    for stratum in (Stratum("sessions", [(3, RANKING)]), Stratum("judgments", [(5, {(0, 1): 1.0})])):
        n = 3 if len(stratum.groups[0][1]) == 3 else 2
        for r in rate([stratum], n, bootstrap=200, seed=1):
            lo, hi = r.ci
            assert lo < r.rating < hi and hi - lo > 100  # a handful of games: wide, not (1131.4, 1131.4)


def bt_sessions(theta: np.ndarray, n: int, rng: np.random.Generator, reviewers: int = 3) -> Stratum:
    """``n`` sessions; each reviewer compares every pair once, i beating j with probability σ(θ_i − θ_j)."""
    groups = []
    for _ in range(n):
        out: dict[tuple[int, int], float] = {}
        for _ in range(reviewers):
            for i in range(len(theta)):
                for j in range(i + 1, len(theta)):
                    pair = (i, j) if rng.random() < 1 / (1 + math.exp(theta[j] - theta[i])) else (j, i)
                    out[pair] = out.get(pair, 0) + 1
        groups.append((1, out))
    return Stratum("sessions", groups)


@pytest.mark.parametrize("sessions", [5, 10])
def test_interval_coverage_at_few_sessions_by_simulation(sessions):
    theta = np.log([1.0, 1.5, 2.5, 4.0])
    true = elo_scale(theta)
    rng = np.random.default_rng(28 + sessions)
    reps, hits = 150, 0
    for rep in range(reps):
        for r in rate([bt_sessions(theta, sessions, rng)], 4, bootstrap=200, seed=rep):
            hits += r.ci[0] <= true[r.index] <= r.ci[1]
    trials = reps * 4
    assert hits >= sps.binom.ppf(0.01, trials, 0.94), f"coverage {hits / trials:.3f}"


def test_the_plain_mle_warns_under_separation_and_not_otherwise():
    with pytest.warns(SeparationWarning, match="never"):
        bradley_terry([("a", "b")] * 3 + [("b", "c")] * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bradley_terry([("a", "b"), ("b", "a"), ("b", "c"), ("c", "b"), ("a", "c")])
        bradley_terry([("a", "b")] * 3, prior_games=1.0)  # the prior keeps it finite: no warning


def _board(models: list[str], sessions: list[tuple[int, dict]]) -> list:
    return build_leaderboard(ComparisonData(models=models, sessions=sessions), bootstrap=0)


def test_ranks_are_within_connected_groups_and_exact_ties_share_a_rank():
    # group 1: a, b, c with many games; group 2: x, y with two games; never compared across
    big = [(40, {(0, 1): 1.0, (1, 2): 1.0, (0, 2): 1.0}), (30, {(1, 0): 1.0, (2, 1): 1.0, (2, 0): 1.0})]
    small = [(1, {(3, 4): 1.0})]
    board = build_leaderboard(ComparisonData(models=["a", "b", "c", "x", "y"], sessions=big + small), bootstrap=0)
    by_model = {m.model: m for m in board.models}
    assert {m: (r.group, r.rank) for m, r in by_model.items()} == {
        "a": (1, "1"), "b": (1, "2"), "c": (1, "3"), "x": (2, "1"), "y": (2, "2")}
    assert [m.model for m in board.models] == ["a", "b", "c", "x", "y"]  # the well-compared group first
    tied = build_leaderboard(
        ComparisonData(models=["a", "b", "c"], sessions=[(2, {(0, 2): 1.0, (1, 2): 1.0, (0, 1): 0.5, (1, 0): 0.5})]),
        bootstrap=0,
    )
    assert [(m.model, m.rank) for m in tied.models] == [("a", "1="), ("b", "1="), ("c", "3")]


# Issue 61, finding 4: the reviewers of one session rank the same answers, and an answer's quality
# (this time, on this question) is shared by every ballot that ranks it. The simulation is the
# benchmark's (benchmarks/bench_ratings_honesty.py), which docs/methods.md quotes with more replicates.
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from bench_ratings_honesty import session_coverage, shared_quality_sessions  # noqa: E402


@pytest.mark.parametrize("sessions", [5, 10])
def test_interval_coverage_when_reviewers_share_each_answers_quality(sessions):
    """The bootstrap over 5 or 10 sessions, hulled with the curvature interval (games as if
    independent), covered 0.87 and 0.90 here (the answers' share of the variance 0.9): too few
    sessions for the percentile bootstrap, and a ballot's pairs are not independent. The
    cluster-robust interval (sessions as clusters, Student's t with sessions − 1 degrees of
    freedom) joins the hull."""
    reps = 150
    coverage = session_coverage(sessions, reps, 61 + sessions, answer_sd=1.5, reviewer_sd=0.5)
    assert coverage >= sps.binom.ppf(0.01, reps * 4, 0.94) / (reps * 4), f"coverage {coverage:.3f}"


@pytest.mark.slow
def test_interval_coverage_with_shared_quality_at_30_sessions_and_a_stronger_share():
    reps = 150
    for spread in ({"answer_sd": 1.0, "reviewer_sd": 1.0}, {"answer_sd": 1.5, "reviewer_sd": 0.5}):
        coverage = session_coverage(30, reps, 91, **spread)
        assert coverage >= sps.binom.ppf(0.01, reps * 4, 0.94) / (reps * 4), (spread, coverage)


def test_cluster_robust_sd_is_statsmodels_cluster_covariance():
    """The sandwich of :func:`cluster_robust_sd` against statsmodels' GLM with cluster-robust
    covariance (sessions as groups; CR1 = its uncorrected sandwich × G/(G − 1)), on sessions
    with shared answer quality, a prior too small to matter, and identical sessions grouped."""
    sm = pytest.importorskip("statsmodels.api")
    from council.methods.bradley_terry import ELO_FACTOR, cluster_robust_sd

    theta = np.log([1.0, 1.5, 2.5, 4.0])
    stratum = shared_quality_sessions(theta, 40, np.random.default_rng(3))
    grouped = Stratum("sessions", [(2, stratum.groups[0][1]), *stratum.groups[1:]])  # session 0 twice
    rows, groups = [], []
    for g, (n, outcomes) in enumerate(grouped.groups):
        for copy in range(n):
            for (i, j), w in outcomes.items():
                rows += [(i, j)] * int(w)
                groups += [g * 10 + copy] * int(w)
    x = np.zeros((len(rows), 4))
    x[np.arange(len(rows)), [i for i, _ in rows]] = 1.0
    x[np.arange(len(rows)), [j for _, j in rows]] = -1.0
    fit = sm.GLM(np.ones(len(rows)), x[:, 1:], family=sm.families.Binomial()).fit(
        tol=1e-12, cov_type="cluster", cov_kwds={"groups": np.array(groups), "use_correction": False})
    clusters = len(set(groups))
    cov = np.zeros((4, 4))
    cov[1:, 1:] = fit.cov_params() * clusters / (clusters - 1)
    centre = np.eye(4) - 0.25
    expected = ELO_FACTOR * np.sqrt(np.diag(centre @ cov @ centre.T))
    sd, df = cluster_robust_sd([grouped], 4, prior_games=1e-6)
    assert df == clusters - 1
    np.testing.assert_allclose(sd, expected, rtol=1e-5)
