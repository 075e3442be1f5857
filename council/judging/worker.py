"""The distributed batch: a batch's items queued in the store, judged by any number of workers.

``enqueue`` stores the items and what judging them needs (the batch's *spec*: its settings,
each judge's model spec without secrets or server address, the rubrics' contents), so a
worker on another machine needs only the store, its own keys and, for a judge reached
through an ``api_base``, a config naming it. ``run_worker`` claims items under a lease
(council.storage.queue), judges them and records each with its result in one
transaction; a heartbeat keeps its leases alive. A worker killed mid-item loses nothing:
its items return to the queue when their leases pass, and another worker judges them
again (their calls are then made twice; the item is recorded once). An item whose result the
database refuses for its data is recorded as failed with the reason (``ItemRefused``): it
fails alone, and is not judged again.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from council._util import tracing
from council._util.logs import get_logger
from council.accounting import observers
from council.bias.records import QueryHasher
from council.errors import (
    ConfigError,
    CouncilError,
    CouncilFailure,
    ItemAlreadyRecorded,
    ItemRefused,
    StoreWentAway,
    UsageError,
)
from council.judging.batch_items import BatchItem, BatchSettings, item_digest, judge_item
from council.judging.schemas import Rubric
from council.providers.client import ModelClient, share_limits
from council.storage import JudgmentSave, Store
from council.untrusted.redaction import private_scope, redact

log = get_logger("council.judging")

#: A claim outlives the worker's last heartbeat by this long; heartbeats come every third of it.
DEFAULT_LEASE_SECONDS = 60.0
_STORE_DOWN = (
    "the store stopped answering mid-batch ({}); "
    "the items this worker held return to the queue when their lease passes: run a worker again"
)
#: How often an idle worker looks for new items (``--follow``, or others' items still running).
POLL_SECONDS = 1.0
#: Threads a worker calls a pooled store from (council.storage.postgres keeps up to 8 connections).
STORE_THREADS = 4
#: How often a worker with nothing left to claim looks again while others hold items of its batch.
WAIT_SECONDS = 0.2
#: How long a finished item's record waits for the other items in flight to finish and join its
#: transaction (never longer than until they all have). Replies arrive a few per turn of the
#: event loop, and every commit costs the loop time whatever it holds: waiting a few milliseconds
#: makes far fewer commits than recording at the end of each turn (bench_batch.py measures it).
#: The call-log rows of those milliseconds ride the same commit: a crash
#: may lose what they hold for that long, never a result already reported.
RECORD_HOLD_S = 0.003


class JudgeSpec(BaseModel):
    """A judge as stored with a batch: its alias and model spec, without secrets or server."""

    id: str
    spec: dict[str, Any]
    #: The judge was reached through an ``api_base``: a worker's config must name it.
    api_base: bool = False


class BatchSpec(BaseModel):
    """Everything a worker needs to judge a batch's items, stored with the batch."""

    settings: BatchSettings
    judges: list[JudgeSpec]
    rubrics: dict[str, Rubric]
    traceparent: str | None = None
    """The W3C ``traceparent`` of the span that queued the batch (traces on): its items' spans link to it."""


def batch_spec(settings: BatchSettings, judges: Sequence[ModelClient], rubrics: Mapping[str, Rubric]) -> BatchSpec:
    stored = []
    for judge in judges:
        spec = judge.resolved.spec.model_dump(mode="json", exclude={"api_base"}, exclude_defaults=True)
        stored.append(JudgeSpec(id=judge.id, spec=spec, api_base=judge.resolved.spec.api_base is not None))
    return BatchSpec(settings=settings, judges=stored, rubrics=dict(rubrics))


