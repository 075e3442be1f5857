"""The judging engine's data: what judges must return, rubric files, and final results.

Two kinds of models live here:

* **LLM output models**, built per request by :func:`pairwise_pass_model` and
  :func:`rubric_grade_model`. Their ``model_json_schema()`` is what providers are
  sent, and the same model validates the reply (seed 003 steps 3-4): reasoning is
  required and comes *before* the scores, scores are strict integers on the declared
  scale (``3.5``, ``"3"``, ``true`` and out-of-range values are rejected, never
  rounded), and every requested criterion is judged exactly once. Error messages
  name the field and the problem, because they are fed back to the judge when the
  output is re-requested.
* **Result models** (:class:`PairwiseResult`, :class:`EvaluationReport`, ...): plain
  pydantic models with ``model_dump_json()``; they carry no behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    create_model,
    field_validator,
    model_validator,
)

Verdict = Literal["A", "B", "TIE"]
Side = Literal["A", "B"]
ConfidenceLevel = Literal["high", "moderate", "low"]
Scale = tuple[int, int]

#: Seed 000 scores each depth dimension 1-5.
DEFAULT_PAIRWISE_SCALE: Scale = (1, 5)

Reasoning = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]

_LLM_OUTPUT = ConfigDict(extra="forbid")


def check_scale(scale: Sequence[int]) -> Scale:
    """``(lo, hi)`` as two integers with ``lo < hi``; raises ValueError otherwise."""
    if len(scale) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in scale):
        raise ValueError(f"a scale is two integers (lo, hi), got {scale!r}")
    lo, hi = scale
    if lo >= hi:
        raise ValueError(f"a scale needs lo < hi, got ({lo}, {hi})")
    return lo, hi


# --------------------------------------------------------------------------- files


class Criterion(BaseModel):
    """One thing to judge: a rubric criterion or a pairwise comparison dimension."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    description: str = ""
    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    #: Optional description of what each score means (score -> text).
    levels: dict[int, str] = Field(default_factory=dict)


class Rubric(BaseModel):
    """A grading rubric: integer scale and weighted criteria (loaded from TOML)."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    description: str = ""
    scale: tuple[StrictInt, StrictInt] = (1, 5)
    criteria: list[Criterion] = Field(min_length=1)

    @field_validator("scale")
    @classmethod
    def _scale_is_ordered(cls, value: tuple[int, int]) -> tuple[int, int]:
        return check_scale(value)

    @model_validator(mode="after")
    def _criteria_are_consistent(self) -> Rubric:
        names = [c.name for c in self.criteria]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"criterion names must be unique; repeated: {', '.join(repeated)}")
        lo, hi = self.scale
        for c in self.criteria:
            outside = sorted(k for k in c.levels if not lo <= k <= hi)
            if outside:
                raise ValueError(f"criterion {c.name!r} describes levels {outside} outside the scale {lo}-{hi}")
        return self

    @property
    def criterion_names(self) -> list[str]:
        return [c.name for c in self.criteria]


class BiasCheckItem(BaseModel):
    """One question of the bias-awareness checklist (seed 003 step 2)."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
    question: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    guidance: str = ""


class BiasChecklist(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "bias-awareness"
    description: str = ""
    items: list[BiasCheckItem] = Field(min_length=1)

    @model_validator(mode="after")
    def _ids_are_unique(self) -> BiasChecklist:
        ids = [i.id for i in self.items]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"checklist item ids must be unique; repeated: {', '.join(repeated)}")
        return self


# ------------------------------------------------------------------ LLM output models


def criterion_names(criteria: Sequence[str | Criterion]) -> tuple[str, ...]:
    """Names of ``criteria`` (strings or :class:`Criterion`), checked non-empty and unique."""
    names = tuple((c.name if isinstance(c, Criterion) else str(c)).strip() for c in criteria)
    if not names or any(not n for n in names):
        raise ValueError("at least one criterion is needed, and criterion names must be non-empty")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"criterion names must be unique; repeated: {', '.join(repeated)}")
    return names


def _score_type(scale: Scale) -> Any:
    lo, hi = scale
    # strict: JSON 3.5, 3.0, "3" and true are all rejected rather than coerced.
    return Annotated[int, Field(strict=True, ge=lo, le=hi, description=f"a whole number from {lo} to {hi}")]


def _each_criterion_once(names: tuple[str, ...], field: str) -> Callable[[list[Any]], list[Any]]:
    """A validator: the list covers ``names`` exactly once each; returns it in ``names`` order."""
    order = {n: i for i, n in enumerate(names)}

    def check(items: list[Any]) -> list[Any]:
        seen = [item.criterion for item in items]
        missing = [n for n in names if n not in seen]
        repeated = sorted({n for n in seen if seen.count(n) > 1}, key=order.__getitem__)
        problems = []
        if missing:
            problems.append("missing " + ", ".join(repr(n) for n in missing))
        if repeated:
            problems.append("repeated " + ", ".join(repr(n) for n in repeated))
        if problems:
            raise ValueError(f"{field} must judge each criterion exactly once ({'; '.join(problems)})")
        return sorted(items, key=lambda item: order[item.criterion])

    return check


