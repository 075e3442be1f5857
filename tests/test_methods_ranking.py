"""Consensus methods (Borda, mean rank, Copeland, the registry) and Kendall's W, checked by hand and scipy."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from council.methods.concordance import kendalls_w
from council.methods.ranking import borda_scores, consensus_ranking, mean_ranks

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



# --------------------------------------------------------------------- Copeland and the registry
# docs/methods.md, "Copeland": five complete ballots where Copeland and Borda disagree.
#   3 x A B C, 2 x B C A.   A-B 3:2 -> A,  A-C 3:2 -> A,  B-C 5:0 -> B
#   Copeland: A 2, B 1, C 0 (A beats each other answer: a Condorcet winner)
#   normalised Borda: A (3*1 + 2*0)/5 = 3/5, B (3*1/2 + 2*1)/5 = 7/10, C (3*0 + 2*1/2)/5 = 1/5
CONDORCET = [list("ABC")] * 3 + [list("BCA")] * 2


def test_copeland_hand_worked():
    from fractions import Fraction

    from council.methods.ranking import copeland_scores, normalised_borda

    assert copeland_scores(CONDORCET) == {"A": 2, "B": 1, "C": 0}
    assert normalised_borda(CONDORCET) == {"A": Fraction(3, 5), "B": Fraction(7, 10), "C": Fraction(1, 5)}
    copeland = consensus_ranking(CONDORCET, "ABC", method="copeland")
    assert copeland.method == "copeland" and copeland.order == ["A", "B", "C"]
    assert [e.score for e in copeland.ranking] == [2.0, 1.0, 0.0]
    assert "Copeland" in copeland.tie_break
    assert consensus_ranking(CONDORCET, "ABC").order == ["B", "A", "C"]  # borda, the default


def test_copeland_pairwise_ties_and_partial_ballots():
    # The failed-review ballots of docs/methods.md, "Borda count": a-d and b-d meet 1:1.
    from fractions import Fraction

    from council.methods.ranking import copeland_scores

    ballots = [list("bdc"), list("dac"), list("adb")]
    assert copeland_scores(ballots) == {"a": Fraction(5, 2), "d": 2, "b": Fraction(3, 2), "c": 0}
    # pairs never ranked together count for neither; a ballot of one answer compares nothing
    assert copeland_scores([["x", "y"], ["z"]]) == {"x": 1, "y": 0}
    result = consensus_ranking(ballots, ["a", "b", "c", "d", "e"], method="copeland")
    assert result.order == ["a", "d", "b", "c", "e"]  # e: on no ballot, last, no score
    assert result.ranking[-1].score is None and result.ranking[-1].rank == 5


def test_copeland_ties_share_a_rank_and_the_seed_orders_them():
    # A cycle: A>B>C, B>C>A, C>A>B -> every pair 2:1, every answer one win.
    cycle = [list("ABC"), list("BCA"), list("CAB")]
    result = consensus_ranking(cycle, "ABC", method="copeland", seed=3)
    assert [e.rank for e in result.ranking] == [1, 1, 1]
    assert all(e.tied for e in result.ranking)
    orders = {tuple(consensus_ranking(cycle, "ABC", method="copeland", seed=s).order) for s in range(30)}
    assert len(orders) > 1


def test_mean_rank_method_orders_by_the_lower_mean_place():
    result = consensus_ranking(BALLOTS, "ABCD", method="mean_rank")
    assert result.order == ["A", "B", "C", "D"]
    assert [e.score for e in result.ranking] == pytest.approx([4 / 3, 2.0, 3.0, 11 / 3])
    # 2 ballots: x first once and third once (mean 2), y second twice (mean 2): an exact tie
    tie = consensus_ranking([list("xyz"), list("zyx")], "xyz", method="mean_rank")
    assert {e.member for e in tie.ranking if e.rank == 1} == {"x", "y", "z"}


def test_every_registered_method_keeps_the_common_fields():
    from council.methods.ranking import CONSENSUS_METHODS

    assert list(CONSENSUS_METHODS) == ["borda", "mean_rank", "copeland"]
    for name in CONSENSUS_METHODS:
        result = consensus_ranking(BALLOTS, "ABCD", method=name)
        assert result.method == name and result.ballots == 3
        assert result.kendall_w == pytest.approx(348 / 540)
        assert {e.member: e.borda for e in result.ranking} == {"A": 8, "B": 6, "C": 3, "D": 1}


def test_an_unknown_method_is_refused_with_the_choices():
    expected = "unknown consensus method 'condorcet'; choose one of: borda, mean_rank, copeland"
    with pytest.raises(ValueError, match=expected):
        consensus_ranking(BALLOTS, "ABCD", method="condorcet")


def test_a_new_method_is_one_registry_entry(monkeypatch):
    # Plurality (first places), registered from outside: the config accepts it and the consensus uses it.
    from collections import Counter
    from fractions import Fraction

    from council.config.schema import CouncilSpec
    from council.methods.ranking import CONSENSUS_METHODS, ConsensusMethod

    def plurality(ballots):
        firsts = Counter(b[0] for b in ballots if b)
        return {m: Fraction(firsts[m]) for b in ballots for m in b}

    monkeypatch.setitem(CONSENSUS_METHODS, "plurality", ConsensusMethod(plurality, True, "first places", "plurality"))
    assert CouncilSpec(members=["a", "b"], consensus="plurality").consensus == "plurality"
    result = consensus_ranking(BALLOTS, "ABCD", method="plurality")
    assert result.order[0] == "A" and result.ranking[0].score == 2.0 and result.tie_break == "first places"
    assert [e.rank for e in result.ranking][1:] == [2, 3, 3]


@settings(max_examples=200)
@given(st.lists(st.permutations("ABCD"), min_size=1, max_size=7), st.integers(0, 99))
def test_copeland_puts_a_condorcet_winner_first(ballots, seed):
    def beats(x, y):
        return sum(b.index(x) < b.index(y) for b in ballots) > len(ballots) / 2

    winners = [x for x in "ABCD" if all(beats(x, y) for y in "ABCD" if y != x)]
    result = consensus_ranking(ballots, "ABCD", method="copeland", seed=seed)
    if winners:
        assert result.order[0] == winners[0] and result.ranking[0].score == 3.0
        assert not result.ranking[0].tied
    assert sum(e.score for e in result.ranking) == 6  # every one of the 6 pairs hands out 1 point
