"""The judging facade: what a front-end (the CLI, the MCP server, a program) calls to judge.

    with judge_panel("council.toml", ["fake/judge"], in_store=True) as panel:
        outcome = asyncio.run(panel.run(lambda p: p.compare(prompt, a, b)))
    panel.raise_if_capped()                      # BudgetReached, once the store is closed

Judges are set up here, once for every front-end: model strings and aliases become clients
(:func:`council.judging.engine.make_judges`), the spend cap in force is put on them (or only
checked, for a batch whose cap is kept in the store), the call cache and the store's shared
rate budgets are attached. The privacy settings (keep judge reasoning? hash prompts?) are those
of the config given, resolved once (:func:`judging_config`), and passed explicitly to every
judging function from here: nothing below reads the user's config on its own.

A stored batch is read with :func:`batch_status`, :func:`batch_results` and :func:`batch_summary`; queued items are
judged by :func:`run_queue_worker` (``council worker``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from council._util.lazy_exports import lazy_exports
from council.accounting.budget import Budget, cap_in_force, check_cap
from council.accounting.usage import CallSink
from council.config import LoadedConfig, PrivacySettings, load_config, resolve_privacy
from council.errors import BudgetReached, NotFoundError, UsageError
from council.judging.engine import make_judges, resolve_criteria
from council.judging.outcomes import ComparisonOutcome, GradeOutcome
from council.judging.rubrics import builtin_rubrics, load_rubric  # noqa: F401 (public: __all__)
from council.judging.schemas import Rubric
from council.methods.swap import SWAP_STRATEGIES  # noqa: F401 (public: __all__)
from council.methods.voting import GRADE_VOTES, PAIRWISE_VOTES
from council.providers.client import ModelClient, cap_spending, share_limits
from council.storage import Store, using_store

if TYPE_CHECKING:
    from council.judging.adaptive import AdaptiveJury
    from council.judging.batch import BatchItem, BatchSettings, BatchSummary
    from council.judging.calibrating import FittedMap
    from council.judging.worker import WorkerReport

# A batch's types are imported when first asked for: a comparison or a grade has no use for them.
_BATCH_EXPORTS = {
    "BatchItem": "council.judging.batch",
    "BatchPlan": "council.judging.batch",
    "BatchSettings": "council.judging.batch",
    "BatchSummary": "council.judging.batch",
    "DEFAULT_LEASE_SECONDS": "council.judging.worker",
    "WorkerReport": "council.judging.worker",
}
__getattr__ = lazy_exports(__name__, _BATCH_EXPORTS)

__all__ = sorted(
    [
        "BatchFile",
        "ComparisonOutcome",
        "GRADE_VOTES",
        "GradeOutcome",
        "JudgePanel",
        "JudgingConfig",
        "PAIRWISE_VOTES",
        "QueueWork",
        "SWAP_STRATEGIES",
        "batch_results",
        "batch_status",
        "batch_summary",
        "builtin_rubrics",
        "calibrate_batch",
        "judge_panel",
        "judging_config",
        "load_rubric",
        "read_batch_file",
        "resolve_criteria",
        "run_queue_worker",
        *_BATCH_EXPORTS,
    ]
)

T = TypeVar("T")
ConfigSource = str | Path | dict[str, Any] | LoadedConfig | None


@dataclass(frozen=True)
class JudgingConfig:
    """A config and its privacy settings, resolved once and handed to everything that judges."""

    loaded: LoadedConfig
    privacy: PrivacySettings


def judging_config(config: ConfigSource = None, env: Mapping[str, str] | None = None) -> JudgingConfig:
    """``config`` (a TOML path, a dict in the same shape, a loaded config, or None: ``$COUNCIL_CONFIG``,
    else the default file) with its privacy settings, the environment over the file. Every judging
    command resolves both here, so ``council batch`` and ``council worker`` given the same
    ``--config`` keep (and hash) the same things."""
    loaded = config if isinstance(config, LoadedConfig) else load_config(config, env)
    return JudgingConfig(loaded, resolve_privacy(loaded, env))


# ------------------------------------------------------------------------ the judges


class JudgePanel:
    """Judges set up for one invocation (a comparison, a grade, a batch run), with the privacy
    settings, the spend cap and the store they judge under. Made by :func:`judge_panel`."""

    def __init__(
        self,
        config: JudgingConfig,
        judges: list[ModelClient],
        *,
        cap: float | None,
        budget: Budget | None,
        store: Store | None,
    ) -> None:
        self.config = config
        self.judges = judges
        #: The spend cap in force (``max_cost``, else ``[budget] max_cost_usd``), None: no cap.
        self.cap = cap
        #: The budget every call reserves against (a per-call cap), None for a batch or no cap.
        self.budget = budget
        self.store = store

    @property
    def privacy(self) -> PrivacySettings:
        return self.config.privacy

    async def run(self, work: Callable[[JudgePanel], Awaitable[T]]) -> T:
        """``work(self)``, then the judges' clients closed, whatever happens."""
        try:
            return await work(self)
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        for judge in self.judges:
            await judge.aclose()

    def raise_if_capped(self) -> None:
        """``BudgetReached`` if the cap on the calls stopped the work (a comparison's or grade's
        judges refused a call); a batch's cap is reported in its summary instead."""
        if self.budget is not None and self.budget.reached is not None:
            raise BudgetReached(*self.budget.totals())

    async def compare(
        self,
        prompt: str,
        response_a: str,
        response_b: str,
        *,
        criteria: Sequence[Any] | None = None,
        context: str | None = None,
        allow_tie: bool = True,
        swap: bool = True,
        strategy: str = "consistency",
        votes: int | None = None,
        adaptive: bool = False,
        sink: CallSink | None = None,
    ) -> ComparisonOutcome:
        """Compare two responses with every judge (:func:`council.judging.engine.compare`), in both
        orders unless ``swap=False``; ``votes`` None: one swap pair per judge."""
        from council.judging import engine

        return await engine.compare(
            prompt,
            response_a,
            response_b,
            judges=self.judges,
            criteria=criteria,
            context=context,
            allow_tie=allow_tie,
            swap=swap,
            strategy=strategy,
            votes=votes or PAIRWISE_VOTES,
            adaptive=adaptive,
            keep_text=self.privacy.store_transcripts,
            sink=sink,
            store=self.store,
        )

    async def grade(
        self,
        prompt: str,
        response: str,
        *,
        rubric: Rubric | str | Path = "general",
        reference: str | None = None,
        context: str | None = None,
        votes: int | None = None,
        adaptive: bool = False,
        sink: CallSink | None = None,
    ) -> GradeOutcome:
        """Grade one response against a rubric with every judge (:func:`council.judging.grading.grade`);
        ``votes`` None: three per judge."""
        from council.judging import engine

        return await engine.grade(
            prompt,
            response,
            rubric=rubric,
            judges=self.judges,
            reference=reference,
            context=context,
            votes=votes or GRADE_VOTES,
            adaptive=adaptive,
            keep_text=self.privacy.store_transcripts,
            sink=sink,
            store=self.store,
        )

    def batch_settings(
        self,
        *,
        mode: str | None = None,
        strategy: str = "consistency",
        swap: bool = True,
        criteria: Sequence[str] = (),
        rubric: str = "general",
        votes: int | None = None,
        adaptive: bool = False,
        combine: str = "vote",
        confidence: float | None = None,
        reliabilities_from: str | None = None,
    ) -> BatchSettings:
        """A batch's settings with these judges (part of its default id); ``combine``: how the
        judges' verdicts become one per pair (``vote``, ``dawid-skene``: docs/evaluation/batches.md).
        ``adaptive`` with ``dawid-skene``: the adaptive jury, stopping each pair once its posterior
        reaches ``confidence`` (default 0.95) under the reliabilities fitted over the stored batch
        ``reliabilities_from`` (council.judging.adaptive); with the vote, adaptive voting as before."""
        from council.judging.batch import BatchSettings

        jury = None
        if combine == "dawid-skene" and adaptive:
            jury = self._adaptive_jury(confidence, reliabilities_from, swap=swap, votes=votes)
        elif confidence is not None or reliabilities_from is not None:
            given = "--confidence" if confidence is not None else "--reliabilities-from"
            raise UsageError(f"{given} is for the adaptive jury: add --combine dawid-skene --adaptive")
        return BatchSettings(
            mode=mode,  # type: ignore[arg-type]
            judges=[f"{j.id}={j.model}" for j in self.judges],
            strategy=strategy,
            swap=swap,
            criteria=list(criteria) or None,
            rubric=rubric,
            votes=votes,
            adaptive=adaptive,
            combine=combine,  # type: ignore[arg-type]
            jury=jury,
        )

    def _adaptive_jury(
        self, confidence: float | None, reliabilities_from: str | None, *, swap: bool, votes: int | None
    ) -> AdaptiveJury:
        from council.judging.adaptive import (
            DEFAULT_CONFIDENCE,
            AdaptiveJury,
            check_confidence,
            check_panel,
            reliabilities_from_batch,
        )

        chosen = check_confidence(DEFAULT_CONFIDENCE if confidence is None else confidence)
        if reliabilities_from is None:
            raise UsageError(
                "--adaptive with --combine dawid-skene needs the judges' reliabilities: --reliabilities-from "
                "BATCH_ID (an earlier batch judged by the same judges)"
            )
        with using_store(True) as store:
            assert store is not None
            jury = AdaptiveJury(confidence=chosen, reliabilities=reliabilities_from_batch(store, reliabilities_from))
        check_panel(jury, [j.id for j in self.judges], swap=swap, votes=votes)
        return jury

    def enqueue(
        self, file: BatchFile, settings: BatchSettings, batch_id: str, *, replace: bool = False
    ) -> dict[str, int]:
        """Queue ``file``'s items for ``council worker``s under ``batch_id`` with the cap in force
        kept with the batch; how many are ``new, changed, unchanged, retried, removed``."""
        from council.judging.batch import store_batch_cap
        from council.judging.worker import enqueue

        with using_store(True) as store:
            assert store is not None
            counts = enqueue(store, file.items, batch_id=batch_id, settings=settings, judges=self.judges,
                             rubrics=file.rubrics, source=file.source_path, content_sha256=file.content_sha256,
                             replace=replace)  # fmt: skip
            if self.cap is not None:  # kept with the batch: every worker's calls reserve against it
                store_batch_cap(store, batch_id, self.cap)
        return counts

    async def run_batch(self, file: BatchFile, settings: BatchSettings, batch_id: str, **options: Any) -> BatchSummary:
        """Judge ``file``'s items as batch ``batch_id`` (:func:`council.judging.batch.run_batch`:
        ``options`` are its ``concurrency``, ``lease_seconds``, ``resume``, ``output``, ``on_*``,
        ``provider_batch``, ``named`` and ``replace``), under this panel's privacy settings and cap."""
        from council.judging.batch import run_batch

        return await run_batch(
            file.items,
            settings=settings,
            judges=self.judges,
            batch_id=batch_id,
            source=file.source,
            content_sha256=file.content_sha256,
            rubrics=file.rubrics,
            keep_text=self.privacy.store_transcripts,
            hash_prompts=self.privacy.hash_queries,
            max_cost=self.cap,
            source_path=file.source_path,
            **options,
        )


