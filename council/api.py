"""The public Python API: ``Council``, and judging (``judge_panel`` and the rest of
:mod:`council.judging.facade`, re-exported here).

    council = Council.from_config("council.toml")      # or a dict, or None for the default
    result = await council.run("question")              # SessionResult
    async for event in council.stream("question"): ...   # events with content, then the result
    await council.aclose()

No global state: each Council owns its model clients (and so its concurrency and
rate limits, shared by all of its sessions) and its store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from council._util.lazy_exports import lazy_exports
from council.accounting.budget import Budget, cap_in_force, spending
from council.accounting.call_cache import check_can_keep
from council.config import LoadedConfig, ResolvedCouncil, load_config, resolve_council
from council.errors import UsageError
from council.providers.asking import JsonFormat
from council.providers.client import ModelClient, RetryPolicy, cappable_price
from council.providers.registry import make_api
from council.session import Candidate, EventSink, SessionRunner
from council.storage import Store, using_store

if TYPE_CHECKING:  # imported once the session's replies come in (council.session.runner)
    from council.session.events import SessionEvent
    from council.session.results import SessionResult

# The judging facade (council.judging.facade: compare, grade, batches, workers), imported when one
# of its names is first asked for: a council run has no use for it. ``council`` exports it too.
JUDGING = (
    "BatchFile",
    "BatchItem",
    "BatchPlan",
    "BatchSettings",
    "BatchSummary",
    "ComparisonOutcome",
    "DEFAULT_LEASE_SECONDS",
    "GRADE_VOTES",
    "GradeOutcome",
    "JudgePanel",
    "JudgingConfig",
    "PAIRWISE_VOTES",
    "QueueWork",
    "SWAP_STRATEGIES",
    "WorkerReport",
    "batch_results",
    "batch_status",
    "builtin_rubrics",
    "judge_panel",
    "judging_config",
    "load_rubric",
    "read_batch_file",
    "resolve_criteria",
    "run_queue_worker",
)
__getattr__ = lazy_exports(__name__, dict.fromkeys(JUDGING, "council.judging.facade"))


def attach_call_cache(clients: Iterable[ModelClient], store: Store, *, refresh: bool = False) -> None:
    """Put model clients on the store's call cache (docs/methods.md, "Call cache")."""
    from council.accounting.call_cache import CallCache
    from council.storage import StoreReplies

    cache = CallCache(StoreReplies(store), refresh=refresh)
    for client in clients:
        client.cache = cache


def session_cap(loaded: LoadedConfig, council: ResolvedCouncil, max_cost: Any = None) -> float | None:
    """The cap in force for ``council``'s sessions (``council.accounting.budget.cap_in_force``): ``max_cost``,
    else the config's ``[budget] max_cost_usd``. A model of the council whose calls cannot be
    kept within a cap is a ``UsageError`` now, before any session (or any request a server takes)."""
    cap = cap_in_force(max_cost, loaded)
    if cap is not None:
        for model in council.models:
            cappable_price(model)
    return cap


