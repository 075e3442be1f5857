"""Rubric and bias-checklist files, built-in criteria sets, and the EvaluationReport.

Rubrics are TOML files::

    name = "general"
    description = "..."
    scale = [1, 5]                  # integer scale, lo < hi

    [[criteria]]
    name = "accuracy"
    description = "..."
    weight = 1.0                    # optional, > 0
    levels = { 1 = "...", 5 = "..." }   # optional: what a score means

Built-ins live in ``council/config/rubrics/`` (package data; ``config/rubrics`` links there)
and load by name (``load_rubric("general")``).
Errors are one line (``InputError``, or ``NotFoundError`` for a missing file).
"""

from __future__ import annotations

import statistics
import tomllib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from council.errors import InputError, InvalidOutputError, NotFoundError
from council.judging.prompts import real_concerns, safety_flagged
from council.judging.schemas import (
    BiasChecklist,
    BiasCheckResult,
    ConfidenceLevel,
    Criterion,
    CriterionScore,
    EvaluationReport,
    Rubric,
)
from council.judging.voting import tally
from council.validation import describe_validation_error

BUILTIN_RUBRICS_DIR = Path(__file__).resolve().parents[1] / "config" / "rubrics"
BIAS_CHECKLIST_NAME = "bias-awareness"

#: Seed 000's five depth dimensions for pairwise depth grading (1-5 each, total /25).
DEPTH_CRITERIA: tuple[Criterion, ...] = (
    Criterion(
        name="Granularity",
        description="Specific, fine-grained analysis: concrete details, cases and distinctions, not generalities.",
    ),
    Criterion(
        name="Insight",
        description="Non-obvious conclusions, causes and implications, beyond restating known facts.",
    ),
    Criterion(
        name="Critique",
        description="Critical evaluation: weighs limitations, counter-arguments, trade-offs and uncertainty.",
    ),
    Criterion(
        name="Evidence",
        description="Claims are supported by data, sources, examples or explicit reasoning.",
    ),
    Criterion(
        name="Density",
        description="Substance per word: no padding, repetition or filler.",
    ),
)


# ---------------------------------------------------------------------------- files


def builtin_rubrics() -> list[str]:
    """Names of the shipped rubrics (``load_rubric(name)`` loads them)."""
    return sorted(p.stem for p in BUILTIN_RUBRICS_DIR.glob("*.toml") if p.stem != BIAS_CHECKLIST_NAME)


def _resolve(path_or_name: str | Path, kind: str) -> Path:
    path = Path(path_or_name)
    if path.exists():
        return path
    is_bare_name = isinstance(path_or_name, str) and path.suffix == "" and path.name == str(path_or_name)
    if is_bare_name and (BUILTIN_RUBRICS_DIR / f"{path_or_name}.toml").exists():
        return BUILTIN_RUBRICS_DIR / f"{path_or_name}.toml"
    hint = f" (built-in: {', '.join(builtin_rubrics())})" if kind == "rubric" else ""
    raise NotFoundError(f"{kind} {str(path_or_name)!r} not found{hint}")


def _read_toml(path: Path, kind: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{kind} {path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{kind} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{kind} {path}: cannot read: {exc.strerror or exc}") from None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def load_rubric(path_or_name: str | Path) -> Rubric:
    """A rubric from a TOML file, or a built-in by name; one-line errors."""
    path = _resolve(path_or_name, "rubric")
    data = _read_toml(path, "rubric")
    if "items" in data and "criteria" not in data:
        raise InputError(f"rubric {path}: this is a bias checklist, not a rubric (it has items, no criteria)")
    try:
        return Rubric.model_validate(data)
    except ValidationError as exc:
        raise InputError(_one_line(f"rubric {path}: {describe_validation_error(exc)}")) from None


def load_bias_checklist(path: str | Path | None = None) -> BiasChecklist:
    """The bias-awareness checklist (the built-in one by default)."""
    if path is None:
        return _builtin_checklist()
    return _load_checklist(_resolve(path, "bias checklist"))


@lru_cache(maxsize=1)
def _builtin_checklist() -> BiasChecklist:
    return _load_checklist(BUILTIN_RUBRICS_DIR / f"{BIAS_CHECKLIST_NAME}.toml")


def _load_checklist(path: Path) -> BiasChecklist:
    data = _read_toml(path, "bias checklist")
    try:
        return BiasChecklist.model_validate(data)
    except ValidationError as exc:
        raise InputError(_one_line(f"bias checklist {path}: {describe_validation_error(exc)}")) from None


# ----------------------------------------------------------------- the final report

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
    bias_checklist: BiasChecklist | None = None,
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


def _merge_checklists(docs: list[dict[str, Any]], checklist: BiasChecklist | None) -> list[BiasCheckResult]:
    """One entry per checklist item: detected if any vote detected it, with every note."""
    answers = [d.get("bias_checklist") or {} for d in docs]
    questions = {i.id: i.question for i in (checklist or load_bias_checklist()).items}
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
