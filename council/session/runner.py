"""One council session: answers → shuffled anonymous peer review → consensus → synthesis.

This is the one place where pure logic (prompts, schemas, validation, consensus,
bias statistics) meets I/O (model clients, storage).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import random
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from council._util import background
from council._util.background import after_grace, off_loop, store_write
from council._util.clock import utc_now
from council._util.logs import get_logger
from council.accounting.budget import BudgetReached, budget_in_force
from council.accounting.usage import CallLog, Usage
from council.bias.query_hash import QueryHasher
from council.config import ResolvedCouncil, ResolvedModel
from council.errors import InputError, PromptTooLarge, ProviderError, QuorumError, RequestTooLarge
from council.methods.concordance import null_job
from council.methods.ranking import Consensus, consensus_ranking
from council.providers.asking import JsonFormat, ask_valid
from council.providers.base import ChatRequest
from council.providers.client import ModelClient
from council.session import prompts
from council.session.candidates import Candidate, check_candidates
from council.session.early_events import EventBase, Notice, SessionStarted, StageStarted, private_view
from council.session.schemas import (
    PEER_REVIEW_SCHEMA_NAME,
    answer_labels,
    peer_review_model,
    peer_review_schema,
    peer_review_schema_text,
)
from council.storage import Store
from council.untrusted.inputs import MAX_SEED, check_text, check_visible
from council.untrusted.redaction import add_private, private_scope
from council.untrusted.slots import tag_pattern

if TYPE_CHECKING:
    from council.bias.records import BiasRecord, SessionBiasMetadata
    from council.session.events import SessionEvent
    from council.session.results import Failure, MemberAnswer, Review, SessionResult, SessionStatus, Synthesis

log = get_logger("council.session")

OFFLINE_NOTICE = (
    "Ran on the small offline default (two tiny local models: SmolLM2-135M and Gemma-3-270M). "
    "Their answers and reviews are a smoke test, not a real council. Configure real providers "
    "in a council.toml (see README: 'Configuring real providers')."
)


EventSink = Callable[["SessionEvent"], None]
"""Receives each event of a session as it happens (:mod:`council.session.events`)."""

#: What a session needs only once replies come in (the result and bias-record models, the events
#: that tell of them, the lookalikes table that neutralises non-ASCII answers quoted in the
#: reviewers' prompts) and what a host adds with :func:`import_ahead`: imported where used, and
#: by the process's first session in a worker thread while its first calls are in flight, so
#: that neither the first call nor the last reply waits for them (docs/benchmark-history.md, section
#: 20). The slot tag pattern is compiled there too.
_AHEAD = ["council.session.results", "council.session.events", "council.bias.records", "council.untrusted.lookalikes"]


#: What hosts asked to run on the event loop once the ahead imports are done (:func:`import_ahead`'s
#: ``then``): each is run by the next session, once.
_THEN: list[Callable[[], None]] = []


def import_ahead(*modules: str, then: Callable[[], None] | None = None) -> None:
    """Have the first session import ``modules`` while its first calls are in flight (a host's
    own, e.g. the CLI's rendering, used once the session is over). ``then``: called on the next
    session's event loop once they are imported (the CLI's live progress line starts so)."""
    _AHEAD.extend(m for m in modules if m not in _AHEAD)
    if then is not None:
        _THEN.append(then)


def _ahead_pending() -> bool:
    return any(name not in sys.modules for name in _AHEAD) or not tag_pattern.cache_info().currsize


def _import_all_ahead() -> None:
    for name in list(_AHEAD):
        try:
            importlib.import_module(name)
        except Exception as exc:  # imported again where used, and the error raised there
            log.debug("import ahead failed", module=name, error=str(exc))
    tag_pattern()


def _start_ahead(worker: bool = True) -> asyncio.Task[None] | None:
    """The ahead imports in a worker thread (in the process's first session; ``worker``: the
    first calls have just set off), then each ``then`` on the loop, at once if none are due."""
    task = _in_worker(_import_all_ahead) if worker and _ahead_pending() else None
    while _THEN:
        then = _THEN.pop(0)
        if task is None:
            asyncio.get_running_loop().call_soon(then)
        else:
            task.add_done_callback(lambda _, then=then: then())
    return task


def _in_worker(job: Callable[[], Any], start: threading.Event | None = None) -> asyncio.Task[None]:
    """``job`` in a worker thread, from a task, once the calls just set off are on the wire
    (council._util.background), or when ``start`` is set."""

    async def in_worker() -> None:
        await asyncio.get_running_loop().run_in_executor(None, after_grace(job, start))

    return asyncio.create_task(in_worker())


class _Beside:
    """Work begun in a worker thread beside a stage's calls, awaited where its result is needed."""

    def __init__(self, job: Callable[[], Any]) -> None:
        self.start = threading.Event()
        self.task = _in_worker(job, self.start)

    async def done(self) -> None:
        self.start.set()  # needed now: no more waiting for the calls
        await self.task