class Council:
    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        council: str | None = None,
        store: Store | None | bool = True,
        env: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        client_pool: dict[str, ModelClient] | None = None,
        max_cost: float | None = None,
        cache: bool = False,
        refresh: bool = False,
    ) -> None:
        """``client_pool``: model clients shared with other councils (one limit per model alias).

        ``max_cost``: a hard spend cap in US dollars over every session of this council
        (``self.budget``; a reached cap makes sessions ``partial``, then raises ``BudgetReached``).
        Without it the config's ``[budget] max_cost_usd`` caps each session on its own
        (``session_cap``), as ``council run`` caps its one session and the server each of its own.
        ``cache``/``refresh``: answer identical requests from the store's call cache (refused
        with transcripts off); opt-in here, the CLI reads ``[cache]``."""
        self.loaded = loaded
        self.resolved: ResolvedCouncil = resolve_council(loaded, council, env)
        cap = session_cap(loaded, self.resolved, max_cost)  # before anything is opened
        # The cap is in force around each session (``run``), not on the clients, which may be
        # shared with other councils (``client_pool``).
        self.budget = Budget.capped(cap) if max_cost is not None and cap is not None else None
        self.session_cap = None if max_cost is not None else cap
        if cache or refresh:
            check_can_keep(self.resolved.store_transcripts)
        self._exit = ExitStack()  # closes the store if this council opened it (storage.using_store)
        self._store: Store | None = self._exit.enter_context(using_store(store))
        self.clients: dict[str, ModelClient] = client_pool if client_pool is not None else {}
        r = self.resolved
        for m in r.models:
            if m.id not in self.clients:
                self.clients[m.id] = ModelClient(m, make_api(m), retry=retry, shared_limits=self._store)
        if cache or refresh:
            if self._store is None:
                raise UsageError("the call cache lives in the store: give the council a store")
            attach_call_cache(self.clients.values(), self._store, refresh=refresh)
        self.runner = SessionRunner(self.resolved, self.clients, self._store)

    @classmethod
    def from_config(
        cls,
        config: str | Path | dict[str, Any] | None = None,
        *,
        council: str | None = None,
        store: Store | None | bool = True,
        env: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        max_cost: float | None = None,
        cache: bool = False,
        refresh: bool = False,
    ) -> Council:
        """``config``: a TOML path, a dict in the same shape, or None (env / home / offline default)."""
        return cls(
            load_config(config, env), council=council, store=store, env=env, retry=retry,
            max_cost=max_cost, cache=cache, refresh=refresh,
        )  # fmt: skip

    @property
    def name(self) -> str:
        return self.resolved.name

    @property
    def store(self) -> Store | None:
        return self._store

    async def run(
        self,
        question: str,
        *,
        history: Sequence[dict[str, str]] | None = None,
        seed: int | None = None,
        candidates: Sequence[Candidate] | None = None,
        synthesis: bool = True,
        on_event: EventSink | None = None,
        synthesis_format: JsonFormat | None = None,
    ) -> SessionResult:
        """``synthesis_format``: ask the chairman for a JSON answer in this format (``JsonFormat``)."""
        budget = self.budget if self.session_cap is None else Budget.capped(self.session_cap)
        with spending(budget):
            return await self.runner.run(
                question,
                seed=seed,
                history=history or (),
                candidates=candidates,
                synthesis=synthesis,
                on_event=on_event,
                synthesis_format=synthesis_format,
            )

    def too_large(self, question: str, history: Sequence[dict[str, str]] = ()) -> bool:
        """Whether ``question`` (as ``check_request`` returns it) with ``history`` is too large for
        this council's token limits, known before any call: ``run`` would fail with
        ``PromptTooLarge`` (:meth:`council.session.runner.SessionRunner.too_large`)."""
        return self.runner.too_large(question, history)

    def run_sync(self, question: str, **kwargs: Any) -> SessionResult:
        """Blocking wrapper (not from inside a running event loop); closes HTTP clients after."""

        async def _go() -> SessionResult:
            try:
                return await self.run(question, **kwargs)
            finally:
                await self.aclose_clients()

        return asyncio.run(_go())

    async def stream(self, question: str, **kwargs: Any) -> AsyncIterator[SessionEvent | SessionResult]:
        """Yield the session's events as they happen (answers, reviews, consensus, synthesis:
        :mod:`council.session.events`), then the SessionResult last. A session that fails
        yields its ``session_finished`` event (status ``failed``) and then raises."""
        queue: asyncio.Queue[SessionEvent] = asyncio.Queue()
        task = asyncio.create_task(self.run(question, on_event=queue.put_nowait, **kwargs))
        try:
            while not task.done() or not queue.empty():
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                else:
                    getter.cancel()
            yield task.result()
        finally:
            if not task.done():
                task.cancel()

    async def aclose_clients(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    async def aclose(self) -> None:
        await self.aclose_clients()
        self._exit.close()
        self._store = None

    async def __aenter__(self) -> Council:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
