"""One council session: answers → shuffled anonymous peer review → consensus → synthesis.

This is the one place where pure logic (prompts, schemas, validation, consensus,
bias statistics) meets I/O (model clients, storage). :class:`SessionRunner` runs the stages
(:mod:`council.session.stages`) in order, writes the session, and decides how it ends.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from council._util import speedups, tracing
from council._util.background import off_loop, store_write
from council._util.clock import utc_now
from council._util.logs import get_logger
from council._util.speedups import import_ahead  # noqa: F401  # kept importable from here for library users
from council.accounting.budget import BudgetReached, budget_in_force
from council.accounting.usage import CallLog, Usage
from council.bias.query_hash import QueryHasher
from council.config import ResolvedCouncil
from council.errors import InputError, QuorumError, RequestTooLarge
from council.providers.asking import JsonFormat
from council.providers.client import ModelClient
from council.session import grace
from council.session.candidates import Candidate, check_candidates
from council.session.degraded import NO_SYNTHESIS, restated
from council.session.early_events import Notice, SessionStarted
from council.session.stages import EventSink, RunState, Stages, answers_so_far, bias_records, emit_answer
from council.storage import Store
from council.untrusted.inputs import MAX_SEED, check_text, check_visible
from council.untrusted.redaction import private_scope

if TYPE_CHECKING:
    from council.bias.records import BiasRecord, SessionBiasMetadata
    from council.methods.ranking import Consensus
    from council.session.results import MemberAnswer, Review, SessionResult, SessionStatus, Synthesis
    from council.session.stages import Answered, Reviewed

log = get_logger("council.session")

OFFLINE_NOTICE = (
    "Ran on the small offline default (two tiny local models: SmolLM2-135M and Gemma-3-270M). "
    "Their answers and reviews are a smoke test, not a real council. Configure real providers "
    "in a council.toml (see docs/operators/configuration.md)."
)


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


class SessionRunner:
    """Runs sessions of one resolved council over shared model clients and one store."""

    def __init__(self, council: ResolvedCouncil, clients: dict[str, ModelClient], store: Store | None) -> None:
        self.council = council
        self.clients = clients
        self.store = store
        self.hasher: QueryHasher | None = None
        self.stages = Stages(council, clients)

    def too_large(self, question: str, history: Sequence[dict[str, str]] = ()) -> bool:
        """Whether this (checked) request is too large for the council, known before any call:
        so many members' calls could never fit their model's ``tpm`` that no quorum can answer,
        as :meth:`run` then finds (``PromptTooLarge``). The server asks before a stream starts."""
        refused = 0
        for member in self.council.members:
            if member.spec.tpm is None:  # nothing to count: the common case costs no prompt building
                continue
            try:
                self.clients[member.id].call_tokens(self.stages.member_request(member.id, question, history))
            except RequestTooLarge:
                refused += 1
        return len(self.council.members) - refused < self.council.quorum

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
        """Begin the session (its row, its first events), run its stages within its deadline,
        and record how it stopped if it did not finish."""
        c = self.council
        seed = seed if seed is not None else secrets.randbelow(2**31)
        session_id = str(uuid.uuid4())
        if tracing.ACTIVE:  # its spans are made from its events (council._util.tracing)
            on_event = tracing.traced(on_event)
        run = RunState(
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
        run.created = utc_now()
        member_ids = [cand.id for cand in candidates] if candidates is not None else [m.id for m in c.members]
        if self.store is not None:
            await self._begin(run, self._session_row(run, query_hash, member_ids))
        self._announce(run, candidates, member_ids, synthesis)
        try:
            if c.session_timeout:
                async with asyncio.timeout(c.session_timeout):
                    return await self._stages(run, candidates, synthesis, query_hash)
            return await self._stages(run, candidates, synthesis, query_hash)
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
        finally:
            grace.release(run, self.store)  # the late calls' replies are written after the session's record

    def _session_row(self, run: RunState, query_hash: str | None, member_ids: list[str]) -> Callable[[], None]:
        """The write of the session's first row (status "running")."""
        store, c = self.store, self.council
        assert store is not None

        def begin() -> None:
            store.begin_session(
                run.session_id,
                council=c.name,
                question=run.question if c.store_transcripts else None,
                query_hash=query_hash,
                seed=run.seed,
                offline=c.offline_default,
                members=member_ids,
                created_at=run.created,
            )

        return begin

    def _announce(
        self, run: RunState, candidates: Sequence[Candidate] | None, member_ids: list[str], synthesis: bool
    ) -> None:
        """The session's first events: who takes part and how, and the offline default's notice."""
        c = self.council
        run.emit(
            SessionStarted,
            council=c.name,
            question=run.question,
            members=member_ids,
            reviewers=[r.id for r in c.reviewers],
            models=_models_of(c, candidates),
            seed=run.seed,
            scale=c.scale,
            self_review=c.self_review,
            synthesis=synthesis,
            offline_default=c.offline_default,
        )
        if c.offline_default:
            run.emit(Notice, level="info", text=OFFLINE_NOTICE)

    async def _begin(self, run: RunState, begin: Callable[[], None]) -> None:
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

    async def _record_failure(self, run: RunState, error: str, status: str = "failed") -> None:
        """Tell and write how the session stopped; the write in the store's write thread if it has
        one, as a finished session's is (PostgreSQL: on the event loop it held every other session
        of a server for as long as the database took, a second or more while it was away)."""
        write = self._failure_told(run, error, status)
        if write is not None:
            await store_write(self.store, write)

    def _failure_told(self, run: RunState, error: str, status: str) -> Callable[[], None] | None:
        """Send the session's last events (its members cut off, its end) and return the write of
        its record (None: nothing to write)."""
        # An error after the session was written (e.g. raised by the on_event callback at
        # "session_finished") must not flip it to failed nor write its call log a second time.
        if run.persisted:
            return None
        from council.session.events import SessionFinished

        cut: list[MemberAnswer] = []
        if run.answers is None and run.asked and run.arrived:  # stopped while members were answering
            run.answers, cut = answers_so_far(run, error)
        try:
            for answer in cut:  # every member's fate is told, as the record has it
                emit_answer(run, answer)
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
        self, run: RunState, candidates: Sequence[Candidate] | None, synthesis: bool, query_hash: str | None
    ) -> SessionResult:
        """The stages in order, then the result, written and told."""
        stages = self.stages
        answered = await stages.answer(run, candidates)
        reviewed = await stages.review(run, answered, candidates)
        if self.council.deliberation.enabled and candidates is None:  # a round when the council disagrees
            from council.session.deliberation import deliberate

            answered, reviewed = await deliberate(stages, run, answered, reviewed)
        consensus = await stages.consensus(run, reviewed, answered.usable)
        known = len(run.partial_reasons)  # the reasons the chairman's first line is made from
        synth, records, bias = await self._synthesis_and_bias(run, synthesis, consensus, reviewed, answered, query_hash)
        reached = self._budget_reached()
        if reached is not None:
            run.partial_reasons.append(str(reached))
        if run.synthesis_format is None:  # a caller's JSON format is the answer itself: no line
            synth, line = restated(synth, run.partial_reasons, known)
            if line is not None:  # the answer was told without it: said now, after it
                run.emit(Notice, level="warning", text=line)
        status = "partial" if run.partial_reasons else "complete"
        result = self._result(run, status, reviews=reviewed.reviews, consensus=consensus, synthesis=synth, bias=bias)
        await self._finish(run, result, records)
        return result

    async def _synthesis_and_bias(
        self,
        run: RunState,
        synthesis: bool,
        consensus: Consensus | None,
        reviewed: Reviewed,
        answered: Answered,
        query_hash: str | None,
    ) -> tuple[Synthesis, list[BiasRecord], SessionBiasMetadata]:
        """Stage 3, and the bias records while the chairman writes: they need only the reviews."""
        from council.bias.records import consensus_agreement, session_bias_metadata
        from council.session.results import Synthesis

        synthesising = self.stages.start_synthesis(run, consensus, answered.usable) if synthesis else None
        try:
            if synthesising is not None:
                await speedups.calls_first(synthesising)  # the chairman's request first, then the records
            records = bias_records(run, reviewed.valid, answered.usable, query_hash)
            bias = session_bias_metadata(records)
            bias.reviewer_agreement = consensus_agreement(reviewed.valid, consensus)
        except BaseException:
            if synthesising is not None:
                synthesising.cancel()
            raise
        if synthesising is None:
            return Synthesis(status="skipped"), records, bias
        synth = await synthesising
        if synth.status != "ok":
            run.partial_reasons.append(f"{NO_SYNTHESIS}: {synth.error}")
        return synth, records, bias

    async def _finish(self, run: RunState, result: SessionResult, records: list[BiasRecord]) -> None:
        """Write the finished session and tell of its end."""
        from council.session.events import SessionFinished, finished_fields

        if self.store is not None:
            try:
                await self._persist(run, result, records)
            except asyncio.CancelledError:
                if run.persisted:  # cancelled during the final write, which completed: as if right after it
                    run.finished = result
                    run.emit(SessionFinished, **finished_fields(result))
                raise
        run.emit(SessionFinished, **finished_fields(result))

    def _result(
        self,
        run: RunState,
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
            deliberation=run.deliberation,
        )

    async def _persist(self, run: RunState, result: SessionResult, records: list[BiasRecord]) -> None:
        """Write the session, in the store's write thread if it has one (PostgreSQL: on the
        event loop its round trips stalled every other session of a busy server)."""
        keep_text = self.council.store_transcripts
        stored = result if keep_text else scrub_transcripts(result)
        store = self.store
        assert store is not None

        def save() -> None:
            store.save_session(stored, records, keep_text=keep_text, calls=run.calls)

        def written() -> None:
            run.persisted = True

        await store_write(store, save, written)  # written() once saved, even if cancelled meanwhile


def _models_of(c: ResolvedCouncil, candidates: Sequence[Candidate] | None) -> dict[str, str]:
    people = [*c.reviewers, *(x for x in (c.chairman, c.fallback_chairman) if x)]
    members = (
        {cand.id: cand.id for cand in candidates} if candidates is not None else {m.id: m.model for m in c.members}
    )
    return {**members, **{m.id: m.model for m in people}}


def scrub_transcripts(result: SessionResult) -> SessionResult:
    """The result without question, answer, reasoning or synthesis text."""
    if result.deliberation is not None:
        from council.session.deliberation import scrubbed

        result = result.model_copy(update={"deliberation": scrubbed(result.deliberation)})
    structure = result.synthesis.structure
    return result.model_copy(
        update={
            "question": None,
            "answers": [a.model_copy(update={"text": None}) for a in result.answers],
            "reviews": [r.model_copy(update={"reasoning": {}}) for r in result.reviews],
            "synthesis": result.synthesis.model_copy(
                update={"text": None, "structure": structure.without_text() if structure else None}
            ),
        }
    )