@contextmanager
def judge_panel(
    config: ConfigSource | JudgingConfig,
    judges: Sequence[str] = (),
    *,
    max_cost: Any = None,
    cap_each_call: bool = True,
    cache: bool | None = False,
    refresh: bool = False,
    in_store: bool = False,
    env: Mapping[str, str] | None = None,
) -> Iterator[JudgePanel]:
    """The judges ``judges`` (``[models]`` aliases or model strings; none: the default council's
    chairman) of ``config`` (see :func:`judging_config`), set up once for every front-end.

    ``max_cost`` (else ``[budget] max_cost_usd``) caps the spending: every judge must be cappable
    (a ``UsageError`` otherwise, before any call). ``cap_each_call``: the judges' calls reserve
    against the cap here (a comparison, a grade; :meth:`JudgePanel.raise_if_capped` tells if it
    stopped them); without it (a batch, whose cap is kept with it in the store) the cap is only
    checked and handed on (``panel.cap``). ``cache`` (None: the config's ``[cache] enabled``) or
    ``refresh`` puts the judges on the store's call cache (refused with transcripts off). ``in_store`` (compare, grade:
    their runs are recorded): the store is opened once, and judges with an ``rpm`` or ``tpm`` keep
    it in the store's budgets, one for every process sharing the store (else ``panel.store`` is the
    cache's, or None). The store is closed when the block ends; the clients by :meth:`JudgePanel.run`."""
    if max_cost is not None:
        check_cap(max_cost)
    resolved = config if isinstance(config, JudgingConfig) else judging_config(config, env)
    loaded = resolved.loaded
    clients = make_judges(loaded, judges, env)
    cached = _cache_wanted(cache, refresh, resolved)
    cap = cap_in_force(max_cost, loaded)
    budget = Budget.capped(cap) if cap is not None else None
    if budget is not None:
        for judge in clients:
            judge.check_budget()
        if cap_each_call:
            cap_spending(clients, budget)
    with using_store(cached or in_store) as store:
        if store is not None and cached:
            _attach_cache(clients, store, refresh=refresh)
        if store is not None and in_store:
            share_limits(clients, store)  # one rpm/tpm for every process: docs/methods.md, "Shared rate budget"
        yield JudgePanel(resolved, clients, cap=cap, budget=budget if cap_each_call else None, store=store)


