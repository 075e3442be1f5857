"""Position-swap strategies: two validated pairwise passes in, one verdict out.

Pass 1 shows the original A first and B second. Pass 2 shows B first, so in pass 2
the judge's "A" is the original B; every strategy maps it back before comparing.
All functions are pure: they take the validated passes (pydantic instances or plain
dicts of the same shape) and return a :class:`SwapVerdict`.

Strategies (docs/methods.md, "Position-swap strategies"):

* ``average``: each side's per-criterion scores and totals are averaged
  over its two positions; the winner has the higher averaged total, and a difference
  of at most ``tie_margin`` points (default 1.0) is a TIE. A constant bonus for the
  first slot cancels out exactly.
* ``conservative``: a response wins only if it wins in both positions;
  anything else is a TIE.
* ``consistency``: the pass-2 winner is mapped back; if it matches pass 1,
  that is the verdict, otherwise TIE with confidence 0.5. ``position_consistency``
  is reported.

``conservative`` and ``consistency`` always pick the same winner (any disagreement,
including "A" against "TIE", is a tie in both); they differ in confidence:
``consistency`` reports the mean of the two passes' confidences, ``conservative`` the
lower one (a claim is only as strong as its weaker position).

**Default: ``consistency``.** It is as strict about position bias as ``conservative`` (a
response must win from both slots), fills the output schema that
:class:`PairwiseResult` implements, and says honestly when the passes disagree
(confidence 0.5, ``unstable``). ``average`` can crown a winner even when the two
passes disagree, if one pass's score gap is large enough; use it for depth grading,
where the averaged scores themselves are the product.

Per-criterion verdicts apply the same rule per criterion. For ``average`` the
per-criterion tie margin is ``tie_margin / number of criteria``, so that when every
criterion is a tie the total is a tie too.

Scores are reported averaged over both passes for every swap strategy (they are the
least position-biased summary); only ``average`` decides by them. Without swap
(:func:`no_swap`) the single pass is reported as is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from council.errors import UsageError
from council.methods.verdicts import (
    DEFAULT_PAIRWISE_SCALE,
    CriterionVerdict,
    Differentiators,
    PairwiseMetadata,
    PairwiseResult,
    PositionConsistency,
    Scale,
    SideScores,
    SwapVerdict,
    Verdict,
    check_scale,
    criterion_items,
)

DEFAULT_TIE_MARGIN = 1.0
#: Inconsistent passes give a TIE with this confidence (docs/methods.md, "Consistency strategy").
INCONSISTENT_CONFIDENCE = 0.5
#: The confidence of a score-based TIE under ``average``: the judge cannot tell them apart.
TIE_CONFIDENCE = 0.5
NO_SWAP = "none"


def as_verdict(value: str) -> Verdict:
    if value in ("A", "B", "TIE"):
        return value  # type: ignore[return-value]
    raise ValueError(f"a verdict is 'A', 'B' or 'TIE', got {value!r}")


def flip(verdict: str) -> Verdict:
    """Map a verdict between the two orders: A <-> B, TIE stays TIE."""
    return {"A": "B", "B": "A"}.get(verdict) or as_verdict(verdict)  # type: ignore[return-value]


# ------------------------------------------------------------------- reading passes


@dataclass(frozen=True)
class CriterionJudgment:
    criterion: str
    winner: Verdict
    a_score: int
    b_score: int
    reasoning: str
    a_strength: str
    b_strength: str


@dataclass(frozen=True)
class PassView:
    """One pass as plain data, in the labels the judge saw."""

    winner: Verdict
    confidence: float
    criteria: dict[str, CriterionJudgment]
    overall_reasoning: str
    a_advantages: tuple[str, ...]
    b_advantages: tuple[str, ...]
    #: The pass as it was read (kept as the result's ``raw_pass_1``/``raw_pass_2``), so a pass
    #: read once can be combined without reading it again.
    source: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def a_total(self) -> int:
        return sum(c.a_score for c in self.criteria.values())

    @property
    def b_total(self) -> int:
        return sum(c.b_score for c in self.criteria.values())


def read_pass(validated: BaseModel | Mapping[str, Any] | PassView) -> PassView:
    """A validated pass (model instance or dict of the same shape) as a :class:`PassView`."""
    if isinstance(validated, PassView):
        return validated
    data = validated.model_dump(mode="json") if isinstance(validated, BaseModel) else dict(validated)
    try:
        criteria = {
            name: CriterionJudgment(
                criterion=name,
                winner=as_verdict(c["winner"]),
                a_score=c["a_score"],
                b_score=c["b_score"],
                reasoning=c.get("reasoning", ""),
                a_strength=c.get("a_strength", ""),
                b_strength=c.get("b_strength", ""),
            )
            for name, c in criterion_items(data, "comparison").items()
        }
        diffs = data.get("differentiators") or {}
        return PassView(
            winner=as_verdict(data["winner"]),
            confidence=float(data["confidence"]),
            criteria=criteria,
            overall_reasoning=data.get("overall_reasoning", ""),
            a_advantages=tuple(diffs.get("a_advantages", ())),
            b_advantages=tuple(diffs.get("b_advantages", ())),
            source=data,
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a pairwise pass: missing or malformed {exc}") from exc


def _shared_criteria(p1: PassView, p2: PassView) -> list[str]:
    if set(p1.criteria) != set(p2.criteria):
        raise ValueError(f"the passes judged different criteria: {sorted(p1.criteria)} vs {sorted(p2.criteria)}")
    return list(p1.criteria)


# ------------------------------------------------------------------------- helpers


def winner_by_margin(a: float, b: float, margin: float) -> Verdict:
    """The higher score wins only by more than ``margin``; otherwise TIE (docs/methods.md, "Average strategy")."""
    if abs(a - b) <= margin:
        return "TIE"
    return "A" if a > b else "B"


def margin_confidence(difference: float, n_criteria: int, scale: Scale) -> float:
    """Confidence of a score-based win: 0.5 + 0.5 * |difference| / widest possible difference.

    The widest possible difference of totals is ``n_criteria * (hi - lo)``, so the value
    rises monotonically from 0.5 (barely past the tie margin) to 1.0 (best vs worst on
    every criterion). Close responses get lower confidence (docs/methods.md, "Average strategy").
    """
    lo, hi = scale
    span = n_criteria * (hi - lo)
    return 0.5 + 0.5 * min(1.0, abs(difference) / span) if span > 0 else TIE_CONFIDENCE


def _averaged_scores(p1: PassView, p2: PassView, names: list[str]) -> dict[str, SideScores]:
    # A's score = avg(A in pass 1, A in pass 2 where it was shown as "B").
    return {
        "A": SideScores(
            criteria={c: (p1.criteria[c].a_score + p2.criteria[c].b_score) / 2 for c in names},
            total=(p1.a_total + p2.b_total) / 2,
        ),
        "B": SideScores(
            criteria={c: (p1.criteria[c].b_score + p2.criteria[c].a_score) / 2 for c in names},
            total=(p1.b_total + p2.a_total) / 2,
        ),
    }


def _single_pass_scores(p: PassView) -> dict[str, SideScores]:
    return {
        "A": SideScores(criteria={c: float(j.a_score) for c, j in p.criteria.items()}, total=float(p.a_total)),
        "B": SideScores(criteria={c: float(j.b_score) for c, j in p.criteria.items()}, total=float(p.b_total)),
    }


def _both(first: str, second: str) -> str:
    """Text from both passes; pass 2's text uses the labels the judge saw."""
    if not second or first == second:
        return first
    return f"Pass 1 (A shown first): {first}\nPass 2 (B shown first; there 'A' is the original B): {second}"