def enqueue(
    store: Store,
    items: Sequence[BatchItem],
    *,
    batch_id: str,
    settings: BatchSettings,
    judges: Sequence[ModelClient],
    rubrics: Mapping[str, Rubric],
    source: str,
    content_sha256: str,
    replace: bool = False,
) -> dict[str, int]:
    """Queue the items of a batch file (``source``: its absolute path) under ``batch_id``
    (matched with those queued before by id and content); how many are ``new, changed,
    unchanged, retried, removed``. Another file under an existing id: refused unless ``replace``."""
    spec = batch_spec(settings, judges, rubrics)

    def queue() -> dict[str, int]:
        return store.enqueue_batch(
            batch_id,
            source=source,
            replace=replace,
            content_sha256=content_sha256,
            settings=settings.model_dump(mode="json"),
            spec=spec.model_dump(mode="json"),
            items=[
                {"item_id": i.id, "position": i.line, "digest": item_digest(i), "item": i.model_dump(mode="json")}
                for i in items
            ],
        )

    if not tracing.ACTIVE:
        return queue()
    with tracing.batch_submitted(batch_id, len(items)) as spec.traceparent:
        return queue()


def judges_from_spec(spec: BatchSpec, config: Any, env: Mapping[str, str] | None = None) -> list[ModelClient]:
    """The batch's judges on this machine: an alias the worker's config defines is taken from
    it (its own server address and key variable), any other from the stored spec; keys come
    from this machine's environment."""
    from council.config import ConfigFile, resolve_model
    from council.config.loader import model_spec
    from council.providers.registry import make_api

    env = os.environ if env is None else env
    clients = []
    for judge in spec.judges:
        if judge.id in config.models:
            resolved = resolve_model(judge.id, config, env, "worker")
        elif judge.api_base:
            raise ConfigError(
                f"judge {judge.id!r} of this batch is reached through an api_base: "
                f"give the worker a --config with [models.{judge.id}]"
            )
        else:
            stored = ConfigFile(models={judge.id: model_spec(judge.spec, f"judge {judge.id!r} of this batch")})
            resolved = resolve_model(judge.id, stored, env, "worker")
        clients.append(ModelClient(resolved, make_api(resolved)))
    return clients


@dataclass
class WorkerReport:
    """What one worker did."""

    worker: str
    judged: int = 0
    failed: int = 0
    #: Items another worker recorded first (this worker's claim had expired): result dropped.
    dropped: int = 0
    #: Items left unfinished because ``stop()`` (a spend cap) came true mid-item: back in the queue.
    stopped: int = 0
    batches: set[str] = field(default_factory=set)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _store_failed(exc: Exception) -> bool:
    # The database went away (stopped, unreachable, its file locked past the busy timeout).
    return type(exc).__module__.split(".")[0] in {"psycopg", "psycopg_pool", "sqlite3"}


def _key(row: Mapping[str, Any]) -> tuple[str, str]:
    return row["batch_id"], row["item_id"]


class _Judges:
    """Each batch's judges, made once per worker (``judges_for(batch_id, spec)``), closed at the end."""

    def __init__(self, store: Store, judges_for: Callable[[str, BatchSpec], list[ModelClient]]) -> None:
        self.store, self.judges_for = store, judges_for
        self.made: dict[str, tuple[BatchSpec, list[ModelClient]]] = {}

    def get(self, batch_id: str) -> tuple[BatchSpec, list[ModelClient]]:
        if batch_id not in self.made:
            raw = self.store.batch_spec(batch_id)
            if raw is None:
                raise CouncilFailure(f"batch {batch_id} has no stored judging settings; enqueue it again")
            spec = BatchSpec.model_validate(raw)
            clients = self.judges_for(batch_id, spec)
            share_limits(clients, self.store)  # rpm and tpm: one budget for every worker
            self.made[batch_id] = (spec, clients)
        return self.made[batch_id]

    async def aclose(self, keep: Sequence[ModelClient] = ()) -> None:
        for _, clients in self.made.values():
            for client in clients:
                if client not in keep:
                    await client.aclose()


async def run_worker(store: Store, **options: Any) -> WorkerReport:
    """Run a :class:`Worker` over ``store``'s queue (``options``: its keyword arguments) and say
    what it did."""
    return await Worker(store, **options).run()


Finished = tuple[JudgmentSave, "asyncio.Future[None]"]