def _cache_wanted(cache: bool | None, refresh: bool, config: JudgingConfig) -> bool:
    """Whether the call cache is on: asked for (``cache``, ``refresh``), else with ``cache=None`` the
    config's ``[cache] enabled``. With transcripts off it cannot keep replies: a ``UsageError``."""
    from council.accounting.call_cache import check_can_keep

    wanted = cache or refresh or (cache is None and config.loaded.config.cache.enabled)
    if wanted:
        check_can_keep(config.privacy.store_transcripts)
    return bool(wanted)


def _attach_cache(clients: Sequence[ModelClient], store: Store, *, refresh: bool) -> None:
    from council.accounting.call_cache import CallCache
    from council.storage import StoreReplies

    cache = CallCache(StoreReplies(store), refresh=refresh)
    for client in clients:
        client.cache = cache


# ------------------------------------------------------------------------ batch files


@dataclass(frozen=True)
class BatchFile:
    """A batch file's items, read and checked before any call."""

    items: list[BatchItem]
    rubrics: dict[str, Rubric]
    #: The file as named; the batch's recorded file is ``source_path`` (absolute).
    source: str
    source_path: str
    content: str
    content_sha256: str

    def batch_id(self, settings: BatchSettings) -> str:
        """The batch's default id: a hash of the file and the settings."""
        from council.judging.batch import default_batch_id

        return default_batch_id(self.content, settings)


