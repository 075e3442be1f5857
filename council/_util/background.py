"""Work done in worker threads beside the event loop.

:func:`off_loop` runs a store's blocking write in the store's write thread (PostgreSQL's, see
``GroupCommit.write_thread``): its round trips then stall no other session; :func:`store_write`
does so where the store has one. :func:`asking_store`
runs a call that asks a store (a read, a rate reservation, the call cache) in a worker thread
on such a store, and in place on SQLite, whose connection is the loop's own.

Work begun beside a stage's calls, and when it starts, is in :mod:`council._util.speedups`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Executor

_T = TypeVar("_T")


async def asking_store(target: object, job: Callable[..., _T], *args: object, **kwargs: object) -> _T:
    """``job(*args, **kwargs)``, which asks ``target`` (a store, or what keeps its entries in one):
    in a worker thread when its operations may run on several threads (PostgreSQL: a round trip,
    which every session and call on the event loop waited for, and while the database restarts
    up to council.storage.postgres.OUTAGE_GRACE_S); here otherwise (SQLite's connection is the
    loop's own; a process's own rate budgets are memory)."""
    if not getattr(target, "threadsafe", False):
        return job(*args, **kwargs)
    import asyncio

    return await asyncio.to_thread(job, *args, **kwargs)


async def store_write(store: Any, job: Callable[[], None], written: Callable[[], None] | None = None) -> None:
    """``job()``, a write to ``store``: in the store's write thread if it has one (PostgreSQL's,
    ``GroupCommit.write_thread``), through :func:`off_loop`; in place otherwise (SQLite's
    connection is the loop's own). ``written()`` once it succeeded, even if cancelled meanwhile."""
    writer = store.write_thread()
    if writer is not None:
        await off_loop(job, written, writer)
        return
    job()
    if written is not None:
        written()


async def off_loop(
    job: Callable[[], _T], written: Callable[[], None] | None = None, executor: Executor | None = None
) -> _T:
    """``job()`` in ``executor`` (default: the event loop's), with this task's context variables
    (a session's privacy scope), and its result. A write is not left behind by a cancellation of
    the task meanwhile: the job is waited for, ``written()`` is called if it succeeded, and then
    the cancellation is raised (as it was when the write blocked the loop: it took effect after)."""
    import asyncio
    import contextvars

    future = asyncio.get_running_loop().run_in_executor(executor, contextvars.copy_context().run, job)
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.wait({future})
        except asyncio.CancelledError as exc:
            cancelled = exc
    if written is not None and not future.cancelled() and future.exception() is None:
        written()
    if cancelled is not None:
        raise cancelled
    return future.result()
