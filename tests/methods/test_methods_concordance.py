"""Consensus when ballots are incomplete or missing: Kendall's W, its test, Borda and ties.

References, none of them our own output:
* scipy.stats.friedmanchisquare for complete ballots (W = χ²_F / (m (n − 1)));
* Durbin's statistic and Kendall–Gibbons' incomplete-block W written out from the
  textbook formulas, and Conover's (1999, p. 391) ice-cream BIBD, T = 12 on 6 df;
* exhaustive enumeration of every arrangement of the ballots (null mean of the
  statistic = its degrees of freedom; exact p-values; P(p ≤ α) ≤ α);
* simulation of random ballots for Borda fairness, with stated tolerances.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2, friedmanchisquare

from council import Council
from council.methods import concordance
from council.methods.concordance import agreement, arrangements, consistent_order, kendalls_w
from council.methods.ranking import consensus_ranking

# ---------------------------------------------------------------- ballot designs


def self_excluded(items, failed=()):
    """Each member ranks everyone but itself, in ``order`` of preference; ``failed`` reviewers cast nothing."""
    return [[x for x in items if x != me] for me in items if me not in failed]


def follow(order, blocks):
    place = {x: i for i, x in enumerate(order)}
    return [sorted(b, key=place.__getitem__) for b in blocks]


def all_arrangements(blocks):
    return itertools.product(*(itertools.permutations(b) for b in blocks))


# ------------------------------------------------------------- complete ballots


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 7), st.integers(3, 6), st.randoms(use_true_random=False))
def test_complete_ballots_are_friedmans_test(m, n, rnd):
    items = [f"x{i}" for i in range(n)]
    ballots = [rnd.sample(items, n) for _ in range(m)]
    a = agreement(ballots, exact_limit=0, draws=0)
    ranks = [[b.index(x) + 1 for b in ballots] for x in items]
    ref = friedmanchisquare(*ranks)
    assert a.test == "Friedman" and a.design == "complete" and a.df == n - 1
    assert a.statistic == pytest.approx(ref.statistic, abs=1e-9)
    assert a.p_value == pytest.approx(ref.pvalue, rel=1e-7, abs=1e-12)
    assert a.w == pytest.approx(ref.statistic / (m * (n - 1)), abs=1e-9)


# ------------------------------------------------- balanced incomplete blocks


def test_conover_ice_cream_durbin_example():
    # Conover (1999), Practical Nonparametric Statistics, 3rd ed., p. 391: 7 varieties,
    # 7 judges, each tastes 3 (t = 7, k = 3, r = 3, λ = 1). Ranks per judge:
    judges = [
        {"A": 2, "B": 3, "D": 1},
        {"B": 3, "C": 1, "E": 2},
        {"C": 2, "D": 1, "F": 3},
        {"D": 1, "E": 2, "G": 3},
        {"A": 3, "E": 1, "F": 2},
        {"B": 3, "F": 1, "G": 2},
        {"A": 3, "C": 1, "G": 2},
    ]
    ballots = [sorted(j, key=j.get) for j in judges]
    a = agreement(ballots)
    assert a.test == "Durbin" and a.design == "balanced incomplete"
    assert a.statistic == pytest.approx(12.0)  # Conover's T1 = 12.00
    assert a.df == 6 and a.p_method == "monte-carlo"  # 6⁷ arrangements: beyond the exact limit
    values, upper = concordance._null_distribution(tuple(tuple(sorted(b)) for b in ballots))
    exact = next(u for v, u in zip(values, upper, strict=True) if v >= 12.0 - 1e-9)
    assert abs(a.p_value - exact) <= 4 * a.p_standard_error
    assert agreement(ballots, draws=0).p_value == pytest.approx(chi2.sf(12.0, 6))
    # Rank sums 8, 9, 4, 3, 5, 6, 7: every judge follows D < C < E < F < G < A < B.
    assert a.w == pytest.approx(1.0)


def kendall_gibbons(ballots):
    """W = 12 S / (λ² t (t² − 1)) and Durbin's T = 12 (t − 1) S / (r t (k² − 1)), textbook forms."""
    items = sorted({x for b in ballots for x in b})
    t, k = len(items), len(ballots[0])
    r = sum(1 for b in ballots if items[0] in b)
    lam = sum(1 for b in ballots if items[0] in b and items[1] in b)
    sums = {x: sum(b.index(x) + 1 for b in ballots if x in b) for x in items}
    s = sum((v - r * (k + 1) / 2) ** 2 for v in sums.values())
    return 12 * s / (lam**2 * t * (t * t - 1)), 12 * (t - 1) * s / (r * t * (k * k - 1))


