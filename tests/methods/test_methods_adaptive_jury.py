"""The adaptive jury's stopping rule (council.methods.adaptive_jury): a hand-computed example, the
information against scipy's entropies, and a seeded simulation of the level it claims."""

from __future__ import annotations

import random

import pytest
from scipy.stats import entropy

from council.methods.adaptive_jury import (
    SequentialJury,
    asking_order,
    expected_agreement,
    information,
    is_sure,
    posterior,
    posterior_verdict,
)

PRIOR = {"A": 0.5, "B": 0.5}
# confusion[annotator][observed][true]
X = {"A": {"A": 0.8, "B": 0.3}, "B": {"A": 0.2, "B": 0.7}}
Y = {"A": {"A": 0.9, "B": 0.2}, "B": {"A": 0.1, "B": 0.8}}
CONFUSION = {"x": X, "y": Y}


def test_the_posterior_is_the_hand_computed_one():
    # A: .5·.8·.9 = .36, B: .5·.3·.2 = .03 -> P(A) = .36 / .39
    post = posterior(PRIOR, CONFUSION, {"x": "A", "y": "A"})
    assert post["A"] == pytest.approx(0.36 / 0.39)
    # A: .5·.8·.1 = .04, B: .5·.3·.8 = .12 -> P(B) = .75
    assert posterior_verdict(posterior(PRIOR, CONFUSION, {"x": "A", "y": "B"})) == ("B", pytest.approx(0.75))
    assert not is_sure(post, 0.95) and is_sure(post, 0.9)


def test_a_vote_the_matrices_cannot_weigh_tells_nothing():
    assert posterior(PRIOR, CONFUSION, {"x": "TIE", "z": "A"}) == PRIOR


def test_equal_posteriors_are_a_tie_and_never_sure():
    post = posterior(PRIOR, CONFUSION, {})
    assert posterior_verdict(post) == ("TIE", 0.5)
    assert not is_sure(post, 0.5)


def test_the_information_is_the_entropy_of_the_vote_less_its_entropy_given_the_class():
    for matrix in (X, Y):
        q = [sum(PRIOR[t] * matrix[o][t] for t in PRIOR) for o in ("A", "B")]
        given = sum(PRIOR[t] * entropy([matrix[o][t] for o in ("A", "B")], base=2) for t in PRIOR)
        assert information(PRIOR, matrix) == pytest.approx(entropy(q, base=2) - given)
    coin = {"A": {"A": 0.5, "B": 0.5}, "B": {"A": 0.5, "B": 0.5}}
    assert information(PRIOR, coin) == pytest.approx(0.0)


def test_the_most_informative_per_dollar_is_asked_first():
    assert information(PRIOR, Y) > information(PRIOR, X)
    assert asking_order(PRIOR, CONFUSION, {"x": 1.0, "y": 1.0}) == ["y", "x"]
    assert asking_order(PRIOR, CONFUSION, {"x": 1.0, "y": 10.0}) == ["x", "y"]  # y is not 10 times as informative
    assert asking_order(PRIOR, CONFUSION, {"x": 0.0, "y": 1.0}) == ["x", "y"]  # free first
    assert asking_order(PRIOR, CONFUSION, {"x": None, "y": 10.0}) == ["y", "x"]  # a price unknown: information alone


def test_the_expected_agreement_is_the_hand_computed_one():
    # After x said A: P(A) = .4 / .55. y says A with .72727·.9 + .27273·.2 = .70909 (then A stays
    # the verdict, P(A) = .923), B with .29091 (then B wins, .75): the verdict stays with .70909.
    p_a = 0.4 / 0.55
    assert expected_agreement(PRIOR, CONFUSION, {"x": "A"}, ["y"]) == pytest.approx(p_a * 0.9 + (1 - p_a) * 0.2)
    assert expected_agreement(PRIOR, CONFUSION, {"x": "A", "y": "A"}, []) == 1.0


def test_the_sequential_jury_stops_at_the_first_vote_that_makes_it_sure():
    jury = SequentialJury(PRIOR, CONFUSION, ["y", "x"], 0.9)
    assert jury.next() == "y"
    jury.add("y", "A")  # P(A) = .45 / .55 = .818
    assert not jury.sure and jury.next() == "x"
    jury.add("x", "A")  # .923
    assert jury.sure and jury.next() is None and jury.unasked == []
    assert jury.verdict == ("A", pytest.approx(0.36 / 0.39))
    failed = SequentialJury(PRIOR, CONFUSION, ["y", "x"], 0.9)
    failed.add("y", None)  # a failed pass is asked, and tells nothing
    assert failed.next() == "x" and failed.post == PRIOR


def _simulated(seed: int, n: int, confidence: float):
    """Items of a five-annotator panel drawn from the model; each run by the sequential jury, and
    with every annotator asked."""
    rng = random.Random(seed)
    prior = {"A": 0.45, "B": 0.4, "TIE": 0.15}
    classes = list(prior)
    confusion = {}
    for a, right in enumerate((0.9, 0.8, 0.75, 0.65, 0.6)):
        confusion[a] = {o: {t: right if o == t else (1 - right) / 2 for t in classes} for o in classes}
    order = asking_order(prior, confusion, dict.fromkeys(confusion, 1.0))
    out = []
    for _ in range(n):
        truth = rng.choices(classes, weights=[prior[c] for c in classes])[0]
        votes = {a: rng.choices(classes, weights=[confusion[a][o][truth] for o in classes])[0] for a in confusion}
        jury = SequentialJury(prior, confusion, order, confidence)
        while (a := jury.next()) is not None:
            jury.add(a, votes[a])
        full = posterior_verdict(posterior(prior, confusion, votes))[0]
        expected = expected_agreement(prior, confusion, jury.votes, jury.unasked)
        out.append((truth, jury.verdict[0], jury.sure, full, len(jury.asked), expected))
    return out


def test_seeded_simulation_stopped_verdicts_are_right_at_least_as_often_as_claimed():
    confidence = 0.9
    runs = _simulated(58, 4000, confidence)
    stopped = [r for r in runs if r[2]]
    accuracy = sum(truth == verdict for truth, verdict, *_ in stopped) / len(stopped)
    se = (confidence * (1 - confidence) / len(stopped)) ** 0.5
    assert len(stopped) > 2000
    assert accuracy >= confidence - 3 * se
    assert sum(r[4] for r in runs) < 0.8 * 5 * len(runs)  # it does stop early


def test_seeded_simulation_the_expected_agreement_with_the_full_panel_is_what_happens():
    runs = _simulated(59, 4000, 0.9)
    measured = sum(verdict == full for _, verdict, _, full, _, _ in runs) / len(runs)
    expected = sum(r[5] for r in runs) / len(runs)
    assert measured == pytest.approx(expected, abs=3 * (expected * (1 - expected) / len(runs)) ** 0.5 + 1e-9)
    assert expected < 1.0
