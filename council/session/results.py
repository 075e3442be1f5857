"""Result types of a council session (pydantic; ``model_dump_json()`` is the --json output)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

from council.accounting.usage import Usage
from council.bias.records import SessionBiasMetadata
from council.methods.ranking import Consensus
from council.session.structured import SynthesisStructure

SessionStatus = Literal["running", "complete", "partial", "failed", "interrupted"]


def _is_none(value: object) -> bool:
    return value is None


class MemberAnswer(BaseModel):
    member: str
    model: str
    status: Literal["ok", "failed", "candidate", "late"]
    """``late``: still answering when the stage closed (``stage_grace``): not reviewed; its text
    is stored when it arrives (council.session.grace)."""
    text: str | None = None
    length_chars: int = 0
    length_words: int = 0
    """Whitespace-separated words (the unit of the length–score correlation)."""
    truncated: bool = False
    """The answer was longer than ``max_answer_chars`` and was cut for review (the notice is in ``flags``)."""
    error: str | None = None
    latency_ms: float | None = None

    @property
    def usable(self) -> bool:
        return self.status in ("ok", "candidate") and self.text is not None


class Review(BaseModel):
    reviewer: str
    model: str
    display_order: list[str]
    """Member ids in the order this reviewer saw them (position 0 first)."""
    labels: dict[str, str]
    """Anonymous label shown to the reviewer → member id."""
    valid: bool
    scores: dict[str, int] = Field(default_factory=dict)
    reasoning: dict[str, str] = Field(default_factory=dict)
    ranking: list[str] = Field(default_factory=list)
    """Member ids, best first."""
    attempts: int = 0
    error: str | None = None
    self_reviewed: bool = False
    """This reviewer's own answer was among those it reviewed."""
    late: bool = False
    """Still reviewing when the stage closed (``stage_grace``): not counted in the consensus nor
    the bias records; stored when it arrives (council.session.grace)."""


class Synthesis(BaseModel):
    status: Literal["ok", "failed", "skipped"]
    chairman: str | None = None
    model: str | None = None
    text: str | None = None
    fallback_used: bool = False
    error: str | None = None
    attempts: int | None = None
    """Requests to the chairman who wrote it, when a format was asked for (re-asks included)."""
    structure: SynthesisStructure | None = None
    """The structured synthesis's parts, members named by id (``synthesis = "structured"``); ``text``
    is what a user reads: the answer, then the "Where the council disagreed" section."""


class Failure(BaseModel):
    stage: Literal["answer", "review", "synthesis"]
    member: str
    error: str


class SessionResult(BaseModel):
    session_id: str
    council: str
    status: SessionStatus
    question: str | None
    seed: int
    members: list[str]
    reviewers: list[str]
    models: dict[str, str]
    """Member/reviewer id → model string."""
    scale: tuple[int, int]
    self_review: str
    answers: list[MemberAnswer]
    reviews: list[Review]
    consensus: Consensus | None
    synthesis: Synthesis
    bias: SessionBiasMetadata | None = None
    """Per-session bias indicators, reported, never used to change a score (docs/methods.md, "Bias audit")."""
    flags: list[str] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    partial_reasons: list[str] = Field(default_factory=list)
    usage: Usage = Usage()
    offline_default: bool = False
    notice: str | None = None
    """Said to the user up front, e.g. that this ran on the small offline default."""
    config_source: str = ""
    created_at: str = ""
    duration_ms: float = 0.0
    # Left out while None: deliberation = "off" leaves the session's JSON exactly as it was
    # before the feature (a field-level rule, serialised in pydantic-core: a wrap serializer on
    # the whole result would turn every dump into a Python dict first).
    deliberation: Deliberation | None = Field(default=None, exclude_if=_is_none)
    """The deliberation rounds (docs/methods.md, "Deliberation"); absent when the council's is off.
    ``answers``, ``reviews``, ``consensus`` and ``bias`` are then the last round's."""

    @property
    def answer(self) -> str | None:
        """The text a user reads (:func:`council.session.degraded.reader_text`): the chairman's
        answer, or without one the top-ranked member's; a partial council's says so first."""
        from council.session.degraded import reader_text

        return reader_text(self)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def late_members(self) -> list[str]:
        """Members still answering when the answer stage closed (``stage_grace``): not reviewed."""
        return [a.member for a in self.answers if a.status == "late"]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def late_reviewers(self) -> list[str]:
        """Reviewers still reviewing when the review stage closed: their reviews not counted."""
        return [r.reviewer for r in self.reviews if r.late]


# -- deliberation rounds (council.session.deliberation) -------------------------------------
class MemberRevision(BaseModel):
    """One member's reply in one deliberation round."""

    member: str
    model: str
    status: Literal["ok", "failed"]
    """failed: no valid reply (the error says why); the member keeps its earlier answer."""
    changed: bool
    """Its answer now differs from its earlier one."""
    similarity_to_own: float
    """sim(revised, its own earlier answer), the word-bigram Jaccard index (docs/methods.md)."""
    similarity_to_peers: dict[str, float] = Field(default_factory=dict)
    """sim(revised, each peer's earlier answer), by member."""
    adopted_from: str | None = Field(default=None, exclude_if=_is_none)  # left out unless adopted
    """The peer whose earlier answer it copied near-verbatim (sim ≥ the adoption threshold)."""
    reason: str | None = None
    """Its one line on what changed and why (None when transcripts are off)."""
    capitulation: bool = False
    """It adopted a peer's answer and gave no reason: the capitulation guard."""
    attempts: int = 0
    error: str | None = None


class DeliberationRound(BaseModel):
    round: int
    """1 for the first revision round (round 0 is the first answers and reviews)."""
    trigger: str
    """Why it ran."""
    kendall_w_before: float | None
    """Kendall's W of the reviews the members saw (None: undefined, e.g. under two ballots)."""
    kendall_w_after: float | None
    """Kendall's W of the reviews of the revised answers."""
    members: list[MemberRevision]


class EarlierRound(BaseModel):
    """A round's answers and reviews, kept once a later round replaced them."""

    round: int
    answers: list[MemberAnswer]
    reviews: list[Review]


class Deliberation(BaseModel):
    mode: Literal["auto", "always"]
    threshold: float
    margin: float | None = None
    max_rounds: int
    rounds: list[DeliberationRound] = Field(default_factory=list)
    earlier: list[EarlierRound] = Field(default_factory=list)
    """The answers and reviews of every round before the last (round 0 first)."""
    stopped: str = ""
    """Why no further round ran."""


SessionResult.model_rebuild()
