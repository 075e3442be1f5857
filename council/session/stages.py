"""The stages of a session: the members' answers, the shuffled anonymous peer review, the
consensus and the chairman's synthesis (docs/methods.md).

:class:`Stages` runs each over the council's model clients and tells of it through the
session's :class:`RunState`; :class:`council.session.runner.SessionRunner` runs them in order,
writes the session and decides how it ends. Work a later stage needs is begun beside the calls
of an earlier one through :mod:`council._util.speedups`.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from council._util import speedups
from council._util.clock import utc_now
from council._util.logs import get_logger
from council.accounting.usage import CallLog
from council.config import ResolvedCouncil, ResolvedModel
from council.errors import PromptTooLarge, ProviderError, QuorumError, RequestTooLarge
from council.methods.concordance import null_job
from council.methods.ranking import Consensus, consensus_ranking
from council.providers.asking import JsonFormat, ask_valid
from council.providers.base import ChatRequest
from council.providers.client import ModelClient
from council.session import grace, prompts
from council.session.candidates import Candidate
from council.session.early_events import EventBase, Notice, StageStarted, private_view
from council.session.schemas import (
    PEER_REVIEW_SCHEMA_NAME,
    answer_labels,
    peer_review_model,
    peer_review_schema,
    peer_review_schema_text,
)
from council.session.turns import OneTurn
from council.untrusted.redaction import add_private
from council.untrusted.slots import tag_pattern

if TYPE_CHECKING:
    from council.bias.records import BiasRecord
    from council.session.events import SessionEvent
    from council.session.results import Deliberation, Failure, MemberAnswer, Review, SessionResult, Synthesis

log = get_logger("council.session")

EventSink = Callable[["SessionEvent"], None]
"""Receives each event of a session as it happens (:mod:`council.session.events`)."""

# What a session needs only once replies come in: the result and bias-record models, the events
# that tell of them, the lookalikes table that neutralises non-ASCII answers quoted in the
# reviewers' prompts, and the slot tag pattern. Imported where used; the first session imports
# them beside its first calls.
speedups.import_ahead(
    "council.session.results", "council.session.events", "council.bias.records", "council.untrusted.lookalikes"
)
speedups.compile_ahead(tag_pattern)

#: (answers a reviewer ranks, scale) whose review model and schema are built (Stages.prepare_reviews).
_REVIEWS_BUILT: set[tuple[int, tuple[int, int]]] = set()

#: Said when no reviewer saw two answers (two members, ``self_review = "exclude"``).
NOTHING_COMPARED = (
    'nothing compared: with self_review = "exclude" each reviewer ranked one answer, so the ranking is a tie '
    'by construction (use self_review = "flag" or "include", or more members or reviewers)'
)


def reviewer_order(seed: int, reviewer_id: str, members: Sequence[str]) -> list[str]:
    """This reviewer's display order: a shuffle seeded by (session seed, reviewer id).

    Each reviewer's order is independent of the others' and reproducible from the seed.
    """
    order = list(members)
    random.Random(f"{seed}:{reviewer_id}").shuffle(order)
    return order


@dataclass
class RunState:
    """Mutable state of one session while it runs."""

    session_id: str
    council: ResolvedCouncil
    question: str
    seed: int
    history: Sequence[dict[str, str]]
    on_event: EventSink | None
    synthesis_format: JsonFormat | None = None
    calls: CallLog = field(default_factory=CallLog)
    failures: list[Failure] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    partial_reasons: list[str] = field(default_factory=list)
    t0: float = 0.0  # perf_counter at the start, for duration_ms
    persisted: bool = False  # the final status and every row are written
    finished: SessionResult | None = None  # its result, once written (a deadline passing during that write)
    created: str = ""  # when the session began (ISO, UTC)
    answers: list[MemberAnswer] | None = None  # stage 1's, once it is over: kept if the session stops later
    asked: list[tuple[str, str]] = field(default_factory=list)  # stage 1's (member, model), once asked
    arrived: dict[str, MemberAnswer] = field(default_factory=dict)  # stage 1's answers as they come
    too_large: set[str] = field(default_factory=set)  # members whose call could never fit their tpm
    beside: list[asyncio.Task[None]] = field(default_factory=list)  # work begun beside the calls, kept while it runs
    deliberation: Deliberation | None = None  # the rounds' log (council.session.deliberation), when it is on

    seq: int = 0  # the last event's sequence number

    def emit(self, event_type: type[EventBase], **fields: Any) -> None:
        """Number, time-stamp and hand one event to the sink, as the session's privacy allows."""
        if self.on_event is None or grace.muted():  # a late call tells nothing: its stage has closed
            return
        # Numbered and stamped as it is made: one model per event, no copy (a busy server makes thousands a second).
        event = private_view(event_type(session_id=self.session_id, seq=self.seq + 1, at=utc_now(), **fields))
        if event is None:
            return
        self.seq += 1
        self.on_event(event)


