"""Dawid–Skene (council.methods.dawid_skene) against crowd-kit's ``DawidSkene`` on the same votes,
a hand-computed example, and recovery on a seeded simulation."""

from __future__ import annotations

import random

import crowdkit.aggregation as crowdkit
import pandas as pd
import pytest

from council.methods.dawid_skene import dawid_skene

CLASSES = ("A", "B", "TIE")


def simulated(seed: int, items: int = 300, annotators: int = 6) -> tuple[list[dict[str, str]], list[str]]:
    """Votes of annotators of mixed skill (some biased towards A, the first slot), and the truth."""
    rng = random.Random(seed)
    skill = [rng.uniform(0.45, 0.9) for _ in range(annotators)]
    lean = [rng.choice(CLASSES) for _ in range(annotators)]
    truth = [rng.choice(("A", "A", "B", "B", "TIE")) for _ in range(items)]
    votes = []
    for t in truth:
        item = {}
        for j in range(annotators):
            if rng.random() < 0.1:
                continue  # an annotator that skipped the item (a failed pass)
            item[f"j{j}"] = t if rng.random() < skill[j] else (lean[j] if rng.random() < 0.6 else rng.choice(CLASSES))
        votes.append(item)
    return votes, truth


def crowd_kit_fit(votes: list[dict[str, str]]):
    rows = [(i, a, c) for i, item in enumerate(votes) for a, c in item.items()]
    data = pd.DataFrame(rows, columns=["task", "worker", "label"])
    return crowdkit.DawidSkene(n_iter=100, tol=1e-5).fit(data)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_same_posteriors_and_verdicts_as_crowd_kit(seed: int) -> None:
    votes, _ = simulated(seed)
    ours = dawid_skene(votes)
    theirs = crowd_kit_fit(votes)
    assert list(ours.classes) == sorted(theirs.probas_.columns)
    for i, post in enumerate(ours.posteriors):
        for c in ours.classes:
            assert post[c] == pytest.approx(theirs.probas_.loc[i, c], abs=1e-9)
    assert ours.verdicts == [theirs.labels_.loc[i] for i in range(len(votes))]
    for c in ours.classes:
        assert ours.priors[c] == pytest.approx(theirs.priors_.loc[c], abs=1e-9)
    for (worker, observed), row in theirs.errors_.iterrows():
        for true in ours.classes:
            assert ours.confusion[worker][observed][true] == pytest.approx(row[true], abs=1e-9)
    assert ours.iterations == len(theirs.loss_history_)


def test_a_hand_computed_example() -> None:
    """Two annotators that always agree, on two items: the majority shares start at 1/0, so the
    posteriors stay at the votes (up to the EPS floor) and the priors are the class shares."""
    fit = dawid_skene([{"x": "A", "y": "A"}, {"x": "B", "y": "B"}])
    assert fit.verdicts == ["A", "B"]
    assert fit.priors == pytest.approx({"A": 0.5, "B": 0.5})
    assert fit.probability(0) == pytest.approx(1.0, abs=1e-9)
    # x's confusion: given true A it said A (1), given true B it said B (1).
    assert fit.confusion["x"]["A"]["A"] == pytest.approx(1.0) and fit.confusion["x"]["B"]["A"] < 1e-9


def test_recovers_the_truth_better_than_the_majority_on_a_seeded_simulation() -> None:
    """Two good annotators among four that lean to the first slot: the majority is misled, DS is not."""
    rng = random.Random(11)
    truth = [rng.choice(("A", "B")) for _ in range(400)]
    votes = []
    for t in truth:
        item = {f"good{j}": t if rng.random() < 0.9 else ("B" if t == "A" else "A") for j in range(2)}
        item |= {f"lean{j}": "A" if rng.random() < 0.8 else t for j in range(4)}
        votes.append(item)
    fit = dawid_skene(votes)
    ds = sum(v == t for v, t in zip(fit.verdicts, truth, strict=True)) / len(truth)
    majority = 0
    for item, t in zip(votes, truth, strict=True):
        a = sum(c == "A" for c in item.values())
        majority += ("A" if a > 3 else "B" if a < 3 else None) == t
    assert ds >= 0.85 > majority / len(truth) + 0.15, (ds, majority / len(truth))


def test_no_votes() -> None:
    assert dawid_skene([]).verdicts == []
    assert dawid_skene([{}]).verdicts == [None]