@settings(max_examples=80, deadline=None)
@given(st.integers(3, 8), st.randoms(use_true_random=False))
def test_self_excluding_council_is_a_bibd_with_kendall_gibbons_w(n, rnd):
    items = [f"m{i}" for i in range(n)]
    ballots = [rnd.sample(b, len(b)) for b in self_excluded(items)]
    a = agreement(ballots, exact_limit=0, draws=0)
    w_ref, t_ref = kendall_gibbons(ballots)
    assert a.test == "Durbin" and a.df == n - 1
    assert a.w == pytest.approx(w_ref, abs=1e-9)
    assert a.statistic == pytest.approx(t_ref, abs=1e-9)
    assert a.p_value == pytest.approx(chi2.sf(t_ref, n - 1), rel=1e-7, abs=1e-12)


# ------------------------------------------------------- perfect agreement = 1


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7])
def test_perfect_agreement_is_one_at_every_council_size(n):
    items = [f"m{i}" for i in range(n)]
    rnd = random.Random(n)
    orders = list(itertools.permutations(items)) if n <= 5 else [rnd.sample(items, n) for _ in range(40)]
    designs = [self_excluded(items)]
    designs += [self_excluded(items, failed=items[:f]) for f in range(1, n - 1)]  # failed reviews
    designs += [self_excluded(items) + [list(items)]]  # one reviewer outside the council
    for blocks in designs:
        for order in orders:
            assert kendalls_w(follow(order, blocks)) == pytest.approx(1.0, abs=1e-9)


@settings(max_examples=150, deadline=None)
@given(st.integers(3, 7), st.data())
def test_w_is_between_zero_and_one_for_any_design(n, data):
    items = [f"x{i}" for i in range(n)]
    blocks = data.draw(st.lists(st.lists(st.sampled_from(items), min_size=2, max_size=n, unique=True),
                                min_size=2, max_size=7))
    rnd = data.draw(st.randoms(use_true_random=False))
    ballots = [rnd.sample(b, len(b)) for b in blocks]
    a = agreement(ballots, exact_limit=0, draws=0)
    if a is not None:
        assert -1e-12 <= a.w <= 1.0 + 1e-12
        assert 0.0 <= a.p_value <= 1.0
        if consistent_order(ballots) is not None:
            assert a.w == pytest.approx(1.0, abs=1e-9)


def test_opposite_ballots_have_no_agreement():
    assert kendalls_w([list("abcd"), list("dcba")]) == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------ the null distribution, enumerated


@pytest.mark.parametrize(
    "blocks",
    [
        self_excluded("abc"),
        self_excluded("abcd"),
        self_excluded("abcd", failed="d"),  # one review failed: unbalanced
        self_excluded("abc") + [list("abc")],
        [list("abc"), list("bcd"), list("ad")],
    ],
    ids=["3-members", "4-members", "4-members-one-failed", "mixed", "irregular"],
)
def test_null_mean_and_exact_p_values_by_enumeration(blocks):
    stats = [agreement([list(b) for b in arr], exact_limit=0, draws=0).statistic for arr in all_arrangements(blocks)]
    df = agreement(blocks, exact_limit=0, draws=0).df
    # Under the null Var(A) = L, so E[Aᵀ L⁺ A] = rank(L) = df, exactly.
    assert sum(stats) / len(stats) == pytest.approx(df, abs=1e-9)
    assert len(stats) == arrangements(blocks)
    for arr, observed in zip(all_arrangements(blocks), stats, strict=True):
        exact = agreement([list(b) for b in arr])
        assert exact.p_method == "exact"
        brute = sum(1 for s in stats if s >= observed - 1e-9) / len(stats)
        assert exact.p_value == pytest.approx(brute, abs=1e-12)
    # An exact test is valid: P(p ≤ α) ≤ α at every α.
    ps = [agreement([list(b) for b in arr]).p_value for arr in all_arrangements(blocks)]
    for alpha in (0.01, 0.05, 0.1, 0.25, 0.5):
        assert sum(p <= alpha for p in ps) / len(ps) <= alpha + 1e-12