@dataclass
class Answered:
    """Stage 1's outcome: every answer, the usable ones by member, and the agreement test's null
    distribution if it was begun beside the calls (for when every member answers)."""

    answers: list[MemberAnswer]
    usable: dict[str, MemberAnswer]
    agreement: speedups.Beside | None = None


@dataclass
class Reviewed:
    """Stage 2's outcome: the reviews (each reviewer's, valid or not), the valid ones, and the
    agreement test's null distribution for them, computing beside the calls."""

    reviews: list[Review]
    valid: list[Review]
    agreement: speedups.Beside | None = None


class Stages:
    """The stages of one council's sessions, over its shared model clients."""

    def __init__(self, council: ResolvedCouncil, clients: dict[str, ModelClient]) -> None:
        self.council = council
        self.clients = clients

    # -- stage 1: the members answer ---------------------------------------------------------
    def member_request(self, member_id: str, question: str, history: Sequence[dict[str, str]]) -> ChatRequest:
        return ChatRequest(messages=prompts.member_messages(question, history), **self.clients[member_id].defaults())

    async def answer(self, run: RunState, candidates: Sequence[Candidate] | None) -> Answered:
        """Stage 1: the members' answers (or the candidates given instead), told as they come;
        ``QuorumError`` (``PromptTooLarge``) when too few are usable."""
        c = self.council
        run.emit(
            StageStarted,
            stage="answer",
            detail="members answer",
            expected=len(c.members) if candidates is None else len(candidates),
        )
        agreement: speedups.Beside | None = None
        if candidates is not None:
            answers = _candidate_answers(candidates)
            for a in answers:
                emit_answer(run, a)
            speedups.start_ahead(log, worker=False)
        else:
            run.asked = [(m.id, m.model) for m in c.members]
            answering = grace.gather_answers(run, c.members, [self._answer(run, m) for m in c.members])
            agreement = self.prepare_agreement([m.id for m in c.members])  # for when every member answers
            for task in (self.prepare_reviews([m.id for m in c.members]), speedups.start_ahead(log)):
                if task is not None:
                    run.beside.append(task)
            answers = list(await answering)
        run.answers = answers
        usable = self._check_answers(run, answers, candidates)
        return Answered(answers, usable, agreement)

    async def _answer(self, run: RunState, member: ResolvedModel) -> MemberAnswer:
        client = self.clients[member.id]
        request = self.member_request(member.id, run.question, run.history)
        t0 = time.perf_counter()
        try:
            response = await client.complete(request, stage="answer", sink=run.calls)
        except ProviderError as exc:
            from council.session.results import MemberAnswer

            if isinstance(exc, RequestTooLarge):
                run.too_large.add(member.id)
            return emit_answer(run, MemberAnswer(member=member.id, model=member.model, status="failed", error=str(exc)))
        from council.bias.records import count_words  # imported ahead by now (speedups.start_ahead)
        from council.session.results import MemberAnswer

        text = response.text.strip()
        add_private(text)
        latency = (time.perf_counter() - t0) * 1000
        if not text:
            failed = MemberAnswer(
                member=member.id, model=member.model, status="failed", error="empty answer", latency_ms=latency
            )
            return emit_answer(run, failed)
        answer = MemberAnswer(
            member=member.id,
            model=member.model,
            status="ok",
            text=text,
            length_chars=len(text),
            length_words=count_words(text),
            latency_ms=latency,
        )
        return emit_answer(run, answer)

    def _check_answers(
        self, run: RunState, answers: list[MemberAnswer], candidates: Sequence[Candidate] | None
    ) -> dict[str, MemberAnswer]:
        """The usable answers by member, once failures and truncations are noted; ``QuorumError``
        when fewer than the quorum (one, for candidates) are usable."""
        from council.session.results import Failure

        c = self.council
        for a in answers:
            if a.status == "failed":
                run.failures.append(Failure(stage="answer", member=a.member, error=a.error or "failed"))
            elif len(a.text or "") > c.max_answer_chars:
                a.truncated = True
                run.flags.append(f"answer of {a.member} truncated to {c.max_answer_chars} characters for review")
                run.emit(Notice, level="warning", text=run.flags[-1])
        usable = {a.member: a for a in answers if a.usable}
        needed = c.quorum if candidates is None else 1
        if len(usable) < needed:
            causes = "; ".join(_cause(f) for f in run.failures) or "no answers"
            message = f"only {len(usable)} of {len(answers)} members answered (quorum {needed}): {causes}"
            if run.failures and all(f.member in run.too_large for f in run.failures):
                # The request itself is what no member could take: the caller's to change.
                raise PromptTooLarge(
                    f"the request is too large for the members' token limits (shorten it, or raise tpm or "
                    f"lower max_tokens): {message}"
                )
            raise QuorumError(message)
        failed = sum(1 for a in answers if not a.usable and a.status != "late")  # the late: council.session.grace
        if failed:
            run.partial_reasons.append(f"{failed} of {len(answers)} members failed to answer")
        return usable

    # -- stage 2: anonymous peer review ------------------------------------------------------
    async def review(self, run: RunState, answered: Answered, candidates: Sequence[Candidate] | None) -> Reviewed:
        """Stage 2: each reviewer ranks the anonymised usable answers, in its own shuffled order.
        A member whose answer failed is not asked to review (reviewers default to the members):
        its model has just failed, and a hanging one would hold the session a second time. The
        session says so."""
        from council.session.results import Failure

        c, usable = self.council, answered.usable
        for status, why in (("failed", "failed"), ("late", "came late")):
            left = {a.member for a in answered.answers if a.status == status}
            skipped = [r.id for r in c.reviewers if r.id in left]
            if skipped:
                whose = "its answer" if len(skipped) == 1 else "their answers"
                run.flags.append(f"not asked to review: {', '.join(skipped)} ({whose} {why})")
                run.emit(Notice, level="warning", text=run.flags[-1])
        out = {a.member for a in answered.answers if a.status in ("failed", "late")}
        reviewers = [r for r in c.reviewers if r.id not in out]
        run.emit(StageStarted, stage="review", detail="reviewers rank the anonymised answers", expected=len(reviewers))
        reviewing = grace.gather_reviews(run, reviewers, [self._review(run, r, usable) for r in reviewers])
        every_member = candidates is None and len(usable) == len(c.members)
        agreement = answered.agreement if every_member else self.prepare_agreement(list(usable), reviewers)
        reviews = [r for r in await reviewing if r is not None]
        on_time = [r for r in reviews if not r.late]  # the late: council.session.grace
        for r in on_time:
            if not r.valid:
                run.failures.append(Failure(stage="review", member=r.reviewer, error=r.error or "invalid"))
        valid = [r for r in on_time if r.valid]
        if len(valid) < len(on_time):
            run.partial_reasons.append(f"{len(on_time) - len(valid)} of {len(reviews)} reviews invalid or failed")
        return Reviewed(reviews, valid, agreement)

    async def _review(self, run: RunState, reviewer: ResolvedModel, answers: dict[str, MemberAnswer]) -> Review | None:
        from council.session.results import Review

        c = self.council
        candidates = self.ranked_by(reviewer.id, answers)
        if not candidates:
            return None
        order = reviewer_order(run.seed, reviewer.id, candidates)
        labels = answer_labels(len(order))
        label_to_member = dict(zip(labels, order, strict=True))
        model = peer_review_model(tuple(labels), c.scale)
        schema = peer_review_schema(tuple(labels), c.scale)
        messages = prompts.review_messages(
            run.question,
            [(lab, self.review_text(answers[m])) for lab, m in label_to_member.items()],
            c.scale,
            peer_review_schema_text(tuple(labels), c.scale),
        )
        review = Review(
            reviewer=reviewer.id,
            model=reviewer.model,
            display_order=order,
            labels=label_to_member,
            valid=False,
            self_reviewed=reviewer.id in order,
        )
        reply = await ask_valid(
            self.clients[reviewer.id],
            messages,
            model,
            schema=schema,
            schema_name=PEER_REVIEW_SCHEMA_NAME,
            retry_message=prompts.review_retry_message,
            stage="review",
            seed=run.seed,
            max_attempts=c.max_review_attempts,
            sink=run.calls,
        )
        review.attempts = reply.attempts
        if reply.parsed is None:
            review.error = str(reply.error) if reply.error is not None else reply.problem
            return _emit_review(run, review)
        evaluations = reply.parsed.evaluations
        review.scores = {label_to_member[lab]: getattr(evaluations, lab).score for lab in labels}
        review.reasoning = {label_to_member[lab]: getattr(evaluations, lab).reasoning for lab in labels}
        review.ranking = [label_to_member[lab] for lab in reply.parsed.ranking]
        review.valid = True
        return _emit_review(run, review)

    def review_text(self, answer: MemberAnswer) -> str:
        """An answer as reviewers and the chairman see it: cut at ``max_answer_chars``, saying so."""
        assert answer.text is not None
        limit = self.council.max_answer_chars
        if len(answer.text) <= limit:
            return answer.text
        return answer.text[:limit] + f"\n[… truncated: {len(answer.text) - limit} more characters not shown]"

    def ranked_by(self, reviewer: str, members: Iterable[str]) -> list[str]:
        """The answers of ``members`` that ``reviewer`` ranks: all but its own under
        ``self_review = "exclude"``."""
        exclude = self.council.self_review == "exclude"
        return [m for m in members if not (exclude and m == reviewer)]

    def prepare_agreement(
        self, members: Sequence[str], reviewers: Sequence[ResolvedModel] | None = None
    ) -> speedups.Beside | None:
        """Start computing, beside the calls, the null distribution the consensus's agreement
        test needs if every reviewer (of ``reviewers``, default the council's) ranks these
        members' answers. It depends only on which answers each ballot holds, not on their order
        (docs/methods.md, "Kendall's W"), and for five or more members it is many draws with
        numpy: done while the calls are in flight, instead of between the reviews and the
        chairman's call. None: nothing left to compute."""
        asked = self.council.reviewers if reviewers is None else reviewers
        job = null_job([self.ranked_by(r.id, members) for r in asked])
        return None if job is None else speedups.Beside(job)

    def prepare_reviews(self, members: Sequence[str]) -> asyncio.Task[None] | None:
        """Build, beside the answers' calls, the review models and JSON schemas that reviewers of
        these members' answers will need (the process's first session otherwise builds them
        between the stages). None: built already."""
        c = self.council
        sizes = {len(self.ranked_by(r.id, members)) for r in c.reviewers}
        return speedups.build_ahead(
            [(k, c.scale) for k in sorted(sizes) if k], _build_review_model, _REVIEWS_BUILT, log, "review model ahead"
        )

    # -- consensus -----------------------------------------------------------------------------
    async def consensus(
        self, run: RunState, reviewed: Reviewed, usable: Mapping[str, MemberAnswer]
    ) -> Consensus | None:
        """The consensus ranking of the valid reviews (None: fewer than ``review_quorum``), and the
        flags it raises: nothing compared, a reviewer preferring its own answer."""
        from council.session.events import ConsensusEvent, consensus_fields

        c, valid = self.council, reviewed.valid
        consensus = None
        if len(valid) >= c.review_quorum:
            if reviewed.agreement is not None:  # done by now unless the machine is very busy
                await reviewed.agreement.done()
            consensus = consensus_ranking([r.ranking for r in valid], usable, seed=run.seed, method=c.consensus)
            run.emit(ConsensusEvent, **consensus_fields(consensus))
        else:
            run.partial_reasons.append(f"no consensus: {len(valid)} valid reviews, {c.review_quorum} needed")
        if consensus and len(usable) >= 2 and all(len(r.ranking) < 2 for r in valid):
            run.flags.append(NOTHING_COMPARED)
        if c.self_review == "flag":
            for r in valid:
                if r.reviewer in r.scores and r.ranking and r.ranking[0] == r.reviewer:
                    run.flags.append(f"self-preference: {r.reviewer} ranked its own answer first")
        return consensus

    # -- stage 3: the chairman's synthesis -----------------------------------------------------
    def start_synthesis(
        self, run: RunState, consensus: Consensus | None, usable: Mapping[str, MemberAnswer]
    ) -> asyncio.Future[Synthesis]:
        """Stage 3 begun: the chairman writes the answer from the usable ones, best ranked first."""
        run.emit(StageStarted, stage="synthesis", detail="the chairman writes the consensus answer", expected=1)
        ranked = [usable[m] for m in consensus.order] if consensus else list(usable.values())
        return asyncio.ensure_future(self._synthesise(run, ranked))

    async def _synthesise(self, run: RunState, ranked: list[MemberAnswer]) -> Synthesis:
        """The chairman's answer, or the fallback chairman's when the chairman fails."""
        from council.session.degraded import partial_line
        from council.session.events import SynthesisDelta
        from council.session.results import Failure, Synthesis
        from council.session.synthesis import output_instruction, structured_synthesis

        c = self.council
        labels = answer_labels(len(ranked))
        labelled = [(label, self.review_text(a)) for label, a in zip(labels, ranked, strict=True)]
        fmt = run.synthesis_format
        structured = fmt is None and c.synthesis == "structured"
        instruction = fmt.instruction() if fmt else output_instruction(tuple(labels)) if structured else None
        messages = prompts.synthesis_messages(run.question, labelled, run.history, output_format=instruction)
        errors: list[str] = []
        for chair, fallback in ((c.chairman, False), (c.fallback_chairman, True)):
            if chair is None:
                continue
            if errors:
                notice = f"the chairman failed ({errors[-1]}); the fallback chairman {chair.id} writes the answer"
                run.emit(Notice, level="warning", text=notice)
            # A caller's JSON format is the answer itself: no line may go in front of it.
            lead = None if fmt else partial_line(run.partial_reasons, fallback_chairman=chair.id if fallback else None)
            if structured or fmt is not None:
                if fmt is not None:
                    synthesis = await self._synthesise_in_format(run, chair, messages, fmt, fallback)
                    if synthesis.status == "ok":
                        run.emit(SynthesisDelta, chairman=chair.id, text=synthesis.text or "")
                else:  # structured: its answer told as it is written
                    by_label = {lab: a.member for lab, a in zip(labels, ranked, strict=True)}
                    synthesis = await structured_synthesis(
                        run, self.clients[chair.id], chair, messages, by_label, fallback=fallback, lead=lead
                    )
                if synthesis.status == "ok":
                    return _emit_synthesis(run, synthesis)
                errors.append(f"{chair.id}: {synthesis.error}")
                run.failures.append(Failure(stage="synthesis", member=chair.id, error=synthesis.error or "invalid"))
                continue
            synthesis = await self._synthesise_in_prose(run, chair, messages, fallback, errors, lead)
            if synthesis is not None:
                return _emit_synthesis(run, synthesis)
        return _emit_synthesis(run, Synthesis(status="failed", error="; ".join(errors) or "no chairman configured"))

    async def _synthesise_in_prose(
        self,
        run: RunState,
        chair: ResolvedModel,
        messages: list[dict[str, str]],
        fallback: bool,
        errors: list[str],
        lead: str | None = None,
    ) -> Synthesis | None:
        """``chair``'s answer in prose, streamed to the listener as it is written (cleaned on the
        way), after the partial line ``lead``; None when it failed (said in ``errors`` and the
        session's failures)."""
        from council.session.degraded import Lead, with_partial_line
        from council.session.events import SynthesisDelta
        from council.session.results import Failure, Synthesis

        client = self.clients[chair.id]
        shown = prompts.SynthesisStream()
        first = Lead(lead)
        turn = OneTurn(lambda text: run.emit(SynthesisDelta, chairman=chair.id, text=text))

        def delta(piece: str) -> None:
            if text := first.first(shown.feed(piece)):
                turn.add(text)

        try:
            response = await client.complete(
                ChatRequest(messages=messages, **client.defaults()),
                stage="synthesis",
                sink=run.calls,
                on_delta=delta if run.on_event is not None else None,
            )
        except ProviderError as exc:
            # The error names the model; where that is the chairman's id, once is enough.
            errors.append(str(exc) if exc.model == chair.id else f"{chair.id}: {exc}")
            run.failures.append(Failure(stage="synthesis", member=chair.id, error=str(exc)))
            return None
        finally:
            turn.flush()  # what this chairman wrote goes out before anything said after it
        text = prompts.clean_synthesis(response.text)
        add_private(text)
        if text:
            if rest := first.first(shown.end()):
                run.emit(SynthesisDelta, chairman=chair.id, text=rest)
            text = with_partial_line(lead, text)
            return Synthesis(status="ok", chairman=chair.id, model=chair.model, text=text, fallback_used=fallback)
        errors.append(f"{chair.id}: empty answer")
        run.failures.append(Failure(stage="synthesis", member=chair.id, error="empty answer"))
        return None

    async def _synthesise_in_format(
        self, run: RunState, chair: ResolvedModel, messages: list[dict[str, str]], fmt: JsonFormat, fallback: bool
    ) -> Synthesis:
        """The chairman's answer as the caller's structured output: validated, re-asked like a review."""
        from council.session.results import Synthesis

        reply = await ask_valid(
            self.clients[chair.id],
            messages,
            fmt,
            schema=fmt.schema,
            schema_name=fmt.name,
            retry_message=prompts.synthesis_retry_message,
            stage="synthesis",
            seed=run.seed,
            max_attempts=self.council.max_review_attempts,
            sink=run.calls,
        )
        if reply.parsed is None:
            error = str(reply.error) if reply.error is not None else reply.problem
            return Synthesis(status="failed", chairman=chair.id, error=error, attempts=reply.attempts)
        return Synthesis(
            status="ok",
            chairman=chair.id,
            model=chair.model,
            text=json.dumps(reply.parsed, ensure_ascii=False),
            fallback_used=fallback,
            attempts=reply.attempts,
        )