ChecklistKey = tuple[tuple[str, str], ...]


def _checklist_key(checklist: BiasChecklist | None) -> ChecklistKey:
    return tuple((i.id, i.question) for i in checklist.items) if checklist else ()


def _bias_check_type(key: ChecklistKey) -> type[BaseModel]:
    class BiasCheck(BaseModel):
        model_config = _LLM_OUTPUT

        detected: StrictBool = Field(description="true if this bias may have influenced the judgement")
        note: str = Field(description="what you noticed and how you corrected for it; required when detected")

        @model_validator(mode="after")
        def _detected_needs_a_note(self) -> BiasCheck:
            if self.detected and not self.note.strip():
                raise ValueError("a detected bias needs a non-empty note saying what was noticed")
            return self

    fields: dict[str, Any] = {item_id: (BiasCheck, Field(description=question)) for item_id, question in key}
    return create_model("BiasChecklistAnswers", __config__=_LLM_OUTPUT, **fields)


@lru_cache(maxsize=256)
def _pairwise_pass_model(
    names: tuple[str, ...], scale: Scale, allow_tie: bool, checklist: ChecklistKey
) -> type[BaseModel]:
    verdict: Any = Literal["A", "B", "TIE"] if allow_tie else Literal["A", "B"]
    name_type: Any = Literal[names]  # type: ignore[valid-type]
    score = _score_type(scale)

    comparison_item = create_model(
        "CriterionComparison",
        __config__=_LLM_OUTPUT,
        criterion=(name_type, Field(description="one of the requested criteria, each exactly once")),
        reasoning=(Reasoning, Field(description="evidence-based reasoning, written before any score")),
        a_strength=(str, Field(description="what Response A does well on this criterion")),
        b_strength=(str, Field(description="what Response B does well on this criterion")),
        winner=(verdict, Field(description="which response is better on this criterion")),
        a_score=(score, Field(description="Response A's score on this criterion")),
        b_score=(score, Field(description="Response B's score on this criterion")),
    )
    differentiators = create_model(
        "Differentiators",
        __config__=_LLM_OUTPUT,
        a_advantages=(list[str], Field(description="Response A's key advantages")),
        b_advantages=(list[str], Field(description="Response B's key advantages")),
    )
    comparison_type: Any = Annotated[
        list[comparison_item],  # type: ignore[valid-type]
        AfterValidator(_each_criterion_once(names, "comparison")),
        Field(
            description="one entry per criterion, in the order given",
            json_schema_extra={"minItems": len(names), "maxItems": len(names)},
        ),
    ]
    fields: dict[str, Any] = {
        "comparison": (comparison_type, ...),
        "overall_reasoning": (Reasoning, Field(description="overall reasoning, written before the verdict")),
        "differentiators": (differentiators, ...),
        "winner": (verdict, Field(description="the better response overall")),
        "confidence": (Confidence, Field(strict=True, description="0 to 1; lower when the responses are close")),
    }
    if checklist:
        fields["bias_checklist"] = (_bias_check_type(checklist), ...)
    return create_model("PairwisePass", __config__=_LLM_OUTPUT, **fields)


def pairwise_pass_model(
    criteria: Sequence[str | Criterion],
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    allow_tie: bool = True,
    *,
    bias_checklist: BiasChecklist | None = None,
) -> type[BaseModel]:
    """The validating model of ONE pairwise pass (the judge saw "Response A" then "Response B").

    Fields, in the order the judge is asked to write them: ``comparison`` (per criterion:
    criterion, reasoning, a_strength, b_strength, winner, a_score, b_score),
    ``overall_reasoning``, ``differentiators`` {a_advantages, b_advantages}, ``winner``,
    ``confidence`` (0..1), and ``bias_checklist`` only when a checklist is given.
    With ``allow_tie=False`` a "TIE" winner (overall or per criterion) is rejected.
    A valid ``comparison`` is returned in the requested criteria order.
    Models are cached, so the same arguments give the same class.
    """
    names, checklist = criterion_names(criteria), _checklist_key(bias_checklist)
    return _pairwise_pass_model(names, check_scale(scale), allow_tie, checklist)


@lru_cache(maxsize=256)
def _rubric_grade_model(names: tuple[str, ...], scale: Scale, checklist: ChecklistKey) -> type[BaseModel]:
    name_type: Any = Literal[names]  # type: ignore[valid-type]
    grade_item = create_model(
        "CriterionGrade",
        __config__=_LLM_OUTPUT,
        criterion=(name_type, Field(description="one of the rubric's criteria, each exactly once")),
        reasoning=(Reasoning, Field(description="evidence-based reasoning, written before the score")),
        score=(_score_type(scale), ...),
    )
    criteria_type: Any = Annotated[
        list[grade_item],  # type: ignore[valid-type]
        AfterValidator(_each_criterion_once(names, "criteria")),
        Field(
            description="one entry per rubric criterion, in the order given",
            json_schema_extra={"minItems": len(names), "maxItems": len(names)},
        ),
    ]
    fields: dict[str, Any] = {
        "criteria": (criteria_type, ...),
        "overall_reasoning": (Reasoning, ...),
        "safety_concerns": (
            list[str],
            Field(description="safety problems in the response (harm, danger, illegality); empty list if none"),
        ),
    }
    if checklist:
        fields["bias_checklist"] = (_bias_check_type(checklist), ...)
    return create_model("RubricGrade", __config__=_LLM_OUTPUT, **fields)


