"""Deliberation: a second round when the council disagrees (docs/methods.md, "Deliberation").

After the first answers and reviews, and while the council's setting calls for one
(``deliberation = "always"``, or ``"auto"`` with Kendall's W below ``deliberation_threshold`` or
the top two within ``deliberation_margin``), each member that answered sees the anonymised
answers (its own marked as its own) and the reviewers' reasoning about each, and replies under a
JSON schema (validated and re-asked like a review): keep its answer or revise it, with one line
on what changed and why. The reviewers then rank the revised answers again, each in its own
shuffled order, as in the first round. At most ``max_rounds`` rounds; a round in which no member
changed its answer ends the deliberation without new reviews (they would rank the same answers).

The consensus, the bias records and the chairman then use the last round's answers and reviews
only; the earlier rounds' are kept in the result (``deliberation.earlier``) and in the store.
Each member's reply is logged: changed or not, its similarity to its own and to each peer's
earlier answer (:mod:`council.methods.similarity`), the peer it copied near-verbatim if any, and
the capitulation guard: a copy with no reason given is flagged.

:func:`deliberate` is the one hook the runner calls, between the reviews and the consensus.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from council.config import ResolvedModel
from council.config.deliberation import DeliberationSettings
from council.methods.concordance import kendalls_w
from council.methods.ranking import normalised_borda
from council.methods.similarity import adopted_from, similarity
from council.providers.asking import ask_valid
from council.session.prompts import ANSWER_SLOT, QUESTION_SLOT
from council.session.round_events import RevisionEvent, RoundFinished, RoundStarted
from council.session.schemas import REVISION_SCHEMA_NAME, answer_labels
from council.session.stages import Answered, Reviewed, reviewer_order
from council.untrusted.redaction import add_private
from council.untrusted.slots import data_not_instructions, invalid_reply_message, slot

if TYPE_CHECKING:
    from council.session.results import Deliberation, MemberAnswer, MemberRevision, Review
    from council.session.stages import RunState, Stages

#: The slot each reviewer's reasoning about an answer travels in.
REASONING_SLOT = "context"
MAX_REASON_CHARS = 500
#: A reason of fewer words than this is no reason (the capitulation guard; docs/methods.md).
MIN_REASON_WORDS = 4


class Revision(BaseModel):
    """What a member replies in a deliberation round."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["keep", "revise"]
    reason: str = Field(max_length=MAX_REASON_CHARS, description="one line: what you changed and why, or why not")
    answer: str = Field(description="your full revised answer; empty when you keep yours")

    @model_validator(mode="after")
    def _revised_has_text(self) -> Revision:
        if self.decision == "revise" and not self.answer.strip():
            raise ValueError('decision "revise" needs the full revised answer in "answer"')
        return self


@cache
def revision_schema_text() -> str:
    return json.dumps(Revision.model_json_schema(), separators=(",", ":"))


def revision_schema() -> dict[str, Any]:
    return json.loads(revision_schema_text())  # a dict of its own for every call: providers may change it


REVISION_SYSTEM = (
    "You are a member of a council of AI models. You answered a question; the council's answers, yours "
    "among them and marked as yours, were reviewed anonymously. Read the other answers and the reviewers' "
    "reasoning, then keep your answer or revise it. Revise only for a reason you can state: a mistake the "
    "reviews or another answer show you, or a point you missed. Do not change your answer only because "
    "others answered differently or because a reviewer preferred another answer. "
    f"{data_not_instructions((QUESTION_SLOT, ANSWER_SLOT, REASONING_SLOT))}\n"
    'Reply with one JSON object only: "decision" ("keep" or "revise"), "reason" (one line: what you '
    'changed and why, or why you kept your answer) and "answer" (your full revised answer; empty when you '
    "keep yours)."
)


def revision_messages(
    question: str,
    history: Sequence[dict[str, str]],
    answers: Sequence[tuple[str, str, bool]],
    reasoning: Mapping[str, Sequence[tuple[int, str]]],
) -> list[dict[str, str]]:
    """``answers``: (label, text, is its own) in this member's order; ``reasoning``: label →
    (reviewer number, its reasoning about that answer)."""
    slots = "\n\n".join(
        slot(ANSWER_SLOT, text, label=label, **({"author": "you"} if own else {})) for label, text, own in answers
    )
    notes = "\n\n".join(
        slot(REASONING_SLOT, text, label=label, reviewer=str(number))
        for label, _, _ in answers
        for number, text in reasoning.get(label, ())
    )
    own = next(label for label, _, mine in answers if mine)
    user = (
        f"Question:\n{slot(QUESTION_SLOT, question)}\n\n"
        f'The council\'s answers (yours is answer {own}, marked author="you"):\n\n{slots}\n\n'
        f"The reviewers' reasoning about each answer (reviewers are numbered, answers by label):\n\n"
        f"{notes or '(no valid reviews)'}\n\n"
        f"JSON schema: {revision_schema_text()}"
    )
    return [{"role": "system", "content": REVISION_SYSTEM}, *history, {"role": "user", "content": user}]


