"""The judging engine's data: what judges must return, rubric files, and final results.

Two kinds of models live here:

* **LLM output models**, built per request by :func:`pairwise_pass_model` and
  :func:`rubric_grade_model`. Their ``model_json_schema()`` is what providers are
  sent, and the same model validates the reply (docs/methods.md, "Pairwise passes"): reasoning is
  required and comes *before* the scores, scores are strict integers on the declared
  scale (``3.5``, ``"3"``, ``true`` and out-of-range values are rejected, never
  rounded), and every requested criterion is judged exactly once. Error messages
  name the field and the problem, because they are fed back to the judge when the
  output is re-requested.
* **Result models** (:class:`EvaluationReport`, ...): plain pydantic models with
  ``model_dump_json()``; they carry no behaviour. A comparison's result
  (``PairwiseResult``) and the verdict types are in :mod:`council.methods.verdicts`.
"""

from __future__ import annotations

import re
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

from council.methods.verdicts import DEFAULT_PAIRWISE_SCALE, Confidence, ConfidenceLevel, Scale, check_scale

Reasoning = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
_LLM_OUTPUT = ConfigDict(extra="forbid", serialize_by_alias=True)


# --------------------------------------------------------------------------- files


#: Limits on rubric files: enough for any real rubric, small enough that a prompt stays sane.
MAX_CRITERIA = 50
MAX_WEIGHT = 1000.0
MAX_NAME_CHARS = 100
MAX_DESCRIPTION_CHARS = 2000


class Criterion(BaseModel):
    """One thing to judge: a rubric criterion or a pairwise comparison dimension."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_NAME_CHARS)]
    description: Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION_CHARS)] = ""
    #: A number, not a string: "2" is refused rather than read as 2. Finite and bounded, so
    #: weighted totals stay finite.
    weight: float = Field(default=1.0, gt=0, le=MAX_WEIGHT, strict=True, allow_inf_nan=False)
    #: Optional description of what each score means (score -> text).
    levels: dict[int, Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION_CHARS)]] = Field(
        default_factory=dict
    )


class Rubric(BaseModel):
    """A grading rubric: integer scale and weighted criteria (loaded from TOML)."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_NAME_CHARS)]
    description: Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION_CHARS)] = ""
    #: Required: a rubric states its scale (a silent 1-5 default mis-scored 0-10 rubrics).
    scale: tuple[StrictInt, StrictInt]
    criteria: list[Criterion] = Field(min_length=1, max_length=MAX_CRITERIA)

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
    """One question of the bias-awareness checklist (docs/methods.md, "Bias checklist")."""

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
    """Names of ``criteria`` (strings or :class:`Criterion`), checked as a rubric file's are:
    non-empty, unique, at most :data:`MAX_CRITERIA` of them and :data:`MAX_NAME_CHARS` long
    (every command and tool that takes a list of names checks it here, before any call)."""
    if len(criteria) > MAX_CRITERIA:
        raise ValueError(f"{len(criteria)} criteria given: at most {MAX_CRITERIA} criteria")
    names = tuple((c.name if isinstance(c, Criterion) else str(c)).strip() for c in criteria)
    if not names or any(not n for n in names):
        raise ValueError("at least one criterion is needed, and criterion names must be non-empty")
    long = next((n for n in names if len(n) > MAX_NAME_CHARS), None)
    if long is not None:
        raise ValueError(
            f"criterion name {long[:40]!r}… has {len(long)} characters: at most {MAX_NAME_CHARS} characters"
        )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"criterion names must be unique; repeated: {', '.join(repeated)}")
    return names


def _score_type(scale: Scale) -> Any:
    lo, hi = scale
    # strict: JSON 3.5, 3.0, "3" and true are all rejected rather than coerced.
    return Annotated[int, Field(strict=True, ge=lo, le=hi, description=f"a whole number from {lo} to {hi}")]


#: The least a reasoning field must hold: this many characters, and at least MIN_REASONING_WORDS words.
MIN_REASONING_CHARS = 12
MIN_REASONING_WORDS = 2
_WORD = re.compile(r"[^\W\d_]{2,}")  # a run of two or more letters, in any script


def _has_words(text: str) -> str:
    # The first words only, each found where the one before ended (as ``finditer`` finds them):
    # finding every word of a long reasoning was a visible part of a batch's CPU
    # (benchmarks/bench_judge_cpu.py).
    end = 0
    for _ in range(MIN_REASONING_WORDS):
        word = _WORD.search(text, end)
        if word is None:
            raise ValueError(f"reasoning must say why in words (at least {MIN_REASONING_WORDS} words)")
        end = word.end()
    return text


