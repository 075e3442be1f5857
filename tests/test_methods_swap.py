"""Swap strategies and multi-judge averaging follow seeds 000, 001 and 002 exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from council.errors import UsageError
from council.judging import (
    DEFAULT_STRATEGY,
    DEPTH_CRITERIA,
    SWAP_STRATEGIES,
    combine_passes,
    flip,
    no_swap,
    pairwise_pass_model,
    swap_average,
    swap_conservative,
    swap_consistency,
)
from council.methods.averaging import average_across_judges
from council.methods.swap import margin_confidence, read_pass
from council.methods.verdicts import PairwiseMetadata, PairwiseResult

DEPTH = [c.name for c in DEPTH_CRITERIA]
VERDICTS = ("A", "B", "TIE")


def score_winner(a: int, b: int) -> str:
    return "A" if a > b else "B" if b > a else "TIE"


def make_pass(a_scores, b_scores, winner=None, confidence=0.8, criteria=DEPTH, criterion_winners=None):
    """A pass as the judge returns it; per-criterion winners default to the higher score."""
    winner = winner or score_winner(sum(a_scores), sum(b_scores))
    criterion_winners = criterion_winners or [score_winner(a, b) for a, b in zip(a_scores, b_scores, strict=True)]
    return {
        "comparison": {
            name: {
                "reasoning": f"reasoning on {name}",
                "a_strength": f"A on {name}",
                "b_strength": f"B on {name}",
                "winner": w,
                "a_score": a,
                "b_score": b,
            }
            for name, a, b, w in zip(criteria, a_scores, b_scores, criterion_winners, strict=True)
        },
        "overall_reasoning": "overall the scores decide",
        "differentiators": {"a_advantages": ["a+"], "b_advantages": ["b+"]},
        "winner": winner,
        "confidence": confidence,
    }


def mirror_pass(p):
    """The same pass with the labels exchanged (what the judge would say if A and B were renamed)."""
    return {
        "comparison": {
            name: {
                **c,
                "a_strength": c["b_strength"],
                "b_strength": c["a_strength"],
                "winner": flip(c["winner"]),
                "a_score": c["b_score"],
                "b_score": c["a_score"],
            }
            for name, c in p["comparison"].items()
        },
        "overall_reasoning": p["overall_reasoning"],
        "differentiators": {
            "a_advantages": p["differentiators"]["b_advantages"],
            "b_advantages": p["differentiators"]["a_advantages"],
        },
        "winner": flip(p["winner"]),
        "confidence": p["confidence"],
    }


# ----------------------------------------------------------------- seed 000 example

# Pass 1: Model as A, Reference as B. Pass 2 (swapped): Reference as A, Model as B.
SEED_PASS_1 = make_pass([4, 3, 4, 4, 3], [5, 5, 5, 5, 5], winner="B")
SEED_PASS_2 = make_pass([5, 4, 5, 5, 4], [3, 3, 3, 4, 3], winner="A")


def test_seed_000_worked_example():
    verdict = swap_average(SEED_PASS_1, SEED_PASS_2, scale=(1, 5))
    assert read_pass(SEED_PASS_1).a_total == 18 and read_pass(SEED_PASS_1).b_total == 25
    assert read_pass(SEED_PASS_2).a_total == 23 and read_pass(SEED_PASS_2).b_total == 16
    assert verdict.scores["A"].total == 17.0  # Model: avg(18, 16)
    assert verdict.scores["B"].total == 24.0  # Reference: avg(25, 23)
    assert verdict.winner == "B"  # Reference wins
    assert verdict.scores["A"].criteria == {
        "Granularity": 3.5,
        "Insight": 3.0,
        "Critique": 3.5,
        "Evidence": 4.0,
        "Density": 3.0,
    }
    assert verdict.scores["B"].criteria["Insight"] == 4.5
    # 0.5 + 0.5 * 7 / (5 criteria * 4 points)
    assert verdict.confidence == pytest.approx(0.675)
    assert verdict.position_consistency.consistent and not verdict.unstable


def test_seed_000_example_through_validated_models_and_combine():
    model = pairwise_pass_model(DEPTH_CRITERIA, (1, 5), True)
    p1, p2 = model.model_validate(SEED_PASS_1), model.model_validate(SEED_PASS_2)
    result = combine_passes(p1, p2, strategy="average", scale=(1, 5), judge_model="judge/x", evaluation_time_ms=12.5)
    assert result.success and result.winner == "B" and result.strategy == "average"
    assert result.scores["A"].total == 17.0 and result.scores["B"].total == 24.0
    assert result.max_total == 25
    assert result.metadata.positions_swapped and result.metadata.calls == 2
    assert result.metadata.judge_model == "judge/x" and result.metadata.evaluation_time_ms == 12.5
    # raw passes keep the labels the judge saw: in pass 2 "A" is the Reference
    assert result.raw_pass_2["comparison"]["Granularity"]["a_score"] == 5
    assert [c.criterion for c in result.comparison] == DEPTH
    assert all(c.winner == "B" for c in result.comparison if c.criterion != "Evidence")
    assert result.model_dump_json()


def test_tie_margin_is_inclusive():
    # A: avg(18, 16) = 17; B: avg(16, 16) = 16 -> difference exactly 1.0 -> TIE
    p1 = make_pass([4, 4, 4, 3, 3], [4, 3, 3, 3, 3], winner="A")
    p2 = make_pass([4, 3, 3, 3, 3], [4, 3, 3, 3, 3], winner="TIE")
    assert swap_average(p1, p2).winner == "TIE"
    assert swap_average(p1, p2).confidence == 0.5
    assert swap_average(p1, p2, tie_margin=0.5).winner == "A"
    with pytest.raises(ValueError):
        swap_average(p1, p2, tie_margin=-1)


def test_per_criterion_average_uses_a_share_of_the_margin():
    # one criterion differs by 0.5 after averaging: above 1.0/5 -> a per-criterion win
    p1 = make_pass([4, 3, 3, 3, 3], [3, 3, 3, 3, 3], winner="A")
    p2 = make_pass([3, 3, 3, 3, 3], [3, 3, 3, 3, 3], winner="TIE")
    verdict = swap_average(p1, p2)
    assert verdict.winner == "TIE"  # totals 15.5 vs 15
    assert [c.winner for c in verdict.comparison] == ["A", "TIE", "TIE", "TIE", "TIE"]


# ------------------------------------------------------- first-slot biased judge


def test_judge_preferring_the_first_slot_is_a_tie_under_agreement_rules():
    p1 = make_pass([4, 4, 4, 4, 4], [3, 3, 3, 3, 3], winner="A", confidence=0.9)  # A shown first wins
    p2 = make_pass([4, 4, 4, 4, 4], [3, 3, 3, 3, 3], winner="A", confidence=0.9)  # B shown first wins
    for strategy in (swap_conservative, swap_consistency):
        verdict = strategy(p1, p2)
        assert verdict.winner == "TIE"
        assert verdict.confidence == 0.5
        assert verdict.unstable
        assert verdict.position_consistency.model_dump() == {
            "first_pass_winner": "A",
            "second_pass_winner": "B",
            "consistent": False,
        }
        assert all(c.winner == "TIE" and c.consistent is False for c in verdict.comparison)
    # averaging cancels the bonus too: both sides averaged to 3.5 everywhere
    assert swap_average(p1, p2).winner == "TIE"


@given(
    true_a=st.lists(st.integers(1, 4), min_size=5, max_size=5),
    true_b=st.lists(st.integers(1, 4), min_size=5, max_size=5),
)
def test_constant_first_slot_bonus_cancels_under_average(true_a, true_b):
    bonus = [x + 1 for x in true_a], [x + 1 for x in true_b]
    biased = swap_average(make_pass(bonus[0], true_b), make_pass(bonus[1], true_a))
    unbiased = swap_average(make_pass(true_a, true_b), make_pass(true_b, true_a))
    assert biased.scores["A"].total - biased.scores["B"].total == sum(true_a) - sum(true_b)
    assert biased.winner == unbiased.winner


def test_consistent_passes_keep_the_winner_with_strategy_confidence():
    p1 = make_pass([5, 5, 4, 4, 4], [3, 3, 3, 3, 3], winner="A", confidence=0.9)
    p2 = make_pass([3, 3, 3, 3, 3], [5, 4, 4, 4, 4], winner="B", confidence=0.7)
    consistency, conservative = swap_consistency(p1, p2), swap_conservative(p1, p2)
    assert consistency.winner == conservative.winner == "A"
    assert consistency.confidence == pytest.approx(0.8)  # mean
    assert conservative.confidence == pytest.approx(0.7)  # the weaker position
    assert not consistency.unstable and consistency.position_consistency.consistent


def test_one_pass_tie_is_not_a_win():
    p1 = make_pass([4] * 5, [3] * 5, winner="A")
    p2 = make_pass([3] * 5, [3] * 5, winner="TIE")
    for strategy in (swap_conservative, swap_consistency):
        assert strategy(p1, p2).winner == "TIE" and strategy(p1, p2).unstable


def test_passes_over_different_criteria_are_refused():
    with pytest.raises(ValueError, match="different criteria"):
        swap_consistency(make_pass([3], [3], criteria=["x"]), make_pass([3], [3], criteria=["y"]))


def test_pass_2_text_is_labelled_as_seen_and_differentiators_mapped_back():
    p2_text = dict(SEED_PASS_2, overall_reasoning="A is deeper")
    verdict = swap_consistency(SEED_PASS_1, p2_text)
    assert verdict.overall_reasoning.startswith("Pass 1 (A shown first): overall the scores decide")
    assert "Pass 2 (B shown first; there 'A' is the original B): A is deeper" in verdict.overall_reasoning
    assert swap_consistency(SEED_PASS_1, SEED_PASS_2).overall_reasoning == "overall the scores decide"  # once
    p2 = dict(SEED_PASS_2, differentiators={"a_advantages": ["ref deep"], "b_advantages": ["model short"]})
    d = swap_consistency(SEED_PASS_1, p2).differentiators
    assert d.a_advantages == ["a+", "model short"] and d.b_advantages == ["b+", "ref deep"]


# ------------------------------------------------------------------ registry, combine


def test_registry_and_default():
    assert set(SWAP_STRATEGIES) == {"average", "conservative", "consistency"}
    assert DEFAULT_STRATEGY in ("consistency", "conservative")
    with pytest.raises(UsageError) as err:
        combine_passes(SEED_PASS_1, SEED_PASS_2, strategy="median")
    assert "average, conservative, consistency" in str(err.value) and "\n" not in str(err.value)


def test_no_swap_reports_the_single_pass():
    result = combine_passes(SEED_PASS_1)
    assert result.strategy == "none" and result.winner == "B" and result.confidence == 0.8
    assert result.position_consistency is None and not result.unstable
    assert result.scores["A"].total == 18 and result.scores["B"].total == 25
    assert not result.metadata.positions_swapped and result.metadata.calls == 1
    assert result.raw_pass_2 is None


def test_failure_result_is_explicit():
    meta = PairwiseMetadata(positions_swapped=True, calls=6)
    failed = PairwiseResult.failure("judge returned invalid JSON 3 times", strategy="consistency", metadata=meta)
    assert not failed.success and failed.error.startswith("judge returned") and failed.winner == "TIE"


# -------------------------------------------------------------------- properties

CRITERIA = ["accuracy", "clarity", "depth"]


@st.composite
def passes(draw, n=None, scale=(1, 5)):
    n = n or draw(st.integers(1, len(CRITERIA)))
    lo, hi = scale
    scores = st.lists(st.integers(lo, hi), min_size=n, max_size=n)
    return make_pass(
        draw(scores),
        draw(scores),
        winner=draw(st.sampled_from(VERDICTS)),
        confidence=draw(st.floats(0, 1)),
        criteria=CRITERIA[:n],
        criterion_winners=draw(st.lists(st.sampled_from(VERDICTS), min_size=n, max_size=n)),
    )


@st.composite
def pass_pairs(draw):
    n = draw(st.integers(1, len(CRITERIA)))  # both passes judge the same criteria
    return draw(passes(n)), draw(passes(n))


def mirrored(verdict):
    consistency = verdict.position_consistency
    return {
        "winner": flip(verdict.winner),
        "confidence": verdict.confidence,
        "criteria": [(c.criterion, flip(c.winner), c.b_score, c.a_score) for c in verdict.comparison],
        "scores": (verdict.scores["B"], verdict.scores["A"]),
        "unstable": verdict.unstable,
        "position": (
            (flip(consistency.second_pass_winner), flip(consistency.first_pass_winner)) if consistency else None
        ),
    }


def plain(verdict):
    return {
        "winner": verdict.winner,
        "confidence": verdict.confidence,
        "criteria": [(c.criterion, c.winner, c.a_score, c.b_score) for c in verdict.comparison],
        "scores": (verdict.scores["A"], verdict.scores["B"]),
        "unstable": verdict.unstable,
        "position": (
            (verdict.position_consistency.first_pass_winner, verdict.position_consistency.second_pass_winner)
            if verdict.position_consistency
            else None
        ),
    }


@settings(max_examples=300)
@given(pair=pass_pairs(), strategy=st.sampled_from(sorted(SWAP_STRATEGIES)))
def test_exchanging_a_and_b_mirrors_the_verdict(pair, strategy):
    """Judging (B, A) runs the same two passes in the other order: the verdict must mirror."""
    p1, p2 = pair
    fn = SWAP_STRATEGIES[strategy]
    assert plain(fn(p2, p1)) == mirrored(fn(p1, p2))


@given(p=passes())
def test_no_swap_mirrors_a_mirrored_pass(p):
    assert plain(no_swap(mirror_pass(p))) == mirrored(no_swap(p))


@settings(max_examples=300)
@given(pair=pass_pairs())
def test_conservative_and_consistency_pick_the_same_winners(pair):
    """Both demand agreement across positions; they differ only in confidence."""
    a, b = swap_conservative(*pair), swap_consistency(*pair)
    assert a.winner == b.winner
    assert [c.winner for c in a.comparison] == [c.winner for c in b.comparison]
    assert a.unstable == b.unstable == (pair[0]["winner"] != flip(pair[1]["winner"]))
    if a.winner != "TIE":
        assert a.confidence <= b.confidence


@settings(max_examples=300)
@given(pair=pass_pairs())
def test_average_winner_follows_the_averaged_totals(pair):
    verdict = swap_average(*pair)
    diff = verdict.scores["A"].total - verdict.scores["B"].total
    assert verdict.winner == ("TIE" if abs(diff) <= 1.0 else "A" if diff > 0 else "B")
    assert 0.5 <= verdict.confidence <= 1.0
    if all(c.winner == "TIE" for c in verdict.comparison):
        assert verdict.winner == "TIE"


@given(st.floats(0, 20), st.floats(0, 20))
def test_margin_confidence_is_monotone_and_bounded(d1, d2):
    lo_d, hi_d = sorted((d1, d2))
    assert 0.5 <= margin_confidence(lo_d, 5, (1, 5)) <= margin_confidence(hi_d, 5, (1, 5)) <= 1.0
    assert margin_confidence(20, 5, (1, 5)) == 1.0


# ----------------------------------------------------------------------- averaging


def judged(a_total, b_total, winner, *, success=True, scale=(1, 5)):
    """A PairwiseResult with one criterion carrying the totals."""
    if not success:
        return PairwiseResult.failure("timeout", strategy="average", metadata=PairwiseMetadata(positions_swapped=True))
    return PairwiseResult(
        winner=winner,
        confidence=0.7,
        scores={
            "A": {"criteria": {"depth": a_total}, "total": a_total},
            "B": {"criteria": {"depth": b_total}, "total": b_total},
        },
        scale=scale,
        strategy="average",
        metadata=PairwiseMetadata(positions_swapped=True),
    )


def test_multi_provider_average_follows_seed_000():
    seed_result = combine_passes(SEED_PASS_1, SEED_PASS_2, strategy="average")
    other = combine_passes(
        make_pass([4, 4, 4, 4, 4], [4, 4, 4, 4, 4], winner="TIE"),
        make_pass([4, 4, 4, 4, 4], [4, 4, 4, 4, 4], winner="TIE"),
        strategy="average",
    )
    verdict = average_across_judges({"gpt": seed_result, "gemini": other})
    assert verdict.scores["A"].total == pytest.approx((17.0 + 20.0) / 2)
    assert verdict.scores["B"].total == pytest.approx((24.0 + 20.0) / 2)
    assert verdict.scores["A"].criteria["Granularity"] == pytest.approx((3.5 + 4.0) / 2)
    assert verdict.winner == "B"  # 18.5 vs 22.0
    assert verdict.per_judge["gpt"].winner == "B" and verdict.per_judge["gemini"].winner == "TIE"
    assert verdict.agreement == 0.5


def test_multi_provider_tie_margin_and_exclusions():
    verdict = average_across_judges(
        {"x": judged(4.0, 3.0, "A"), "y": judged(3.0, 3.0, "TIE"), "z": judged(0, 0, "TIE", success=False)}
    )
    assert verdict.winner == "TIE"  # 3.5 vs 3.0
    assert verdict.judges == ["x", "y"] and verdict.excluded == {"z": "timeout"}
    with pytest.raises(ValueError, match="no judge"):
        average_across_judges({"z": judged(0, 0, "TIE", success=False)})
    with pytest.raises(ValueError, match="different scales"):
        average_across_judges({"x": judged(4, 3, "A"), "y": judged(4, 3, "A", scale=(1, 10))})
