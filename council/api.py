"""The public Python API: ``Council``, judging (``judge_panel`` and the rest of
:mod:`council.judging.facade`, re-exported here) and the read helpers every front-end uses.

    council = Council.from_config("council.toml")      # or a dict, or None for the default
    result = await council.run("question")              # SessionResult
    async for event in council.stream("question"): ...   # events with content, then the result
    await council.aclose()

No global state: each Council owns its model clients (and so its concurrency and
rate limits, shared by all of its sessions) and its store.

The CLI, the HTTP server and the MCP server reach council only through this module (and
``council``, ``council.errors``): the read helpers below (stored sessions, the bias report,
the leaderboard, exports, the call cache, store copies, what ``council serve`` checks before
it listens) take their options and their store explicitly; the names in ``_EXPORTS`` are the
library's types and functions they need, each imported when first asked for, so that importing
this module costs a command nothing it does not use (``council sessions list`` loads no
validation library, ``council bias-report`` no event loop).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from council._util.lazy_exports import lazy_exports
from council.errors import UsageError

if TYPE_CHECKING:  # the lazy exports below, for type checkers
    from council._util.speedups import import_ahead  # noqa: F401
    from council.accounting.budget import Budget, BudgetReached, cap_in_force, check_cap  # noqa: F401
    from council.accounting.call_cache import check_can_keep  # noqa: F401
    from council.accounting.observers import Observer as CallObserver  # noqa: F401
    from council.accounting.observers import observe as observe_calls  # noqa: F401
    from council.bias.html import render_html as render_bias_report_html  # noqa: F401
    from council.bias.report import (  # noqa: F401
        DEFAULT_MAX_POINTS,
        BiasReport,
        bias_report,
        report_from_records_files,
    )
    from council.bias.wording import render_bias_report_text  # noqa: F401
    from council.config import (  # noqa: F401
        LoadedConfig,
        PrivacySettings,
        ResolvedCouncil,
        load_config,
        resolve_council,
        resolve_privacy,
    )
    from council.exports.deliberation import deliberation_lines, revision_line  # noqa: F401
    from council.exports.sessions import SHAPES as EXPORT_SHAPES  # noqa: F401
    from council.exports.sessions import session_listing, stored_result  # noqa: F401
    from council.exports.wording import problems, w_text, without_prefix  # noqa: F401
    from council.judging.html import render_batch_html  # noqa: F401
    from council.judging.wording import num, panel_judge_rows, panel_numbers, pct, verdict_measures  # noqa: F401
    from council.leaderboard.html import render_leaderboard_html  # noqa: F401
    from council.leaderboard.judged import judged_leaderboard, parse_control  # noqa: F401
    from council.leaderboard.shape import DEFAULT_BOOTSTRAP, MAX_BOOTSTRAP, Leaderboard  # noqa: F401
    from council.leaderboard.stored import leaderboard  # noqa: F401
    from council.leaderboard.text import render_leaderboard_text  # noqa: F401
    from council.methods.ranking import method_title  # noqa: F401
    from council.methods.significance import p_text  # noqa: F401
    from council.providers.asking import JsonFormat
    from council.providers.client import ModelClient, RetryPolicy
    from council.session import Candidate, EventSink, load_candidates  # noqa: F401
    from council.session.degraded import partial_line_of  # noqa: F401
    from council.session.events import SessionEvent, events_from_result  # noqa: F401
    from council.session.results import SessionResult
    from council.session.runner import MAX_SEED, check_request  # noqa: F401
    from council.storage import Store, TableCopy, open_store, using_store  # noqa: F401

# name: its module (or "module:attribute" where it is exported here under another name).
_EXPORTS = {
    # configuration and privacy: front-ends resolve them and pass them on
    "LoadedConfig": "council.config",
    "ResolvedCouncil": "council.config",
    "PrivacySettings": "council.config",
    "load_config": "council.config",
    "resolve_council": "council.config",
    "resolve_privacy": "council.config",
    # spending and the call cache
    "Budget": "council.accounting.budget",
    "BudgetReached": "council.accounting.budget",
    "cap_in_force": "council.accounting.budget",
    "check_cap": "council.accounting.budget",
    "check_can_keep": "council.accounting.call_cache",
    "observe_calls": "council.accounting.observers:observe",  # the server's and worker's /metrics and logs
    "CallObserver": "council.accounting.observers:Observer",
    # sessions: what a request is checked against, the result and the events
    "JsonFormat": "council.providers.asking",
    "Candidate": "council.session",
    "SessionEvent": "council.session",
    "SessionResult": "council.session.results",
    "events_from_result": "council.session.events",
    "partial_line_of": "council.session.degraded",
    "load_candidates": "council.session",
    "check_request": "council.session.runner",
    "import_ahead": "council._util.speedups",
    "MAX_SEED": "council.session.runner",
    "method_title": "council.methods.ranking",
    "p_text": "council.methods.significance",
    # stored sessions, in the shapes every front-end gives out
    "EXPORT_SHAPES": "council.exports.sessions:SHAPES",
    "session_listing": "council.exports.sessions",
    "stored_result": "council.exports.sessions",
    "problems": "council.exports.wording",
    "w_text": "council.exports.wording",
    "without_prefix": "council.exports.wording",
    "deliberation_lines": "council.exports.deliberation",
    "revision_line": "council.exports.deliberation",
    "verdict_measures": "council.judging.wording",
    "panel_judge_rows": "council.judging.wording",
    "panel_numbers": "council.judging.wording",
    "pct": "council.judging.wording",
    "num": "council.judging.wording",
    "render_batch_html": "council.judging.html",
    # the bias report
    "BiasReport": "council.bias.report",
    "DEFAULT_MAX_POINTS": "council.bias.report",
    "bias_report": "council.bias.report",
    "report_from_records_files": "council.bias.report",
    "render_bias_report_html": "council.bias.html:render_html",
    "render_bias_report_text": "council.bias.wording",
    # the leaderboard
    "Leaderboard": "council.leaderboard.shape",
    "DEFAULT_BOOTSTRAP": "council.leaderboard.shape",
    "MAX_BOOTSTRAP": "council.leaderboard.shape",
    "leaderboard": "council.leaderboard.stored",
    "judged_leaderboard": "council.leaderboard.judged",
    "parse_control": "council.leaderboard.judged",
    "render_leaderboard_html": "council.leaderboard.html",
    "render_leaderboard_text": "council.leaderboard.text",
    # the store
    "Store": "council.storage",
    "open_store": "council.storage",
    "using_store": "council.storage",
}

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
    "batch_summary",
    "calibrate_batch",
    "builtin_rubrics",
    "judge_panel",
    "judging_config",
    "load_rubric",
    "read_batch_file",
    "resolve_criteria",
    "run_queue_worker",
)
_EXPORTS.update(dict.fromkeys(JUDGING, "council.judging.facade"))

__getattr__ = lazy_exports(__name__, _EXPORTS, keep=True)


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
    from council.accounting.budget import cap_in_force
    from council.providers.client import cappable_price

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
        from council.accounting.budget import Budget
        from council.accounting.call_cache import check_can_keep
        from council.config import resolve_council
        from council.providers.client import ModelClient
        from council.providers.registry import make_api
        from council.session import SessionRunner
        from council.storage import using_store

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
        from council.config import load_config

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
        from council.accounting.budget import Budget, spending

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
        import asyncio

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
        import asyncio

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
        from council.session.grace import cancel_late

        await cancel_late(self.resolved)  # late calls of its sessions (stage_grace): nothing waits for them
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


# -- read helpers: what the front-ends show and export --------------------------------------
# ``store``: a store to use as it is (left open), or True for the configured one, opened for the
# call and closed after (``council.storage.using_store``).


def list_sessions(
    *, limit: int, since: str | None, council: str | None, store: Store | bool = True
) -> list[dict[str, Any]]:
    """The stored sessions, newest first, as the store's rows (``session_listing`` shapes one
    for giving out): at most ``limit``, created on or after ``since``, of ``council`` only."""
    from council.storage import using_store

    with using_store(store) as opened:
        assert opened is not None
        return opened.list_sessions(limit=limit, since=since, council=council)


def get_session(session_id: str, *, store: Store | bool = True) -> dict[str, Any]:
    """One stored session's row, by id or an unambiguous prefix of one (``NotFoundError``
    otherwise); ``stored_result`` reads its result."""
    from council.storage import using_store

    with using_store(store) as opened:
        assert opened is not None
        return opened.get_session(session_id)


def stored_bias_report(
    *,
    since: str | None,
    reviewers: Sequence[str],
    council: str | None,
    max_points: int,
    length_unit: str | None,
    skip_bad: bool,
    store: Store | bool = True,
) -> Any:
    """The cross-session bias report (``BiasReport``) over the store's bias records."""
    from council.bias.report import bias_report
    from council.storage import using_store

    with using_store(store) as opened:
        return bias_report(opened, since=since, reviewers=reviewers, council=council, max_points=max_points,
                           length_unit=length_unit, skip_bad=skip_bad)  # type: ignore[arg-type]  # fmt: skip


