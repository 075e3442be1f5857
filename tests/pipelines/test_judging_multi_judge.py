"""Several judges are combined under the chosen strategy, and confidence_level never contradicts the winner."""

from __future__ import annotations

import pytest
from fake_judges import fake_client, pairwise_reply
from hypothesis import given, settings
from hypothesis import strategies as st

from council.judging.engine import compare
from council.methods.averaging import combine_judges
from council.methods.verdicts import PairwiseMetadata, PairwiseResult, SideScores
from council.providers.base import ChatRequest
from council.providers.client import ModelClient
from council.testing.replies import answer_slots

PAIRS = [
    ("What is 2 + 2?", "4.", "Four, because two and two make four."),
    ("Capital of France?", "Paris.", "It is Paris, on the Seine."),
    ("Boiling point of water?", "100 °C at sea level.", "About 100 degrees Celsius."),
    ("Largest planet?", "Jupiter.", "Saturn, probably."),
    ("Who wrote Hamlet?", "Shakespeare.", "William Shakespeare wrote it around 1600."),
]


@pytest.mark.parametrize("votes", [1, 3])
async def test_two_first_position_judges_give_tie_in_every_run_under_consistency(votes):
    # Each judge alone gives TIE (it picks the first slot in both orders); combining their
    # averaged scores used to name B in about half of these runs.
    for prompt, a, b in PAIRS:
        for first, second in ((a, b), (b, a)):
            judges = [fake_client("fake/j1+first"), fake_client("fake/j2+first")]
            outcome = await compare(prompt, first, second, judges=judges, strategy="consistency", votes=votes,
                                    store=None)
            assert [j.result.winner for j in outcome.judges] == ["TIE", "TIE"]
            assert outcome.winner == "TIE", (prompt, first, outcome.scores)
            assert outcome.judges_verdict.rule == "majority of verdicts"
            assert outcome.averaged is None
            assert outcome.unstable and outcome.flagged_for_review


def first_slot_judge(name: str, original_a: str) -> ModelClient:
    """A judge that always names the first slot, scoring it higher when B is shown first: alone it
    gives TIE (inconsistent passes), but its averaged scores favour B by 4 points."""
    criteria = ["accuracy", "completeness", "specificity", "clarity"]

    def reply(request: ChatRequest) -> str:
        slots = answer_slots(request.messages)
        a_first = slots.get("A") == original_a
        high, low = (4, 2) if a_first else (5, 1)
        return pairwise_reply(criteria, [high] * 4, [low] * 4, "A")

    return fake_client(f"fake/{name}", script=[reply] * 20)


@pytest.mark.parametrize("strategy", ["consistency", "conservative"])
async def test_averaged_scores_do_not_override_the_judges_verdicts(strategy):
    prompt, a, b = PAIRS[1]
    judges = [first_slot_judge("j1", a), first_slot_judge("j2", a)]
    outcome = await compare(prompt, a, b, judges=judges, strategy=strategy, store=None)
    assert [j.result.winner for j in outcome.judges] == ["TIE", "TIE"]
    assert outcome.scores["B"].total - outcome.scores["A"].total == pytest.approx(4.0)
    assert outcome.winner == "TIE" and outcome.confidence == 0.5  # score averaging named B here
    averaged = await compare(prompt, a, b, judges=[first_slot_judge("j1", a), first_slot_judge("j2", a)],
                             strategy="average", store=None)
    assert averaged.winner == "B"  # seed 000's averaging, which belongs to ``average``
    # under ``average`` each judge's own verdict comes from its averaged scores too: both name B
    assert [j.result.winner for j in averaged.judges] == ["B", "B"] and averaged.confidence_level == "high"


async def test_conservative_needs_every_judge():
    judges = [fake_client("fake/j1+first"), fake_client("fake/j2+first")]
    outcome = await compare(*PAIRS[0], judges=judges, strategy="conservative", store=None)
    assert outcome.winner == "TIE" and outcome.judges_verdict.rule == "unanimous verdicts"