class Worker:
    """One worker's run over the queue, made of named steps (below).

    Claim and judge items (of ``batch_id``, else of any batch) ``concurrency`` at a time,
    until none is queued and none is running elsewhere (a dead worker's items come back when
    their lease passes); with ``follow``, keep waiting for new ones. Once ``stop()`` is true
    (a spend cap reached) no new item is claimed, and an item the cap cut short is not recorded:
    the rest stay queued for a later worker. A server that goes away is waited for within the
    store's outage grace (PostgreSQL: a write under way then is done once; ``through_outage``);
    a database away for longer is a ``CouncilFailure``: the items this worker held return to
    the queue with its leases.
    ``hash_prompts`` (None: the user's ``hash_queries``, read by
    :func:`council.judging.running.default_privacy`): a judged pair keeps its
    prompt's salted query hash as its ``prompt_id``; never an unsalted digest, which anyone
    could match against a list of prompts (docs/methods.md, "Length-controlled win rate").

    The steps:

    - ``run``: start the claiming loop and the heartbeat; at the end release what is held, close the judges;
    - ``dispatch``: keep ``concurrency`` items in flight: ``claim`` free places, ``start`` each item,
      wait for one to finish, or ``wait_for_others`` when nothing is left to claim;
    - ``judge``: one item, in its privacy scope; cut short by the cap (``stopping``), it is not recorded;
    - ``record``: a finished item joins the next write; ``write_finished`` writes them (with a claim of as
      many items more) in one transaction, once ``held_for_others`` is over;
    - ``heartbeat``: renew the leases of the items held;
    - ``call``/``in_store``/``store_op``: every store operation, off the event loop for a pooled store,
      ``through_outage`` when the database server goes away (``take_up`` then finds what a lost
      reply had claimed).
    """

    def __init__(
        self,
        store: Store,
        *,
        judges_for: Callable[[str, BatchSpec], list[ModelClient]],
        batch_id: str | None = None,
        concurrency: int = 8,
        follow: bool = False,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        keep_text: bool = True,
        worker: str | None = None,
        on_item: Callable[[BatchItem, bool], None] | None = None,
        keep_judges: Sequence[ModelClient] = (),
        stop: Callable[[], bool] | None = None,
        hash_prompts: bool | None = None,
    ) -> None:
        self.store = store
        self.batch_id = batch_id
        self.concurrency = concurrency
        self.follow = follow
        self.lease_seconds = lease_seconds
        self.keep_text = keep_text
        self.on_item = on_item
        self.keep_judges = keep_judges
        self.stop = stop
        self.hash_prompts = hash_prompts
        self.report = WorkerReport(worker=worker or worker_name())
        self.judges = _Judges(store, judges_for)
        self.hasher: QueryHasher | None = None
        self.executor: ThreadPoolExecutor | None = None
        #: The store failed: the calls queued behind the one that found it fail at once.
        self.store_down = False
        #: A store outage was told (once for everything it caught).
        self.outage_told = False
        #: Waiting for other workers' items was told, or there is nothing to wait for (the worker stops).
        self.told = False
        self.in_flight: dict[str, int] = {}
        #: The items being judged; ``ready`` holds those claimed to start (waiting for free places).
        self.judging: set[tuple[str, str]] = set()
        self.ready: list[dict[str, Any]] = []
        #: Items that finish while the worker reads back what it holds (``take_up``): that read may
        #: still find them held. By id: two reads' sets may be equal.
        self.finishing: dict[int, set[tuple[str, str]]] = {}
        #: Finished items waiting for their write (``write_finished``), and the writes under way.
        self.finished: list[Finished] = []
        self.writes: set[asyncio.Task[None]] = set()
        #: The last claim found fewer items than it asked for.
        self.dry = False
        #: The hold under way, if any (``held_for_others``).
        self.hold: list[asyncio.Future[None]] = []

    # ------------------------------------------------------------------ start and end

    async def run(self) -> WorkerReport:
        self.open()
        if self.batch_id is not None:  # a judge this machine cannot reach fails here, before any claim
            self.store_op(self.judges.get, self.batch_id)
        work = asyncio.create_task(self.dispatch())
        beat = asyncio.create_task(self.heartbeat())
        try:
            await asyncio.wait({work, beat}, return_when=asyncio.FIRST_COMPLETED)
            if beat.done():  # the heartbeat failed: the store is away
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                beat.result()
            work.result()
        finally:
            for task in (work, beat):
                task.cancel()
            await asyncio.gather(work, beat, return_exceptions=True)
            await self.close()
        return self.report

    def open(self) -> None:
        store = self.store
        store.recover_while_open()  # a worker runs for long: dead processes' sessions do not wait for a command
        hash_prompts = self.hash_prompts
        if hash_prompts is None:
            from council.judging.running import default_privacy

            hash_prompts = default_privacy().hash_queries
        self.hasher = QueryHasher.of_store(store) if hash_prompts else None
        if self.hasher is not None:
            self.hasher.fingerprint()  # a salt file it cannot use is a ConfigError now, before any item is claimed
        # A store whose operations may run on several threads at once (a connection pool) is called
        # off the event loop: its round trips then overlap each other and the judges' calls instead
        # of stalling every item in flight. A few threads, fewer than the pool's connections: more
        # calls wait in the executor's queue (no time limit), never for a connection (the pool gives
        # up after its timeout).
        if store.threadsafe:
            self.executor = ThreadPoolExecutor(min(self.concurrency, STORE_THREADS), "council-store")

    async def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True)  # a store call still running (a save) finishes first
        if not self.store_down:  # else the leases pass instead
            self.store.release_claims(self.report.worker)
        await self.judges.aclose(self.keep_judges)

    def stopping(self) -> bool:
        """``stop()`` came true (a spend cap): no new item is claimed."""
        return self.stop is not None and self.stop()

    # ------------------------------------------------------------------ the store

    def store_op(self, op: Callable[..., Any], *args: Any, last: bool = False, **kwargs: Any) -> Any:
        if self.store_down:  # the calls queued behind the one that found it fail at once, not after a wait each
            raise CouncilFailure(_STORE_DOWN.format("it failed a moment ago"))
        try:
            return op(*args, **kwargs)
        except (ItemAlreadyRecorded, UsageError):
            raise
        except Exception as exc:
            # A store operation fails with CouncilFailure only when its database does (a backend
            # may say so itself); anything else that is not the driver's is a bug.
            if not isinstance(exc, CouncilFailure) and not _store_failed(exc):
                raise
            why = " ".join(redact(str(exc)).split())[:300]
            if not last and isinstance(exc, StoreWentAway):  # tried again: see ``through_outage``
                raise StoreWentAway(why) from None
            self.store_down = True
            raise CouncilFailure(_STORE_DOWN.format(why)) from None

    async def in_store(self, op: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.executor is None:
            return self.store_op(op, *args, **kwargs)
        context = contextvars.copy_context()  # the item's privacy scope goes with it
        job = functools.partial(context.run, self.store_op, op, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self.executor, job)

    async def through_outage(self, first: Callable[[], Awaitable[Any]], again: Callable[[bool], Awaitable[Any]]) -> Any:
        """``first()``; when the server goes away under it (``StoreWentAway``), ``again(last)`` until the
        server is back: the store waits for it, within its outage grace (a connection the outage
        broke may still be handed out first, and fails at once). ``last``: the grace is over, and
        a failure now stops the worker. The outage is told once for everything it caught."""
        try:
            return await first()
        except StoreWentAway as exc:
            if not self.outage_told:
                self.outage_told = True
                log.warning(f"the store went away mid-batch; waiting for it to come back to go on ({exc})")
        deadline = time.monotonic() + getattr(self.store, "outage_grace_s", 0.0)
        while True:
            last = time.monotonic() >= deadline
            try:
                result = await again(last)
            except StoreWentAway:
                if last:
                    raise
                await asyncio.sleep(0.05)
                continue
            self.outage_told = False  # the store is back: a later outage is told again
            return result

    async def call(
        self, op: Callable[..., Any], *args: Any, again: Callable[[bool], Any] | None = None, **kw: Any
    ) -> Any:
        """``op`` in the store. When its server goes away while ``op`` runs, ``op`` may have been
        done or not (a commit whose reply was lost): it is run again, or ``again(last)`` instead
        (an operation that must not be done twice), as :meth:`through_outage` says."""
        retry = again or (lambda last: self.in_store(op, *args, last=last, **kw))
        return await self.through_outage(lambda: self.in_store(op, *args, **kw), retry)

    # ------------------------------------------------------------------ claiming

    async def dispatch(self) -> None:
        # One claim round trip takes as many items as there are free places (several at once
        # at the start); after that the items are claimed with the results that free their
        # places, and a claim of its own is made only for places those did not fill (unless the
        # queue ran dry then: it is looked at again once this worker's items are done).
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                claimed, stopping = await self.claim(running)
                for row in claimed:
                    running.add(self.start(row))
                if running:
                    done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    failed = [task for task in done if task.cancelled() or task.exception() is not None]
                    if failed:  # the first error, as a single worker would raise it (each one retrieved)
                        failed[0].result()
                    continue
                if self.ready and not stopping:  # taken up after a lost reply: places are free now
                    continue
                if not await self.wait_for_others():
                    return
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            await asyncio.gather(*self.writes, return_exceptions=True)  # a write under way completes

    async def claim(self, running: set[asyncio.Task[None]]) -> tuple[list[dict[str, Any]], bool]:
        """The items to start now: those waiting for free places, then a claim for the places
        left (none once ``stopping``, nor while the queue was found dry and items are in flight);
        and whether the worker is stopping."""
        stopping = self.stopping()
        if stopping:
            self.ready.clear()  # released with the others when the worker ends
        claimed = self.ready[: max(0, self.concurrency - len(running))]  # more wait for free places
        del self.ready[: len(claimed)]
        self.judging.update(_key(row) for row in claimed)  # known while the claim below is under way
        free = self.concurrency - len(running) - len(claimed)
        if free > 0 and not stopping and not (self.dry and (running or claimed)):
            more = await self.call(self.store.claim_items, self.report.worker, batch_id=self.batch_id, limit=free,
                                   lease_seconds=self.lease_seconds, again=self.claimed_again)  # fmt: skip
            self.dry = len(more) < free
            claimed += self.fresh(more)
            if more:
                observers.items_claimed([r["batch_id"] for r in more])
        return claimed, stopping

    def start(self, row: dict[str, Any]) -> asyncio.Task[None]:
        held = row["batch_id"]
        try:
            self.judges.get(held)
        except CouncilError:
            self.told = True  # the worker stops: nothing to wait for
            raise
        self.report.batches.add(held)
        self.in_flight[held] = self.in_flight.get(held, 0) + 1
        self.judging.add(_key(row))
        return asyncio.create_task(self.judge(row))

    async def wait_for_others(self) -> bool:
        """Nothing in flight and nothing to claim: whether to look again (``follow``, or items held
        by other workers), after a while."""
        if self.stopping():
            return False
        held = await self.others_running()
        if not self.follow and not held:
            return False
        # Others' items finish (or come back) soon: look again sooner than for new ones.
        await asyncio.sleep(WAIT_SECONDS if held else POLL_SECONDS)
        return True

    async def others_running(self) -> bool:
        # Items held by other workers (their claims may pass and come back to this one);
        # this worker's own are finished by its other loops.
        scope = [self.batch_id] if self.batch_id is not None else sorted(self.report.batches)
        held = 0
        for b in scope:
            running = ((await self.call(self.store.batch_status, b)) or {}).get("running", 0)
            held += max(0, running - self.in_flight.get(b, 0))
        if held and not self.told and not self.follow:
            self.told = True
            log.warning(
                f"waiting for {held} item(s) held by another worker: they are recorded when it finishes them, "
                "or return to the queue once their claims' lease passes if it has stopped (the --lease-seconds "
                f"of the process holding them, by default {DEFAULT_LEASE_SECONDS:g} s after its last renewal)"
            )
        return held > 0

    def fresh(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Claimed rows not already being judged or waiting to start (an item taken up after a
        lost reply may come back from a claim that was under way then)."""
        known = self.judging | {_key(r) for r in self.ready}
        return [r for r in rows if _key(r) not in known]

    async def take_up(self, last: bool) -> None:
        """After a write whose reply was lost with the server: the items the store says this
        worker holds and it does not know it claimed wait for free places with those claimed."""
        seen: set[tuple[str, str]] = set()
        self.finishing[id(seen)] = seen
        try:
            mine = await self.in_store(self.store.claims_of, self.report.worker, last=last)
        finally:
            del self.finishing[id(seen)]
        self.ready.extend(r for r in self.fresh(mine) if _key(r) not in seen)

    async def claimed_again(self, last: bool) -> list[dict[str, Any]]:
        await self.take_up(last)
        return []  # places the lost claim did not fill are claimed by the next round

    async def heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            await self.call(self.store.renew_claims, self.report.worker, lease_seconds=self.lease_seconds)

    # ------------------------------------------------------------------ judging

    async def judged(self, item: BatchItem, spec: BatchSpec, clients: Sequence[ModelClient]) -> Any:
        def judging_once(_last: bool = False) -> Awaitable[Any]:
            return judge_item(item, spec.settings, clients, spec.rubrics, store=self.store, keep_text=self.keep_text)

        # The server going away under one of the item's calls (its reservation in a rate or spend
        # budget kept in the store, the call cache): the item is judged again, its calls asked
        # again (as after a crash), once the server is back.
        return await self.through_outage(judging_once, judging_once)

    async def judge(self, row: Mapping[str, Any]) -> None:
        if not tracing.ACTIVE:
            await self.judge_item(row)
            return
        try:
            submitted = self.judges.get(row["batch_id"])[0].traceparent
        except Exception:  # judge_item meets it again, and says why
            submitted = None
        with tracing.batch_item(row["batch_id"], row["item_id"], submitted) as finished:  # its calls' spans go under it
            await self.judge_item(row, finished)

    async def judge_item(self, row: Mapping[str, Any], finished: Callable[[str, Any], None] | None = None) -> None:
        held = row["batch_id"]
        report = self.report
        started = time.monotonic()
        told, outcome = "error", None  # what observers are told, unless the item gets further
        try:
            spec, clients = self.judges.get(held)
            item = BatchItem.model_validate(row["item"])
            texts = [item.prompt, item.a, item.b, item.response, item.reference, item.context]
            with private_scope(keep_text=self.keep_text, texts=texts):
                outcome, calls = await self.judged(item, spec, clients)
                if self.stopping() and (not outcome.success or outcome.partial):
                    # Cut short by the spend cap: not a failure of the item. Its claim goes back to the
                    # queue with the others this worker holds, for a worker under a new cap.
                    report.stopped += 1
                    told = "stopped"
                    return
                ok = outcome.success
                try:
                    await self.record(self.save_of(row, item, outcome, calls))
                except ItemAlreadyRecorded:
                    report.dropped += 1
                    told = "dropped"
                    return
                except ItemRefused as exc:  # its data, not the store: recorded as failed, the batch goes on
                    log.warning(f"batch {held}: item {item.id!r} failed: {exc}")
                    ok = False
                told = "judged" if ok else "failed"
        finally:
            self.in_flight[held] -= 1
            self.judging.discard(_key(row))
            for seen in self.finishing.values():
                seen.add(_key(row))
            observers.item_finished(held, row["item_id"], told, time.monotonic() - started)
            if finished is not None:
                finished(told, outcome)
        report.judged += 1
        report.failed += not ok
        if self.on_item is not None:
            self.on_item(item, ok)

    def save_of(self, row: Mapping[str, Any], item: BatchItem, outcome: Any, calls: Any) -> JudgmentSave:
        """An item's rows, built in its privacy scope; they are written with the others that finish
        within a few milliseconds (``write_finished``)."""
        kind = "compare" if item.mode == "pairwise" else "grade"
        prompt_id = self.hasher.hash(item.prompt) if self.hasher is not None and kind == "compare" else None
        return JudgmentSave(kind, outcome, calls, keep_text=self.keep_text, batch_id=row["batch_id"], item=item,
                            item_digest=row["digest"], prompt_id=prompt_id)  # fmt: skip

    # ------------------------------------------------------------------ recording

    # The items that finish within RECORD_HOLD_S of the first of them (or until no other is in
    # flight) are recorded in one transaction, which also claims as many items more
    # (Store.record_and_claim): one commit for all of them, instead of one per item and one per
    # claim. An item counts as judged (``on_item``) only once that transaction has committed.

    async def record(self, save: JudgmentSave) -> None:
        done = asyncio.get_running_loop().create_future()
        self.finished.append((save, done))
        if self.hold and not self.hold[0].done() and not self.others_in_flight():
            self.hold[0].set_result(None)  # the last item in flight has finished: nothing more to wait for
        if len(self.finished) == 1:  # the first since the last record: written once the others have joined it
            # The call-log rows meanwhile go in the same transaction (not one of their own first).
            written = self.store.expect_write()
            task = asyncio.create_task(self.write_finished(written))
            self.writes.add(task)
            task.add_done_callback(self._settled)
            task.add_done_callback(lambda _: written())  # even if cancelled before it ran
        await done

    def _settled(self, task: asyncio.Task[None]) -> None:
        self.writes.discard(task)
        if not task.cancelled():
            task.exception()  # raised to the items waiting on it; retrieved here

    def others_in_flight(self) -> bool:
        return sum(self.in_flight.values()) > len(self.finished)  # the finished ones still count until recorded

    async def held_for_others(self) -> None:
        """Wait up to RECORD_HOLD_S for the other items in flight to finish (``record`` ends the
        wait when the last of them has)."""
        if RECORD_HOLD_S <= 0 or not self.others_in_flight():
            return
        loop = asyncio.get_running_loop()
        over = loop.create_future()
        timer = loop.call_later(RECORD_HOLD_S, lambda: over.done() or over.set_result(None))
        self.hold.append(over)
        try:
            await over
        finally:
            timer.cancel()
            self.hold.remove(over)

    async def write_finished(self, written: Callable[[], None]) -> None:
        """Write the finished items (with a claim for the places they and earlier claims left free)
        in one transaction, and tell each item how its write went."""
        try:
            await self.held_for_others()
        except BaseException as exc:
            _fail(self.finished, exc)
            self.finished.clear()
            raise
        batch = self.finished[:]
        self.finished.clear()
        saves = [save for save, _ in batch]
        # Every place free once these are recorded: theirs, and any an earlier claim left empty.
        free = self.concurrency - (sum(self.in_flight.values()) - len(batch)) - len(self.ready)
        limit = 0 if self.stopping() else max(0, free)
        try:
            results, claimed = await self.call(self.store.record_and_claim, saves, self.report.worker,
                                               batch_id=self.batch_id, limit=limit, lease_seconds=self.lease_seconds,
                                               again=lambda last: self.recorded_again(saves, limit, last))  # fmt: skip
        except BaseException as exc:
            _fail(batch, exc)
            raise
        finally:
            written()
        self.ready.extend(self.fresh(claimed))
        self.dry = len(claimed) < limit
        if claimed:
            observers.items_claimed([r["batch_id"] for r in claimed])
        for (_, done), result in zip(batch, results, strict=True):
            if done.done():
                continue
            if result is None:
                done.set_result(None)
            else:
                done.set_exception(result)

    async def recorded_again(
        self, saves: list[JudgmentSave], limit: int, last: bool
    ) -> tuple[list[ItemAlreadyRecorded | None], list[dict[str, Any]]]:
        # The lost write's runs that are in the store were recorded by it (with its claims, in
        # the same transaction): they are not written twice; the rest are, then the items
        # this worker holds unknown to it are taken up.
        done = await self.in_store(self.store.runs_recorded, [s.outcome.run_id for s in saves], last=last)
        rest = [s for s in saves if s.outcome.run_id not in done]
        results, claimed = await self.in_store(self.store.record_and_claim, rest, self.report.worker,
                                               batch_id=self.batch_id, limit=0 if done else limit,
                                               lease_seconds=self.lease_seconds, last=last)  # fmt: skip
        self.ready.extend(self.fresh(claimed))
        await self.take_up(last)
        them = iter(results)
        return [None if s.outcome.run_id in done else next(them) for s in saves], []


def _fail(waiting: Sequence[Finished], exc: BaseException) -> None:
    for _, done in waiting:
        if not done.done():
            done.set_exception(exc)