#: (answers a reviewer ranks, scale) whose review model and schema are built (_prepare_reviews).
_REVIEWS_BUILT: set[tuple[int, tuple[int, int]]] = set()


def check_request(
    question: str,
    *,
    seed: int | None = None,
    history: Sequence[dict[str, str]] = (),
    candidates: Sequence[Candidate] | None = None,
) -> tuple[str, list[Candidate] | None]:
    """What a session is asked, checked before anything is written or billed: the stripped
    question and the checked candidates, or a one-line ``InputError``. The CLI and the server
    call it up front; :meth:`SessionRunner.run` calls it again."""
    question = check_text(question, "the question").strip()
    if not question:
        raise InputError("the question is empty")
    check_visible(question, "the question")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED):
        raise InputError(f"the seed must be an integer from 0 to {MAX_SEED}, got {seed!r}")
    for i, message in enumerate(history, 1):
        check_text(str(message.get("content") or ""), f"message {i} of the conversation")
    if candidates is not None:
        for cand in candidates:
            check_text(cand.id, "a candidate id")
            check_text(cand.text, f"candidate {cand.id!r}")
        candidates = check_candidates(candidates)
    return question, candidates


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
class _Run:
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

    seq: int = 0  # the last event's sequence number

    def emit(self, event_type: type[EventBase], **fields: Any) -> None:
        """Number, time-stamp and hand one event to the sink, as the session's privacy allows."""
        if self.on_event is None:
            return
        # Numbered and stamped as it is made: one model per event, no copy (a busy server makes thousands a second).
        event = private_view(event_type(session_id=self.session_id, seq=self.seq + 1, at=utc_now(), **fields))
        if event is None:
            return
        self.seq += 1
        self.on_event(event)


