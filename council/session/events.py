"""What a running session tells the world, with content, as it happens.

Every event has a ``type`` (the discriminator), a sequence number ``seq`` (1, 2, 3, … within
one session, no gaps: an SSE event id, a resume point), the ``session_id`` and the time ``at``.
The runner emits them through one callback in this order::

    session_started    notice?                             (the offline default)
    stage(answer)      answer × members          notice*   (answers cut for review)
                       stage_closed?                       (members late: ``stage_grace``)
    stage(review)      review × reviewers        stage_closed?
    round_started      revision × members                  (each deliberation round, when one runs:
      stage(review)    review × reviewers  round            council.session.round_events)
    consensus                                              (when there are enough valid reviews)
    stage(synthesis)   synthesis_delta+  synthesis         (when a synthesis was asked for)
    session_finished                                       (also when the session fails)

``synthesis_delta`` carries the chairman's text as it is written; the concatenated deltas of
one chairman equal the ``text`` of the ``synthesis`` event that follows them. A ``notice``
(e.g. "the chairman failed; the fallback writes") may come between the deltas of a failed
chairman and those of its fallback, or (structured synthesis) before a re-asked chairman's
answer, told again in full once valid. A partial council's text starts with one line saying so
(:mod:`council.session.degraded`).

Privacy: with transcripts off, no event carries the question, an answer, a reviewer's
reasoning, a revised answer or its reason, or the synthesis (:func:`private_view`, the one
place that decides, follows the session's :mod:`council.untrusted.redaction` scope). The
events told before any reply, their base and :func:`private_view` are defined in
:mod:`council.session.early_events` (a run's first calls need only those) and exported here
with the rest. The published JSON Schema is docs/schemas/session-events.json
(:func:`events_json_schema`; a test keeps it equal).
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from council.accounting.usage import Usage
from council.methods.ranking import Consensus, ConsensusEntry
from council.session.early_events import EventBase, Notice, SessionStarted, StageStarted, private_view
from council.session.round_events import RevisionEvent, RoundFinished, RoundStarted
from council.session.structured import SynthesisStructure

if TYPE_CHECKING:  # the result models are imported once replies come in, not before the first call
    from council.session.results import MemberAnswer, Review, SessionResult, Synthesis

SCHEMA_ID = "https://council.invalid/schemas/session-events.json"


class AnswerEvent(EventBase):
    type: Literal["answer"] = "answer"
    member: str
    model: str
    status: Literal["ok", "failed", "candidate", "late"]
    text: str | None = None
    error: str | None = None
    length_chars: int = 0
    latency_ms: float | None = None


class ReviewEvent(EventBase):
    type: Literal["review"] = "review"
    reviewer: str
    model: str
    status: Literal["ok", "invalid", "late"]
    order: list[str] = Field(description="Member ids in the order this reviewer saw them")
    labels: dict[str, str] = Field(description="Anonymous label shown to the reviewer → member id")
    scores: dict[str, int] = Field(default_factory=dict, description="member id → score")
    reasoning: dict[str, str] = Field(default_factory=dict, description="member id → the reviewer's reasoning")
    ranking: list[str] = Field(default_factory=list, description="Member ids, best first")
    attempts: int = 0
    error: str | None = None


class StageClosed(EventBase):
    """A stage closed at its quorum and grace (``stage_grace``) with calls still running: their
    answers are not reviewed, their reviews not counted (each told as ``late`` just before)."""

    type: Literal["stage_closed"] = "stage_closed"
    stage: Literal["answer", "review"]
    late: list[str] = Field(description="Members (answer) or reviewers (review) still running")
    quorum_seconds: float = Field(description="How long the stage took to reach its quorum")
    grace_seconds: float = Field(description="How long it then waited for the rest")


class ConsensusEvent(EventBase):
    type: Literal["consensus"] = "consensus"
    method: str = "borda"
    order: list[str] = Field(description="Member ids, best first (ties in seeded order)")
    table: list[ConsensusEntry]
    kendall_w: float | None
    p: float | None = Field(description="P-value of the agreement test")
    ballots: int


class SynthesisDelta(EventBase):
    type: Literal["synthesis_delta"] = "synthesis_delta"
    chairman: str
    text: str


class SynthesisEvent(EventBase):
    type: Literal["synthesis"] = "synthesis"
    status: Literal["ok", "failed"]
    chairman: str | None = None
    model: str | None = None
    text: str | None = None
    fallback_used: bool = False
    error: str | None = None
    structure: SynthesisStructure | None = Field(
        default=None, description="The structured synthesis's parts, members named by id (synthesis = structured)"
    )


class SessionFinished(EventBase):
    type: Literal["session_finished"] = "session_finished"
    status: Literal["complete", "partial", "failed", "interrupted"]
    usage: Usage = Usage()
    cost_usd: float | None = None
    duration_ms: float = 0.0
    partial_reasons: list[str] = Field(default_factory=list)
    error: str | None = None


SessionEvent = Annotated[
    SessionStarted
    | StageStarted
    | AnswerEvent
    | ReviewEvent
    | StageClosed
    | ConsensusEvent
    | SynthesisDelta
    | SynthesisEvent
    | Notice
    | SessionFinished
    | RoundStarted
    | RevisionEvent
    | RoundFinished,
    Field(discriminator="type"),
]
"""Any session event (a pydantic discriminated union on ``type``)."""

EVENT_TYPES: tuple[type[EventBase], ...] = (
    SessionStarted,
    StageStarted,
    AnswerEvent,
    ReviewEvent,
    StageClosed,
    ConsensusEvent,
    SynthesisDelta,
    SynthesisEvent,
    Notice,
    SessionFinished,
    RoundStarted,
    RevisionEvent,
    RoundFinished,
)


@functools.cache
def _adapter() -> TypeAdapter[Any]:
    """Built at first use: a run that only emits events never parses one, and need not pay at start."""
    return TypeAdapter(SessionEvent)


def parse_event(data: dict[str, Any] | str | bytes) -> Any:
    """An event from its JSON form (a dict or JSON text); a ``pydantic.ValidationError`` if it is not one."""
    if isinstance(data, str | bytes):
        return _adapter().validate_json(data)
    return _adapter().validate_python(data)


def answer_fields(a: MemberAnswer) -> dict[str, Any]:
    return {
        "member": a.member,
        "model": a.model,
        "status": a.status,
        "text": a.text,
        "error": a.error,
        "length_chars": a.length_chars,
        "latency_ms": a.latency_ms,
    }


def review_fields(r: Review) -> dict[str, Any]:
    return {
        "reviewer": r.reviewer,
        "model": r.model,
        "status": "late" if r.late else "ok" if r.valid else "invalid",
        "order": r.display_order,
        "labels": r.labels,
        "scores": r.scores,
        "reasoning": r.reasoning,
        "ranking": r.ranking,
        "attempts": r.attempts,
        "error": r.error,
    }


def consensus_fields(c: Consensus) -> dict[str, Any]:
    return {
        "method": c.method,
        "order": c.order,
        "table": c.ranking,
        "kendall_w": c.kendall_w,
        "p": c.kendall_w_p_value,
        "ballots": c.ballots,
    }


def synthesis_fields(s: Synthesis) -> dict[str, Any]:
    return {
        "status": "ok" if s.status == "ok" else "failed",
        "chairman": s.chairman,
        "model": s.model,
        "text": s.text,
        "fallback_used": s.fallback_used,
        "error": s.error,
        "structure": s.structure,
    }


def finished_fields(result: SessionResult) -> dict[str, Any]:
    return {
        "status": result.status if result.status != "running" else "interrupted",
        "usage": result.usage,
        "cost_usd": result.usage.cost_usd,
        "duration_ms": result.duration_ms,
        "partial_reasons": result.partial_reasons,
    }


def events_from_result(result: SessionResult) -> list[Any]:
    """A finished session's events, rebuilt from its result (a session stored before its events
    were, or a view that prints both alike). Numbered from 1; no stage, notice or delta events."""
    sid = result.session_id
    events: list[Any] = [
        SessionStarted(
            session_id=sid,
            at=result.created_at,
            council=result.council,
            question=result.question,
            members=result.members,
            reviewers=result.reviewers,
            models=result.models,
            seed=result.seed,
            scale=result.scale,
            self_review=result.self_review,
            synthesis=result.synthesis.status != "skipped",
            offline_default=result.offline_default,
        ),
    ]
    first = result.deliberation.earlier[0] if result.deliberation and result.deliberation.earlier else result
    events += [AnswerEvent(session_id=sid, **answer_fields(a)) for a in first.answers]
    events += [ReviewEvent(session_id=sid, **review_fields(r)) for r in first.reviews]
    events += _rounds_replayed(result)
    if result.consensus is not None:
        events.append(ConsensusEvent(session_id=sid, **consensus_fields(result.consensus)))
    if result.synthesis.status != "skipped":
        events.append(SynthesisEvent(session_id=sid, **synthesis_fields(result.synthesis)))
    events.append(SessionFinished(session_id=sid, **finished_fields(result)))
    return [e.model_copy(update={"seq": i}) for i, e in enumerate(events, 1)]


def _rounds_replayed(result: SessionResult) -> list[Any]:
    """A deliberating session's rounds as they were told: each round's start, every member's
    revision, the reviews of the revised answers (when any changed) and the round's end."""
    d, sid = result.deliberation, result.session_id
    if d is None:
        return []
    later = [*d.earlier[1:], result]  # the answers and reviews after each round that changed some
    events: list[Any] = []
    for r in d.rounds:
        after = later[r.round - 1] if r.round - 1 < len(later) else result
        texts = {a.member: a.text for a in after.answers}
        common = {"session_id": sid, "round": r.round, "kendall_w_before": r.kendall_w_before}
        events.append(RoundStarted(**common, trigger=r.trigger, expected=len(r.members)))
        for m in r.members:
            log = m.model_dump(exclude={"attempts"})
            events.append(RevisionEvent(session_id=sid, round=r.round, **log, text=texts.get(m.member)))
        changed = [m.member for m in r.members if m.changed]
        if changed:
            events += [ReviewEvent(session_id=sid, **review_fields(v)) for v in after.reviews]
        capitulations = [m.member for m in r.members if m.capitulation]
        events.append(RoundFinished(**common, trigger=r.trigger, kendall_w_after=r.kendall_w_after, changed=changed,
                                    capitulations=capitulations))  # fmt: skip
    return events


def events_json_schema() -> dict[str, Any]:
    """The JSON Schema of one event (docs/schemas/session-events.json)."""
    schema = _adapter().json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "council session event",
        "description": (
            "One event of a council session, as the Python API yields it and the server streams it "
            "(type is the discriminator; seq numbers the events of a session from 1)."
        ),
        **schema,
    }


def events_json_schema_text() -> str:
    return json.dumps(events_json_schema(), indent=2, ensure_ascii=False) + "\n"


__all__ = [
    "EVENT_TYPES",
    "AnswerEvent",
    "ConsensusEvent",
    "EventBase",
    "Notice",
    "ReviewEvent",
    "RevisionEvent",
    "RoundFinished",
    "RoundStarted",
    "SessionEvent",
    "SessionFinished",
    "SessionStarted",
    "StageClosed",
    "StageStarted",
    "SynthesisDelta",
    "SynthesisEvent",
    "answer_fields",
    "consensus_fields",
    "events_from_result",
    "finished_fields",
    "events_json_schema",
    "events_json_schema_text",
    "parse_event",
    "private_view",
    "review_fields",
    "synthesis_fields",
]