def rubric_grade_model(rubric: Rubric, bias_checklist: BiasChecklist | None) -> type[BaseModel]:
    """The validating model of one rubric grade: per criterion {criterion, reasoning, score},
    ``overall_reasoning``, ``safety_concerns`` and, with a checklist, the answered
    ``bias_checklist`` (grading appends the built-in checklist to every evaluation)."""
    return _rubric_grade_model(tuple(rubric.criterion_names), rubric.scale, _checklist_key(bias_checklist))


# ---------------------------------------------------------------------- pairwise result


class Differentiators(BaseModel):
    a_advantages: list[str] = Field(default_factory=list)
    b_advantages: list[str] = Field(default_factory=list)


class CriterionVerdict(BaseModel):
    """The final verdict on one criterion, in the original labels (A = the first input)."""

    criterion: str
    winner: Verdict
    reasoning: str
    a_strength: str = ""
    b_strength: str = ""
    a_score: float
    b_score: float
    #: Whether both passes chose the same winner for this criterion (None without swap).
    consistent: bool | None = None


class PositionConsistency(BaseModel):
    first_pass_winner: Verdict
    #: Already mapped back to the original labels.
    second_pass_winner: Verdict
    consistent: bool


class SideScores(BaseModel):
    """One response's scores: per criterion and total (averaged over passes where swapped)."""

    criteria: dict[str, float]
    total: float


class SwapVerdict(BaseModel):
    """What a swap strategy decides from the passes (see ``strategies``)."""

    strategy: str
    winner: Verdict
    confidence: Confidence
    comparison: list[CriterionVerdict]
    scores: dict[Side, SideScores]
    position_consistency: PositionConsistency | None
    unstable: bool
    overall_reasoning: str
    differentiators: Differentiators


class PairwiseMetadata(BaseModel):
    evaluation_time_ms: float = 0.0
    positions_swapped: bool
    judge_model: str | None = None
    calls: int = 0


class PairwiseResult(BaseModel):
    """Seed 001's output schema, snake_cased, plus scores, raw passes and the unstable flag."""

    success: bool = True
    error: str | None = None
    winner: Verdict
    confidence: Confidence
    comparison: list[CriterionVerdict] = Field(default_factory=list)
    overall_reasoning: str = ""
    differentiators: Differentiators = Field(default_factory=Differentiators)
    position_consistency: PositionConsistency | None = None
    scores: dict[Side, SideScores] = Field(default_factory=dict)
    scale: Scale = DEFAULT_PAIRWISE_SCALE
    max_total: int = 0
    strategy: str
    #: The validated passes as the judge returned them, in the labels the judge saw
    #: (in pass 2, "A" is the original B).
    raw_pass_1: dict[str, Any] | None = None
    raw_pass_2: dict[str, Any] | None = None
    #: Seed 003 step 5: the winner changed when positions were swapped.
    unstable: bool = False
    metadata: PairwiseMetadata

    @classmethod
    def failure(cls, error: str, *, strategy: str, metadata: PairwiseMetadata) -> PairwiseResult:
        """A result for a comparison that could not be judged (reported, never hidden)."""
        return cls(success=False, error=error, winner="TIE", confidence=0.0, strategy=strategy, metadata=metadata)


# ------------------------------------------------------------------- evaluation report


class CriterionScore(BaseModel):
    criterion: str
    score: int
    reasoning: str
    weight: float = 1.0
    #: Every valid vote's score for this criterion, in order.
    votes: list[int]
    agreement: float
    confidence_level: ConfidenceLevel


class BiasCheckResult(BaseModel):
    id: str
    question: str
    #: True when any vote reported this bias.
    detected: bool
    notes: list[str] = Field(default_factory=list)


class EvaluationReport(BaseModel):
    """Seed 003 step 8: the compiled result of rubric (or reference-based) grading."""

    rubric: str
    scale: Scale
    criteria: list[CriterionScore]
    total: int
    min_total: int
    max_total: int
    weighted_total: float
    weighted_max: float
    #: Weighted total mapped onto 0..1 (0 = every criterion at the bottom of the scale).
    normalized: float
    overall_reasoning: str
    confidence_level: ConfidenceLevel
    agreement: float
    votes: int
    invalid_attempts: int = 0
    bias_checklist: list[BiasCheckResult] = Field(default_factory=list)
    safety_flag: bool
    safety_concerns: list[str] = Field(default_factory=list)
    reference_used: bool
    #: Low confidence or a safety flag: a person should look at this one.
    flagged_for_review: bool
    judge_model: str | None = None
