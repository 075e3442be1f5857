"""Stages that close at their quorum: ``[councils.X] stage_grace`` (docs/methods.md, "Stage grace").

Once a stage has its quorum (``quorum`` usable answers, ``review_quorum`` valid reviews) it waits
for the rest at most a grace period; a member or reviewer still running then is *late*. Its
answer is not reviewed, its review not counted; each stands in the result as ``late`` and the
session goes on. The late call keeps running in the background while the process lives: when it
returns, its answer or review is stored with status ``late`` (after the session's own record,
which it completes). Closing the council (:func:`cancel_late`, from ``Council.aclose``) cancels
what is still running: a command that exits after its session does not wait for stragglers.

``"off"`` waits for every call, as ``asyncio.gather`` does (the stage is exactly as before).
``"auto"``: the grace is as long as the quorum took, at least :data:`AUTO_FLOOR` and at most
:data:`AUTO_CAP` seconds; a stage with a local model waits for every call (local models decode
one after another in this process: a slow one is queued, not stalled).

The calls of a stage run as tasks whose context says whether they are late (:func:`muted`):
a late call tells no events (the session has moved on, or ended).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from council._util.background import store_write
from council._util.logs import get_logger

if TYPE_CHECKING:
    from council.config import ResolvedCouncil, ResolvedModel
    from council.session.results import MemberAnswer, Review
    from council.session.stages import RunState
    from council.storage import Store

log = get_logger("council.session")

AUTO_FACTOR = 1.0
"""``"auto"``: the grace is this many times how long the stage took to reach its quorum."""
AUTO_FLOOR = 2.0
"""``"auto"``: the shortest grace, in seconds (a fast quorum is not a reason to drop the rest)."""
AUTO_CAP = 30.0
"""``"auto"``: the longest grace, in seconds."""


def grace_seconds(setting: str | float, quorum_seconds: float) -> float | None:
    """How long a stage that reached its quorum in ``quorum_seconds`` waits for the rest under
    ``setting`` (None: for every call)."""
    if setting == "off":
        return None
    if setting == "auto":
        return min(AUTO_CAP, max(AUTO_FLOOR, AUTO_FACTOR * quorum_seconds))
    return float(setting)


@dataclass
class _Call:
    """One call of a stage, as its task's context sees it."""

    late: bool = False


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("council_stage_call", default=None)


def muted() -> bool:
    """Whether the running code is a call that came late: it tells no events."""
    call = _CALL.get()
    return call is not None and call.late


@dataclass
class _Stragglers:
    """A session's late calls: written once the session's own record is (``released``)."""

    released: asyncio.Event = field(default_factory=asyncio.Event)
    store: Store | None = None
    keep_text: bool = True
    work: list[asyncio.Task[None]] = field(default_factory=list)


_RUNS: dict[str, _Stragglers] = {}  # by session id, while the session runs
_BACKGROUND: dict[int, set[asyncio.Task[Any]]] = {}  # late work by council (id of its ResolvedCouncil)


def gather_answers(
    run: RunState, members: Sequence[ResolvedModel], calls: Sequence[Coroutine[Any, Any, MemberAnswer]]
) -> Awaitable[list[MemberAnswer]]:
    """Stage 1's calls (begun now), closed at ``quorum`` usable answers plus the grace."""
    return _gather(run, "answer", members, calls, run.council.quorum, _usable, _late_answer)


def gather_reviews(
    run: RunState, reviewers: Sequence[ResolvedModel], calls: Sequence[Coroutine[Any, Any, Review | None]]
) -> Awaitable[list[Review | None]]:
    """Stage 2's calls (begun now), closed at ``review_quorum`` valid reviews plus the grace."""
    return _gather(run, "review", reviewers, calls, run.council.review_quorum, _valid, _late_review)


def _usable(answer: MemberAnswer) -> bool:
    return answer.usable


def _valid(review: Review | None) -> bool:
    return review is not None and review.valid


def _gather(
    run: RunState,
    stage: str,
    who: Sequence[ResolvedModel],
    calls: Sequence[Coroutine[Any, Any, Any]],
    quorum: int,
    counts: Callable[[Any], bool],
    stand_in: Callable[[RunState, ResolvedModel], Any],
) -> Awaitable[list[Any]]:
    setting = run.council.stage_grace
    if setting == "off" or (setting == "auto" and any(m.transport == "local" for m in who)):
        return asyncio.gather(*calls)
    running = [(_Call(), m) for m in who]
    tasks = [asyncio.ensure_future(_as_call(call, coro)) for (call, _), coro in zip(running, calls, strict=True)]
    return asyncio.ensure_future(_close(run, stage, running, tasks, quorum, counts, stand_in))


async def _as_call(call: _Call, coro: Coroutine[Any, Any, Any]) -> Any:
    _CALL.set(call)  # in this task's own context (and its subtasks')
    return await coro


