"""The EvaluationReport: a judge's valid rubric grades (its votes) compiled into one result,
and several judges' reports averaged into one (docs/methods.md, "Rubric grading")."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from council.errors import InvalidOutputError
from council.judging.safety import real_concerns
from council.judging.schemas import BiasChecklist, BiasCheckResult, CriterionScore, EvaluationReport, Rubric
from council.methods.verdicts import ConfidenceLevel, criterion_items
from council.methods.voting import tally

_LEVEL_ORDER: dict[ConfidenceLevel, int] = {"low": 0, "moderate": 1, "high": 2}


def _as_dict(grade: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    return grade.model_dump() if isinstance(grade, BaseModel) else dict(grade)


def _level(count: int, planned: int) -> ConfidenceLevel:
    """Every planned vote agrees: high; more than half of the planned votes: moderate; else low.

    Counted against the votes *planned*, so a vote that never came (invalid output, a provider
    failure) counts against agreement: one valid vote of three is not "high"."""
    if count == planned:
        return "high"
    return "moderate" if 2 * count > planned else "low"


def compile_evaluation_report(
    rubric: Rubric,
    grades: Sequence[BaseModel | Mapping[str, Any]],
    *,
    reference_used: bool,
    votes_planned: int | None = None,
    invalid_attempts: int = 0,
    judge_model: str | None = None,
    bias_checklist: BiasChecklist,
) -> EvaluationReport:
    """One judge's valid rubric grades (its votes) compiled into one report.

    ``votes_planned``: the votes asked for (default: one per grade); the difference is
    ``missing_votes``. Per criterion, the final score is the strict-majority score of the
    valid votes; with no majority it is the lower median (an integer on the scale). A
    criterion's confidence is ``high`` when every planned vote gave the final score,
    ``moderate`` when more than half of them did, else ``low``; the report's level is the
    lowest of its criteria's and ``agreement`` their mean. The reasoning shown for a
    criterion comes from the first vote that gave the final score. ``safety_flag``: some
    vote names a real safety concern. Missing votes, low confidence or a safety flag set
    ``flagged_for_review``. Raises ``InvalidOutputError`` when there is no valid grade.
    See docs/methods.md, "Rubric grading".
    """
    if not grades:
        raise InvalidOutputError(
            f"no valid grade for rubric {rubric.name!r} ({invalid_attempts} invalid attempt(s))"
        )
    planned = len(grades) if votes_planned is None else votes_planned
    if planned < len(grades):
        raise ValueError(f"{len(grades)} grades but only {planned} votes planned")
    docs = [_as_dict(g) for g in grades]
    by_criterion = [criterion_items(d, "criteria") for d in docs]

    scores: list[CriterionScore] = []
    for criterion in rubric.criteria:
        votes = [b[criterion.name]["score"] for b in by_criterion]
        majority, _, _, _ = tally(votes)
        final = majority if majority is not None else statistics.median_low(votes)
        reasoning = next(b[criterion.name]["reasoning"] for b in by_criterion if b[criterion.name]["score"] == final)
        scores.append(
            CriterionScore(
                criterion=criterion.name,
                score=final,
                reasoning=reasoning,
                weight=criterion.weight,
                votes=votes,
                agreement=votes.count(final) / planned,
                confidence_level=_level(votes.count(final), planned),
            )
        )

    # The vote agreeing with the most final scores speaks for the report (earliest on ties).
    def matches(i: int) -> int:
        return sum(by_criterion[i][s.criterion]["score"] == s.score for s in scores)

    best = max(range(len(docs)), key=lambda i: (matches(i), -i))
    concerns = list(dict.fromkeys(c for d in docs for c in real_concerns(d.get("safety_concerns") or [])))
    return _report(
        rubric,
        scores,
        overall_reasoning=docs[best].get("overall_reasoning") or "",
        votes=len(docs),
        votes_planned=planned,
        invalid_attempts=invalid_attempts,
        bias_checklist=_merge_checklists(docs, bias_checklist),
        safety_concerns=concerns,
        reference_used=reference_used,
        judge_model=judge_model,
    )


def combine_judge_reports(
    rubric: Rubric,
    reports: Mapping[str, EvaluationReport],
    *,
    failed: Mapping[str, int] | None = None,
    reference_used: bool,
) -> EvaluationReport:
    """Several judges' reports as one: each criterion's score is the mean of the judges' own
    final scores (as several judges' pairwise scores are averaged), and each judge's score is
    kept in ``by_judge``.

    ``failed``: judges that produced no report, with the votes each had planned; their votes
    count as missing. A criterion's confidence is the lowest of the judges' for it, and at
    most ``moderate`` when their scores differ by one point, ``low`` by more; any missing vote
    flags the report. See docs/methods.md, "Rubric grading".
    """
    if not reports:
        raise InvalidOutputError(f"no judge produced a valid grade for rubric {rubric.name!r}")
    failed = failed or {}
    judged = list(reports.values())
    scores: list[CriterionScore] = []
    for i, criterion in enumerate(rubric.criteria):
        own = {judge: r.criteria[i] for judge, r in reports.items()}
        given = [c.score for c in own.values()]
        spread = max(given) - min(given)
        levels = [c.confidence_level for c in own.values()]
        levels.append("high" if spread == 0 else "moderate" if spread <= 1 else "low")
        scores.append(
            CriterionScore(
                criterion=criterion.name,
                score=statistics.fmean(given),
                reasoning=judged[0].criteria[i].reasoning,
                weight=criterion.weight,
                votes=[v for c in own.values() for v in c.votes],
                agreement=statistics.fmean(c.agreement for c in own.values()),
                confidence_level=min(levels, key=_LEVEL_ORDER.__getitem__),
                by_judge={judge: int(c.score) for judge, c in own.items()},
            )
        )
    return _report(
        rubric,
        scores,
        overall_reasoning=judged[0].overall_reasoning,
        votes=sum(r.votes for r in judged),
        votes_planned=sum(r.votes_planned for r in judged) + sum(failed.values()),
        invalid_attempts=sum(r.invalid_attempts for r in judged),
        bias_checklist=_merge_results([r.bias_checklist for r in judged]),
        safety_concerns=list(dict.fromkeys(c for r in judged for c in r.safety_concerns)),
        safety_flag=any(r.safety_flag for r in judged),
        reference_used=reference_used,
        judge_model=", ".join(r.judge_model or judge for judge, r in reports.items()),
    )


def _report(
    rubric: Rubric,
    scores: list[CriterionScore],
    *,
    overall_reasoning: str,
    votes: int,
    votes_planned: int,
    invalid_attempts: int,
    bias_checklist: list[BiasCheckResult],
    safety_concerns: list[str],
    reference_used: bool,
    judge_model: str | None,
    safety_flag: bool | None = None,
) -> EvaluationReport:
    lo, hi = rubric.scale
    weights = [c.weight for c in rubric.criteria]
    weighted_total = sum(s.weight * s.score for s in scores)
    weighted_min, weighted_max = lo * sum(weights), hi * sum(weights)
    level = min((s.confidence_level for s in scores), key=_LEVEL_ORDER.__getitem__)
    flag = bool(safety_concerns) if safety_flag is None else safety_flag
    missing = votes_planned - votes
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
        overall_reasoning=overall_reasoning,
        confidence_level=level,
        agreement=statistics.fmean(s.agreement for s in scores),
        votes=votes,
        votes_planned=votes_planned,
        missing_votes=missing,
        invalid_attempts=invalid_attempts,
        bias_checklist=bias_checklist,
        safety_flag=flag,
        safety_concerns=safety_concerns,
        reference_used=reference_used,
        flagged_for_review=level == "low" or flag or missing > 0,
        judge_model=judge_model,
    )


def _merge_results(lists: Sequence[list[BiasCheckResult]]) -> list[BiasCheckResult]:
    """Several reports' checklists as one: detected if any detected it, every note once."""
    merged: dict[str, BiasCheckResult] = {}
    for results in lists:
        for r in results:
            seen = merged.get(r.id)
            if seen is None:
                merged[r.id] = r.model_copy(deep=True)
            else:
                seen.detected = seen.detected or r.detected
                seen.notes = list(dict.fromkeys([*seen.notes, *r.notes]))
    return list(merged.values())


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
