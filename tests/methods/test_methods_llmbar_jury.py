"""The jury methods on real data: LLMBar's five published evaluators (tests/data/llmbar/README.md).

The extract is first checked against LLMBar's own published statistics and the paper's GPT-4
figures; then Dawid–Skene combines the ten passes (five judges × two orders, one annotator each)
without the labels, against the best single judge, the plain majority and today's combination
(each judge's swap-combined verdict, then the strict majority of those); the panel analysis is
cross-checked against ``krippendorff.alpha``.
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from pathlib import Path

import crowdkit.aggregation as crowdkit
import krippendorff
import numpy as np
import pandas as pd
import pytest

from council.methods.calibration import calibration
from council.methods.dawid_skene import dawid_skene
from council.methods.isotonic import fit_isotonic
from council.methods.panel import PanelItem, majority, panel

DATA = Path(__file__).resolve().parents[1] / "data" / "llmbar"
JUDGES = ("GPT-4", "PaLM2", "ChatGPT", "LLaMA2", "Falcon")
ORDERS = ("ab", "ba")  # output_1 shown first, output_2 shown first
PASSES = tuple(f"{j}.{o}" for j in JUDGES for o in ORDERS)
SIZES = {"Natural": 100, "Neighbor": 134, "GPTInst": 92, "GPTOut": 47, "Manual": 46}
N = 419
BEST_JUDGE_BOTH_ORDERS = 339  # GPT-4 right in both orders (LLMBar's correct_both)
DS_OVER_PASSES = 351  # Dawid–Skene over the ten passes, measured below


def read(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


ROWS = read("verdicts.csv")


def right(verdicts, rows=ROWS) -> int:
    return sum(v == r["label"] for v, r in zip(verdicts, rows, strict=True))


def pass_votes(rows) -> list[dict[str, str]]:
    """One annotator per judge and order; a pass without a parseable verdict is not a vote."""
    return [{p: r[p] for p in PASSES if r[p]} for r in rows]


def swap_combined(row, judge) -> str | None:
    """The judge's verdict under council's consistency strategy: its passes agree, else a tie;
    None when a pass gave no verdict (the judge's comparison failed)."""
    first, second = row[f"{judge}.ab"], row[f"{judge}.ba"]
    if not (first and second):
        return None
    return first if first == second else "tie"


# ------------------------------------------------------------------ the extract


def test_the_extract_holds_the_419_pairs_of_the_five_sets_and_verdicts_only():
    assert len(ROWS) == N
    assert Counter(r["subset"] for r in ROWS) == SIZES
    assert len({r["id"] for r in ROWS}) == N
    assert set(ROWS[0]) == {"id", "subset", "label", "length_a", "length_b", *PASSES}
    assert {r["label"] for r in ROWS} == {"a", "b"}
    assert {r[p] for r in ROWS for p in PASSES} == {"a", "b", ""}
    blanks = Counter(p.split(".")[0] for r in ROWS for p in PASSES if not r[p])
    assert blanks == {"PaLM2": 8, "LLaMA2": 2}  # passes LLMBar could not parse


def test_every_count_matches_llmbars_published_statistics():
    published = read("published.csv")
    assert len(published) == len(SIZES) * len(JUDGES)
    for row in published:
        rows = [r for r in ROWS if r["subset"] == row["subset"]]
        ab, ba = f"{row['evaluator']}.ab", f"{row['evaluator']}.ba"
        ours = {
            "pairs": len(rows),
            "correct_False": sum(r[ab] == r["label"] for r in rows),
            "correct_True": sum(r[ba] == r["label"] for r in rows),
            "correct_both": sum(r[ab] == r["label"] == r[ba] for r in rows),
            "equal": sum(r[ab] == r[ba] for r in rows),
        }
        assert ours == {k: int(row[k]) for k in ours}, (row["subset"], row["evaluator"])


def test_gpt4_matches_the_papers_figures():
    ab = right([r["GPT-4.ab"] for r in ROWS])
    ba = right([r["GPT-4.ba"] for r in ROWS])
    both = sum(r["GPT-4.ab"] == r["label"] == r["GPT-4.ba"] for r in ROWS)
    assert (ab, ba, both) == (347, 361, BEST_JUDGE_BOTH_ORDERS)
    assert (round(100 * ab / N, 1), round(100 * ba / N, 1), round(100 * both / N, 1)) == (82.8, 86.2, 80.9)
    # Zeng et al. (2024), GPT-4 with Vanilla*: average accuracy of the two orders per set.
    paper = {"Natural": 95.5, "Neighbor": 78.7, "GPTInst": 86.4, "GPTOut": 77.7, "Manual": 80.4}
    for subset, size in SIZES.items():
        rows = [r for r in ROWS if r["subset"] == subset]
        average = (right([r["GPT-4.ab"] for r in rows], rows) + right([r["GPT-4.ba"] for r in rows], rows)) / 2
        assert round(100 * average / size, 1) == paper[subset]


# ------------------------------------------------------------------ Dawid–Skene on the ten passes


def test_dawid_skene_over_the_ten_passes_beats_the_best_judge_without_labels():
    fit = dawid_skene(pass_votes(ROWS))
    assert right(fit.verdicts) == DS_OVER_PASSES  # 83.8 %
    assert right(fit.verdicts) >= BEST_JUDGE_BOTH_ORDERS
    # The baselines it is compared with: the plain majority of the ten passes (a tie is not right),
    # the majority of the five in each order alone, and today's combination.
    ten = [majority([r[p] or None for p in PASSES]) for r in ROWS]
    assert right(ten) == 237  # 56.6 %
    per_order = [right([majority([r[f"{j}.{o}"] or None for j in JUDGES]) for r in ROWS]) for o in ORDERS]
    assert per_order == [246, 247]  # 58.7 %, 58.9 %
    today = [majority([swap_combined(r, j) for j in JUDGES]) for r in ROWS]
    assert right(today) == 155  # 37.0 %
    # It found GPT-4's passes the most reliable without being told: the largest diagonal.
    diagonal = {p: min(fit.confusion[p][c][c] for c in ("a", "b")) for p in PASSES}
    assert max(diagonal, key=diagonal.get).startswith("GPT-4.")


def test_dawid_skene_on_llmbar_is_crowdkits():
    votes = pass_votes(ROWS)
    ours = dawid_skene(votes)
    frame = pd.DataFrame(
        [(i, a, c) for i, item in enumerate(votes) for a, c in item.items()], columns=["task", "worker", "label"]
    )
    model = crowdkit.DawidSkene(n_iter=100)
    theirs = model.fit_predict(frame)
    assert ours.verdicts == [theirs[i] for i in range(N)]
    probas = model.probas_.sort_index()
    for i in range(N):
        assert ours.posteriors[i]["a"] == pytest.approx(probas.loc[i, "a"], abs=1e-6)


def test_shuffled_labels_leave_the_dawid_skene_verdicts_unchanged():
    labels = [r["label"] for r in ROWS]
    random.Random(58).shuffle(labels)
    shuffled = [{**r, "label": label} for r, label in zip(ROWS, labels, strict=True)]
    assert shuffled != ROWS
    original, again = dawid_skene(pass_votes(ROWS)), dawid_skene(pass_votes(shuffled))
    assert again.verdicts == original.verdicts
    assert again.posteriors == original.posteriors


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        # A judge's swap-combined verdict hides what its passes know: over those, with an
        # inconsistent judge's tie as a third class, or with the tie left out, DS falls far below.
        ("judges, tie as a class", 181),
        ("judges, ties left out", 201),
        # A pass without a verdict as a class of its own instead of a skipped vote: still above
        # the best judge, but a little worse, and it names "none" the truth of some pairs.
        ("passes, no verdict as a class", 347),
    ],
)
def test_other_unsupervised_variants_do_worse(variant, expected):
    if variant.startswith("judges"):
        votes = [{j: swap_combined(r, j) for j in JUDGES if swap_combined(r, j)} for r in ROWS]
        if variant.endswith("left out"):
            votes = [{j: v for j, v in item.items() if v != "tie"} for item in votes]
    else:
        votes = [{p: r[p] or "none" for p in PASSES} for r in ROWS]
    fit = dawid_skene(votes)
    assert right(fit.verdicts) == expected < DS_OVER_PASSES
    if variant.startswith("judges"):
        assert expected < BEST_JUDGE_BOTH_ORDERS
    else:
        assert Counter(fit.verdicts)["none"] == 4