def _build_review_model(key: tuple[int, tuple[int, int]]) -> None:
    """The review model and schema text for ``key`` (answers ranked, scale), into their caches."""
    labels, scale = tuple(answer_labels(key[0])), key[1]
    peer_review_model(labels, scale)
    peer_review_schema_text(labels, scale)


def _candidate_answers(candidates: Sequence[Candidate]) -> list[MemberAnswer]:
    """Existing answers to review instead of the members' own."""
    from council.bias.records import count_words
    from council.session.results import MemberAnswer

    return [
        MemberAnswer(
            member=cand.id,
            model=cand.id,
            status="candidate",
            text=cand.text,
            length_chars=len(cand.text),
            length_words=count_words(cand.text),
        )
        for cand in candidates
    ]


def bias_records(
    run: RunState, valid: Sequence[Review], usable: Mapping[str, MemberAnswer], query_hash: str | None
) -> list[BiasRecord]:
    """One record per (valid review, answer scored). No raw text, ever."""
    from council.bias.records import BiasRecord

    c = run.council
    models = {a.member: a.model for a in run.answers or ()}
    return [
        BiasRecord(
            session_id=run.session_id,
            reviewer_id=r.model,
            model_id=models[m],
            position=pos,
            response_length_chars=usable[m].length_chars,
            response_length_words=usable[m].length_words,
            score_value=float(r.scores[m]),
            query_hash=query_hash,
            timestamp=run.created,
            scale_min=c.scale[0],
            scale_max=c.scale[1],
            self_review=(m == r.reviewer),
            council=c.name,
        )
        for r in valid
        for pos, m in enumerate(r.display_order)
    ]