def read_batch_file(
    content: str, source: str, *, mode: str | None = None, rubric: str = "general", criteria: Sequence[str] = ()
) -> BatchFile:
    """The items of a batch file's ``content`` (``source``: its name), their rubrics (``rubric``
    for items that name none) and ``criteria`` checked: a bad one fails here, before any call."""
    from council.judging.batch import content_digest, load_rubrics, parse_batch

    items = parse_batch(content, source, mode)  # type: ignore[arg-type]
    rubrics = load_rubrics(items, rubric, source)
    if criteria:
        resolve_criteria(list(criteria))
    return BatchFile(items=items, rubrics=rubrics, source=source, source_path=str(Path(source).resolve()),
                     content=content, content_sha256=content_digest(content))  # fmt: skip


# ------------------------------------------------------------------------ stored batches


def batch_status(batch_id: str) -> dict[str, Any]:
    """How far a stored batch is (items queued, running, done, failed, its cost) with the rounds it
    sent through providers' batch APIs (``provider_batches``); ``NotFoundError`` if there is none."""
    with using_store(True) as store:
        assert store is not None
        found = store.batch_status(batch_id)
        if found is None:
            raise NotFoundError(f"no batch {batch_id!r} in the store")
        found["provider_batches"] = store.provider_batches(batch_id)
    return found


@contextmanager
def batch_results(batch_id: str, *, calibration: str | None = None) -> Iterator[Iterator[str]]:
    """The result lines of a stored batch (those ``council batch --output`` writes), read a page at
    a time while the block runs; ``NotFoundError`` on entering if there is no such batch (or no
    stored calibration map named ``calibration``, whose calibrated probabilities the lines then gain)."""
    from council.judging.batch import judged_rows, result_line, stored_judging
    from council.judging.calibrating import calibrated_rows, load_map

    with using_store(True) as store:
        assert store is not None
        if store.batch_status(batch_id) is None:
            raise NotFoundError(f"no batch {batch_id!r} in the store")
        _, combine = stored_judging(store, batch_id)
        rows = judged_rows(store, batch_id, combine)
        if calibration is not None:
            rows = calibrated_rows(rows, load_map(store, calibration, combine))
        yield (result_line(row) for row in rows)