class _OneTurn:
    """Text handed over in one turn of the event loop, emitted as one piece at its end.

    A stream read from a full buffer (a provider sending faster than it is read, a busy
    server) hands over many chunks in one turn: each became an event, stored and sent on
    its own (57 for a 350-character synthesis). They are joined instead; chunks that arrive
    turns apart still go out one by one, and nothing waits longer than the turn it came in."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.pieces: list[str] = []

    def add(self, text: str) -> None:
        if not self.pieces:
            asyncio.get_running_loop().call_soon(self.flush)
        self.pieces.append(text)

    def flush(self) -> None:
        if self.pieces:
            text, self.pieces = "".join(self.pieces), []
            self.emit(text)


class SessionRunner:
    """Runs sessions of one resolved council over shared model clients and one store."""

    def __init__(self, council: ResolvedCouncil, clients: dict[str, ModelClient], store: Store | None) -> None:
        self.council = council
        self.clients = clients
        self.store = store
        self.hasher: QueryHasher | None = None

    # -- stage 1 -------------------------------------------------------------
    def _member_request(self, member_id: str, question: str, history: Sequence[dict[str, str]]) -> ChatRequest:
        return ChatRequest(messages=prompts.member_messages(question, history), **self.clients[member_id].defaults())

    def too_large(self, question: str, history: Sequence[dict[str, str]] = ()) -> bool:
        """Whether this (checked) request is too large for the council, known before any call:
        so many members' calls could never fit their model's ``tpm`` that no quorum can answer,
        as :meth:`run` then finds (``PromptTooLarge``). The server asks before a stream starts."""
        refused = 0
        for member in self.council.members:
            if member.spec.tpm is None:  # nothing to count: the common case costs no prompt building
                continue
            try:
                self.clients[member.id].call_tokens(self._member_request(member.id, question, history))
            except RequestTooLarge:
                refused += 1
        return len(self.council.members) - refused < self.council.quorum

    async def _answer(self, run: _Run, member: ResolvedModel) -> MemberAnswer:
        client = self.clients[member.id]
        request = self._member_request(member.id, run.question, run.history)
        t0 = time.perf_counter()
        try:
            response = await client.complete(request, stage="answer", sink=run.calls)
        except ProviderError as exc:
            from council.session.results import MemberAnswer

            if isinstance(exc, RequestTooLarge):
                run.too_large.add(member.id)
            return _emit_answer(
                run, MemberAnswer(member=member.id, model=member.model, status="failed", error=str(exc))
            )
        from council.bias.records import count_words  # imported ahead by now (_import_all_ahead)
        from council.session.results import MemberAnswer

        text = response.text.strip()
        add_private(text)
        latency = (time.perf_counter() - t0) * 1000
        if not text:
            failed = MemberAnswer(
                member=member.id, model=member.model, status="failed", error="empty answer", latency_ms=latency
            )
            return _emit_answer(run, failed)
        answer = MemberAnswer(
            member=member.id,
            model=member.model,
            status="ok",
            text=text,
            length_chars=len(text),
            length_words=count_words(text),
            latency_ms=latency,
        )
        return _emit_answer(run, answer)

    # -- stage 2 -------------------------------------------------------------
    async def _review(self, run: _Run, reviewer: ResolvedModel, answers: dict[str, MemberAnswer]) -> Review | None:
        from council.session.results import Review

        c = self.council
        candidates = self._ranked_by(reviewer.id, answers)
        if not candidates:
            return None
        order = reviewer_order(run.seed, reviewer.id, candidates)
        labels = answer_labels(len(order))
        label_to_member = dict(zip(labels, order, strict=True))
        model = peer_review_model(tuple(labels), c.scale)
        schema = peer_review_schema(tuple(labels), c.scale)
        messages = prompts.review_messages(
            run.question,
            [(lab, self._review_text(answers[m])) for lab, m in label_to_member.items()],
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

    def _review_text(self, answer: MemberAnswer) -> str:
        assert answer.text is not None
        limit = self.council.max_answer_chars
        if len(answer.text) <= limit:
            return answer.text
        return answer.text[:limit] + f"\n[… truncated: {len(answer.text) - limit} more characters not shown]"

    # -- stage 3 -------------------------------------------------------------
    async def _synthesise(self, run: _Run, ranked: list[MemberAnswer]) -> Synthesis:
        from council.session.events import SynthesisDelta
        from council.session.results import Failure, Synthesis

        c = self.council
        labelled = [(label, self._review_text(a)) for label, a in zip(answer_labels(len(ranked)), ranked, strict=True)]
        fmt = run.synthesis_format
        messages = prompts.synthesis_messages(
            run.question, labelled, run.history, output_format=fmt.instruction() if fmt else None
        )
        errors = []
        for chair, fallback in ((c.chairman, False), (c.fallback_chairman, True)):
            if chair is None:
                continue
            if errors:
                notice = f"the chairman failed ({errors[-1]}); the fallback chairman {chair.id} writes the answer"
                run.emit(Notice, level="warning", text=notice)
            client = self.clients[chair.id]
            if fmt is not None:
                synthesis = await self._synthesise_in_format(run, chair, messages, fmt, fallback)
                if synthesis.status == "ok":
                    run.emit(SynthesisDelta, chairman=chair.id, text=synthesis.text or "")
                    return _emit_synthesis(run, synthesis)
                errors.append(f"{chair.id}: {synthesis.error}")
                run.failures.append(Failure(stage="synthesis", member=chair.id, error=synthesis.error or "invalid"))
                continue
            # The chairman's text streams to the listener as it is written (cleaned on the way).
            shown = prompts.SynthesisStream()
            turn = _OneTurn(lambda text, chair_id=chair.id: run.emit(SynthesisDelta, chairman=chair_id, text=text))

            def delta(piece: str, shown: prompts.SynthesisStream = shown, turn: _OneTurn = turn) -> None:
                if text := shown.feed(piece):
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
                continue
            finally:
                turn.flush()  # what this chairman wrote goes out before anything said after it
            text = prompts.clean_synthesis(response.text)
            add_private(text)
            if text:
                if rest := shown.end():
                    run.emit(SynthesisDelta, chairman=chair.id, text=rest)
                return _emit_synthesis(
                    run, Synthesis(status="ok", chairman=chair.id, model=chair.model, text=text, fallback_used=fallback)
                )
            errors.append(f"{chair.id}: empty answer")
            run.failures.append(Failure(stage="synthesis", member=chair.id, error="empty answer"))
        return _emit_synthesis(run, Synthesis(status="failed", error="; ".join(errors) or "no chairman configured"))

    async def _synthesise_in_format(
        self, run: _Run, chair: ResolvedModel, messages: list[dict[str, str]], fmt: JsonFormat, fallback: bool
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

    # -- the session -----------------------------------------------------------
    async def run(
        self,
        question: str,
        *,
        seed: int | None = None,
        history: Sequence[dict[str, str]] = (),
        candidates: Sequence[Candidate] | None = None,
        synthesis: bool = True,
        on_event: EventSink | None = None,
        synthesis_format: JsonFormat | None = None,
    ) -> SessionResult:
        """``synthesis_format``: the chairman answers in this JSON format (validated, re-asked
        up to ``max_review_attempts`` times); without one, in prose."""
        question, candidates = check_request(question, seed=seed, history=history, candidates=candidates)
        c = self.council
        private = [question, *(m.get("content") for m in history), *(cand.text for cand in candidates or ())]
        with private_scope(keep_text=c.store_transcripts, texts=private):
            return await self._run(question, seed, history, candidates, synthesis, on_event, synthesis_format)

    async def _run(
        self,
        question: str,
        seed: int | None,
        history: Sequence[dict[str, str]],
        candidates: list[Candidate] | None,
        synthesis: bool,
        on_event: EventSink | None,
        synthesis_format: JsonFormat | None,
    ) -> SessionResult:
        c = self.council
        seed = seed if seed is not None else secrets.randbelow(2**31)
        session_id = str(uuid.uuid4())
        run = _Run(
            session_id=session_id,
            council=c,
            question=question,
            seed=seed,
            history=history,
            on_event=on_event,
            synthesis_format=synthesis_format,
            calls=CallLog(self.store.journal(session_id) if self.store is not None else None),
            t0=time.perf_counter(),
        )
        query_hash = self._hasher().hash(question) if c.hash_queries else None
        created = run.created = utc_now()
        member_ids = [cand.id for cand in candidates] if candidates is not None else [m.id for m in c.members]
        if self.store is not None:
            store = self.store

            def begin() -> None:
                store.begin_session(
                    run.session_id,
                    council=c.name,
                    question=question if c.store_transcripts else None,
                    query_hash=query_hash,
                    seed=seed,
                    offline=c.offline_default,
                    members=member_ids,
                    created_at=created,
                )

            await self._begin(run, begin)
        run.emit(
            SessionStarted,
            council=c.name,
            question=question,
            members=member_ids,
            reviewers=[r.id for r in c.reviewers],
            models=_models_of(c, candidates),
            seed=seed,
            scale=c.scale,
            self_review=c.self_review,
            synthesis=synthesis,
            offline_default=c.offline_default,
        )
        if c.offline_default:
            run.emit(Notice, level="info", text=OFFLINE_NOTICE)
        try:
            if c.session_timeout:
                async with asyncio.timeout(c.session_timeout):
                    return await self._stages(run, candidates, synthesis, query_hash, created)
            return await self._stages(run, candidates, synthesis, query_hash, created)
        except TimeoutError:
            if run.finished is not None:  # it passed during the final write, which completed
                return run.finished
            error = f"the session exceeded its deadline of {c.session_timeout:g}s"
            await self._record_failure(run, error)
            raise QuorumError(error) from None
        except QuorumError as exc:
            reached = self._budget_reached()
            if reached is not None:  # stopped by the spend cap: what was done is kept, and says why
                await self._record_failure(run, str(reached), status="partial")
                raise reached from None
            await self._record_failure(run, str(exc))
            raise
        except BaseException as exc:  # Ctrl-C / cancellation / bugs: never leave the row "running"
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                await self._record_failure(run, "interrupted", status="interrupted")
            else:
                await self._record_failure(run, f"{type(exc).__name__}: {exc}")
            raise

    async def _begin(self, run: _Run, begin: Callable[[], None]) -> None:
        """Write the session's row before anything else: in a worker thread on a store whose
        operations may run on several threads (PostgreSQL: a round trip that held every other
        session on the event loop, each a wait for the database across the network), on the
        loop's own thread otherwise (SQLite: a local write). A store that fails it fails the
        session before any call. A cancellation meanwhile waits for the row, which then says the
        session was interrupted: never left "running"."""
        if not self.store.threadsafe:
            begin()
            return
        try:
            await off_loop(begin)
        except asyncio.CancelledError:
            await self._record_failure(run, "interrupted", status="interrupted")
            raise

    def _ranked_by(self, reviewer: str, members: Iterable[str]) -> list[str]:
        """The answers of ``members`` that ``reviewer`` ranks: all but its own under
        ``self_review = "exclude"``."""
        exclude = self.council.self_review == "exclude"
        return [m for m in members if not (exclude and m == reviewer)]

    def _prepare_agreement(
        self, members: Sequence[str], reviewers: Sequence[ResolvedModel] | None = None
    ) -> _Beside | None:
        """Start computing, in a worker thread, the null distribution the consensus's agreement
        test needs if every reviewer (of ``reviewers``, default the council's) ranks these
        members' answers. It depends only on which answers each ballot holds, not on their order
        (docs/methods.md, "Kendall's W"), and for five or more members it is 10,000 draws with
        numpy: done while the calls are in flight, instead of between the reviews and the
        chairman's call. None: nothing left to compute."""
        asked = self.council.reviewers if reviewers is None else reviewers
        job = null_job([self._ranked_by(r.id, members) for r in asked])
        return None if job is None else _Beside(job)

    def _prepare_reviews(self, members: Sequence[str]) -> asyncio.Task[None] | None:
        """Build, in a worker thread while the answers are awaited, the review models and JSON
        schemas that reviewers of these members' answers will need (the process's first session
        otherwise builds them between the stages: ~3 ms). None: built already."""
        c = self.council
        sizes = {len(self._ranked_by(r.id, members)) for r in c.reviewers}
        due = [(tuple(answer_labels(k)), c.scale) for k in sorted(sizes) if k and (k, c.scale) not in _REVIEWS_BUILT]
        if not due:
            return None

        def build() -> None:
            for labels, scale in due:
                try:
                    peer_review_model(labels, scale)
                    peer_review_schema_text(labels, scale)
                except Exception as exc:  # built again where used, and the error raised there
                    log.debug("review model ahead failed", labels=len(labels), error=str(exc))
                    continue
                _REVIEWS_BUILT.add((len(labels), scale))

        return _in_worker(build)  # never awaited: nothing needs it sooner than the calls allow

    def _budget_reached(self) -> BudgetReached | None:
        """The spend cap's stop, when a call of this council was refused by it."""
        for client in self.clients.values():
            budget = budget_in_force(client.budget)
            if budget is not None and budget.reached is not None:
                return BudgetReached(*budget.totals())
        return None

    def _hasher(self) -> QueryHasher:
        if self.hasher is None:
            self.hasher = QueryHasher.of_store(self.store)
        return self.hasher

    async def _record_failure(self, run: _Run, error: str, status: str = "failed") -> None:
        """Tell and write how the session stopped; the write in the store's write thread if it has
        one, as a finished session's is (PostgreSQL: on the event loop it held every other session
        of a server for as long as the database took, a second or more while it was away)."""
        write = self._failure_told(run, error, status)
        if write is not None:
            await store_write(self.store, write)

    def _failure_told(self, run: _Run, error: str, status: str) -> Callable[[], None] | None:
        """Send the session's last events (its members cut off, its end) and return the write of
        its record (None: nothing to write)."""
        # An error after the session was written (e.g. raised by the on_event callback at
        # "session_finished") must not flip it to failed nor write its call log a second time.
        if run.persisted:
            return None
        from council.session.events import SessionFinished

        cut: list[MemberAnswer] = []
        if run.answers is None and run.asked and run.arrived:  # stopped while members were answering
            run.answers, cut = _answers_so_far(run, error)
        try:
            for answer in cut:  # every member's fate is told, as the record has it
                _emit_answer(run, answer)
            usage = Usage.of(run.calls)
            duration = (time.perf_counter() - run.t0) * 1000
            run.emit(
                SessionFinished, status=status, usage=usage, cost_usd=usage.cost_usd, duration_ms=duration, error=error
            )
        except Exception as exc:  # a failing event sink must not hide why the session failed
            log.error("could not report the failed session", session_id=run.session_id, error=str(exc))
        if self.store is None:
            return None
        store, keep_text = self.store, self.council.store_transcripts
        try:
            # What the session did before it stopped is kept: a member that answered is never lost.
            result = None
            if run.answers is not None:
                if status == "partial":  # stopped by the spend cap: the reason, as a finished session gives it
                    run.partial_reasons.append(error)
                result = self._result(run, status)  # type: ignore[arg-type]  # failed, partial, interrupted
                if not keep_text:
                    result = scrub_transcripts(result)
        except Exception as exc:  # the original error matters more than a failed record of it
            log.error("could not record the failed session", session_id=run.session_id, error=str(exc))
            return None

        def write() -> None:
            try:
                store.fail_session(run.session_id, status=status, error=error, calls=run.calls, result=result,
                                   keep_text=keep_text)  # fmt: skip
            except Exception as exc:  # the original error matters more than a failed write of it
                log.error("could not record the failed session", session_id=run.session_id, error=str(exc))

        return write

    async def _stages(
        self,
        run: _Run,
        candidates: Sequence[Candidate] | None,
        synthesis: bool,
        query_hash: str | None,
        created: str,
    ) -> SessionResult:
        c = self.council
        # Stage 1
        run.emit(
            StageStarted,
            stage="answer",
            detail="members answer",
            expected=len(c.members) if candidates is None else len(candidates),
        )
        ahead: _Beside | None = None  # the agreement test's null, computing during the calls
        if candidates is not None:
            from council.bias.records import count_words
            from council.session.results import MemberAnswer

            answers = [
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
            for a in answers:
                _emit_answer(run, a)
            _start_ahead(worker=False)
        else:
            run.asked = [(m.id, m.model) for m in c.members]
            answering = asyncio.gather(*(self._answer(run, m) for m in c.members))
            ahead = self._prepare_agreement([m.id for m in c.members])  # for when every member answers
            building = self._prepare_reviews([m.id for m in c.members])  # noqa: F841 (a task is kept while it runs)
            importing = _start_ahead()  # noqa: F841 (a task is kept while it runs)
            answers = list(await answering)
        from council.bias.records import session_bias_metadata
        from council.session.events import ConsensusEvent, SessionFinished, consensus_fields, finished_fields
        from council.session.results import Failure, Synthesis

        run.answers = answers
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
        if len(usable) < len(answers):
            run.partial_reasons.append(f"{len(answers) - len(usable)} of {len(answers)} members failed to answer")

        # Stage 2. A member whose answer failed is not asked to review (reviewers default to the
        # members): its model has just failed, and a hanging one would hold the session a second
        # time. The session says so.
        failed = {a.member for a in answers if a.status == "failed"}
        reviewers = [r for r in c.reviewers if r.id not in failed]
        if len(reviewers) < len(c.reviewers):
            skipped = [r.id for r in c.reviewers if r.id in failed]
            whose = "its answer" if len(skipped) == 1 else "their answers"
            run.flags.append(f"not asked to review: {', '.join(skipped)} ({whose} failed)")
            run.emit(Notice, level="warning", text=run.flags[-1])
        run.emit(StageStarted, stage="review", detail="reviewers rank the anonymised answers", expected=len(reviewers))
        reviewing = asyncio.gather(*(self._review(run, r, usable) for r in reviewers))
        every_member = candidates is None and len(usable) == len(c.members)
        prepared = ahead if every_member else self._prepare_agreement(list(usable), reviewers)
        reviewed = await reviewing
        reviews = [r for r in reviewed if r is not None]
        for r in reviews:
            if not r.valid:
                run.failures.append(Failure(stage="review", member=r.reviewer, error=r.error or "invalid"))
        valid = [r for r in reviews if r.valid]
        if len(valid) < len(reviews):
            run.partial_reasons.append(f"{len(reviews) - len(valid)} of {len(reviews)} reviews invalid or failed")

        # Consensus
        consensus = None
        if len(valid) >= c.review_quorum:
            if prepared is not None:  # done by now unless the machine is very busy
                await prepared.done()
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

        # Stage 3, and the bias records while the chairman writes: they need only the reviews.
        synthesising = None
        if synthesis:
            run.emit(StageStarted, stage="synthesis", detail="the chairman writes the consensus answer", expected=1)
            ranked = [usable[m] for m in consensus.order] if consensus else list(usable.values())
            synthesising = asyncio.ensure_future(self._synthesise(run, ranked))
        try:
            if synthesising is not None:
                # Once its request is on the wire (council._util.background.GRACE_S), or it has answered:
                # aiohttp writes a request in a task of its own, which work begun in the turn after
                # the call's held back (~1.5 ms at 5 members).
                await asyncio.wait([synthesising], timeout=background.GRACE_S)
            records = _bias_records(run, c, valid, usable, answers, query_hash, created)
            bias = session_bias_metadata(records)
        except BaseException:
            if synthesising is not None:
                synthesising.cancel()
            raise
        if synthesising is not None:
            synth = await synthesising
            if synth.status != "ok":
                run.partial_reasons.append(f"no synthesis: {synth.error}")
        else:
            synth = Synthesis(status="skipped")

        reached = self._budget_reached()
        if reached is not None:
            run.partial_reasons.append(str(reached))
        status = "partial" if run.partial_reasons else "complete"
        result = self._result(run, status, reviews=reviews, consensus=consensus, synthesis=synth, bias=bias)
        if self.store is not None:
            try:
                await self._persist(run, result, records)
            except asyncio.CancelledError:
                if run.persisted:  # cancelled during the final write, which completed: as if right after it
                    run.finished = result
                    run.emit(SessionFinished, **finished_fields(result))
                raise
        run.emit(SessionFinished, **finished_fields(result))
        return result

    def _result(
        self,
        run: _Run,
        status: SessionStatus,
        *,
        reviews: Sequence[Review] = (),
        consensus: Consensus | None = None,
        synthesis: Synthesis | None = None,
        bias: SessionBiasMetadata | None = None,
    ) -> SessionResult:
        """The session's result from what it has done: its answers (``run.answers``) and what
        the later stages gave; a session stopped early has no reviews, consensus or synthesis."""
        from council.session.results import SessionResult, Synthesis

        c = self.council
        answers = run.answers or []
        models = {a.member: a.model for a in answers}
        return SessionResult(
            session_id=run.session_id,
            council=c.name,
            status=status,
            question=run.question,
            seed=run.seed,
            members=[a.member for a in answers],
            reviewers=[r.id for r in c.reviewers],
            models={**models, **{r.id: r.model for r in c.reviewers}},
            scale=c.scale,
            self_review=c.self_review,
            answers=answers,
            reviews=list(reviews),
            consensus=consensus,
            synthesis=synthesis or Synthesis(status="skipped"),
            bias=bias,
            flags=[*run.flags, *getattr(bias, "flags", [])],
            failures=run.failures,
            partial_reasons=run.partial_reasons,
            usage=Usage.of(run.calls),
            offline_default=c.offline_default,
            notice=OFFLINE_NOTICE if c.offline_default else None,
            config_source=c.source,
            created_at=run.created,
            duration_ms=(time.perf_counter() - run.t0) * 1000,  # before it is stored
        )

    async def _persist(self, run: _Run, result: SessionResult, records: list[BiasRecord]) -> None:
        """Write the session, in the store's write thread if it has one (PostgreSQL: its round
        trips were ~27 % of a busy server's event loop, and stalled every other session)."""
        keep_text = self.council.store_transcripts
        stored = result if keep_text else scrub_transcripts(result)
        store = self.store
        assert store is not None

        def save() -> None:
            store.save_session(stored, records, keep_text=keep_text, calls=run.calls)

        def written() -> None:
            run.persisted = True

        await store_write(store, save, written)  # written() once saved, even if cancelled meanwhile


def _bias_records(
    run: _Run,
    c: ResolvedCouncil,
    valid: Sequence[Review],
    usable: Mapping[str, MemberAnswer],
    answers: Sequence[MemberAnswer],
    query_hash: str | None,
    created: str,
) -> list[BiasRecord]:
    """One record per (valid review, answer scored). No raw text, ever."""
    from council.bias.records import BiasRecord

    models = {a.member: a.model for a in answers}
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
            timestamp=created,
            scale_min=c.scale[0],
            scale_max=c.scale[1],
            self_review=(m == r.reviewer),
            council=c.name,
        )
        for r in valid
        for pos, m in enumerate(r.display_order)
    ]


