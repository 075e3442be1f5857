"""How a batch worker talks to its store, on SQLite and on a real PostgreSQL: several items
claimed in one round trip, a pooled store's calls off the event loop (with the item's privacy
scope), and still exactly one result per item (docs/benchmark-history.md, section 19)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time

from council.config import ConfigFile, resolve_model
from council.judging.batch import BatchSettings, content_digest, parse_batch
from council.judging.worker import enqueue, run_worker
from council.providers.client import ModelClient
from council.providers.fake import FakeAPI
from council.untrusted.redaction import current_scope


def _queued(store, items: int, api: FakeAPI | None = None):
    judge = ModelClient(resolve_model("fake/j", ConfigFile(), {}, "test"), api or FakeAPI("fake/j"))
    text = "".join(json.dumps({"id": f"p{i}", "prompt": f"Q {i}?", "a": "A.", "b": "B."}) + "\n" for i in range(items))
    enqueue(store, parse_batch(text, "b.jsonl"), batch_id="w", settings=BatchSettings(judges=["fake/j"]),
            judges=[judge], rubrics={}, source="b.jsonl", content_sha256=content_digest(text))  # fmt: skip
    return judge


def _spy(store, name: str, seen: list) -> None:
    real = getattr(store, name)

    def spy(*args, **kwargs):
        result = real(*args, **kwargs)
        seen.append((threading.current_thread() is threading.main_thread(), current_scope(), kwargs, result))
        return result

    setattr(store, name, spy)


async def test_a_worker_fills_its_places_in_one_claim_then_claims_with_the_results_that_free_them(url_store):
    judge = _queued(url_store, 10)
    claims: list = []
    writes: list = []
    _spy(url_store, "claim_items", claims)
    _spy(url_store, "record_and_claim", writes)
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=4,
                              keep_judges=[judge])  # fmt: skip
    assert report.judged == 10 and url_store.batch_status("w")["done"] == 10
    [(_, _, first, taken), *_] = claims
    assert first["limit"] == 4 and len(taken) == 4  # one round trip fills every place
    # Then each transaction recording finished items claims as many more: a claim of its own only
    # at the start and once the queue is empty (to see whether the worker is done).
    assert len(claims) <= 2, claims
    claimed = [r["item_id"] for *_, rows in claims for r in rows]
    claimed += [r["item_id"] for *_, (_, rows) in writes for r in rows]
    assert sorted(claimed) == sorted(f"p{i}" for i in range(10))  # each item claimed once
    saves = [save for _, _, _, (results, _) in writes for save in results]
    assert len(saves) == 10 and saves == [None] * 10
    assert all(kwargs["limit"] <= 4 for _, _, kwargs, _ in writes)
    if not url_store.threadsafe:  # on the event loop: the items finishing together share a commit
        assert len(writes) < 10


async def test_a_pooled_store_is_called_off_the_event_loop_with_the_items_privacy(url_store):
    judge = _queued(url_store, 3)
    saves: list = []
    _spy(url_store, "record_and_claim", saves)
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=2,
                              keep_text=False, keep_judges=[judge])  # fmt: skip
    assert report.judged == 3
    assert sum(len(results) for *_, (results, _) in saves) == 3
    on_loop = {main for main, *_ in saves}
    assert on_loop == ({False} if url_store.threadsafe else {True})
    # The item's scope (transcripts off, its texts private) holds where the result is written.
    assert all(scope is not None and not scope.keep_text for _, scope, _, _ in saves)
    assert sorted(r["item_id"] for r in url_store.batch_rows("w")) == ["p0", "p1", "p2"]  # one result each


async def test_many_items_in_flight_share_a_few_store_threads(url_store):
    from council.judging.worker import STORE_THREADS

    judge = _queued(url_store, 40)
    threads: set[str] = set()
    real = url_store.record_and_claim

    def save(*args, **kwargs):
        threads.add(threading.current_thread().name)
        return real(*args, **kwargs)

    url_store.record_and_claim = save
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=40,
                              keep_judges=[judge])  # fmt: skip
    assert report.judged == 40 and url_store.batch_status("w")["done"] == 40
    # Never more threads than the pool has connections to spare (calls queue for a thread, not a connection).
    assert 1 <= len(threads) <= (STORE_THREADS if url_store.threadsafe else 1)


async def test_items_recorded_together_each_lose_their_own_texts_from_stored_errors(url_store):
    """Transcripts off: an error quoting the item's prompt is stored without it, for every item of a
    commit shared by several (each item's rows are built in its own privacy scope)."""
    from council.errors import ProviderError

    def echo(request):  # a provider whose error quotes the request
        raise ProviderError(f"bad request: {request.messages[-1]['content'][:4000]}", status_code=400)

    judge = ModelClient(resolve_model("fake/j", ConfigFile(), {}, "test"), FakeAPI("fake/j", script=[echo] * 8))
    prompts = [f"Private question number {i} about zebras?" for i in range(4)]
    text = "".join(json.dumps({"id": f"e{i}", "prompt": p, "a": "A.", "b": "B."}) + "\n" for i, p in enumerate(prompts))
    settings = BatchSettings(judges=["fake/j"], max_attempts=1)
    enqueue(url_store, parse_batch(text, "e.jsonl"), batch_id="e", settings=settings, judges=[judge], rubrics={},
            source="e.jsonl", content_sha256=content_digest(text))  # fmt: skip
    writes: list = []
    _spy(url_store, "record_and_claim", writes)
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="e", concurrency=4,
                              keep_text=False, keep_judges=[judge])  # fmt: skip
    assert report.judged == 4 and report.failed == 4
    if not url_store.threadsafe:
        assert any(len(results) > 1 for *_, (results, _) in writes)  # some commit held several items
    stored = []
    for row in url_store.batch_rows("e"):
        stored.append(row["error"] or "")
        stored += [c["error"] or "" for c in url_store.session_calls(row["run_id"])]
    assert stored and all(s for s in stored) and "bad request" in " ".join(stored)
    assert not any(p in s for p in prompts for s in stored)