def batch_summary(
    batch_id: str, *, output: Path | None = None, calibration: str | None = None, store: Store | bool = True
) -> BatchSummary:
    """A stored batch's summary as it is now (with two or more judges, its panel), and with
    ``output`` its results file written from the same reading; ``NotFoundError`` if there is none.
    ``calibration``: a stored calibration map's name, applied to its probabilities; ``store``: the
    store to read (default: the configured one, opened for the call)."""
    from council.judging.batch import stored_summary

    with using_store(store) as opened:
        assert opened is not None
        if opened.batch_status(batch_id) is None:
            raise NotFoundError(f"no batch {batch_id!r} in the store")
        return stored_summary(opened, batch_id, output=output, calibration=calibration)


def calibrate_batch(batch_id: str, name: str) -> FittedMap:
    """``council calibrate``: fit the isotonic map of a stored labelled batch's right verdicts on
    their probabilities and keep it as ``name`` (council.judging.calibrating.fit_map)."""
    from council.judging.batch import judged_rows, stored_judging
    from council.judging.calibrating import check_name, fit_map

    check_name(name)
    with using_store(True) as store:
        assert store is not None
        if store.batch_status(batch_id) is None:
            raise NotFoundError(f"no batch {batch_id!r} in the store")
        _, combine = stored_judging(store, batch_id)
        return fit_map(store, name, batch_id, combine, judged_rows(store, batch_id, combine))


# ------------------------------------------------------------------------ the queue's workers


@dataclass
class QueueWork:
    """What a worker did (``report``), and the cap that stopped it if one did (spent, cap)."""

    report: WorkerReport
    reached: tuple[float, float] | None

    def raise_if_capped(self) -> None:
        if self.reached is not None:
            raise BudgetReached(*self.reached)


def run_queue_worker(
    config: ConfigSource | JudgingConfig,
    *,
    batch_id: str | None = None,
    concurrency: int = 8,
    follow: bool = False,
    lease_seconds: float | None = None,
    max_cost: Any = None,
) -> QueueWork:
    """Judge queued batch items (of ``batch_id``, else of any batch) until none is left
    (:class:`council.judging.worker.Worker`; blocking: it runs its own event loop), with the
    judges each batch stored, under the privacy settings of ``config`` (see :func:`judging_config`).
    Each batch's calls reserve against its stored cap, shared by every worker of it (``max_cost``
    replaces ``batch_id``'s first); a batch without one takes the config's ``[budget] max_cost_usd``."""
    import asyncio

    from council.judging.batch import batch_budget
    from council.judging.worker import DEFAULT_LEASE_SECONDS, BatchSpec, judges_from_spec, run_worker

    cap = None if max_cost is None else check_cap(max_cost)
    if cap is not None and batch_id is None:
        raise UsageError("--max-cost needs --batch-id: a cap is kept with one batch")
    resolved = config if isinstance(config, JudgingConfig) else judging_config(config)
    configured = cap_in_force(None, resolved.loaded)  # the cap of a batch that has none of its own
    budgets: list[Budget] = []
    with using_store(True) as store:
        assert store is not None
        if batch_id is not None and store.batch_status(batch_id) is None:
            raise NotFoundError(f"no batch {batch_id!r} in the store")

        def judges_for(the_id: str, spec: BatchSpec) -> list[ModelClient]:
            # Each batch's judges under its stored cap (replaced first by max_cost), shared by
            # every worker of it: docs/methods.md, "Spend caps".
            judges = judges_from_spec(spec, resolved.loaded.config)
            budget = batch_budget(store, the_id, cap if the_id == batch_id else None, judges, configured)
            if budget is not None:
                budgets.append(budget)
            return judges

        report = asyncio.run(
            run_worker(
                store,
                judges_for=judges_for,
                batch_id=batch_id,
                concurrency=concurrency,
                follow=follow,
                lease_seconds=DEFAULT_LEASE_SECONDS if lease_seconds is None else lease_seconds,
                keep_text=resolved.privacy.store_transcripts,
                hash_prompts=resolved.privacy.hash_queries,
                stop=lambda: any(b.reached is not None for b in budgets),
            )
        )
        reached = next((b.totals() for b in budgets if b.reached is not None), None)
    return QueueWork(report, reached)
