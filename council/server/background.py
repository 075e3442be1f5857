"""Sessions the server runs in its background (``POST /v1/sessions``), and every session's events
on their way to the store (:mod:`council.storage.events`): in batches, since the chairman's
tokens arrive many a second and one transaction per token would cost more than the token."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from council._util.logs import get_logger
from council.errors import CouncilError, CouncilFailure
from council.server.limits import SessionLimit

if TYPE_CHECKING:
    from council.server.metrics import ServerMetrics

log = get_logger("council.server")


class EventBatcher:
    """Collects one session's events and writes them ``interval`` seconds apart at most, or at
    once for any event but a synthesis delta (a stage, an answer, a review show up at once)."""

    def __init__(self, write: Callable[[list[dict[str, Any]]], None], *, interval: float = 0.05) -> None:
        self._write = write
        self.interval = interval
        self._pending: list[dict[str, Any]] = []
        self._oldest = 0.0

    def add(self, event: dict[str, Any]) -> None:
        if not self._pending:
            self._oldest = time.monotonic()
        self._pending.append(event)
        if event.get("type") != "synthesis_delta" or time.monotonic() - self._oldest >= self.interval:
            self.flush()

    @property
    def holding(self) -> bool:
        """Deltas wait to be written (at the latest ``interval`` after the first of them came)."""
        return bool(self._pending)

    def flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self._write(batch)


class EventLog:
    """One session's events into the store: in batches (:class:`EventBatcher`), the deltas held
    written by a timer set when the first of them comes, and the rest at ``close``. Every session
    the server runs writes one, so any replica sharing the store can stream it (``GET
    /v1/sessions/{id}/events``). The timer is set only while deltas wait: a task ticking every
    ``interval`` for each session's life cost a busy server much CPU for nothing."""

    def __init__(self, store: Any, *, interval: float = 0.05, metrics: ServerMetrics | None = None) -> None:
        self.store = store
        self.batcher = EventBatcher(self._write, interval=interval)
        self._timer: asyncio.TimerHandle | None = None
        self._watch = metrics.session() if metrics is not None else None  # its stages, for /metrics

    def add(self, event: Any) -> None:
        if self._watch is not None and event.type != "synthesis_delta":
            self._watch.event(event)
        self.batcher.add(event.model_dump(mode="json"))
        if self.batcher.holding and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.batcher.interval, self._due)

    def _due(self) -> None:
        self._timer = None
        self.batcher.flush()  # a delta that came after an earlier flush goes early: never late

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.batcher.flush()

    def _write(self, batch: list[dict[str, Any]]) -> None:
        # A failed write loses these events, never the session: its result is stored apart.
        try:
            self.store.append_events(batch[0]["session_id"], batch)
        except Exception as exc:
            log.error("could not store session events", session_id=batch[0]["session_id"], error=str(exc))


class LiveSessions:
    """The sessions this server runs in its background; cancelled (recorded interrupted) at shutdown.
    Each holds a place of ``limit`` while it runs."""

    def __init__(self, store: Any, limit: SessionLimit | None = None, metrics: ServerMetrics | None = None) -> None:
        self.store = store
        self.limit = limit or SessionLimit()
        self.metrics = metrics
        self.tasks: set[asyncio.Task[BaseException | None]] = set()

    async def start(
        self,
        council: Any,
        question: str,
        seed: int | None,
        *,
        history: Sequence[dict[str, str]] = (),
        to_end: bool = False,
    ) -> str:
        """Start the session; its id once it exists (its first event), or the error that stopped
        it before (a ``CouncilError`` the caller turns into a 4xx/502). With ``to_end``, its id
        once it has ended, or the error it ended with: for a session known to fail at once
        (``Council.too_large``), whose caller gets that error rather than a 202. With no place
        left under the limit: a ``RequestError`` (429), and nothing starts."""
        started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        events = EventLog(self.store, metrics=self.metrics)

        def on_event(event: Any) -> None:
            events.add(event)
            if not started.done():
                started.set_result(event.session_id)

        async def run() -> BaseException | None:
            failure: BaseException | None = None
            try:
                await council.run(question, seed=seed, history=history, on_event=on_event)
            except CouncilError as exc:
                failure = exc  # once the session exists, its session_finished event says why
            except Exception as exc:  # a bug must not vanish in a background task
                failure = exc
                log.error("background session failed", error=f"{type(exc).__name__}: {exc}")
            finally:
                events.close()
                if not started.done():  # ended before it began: the request gets the reason
                    started.set_exception(failure or CouncilFailure("the session ended before it started"))
            return failure

        self.limit.take()
        task = asyncio.create_task(run())
        task.add_done_callback(lambda _: self.limit.give_back())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        if to_end:  # shielded: a client that hangs up leaves it running, as any background session
            failure = await asyncio.shield(task)
            if isinstance(failure, CouncilError) and started.exception() is None:
                raise failure  # the session exists, stored failed with this reason
        return await started

    async def aclose(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
