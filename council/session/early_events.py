"""The events a session tells before any member replies, the base of every event, and what
an event may tell when the session keeps no text (:func:`private_view`).

Kept apart from :mod:`council.session.events` (which re-exports them with the others) so that a
run's first calls wait only for these: the events about replies, consensus and the finish, and
the results they carry, are imported in a worker thread while the calls are in flight.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from council.untrusted.redaction import keeps_text


class EventBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int = Field(0, ge=0, description="1, 2, 3, … within a session (0: not yet numbered)")
    session_id: str
    at: str = Field("", description="When it happened: UTC ISO-8601")


class SessionStarted(EventBase):
    type: Literal["session_started"] = "session_started"
    council: str
    question: str | None = Field(description="None when transcripts are off")
    members: list[str]
    reviewers: list[str]
    models: dict[str, str] = Field(description="member / reviewer / chairman id → model string")
    seed: int
    scale: tuple[int, int]
    self_review: str
    synthesis: bool = Field(description="A synthesis was asked for")
    offline_default: bool = False


class StageStarted(EventBase):
    type: Literal["stage"] = "stage"
    stage: Literal["answer", "review", "synthesis"]
    detail: str = ""
    expected: int = Field(0, description="How many answers / reviews / syntheses this stage waits for")


class Notice(EventBase):
    type: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"] = "info"
    text: str


def private_view(event: Any) -> Any | None:
    """``event`` as it may leave the session: without question, answer, reasoning or synthesis
    text when the current scope keeps no text (synthesis deltas are then dropped: None). Each
    kind of event is known by its ``type``, the union's discriminator."""
    if keeps_text():
        return event
    kind = event.type
    if kind == "synthesis_delta":
        return None
    if kind == "session_started":
        return event.model_copy(update={"question": None})
    if kind == "answer":
        return event.model_copy(update={"text": None})
    if kind == "synthesis":
        structure = event.structure.without_text() if event.structure is not None else None
        return event.model_copy(update={"text": None, "structure": structure})
    if kind == "review":
        return event.model_copy(update={"reasoning": {}})
    if kind == "revision":
        return event.model_copy(update={"text": None, "reason": None})
    return event