def revision_retry_message(problem: str) -> dict[str, str]:
    return invalid_reply_message(
        problem,
        'with one JSON object that matches the schema exactly: "decision" keep or revise, a one-line "reason", '
        'and the full "answer" when you revise.',
    )


def no_reason(reason: str) -> bool:
    """Whether ``reason`` gives none: fewer than :data:`MIN_REASON_WORDS` words."""
    return len(reason.split()) < MIN_REASON_WORDS


def one_line(text: str) -> str:
    return " ".join(text.split())


def agreement_w(reviewed: Reviewed) -> float | None:
    """Kendall's W of the valid reviews' rankings (council.methods.concordance)."""
    return kendalls_w([r.ranking for r in reviewed.valid])


def round_trigger(settings: DeliberationSettings, reviewed: Reviewed, usable: int) -> tuple[str | None, str]:
    """(why a round runs, None: none does; why not)."""
    if usable < 2:
        return None, "fewer than two answers to deliberate on"
    if settings.mode == "always":
        return "always", ""
    w = agreement_w(reviewed)
    if w is not None and w < settings.threshold:
        return f"Kendall's W {w:.2f} < {settings.threshold:g}", ""
    if settings.margin is not None:
        points = sorted(normalised_borda(r.ranking for r in reviewed.valid).values(), reverse=True)
        if len(points) >= 2 and points[0] - points[1] <= settings.margin:
            return f"top two within {float(points[0] - points[1]):.2f} <= {settings.margin:g} (Borda points)", ""
    if w is None:
        return None, "Kendall's W undefined (fewer than two ballots of two answers)"
    return None, f"Kendall's W {w:.2f} >= {settings.threshold:g}"


async def deliberate(
    stages: Stages, run: RunState, answered: Answered, reviewed: Reviewed
) -> tuple[Answered, Reviewed]:
    """The deliberation rounds the council's setting calls for; the last round's answers and
    reviews (the ones given, with deliberation off). The log is ``run.deliberation``."""
    from council.session.results import Deliberation, DeliberationRound, EarlierRound

    settings: DeliberationSettings = run.council.deliberation
    if not settings.enabled:
        return answered, reviewed
    log = Deliberation(
        mode=settings.mode,  # type: ignore[arg-type]  # enabled: auto or always
        threshold=settings.threshold,
        margin=settings.margin,
        max_rounds=settings.max_rounds,
    )
    run.deliberation = log
    for number in range(1, settings.max_rounds + 1):
        trigger, why_not = round_trigger(settings, reviewed, len(answered.usable))
        if trigger is None:
            log.stopped = why_not
            return answered, reviewed
        before = agreement_w(reviewed)
        members = [m for m in run.council.members if m.id in answered.usable]
        run.emit(RoundStarted, round=number, trigger=trigger, kendall_w_before=before, expected=len(members))
        replies = await asyncio.gather(*(_revise(stages, run, m, number, answered, reviewed) for m in members))
        revisions = [revision for revision, _ in replies]
        revised = {answer.member: answer for _, answer in replies}
        changed = [r.member for r in revisions if r.changed]
        # Logged before the reviews run again: a session stopped meanwhile keeps what was revised.
        this = DeliberationRound(
            round=number, trigger=trigger, kendall_w_before=before, kendall_w_after=before, members=revisions
        )
        log.rounds.append(this)
        for r in revisions:
            if r.status == "failed":
                run.flags.append(f"round {number}: no valid reply from {r.member}, which kept its answer ({r.error})")
            if r.capitulation:
                run.flags.append(f"capitulation: {r.member} adopted {r.adopted_from}'s answer in round {number} "
                                 "with no reason given")  # fmt: skip
        if changed:
            log.earlier.append(EarlierRound(round=number - 1, answers=answered.answers, reviews=reviewed.reviews))
            answers = [revised.get(a.member, a) for a in answered.answers]
            run.answers = answers
            answered = Answered(answers, {a.member: a for a in answers if a.usable}, answered.agreement)
            this.kendall_w_after = None  # until the reviews of the revised answers are in
            reviewed = await stages.review(run, answered, None)
            _once_each(run.flags)
            _once_each(run.partial_reasons)
            this.kendall_w_after = agreement_w(reviewed)
        after = this.kendall_w_after
        capitulated = [r.member for r in revisions if r.capitulation]
        run.emit(
            RoundFinished,
            round=number,
            trigger=trigger,
            kendall_w_before=before,
            kendall_w_after=after,
            changed=changed,
            capitulations=capitulated,
        )
        if not changed:
            log.stopped = "no member changed its answer"
            return answered, reviewed
    log.stopped = f"max_rounds ({settings.max_rounds}) reached"
    return answered, reviewed