async def _close(
    run: RunState,
    stage: str,
    running: list[tuple[_Call, ResolvedModel]],
    tasks: list[asyncio.Task[Any]],
    quorum: int,
    counts: Callable[[Any], bool],
    stand_in: Callable[[RunState, ResolvedModel], Any],
) -> list[Any]:
    """The stage's results in order, once it has its quorum and the grace has passed (or every
    call is in): a stand-in for each call still running, which goes on as late work."""
    t0 = time.perf_counter()
    pending = set(tasks)
    try:
        have = 0
        while pending and have < quorum:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            have += sum(1 for t in done if counts(t.result()))  # a bug in a call is raised, as gather does
        took = time.perf_counter() - t0
        grace = grace_seconds(run.council.stage_grace, took)
        if pending:
            done, pending = await asyncio.wait(pending, timeout=grace)
            for t in done:
                t.result()
    except BaseException:
        await _stop(tasks)
        raise
    if not pending:
        return [t.result() for t in tasks]
    from council.session.events import StageClosed

    results, late = [], []
    for (call, member), task in zip(running, tasks, strict=True):
        if task in pending:
            call.late = True
            late.append(member.id)
            results.append(stand_in(run, member))
            _keep(run, stage, task)
        else:
            results.append(task.result())
    what = "members late (not reviewed)" if stage == "answer" else "reviews late (not counted)"
    run.partial_reasons.append(f"{len(late)} of {len(tasks)} {what}: {', '.join(late)}")
    run.emit(StageClosed, stage=stage, late=late, quorum_seconds=took, grace_seconds=grace or 0.0)
    return results


async def _stop(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel a stage's calls and return once each has ended: the session's record, written
    next, holds all a call did. A transport may take the cancellation for its own timeout
    (aiohttp's timer did: aio-libs/aiohttp#5979) and the call go on, as a retry that answered
    after its session had ended: such a call is cancelled again."""
    running = {t for t in tasks if not t.done()}
    for t in running:
        t.cancel()
    while running:
        _, running = await asyncio.wait(running, timeout=STOP_RECHECK)
        for t in running:
            if not t.cancelling():  # its cancellation was taken for something else
                t.cancel()


STOP_RECHECK = 0.01
"""Seconds between looks, while a stage stops, for a call that went on despite its cancellation."""


def _late_answer(run: RunState, member: ResolvedModel) -> MemberAnswer:
    from council.session.events import AnswerEvent, answer_fields
    from council.session.results import MemberAnswer

    answer = MemberAnswer(member=member.id, model=member.model, status="late", error=LATE)
    run.emit(AnswerEvent, **answer_fields(answer))
    return answer


def _late_review(run: RunState, member: ResolvedModel) -> Review:
    from council.session.events import ReviewEvent, review_fields
    from council.session.results import Review

    review = Review(reviewer=member.id, model=member.model, display_order=[], labels={}, valid=False, late=True,
                    error=LATE)  # fmt: skip
    run.emit(ReviewEvent, **review_fields(review))
    return review


LATE = "still running when its stage closed (stage_grace)"
"""The error of a late answer or review until it arrives."""


def _keep(run: RunState, stage: str, task: asyncio.Task[Any]) -> None:
    """Let a late call run on; what it returns is written once the session's own record is."""
    stragglers = _RUNS.setdefault(run.session_id, _Stragglers())
    work = asyncio.ensure_future(_arrive(stragglers, run.session_id, stage, task))  # in the session's context
    stragglers.work.append(work)
    kept = _BACKGROUND.setdefault(id(run.council), set())
    kept.add(work)
    work.add_done_callback(kept.discard)


async def _arrive(stragglers: _Stragglers, session_id: str, stage: str, task: asyncio.Task[Any]) -> None:
    try:
        value = await task
    except Exception as exc:  # a bug in a late call is logged: its session is over
        log.warning("a late call failed", session_id=session_id, stage=stage, error=str(exc))
        return
    if value is None:
        return
    if stage == "answer":
        error = None if value.status == "ok" else f"late, then failed: {value.error}"
        value = value.model_copy(update={"status": "late", "error": error})
    else:
        value = value.model_copy(update={"late": True})
    await stragglers.released.wait()
    store = stragglers.store
    if store is None:
        return
    keep_text, reply = stragglers.keep_text, {stage: value}

    def write() -> None:
        store.save_late(session_id, keep_text=keep_text, **reply)

    try:
        await store_write(store, write)
    except Exception as exc:  # the session's record stands; the late reply is only lost
        log.warning("could not store a late reply", session_id=session_id, stage=stage, error=str(exc))


def release(run: RunState, store: Store | None) -> None:
    """The session's record is written (or it stopped): its late calls' replies may now be
    written in turn; without a store there is nowhere to keep them, and they are cancelled."""
    stragglers = _RUNS.pop(run.session_id, None)
    if stragglers is None:
        return
    if store is None:
        for work in stragglers.work:
            work.cancel()
        return
    stragglers.store, stragglers.keep_text = store, run.council.store_transcripts
    stragglers.released.set()


async def cancel_late(council: ResolvedCouncil) -> None:
    """Cancel the late calls of ``council``'s sessions still running (the council is closing)."""
    work = _BACKGROUND.pop(id(council), set())
    for task in work:
        task.cancel()
    await asyncio.gather(*work, return_exceptions=True)


async def late_settled(council: ResolvedCouncil) -> None:
    """Wait until the late calls of ``council``'s sessions have returned and been stored."""
    await asyncio.gather(*list(_BACKGROUND.get(id(council), ())), return_exceptions=True)