def test_three_members_in_perfect_agreement_is_not_significant():
    # 3 ballots of 2: 8 equally likely arrangements, 6 of them follow some order (W = 1).
    a = agreement(follow("abc", self_excluded("abc")))
    assert a.w == pytest.approx(1.0)
    assert a.p_value == pytest.approx(6 / 8)


def test_four_members_in_perfect_agreement_is_significant():
    # 4 ballots of 3: 6⁴ = 1296 arrangements; only the 24 that follow an order reach W = 1.
    a = agreement(follow("abcd", self_excluded("abcd")))
    assert a.p_value == pytest.approx(24 / 1296)


def test_one_ballot_or_disjoint_single_answers_give_no_w():
    assert agreement([list("abc")]) is None
    assert agreement([["a"], ["b"], ["c"]]) is None


# -------------------------------------------------------------------- Borda


def first_place_rates(make_ballots, items, draws, seed):
    rnd = random.Random(seed)
    firsts = Counter()
    for _ in range(draws):
        c = consensus_ranking(make_ballots(rnd), items, seed=rnd.randrange(2**31))
        firsts[c.order[0]] += 1
    return {x: firsts[x] / draws for x in items}


def test_a_failed_review_does_not_favour_its_authors_answer():
    # 4 members, self-review excluded, d's review failed: d's answer is on 3 ballots,
    # the others on 2. Raw Borda put d first 37.9 % of the time. Tolerance: ±2
    # points around 25 % (the standard error at 20 000 draws is 0.3 points; the
    # scoring itself leaves d at about 24.1 % over 200 000 draws: its mean is less
    # variable because it rests on more ballots).
    items = list("abcd")
    blocks = self_excluded(items, failed="d")
    rates = first_place_rates(lambda rnd: [rnd.sample(b, 3) for b in blocks], items, 20_000, seed=1)
    for x in items:
        assert rates[x] == pytest.approx(0.25, abs=0.02), rates


def test_ties_are_not_broken_by_name():
    # Complete random ballots of 4 answers by 3 reviewers: ties are frequent; the old
    # alphabetical tie-break put "a" first 28.5 % and "d" 22.5 % of the time. ±2 points.
    items = list("abcd")
    rates = first_place_rates(lambda rnd: [rnd.sample(items, 4) for _ in range(3)], items, 20_000, seed=2)
    for x in items:
        assert rates[x] == pytest.approx(0.25, abs=0.02), rates


def test_seeded_tie_break_is_reproducible_and_reported():
    ballots = [list("ab"), list("ba")]
    orders = {seed: consensus_ranking(ballots, "ab", seed=seed).order for seed in range(400)}
    assert all(consensus_ranking(ballots, "ab", seed=s).order == o for s, o in orders.items())
    share_a = sum(o[0] == "a" for o in orders.values()) / len(orders)
    assert share_a == pytest.approx(0.5, abs=0.1)  # ±0.1: 5 standard errors at 400 seeds
    c = consensus_ranking(ballots, "ab", seed=0)
    assert [e.rank for e in c.ranking] == [1, 1] and all(e.tied for e in c.ranking)


def test_partial_ties_share_the_best_rank():
    c = consensus_ranking([list("abc"), list("bac")], "abc", seed=3)
    assert {e.member: e.rank for e in c.ranking} == {"a": 1, "b": 1, "c": 3}
    assert c.ranking[-1].member == "c" and not c.ranking[-1].tied


# ------------------------------------------------------------- in a session


async def test_three_member_session_reports_w_and_p_value():
    members = ["fake/alpha", "fake/beta", "fake/gamma"]
    council = Council.from_config(
        {"councils": {"default": {"members": members, "chairman": members[0]}}}, store=False
    )
    result = await council.run("Why is the sky blue?", seed=5, synthesis=False)
    await council.aclose()
    c = result.consensus
    assert c is not None and c.kendall_w is not None and c.kendall_w_p_value is not None
    assert c.agreement.test == "Durbin" and c.agreement.p_method == "exact"
    assert c.seed == 5
    dumped = result.model_dump(mode="json")["consensus"]
    assert math.isfinite(dumped["kendall_w_p_value"])