def _merge(first: Sequence[str], second: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


def _consistency(p1: PassView, p2: PassView) -> PositionConsistency:
    second = flip(p2.winner)
    return PositionConsistency(first_pass_winner=p1.winner, second_pass_winner=second, consistent=p1.winner == second)


def _criterion_verdict(
    name: str, p1: PassView, p2: PassView, scores: dict[str, SideScores], winner: Verdict
) -> CriterionVerdict:
    j1, j2 = p1.criteria[name], p2.criteria[name]
    return CriterionVerdict(
        criterion=name,
        winner=winner,
        reasoning=_both(j1.reasoning, j2.reasoning),
        a_strength=_both(j1.a_strength, j2.b_strength),
        b_strength=_both(j1.b_strength, j2.a_strength),
        a_score=scores["A"].criteria[name],
        b_score=scores["B"].criteria[name],
        consistent=j1.winner == flip(j2.winner),
    )


def _swap_verdict(
    strategy: str,
    p1: PassView,
    p2: PassView,
    names: list[str],
    scores: dict[str, SideScores],
    winner: Verdict,
    confidence: float,
    criterion_winners: dict[str, Verdict],
) -> SwapVerdict:
    consistency = _consistency(p1, p2)
    return SwapVerdict(
        strategy=strategy,
        winner=winner,
        confidence=confidence,
        comparison=[_criterion_verdict(c, p1, p2, scores, criterion_winners[c]) for c in names],
        scores=scores,
        position_consistency=consistency,
        unstable=not consistency.consistent,
        overall_reasoning=_both(p1.overall_reasoning, p2.overall_reasoning),
        differentiators=Differentiators(
            a_advantages=_merge(p1.a_advantages, p2.b_advantages),
            b_advantages=_merge(p1.b_advantages, p2.a_advantages),
        ),
    )


# ---------------------------------------------------------------------- strategies


PassInput = BaseModel | Mapping[str, Any] | PassView


def swap_average(
    pass_1: PassInput,
    pass_2: PassInput,
    *,
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> SwapVerdict:
    """docs/methods.md, "Average strategy": average each side's scores over both positions; TIE within ``tie_margin``.

    Confidence: :func:`margin_confidence` of the averaged totals for a win,
    ``TIE_CONFIDENCE`` (0.5) for a tie.
    """
    if tie_margin < 0:
        raise ValueError(f"tie_margin must be >= 0, got {tie_margin}")
    scale = check_scale(scale)
    p1, p2 = read_pass(pass_1), read_pass(pass_2)
    names = _shared_criteria(p1, p2)
    scores = _averaged_scores(p1, p2, names)
    per_criterion_margin = tie_margin / len(names)
    criterion_winners = {
        c: winner_by_margin(scores["A"].criteria[c], scores["B"].criteria[c], per_criterion_margin) for c in names
    }
    difference = scores["A"].total - scores["B"].total
    winner = winner_by_margin(scores["A"].total, scores["B"].total, tie_margin)
    confidence = TIE_CONFIDENCE if winner == "TIE" else margin_confidence(difference, len(names), scale)
    return _swap_verdict("average", p1, p2, names, scores, winner, confidence, criterion_winners)


def wins_in_both_positions(first_pass: str, second_pass_as_seen: str) -> Verdict:
    """The conservative rule, literally: pass 2's verdict is in the labels the judge saw."""
    if first_pass == "A" and second_pass_as_seen == "B":
        return "A"  # A wins in both positions
    if first_pass == "B" and second_pass_as_seen == "A":
        return "B"  # B wins in both positions
    return "TIE"  # conflicting results (e.g. the first slot wins both times)


def swap_conservative(
    pass_1: PassInput,
    pass_2: PassInput,
    *,
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> SwapVerdict:
    """docs/methods.md, "Conservative strategy": a winner only if it wins in both positions, otherwise TIE.

    Confidence: the lower of the two passes' confidences when both passes agree
    (a win in both, or a tie in both); 0.5 when they disagree.
    ``tie_margin`` is accepted for a uniform signature and not used.
    """
    check_scale(scale)
    p1, p2 = read_pass(pass_1), read_pass(pass_2)
    names = _shared_criteria(p1, p2)
    agree = p1.winner == flip(p2.winner)
    winner = wins_in_both_positions(p1.winner, p2.winner)
    confidence = min(p1.confidence, p2.confidence) if agree else INCONSISTENT_CONFIDENCE
    criterion_winners = {c: wins_in_both_positions(p1.criteria[c].winner, p2.criteria[c].winner) for c in names}
    return _swap_verdict(
        "conservative", p1, p2, names, _averaged_scores(p1, p2, names), winner, confidence, criterion_winners
    )


def swap_consistency(
    pass_1: PassInput,
    pass_2: PassInput,
    *,
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> SwapVerdict:
    """docs/methods.md, "Consistency strategy": map pass 2's winner back; agreement keeps it,
    disagreement is TIE at 0.5.

    Confidence on agreement: the mean of the two passes' confidences (the tool spec returns
    pass 1's; the mean treats both positions alike). ``tie_margin`` is not used.
    """
    check_scale(scale)
    p1, p2 = read_pass(pass_1), read_pass(pass_2)
    names = _shared_criteria(p1, p2)
    second = flip(p2.winner)
    if p1.winner == second:
        winner, confidence = p1.winner, (p1.confidence + p2.confidence) / 2
    else:
        winner, confidence = "TIE", INCONSISTENT_CONFIDENCE
    criterion_winners: dict[str, Verdict] = {}
    for c in names:
        first_c, second_c = p1.criteria[c].winner, flip(p2.criteria[c].winner)
        criterion_winners[c] = first_c if first_c == second_c else "TIE"
    return _swap_verdict(
        "consistency", p1, p2, names, _averaged_scores(p1, p2, names), winner, confidence, criterion_winners
    )


def no_swap(
    pass_1: PassInput,
    *,
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> SwapVerdict:
    """Swap disabled: the single pass's verdict, confidence and scores, as given."""
    check_scale(scale)
    p = read_pass(pass_1)
    scores = _single_pass_scores(p)
    return SwapVerdict(
        strategy=NO_SWAP,
        winner=p.winner,
        confidence=p.confidence,
        comparison=[
            CriterionVerdict(
                criterion=j.criterion,
                winner=j.winner,
                reasoning=j.reasoning,
                a_strength=j.a_strength,
                b_strength=j.b_strength,
                a_score=float(j.a_score),
                b_score=float(j.b_score),
            )
            for j in p.criteria.values()
        ],
        scores=scores,
        position_consistency=None,
        unstable=False,
        overall_reasoning=p.overall_reasoning,
        differentiators=Differentiators(a_advantages=list(p.a_advantages), b_advantages=list(p.b_advantages)),
    )


class SwapStrategy(Protocol):
    def __call__(
        self, pass_1: PassInput, pass_2: PassInput, *, scale: Sequence[int] = ..., tie_margin: float = ...
    ) -> SwapVerdict: ...


SWAP_STRATEGIES: dict[str, SwapStrategy] = {
    "average": swap_average,
    "conservative": swap_conservative,
    "consistency": swap_consistency,
}
DEFAULT_STRATEGY = "consistency"


def get_strategy(name: str) -> SwapStrategy:
    try:
        return SWAP_STRATEGIES[name]
    except KeyError:
        raise UsageError(
            f"unknown swap strategy {name!r}; choose one of: {', '.join(SWAP_STRATEGIES)}"
        ) from None


def combine_passes(
    pass_1: PassInput,
    pass_2: PassInput | None = None,
    *,
    strategy: str = DEFAULT_STRATEGY,
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    tie_margin: float = DEFAULT_TIE_MARGIN,
    judge_model: str | None = None,
    evaluation_time_ms: float = 0.0,
    calls: int | None = None,
) -> PairwiseResult:
    """The full :class:`PairwiseResult` from one pass (no swap) or two (swap, by ``strategy``).

    ``calls`` defaults to the number of passes; pass the real count when re-requests
    of invalid output made more calls.
    """
    scale = check_scale(scale)
    swap_strategy = get_strategy(strategy)  # checked even without swap: a bad name is a usage error
    if pass_2 is None:
        verdict = no_swap(pass_1, scale=scale, tie_margin=tie_margin)
    else:
        verdict = swap_strategy(pass_1, pass_2, scale=scale, tie_margin=tie_margin)
    n_criteria = len(verdict.comparison)
    return PairwiseResult(
        success=True,
        winner=verdict.winner,
        confidence=verdict.confidence,
        comparison=verdict.comparison,
        overall_reasoning=verdict.overall_reasoning,
        differentiators=verdict.differentiators,
        position_consistency=verdict.position_consistency,
        scores=verdict.scores,
        scale=scale,
        max_total=n_criteria * scale[1],
        strategy=verdict.strategy,
        raw_pass_1=_raw(pass_1),
        raw_pass_2=_raw(pass_2) if pass_2 is not None else None,
        unstable=verdict.unstable,
        metadata=PairwiseMetadata(
            evaluation_time_ms=evaluation_time_ms,
            positions_swapped=pass_2 is not None,
            judge_model=judge_model,
            calls=calls if calls is not None else (1 if pass_2 is None else 2),
        ),
    )


def _raw(p: PassInput) -> dict[str, Any] | None:
    if isinstance(p, PassView):
        p = p.source  # type: ignore[assignment]
    if isinstance(p, BaseModel):
        return p.model_dump()
    if isinstance(p, Mapping):
        return dict(p)
    return None