def test_the_raw_posterior_is_overconfident_on_correlated_passes():
    """Dawid–Skene assumes the annotators independent given the truth; a judge's two passes are
    not, so the posterior overstates: about 0.99 on average for 83.8 % right."""
    fit = dawid_skene(pass_votes(ROWS))
    probabilities = [fit.probability(i) for i in range(N)]
    report = calibration(probabilities, [v == r["label"] for v, r in zip(fit.verdicts, ROWS, strict=True)])
    assert np.mean(probabilities) == pytest.approx(0.985, abs=0.001)
    assert report.ece == pytest.approx(0.148, abs=0.001)
    assert report.brier == pytest.approx(0.151, abs=0.001)


# ------------------------------------------------------------------ the panel


def panel_items() -> list[PanelItem]:
    items = []
    for r in ROWS:
        verdicts = {j: (v.upper() if v else None) for j in JUDGES for v in [swap_combined(r, j)]}
        shown_first = {"ab": "A", "ba": "B"}
        passes = [(j, shown_first[o], r[f"{j}.{o}"].upper()) for j in JUDGES for o in ORDERS if r[f"{j}.{o}"]]
        length_a, length_b = int(r["length_a"]), int(r["length_b"])
        longer = None if length_a == length_b else "A" if length_a > length_b else "B"
        combined = majority(list(verdicts.values()))
        items.append(PanelItem(verdicts, combined, passes, longer, r["label"].upper()))
    return items