def emit_answer(run: RunState, a: MemberAnswer) -> MemberAnswer:
    """Note ``a`` as arrived and tell of it."""
    from council.session.events import AnswerEvent, answer_fields

    run.arrived[a.member] = a
    run.emit(AnswerEvent, **answer_fields(a))
    return a


def answers_so_far(run: RunState, error: str) -> tuple[list[MemberAnswer], list[MemberAnswer]]:
    """Stage 1's answers when the session stopped before the stage ended (its deadline, an
    interrupt), in the council's order: the ones that came, and each member still answering as
    failed, cut off by ``error`` (those, second); each failed one is a failure."""
    from council.session.results import Failure, MemberAnswer

    answers, cut = [], []
    for member, model in run.asked:
        answer = run.arrived.get(member)
        if answer is None:
            answer = MemberAnswer(member=member, model=model, status="failed", error=f"no answer: {error}")
            cut.append(answer)
        if answer.status == "failed":
            run.failures.append(Failure(stage="answer", member=member, error=answer.error or "failed"))
        answers.append(answer)
    return answers, cut


def _emit_review(run: RunState, r: Review) -> Review:
    from council.session.events import ReviewEvent, review_fields

    run.emit(ReviewEvent, **review_fields(r))
    return r


def _emit_synthesis(run: RunState, s: Synthesis) -> Synthesis:
    from council.session.events import SynthesisEvent, synthesis_fields

    run.emit(SynthesisEvent, **synthesis_fields(s))
    return s


def _cause(failure: Failure) -> str:
    """A failure as ``member: error``, naming the member once when the error already starts with
    it (a provider error names its model, often the member's own name)."""
    if failure.error.startswith(f"{failure.member}: "):
        return failure.error
    return f"{failure.member}: {failure.error}"
