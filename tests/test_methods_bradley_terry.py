"""Bradley–Terry ratings: the fit against an independent scipy maximum-likelihood fit, ties,
the prior, disconnected graphs, the Elo-style scale and the bootstrap intervals."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import log_expit

from council.methods.bradley_terry import (
    ELO_ANCHOR,
    SeparationWarning,
    Stratum,
    bootstrap_wins,
    bradley_terry,
    components,
    elo_scale,
    fit_log_strengths,
    rate,
    win_matrix,
    win_probability,
)


def scipy_fit(wins: np.ndarray, prior_games: float = 0.0) -> np.ndarray:
    """θ maximising the BT log-likelihood Σ w_ij log σ(θ_i − θ_j) (+ the virtual ties), by BFGS.

    Without a prior θ_0 is pinned at 0 (the likelihood has no scale); with it every θ is free."""
    m = len(wins)

    def unpack(x: np.ndarray) -> np.ndarray:
        return x if prior_games else np.concatenate([[0.0], x])

    def nll(x: np.ndarray) -> float:
        theta = unpack(x)
        diff = theta[:, None] - theta[None, :]
        ll = (wins * log_expit(diff)).sum()
        ll += prior_games / 2 * (log_expit(theta) + log_expit(-theta)).sum()
        return -ll

    x0 = np.zeros(m if prior_games else m - 1)
    res = minimize(nll, x0, method="BFGS", options={"gtol": 1e-10, "maxiter": 10_000})
    return unpack(res.x)


def random_wins(rnd: random.Random, m: int, games: int, strengths: list[float] | None = None) -> np.ndarray:
    strengths = strengths or [math.exp(rnd.gauss(0, 1)) for _ in range(m)]
    wins = np.zeros((m, m))
    for _ in range(games):
        i, j = rnd.sample(range(m), 2)
        if rnd.random() < strengths[i] / (strengths[i] + strengths[j]):
            wins[i, j] += 1
        else:
            wins[j, i] += 1
    return wins


def strongly_connected(wins: np.ndarray) -> bool:
    m = len(wins)
    reach = (wins > 0) | np.eye(m, dtype=bool)
    for k in range(m):
        reach = reach | (reach[:, [k]] & reach[[k], :])
    return bool(reach.all())


def centred(theta: np.ndarray) -> np.ndarray:
    return theta - theta.mean()


# ------------------------------------------------------------------------ the fit


def test_bradley_terry_fixed_point():
    rnd = random.Random(1)
    true = {"a": 4.0, "b": 2.0, "c": 1.0}
    outcomes = []
    for _ in range(600):
        i, j = rnd.sample(sorted(true), 2)
        outcomes.append((i, j) if rnd.random() < true[i] / (true[i] + true[j]) else (j, i))
    p = bradley_terry(outcomes)
    assert sum(p.values()) == pytest.approx(1.0)
    assert p["a"] > p["b"] > p["c"]
    # MLE condition: observed wins = expected wins for every player.
    for i in p:
        wins = sum(1 for w, _ in outcomes if w == i)
        expected = sum(p[i] / (p[i] + p[w if lo == i else lo]) for w, lo in outcomes if i in (w, lo))
        assert wins == pytest.approx(expected, rel=1e-4)


def test_two_models_textbook_odds():
    # 3 wins to 1: the MLE win probability is 3/4, so the gap is 400·log10(3) ≈ 190.85 points.
    ratings = elo_scale(fit_log_strengths(np.array([[0.0, 3.0], [1.0, 0.0]]), prior_games=0))
    assert ratings[0] - ratings[1] == pytest.approx(400 * math.log10(3), abs=1e-6)
    assert ratings.mean() == pytest.approx(ELO_ANCHOR)
    assert win_probability(ratings[0], ratings[1]) == pytest.approx(0.75, abs=1e-9)
    assert win_probability(1400, 1000) == pytest.approx(10 / 11)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(2, 6), games=st.integers(30, 300), seed=st.integers(0, 10_000))
def test_mle_matches_an_independent_scipy_fit(m, games, seed):
    wins = random_wins(random.Random(seed), m, games)
    if not strongly_connected(wins):
        return  # the plain MLE does not exist; covered by the prior tests below
    ours = fit_log_strengths(wins, prior_games=0)
    assert np.allclose(centred(ours), centred(scipy_fit(wins)), atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(2, 6), games=st.integers(0, 200), seed=st.integers(0, 10_000), ties=st.booleans())
def test_the_prior_fit_matches_scipy_on_any_data_even_disconnected(m, games, seed, ties):
    rnd = random.Random(seed)
    wins = random_wins(rnd, m, games)
    if ties:  # some ties as half wins each way
        for _ in range(games // 4):
            i, j = rnd.sample(range(m), 2)
            wins[i, j] += 0.5
            wins[j, i] += 0.5
    ours = fit_log_strengths(wins, prior_games=1.0)
    assert np.all(np.isfinite(ours))
    assert np.allclose(ours, scipy_fit(wins, prior_games=1.0), atol=1e-5)


def test_a_tie_is_half_a_win_each_way():
    one_tie = fit_log_strengths(np.array([[0.0, 0.5], [0.5, 0.0]]))
    assert one_tie[0] == pytest.approx(one_tie[1])
    # a win and a tie = 1.5 to 0.5: odds 3:1 without a prior
    mixed = elo_scale(fit_log_strengths(np.array([[0.0, 1.5], [0.5, 0.0]]), prior_games=0))
    assert mixed[0] - mixed[1] == pytest.approx(400 * math.log10(3), abs=1e-6)


def test_a_model_that_never_won_is_finite_and_last_with_the_prior_and_zero_without():
    wins = np.array([[0, 5, 7], [4, 0, 6], [0, 0, 0]], dtype=float)
    theta = fit_log_strengths(wins)
    assert np.all(np.isfinite(theta)) and theta.argmin() == 2
    with pytest.warns(SeparationWarning):  # c never won: no MLE, and the helper says so
        assert bradley_terry([("a", "c")] * 3 + [("b", "c")] * 2 + [("a", "b"), ("b", "a")])["c"] == 0.0


def test_the_prior_weighs_as_one_comparison():
    # one win of a over b, plus one virtual tie each against the reference (θ = 0)
    theta = fit_log_strengths(np.array([[0.0, 1.0], [0.0, 0.0]]), prior_games=1.0)
    assert theta[0] == pytest.approx(-theta[1])
    assert np.allclose(theta, scipy_fit(np.array([[0.0, 1.0], [0.0, 0.0]]), prior_games=1.0), atol=1e-6)
    many = fit_log_strengths(np.array([[0.0, 300.0], [100.0, 0.0]]), prior_games=1.0)
    assert many[0] - many[1] == pytest.approx(math.log(3), abs=0.01)  # the data dominate


def test_components_of_a_disconnected_graph():
    wins = np.zeros((5, 5))
    wins[0, 1] = wins[1, 2] = 1  # 0-1-2
    wins[3, 4] = 2  # 3-4, never compared with the others
    assert components(wins) == [[0, 1, 2], [3, 4]]
    assert components(np.zeros((2, 2))) == [[0], [1]]


def test_stacked_fits_equal_one_by_one_fits():
    rnd = random.Random(3)
    stack = np.stack([random_wins(rnd, 4, 60) for _ in range(5)])
    together = fit_log_strengths(stack)
    for k in range(5):
        assert np.allclose(together[k], fit_log_strengths(stack[k]), atol=1e-8)


# ---------------------------------------------------------------------- bootstrap


def sessions_from(strengths: list[float], n: int, seed: int) -> Stratum:
    """``n`` sessions; in each, 3 reviewers rank all the models (each ranking gives its pairs)."""
    rnd = random.Random(seed)
    groups = []
    for _ in range(n):
        outcomes: dict[tuple[int, int], float] = {}
        for _ in range(3):
            order = sorted(range(len(strengths)), key=lambda i: -(math.log(strengths[i]) + rnd.gauss(0, 1.2)))
            for a in range(len(order)):
                for b in range(a + 1, len(order)):
                    pair = (order[a], order[b])
                    outcomes[pair] = outcomes.get(pair, 0) + 1
        groups.append((1, outcomes))
    return Stratum("sessions", groups)


STRENGTHS = [1.0, 1.5, 2.5, 4.0]


def test_bootstrap_intervals_contain_the_point_estimate_and_are_reproducible():
    for seed in range(4):
        stratum = sessions_from(STRENGTHS, 60, seed)
        ratings = rate([stratum], 4, bootstrap=300, seed=seed)
        for r in ratings:
            assert r.ci is not None and r.ci[0] <= r.rating <= r.ci[1]
        assert ratings == rate([stratum], 4, bootstrap=300, seed=seed)
        assert [r.index for r in ratings] == [3, 2, 1, 0]


def test_bootstrap_intervals_narrow_as_data_grows():
    def widths(n: int) -> list[float]:
        ratings = rate([sessions_from(STRENGTHS, n, 7)], 4, bootstrap=400, seed=1)
        return [r.ci[1] - r.ci[0] for r in sorted(ratings, key=lambda r: r.index)]  # type: ignore[index]

    small, large = widths(25), widths(400)
    for a, b in zip(small, large, strict=True):
        assert b < a / 2.5  # 16× the data: about 4× narrower


def test_grouped_units_give_the_same_fit_and_intervals_as_listed_units():
    stratum = sessions_from([1.0, 2.0, 3.0], 200, 11)
    listed = Stratum("s", [g for g in stratum.groups for _ in range(1)])
    # the same units, identical ones merged into groups
    merged: dict[tuple, int] = {}
    for _, outcomes in stratum.groups:
        key = tuple(sorted(outcomes.items()))
        merged[key] = merged.get(key, 0) + 1
    grouped = Stratum("s", [(n, dict(key)) for key, n in merged.items()])
    assert len(grouped.groups) < len(listed.groups) and grouped.units == listed.units
    assert np.array_equal(win_matrix([grouped], 3), win_matrix([listed], 3))
    a = rate([listed], 3, bootstrap=2000, seed=5)
    b = rate([grouped], 3, bootstrap=2000, seed=5)
    for x, y in zip(a, b, strict=True):
        assert x.index == y.index and x.rating == pytest.approx(y.rating)
        assert x.ci[0] == pytest.approx(y.ci[0], abs=8) and x.ci[1] == pytest.approx(y.ci[1], abs=8)  # type: ignore[index]


def test_comparisons_and_win_rates_count_ties_as_half():
    stratum = Stratum("judgments", [(2, {(0, 1): 1.0}), (1, {(0, 1): 0.5, (1, 0): 0.5})])
    by_index = {r.index: r for r in rate([stratum], 2, bootstrap=0)}
    assert by_index[0].comparisons == by_index[1].comparisons == 3
    assert by_index[0].wins == 2.5 and by_index[0].win_rate == pytest.approx(2.5 / 3)
    assert by_index[1].win_rate == pytest.approx(0.5 / 3)
    assert by_index[0].ci is None


def test_the_sparse_path_gives_the_same_rounds_as_the_dense_one():
    strata = [sessions_from(STRENGTHS, 80, 2), Stratum("j", [(3, {(0, 1): 0.5, (1, 0): 0.5}), (2, {(2, 3): 1.0})])]
    dense = bootstrap_wins(strata, 4, 50, np.random.default_rng(9))
    sparse = bootstrap_wins(strata, 4, 50, np.random.default_rng(9), dense_limit=10)
    assert np.allclose(dense, sparse)
    # every round resamples as many units as there are: 5 judged pairs, each one comparison
    judged = bootstrap_wins(strata[1:], 4, 50, np.random.default_rng(9))
    assert np.allclose(judged.sum(axis=(1, 2)), 5.0) and len({float(x) for x in judged[:, 2, 3]}) > 1