def export_sessions(
    out: IO[str], *, fmt: str, shape: str, redact: bool, since: str | None, store: Store | bool = True
) -> int:
    """Write the stored sessions (one of ``EXPORT_SHAPES``, ``fmt`` jsonl or csv; ``redact``:
    without any question, answer, review or synthesis text) to ``out``; return how many."""
    from council.exports.sessions import export_sessions as export
    from council.storage import using_store

    with using_store(store) as opened:
        return export(opened, out, fmt=fmt, shape=shape, redact=redact, since=since)


def export_bias_records(out: IO[str], *, fmt: str, since: str | None, store: Store | bool = True) -> int:
    """Write the stored bias records (``fmt`` jsonl or csv) to ``out``; return how many."""
    from council.bias.export import export_bias_records as export
    from council.storage import using_store

    with using_store(store) as opened:
        return export(opened, out, fmt=fmt, since=since)  # type: ignore[arg-type]


def export_judgments(
    out: IO[str], *, fmt: str, since: str | None, batch_id: str | None = None, store: Store | bool = True
) -> int:
    """``council export --judgments``: one row per batch item and judge (council.exports.judgments)."""
    from council.exports.judgments import export_judgments as export
    from council.storage import using_store

    with using_store(store) as opened:
        return export(opened, out, fmt=fmt, since=since, batch_id=batch_id)


