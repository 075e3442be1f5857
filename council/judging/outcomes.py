"""What a comparison or a grade returns, and what of it is stored (pure data)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from council.accounting.usage import CallRecord, Usage
from council.judging.schemas import EvaluationReport
from council.methods.averaging import JudgesVerdict, MultiJudgeVerdict
from council.methods.verdicts import ConfidenceLevel, PairwiseResult, Scale, Side, SideScores, Verdict
from council.methods.voting import VoteResult
from council.untrusted.redaction import redacted_json, redacted_model_json


class JudgmentPass(BaseModel):
    """One judge pass as recorded: who judged, in which order, and whether the output was valid."""

    judge: str
    judge_model: str
    vote: int
    pass_number: int  # pairwise: 1 = A shown first, 2 = B shown first; grades: 1
    shown_first: Literal["A", "B"] | None = None
    valid: bool
    attempts: int
    winner_as_seen: Verdict | None = None
    winner: Verdict | None = None  # in the original labels
    a_total: float | None = None
    b_total: float | None = None
    score_total: int | None = None
    problem: str | None = None
    output: dict[str, Any] | None = Field(default=None, exclude=True)  # stored with the pass, not repeated here


class VoteSummary(BaseModel):
    vote: int
    winner: Verdict
    confidence: float
    consistent: bool | None
    a_total: float
    b_total: float


class JudgeComparison(BaseModel):
    """One judge's comparison: its votes merged into one result."""

    judge: str
    model: str
    success: bool
    error: str | None = None
    result: PairwiseResult
    votes: list[VoteSummary] = Field(default_factory=list)
    vote: VoteResult | None = None
    calls_saved: int = 0


class _Stored(BaseModel):
    def stored_result(self, *, keep_text: bool) -> dict[str, Any]:
        """The outcome as stored: whole, or (``COUNCIL_STORE_TRANSCRIPTS=0``) with verdicts,
        scores and validity but none of the judge's words."""
        data = self.model_dump(mode="json")
        return data if keep_text else without_judge_text(data)

    def stored_json(self, *, keep_text: bool) -> str:
        """:meth:`stored_result` as the JSON text stored, redacted (council.untrusted.redaction); whole, it is
        written straight from the model (the same text)."""
        if keep_text:
            return redacted_model_json(self)
        return redacted_json(self.stored_result(keep_text=False)) or "null"


class ComparisonOutcome(_Stored):
    run_id: str
    success: bool
    #: Some judge failed but another judged: the verdict stands on fewer judges (and is flagged).
    partial: bool = False
    #: Why a judge (or the comparison) failed.
    error: str | None = None
    winner: Verdict
    #: The judges' confidence in the verdict, 0 to 1 (kept under its first name; ``judge_confidence``).
    confidence: float
    #: How far the votes (one judge) or the judges (several) agree (kept under its first name; ``agreement_level``).
    confidence_level: ConfidenceLevel
    flagged_for_review: bool
    #: Some swap pair changed its winner when the order was swapped (docs/methods.md, "Unstable results").
    unstable: bool
    strategy: str
    swap: bool
    criteria: list[str]
    scale: Scale
    scores: dict[Side, SideScores] = Field(default_factory=dict)
    judges: list[JudgeComparison]
    averaged: MultiJudgeVerdict | None = None
    """Several judges under ``average``: the averaged result that decided (docs/methods.md, "Multi-judge averaging")."""
    judges_verdict: JudgesVerdict | None = None
    """Several judges: how their results were combined under the strategy."""
    passes: list[JudgmentPass]
    swap_pairs: int
    inconsistent_pairs: int
    calls: int
    calls_saved: int
    usage: Usage
    elapsed_ms: float

    # Two measures, each under a name that says what it is ("confidence 0.32, high" read as one);
    # the older keys stay for the clients that read them, and these copy them.
    judge_confidence: float = Field(
        default=0.0,
        description="The judges' own confidence in the verdict, 0 to 1, combined under the strategy "
        "(docs/methods.md, 'Consistency strategy'); the same number as confidence, which a batch combined by "
        "Dawid-Skene replaces with the posterior.",
    )
    agreement_level: ConfidenceLevel = Field(
        default="low",
        description="How far the votes (one judge) or the judges (several) agree: high all alike, moderate a "
        "strict majority, low none; the same as confidence_level.",
    )

    @model_validator(mode="after")
    def _named_measures(self) -> ComparisonOutcome:
        self.judge_confidence = self.confidence
        self.agreement_level = self.confidence_level
        return self


class JudgeGrade(BaseModel):
    """One judge's grade: its votes compiled into its own report."""

    judge: str
    model: str
    success: bool
    error: str | None = None
    report: EvaluationReport | None = None
    votes_cast: int
    votes_planned: int
    calls_saved: int = 0


class GradeOutcome(_Stored):
    run_id: str
    success: bool
    #: Some judge failed but another graded: the report stands on fewer judges (and is flagged).
    partial: bool = False
    #: Why a judge (or the grade) failed.
    error: str | None = None
    mode: Literal["reference", "rubric"]
    rubric: str
    #: One judge: its report. Several: their reports averaged per criterion.
    report: EvaluationReport | None
    judges: list[JudgeGrade]
    passes: list[JudgmentPass]
    calls: int
    calls_saved: int
    usage: Usage
    elapsed_ms: float


Outcome = ComparisonOutcome | GradeOutcome


def comparison_fields(
    job: Any, per_judge: list[JudgeComparison], calls: list[CallRecord], run_id: str, elapsed_s: float
) -> dict[str, Any]:
    """What every comparison's outcome records of its judges, passes and calls (``job``: the
    engine's comparison, with its ``strategy``, ``swap``, ``names``, ``scale`` and ``passes``)."""
    ok = [j for j in per_judge if j.success]
    pairs = [v.consistent for j in ok for v in j.votes if v.consistent is not None]
    return {
        "run_id": run_id,
        "strategy": job.strategy,
        "swap": job.swap,
        "criteria": job.names,
        "scale": job.scale,
        "judges": per_judge,
        "passes": sorted(job.passes, key=lambda p: (p.judge, p.vote, p.pass_number)),
        "swap_pairs": len(pairs),
        "inconsistent_pairs": pairs.count(False),
        "calls": len(calls),
        "calls_saved": sum(j.calls_saved for j in per_judge),
        "usage": Usage.of(calls),
        "elapsed_ms": elapsed_s * 1000,
    }


def judge_failures(judges: Sequence[JudgeComparison | JudgeGrade]) -> str | None:
    """The causes of the judges that failed, in one line (None when none failed)."""
    return "; ".join(j.error or f"{j.judge}: failed" for j in judges if not j.success) or None


#: Keys of the judge's own words in a stored outcome (its reasoning may quote the responses).
JUDGE_TEXT_KEYS = frozenset(
    {
        "reasoning",
        "overall_reasoning",
        "a_strength",
        "b_strength",
        "a_advantages",
        "b_advantages",
        "notes",
        "note",
        "safety_concerns",
        "raw_pass_1",
        "raw_pass_2",
    }
)


def without_judge_text(value: Any) -> Any:
    """``value`` (JSON data) with every judge-text field set to null; numbers and verdicts kept."""
    if isinstance(value, dict):
        return {k: None if k in JUDGE_TEXT_KEYS else without_judge_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_judge_text(v) for v in value]
    return value
