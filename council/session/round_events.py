"""The events of a deliberation round (:mod:`council.session.deliberation`), in the order told::

    round_started                       (kendall_w_before, why it runs)
    revision × members                  (each member's revised or kept answer)
    stage(review)   review × reviewers  (the reviews of the revised answers)
    round                               (the round's summary: kendall_w_after, every member's log)

Re-exported by :mod:`council.session.events`, which puts them in the session's event union.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from council.session.early_events import EventBase


class RoundStarted(EventBase):
    type: Literal["round_started"] = "round_started"
    round: int = Field(description="1 for the first revision round")
    trigger: str = Field(description="Why it runs")
    kendall_w_before: float | None
    expected: int = Field(0, description="How many members are asked to revise")


class RevisionEvent(EventBase):
    type: Literal["revision"] = "revision"
    round: int
    member: str
    model: str
    status: Literal["ok", "failed"]
    changed: bool
    text: str | None = Field(None, description="Its answer after the round (None when transcripts are off)")
    reason: str | None = Field(None, description="Its one line on what changed and why")
    similarity_to_own: float
    similarity_to_peers: dict[str, float] = Field(default_factory=dict)
    adopted_from: str | None = None
    capitulation: bool = Field(False, description="Adopted a peer's answer with no reason given")
    error: str | None = None


class RoundFinished(EventBase):
    type: Literal["round"] = "round"
    round: int
    trigger: str
    kendall_w_before: float | None
    kendall_w_after: float | None
    changed: list[str] = Field(default_factory=list, description="Members whose answer changed")
    capitulations: list[str] = Field(default_factory=list, description="Members flagged by the capitulation guard")