def export_judged_pairs(out: IO[str], *, since: str | None, store: Store | bool = True) -> int:
    """Write the judged pairs on record as a judgments file (JSON Lines) to ``out``; return how many."""
    from council.leaderboard.judgment_files import export_judged_pairs as export
    from council.storage import using_store

    with using_store(store) as opened:
        return export(opened, out, since=since)  # type: ignore[arg-type]


def cache_stats(*, store: Store | bool = True) -> dict[str, Any]:
    """The call cache's figures: entries kept (per model), the calls it answered and what they saved."""
    from council.storage import using_store

    with using_store(store) as opened:
        assert opened is not None
        return opened.cache_stats()


def clear_cache(*, older_than_days: float | None, store: Store | bool = True) -> int:
    """Delete the call cache's kept replies (all, or those written more than ``older_than_days``
    ago); return how many."""
    from council.storage import using_store

    with using_store(store) as opened:
        assert opened is not None
        return opened.clear_cache(older_than_days=older_than_days)


def copy_store(
    to_url: str, from_url: str | None, *, progress: Any = None
) -> tuple[list[TableCopy], str, str]:
    """Every row of the store ``from_url`` (None: the configured one) into the store ``to_url``,
    resumably; ``progress`` is told of each table. Returns the per-table counts and the two
    stores as shown to people (no password)."""
    from council.storage import copy_into

    return copy_into(to_url, from_url, progress=progress)


# -- what ``council serve`` checks and prepares before it listens ---------------------------


def check_store_opens() -> None:
    """Open the configured store once and close it: a store that cannot be opened is one error
    now, and its migrations run here, once, not in every server process."""
    from council.storage import open_store

    open_store().close()


def served_councils(loaded: LoadedConfig) -> list[ResolvedCouncil]:
    """Every council of ``loaded``, resolved, and each checked against the configured spend cap
    (``session_cap``): a config that cannot serve fails now, not on a request."""
    from council.config import resolve_council

    if not loaded.config.councils:  # the offline default always has one; a file may have none
        raise UsageError(f"{loaded.source} defines no council: add a [councils.NAME] table to serve")
    councils = [resolve_council(loaded, name) for name in loaded.config.councils]
    for council in councils:
        session_cap(loaded, council)
    return councils


def load_model_libraries(councils: Iterable[ResolvedCouncil]) -> None:
    """Import the model libraries the councils' models need (LiteLLM, only if one uses it) now,
    so that its long import does not land on a server's first request."""
    from council.providers.registry import needs_litellm

    models = [
        m for c in councils for m in [*c.members, *c.reviewers, c.chairman, c.fallback_chairman] if m is not None
    ]
    if needs_litellm(models):
        from council.providers.litellm_api import import_litellm

        import_litellm()
