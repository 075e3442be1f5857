"""The EvaluationReport: an ensemble's valid rubric grades compiled into one result
(docs/methods.md, "Rubric grading")."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from council.errors import InvalidOutputError
from council.judging.safety import real_concerns, safety_flagged
from council.judging.schemas import (
    BiasChecklist,
    BiasCheckResult,
    ConfidenceLevel,
    CriterionScore,
    EvaluationReport,
    Rubric,
)
from council.judging.voting import tally

_LEVEL_ORDER: dict[ConfidenceLevel, int] = {"low": 0, "moderate": 1, "high": 2}


def _as_dict(grade: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    return grade.model_dump() if isinstance(grade, BaseModel) else dict(grade)


def compile_evaluation_report(
    rubric: Rubric,
    grades: Sequence[BaseModel | Mapping[str, Any]],
    *,
    reference_used: bool,
    invalid_attempts: int = 0,
    judge_model: str | None = None,
    bias_checklist: BiasChecklist,
) -> EvaluationReport:
    """Seed 003 step 8: the ensemble's valid rubric grades compiled into one report.

    Per criterion, the final score is the strict-majority score of the votes; with no
    majority it is the lower median (an integer on the scale) and that criterion's
    confidence is ``low``. The report's confidence level is the lowest of the
    criteria's, and ``agreement`` their mean. The reasoning shown for a criterion comes
    from the first vote that gave the final score. Safety: any vote's real concern or
    safety wording sets ``safety_flag`` (seed 003 step 7). Raises
    ``InvalidOutputError`` when there is no valid grade at all.
    """
    if not grades:
        raise InvalidOutputError(
            f"no valid grade for rubric {rubric.name!r} ({invalid_attempts} invalid attempt(s))"
        )
    docs = [_as_dict(g) for g in grades]
    by_criterion = [{c["criterion"]: c for c in d["criteria"]} for d in docs]

    scores: list[CriterionScore] = []
    for criterion in rubric.criteria:
        votes = [b[criterion.name]["score"] for b in by_criterion]
        majority, _, level, agreement = tally(votes)
        final = majority if majority is not None else statistics.median_low(votes)
        reasoning = next(b[criterion.name]["reasoning"] for b in by_criterion if b[criterion.name]["score"] == final)
        scores.append(
            CriterionScore(
                criterion=criterion.name,
                score=final,
                reasoning=reasoning,
                weight=criterion.weight,
                votes=votes,
                agreement=agreement,
                confidence_level=level,
            )
        )

    lo, hi = rubric.scale
    weights = [c.weight for c in rubric.criteria]
    weighted_total = sum(s.weight * s.score for s in scores)
    weighted_min, weighted_max = lo * sum(weights), hi * sum(weights)
    # The vote agreeing with the most final scores speaks for the report (earliest on ties).
    def matches(i: int) -> int:
        return sum(by_criterion[i][s.criterion]["score"] == s.score for s in scores)

    best = max(range(len(docs)), key=lambda i: (matches(i), -i))

    concerns = list(dict.fromkeys(c for d in docs for c in real_concerns(d.get("safety_concerns") or [])))
    safety_flag = any(safety_flagged(d) for d in docs)
    level = min((s.confidence_level for s in scores), key=_LEVEL_ORDER.__getitem__)

    return EvaluationReport(
        rubric=rubric.name,
        scale=rubric.scale,
        criteria=scores,
        total=sum(s.score for s in scores),
        min_total=lo * len(scores),
        max_total=hi * len(scores),
        weighted_total=weighted_total,
        weighted_max=weighted_max,
        normalized=(weighted_total - weighted_min) / (weighted_max - weighted_min),
        overall_reasoning=docs[best].get("overall_reasoning", ""),
        confidence_level=level,
        agreement=statistics.fmean(s.agreement for s in scores),
        votes=len(docs),
        invalid_attempts=invalid_attempts,
        bias_checklist=_merge_checklists(docs, bias_checklist),
        safety_flag=safety_flag,
        safety_concerns=concerns,
        reference_used=reference_used,
        flagged_for_review=level == "low" or safety_flag,
        judge_model=judge_model,
    )


def _merge_checklists(docs: list[dict[str, Any]], checklist: BiasChecklist) -> list[BiasCheckResult]:
    """One entry per checklist item: detected if any vote detected it, with every note."""
    answers = [d.get("bias_checklist") or {} for d in docs]
    questions = {i.id: i.question for i in checklist.items}
    ids = list(dict.fromkeys(k for a in answers for k in a))
    results = []
    for item_id in ids:
        given = [a[item_id] for a in answers if item_id in a]
        notes = list(dict.fromkeys(g["note"].strip() for g in given if g.get("note", "").strip()))
        results.append(
            BiasCheckResult(
                id=item_id,
                question=questions.get(item_id, item_id),
                detected=any(g.get("detected") is True for g in given),
                notes=notes,
            )
        )
    return results
