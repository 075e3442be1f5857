"""The distributed batch: a batch's items queued in the store, judged by any number of workers.

``enqueue`` stores the items and what judging them needs (the batch's *spec*: its settings,
each judge's model spec without secrets or server address, the rubrics' contents), so a
worker on another machine needs only the store, its own keys and, for a judge reached
through an ``api_base``, a config naming it. ``run_worker`` claims items under a lease
(council.storage.queue), judges them and records each with its result in one
transaction; a heartbeat keeps its leases alive. A worker killed mid-item loses nothing:
its items return to the queue when their leases pass, and another worker judges them
again (their calls are then made twice; the item is recorded once).
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from council.errors import ConfigError, CouncilError, CouncilFailure, ItemAlreadyRecorded, UsageError
from council.judging.batch_items import BatchItem, BatchSettings, item_digest, judge_item
from council.judging.schemas import Rubric
from council.logs import get_logger
from council.providers.client import ModelClient
from council.redaction import private_scope, redact
from council.storage import Store

log = get_logger("council.judging")

#: A claim outlives the worker's last heartbeat by this long; heartbeats come every third of it.
DEFAULT_LEASE_SECONDS = 60.0
#: How often an idle worker looks for new items (``--follow``, or others' items still running).
POLL_SECONDS = 1.0


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
) -> dict[str, int]:
    """Queue the items of a batch file under ``batch_id`` (matched with those queued before by
    id and content); how many are ``new, changed, unchanged, retried, removed``."""
    return store.enqueue_batch(
        batch_id,
        source=source,
        content_sha256=content_sha256,
        settings=settings.model_dump(mode="json"),
        spec=batch_spec(settings, judges, rubrics).model_dump(mode="json"),
        items=[
            {"item_id": i.id, "position": i.line, "digest": item_digest(i), "item": i.model_dump(mode="json")}
            for i in items
        ],
    )


def judges_from_spec(spec: BatchSpec, config: Any, env: Mapping[str, str] | None = None) -> list[ModelClient]:
    """The batch's judges on this machine: an alias the worker's config defines is taken from
    it (its own server address and key variable), any other from the stored spec; keys come
    from this machine's environment."""
    from council.config import ConfigFile, resolve_model
    from council.config.schema import ModelSpec
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
            stored = ConfigFile(models={judge.id: ModelSpec.model_validate(judge.spec)})
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
            self.made[batch_id] = (spec, self.judges_for(batch_id, spec))
        return self.made[batch_id]

    async def aclose(self, keep: Sequence[ModelClient] = ()) -> None:
        for _, clients in self.made.values():
            for client in clients:
                if client not in keep:
                    await client.aclose()


async def run_worker(
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
) -> WorkerReport:
    """Claim and judge items (of ``batch_id``, else of any batch) ``concurrency`` at a time,
    until none is queued and none is running elsewhere (a dead worker's items come back when
    their lease passes); with ``follow``, keep waiting for new ones. Once ``stop()`` is true
    (a spend cap reached) no new item is claimed, and an item the cap cut short is not recorded:
    the rest stay queued for a later worker. The database going away
    is a ``CouncilFailure``: the items this worker held return to the queue with its leases."""
    report = WorkerReport(worker=worker or worker_name())
    judges = _Judges(store, judges_for)
    store_down = False

    def store_op(op: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return op(*args, **kwargs)
        except (ItemAlreadyRecorded, UsageError):
            raise
        except Exception as exc:
            # A store operation fails with CouncilFailure only when its database does (a backend
            # may say so itself); anything else that is not the driver's is a bug.
            if not isinstance(exc, CouncilFailure) and not _store_failed(exc):
                raise
            nonlocal store_down
            store_down = True
            raise CouncilFailure(
                f"the store stopped answering mid-batch ({' '.join(redact(str(exc)).split())[:300]}); "
                "the items this worker held return to the queue when their lease passes: run a worker again"
            ) from None

    in_flight: dict[str, int] = {}

    told: list[bool] = []

    def others_running() -> bool:
        # Items held by other workers (their claims may pass and come back to this one);
        # this worker's own are finished by its other loops.
        scope = [batch_id] if batch_id is not None else sorted(report.batches)
        held = sum(
            max(0, (store_op(store.batch_status, b) or {}).get("running", 0) - in_flight.get(b, 0)) for b in scope
        )
        if held and not told and not follow:
            told.append(True)
            log.warning(
                f"waiting for {held} item(s) held by another worker: they are recorded when it finishes them, "
                f"or return to the queue within {lease_seconds:g} s if it has stopped"
            )
        return held > 0

    async def judge(row: Mapping[str, Any]) -> None:
        spec, clients = judges.get(row["batch_id"])
        item = BatchItem.model_validate(row["item"])
        texts = [item.prompt, item.a, item.b, item.response, item.reference, item.context]
        with private_scope(keep_text=keep_text, texts=texts):
            outcome, calls = await judge_item(item, spec.settings, clients, spec.rubrics, store=store,
                                               keep_text=keep_text)  # fmt: skip
            if stop is not None and stop() and (not outcome.success or outcome.partial):
                # Cut short by the spend cap: not a failure of the item. Its claim goes back to the
                # queue with the others this worker holds, for a worker under a new cap.
                report.stopped += 1
                return
            kind = "compare" if item.mode == "pairwise" else "grade"
            try:
                store_op(store.save_judgment, kind, outcome, calls, keep_text=keep_text, batch_id=row["batch_id"],
                         item=item, item_digest=row["digest"])  # fmt: skip
            except ItemAlreadyRecorded:
                report.dropped += 1
                return
        report.judged += 1
        report.failed += not outcome.success
        if on_item is not None:
            on_item(item, outcome.success)

    async def loop() -> None:
        while True:
            if stop is not None and stop():
                return
            claimed = store_op(store.claim_items, report.worker, batch_id=batch_id, lease_seconds=lease_seconds)
            if claimed:
                held = claimed[0]["batch_id"]
                try:
                    judges.get(held)
                except CouncilError:
                    told.append(True)  # the worker stops: nothing to wait for
                    raise
                report.batches.add(held)
                in_flight[held] = in_flight.get(held, 0) + 1
                try:
                    await judge(claimed[0])
                finally:
                    in_flight[held] -= 1
                continue
            if not follow and not others_running():
                return
            await asyncio.sleep(POLL_SECONDS)

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(lease_seconds / 3)
            store_op(store.renew_claims, report.worker, lease_seconds=lease_seconds)

    async def loops() -> None:
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(concurrency):
                    group.create_task(loop())
        except ExceptionGroup as failed:  # the first error, as a single worker would raise it
            raise failed.exceptions[0] from None

    if batch_id is not None:  # a judge this machine cannot reach fails here, before any claim
        store_op(judges.get, batch_id)
    work = asyncio.create_task(loops())
    beat = asyncio.create_task(heartbeat())
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
        if not store_down:  # else the leases pass instead
            store.release_claims(report.worker)
        await judges.aclose(keep_judges)
    return report