#: A judge's reasoning: substance, not a placeholder such as "." or "ok".
JudgeReasoning = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=MIN_REASONING_CHARS), AfterValidator(_has_words)
]
#: Free lists in a judge's reply are bounded, so a constrained decoder cannot run on forever.
MAX_LIST_ITEMS = 5
ShortList = Annotated[list[str], Field(max_length=MAX_LIST_ITEMS)]


def _reasoning_first(reasoning: str, decided: tuple[str, ...]) -> Callable[[Any], Any]:
    """A before-validator: in the reply as written, ``reasoning`` comes before every key of ``decided``.

    JSON objects keep their order when parsed, so this checks the order the judge wrote in
    (a constrained decoder writes in schema order, which puts reasoning first)."""

    decided_keys = frozenset(decided)

    def check(data: Any) -> Any:
        if isinstance(data, dict) and reasoning in data:
            for key in data:  # the usual reply: the reasoning comes before any decided key
                if key == reasoning:
                    return data
                if key in decided_keys:
                    break
            keys = list(data)
            early = [k for k in decided if k in data and keys.index(k) < keys.index(reasoning)]
            if early:
                raise ValueError(f"write {reasoning!r} before {', '.join(repr(k) for k in early)}")
        return data

    return check


def _llm_model(name: str, first: str | None, decided: tuple[str, ...], **fields: Any) -> type[BaseModel]:
    """A strict output model; the key ``first`` (its reasoning) must come before the ``decided`` keys."""
    validators: dict[str, Any] = {}
    if first is not None:
        validators["reasoning_first"] = model_validator(mode="before")(_reasoning_first(first, decided))
    return create_model(name, __config__=_LLM_OUTPUT, __validators__=validators, **fields)


def _keyed_by_criterion(name: str, names: tuple[str, ...], item: type[BaseModel], what: str) -> type[BaseModel]:
    """An object with one required ``item`` per criterion name, and nothing else.

    Stated this way, "every criterion exactly once" is part of the JSON schema itself, so a
    grammar-constrained decoder (llama.cpp, strict structured output) cannot break it. Field
    names are positional; the criterion names are the aliases the judge reads and writes."""
    fields: dict[str, Any] = {
        f"c{i}": (item, Field(alias=criterion, description=f"{what} on {criterion!r}"))
        for i, criterion in enumerate(names)
    }
    return create_model(name, __config__=_LLM_OUTPUT, **fields)


ChecklistKey = tuple[tuple[str, str], ...]


def _checklist_key(checklist: BiasChecklist | None) -> ChecklistKey:
    return tuple((i.id, i.question) for i in checklist.items) if checklist else ()


def _bias_check_type(key: ChecklistKey) -> type[BaseModel]:
    class BiasCheck(BaseModel):
        model_config = _LLM_OUTPUT

        note: str = Field(description="what you noticed and how you corrected for it; required when detected")
        detected: StrictBool = Field(description="true if this bias may have influenced the judgement")

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
    score = _score_type(scale)

    comparison_item = _llm_model(
        "CriterionComparison",
        "reasoning",
        ("winner", "a_score", "b_score"),
        reasoning=(JudgeReasoning, Field(description="evidence-based reasoning, written before any score")),
        a_strength=(str, Field(description="what Response A does well on this criterion")),
        b_strength=(str, Field(description="what Response B does well on this criterion")),
        winner=(verdict, Field(description="which response is better on this criterion")),
        a_score=(score, Field(description="Response A's score on this criterion")),
        b_score=(score, Field(description="Response B's score on this criterion")),
    )
    differentiators = _llm_model(
        "Differentiators",
        None,
        (),
        a_advantages=(ShortList, Field(description="Response A's key advantages")),
        b_advantages=(ShortList, Field(description="Response B's key advantages")),
    )
    fields: dict[str, Any] = {
        "comparison": (_keyed_by_criterion("Comparison", names, comparison_item, "the comparison"), ...),
        "overall_reasoning": (JudgeReasoning, Field(description="overall reasoning, written before the verdict")),
        "differentiators": (differentiators, ...),
        "winner": (verdict, Field(description="the better response overall")),
        "confidence": (Confidence, Field(strict=True, description="0 to 1; lower when the responses are close")),
    }
    if checklist:
        fields["bias_checklist"] = (_bias_check_type(checklist), ...)
    return _llm_model("PairwisePass", "overall_reasoning", ("winner", "confidence"), **fields)