def test_the_panel_on_llmbar():
    items = panel_items()
    result = panel(items, list(JUDGES))
    codes = {"A": 0, "B": 1, "TIE": 2}
    data = [[np.nan if it.verdicts[j] is None else codes[it.verdicts[j]] for it in items] for j in JUDGES]
    reference = krippendorff.alpha(reliability_data=np.array(data), level_of_measurement="nominal")
    assert result.krippendorff_alpha == pytest.approx(reference, abs=1e-12)
    assert result.krippendorff_alpha == pytest.approx(0.188, abs=0.001)
    assert result.mean_error_correlation == pytest.approx(0.296, abs=0.001)
    assert result.n_eff == pytest.approx(2.29, abs=0.01)  # five judges worth about two
    lo, hi = result.n_eff_ci
    assert 2.0 < lo < result.n_eff < hi < 2.6
    assert result.best_single_accuracy == pytest.approx(BEST_JUDGE_BOTH_ORDERS / N)
    # The plain majority of the five in each order (LLMBar's published verdicts), beside today's combination.
    by_order = result.majority_accuracy_per_order
    assert (by_order.a_first, by_order.b_first) == (246 / N, 247 / N)  # 58.7 %, 58.9 %
    assert result.majority_accuracy == pytest.approx((246 + 247) / (2 * N))  # 58.8 %
    assert result.combined_accuracy == pytest.approx(155 / N)  # 37.0 %
    gpt4 = result.judges[0]
    assert (gpt4.accuracy_per_order.a_first, gpt4.accuracy_per_order.b_first) == (347 / N, 361 / N)


def test_llmbar_dawid_skene_calibrated_on_the_other_half() -> None:
    # The isotonic map fitted on the even-numbered pairs, measured on the odd ones: both halves
    # hold every one of the five sets (they follow one another in the file).
    fit = dawid_skene(pass_votes(ROWS))
    probabilities = [fit.probability(i) for i in range(len(ROWS))]
    correct = [fit.verdicts[i] == r["label"] for i, r in enumerate(ROWS)]
    even, odd = range(0, len(ROWS), 2), range(1, len(ROWS), 2)
    mapping = fit_isotonic([probabilities[i] for i in even], [1.0 if correct[i] else 0.0 for i in even])
    raw = calibration([probabilities[i] for i in odd], [correct[i] for i in odd])
    calibrated = calibration([mapping(probabilities[i]) for i in odd], [correct[i] for i in odd])
    assert raw.ece == pytest.approx(0.136, abs=5e-4)
    assert calibrated.ece == pytest.approx(0.0275, abs=5e-4)
    assert raw.brier == pytest.approx(0.140, abs=5e-4)
    assert calibrated.brier == pytest.approx(0.130, abs=5e-4)
    assert calibrated.ece <= 0.05 < raw.ece
