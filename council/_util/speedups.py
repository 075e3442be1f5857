"""Start-up and hot-path optimisations, in one place: what each does, what it saves, and the
benchmark that measures it. Domain code calls these by name; none changes what council does,
only when work happens or whether it is done twice.

- **Import ahead** (:func:`import_ahead`, :func:`compile_ahead`, :func:`start_ahead`): what a
  session needs only once replies come in is imported (and compiled) in a worker thread while
  the process's first calls are in flight, so that neither the first call nor the last reply
  waits for it. Measured by ``benchmarks/bench_critical_path.py`` (part 2, ``--marks``) and
  ``benchmarks/bench_first_call_instructions.py``.
- **Work beside the calls** (:data:`GRACE_S`, :func:`after_grace`, :func:`in_worker`,
  :class:`Beside`, :func:`build_ahead`, :func:`calls_first`): CPU work a stage will need (the
  agreement test's null distribution, the review models, the price map) runs in a worker thread
  while the calls wait for their replies, begun only once the calls are on the wire. Measured by
  ``benchmarks/bench_critical_path.py``.
- **The environment, compared instead of decoded** (:class:`EnvironMemo`): a value derived from
  ``os.environ`` is computed again only when the environment changed. Measured by
  ``benchmarks/bench_bare_client.py``.

Nothing here imports asyncio at module level: modules that import this one (redaction) are
loaded by commands that run no event loop (``tests/docs/test_transport_imports.py``).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import asyncio

__all__: list[str] = []

_T = TypeVar("_T")
_K = TypeVar("_K", bound=Hashable)


# -- work beside the calls ---------------------------------------------------------------------

GRACE_S = 0.02
"""How long work begun beside calls waits for them to be written first: in a worker thread
(:func:`after_grace`), and on the event loop (:func:`calls_first`).

