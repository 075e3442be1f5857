"""Sessions the server runs in its background (``POST /v1/sessions``): their events go to the
store in batches (:mod:`council.storage.events`) as they happen."""

from __future__ import annotations

import asyncio
from typing import Any

from council.errors import CouncilError
from council.logs import get_logger
from council.storage.events import EventBatcher

log = get_logger("council.server")


class LiveSessions:
    """The sessions this server runs in its background; cancelled (recorded interrupted) at shutdown."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self, council: Any, question: str, seed: int | None) -> str:
        started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        batcher = EventBatcher(lambda batch: self.store.append_events(batch[0]["session_id"], batch))

        def on_event(event: Any) -> None:
            batcher.add(event.model_dump(mode="json"))
            if not started.done():
                started.set_result(event.session_id)

        async def run() -> None:
            flusher = asyncio.create_task(_flush_when_due(batcher))
            try:
                await council.run(question, seed=seed, on_event=on_event)
            except CouncilError:
                pass  # the session_finished event says why
            except Exception as exc:  # a bug must not vanish in a background task
                log.error("background session failed", error=f"{type(exc).__name__}: {exc}")
                if not started.done():
                    started.set_exception(exc)
            finally:
                flusher.cancel()
                batcher.flush()

        task = asyncio.create_task(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return await started

    async def aclose(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _flush_when_due(batcher: EventBatcher) -> None:
    while True:
        await asyncio.sleep(batcher.interval)
        if batcher.due():
            batcher.flush()
