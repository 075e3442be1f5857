"""How a batch worker talks to its store, on SQLite and on a real PostgreSQL: several items
claimed in one round trip, a pooled store's calls off the event loop (with the item's privacy
scope), and still exactly one result per item (docs/benchmarks.md, section 19)."""

from __future__ import annotations

import json
import threading

from council.config import ConfigFile, resolve_model
from council.judging.batch import BatchSettings, content_digest, parse_batch
from council.judging.worker import enqueue, run_worker
from council.providers.client import ModelClient
from council.providers.fake import FakeAPI
from council.redaction import current_scope


def _queued(store, items: int):
    judge = ModelClient(resolve_model("fake/j", ConfigFile(), {}, "test"), FakeAPI("fake/j"))
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


async def test_a_worker_claims_as_many_items_as_it_has_free_places_at_once(url_store):
    judge = _queued(url_store, 10)
    claims: list = []
    _spy(url_store, "claim_items", claims)
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=4,
                              keep_judges=[judge])  # fmt: skip
    assert report.judged == 10 and url_store.batch_status("w")["done"] == 10
    [(_, _, first, taken), *_] = claims
    assert first["limit"] == 4 and len(taken) == 4  # one round trip fills every place
    assert sum(len(taken) for *_, taken in claims) == 10  # each item claimed once
    assert all(0 < kwargs["limit"] <= 4 for _, _, kwargs, _ in claims)


async def test_a_pooled_store_is_called_off_the_event_loop_with_the_items_privacy(url_store):
    judge = _queued(url_store, 3)
    saves: list = []
    _spy(url_store, "save_judgment", saves)
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=2,
                              keep_text=False, keep_judges=[judge])  # fmt: skip
    assert report.judged == 3 and len(saves) == 3
    on_loop = {main for main, *_ in saves}
    assert on_loop == ({False} if url_store.threadsafe else {True})
    # The item's scope (transcripts off, its texts private) holds where the result is written.
    assert all(scope is not None and not scope.keep_text for _, scope, _, _ in saves)
    assert sorted(r["item_id"] for r in url_store.batch_rows("w")) == ["p0", "p1", "p2"]  # one result each


async def test_many_items_in_flight_share_a_few_store_threads(url_store):
    from council.judging.worker import STORE_THREADS

    judge = _queued(url_store, 40)
    threads: set[str] = set()
    real = url_store.save_judgment

    def save(*args, **kwargs):
        threads.add(threading.current_thread().name)
        return real(*args, **kwargs)

    url_store.save_judgment = save
    report = await run_worker(url_store, judges_for=lambda _id, _spec: [judge], batch_id="w", concurrency=40,
                              keep_judges=[judge])  # fmt: skip
    assert report.judged == 40 and url_store.batch_status("w")["done"] == 40
    # Never more threads than the pool has connections to spare (calls queue for a thread, not a connection).
    assert 1 <= len(threads) <= (STORE_THREADS if url_store.threadsafe else 1)
