"""Several judges, one verdict: combined under the chosen swap strategy.

* ``average`` — multi-provider averaging, below.
* ``consistency`` — the judges' own verdicts by strict majority (docs/methods.md, "Ensemble voting");
  with no majority, TIE at confidence 0.5.
* ``conservative`` — a winner only when every judge names it ("wins in
  both positions", applied across judges too); any dissent is a TIE at 0.5.

Under every strategy ``confidence_level`` measures how many judges named the final
winner (all: high; a strict majority: moderate; otherwise low and flagged), so it
can never vouch for a verdict the judges did not give. See :func:`combine_judges`.

Multi-provider averaging (docs/methods.md, "Multi-judge averaging"): several judges, one averaged verdict.

``Final score = avg(position_swap_avg(judge 1), position_swap_avg(judge 2), ...)``:
each judge's own (swap-averaged) scores are averaged per side and per criterion with
equal weight per judge, and the winner is decided by the same tie-margin rule as
``swap_average`` (TIE when the averaged totals differ by at most ``tie_margin``).
Judges whose comparison failed are left out and listed in ``excluded`` with their
error, never silently dropped.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from council.methods.swap import (
    DEFAULT_TIE_MARGIN,
    INCONSISTENT_CONFIDENCE,
    TIE_CONFIDENCE,
    get_strategy,
    margin_confidence,
    winner_by_margin,
)
from council.methods.verdicts import (
    ConfidenceLevel,
    PairwiseResult,
    Scale,
    Side,
    SideScores,
    Verdict,
    check_scale,
)


class JudgeSummary(BaseModel):
    winner: Verdict
    a_total: float
    b_total: float
    unstable: bool = False


class MultiJudgeVerdict(BaseModel):
    winner: Verdict
    confidence: float
    scores: dict[Side, SideScores]
    scale: Scale
    tie_margin: float
    judges: list[str]
    per_judge: dict[str, JudgeSummary]
    #: Share of the included judges whose own winner matches the averaged winner.
    agreement: float
    excluded: dict[str, str] = Field(default_factory=dict)


def average_side_scores(score_sets: Sequence[Mapping[str, SideScores]]) -> dict[Side, SideScores]:
    """Average ``{"A": SideScores, "B": SideScores}`` sets per side and criterion (equal weights)."""
    if not score_sets:
        raise ValueError("no scores to average")
    names = list(score_sets[0]["A"].criteria)
    for scores in score_sets:
        for side in ("A", "B"):
            if set(scores[side].criteria) != set(names):
                raise ValueError(
                    f"judges scored different criteria: {sorted(names)} vs {sorted(scores[side].criteria)}"
                )
    n = len(score_sets)
    averaged: dict[Side, SideScores] = {}
    for side in ("A", "B"):
        averaged[side] = SideScores(
            criteria={c: sum(s[side].criteria[c] for s in score_sets) / n for c in names},
            total=sum(s[side].total for s in score_sets) / n,
        )
    return averaged


def average_across_judges(
    results: Mapping[str, PairwiseResult],
    *,
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> MultiJudgeVerdict:
    """Average the judges' ``PairwiseResult.scores`` (keyed by judge model) into one verdict.

    Confidence uses the same formula as ``swap_average``: 0.5 for a tie, else
    ``margin_confidence`` of the averaged totals. Raises ValueError when no judge
    succeeded or the judges used different scales or criteria.
    """
    if tie_margin < 0:
        raise ValueError(f"tie_margin must be >= 0, got {tie_margin}")
    included = {judge: r for judge, r in results.items() if r.success and r.scores}
    excluded = {judge: (r.error or "no scores") for judge, r in results.items() if judge not in included}
    if not included:
        failures = "; ".join(f"{judge}: {error}" for judge, error in excluded.items())
        raise ValueError(f"no judge produced a usable comparison: {failures}")
    scales = {r.scale for r in included.values()}
    if len(scales) > 1:
        raise ValueError(f"judges used different scales: {sorted(scales)}")
    scale = check_scale(next(iter(scales)))

    scores = average_side_scores([r.scores for r in included.values()])
    winner = winner_by_margin(scores["A"].total, scores["B"].total, tie_margin)
    n_criteria = len(scores["A"].criteria)
    confidence = (
        TIE_CONFIDENCE
        if winner == "TIE"
        else margin_confidence(scores["A"].total - scores["B"].total, n_criteria, scale)
    )
    per_judge = {
        judge: JudgeSummary(
            winner=r.winner, a_total=r.scores["A"].total, b_total=r.scores["B"].total, unstable=r.unstable
        )
        for judge, r in included.items()
    }
    agreeing = sum(1 for s in per_judge.values() if s.winner == winner)
    return MultiJudgeVerdict(
        winner=winner,
        confidence=confidence,
        scores=scores,
        scale=scale,
        tie_margin=tie_margin,
        judges=list(included),
        per_judge=per_judge,
        agreement=agreeing / len(per_judge),
        excluded=excluded,
    )


# ------------------------------------------------------------ combining verdicts

CombinationRule = Literal["averaged scores", "majority of verdicts", "unanimous verdicts"]
RULES: dict[str, CombinationRule] = {
    "average": "averaged scores",
    "consistency": "majority of verdicts",
    "conservative": "unanimous verdicts",
}


class JudgesVerdict(BaseModel):
    """How several judges' comparisons became one verdict."""

    strategy: str
    rule: CombinationRule
    winner: Verdict
    confidence: float
    confidence_level: ConfidenceLevel
    agreement: float
    """Share of the included judges whose own verdict is the final winner."""
    counts: dict[str, int]
    """The included judges' own verdicts."""
    flagged_for_review: bool
    judges: list[str]
    excluded: dict[str, str] = Field(default_factory=dict)


