"""Sessions the server runs in its background (``POST /v1/sessions``): their events go to the
store in batches (:mod:`council.storage.events`) as they happen."""

from __future__ import annotations

import asyncio
from typing import Any

from council.errors import CouncilError, CouncilFailure
from council.logs import get_logger
from council.storage.events import EventBatcher

log = get_logger("council.server")


class LiveSessions:
    """The sessions this server runs in its background; cancelled (recorded interrupted) at shutdown."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self, council: Any, question: str, seed: int | None) -> str:
        """Start the session; its id once it exists (its first event), or the error that stopped
        it before (a ``CouncilError`` the caller turns into a 4xx/502)."""
        started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        batcher = EventBatcher(self._write)

        def on_event(event: Any) -> None:
            batcher.add(event.model_dump(mode="json"))
            if not started.done():
                started.set_result(event.session_id)

        async def run() -> None:
            flusher = asyncio.create_task(_flush_when_due(batcher))
            failure: BaseException | None = None
            try:
                await council.run(question, seed=seed, on_event=on_event)
            except CouncilError as exc:
                failure = exc  # once the session exists, its session_finished event says why
            except Exception as exc:  # a bug must not vanish in a background task
                failure = exc
                log.error("background session failed", error=f"{type(exc).__name__}: {exc}")
            finally:
                flusher.cancel()
                batcher.flush()
                if not started.done():  # ended before it began: the request gets the reason
                    started.set_exception(failure or CouncilFailure("the session ended before it started"))

        task = asyncio.create_task(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return await started

    def _write(self, batch: list[dict[str, Any]]) -> None:
        # A failed write loses these events, never the session: its result is stored apart.
        try:
            self.store.append_events(batch[0]["session_id"], batch)
        except Exception as exc:
            log.error("could not store session events", session_id=batch[0]["session_id"], error=str(exc))

    async def aclose(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _flush_when_due(batcher: EventBatcher) -> None:
    while True:
        await asyncio.sleep(batcher.interval)
        if batcher.due():
            batcher.flush()