# ------------------------------------------ just above the old enumeration limit (issue 28, finding 5)


def _friedman(ranks: list[list[int]]) -> float:
    """Friedman's χ² from rank sums (no ties): 12/(n k (k+1)) Σ R_j² − 3 n (k+1)."""
    n, k = len(ranks), len(ranks[0])
    sums = [sum(r[j] for r in ranks) for j in range(k)]
    return 12 / (n * k * (k + 1)) * sum(s * s for s in sums) - 3 * n * (k + 1)


def test_three_by_four_complete_p_is_exact_by_brute_force():
    from itertools import permutations, product

    from scipy import stats as sps

    ballots = [list("abcd"), list("bacd"), list("abdc")]  # rank sums 4, 5, 10, 11: χ² = 7.4
    ranks = [[b.index(x) + 1 for x in "abcd"] for b in ballots]
    observed = _friedman(ranks)
    assert observed == pytest.approx(sps.friedmanchisquare(*zip(*ranks, strict=True)).statistic)
    perms = list(permutations(range(1, 5)))
    every = [_friedman([list(p) for p in arr]) for arr in product(perms, repeat=3)]  # 24³ = 13,824 arrangements
    brute = sum(s >= observed - 1e-9 for s in every) / len(every)
    assert brute == pytest.approx(0.0331, abs=5e-4)  # the chi-square approximation says 0.060
    a = agreement(ballots)
    assert a.p_method == "exact"
    assert a.p_value == pytest.approx(brute, abs=1e-12)
    assert sps.chi2.sf(observed, 3) > 0.05 > a.p_value  # the decision the approximation got wrong


def test_fixing_the_first_ballot_gives_the_same_exact_distribution():
    blocks = [list("abcd")] * 3
    fixed = concordance._null_distribution(tuple(tuple(b) for b in blocks))
    full = concordance._null_distribution(tuple(tuple(b) for b in blocks), fix_first=False)

    def tail(dist, v):  # P(SM ≥ v), with the tolerance the exact p uses
        return next((u for x, u in zip(*dist, strict=True) if x >= v - 1e-9), 0.0)

    assert len(full[0]) > 10
    for v in full[0] + fixed[0]:
        assert tail(fixed, v) == pytest.approx(tail(full, v), abs=1e-12)


# ------------------------------------------------- beyond the exact limit: a seeded Monte-Carlo p


def _brute_complete_p(ballots):
    """P(Friedman χ² ≥ observed) over every arrangement with the first ballot fixed (relabelling
    the answers leaves the statistic unchanged), by numpy over all 24^(n−1) of them."""
    from itertools import permutations

    items = sorted(ballots[0])
    k, n = len(items), len(ballots)
    ranks = np.array([[b.index(x) + 1 for x in items] for b in ballots])
    perms = np.array(list(permutations(range(1, k + 1))))
    grids = np.meshgrid(*[np.arange(len(perms))] * (n - 1), indexing="ij")
    sums = ranks[0] + sum(perms[g.ravel()] for g in grids)
    every = 12 / (n * k * (k + 1)) * (sums**2).sum(axis=1) - 3 * n * (k + 1)
    return float((every >= _friedman(ranks.tolist()) - 1e-9).mean()), len(every)


@pytest.mark.parametrize("ballots", [
    [list("abcd"), list("bacd"), list("abdc"), list("abcd"), list("cdab")],  # 5×4: 24⁴ arrangements
    [list("abcd"), list("bacd"), list("abdc"), list("bdac"), list("acbd")],
])  # fmt: skip
def test_beyond_the_exact_limit_the_p_is_monte_carlo_with_its_error_stated(ballots):
    from scipy import stats as sps

    exact, arrangements = _brute_complete_p(ballots)
    assert arrangements > concordance.EXACT_LIMIT  # just above the limit
    a = agreement(ballots)
    assert a.p_method == "monte-carlo" and a.p_draws == concordance.MC_DRAWS == 10_000
    assert a.p_standard_error == pytest.approx(math.sqrt(a.p_value * (1 - a.p_value) / a.p_draws))
    assert abs(a.p_value - exact) <= 4 * a.p_standard_error
    assert agreement(ballots) == a  # seeded: the same ballots, the same p
    chi_square = sps.chi2.sf(a.statistic, a.df)
    assert abs(a.p_value - exact) < abs(chi_square - exact)
    assert agreement(ballots, draws=0).p_method == "chi-square"