def level_of_agreement(agreement: float) -> ConfidenceLevel:
    """All judges named the winner: high; a strict majority: moderate; otherwise low."""
    return "high" if agreement >= 1.0 else "moderate" if agreement > 0.5 else "low"


def combine_judges(
    results: Mapping[str, PairwiseResult],
    *,
    strategy: str,
    tie_margin: float = DEFAULT_TIE_MARGIN,
) -> tuple[JudgesVerdict, MultiJudgeVerdict | None]:
    """Combine the judges' results (keyed by judge) under ``strategy``.

    Returns the verdict and, for ``average``, the averaged result it came
    from. Failed judges are left out and listed; raises ValueError when none succeeded.
    """
    get_strategy(strategy)
    included = {judge: r for judge, r in results.items() if r.success and r.scores}
    excluded = {judge: (r.error or "no scores") for judge, r in results.items() if judge not in included}
    if not included:
        failures = "; ".join(f"{judge}: {error}" for judge, error in excluded.items())
        raise ValueError(f"no judge produced a usable comparison: {failures}")
    verdicts = [r.winner for r in included.values()]
    counts = Counter(verdicts)
    averaged = None
    if strategy == "average":
        averaged = average_across_judges(results, tie_margin=tie_margin)
        winner, confidence = averaged.winner, averaged.confidence
    else:
        top, top_count = counts.most_common(1)[0]
        decided = top_count == len(verdicts) if strategy == "conservative" else 2 * top_count > len(verdicts)
        if decided:
            winner = top
            agreeing = [r.confidence for r in included.values() if r.winner == top]
            # conservative: a claim is only as strong as its weakest judge; consistency: their mean
            confidence = min(agreeing) if strategy == "conservative" else statistics.fmean(agreeing)
        else:
            winner, confidence = "TIE", INCONSISTENT_CONFIDENCE
    agreement = counts[winner] / len(verdicts)
    level = level_of_agreement(agreement)
    return (
        JudgesVerdict(
            strategy=strategy,
            rule=RULES[strategy],
            winner=winner,
            confidence=confidence,
            confidence_level=level,
            agreement=agreement,
            counts=dict(counts.most_common()),
            flagged_for_review=level == "low",
            judges=list(included),
            excluded=excluded,
        ),
        averaged,
    )