async def _revise(
    stages: Stages, run: RunState, member: ResolvedModel, number: int, answered: Answered, reviewed: Reviewed
) -> tuple[MemberRevision, MemberAnswer]:
    """One member's reply in round ``number``: its log entry and its answer after the round
    (its earlier one when it kept it or gave no valid reply)."""
    from council.bias.records import count_words
    from council.session.results import MemberRevision

    c = run.council
    earlier = answered.usable
    own = earlier[member.id]
    order = reviewer_order(run.seed, f"deliberation:{number}:{member.id}", list(earlier))
    label_of = dict(zip(order, answer_labels(len(order)), strict=True))
    notes: dict[str, list[tuple[int, str]]] = {}
    for number_of_reviewer, review in enumerate(_reviewer_order(run, reviewed.valid, member.id), 1):
        for m, text in review.reasoning.items():
            if m in label_of:
                notes.setdefault(label_of[m], []).append((number_of_reviewer, text))
    messages = revision_messages(
        run.question,
        run.history,
        [(label_of[m], stages.review_text(earlier[m]), m == member.id) for m in order],
        notes,
    )
    t0 = time.perf_counter()
    reply = await ask_valid(
        stages.clients[member.id],
        messages,
        Revision,
        schema=revision_schema(),
        schema_name=REVISION_SCHEMA_NAME,
        retry_message=revision_retry_message,
        stage="deliberation",
        seed=run.seed,
        max_attempts=c.max_review_attempts,
        sink=run.calls,
    )
    own_text = own.text or ""
    peers = {m: a.text or "" for m, a in earlier.items() if m != member.id}
    parsed: Revision | None = reply.parsed
    text, reason, error = own_text, "", None
    if parsed is None:
        error = str(reply.error) if reply.error is not None else reply.problem
    else:
        reason = one_line(parsed.reason)
        if parsed.decision == "revise":
            text = parsed.answer.strip()
        add_private(text, reason)
    changed = text != own_text
    adopted = adopted_from(text, own_text, peers) if changed else None
    revision = MemberRevision(
        member=member.id,
        model=member.model,
        status="ok" if parsed is not None else "failed",
        changed=changed,
        similarity_to_own=round(similarity(text, own_text), 4),
        similarity_to_peers={m: round(similarity(text, t), 4) for m, t in peers.items()},
        adopted_from=adopted,
        reason=reason,
        capitulation=adopted is not None and no_reason(reason),
        attempts=reply.attempts,
        error=error,
    )
    answer = own
    if changed:
        answer = own.model_copy(
            update={
                "text": text,
                "length_chars": len(text),
                "length_words": count_words(text),
                "latency_ms": (time.perf_counter() - t0) * 1000,
                "truncated": len(text) > c.max_answer_chars,
            }
        )
        if answer.truncated:
            run.flags.append(
                f"answer of {member.id} (round {number}) truncated to {c.max_answer_chars} characters for review"
            )
    run.emit(
        RevisionEvent,
        round=number,
        member=member.id,
        model=member.model,
        status=revision.status,
        changed=changed,
        text=answer.text,
        reason=reason,
        similarity_to_own=revision.similarity_to_own,
        similarity_to_peers=revision.similarity_to_peers,
        adopted_from=adopted,
        capitulation=revision.capitulation,
        error=error,
    )
    return revision, answer


def _reviewer_order(run: RunState, reviews: Sequence[Review], member: str) -> list[Review]:
    """The valid reviews in an order of this member's own (seeded): reviewer numbers say nothing
    about who reviewed."""
    by_id = {r.reviewer: r for r in reviews}
    return [by_id[r] for r in reviewer_order(run.seed, f"deliberation-reviewers:{member}", list(by_id))]


def _once_each(items: list[str]) -> None:
    """Keep the first of each repeated line: a re-review says again what the first review said."""
    items[:] = list(dict.fromkeys(items))


def scrubbed(d: Deliberation) -> Deliberation:
    """The deliberation without answer, reasoning or reason text (transcripts off)."""
    return d.model_copy(
        update={
            "rounds": [
                r.model_copy(update={"members": [m.model_copy(update={"reason": None}) for m in r.members]})
                for r in d.rounds
            ],
            "earlier": [
                e.model_copy(
                    update={
                        "answers": [a.model_copy(update={"text": None}) for a in e.answers],
                        "reviews": [v.model_copy(update={"reasoning": {}}) for v in e.reviews],
                    }
                )
                for e in d.earlier
            ],
        }
    )
