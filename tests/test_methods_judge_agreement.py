"""Agreement statistics for labelled batches: Cohen's κ, the per-order table, MAE and
Spearman's ρ, against textbook values, numpy and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import rankdata, spearmanr

from council.methods.judge_agreement import (
    CATEGORIES,
    average_ranks,
    cohen_kappa,
    confusion_matrix,
    gold_agreement,
    label_agreement,
    spearman_rho,
)


def numpy_kappa(labels: list[str], verdicts: list[str]) -> float:
    """κ from the contingency table, written independently with numpy."""
    index = {c: i for i, c in enumerate(CATEGORIES)}
    table = np.zeros((3, 3))
    np.add.at(table, ([index[x] for x in labels], [index[y] for y in verdicts]), 1)
    table /= table.sum()
    po = np.trace(table)
    pe = table.sum(axis=1) @ table.sum(axis=0)
    return float((po - pe) / (1 - pe))


def test_kappa_textbook_two_raters_yes_no():
    # 50 items: both yes 20, yes/no 5, no/yes 10, both no 15 -> p_o = 0.7, p_e = 0.5, κ = 0.4
    pairs = [("A", "A")] * 20 + [("A", "B")] * 5 + [("B", "A")] * 10 + [("B", "B")] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)


def test_kappa_perfect_chance_and_undefined():
    assert cohen_kappa([("A", "A"), ("B", "B"), ("TIE", "TIE")]) == pytest.approx(1.0)
    # the judge always says A while the labels split evenly: no better than chance
    assert cohen_kappa([("A", "A"), ("B", "A")]) == pytest.approx(0.0)
    assert cohen_kappa([("A", "A"), ("A", "A")]) is None  # chance agreement is 1
    assert cohen_kappa([]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(CATEGORIES), st.sampled_from(CATEGORIES)), min_size=1, max_size=60))
def test_kappa_matches_numpy(pairs):
    labels, verdicts = [p[0] for p in pairs], [p[1] for p in pairs]
    ours = cohen_kappa(pairs)
    if ours is None:
        assert len(set(labels)) == 1 and set(labels) == set(verdicts)
    else:
        assert ours == pytest.approx(numpy_kappa(labels, verdicts), abs=1e-12)
    matrix = confusion_matrix(pairs)
    assert sum(sum(row.values()) for row in matrix.values()) == len(pairs)


def test_the_agreement_table_by_hand():
    # label, final verdict, pass winner with A shown first, pass winner with B shown first
    items = {
        "i1": ("A", "A", "A", "A"),
        "i2": ("B", "B", "B", "B"),
        "i3": ("A", "TIE", "A", "B"),
        "i4": ("TIE", "TIE", "TIE", "TIE"),
        "i5": ("B", "A", "A", "A"),
        "i6": ("TIE", "TIE", "A", "B"),
    }
    verdicts = {k: (v[0], v[1]) for k, v in items.items()}
    passes = [
        {"item_id": k, "judge": "j", "vote": 1, "shown_first": side, "valid": 1, "winner": v[2 if side == "A" else 3]}
        for k, v in items.items()
        for side in ("A", "B")
    ]
    passes.append({"item_id": "unlabelled", "judge": "j", "vote": 1, "shown_first": "A", "valid": 1, "winner": "A"})
    table = label_agreement(verdicts, passes)
    assert (table.labelled, table.agree, table.ties) == (6, 4, 3)
    assert table.accuracy == pytest.approx(4 / 6)
    # p_o = 4/6; labels 2/2/2, verdicts A 2, B 1, TIE 3 -> p_e = (4 + 2 + 6)/36 = 1/3; κ = (2/3 - 1/3)/(2/3)
    assert table.cohen_kappa == pytest.approx(0.5)
    assert table.per_order_accuracy.a_first == pytest.approx(4 / 6)
    assert table.per_order_accuracy.b_first == pytest.approx(3 / 6)
    assert table.per_order_correct == {"a_first": 4, "b_first": 3}
    assert table.per_order_passes == {"a_first": 6, "b_first": 6}
    assert (table.swap_pairs, table.consistent_pairs) == (6, 4)
    assert table.position_consistency == pytest.approx(4 / 6)
    assert table.confusion["B"] == {"A": 1, "B": 1, "TIE": 0}


def test_an_invalid_pass_picks_nothing_and_breaks_its_swap_pair():
    passes = [
        {"item_id": "x", "judge": "j", "vote": 1, "shown_first": "A", "valid": 0, "winner": None},
        {"item_id": "x", "judge": "j", "vote": 1, "shown_first": "B", "valid": 1, "winner": "A"},
    ]
    table = label_agreement({"x": ("A", "A")}, passes)
    assert table.per_order_accuracy.a_first == 0.0 and table.per_order_accuracy.b_first == 1.0
    assert table.swap_pairs == 0 and table.position_consistency is None


def test_without_swap_there_is_no_b_first_accuracy():
    passes = [{"item_id": "x", "judge": "j", "vote": 1, "shown_first": "A", "valid": 1, "winner": "A"}]
    table = label_agreement({"x": ("A", "A")}, passes)
    assert table.per_order_accuracy.b_first is None and table.position_consistency is None


# ----------------------------------------------------------------------- gold scores


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.floats(1, 5, allow_nan=False)), min_size=2, max_size=40))
def test_spearman_matches_scipy_with_ties(pairs):
    gold, judged = [float(g) for g, _ in pairs], [j for _, j in pairs]
    assert average_ranks(gold) == pytest.approx(list(rankdata(gold)))
    ours = spearman_rho(gold, judged)
    if len(set(gold)) == 1 or len(set(judged)) == 1:
        assert ours is None
    else:
        assert ours == pytest.approx(spearmanr(gold, judged).statistic, abs=1e-9)


def test_gold_agreement_by_hand():
    result = gold_agreement([(1.0, 2.0), (3.0, 3.5), (5.0, 4.0)])
    assert result.scored == 3
    assert result.mean_absolute_error == pytest.approx((1 + 0.5 + 1) / 3)
    assert result.spearman_rho == pytest.approx(1.0)  # same order
    assert gold_agreement([]).mean_absolute_error is None
    assert gold_agreement([(2.0, 3.0)]).spearman_rho is None