async def test_items_queued_while_the_worker_runs_fill_every_free_place(url_store):
    """A claim that found fewer items than places does not leave the places empty: the next
    results' transaction claims for every place free then, not only for the items it records."""
    judge = _queued(url_store, 1)
    real = url_store.claim_items
    more = "".join(json.dumps({"id": f"n{i}", "prompt": f"N {i}?", "a": "A.", "b": "B."}) + "\n" for i in range(6))

    def claim(*args, **kwargs):
        rows = real(*args, **kwargs)
        if not url_store.batch_status("w")["queued"] and url_store.batch_status("w")["items"] == 1:
            text = '{"id": "p0", "prompt": "Q 0?", "a": "A.", "b": "B."}\n' + more  # new work arrives
            enqueue(url_store, parse_batch(text, "b.jsonl"), batch_id="w", settings=BatchSettings(judges=["fake/j"]),
                    judges=[judge], rubrics={}, source="b.jsonl", content_sha256=content_digest(text))  # fmt: skip
        return rows

    url_store.claim_items = claim
    writes: list = []
    _spy(url_store, "record_and_claim", writes)
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=4,
                              keep_judges=[judge])  # fmt: skip
    assert report.judged == 7 and url_store.batch_status("w")["done"] == 7
    _, _, first, (_, claimed) = writes[0]
    assert first["limit"] == 4 and len(claimed) == 4  # the one place that freed and the three never filled


class _Counting(FakeAPI):
    """A fake judge that counts the calls under way at once."""

    def __init__(self, latency: float = 0.0) -> None:
        super().__init__("fake/j", latency=latency)
        self.now = self.peak = 0

    async def generate(self, request):
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            return await super().generate(request)
        finally:
            self.now -= 1


async def test_slow_records_never_let_more_items_be_judged_at_once_than_places(url_store):
    api = _Counting(latency=0.01)
    judge = _queued(url_store, 12, api)
    real = url_store.record_and_claim

    def slow(*args, **kwargs):  # a record that takes a while (a database across a network)
        time.sleep(0.02)
        return real(*args, **kwargs)

    url_store.record_and_claim = slow
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=3,
                              keep_judges=[judge])  # fmt: skip
    assert report.judged == 12 and url_store.batch_status("w")["done"] == 12
    assert api.peak == 2 * 3  # two calls an item (the swapped passes), three items at a time, never more
    assert sorted(r["item_id"] for r in url_store.batch_rows("w")) == sorted(f"p{i}" for i in range(12))


class _Staggered(FakeAPI):
    """A fake judge whose replies for item ``pN`` come N turns of the event loop apart (or after
    ``late`` seconds for the items named there): items that finish one after another, not in one turn."""

    def __init__(self, late: dict[str, float] | None = None) -> None:
        super().__init__("fake/j")
        self.late = late or {}

    async def generate(self, request):
        [item] = re.findall(r"Q (\d+)\?", request.messages[-1]["content"])[:1]
        if f"p{item}" in self.late:
            await asyncio.sleep(self.late[f"p{item}"])
        for _ in range(3 * int(item)):
            await asyncio.sleep(0)
        return await super().generate(request)


async def test_items_finishing_turns_apart_are_recorded_in_one_transaction(url_store, monkeypatch):
    """A finished item's record waits (at most ``RECORD_HOLD_S``) for the others in flight, so
    items that finish a few turns apart share a commit; each is still counted only once that
    commit is made (docs/benchmark-history.md, section 46)."""
    from council.judging import worker

    monkeypatch.setattr(worker, "RECORD_HOLD_S", 30.0)  # ample: the test never waits for it
    judge = _queued(url_store, 6, _Staggered())
    writes: list = []
    _spy(url_store, "record_and_claim", writes)
    counted: list[int] = []
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=6,
                              keep_judges=[judge], on_item=lambda *_: counted.append(len(writes)))  # fmt: skip
    assert report.judged == 6 and url_store.batch_status("w")["done"] == 6
    [(_, _, _, (results, _))] = writes  # every item's record in one transaction
    assert results == [None] * 6
    assert counted == [1] * 6  # each counted once that transaction had committed


async def test_a_held_record_waits_no_longer_than_the_last_item_in_flight(url_store, monkeypatch):
    """The hold ends as soon as no other item is in flight: a batch whose last item finishes
    later, or alone, is not kept waiting for the whole hold."""
    from council.judging import worker

    monkeypatch.setattr(worker, "RECORD_HOLD_S", 600.0)  # a hold run to its end would time the test out
    judge = _queued(url_store, 3, _Staggered(late={"p2": 0.2}))
    writes: list = []
    _spy(url_store, "record_and_claim", writes)
    report = await asyncio.wait_for(
        run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=3,
                   keep_judges=[judge]),
        timeout=60,
    )  # fmt: skip
    assert report.judged == 3 and url_store.batch_status("w")["done"] == 3
    assert sum(len(results) for *_, (results, _) in writes) == 3
    assert len(writes) == 1  # p0 and p1 waited for p2, the last in flight
