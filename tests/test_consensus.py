"""Borda, mean rank, Kendall's W and Bradley–Terry against hand-worked examples and scipy."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from council.session.consensus import borda_scores, consensus_ranking, kendalls_w, mean_ranks

# Hand-worked: 3 reviewers, 4 answers.
#   R1: A B C D -> A3 B2 C1 D0
#   R2: B A D C -> B3 A2 D1 C0
#   R3: A C B D -> A3 C2 B1 D0
# Borda A=8 B=6 C=3 D=1; mean ranks A=4/3 B=2 C=3 D=11/3
# Rank sums A=4 B=6 C=9 D=11, mean 7.5, S=29, W = 12*29 / (9*(64-4)) = 0.6444...
BALLOTS = [list("ABCD"), list("BADC"), list("ACBD")]


def test_borda_hand_worked():
    assert borda_scores(BALLOTS) == {"A": 8, "B": 6, "C": 3, "D": 1}


def test_mean_rank_hand_worked():
    means = mean_ranks(BALLOTS)
    assert means["A"] == pytest.approx(4 / 3)
    assert means["B"] == pytest.approx(2.0)
    assert means["C"] == pytest.approx(3.0)
    assert means["D"] == pytest.approx(11 / 3)


def test_kendalls_w_hand_worked():
    assert kendalls_w(BALLOTS) == pytest.approx(348 / 540)


def test_consensus_order_and_fields():
    c = consensus_ranking(BALLOTS, "ABCD")
    assert c.order == ["A", "B", "C", "D"]
    top = c.ranking[0]
    assert (top.rank, top.borda, top.first_places, top.ballots) == (1, 8, 2, 3)
    assert not any(e.tied_with_next for e in c.ranking)


def test_ballots_of_different_lengths_are_scored_per_ballot():
    # Raw Borda ties A and B at 2 points; per ballot B was first on its only ballot (1.0)
    # while A averaged (1/2 + 0 + 1) / 3 = 1/2 and C (0 + 1 + 0) / 3 = 1/3.
    ballots = [["B", "A", "C"], ["C", "A"], ["A", "C"]]
    assert borda_scores(ballots) == {"B": 2, "A": 2, "C": 1}
    c = consensus_ranking(ballots, ["A", "B", "C"])
    assert c.order == ["B", "A", "C"]
    assert [e.score for e in c.ranking] == pytest.approx([1.0, 0.5, 1 / 3])


def test_full_tie_is_reported_and_shares_the_rank():
    c = consensus_ranking([["B", "A"], ["A", "B"]], ["B", "A"])
    assert [e.rank for e in c.ranking] == [1, 1]
    assert c.ranking[0].tied_with_next is True and all(e.tied for e in c.ranking)


def test_unranked_candidate_comes_last():
    c = consensus_ranking([["A", "B"]], ["A", "B", "Z"])
    assert c.order[-1] == "Z"
    assert c.ranking[-1].mean_rank is None


def test_identical_ballots_have_full_agreement():
    assert kendalls_w([list("ABCDE")] * 4) == pytest.approx(1.0)


def test_two_opposite_ballots_have_no_agreement():
    assert kendalls_w([list("ABCD"), list("DCBA")]) == pytest.approx(0.0)


def test_w_undefined_with_one_ballot():
    assert kendalls_w([list("ABC")]) is None


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(3, 7), st.randoms(use_true_random=False))
def test_w_matches_textbook_formula_and_spearman_identity(m, n, rnd):
    items = [f"x{i}" for i in range(n)]
    ballots = [rnd.sample(items, n) for _ in range(m)]
    # Textbook W from rank sums.
    sums = {x: sum(b.index(x) + 1 for b in ballots) for x in items}
    mean = m * (n + 1) / 2
    s = sum((v - mean) ** 2 for v in sums.values())
    w_textbook = 12 * s / (m**2 * (n**3 - n))
    assert kendalls_w(ballots) == pytest.approx(w_textbook)
    # Independent reference: mean pairwise Spearman rho from scipy.
    rhos = []
    for a, b in itertools.combinations(ballots, 2):
        rhos.append(spearmanr([a.index(x) for x in items], [b.index(x) for x in items]).statistic)
    assert w_textbook == pytest.approx(((m - 1) * sum(rhos) / len(rhos) + 1) / m)


@settings(max_examples=60, deadline=None)
@given(st.integers(4, 7), st.randoms(use_true_random=False))
def test_partial_ballots_w_in_unit_interval(n, rnd):
    # self-review excluded: reviewer i ranks everyone but itself
    items = [f"m{i}" for i in range(n)]
    ballots = [rnd.sample([x for x in items if x != me], n - 1) for me in items]
    w = kendalls_w(ballots)
    assert w is not None and 0.0 <= w <= 1.0


def test_three_members_agreeing_have_full_agreement():
    # Three members, self-review excluded: any two ballots share one answer only; the
    # three ballots follow one order (a > b > c), which is perfect agreement.
    assert kendalls_w([["b", "c"], ["a", "c"], ["a", "b"]]) == pytest.approx(1.0)


def test_partial_identical_preferences_agree_fully():
    truth = ["a", "b", "c", "d", "e"]
    ballots = [[x for x in truth if x != me] for me in truth]
    assert kendalls_w(ballots) == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(1, 5), st.randoms(use_true_random=False))
def test_borda_total_is_fixed_and_order_is_deterministic(n, m, rnd):
    items = [f"x{i}" for i in range(n)]
    ballots = [rnd.sample(items, n) for _ in range(m)]
    assert sum(borda_scores(ballots).values()) == m * n * (n - 1) / 2
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert consensus_ranking(ballots, items).order == consensus_ranking(ballots, shuffled).order

