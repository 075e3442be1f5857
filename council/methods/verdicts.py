"""What the judging methods decide, as data: verdicts, scales, and a comparison's result.

Plain pydantic models with ``model_dump_json()`` and no behaviour, shared by the swap
strategies (:mod:`council.methods.swap`), several judges' combination
(:mod:`council.methods.averaging`) and the judging engine, which builds the models the
judges must fill in :mod:`council.judging.schemas`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

Verdict = Literal["A", "B", "TIE"]
Side = Literal["A", "B"]
ConfidenceLevel = Literal["high", "moderate", "low"]
Scale = tuple[int, int]

#: Depth dimensions are scored 1-5 each (docs/methods.md, "Criteria sets").
DEFAULT_PAIRWISE_SCALE: Scale = (1, 5)

Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


def check_scale(scale: Sequence[int]) -> Scale:
    """``(lo, hi)`` as two integers with ``lo < hi``; raises ValueError otherwise."""
    if len(scale) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in scale):
        raise ValueError(f"a scale is two integers (lo, hi), got {scale!r}")
    lo, hi = scale
    if lo >= hi:
        raise ValueError(f"a scale needs lo < hi, got ({lo}, {hi})")
    return lo, hi


def criterion_items(output: BaseModel | Mapping[str, Any], key: str) -> dict[str, dict[str, Any]]:
    """A validated reply's per-criterion results, ``{criterion: result}`` (a model instance gives
    them in the requested criteria's order, a plain dict as it is).

    Reads the keyed shape the judges return; runs stored before it (a list of objects that
    each name their ``criterion``) read the same."""
    data = output.model_dump(mode="json") if isinstance(output, BaseModel) else output
    value = data[key]
    if isinstance(value, Mapping):
        return {str(k): dict(v) for k, v in value.items()}
    return {str(item["criterion"]): {k: v for k, v in item.items() if k != "criterion"} for item in value}


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
    """A comparison's result (docs/methods.md, "Pairwise passes"): verdicts, scores, raw passes, unstable flag."""

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
    #: The winner changed when positions were swapped (docs/methods.md, "Unstable results").
    unstable: bool = False
    metadata: PairwiseMetadata

    @classmethod
    def failure(cls, error: str, *, strategy: str, metadata: PairwiseMetadata) -> PairwiseResult:
        """A result for a comparison that could not be judged (reported, never hidden)."""
        return cls(success=False, error=error, winner="TIE", confidence=0.0, strategy=strategy, metadata=metadata)