def _emit_answer(run: _Run, a: MemberAnswer) -> MemberAnswer:
    from council.session.events import AnswerEvent, answer_fields

    run.arrived[a.member] = a
    run.emit(AnswerEvent, **answer_fields(a))
    return a


def _answers_so_far(run: _Run, error: str) -> tuple[list[MemberAnswer], list[MemberAnswer]]:
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


def _emit_review(run: _Run, r: Review) -> Review:
    from council.session.events import ReviewEvent, review_fields

    run.emit(ReviewEvent, **review_fields(r))
    return r


def _emit_synthesis(run: _Run, s: Synthesis) -> Synthesis:
    from council.session.events import SynthesisEvent, synthesis_fields

    run.emit(SynthesisEvent, **synthesis_fields(s))
    return s


def _models_of(c: ResolvedCouncil, candidates: Sequence[Candidate] | None) -> dict[str, str]:
    people = [*c.reviewers, *(x for x in (c.chairman, c.fallback_chairman) if x)]
    members = (
        {cand.id: cand.id for cand in candidates} if candidates is not None else {m.id: m.model for m in c.members}
    )
    return {**members, **{m.id: m.model for m in people}}


def scrub_transcripts(result: SessionResult) -> SessionResult:
    """The result without question, answer, reasoning or synthesis text."""
    return result.model_copy(
        update={
            "question": None,
            "answers": [a.model_copy(update={"text": None}) for a in result.answers],
            "reviews": [r.model_copy(update={"reasoning": {}}) for r in result.reviews],
            "synthesis": result.synthesis.model_copy(update={"text": None}),
        }
    )


def _cause(failure: Failure) -> str:
    """A failure as ``member: error``, naming the member once when the error already starts with
    it (a provider error names its model, often the member's own name)."""
    if failure.error.startswith(f"{failure.member}: "):
        return failure.error
    return f"{failure.member}: {failure.error}"