def test_monte_carlo_gets_the_decision_right_where_chi_square_did_not():
    ballots = [list("abcd"), list("bacd"), list("abdc")]  # exact 0.0331, χ² 0.060
    a = agreement(ballots, exact_limit=0)
    assert a.p_method == "monte-carlo" and a.p_value < 0.05
    assert a.p_value == pytest.approx(0.0331, abs=4 * a.p_standard_error)


def test_monte_carlo_matches_the_exact_distribution_on_incomplete_designs():
    items = "abcde"
    ballots = [[x for x in "bacde" if x != own] for own in items]  # five self-excluding ballots of four
    ballots[1] = ["c", "a", "e", "d"]
    blocks = tuple(tuple(sorted(b)) for b in ballots)
    assert concordance.arrangements(ballots) > concordance.EXACT_LIMIT
    a = agreement(ballots)
    values, upper = concordance._null_distribution(blocks)
    exact = next(u for v, u in zip(values, upper, strict=True) if v >= a.statistic - 1e-9)
    assert a.p_method == "monte-carlo" and abs(a.p_value - exact) <= 4 * a.p_standard_error
    assert 0 < a.p_value < 1


async def test_a_five_member_session_reports_a_monte_carlo_p_with_its_error():
    from council.cli.render import _agreement_text

    council = Council.from_config({"councils": {"default": {"members": [f"fake/m{i}" for i in range(5)]}}})
    try:
        result = await council.run("Which is the largest moon of Saturn?", seed=3)
    finally:
        await council.aclose()
    a = result.consensus.agreement
    assert a.p_method == "monte-carlo" and a.p_draws == 10_000 and 0 < a.p_standard_error < 0.006
    assert f"monte-carlo, 10000 draws, ± {a.p_standard_error:.2g}" in _agreement_text(result.consensus)


def test_a_null_computed_ahead_is_the_one_the_test_uses_and_is_not_drawn_again(monkeypatch):
    # The session computes the null from which answers each reviewer will rank, before the
    # rankings exist; the p of the rankings must then be a lookup, the same p as computed cold.
    members = [f"m{i}" for i in range(5)]
    ballots = [[m for m in reversed(members) if m != r] for r in members]  # self-excluding, 5 ballots of 4
    cold = concordance.agreement(ballots)
    assert cold is not None and cold.p_method == "monte-carlo"
    draws = []
    monkeypatch.setattr(
        concordance, "_sampled_null", concordance._Once(lambda *a: draws.append(a) or concordance._draw_null(*a))
    )
    job = concordance.null_job([sorted(b) for b in ballots])
    assert job is not None and draws == []
    job()
    assert len(draws) == 1
    assert concordance.null_job([list(b) for b in ballots]) is None  # cached: nothing left to do
    assert concordance.agreement(ballots) == cold
    assert len(draws) == 1
    # Ballots of fewer than two answers and single ballots test nothing: no work.
    assert concordance.null_job([["a", "b", "c"]]) is None
    assert concordance.null_job([["a"], ["b"], ["a", "b"]]) is None


def test_a_null_computed_ahead_covers_exact_designs_too(monkeypatch):
    monkeypatch.setattr(concordance, "_null_distribution", concordance._Once(concordance._enumerate_null))
    ballots = [["a", "b", "c", "d"], ["d", "c", "b", "a"], ["b", "a", "d", "c"], ["a", "c", "b", "d"]]
    job = concordance.null_job(ballots)
    assert job is not None
    job()
    assert concordance.null_job(ballots) is None
    assert concordance.agreement(ballots).p_method == "exact"


def test_threads_asking_for_the_same_null_together_compute_it_once():
    import threading
    import time

    calls = []

    def slow(key):
        calls.append(key)
        time.sleep(0.05)
        return [key]

    once = concordance._Once(slow, maxsize=2)
    results = []
    threads = [threading.Thread(target=lambda: results.append(once("x"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["x"] and results == [["x"]] * 4 and all(r is results[0] for r in results)
    once("y"), once("z")  # beyond maxsize the least recently used value goes
    assert not once.cached("x") and once.cached("y") and once.cached("z")
    assert once.locks == {}