def pairwise_pass_model(
    criteria: Sequence[str | Criterion],
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    allow_tie: bool = True,
    *,
    bias_checklist: BiasChecklist | None = None,
) -> type[BaseModel]:
    """The validating model of ONE pairwise pass (the judge saw "Response A" then "Response B").

    Fields, in the order the judge writes them: ``comparison``, an object keyed by criterion
    name (every criterion, nothing else), each {reasoning, a_strength, b_strength, winner,
    a_score, b_score}; ``overall_reasoning``; ``differentiators`` {a_advantages,
    b_advantages}; ``winner``; ``confidence`` (0..1); and ``bias_checklist`` only when a
    checklist is given. Reasoning must come before the winner and scores it explains and
    say something (docs/methods.md, "Pairwise passes"). With ``allow_tie=False`` a "TIE"
    winner (overall or per criterion) is rejected. Models are cached, so the same
    arguments give the same class.
    """
    names, checklist = criterion_names(criteria), _checklist_key(bias_checklist)
    return _pairwise_pass_model(names, check_scale(scale), allow_tie, checklist)


@lru_cache(maxsize=256)
def _rubric_grade_model(names: tuple[str, ...], scale: Scale, checklist: ChecklistKey) -> type[BaseModel]:
    grade_item = _llm_model(
        "CriterionGrade",
        "reasoning",
        ("score",),
        reasoning=(JudgeReasoning, Field(description="evidence-based reasoning, written before the score")),
        score=(_score_type(scale), ...),
    )
    fields: dict[str, Any] = {
        "criteria": (_keyed_by_criterion("Criteria", names, grade_item, "the grade"), ...),
        "overall_reasoning": (JudgeReasoning, ...),
        "safety_concerns": (
            ShortList,
            Field(description="safety problems in the response (harm, danger, illegality); an empty list if none"),
        ),
    }
    if checklist:
        fields["bias_checklist"] = (_bias_check_type(checklist), ...)
    return _llm_model("RubricGrade", None, (), **fields)


def rubric_grade_model(rubric: Rubric, bias_checklist: BiasChecklist | None) -> type[BaseModel]:
    """The validating model of one rubric grade: ``criteria`` keyed by criterion name, each
    {reasoning, score} with the reasoning first, ``overall_reasoning``, ``safety_concerns``
    and, with a checklist, the answered ``bias_checklist`` (grading appends the built-in
    checklist to every evaluation)."""
    return _rubric_grade_model(tuple(rubric.criterion_names), rubric.scale, _checklist_key(bias_checklist))


# ------------------------------------------------------------------- evaluation report


class CriterionScore(BaseModel):
    criterion: str
    #: An integer on the scale for one judge; several judges' mean (a float) for several.
    score: int | float
    reasoning: str
    weight: float = 1.0
    #: Every valid vote's score for this criterion, in order.
    votes: list[int]
    #: The share of the planned votes that gave ``score`` (several judges: their mean).
    agreement: float
    confidence_level: ConfidenceLevel
    #: Several judges: each judge's own final score.
    by_judge: dict[str, int] = Field(default_factory=dict)


class BiasCheckResult(BaseModel):
    id: str
    question: str
    #: True when any vote reported this bias.
    detected: bool
    notes: list[str] = Field(default_factory=list)


class EvaluationReport(BaseModel):
    """The compiled result of rubric (or reference-based) grading (docs/methods.md, "Rubric grading")."""

    rubric: str
    scale: Scale
    criteria: list[CriterionScore]
    total: int | float
    min_total: int
    max_total: int
    weighted_total: float
    weighted_max: float
    #: Weighted total mapped onto 0..1 (0 = every criterion at the bottom of the scale).
    normalized: float
    overall_reasoning: str
    confidence_level: ConfidenceLevel
    agreement: float
    #: Valid votes, and the votes asked for: any difference flags the report.
    votes: int
    votes_planned: int
    missing_votes: int = 0
    #: Attempts whose reply was invalid or failed (a vote may take several attempts).
    invalid_attempts: int = 0
    bias_checklist: list[BiasCheckResult] = Field(default_factory=list)
    safety_flag: bool
    safety_concerns: list[str] = Field(default_factory=list)
    reference_used: bool
    #: Low confidence, a missing vote or a safety flag: a person should look at this one.
    flagged_for_review: bool
    judge_model: str | None = None