def result(winner: str, confidence: float = 0.9, a: float = 10.0, b: float = 10.0) -> PairwiseResult:
    return PairwiseResult(
        success=True,
        winner=winner,
        confidence=confidence,
        scores={"A": SideScores(criteria={"x": a}, total=a), "B": SideScores(criteria={"x": b}, total=b)},
        scale=(1, 5),
        max_total=5,
        strategy="consistency",
        metadata=PairwiseMetadata(positions_swapped=True),
    )


def test_majority_unanimity_and_averaging_rules():
    r = {"j1": result("A", 0.9), "j2": result("A", 0.7), "j3": result("B", 0.8)}
    v, avg = combine_judges(r, strategy="consistency")
    assert (v.winner, v.confidence_level, avg) == ("A", "moderate", None)
    assert v.confidence == pytest.approx(0.8)  # mean of the two judges that named A
    v, _ = combine_judges(r, strategy="conservative")
    assert (v.winner, v.confidence, v.confidence_level, v.flagged_for_review) == ("TIE", 0.5, "low", True)
    v, _ = combine_judges({"j1": result("A", 0.9), "j2": result("A", 0.6)}, strategy="conservative")
    assert (v.winner, v.confidence, v.confidence_level) == ("A", 0.6, "high")
    v, _ = combine_judges({"j1": result("A"), "j2": result("B")}, strategy="consistency")
    assert (v.winner, v.confidence_level) == ("TIE", "low")
    # average: the scores decide (A 3.0 + 1.5 = 4.5 apart on average > the 1-point margin)
    v, avg = combine_judges({"j1": result("TIE", a=12, b=6), "j2": result("TIE", a=9, b=6)}, strategy="average")
    assert v.winner == "A" and avg is not None and avg.winner == "A"
    assert v.confidence_level == "low"  # neither judge named A itself


VERDICTS = st.sampled_from(["A", "B", "TIE"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(VERDICTS, st.floats(0, 1), st.integers(1, 20), st.integers(1, 20)), min_size=1,
                max_size=5),
       st.sampled_from(["average", "conservative", "consistency"]))
def test_confidence_level_never_contradicts_the_winner(judged, strategy):
    results = {f"j{i}": result(w, c, a, b) for i, (w, c, a, b) in enumerate(judged)}
    v, _ = combine_judges(results, strategy=strategy, tie_margin=1.0)
    named = sum(1 for w, *_ in judged if w == v.winner)
    # high only when every judge named the winner; moderate only with a strict majority
    if v.confidence_level == "high":
        assert named == len(judged)
    elif v.confidence_level == "moderate":
        assert 2 * named > len(judged)
    else:
        assert 2 * named <= len(judged) and v.flagged_for_review
    if strategy != "average":
        # the verdict rules themselves: unanimity or strict majority, else TIE
        counts = {w: sum(1 for x, *_ in judged if x == w) for w in ("A", "B", "TIE")}
        need = len(judged) if strategy == "conservative" else len(judged) // 2 + 1
        decided = [w for w, n in counts.items() if n >= need]
        assert v.winner == (decided[0] if decided else "TIE")


def test_a_failed_judge_is_left_out_and_listed():
    failed = PairwiseResult.failure("boom", strategy="consistency", metadata=PairwiseMetadata(positions_swapped=True))
    v, _ = combine_judges({"j1": result("A"), "j2": result("A"), "j3": failed}, strategy="consistency")
    assert v.judges == ["j1", "j2"] and v.excluded == {"j3": "boom"}
    assert (v.winner, v.confidence_level) == ("A", "high")
    with pytest.raises(ValueError, match="no judge"):
        combine_judges({"j3": failed}, strategy="consistency")


def test_a_single_judge_keeps_its_verdict_under_every_strategy():
    for strategy in ("average", "conservative", "consistency"):
        v, _ = combine_judges({"j": result("B", a=1, b=9)}, strategy=strategy)
        assert v.winner == "B" and v.confidence_level == "high"