Work begun beside a process's first calls (the price map's ``json.loads``, the imports ahead,
the null distribution) can hold the interpreter inside one C call, and the event loop, which
still has to connect and write the requests just set off, waits as long: the first replies came
late. Requests reach even a local server soon after the loop lets them go, so the work first
waits this long (its thread asleep, the interpreter free), or less when it is needed sooner.
Measured by ``benchmarks/bench_critical_path.py``."""


def after_grace(job: Callable[[], _T], start: threading.Event | None = None) -> Callable[[], _T]:
    """``job``, for a worker thread: run after :data:`GRACE_S`, or as soon as ``start`` is set."""

    def run() -> _T:
        if start is None:
            time.sleep(GRACE_S)
        else:
            start.wait(GRACE_S)
        return job()

    return run


def in_worker(job: Callable[[], Any], start: threading.Event | None = None) -> asyncio.Task[None]:
    """``job`` in a worker thread, from a task, once the calls just set off are on the wire
    (:func:`after_grace`), or when ``start`` is set. Keep the task referenced while it runs."""
    import asyncio

    async def run() -> None:
        await asyncio.get_running_loop().run_in_executor(None, after_grace(job, start))

    return asyncio.create_task(run())


class Beside:
    """Work begun in a worker thread beside a stage's calls, awaited where its result is needed:
    done while the calls are in flight instead of between two stages."""

    def __init__(self, job: Callable[[], Any]) -> None:
        self.start = threading.Event()
        self.task = in_worker(job, self.start)

    async def done(self) -> None:
        self.start.set()  # needed now: no more waiting for the calls
        await self.task


async def calls_first(task: asyncio.Future[Any]) -> None:
    """Let the call ``task`` has just made reach the wire (or ``task`` finish) before work on the
    event loop: aiohttp writes a request in a task of its own, which CPU work begun in the turn
    after the call held back. Waits at most :data:`GRACE_S`; measured by
    ``benchmarks/bench_critical_path.py``."""
    import asyncio

    await asyncio.wait([task], timeout=GRACE_S)


def build_ahead(
    keys: Iterable[_K], build: Callable[[_K], object], built: set[_K], log: Any, what: str = "build ahead"
) -> asyncio.Task[None] | None:
    """``build(key)``, in a worker thread beside the calls, for each of ``keys`` not in ``built``
    (each added once built): things a process builds once and caches (a review's model and
    schema) are then ready when first needed instead of built between two stages. A build that
    fails is left to be done again where used, and raise there (``log``: the caller's logger,
    told at debug level). None: nothing due. The task is
    never awaited (nothing needs it sooner than the calls allow) but must be kept while it runs."""
    due = [key for key in keys if key not in built]
    if not due:
        return None

    def run() -> None:
        for key in due:
            try:
                build(key)
            except Exception as exc:  # built again where used, and the error raised there
                log.debug(f"{what} failed", key=repr(key), error=str(exc))
                continue
            built.add(key)

    return in_worker(run)


# -- import ahead ------------------------------------------------------------------------------

#: Modules the process's first session imports in a worker thread while its first calls are in
#: flight (hosts add their own with :func:`import_ahead`): each is imported again where used, which
#: is then a lookup in ``sys.modules``.
_AHEAD: list[str] = []

#: Cached zero-argument functions (``functools.lru_cache``) called in the same worker thread: a
#: compiled pattern, for one.
_COMPILE: list[Any] = []

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


def compile_ahead(*cached: Any) -> None:
    """Have the first session call each of ``cached`` (zero-argument functions under
    ``functools.lru_cache``: a pattern compiled once) beside its first calls."""
    _COMPILE.extend(f for f in cached if f not in _COMPILE)


def _ahead_pending() -> bool:
    return any(name not in sys.modules for name in _AHEAD) or any(not f.cache_info().currsize for f in _COMPILE)


def _import_all_ahead(log: Any) -> None:
    for name in list(_AHEAD):
        try:
            importlib.import_module(name)
        except Exception as exc:  # imported again where used, and the error raised there
            log.debug("import ahead failed", module=name, error=str(exc))
    for compile_ in list(_COMPILE):
        compile_()


def start_ahead(log: Any, worker: bool = True) -> asyncio.Task[None] | None:
    """The ahead imports in a worker thread (in the process's first session; ``worker``: the
    first calls have just set off), then each ``then`` on the loop, at once if none are due.
    An import that fails is told to ``log`` (the caller's logger) at debug level, and raises
    where the module is used. Keep the task referenced while it runs."""
    import asyncio

    task = in_worker(lambda: _import_all_ahead(log)) if worker and _ahead_pending() else None
    while _THEN:
        then = _THEN.pop(0)
        if task is None:
            asyncio.get_running_loop().call_soon(then)
        else:
            task.add_done_callback(lambda _, then=then: then())
    return task


# -- the environment ---------------------------------------------------------------------------


class EnvironMemo(Generic[_T]):
    """A value computed from ``os.environ`` and a caller's ``key``, computed again only when
    either changed: decoding the whole environment on every ask cost more than what was asked
    (every stored document asks for the secrets in it). Measured by
    ``benchmarks/bench_bare_client.py``.

    The environment is compared through the bytes behind ``os.environ`` (CPython keeps them in
    ``os.environ._data``) with a copy of them: equal dicts of the same bytes objects compare far
    faster than a set of the decoded items is built. Where they are not there, every ask
    computes. ``key`` is compared as tuples are (identity first, then equality)."""

    def __init__(self) -> None:
        self._last: tuple[tuple[Any, ...], dict[Any, Any], _T] | None = None

    def get(self, key: tuple[Any, ...], compute: Callable[[], _T]) -> _T:
        raw = getattr(os.environ, "_data", None)
        if not isinstance(raw, dict):
            return compute()
        last = self._last
        if last is None or last[0] != key or last[1] != raw:
            last = self._last = (key, dict(raw), compute())
        return last[2]
