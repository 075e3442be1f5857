"""The flat export tables' rows (``--shape sessions`` in CSV, ``scores``, ``answers``): their
columns, in order, with their types. Light on purpose (pydantic only): ``council.exports.sessions``
takes its column lists from here without loading the session machinery; the JSON Schemas
are made in :mod:`council.exports.shapes`.
"""

from __future__ import annotations

from pydantic import BaseModel


class SessionRow(BaseModel):
    """``--shape sessions`` in CSV: one flat row per session."""

    session_id: str
    created_at: str
    status: str
    kind: str
    council: str | None
    seed: int | None
    members: str
    winner: str | None
    winner_tied: bool
    kendall_w: float | None
    kendall_w_p_value: float | None
    answers: int
    valid_reviews: int
    calls: int | None
    failed_calls: int | None
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float | None
    duration_ms: float | None
    error: str | None
    question: str | None
    answer: str | None
    reviewer_agreement_tau: float | None
    """The mean Kendall's τ_b of the valid reviewers' rankings with the consensus (where defined)."""
    reviewer_agreement_top1: float | None
    """The share of the valid reviewers whose first answer is among the consensus's first."""


class ScoreRow(BaseModel):
    """``--shape scores``: one row per score of a valid review."""

    session_id: str
    created_at: str | None
    council: str | None
    session_status: str | None
    seed: int | None
    reviewer: str
    reviewer_model: str | None
    member: str
    model: str | None
    label: str | None
    position: int | None
    score: int
    scale_min: int | None
    scale_max: int | None
    rank: int | None
    self_review: bool
    reasoning: str | None


class AnswerRow(BaseModel):
    """``--shape answers``: one row per answer."""

    session_id: str
    created_at: str | None
    council: str | None
    session_status: str | None
    seed: int | None
    member: str
    model: str | None
    status: str | None
    length_chars: int | None
    latency_ms: float | None
    truncated: bool
    consensus_rank: int | None
    borda: float | None
    mean_score: float | None
    scores_received: int
    error: str | None
    text: str | None


class JudgmentRow(BaseModel):
    """``council export --judgments``: one row per judged pair of a batch and judge."""

    batch_id: str
    item_id: str
    label: str | None
    """The item's label (``A``, ``B`` or ``TIE``), where the batch file gave one."""
    judge: str
    model: str
    verdict_a_first: str | None
    """The judge's verdict (in the original labels) with A shown first: the majority of its
    votes in that order, ``TIE`` without one; null without a valid pass."""
    verdict_b_first: str | None
    """Likewise with B shown first (null without swap)."""
    verdict: str | None
    """The judge's verdict on the pair under the batch's strategy; null if the judge failed."""
    combined_verdict: str
    """The batch's verdict on the pair (its ``--combine``)."""
    probability: float | None
    """The probability of the combined verdict (the posterior, or the share of the pair's passes naming it)."""
